package kafkaserver

// The audit events of the Kafka listeners (audit.go): denials, SASL
// and TLS authentications, as a recorder fake receives them. The events
// carry no time (the wanted ones have none either): the recorder's
// clock stamps them.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/sasl"
)

// auditRecorder is an audit.Recorder that keeps what it is given.
type auditRecorder struct {
	mu     sync.Mutex
	events []audit.Event
	more   chan struct{} // closed and replaced at each Record
}

func newAuditRecorder() *auditRecorder { return &auditRecorder{more: make(chan struct{})} }

func (r *auditRecorder) Record(e audit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.more)
	r.more = make(chan struct{})
}

// take returns the events so far and forgets them.
func (r *auditRecorder) take() []audit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// waitFor waits (at most 5 s) until the events so far hold n that match,
// for events recorded on a connection's goroutine while the test's
// client is not waiting for an answer (a refused TLS handshake).
func (r *auditRecorder) waitFor(t *testing.T, n int, match func(audit.Event) bool) []audit.Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		var got []audit.Event
		for _, e := range r.events {
			if match(e) {
				got = append(got, e)
			}
		}
		more := r.more
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%d matching audit events after 5 s, want %d: %+v", len(got), n, got)
		}
	}
}

func withAudit(r audit.Recorder) harnessOpt {
	return withConfig(func(c *Config) { c.Audit = r })
}

// A denial of something a client asked for is recorded with who, from
// where, on which listener, in which API, what on which resource and why;
// the quiet checks that filter an answer record nothing.
func TestAuditAuthzDenials(t *testing.T) {
	rec := newAuditRecorder()
	h := aclHarness(t, withAudit(rec))
	h.ctrl.addTopic("a-1", 1)
	h.ctrl.addTopic("a-deny", 1)
	h.ctrl.addTopic("b-1", 1)
	h.setBindings(t, aliceBindings()...)
	alice := h.as(t, "alice")
	client := alice.nc.LocalAddr().String()
	rec.take() // the login

	got := metadataOf(t, alice, false)
	if _, listed := got["b-1"]; listed || len(got) == 0 {
		t.Fatalf("alice's Metadata of every topic: %v, want some topics and not b-1", got)
	}
	if ev := rec.take(); len(ev) != 0 {
		t.Errorf("a Metadata of every topic, quietly filtered, recorded %+v", ev)
	}

	produceTo(t, alice, "a-1", "b-1", "a-deny")
	base := audit.Event{Kind: audit.KindAuthorization, Result: audit.ResultDenied, Principal: "User:alice",
		Client: client, Listener: "SASL_PLAINTEXT", API: "Produce", Operation: "WRITE", ResourceType: "TOPIC"}
	b1, deny := base, base
	b1.Resource, b1.Rule = "b-1", acl.RuleNoACLFound.String() // no binding names b-1
	deny.Resource, deny.Rule = "a-deny", acl.RuleDeny.String()
	events := rec.take()
	if len(events) != 2 || !(events[0] == b1 && events[1] == deny || events[0] == deny && events[1] == b1) {
		t.Errorf("events\n%+v\nwant\n%+v\n%+v", events, b1, deny)
	}
}

// plainAttempt runs a PLAIN exchange on c and returns its error code.
func plainAttempt(t *testing.T, c *rawConn, user, pass string) int16 {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.Plain
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pass)
	return c.roundTrip(auth).(*kmsg.SASLAuthenticateResponse).ErrorCode
}

// scramAttempt runs a SCRAM-SHA-512 exchange on c, stopping at the first
// error, and returns its code.
func scramAttempt(t *testing.T, c *rawConn, user, pass string) int16 {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA512
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	session, msg, err := kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 2, msg
		resp := c.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return 0
		}
		msg = next
	}
}

// Each SASL login is recorded, success and failure, with the mechanism;
// a failure with the reason the client is not told, which names the
// user but never the password.
func TestAuditSASL(t *testing.T) {
	rec := newAuditRecorder()
	h := saslHarness(t, withAudit(rec))
	type attempt struct {
		name      string
		mechanism string
		user      string
		pass      string
		ok        bool
		reason    string // a part of the reason
	}
	for _, a := range []attempt{
		{"SCRAM", sasl.ScramSHA512, "alice", "alice-secret", true, ""},
		{"SCRAM wrong password", sasl.ScramSHA512, "alice", "guess-one", false, `user "alice"`},
		{"SCRAM unknown user", sasl.ScramSHA512, "mallory", "guess-two", false, `user "mallory"`},
		{"PLAIN", sasl.Plain, "alice", "alice-secret", true, ""},
		{"PLAIN wrong password", sasl.Plain, "alice", "guess-three", false, `wrong password for user "alice"`},
		{"PLAIN unknown user", sasl.Plain, "mallory", "guess-four", false, `unknown user "mallory"`},
	} {
		c := h.dialFor(t)
		var code int16
		if a.mechanism == sasl.Plain {
			code = plainAttempt(t, c, a.user, a.pass)
		} else {
			code = scramAttempt(t, c, a.user, a.pass)
		}
		if (code == 0) != a.ok {
			t.Fatalf("%s: error %d", a.name, code)
		}
		got := rec.take()
		if len(got) != 1 {
			t.Errorf("%s: events %+v, want one", a.name, got)
			continue
		}
		e := got[0]
		want := audit.Event{Kind: audit.KindAuthentication, Result: audit.ResultSuccess, Principal: "User:" + a.user,
			Client: c.nc.LocalAddr().String(), Listener: "SASL_PLAINTEXT", Mechanism: a.mechanism}
		if !a.ok {
			want.Result, want.Principal, want.Reason = audit.ResultFailure, "", e.Reason
		}
		if e != want {
			t.Errorf("%s: event\n%+v\nwant\n%+v", a.name, e, want)
		}
		if !strings.Contains(e.Reason, a.reason) || (!a.ok && strings.Contains(e.Reason, a.pass)) {
			t.Errorf("%s: reason %q, want one naming %q and not the password", a.name, e.Reason, a.reason)
		}
	}
}

// A malformed OAUTHBEARER message may carry a token: its audit reason
// says only that it was malformed. Other reasons are the sasl package's.
func TestSASLAuditReason(t *testing.T) {
	token := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2VjcmV0"
	malformed := &sasl.Error{Kind: sasl.ErrMalformedMessage, Message: "m",
		Reason: fmt.Sprintf("OAUTHBEARER: kvpair %q is not key=value", "auth=Bearer "+token+"\x00")}
	if r := saslAuditReason(sasl.OAuthBearer, malformed); strings.Contains(r, token) || !strings.Contains(r, "malformed") {
		t.Errorf("malformed OAUTHBEARER: reason %q", r)
	}
	wrapped := fmt.Errorf("step: %w", &sasl.Error{Kind: sasl.ErrAuthenticationFailed, Message: "m", Reason: `SCRAM-SHA-512: user "bob": challenge proof invalid`})
	if r := saslAuditReason(sasl.ScramSHA512, wrapped); r != `SCRAM-SHA-512: user "bob": challenge proof invalid` {
		t.Errorf("SCRAM failure: reason %q", r)
	}
	if r := saslAuditReason(sasl.Plain, &sasl.Error{Kind: sasl.ErrIllegalState, Message: "client message"}); r != "client message" {
		t.Errorf("a sasl.Error without a reason: %q", r)
	}
	if r := saslAuditReason(sasl.Plain, errors.New("other")); r != "other" {
		t.Errorf("another error: %q", r)
	}
}

// On an SSL listener a client certificate that names the principal is
// recorded as an authentication with mechanism SSL, and a refused
// handshake as a failure.
func TestAuditSSL(t *testing.T) {
	pki := newTestPKI(t)
	rec := newAuditRecorder()
	h := newWireHarness(t, withListener(pki.sslListener(tls.RequireAndVerifyClientCert)), withAudit(rec))

	c, err := h.dialTLS(&tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	c.roundTrip(apiVersionsReq(3))
	want := audit.Event{Kind: audit.KindAuthentication, Result: audit.ResultSuccess, Principal: "User:alice",
		Client: c.nc.LocalAddr().String(), Listener: "SSL", Mechanism: "SSL"}
	if got := rec.take(); len(got) != 1 || got[0] != want {
		t.Errorf("events %+v, want %+v", got, want)
	}

	bad, err := h.dialTLS(&tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.unmapped}, MinVersion: tls.VersionTLS12})
	if err == nil {
		bad.send(apiVersionsReq(3))
		bad.readFrame() // TLS 1.3: the refusal arrives on the first read
	}
	got := rec.waitFor(t, 1, func(e audit.Event) bool { return e.Result == audit.ResultFailure })
	if e := got[0]; e.Mechanism != "SSL" || e.Listener != "SSL" || e.Principal != "" || !strings.Contains(e.Reason, "CN=refused") {
		t.Errorf("unmapped certificate: %+v, want an SSL failure naming the subject", e)
	}
}

// Without a recorder the same denials and failures are answered as
// before.
func TestAuditNilRecorder(t *testing.T) {
	h := aclHarness(t)
	h.ctrl.addTopic("b-1", 1)
	if code := produceTo(t, h.as(t, "alice"), "b-1")["b-1"]; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("produce without ACLs: error %d", code)
	}
	if code := scramAttempt(t, h.dialFor(t), "alice", "wrong"); code != kerr.SaslAuthenticationFailed.Code {
		t.Errorf("wrong password: error %d", code)
	}
}
