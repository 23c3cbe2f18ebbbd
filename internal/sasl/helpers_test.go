package sasl

import (
	"context"
	"errors"
	"sync"
	"testing"

	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
)

// memCredentials is a Credentials of a map, as the metadata image will
// be.
type memCredentials struct {
	mu    sync.Mutex
	creds map[[2]string]ScramCredential // {user, mechanism}
}

func (m *memCredentials) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.creds[[2]string{user, mechanism}]
	return c, ok
}

func (m *memCredentials) put(user string, c ScramCredential) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creds == nil {
		m.creds = make(map[[2]string]ScramCredential)
	}
	m.creds[[2]string{user, c.Mechanism}] = c
}

// addUser gives user a credential for password under each mechanism.
func (m *memCredentials) addUser(t testing.TB, user, password string, mechanisms ...string) {
	t.Helper()
	for _, mech := range mechanisms {
		c, err := NewCredential(mech, password, DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		m.put(user, c)
	}
}

// testUsers is the credentials most tests use: alice has both SCRAM
// credentials, bob only SCRAM-SHA-256's, "a,b=c" (a name that needs
// saslname escaping) SCRAM-SHA-512's.
func testUsers(t testing.TB) *memCredentials {
	t.Helper()
	creds := &memCredentials{}
	creds.addUser(t, "alice", "alice-secret", ScramSHA256, ScramSHA512)
	creds.addUser(t, "bob", "bob-secret", ScramSHA256)
	creds.addUser(t, "a,b=c", "odd-secret", ScramSHA512)
	return creds
}

// newTestServer is a Server with PLAIN and both SCRAMs over creds, and
// OAUTHBEARER if v is not nil.
func newTestServer(t testing.TB, creds Credentials, v *Validator) *Server {
	t.Helper()
	cfg := Config{Mechanisms: []string{ScramSHA512, ScramSHA256, Plain}, Credentials: creds}
	if v != nil {
		cfg.Mechanisms = append(cfg.Mechanisms, OAuthBearer)
		cfg.Validator = v
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t testing.TB, s *Server, mechanism string) *Exchange {
	t.Helper()
	x, err := s.Start(mechanism)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// transcript is what happened when a client drove an exchange.
type transcript struct {
	// clientMessages are what the client sent, in order.
	clientMessages [][]byte
	serverErr      error
	serverDone     bool
	clientErr      error
	clientDone     bool
}

// drive runs an exchange between x and a franz-go client mechanism, the
// way kgo does: send the client's message, give the reply to the
// session's Challenge, send what it returns, until either side is done
// or fails. tamper, if set, may replace the client's i-th message.
func drive(t testing.TB, x *Exchange, m kafkasasl.Mechanism, tamper func(i int, msg []byte) []byte) transcript {
	t.Helper()
	session, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatalf("%s client: %v", m.Name(), err)
	}
	var tr transcript
	for i := 0; ; i++ {
		if tamper != nil {
			msg = tamper(i, msg)
		}
		tr.clientMessages = append(tr.clientMessages, msg)
		reply, done, err := x.Step(msg)
		if err != nil {
			tr.serverErr = err
			checkFailed(t, x, err)
			return tr
		}
		tr.serverDone = done
		clientDone, next, err := session.Challenge(reply)
		if err != nil {
			tr.clientErr = err
			return tr
		}
		tr.clientDone = clientDone
		if done || clientDone {
			if done != clientDone {
				t.Fatalf("%s: server done %v, client done %v", m.Name(), done, clientDone)
			}
			if next != nil {
				t.Fatalf("%s: client has a message after done: %q", m.Name(), next)
			}
			return tr
		}
		msg = next
	}
}

// checkFailed checks what every failure looks like: an *Error of a
// sentinel Kind with a Message, no principal, and the same error again
// on the next Step.
func checkFailed(t testing.TB, x *Exchange, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *Error", err, err)
	}
	if e.Message == "" || e.Reason == "" {
		t.Fatalf("error %+v lacks a Message or a Reason", e)
	}
	if x.Principal() != "" || x.User() != "" || !x.Expiry().IsZero() {
		t.Fatalf("failed exchange has principal %q expiry %v", x.Principal(), x.Expiry())
	}
	reply, done, again := x.Step([]byte("n,,n=alice,r=x"))
	if again != err || done || reply != nil {
		t.Fatalf("failed exchange stepped again: %q %v %v, want the error %v", reply, done, again, err)
	}
}

// wantKind checks err is an *Error of kind and returns it.
func wantKind(t testing.TB, err, kind error) *Error {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v (%T), want %v", err, err, kind)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	return e
}
