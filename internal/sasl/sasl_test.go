package sasl

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNewConfig(t *testing.T) {
	creds := &memCredentials{}
	v := &Validator{}
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"all", Config{Mechanisms: []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}, Credentials: creds, Validator: v}, true},
		{"oauth only", Config{Mechanisms: []string{OAuthBearer}, Validator: v}, true},
		{"none", Config{Credentials: creds}, false},
		{"unknown", Config{Mechanisms: []string{"GSSAPI"}, Credentials: creds}, false},
		{"case matters", Config{Mechanisms: []string{"plain"}, Credentials: creds}, false},
		{"twice", Config{Mechanisms: []string{Plain, Plain}, Credentials: creds}, false},
		{"PLAIN without credentials", Config{Mechanisms: []string{Plain}}, false},
		{"SCRAM without credentials", Config{Mechanisms: []string{ScramSHA256}}, false},
		{"OAUTHBEARER without validator", Config{Mechanisms: []string{OAuthBearer}, Credentials: creds}, false},
		{"negative max", Config{Mechanisms: []string{Plain}, Credentials: creds, MaxMessageBytes: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// Reference: Kafka's SaslServerAuthenticator.handleHandshakeRequest: a
// mechanism not enabled is UNSUPPORTED_SASL_MECHANISM with the enabled
// list.
func TestStartAndMechanisms(t *testing.T) {
	s, err := New(Config{Mechanisms: []string{ScramSHA512, Plain}, Credentials: &memCredentials{}})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Mechanisms()
	if !slices.Equal(got, []string{ScramSHA512, Plain}) {
		t.Fatalf("Mechanisms() = %v", got)
	}
	got[0] = "changed"
	if s.Mechanisms()[0] != ScramSHA512 {
		t.Fatal("Mechanisms() shares its slice")
	}
	for _, m := range []string{ScramSHA256, OAuthBearer, "plain", "", "GSSAPI"} {
		if _, err := s.Start(m); !errors.Is(err, ErrUnsupportedMechanism) {
			t.Errorf("Start(%q): %v, want ErrUnsupportedMechanism", m, err)
		}
	}
	x := start(t, s, Plain)
	if x.Mechanism() != Plain || x.Principal() != "" || x.User() != "" || !x.Expiry().IsZero() {
		t.Fatalf("fresh exchange: %q %q %q %v", x.Mechanism(), x.Principal(), x.User(), x.Expiry())
	}
}

// A message over MaxMessageBytes fails the exchange before any
// mechanism reads it; one of exactly MaxMessageBytes does not.
func TestMessageTooLarge(t *testing.T) {
	creds := testUsers(t)
	s, err := New(Config{Mechanisms: []string{Plain, ScramSHA512}, Credentials: creds, MaxMessageBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	exact := []byte("\x00alice\x00alice-secret")
	exact = append(exact, bytes.Repeat([]byte("x"), 100-len(exact))...)
	x := start(t, s, Plain)
	if _, _, err := x.Step(exact); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("100-byte message: %v, want a wrong password", err)
	}
	for _, mech := range []string{Plain, ScramSHA512} {
		x := start(t, s, mech)
		_, _, err := x.Step(append(exact, 'x'))
		wantKind(t, err, ErrMessageTooLarge)
		checkFailed(t, x, err)
	}
	if s, err := New(Config{Mechanisms: []string{Plain}, Credentials: creds}); err != nil || s.maxMessageBytes != DefaultMaxMessageBytes {
		t.Fatalf("default max: %v %v", s, err)
	}
}

func TestStepAfterDone(t *testing.T) {
	s := newTestServer(t, testUsers(t), nil)
	x := start(t, s, Plain)
	if _, done, err := x.Step([]byte("\x00alice\x00alice-secret")); err != nil || !done {
		t.Fatalf("PLAIN: %v %v", done, err)
	}
	for range 2 {
		reply, done, err := x.Step([]byte("\x00alice\x00alice-secret"))
		wantKind(t, err, ErrIllegalState)
		if reply != nil || done {
			t.Fatalf("after done: %q %v", reply, done)
		}
		// Still authenticated: the connection layer decides what a
		// stray message costs (Kafka closes the connection).
		if x.Principal() != "User:alice" {
			t.Fatalf("principal %q after a stray message", x.Principal())
		}
	}
}

// Error's text is its client-safe Message; the Reason is not in it.
func TestErrorText(t *testing.T) {
	e := &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidPassword, Reason: `PLAIN: unknown user "mallory"`}
	if e.Error() != msgInvalidPassword || strings.Contains(e.Error(), "mallory") {
		t.Fatalf("Error() = %q", e.Error())
	}
	if !errors.Is(e, ErrAuthenticationFailed) || errors.Is(e, ErrMalformedMessage) {
		t.Fatal("errors.Is")
	}
	if (&Error{Kind: ErrIllegalState}).Error() != ErrIllegalState.Error() {
		t.Fatal("empty Message")
	}
}
