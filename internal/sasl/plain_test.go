package sasl

import (
	"testing"
)

// Reference: RFC 4616 section 2 and Kafka's PlainSaslServer.
func TestPlain(t *testing.T) {
	creds := testUsers(t)
	s := newTestServer(t, creds, nil)
	for _, tc := range []struct {
		name string
		msg  string
		// user is the authenticated user, "" for a failure of kind.
		user    string
		kind    error
		message string
	}{
		{"right password", "\x00alice\x00alice-secret", "alice", nil, ""},
		{"authzid is the user", "alice\x00alice\x00alice-secret", "alice", nil, ""},
		{"only a SHA-256 credential", "\x00bob\x00bob-secret", "bob", nil, ""},
		{"name needing saslname escaping", "\x00a,b=c\x00odd-secret", "a,b=c", nil, ""},
		{"wrong password", "\x00alice\x00alice-secreT", "", ErrAuthenticationFailed, msgInvalidPassword},
		{"unknown user", "\x00mallory\x00alice-secret", "", ErrAuthenticationFailed, msgInvalidPassword},
		{"another user's password", "\x00bob\x00alice-secret", "", ErrAuthenticationFailed, msgInvalidPassword},
		{"authzid of another user", "bob\x00alice\x00alice-secret", "", ErrAuthenticationFailed, msgAuthzidMismatch},
		{"authzid mismatch with a wrong password", "bob\x00alice\x00wrong", "", ErrAuthenticationFailed, msgAuthzidMismatch},
		{"empty message", "", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
		{"no NUL", "alice", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
		{"one NUL", "alice\x00alice-secret", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
		{"three NULs", "\x00alice\x00alice-secret\x00", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
		{"NUL in password", "\x00alice\x00alice\x00secret", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
		{"empty user", "\x00\x00alice-secret", "", ErrMalformedMessage, "Authentication failed: username not specified"},
		{"empty password", "\x00alice\x00", "", ErrMalformedMessage, "Authentication failed: password not specified"},
		{"not UTF-8", "\x00alice\x00\xff\xfe", "", ErrMalformedMessage, msgInvalidCredentials(Plain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := start(t, s, Plain)
			reply, done, err := x.Step([]byte(tc.msg))
			if tc.kind == nil {
				if err != nil || !done || len(reply) != 0 {
					t.Fatalf("Step: %q %v %v", reply, done, err)
				}
				if x.User() != tc.user || x.Principal() != "User:"+tc.user || !x.Expiry().IsZero() {
					t.Fatalf("user %q principal %q expiry %v", x.User(), x.Principal(), x.Expiry())
				}
				return
			}
			e := wantKind(t, err, tc.kind)
			if e.Message != tc.message {
				t.Fatalf("message %q, want %q", e.Message, tc.message)
			}
			if done || reply != nil {
				t.Fatalf("failed Step returned %q %v", reply, done)
			}
			checkFailed(t, x, err)
		})
	}
}

// A stored credential the exchange cannot use (bad lengths, wrong
// mechanism field) counts as none, and PLAIN then tries the next one.
func TestPlainSkipsUnusableCredential(t *testing.T) {
	creds := &memCredentials{}
	creds.addUser(t, "carol", "carol-secret", ScramSHA256)
	broken, err := NewCredential(ScramSHA512, "carol-secret", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	broken.StoredKey = broken.StoredKey[:10]
	creds.put("carol", broken)
	s := newTestServer(t, creds, nil)
	x := start(t, s, Plain)
	if _, done, err := x.Step([]byte("\x00carol\x00carol-secret")); err != nil || !done {
		t.Fatalf("Step: %v %v", done, err)
	}
}
