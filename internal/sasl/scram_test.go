package sasl

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// replaceField replaces the value of key (as "key=value" between commas)
// in a SCRAM message.
func replaceField(msg []byte, key string, f func(v string) string) []byte {
	fields := strings.Split(string(msg), ",")
	for i, kv := range fields {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			fields[i] = key + "=" + f(v)
		}
	}
	return []byte(strings.Join(fields, ","))
}

// Reference: RFC 5802 sections 5 and 7, Kafka's ScramSaslServer.
func TestScram(t *testing.T) {
	creds := testUsers(t)
	s := newTestServer(t, creds, nil)
	onFinal := func(f func(msg []byte) []byte) func(int, []byte) []byte {
		return func(i int, msg []byte) []byte {
			if i == 1 {
				return f(msg)
			}
			return msg
		}
	}
	onFirst := func(f func(msg []byte) []byte) func(int, []byte) []byte {
		return func(i int, msg []byte) []byte {
			if i == 0 {
				return f(msg)
			}
			return msg
		}
	}
	const invalid = "" // the generic message, filled per mechanism
	for _, tc := range []struct {
		name   string
		mechs  []string
		user   string
		pass   string
		zid    string
		token  bool
		tamper func(int, []byte) []byte
		// kind is nil for a success; failedAt is the index of the client
		// message that failed.
		kind     error
		failedAt int
		message  string
	}{
		{name: "right password", user: "alice", pass: "alice-secret"},
		{name: "authzid is the user", user: "alice", pass: "alice-secret", zid: "alice"},
		{name: "saslname escaping", mechs: []string{ScramSHA512}, user: "a,b=c", pass: "odd-secret"},
		{name: "wrong password", user: "alice", pass: "alice-secreT", kind: ErrAuthenticationFailed, failedAt: 1},
		{name: "unknown user", user: "mallory", pass: "x", kind: ErrAuthenticationFailed, failedAt: 1},
		{name: "no credential for this mechanism", mechs: []string{ScramSHA512}, user: "bob", pass: "bob-secret", kind: ErrAuthenticationFailed, failedAt: 1},
		{name: "authzid of another user", user: "alice", pass: "alice-secret", zid: "bob", kind: ErrAuthenticationFailed, message: msgAuthzidMismatch},
		{name: "tokenauth refused", user: "alice", pass: "alice-secret", token: true, kind: ErrAuthenticationFailed},
		{name: "tokenauth=TRUE refused", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed,
			tamper: onFirst(func(m []byte) []byte { return append(m, ",tokenauth=TRUE"...) })},
		{name: "wrong nonce", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte {
				return replaceField(m, "r", func(v string) string { return v[:len(v)-1] + "A" })
			})},
		{name: "client nonce only", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte { return replaceField(m, "r", func(v string) string { return v[:20] }) })},
		{name: "wrong proof", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte {
				return replaceField(m, "p", func(v string) string {
					p, _ := base64.StdEncoding.DecodeString(v)
					p[0] ^= 1
					return base64.StdEncoding.EncodeToString(p)
				})
			})},
		{name: "short proof", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte { return replaceField(m, "p", func(string) string { return "AAAA" }) })},
		{name: "channel binding mismatch", user: "alice", pass: "alice-secret", kind: ErrAuthenticationFailed, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte {
				return replaceField(m, "c", func(string) string { return base64.StdEncoding.EncodeToString([]byte("n,a=bob,")) })
			})},
		{name: "garbage first", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func([]byte) []byte { return []byte("hello") })},
		{name: "empty first", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func([]byte) []byte { return []byte{} })},
		{name: "not UTF-8", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func([]byte) []byte { return []byte("n,,n=\xff,r=abc") })},
		{name: "channel binding requested", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func(m []byte) []byte { return append([]byte("p=tls-unique"), m[1:]...) })},
		{name: "bad saslname escape", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func([]byte) []byte { return []byte("n,,n=a=2Xb,r=abc") })},
		{name: "mandatory extension", kind: ErrMalformedMessage, user: "alice", pass: "x",
			tamper: onFirst(func([]byte) []byte { return []byte("n,,m=ext,n=alice,r=abc") })},
		{name: "garbage final", user: "alice", pass: "alice-secret", kind: ErrMalformedMessage, failedAt: 1,
			tamper: onFinal(func([]byte) []byte { return []byte("hello") })},
		{name: "empty final", user: "alice", pass: "alice-secret", kind: ErrMalformedMessage, failedAt: 1,
			tamper: onFinal(func([]byte) []byte { return nil })},
		{name: "first message again", user: "alice", pass: "alice-secret", kind: ErrMalformedMessage, failedAt: 1,
			tamper: onFinal(func([]byte) []byte { return []byte("n,,n=alice,r=abc") })},
		{name: "proof not base64", user: "alice", pass: "alice-secret", kind: ErrMalformedMessage, failedAt: 1,
			tamper: onFinal(func(m []byte) []byte { return replaceField(m, "p", func(string) string { return "!!" }) })},
	} {
		mechs := tc.mechs
		if mechs == nil {
			mechs = []string{ScramSHA256, ScramSHA512}
		}
		for _, mech := range mechs {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				client := kscram.Auth{User: tc.user, Pass: tc.pass, Zid: tc.zid, IsToken: tc.token}
				x := start(t, s, mech)
				var tr transcript
				if mech == ScramSHA256 {
					tr = drive(t, x, client.AsSha256Mechanism(), tc.tamper)
				} else {
					tr = drive(t, x, client.AsSha512Mechanism(), tc.tamper)
				}
				if tc.kind == nil {
					if tr.serverErr != nil || tr.clientErr != nil || !tr.serverDone {
						t.Fatalf("server %v, client %v, done %v", tr.serverErr, tr.clientErr, tr.serverDone)
					}
					if x.User() != tc.user || x.Principal() != "User:"+tc.user || !x.Expiry().IsZero() {
						t.Fatalf("user %q principal %q expiry %v", x.User(), x.Principal(), x.Expiry())
					}
					return
				}
				e := wantKind(t, tr.serverErr, tc.kind)
				if got := len(tr.clientMessages) - 1; got != tc.failedAt {
					t.Fatalf("failed at client message %d, want %d (%s)", got, tc.failedAt, e.Reason)
				}
				want := tc.message
				if want == invalid {
					want = msgInvalidCredentials(mech)
				}
				if e.Message != want {
					t.Fatalf("message %q, want %q", e.Message, want)
				}
			})
		}
	}
}

// Extensions other than tokenauth=true are ignored, as Kafka ignores
// them. (Only the first step is checked: franz-go cannot send an
// extension but tokenauth, and the proof covers the whole first message.)
func TestScramExtensionsIgnored(t *testing.T) {
	s := newTestServer(t, testUsers(t), nil)
	for _, ext := range []string{",tokenauth=false", ",foo=bar", ",foo=bar,tokenauth=no"} {
		x := start(t, s, ScramSHA512)
		reply, done, err := x.Step([]byte("n,,n=alice,r=abc" + ext))
		if err != nil || done || !serverFirstRE.Match(reply) {
			t.Fatalf("extension %q: %q %v %v", ext, reply, done, err)
		}
	}
}

var serverFirstRE = regexp.MustCompile(`^r=([^,]+),s=([A-Za-z0-9+/=]+),i=(\d+)$`)

// An unknown user's exchange is a wrong password's: the server-first
// message has the same shape, the salt is the same every time, and the
// failure is at the proof with the same words. Kafka fails an unknown
// user at the first message ("Invalid user credentials"), which tells a
// guesser the name does not exist; Fjord does not.
func TestScramUnknownUserLooksLikeWrongPassword(t *testing.T) {
	s := newTestServer(t, testUsers(t), nil)
	serverFirst := func(user string) string {
		x := start(t, s, ScramSHA512)
		reply, done, err := x.Step([]byte("n,,n=" + user + ",r=clientnonce"))
		if err != nil || done {
			t.Fatalf("first step for %s: %v %v", user, done, err)
		}
		m := serverFirstRE.FindStringSubmatch(string(reply))
		if m == nil || !strings.HasPrefix(m[1], "clientnonce") || len(m[1]) <= len("clientnonce") {
			t.Fatalf("server-first %q", reply)
		}
		return m[2] + " i=" + m[3]
	}
	real, unknown := serverFirst("alice"), serverFirst("mallory")
	if len(real) != len(unknown) || !strings.HasSuffix(unknown, " i=4096") {
		t.Fatalf("real user %q, unknown user %q", real, unknown)
	}
	if serverFirst("mallory") != unknown {
		t.Fatal("unknown user's salt changes between attempts")
	}

	var messages []string
	for _, user := range []string{"alice", "mallory"} {
		x := start(t, s, ScramSHA512)
		tr := drive(t, x, kscram.Auth{User: user, Pass: "wrong"}.AsSha512Mechanism(), nil)
		e := wantKind(t, tr.serverErr, ErrAuthenticationFailed)
		messages = append(messages, e.Message)
		if user == "mallory" && !strings.Contains(e.Reason, "unknown user") {
			t.Fatalf("reason %q does not tell the operator the user is unknown", e.Reason)
		}
	}
	if messages[0] != messages[1] {
		t.Fatalf("wrong password says %q, unknown user %q", messages[0], messages[1])
	}
}

// A recorded client-final message does not authenticate a new exchange:
// the server's nonce differs each time (RFC 5802 section 9).
func TestScramReplay(t *testing.T) {
	s := newTestServer(t, testUsers(t), nil)
	client := kscram.Auth{User: "alice", Pass: "alice-secret", Nonce: []byte("fixed client nonce")}.AsSha512Mechanism()
	tr := drive(t, start(t, s, ScramSHA512), client, nil)
	if tr.serverErr != nil || !tr.serverDone {
		t.Fatalf("recording: %v", tr.serverErr)
	}
	x := start(t, s, ScramSHA512)
	if _, _, err := x.Step(tr.clientMessages[0]); err != nil {
		t.Fatal(err)
	}
	_, _, err := x.Step(tr.clientMessages[1])
	wantKind(t, err, ErrAuthenticationFailed)
	checkFailed(t, x, err)
}

// With the server nonce fixed (the test hook), a transcript replays: the
// fuzz target and the benchmark rely on it.
func TestScramFixedNonceTranscript(t *testing.T) {
	s := newTestServer(t, testUsers(t), nil)
	s.scramNonce = func() string { return "fixedservernonce" }
	first, final := scramTranscript(t, s, ScramSHA512, "alice", "alice-secret")
	for range 2 {
		x := start(t, s, ScramSHA512)
		if _, _, err := x.Step(first); err != nil {
			t.Fatal(err)
		}
		reply, done, err := x.Step(final)
		if err != nil || !done || !bytes.HasPrefix(reply, []byte("v=")) {
			t.Fatalf("replay: %q %v %v", reply, done, err)
		}
	}
}

// scramTranscript returns a successful exchange's two client messages,
// made by franz-go with a fixed client nonce. REQUIRES: s.scramNonce set,
// so that the transcript replays.
func scramTranscript(t testing.TB, s *Server, mechanism, user, pass string) (first, final []byte) {
	t.Helper()
	a := kscram.Auth{User: user, Pass: pass, Nonce: []byte("fixed client nonce")}
	m := a.AsSha512Mechanism()
	if mechanism == ScramSHA256 {
		m = a.AsSha256Mechanism()
	}
	tr := drive(t, start(t, s, mechanism), m, nil)
	if tr.serverErr != nil || !tr.serverDone {
		t.Fatalf("transcript: %v", tr.serverErr)
	}
	return tr.clientMessages[0], tr.clientMessages[1]
}

func TestTokenAuthRequested(t *testing.T) {
	for msg, want := range map[string]bool{
		"n,,n=alice,r=abc":                      false,
		"n,,n=alice,r=abc,tokenauth=true":       true,
		"n,,n=alice,r=abc,x=1,tokenauth=True":   true,
		"n,,n=alice,r=abc,tokenauth=false":      false,
		"n,,n=tokenauth=true,r=abc":             false, // a name, not an extension
		"n,a=tokenauth=true,n=alice,r=abc":      false,
		"n,,n=alice,r=abc,tokenauth":            false,
		"n,,n=alice,r=abc,tokenauthx=true,y=no": false,
	} {
		if got := tokenAuthRequested(msg); got != want {
			t.Errorf("tokenAuthRequested(%q) = %v, want %v", msg, got, want)
		}
	}
}

// BenchmarkScramSHA512Exchange: "server" is the broker's cost of one
// exchange (a recorded transcript replayed: no PBKDF2 on this side, two
// HMACs and a hash); "client+server" adds franz-go's client, whose
// PBKDF2 of 4096 rounds is most of it.
func BenchmarkScramSHA512Exchange(b *testing.B) {
	creds := &memCredentials{}
	creds.addUser(b, "alice", "alice-secret", ScramSHA512)
	b.Run("server", func(b *testing.B) {
		s := newTestServer(b, creds, nil)
		s.scramNonce = func() string { return "fixedservernonce" }
		first, final := scramTranscript(b, s, ScramSHA512, "alice", "alice-secret")
		for b.Loop() {
			x, _ := s.Start(ScramSHA512)
			if _, _, err := x.Step(first); err != nil {
				b.Fatal(err)
			}
			if _, done, err := x.Step(final); err != nil || !done {
				b.Fatal(err)
			}
		}
	})
	b.Run("client+server", func(b *testing.B) {
		s := newTestServer(b, creds, nil)
		client := kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
		for b.Loop() {
			x, _ := s.Start(ScramSHA512)
			if tr := drive(b, x, client, nil); !tr.serverDone {
				b.Fatal(tr.serverErr)
			}
		}
	})
}
