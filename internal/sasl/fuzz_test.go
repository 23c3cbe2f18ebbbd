package sasl

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// fuzzMechanisms are indexed by the fuzz input's first argument.
var fuzzMechanisms = []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}

// FuzzExchange steps one exchange of each mechanism with up to three
// client messages. Invariants:
//
//   - Step never panics;
//   - an error is an *Error of one of the sentinels, with a Message, and
//     comes with no reply and done false;
//   - a failed exchange stays failed: every later Step returns the very
//     same error, and the exchange never reports a principal;
//   - a done exchange has a principal "User:<non-empty>", and a later
//     Step is ErrIllegalState;
//   - a message over MaxMessageBytes is ErrMessageTooLarge.
//
// Seeds: each mechanism's valid transcript (SCRAM's with both nonces
// fixed, so the fuzzer mutates messages that get as far as the proof
// check), the OAUTHBEARER error challenge's answer, empty, garbage,
// oversized, and valid-plus-garbage messages.
func FuzzExchange(f *testing.F) {
	now := newFakeNow()
	k := keys()
	v, _ := fileValidator(f, now, nil, standardJWKS()...)
	s, err := New(Config{
		Mechanisms:      fuzzMechanisms,
		Credentials:     testUsers(f),
		Validator:       v,
		MaxMessageBytes: 4096,
	})
	if err != nil {
		f.Fatal(err)
	}
	s.scramNonce = func() string { return "fixedservernonce" }

	token := sign(f, k.rsa, jose.RS256, "rsa-1", claims(now.Now(), nil))
	first256, final256 := scramTranscript(f, s, ScramSHA256, "alice", "alice-secret")
	first512, final512 := scramTranscript(f, s, ScramSHA512, "alice", "alice-secret")
	big := bytes.Repeat([]byte("a"), 4097)
	for _, seed := range []struct {
		mechanism  uint8
		m1, m2, m3 []byte
	}{
		{0, []byte("\x00alice\x00alice-secret"), nil, nil},
		{0, []byte("alice\x00alice\x00alice-secret"), []byte("again"), nil},
		{0, []byte("\x00alice\x00wrong"), nil, nil},
		{1, first256, final256, []byte("more")},
		{2, first512, final512, nil},
		{2, first512, append(bytes.Clone(final512), ",x"...), nil},
		{2, first512, first512, final512},
		{2, append(bytes.Clone(first512), ",tokenauth=true"...), final512, nil},
		{3, bearer(token), []byte{1}, nil},
		{3, bearer("a.b.c"), []byte{1}, []byte{1}},
		{3, append(bearer(token), 'x'), nil, nil},
		{0, nil, nil, nil},
		{1, []byte{}, []byte{}, []byte{}},
		{2, []byte("\x00\x01\xff,,,==="), nil, nil},
		{3, big, nil, nil},
		{1, first256, big, nil},
	} {
		f.Add(seed.mechanism, seed.m1, seed.m2, seed.m3)
	}

	f.Fuzz(func(t *testing.T, mechanism uint8, m1, m2, m3 []byte) {
		x, err := s.Start(fuzzMechanisms[int(mechanism)%len(fuzzMechanisms)])
		if err != nil {
			t.Fatal(err)
		}
		var failed error
		done := false
		for _, msg := range [][]byte{m1, m2, m3} {
			reply, stepDone, err := x.Step(msg)
			switch {
			case failed != nil:
				if err != failed || reply != nil || stepDone {
					t.Fatalf("failed exchange stepped to %q %v %v (first error %v)", reply, stepDone, err, failed)
				}
			case done:
				if !errors.Is(err, ErrIllegalState) || reply != nil || stepDone {
					t.Fatalf("done exchange stepped to %q %v %v", reply, stepDone, err)
				}
			case err != nil:
				var e *Error
				if !errors.As(err, &e) || e.Message == "" || reply != nil || stepDone {
					t.Fatalf("error %#v with reply %q done %v", err, reply, stepDone)
				}
				switch e.Kind {
				case ErrAuthenticationFailed, ErrMalformedMessage, ErrMessageTooLarge:
				default:
					t.Fatalf("error of kind %v", e.Kind)
				}
				if (len(msg) > 4096) != (e.Kind == ErrMessageTooLarge) {
					t.Fatalf("%d-byte message failed with %v", len(msg), e.Kind)
				}
				failed = err
			default:
				done = stepDone
			}
			if p := x.Principal(); done != (p != "") || (done && (!strings.HasPrefix(p, "User:") || p == "User:")) {
				t.Fatalf("done %v with principal %q", done, p)
			}
		}
	})
}
