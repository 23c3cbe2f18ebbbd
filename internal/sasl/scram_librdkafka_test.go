package sasl

// librdkafka's doubled nonce (see scram.go's file comment): a transcript
// recorded from Debian's kcat (librdkafka 2.0.2) against Fjord, replayed,
// and client-final messages of near-miss shapes, each with a proof that
// is valid for its own AuthMessage, so that only the nonce's shape can
// refuse them.

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// The recorded exchange: user alice, password "alice-secret",
// SCRAM-SHA-512, 4096 iterations. The client nonce is 32 characters of
// librdkafka's alphabet ('-' to '~'), here ending in a backquote and a
// backslash; the server nonce is Fjord's (alphanumericNonce).
const (
	kcatClientNonce = "PpgGO@T<o9gJS;eUE.up|?^atBZ4V/`\\"
	kcatServerNonce = "uApeYoPHyF99PEi8OAnI5gka6fGgM2pF"
	kcatSaltB64     = "M8N2Vh09Eu/CqsTum0LrqpcEUmPU7MUm1BwzTIX2oOc="
	kcatPassword    = "alice-secret"

	kcatClientFirst = "n,,n=alice,r=" + kcatClientNonce
	kcatServerFirst = "r=" + kcatClientNonce + kcatServerNonce + ",s=" + kcatSaltB64 + ",i=4096"
	// r= is the client nonce and then the full nonce of kcatServerFirst.
	kcatClientFinal = "c=biws,r=" + kcatClientNonce + kcatClientNonce + kcatServerNonce +
		",p=1bdQbGUdAGwZ9iC3h7hhJHjzLPOA7Dl5WDea8rZpFIC9CEps5DRGkg4bNQmBCMwJY95I/rgG0g1G2J/aOBg33Q=="
)

// kcatSaltedPassword is Hi(password, the recorded salt, 4096) for
// mechanism.
func kcatSaltedPassword(t testing.TB, mechanism, password string) []byte {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString(kcatSaltB64)
	if err != nil {
		t.Fatal(err)
	}
	newHash := scramNewHash(mechanism)
	sp, err := pbkdf2.Key(newHash, password, salt, 4096, newHash().Size())
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// kcatServer is a Server whose alice has, for each SCRAM mechanism, the
// credential of password with the recorded salt, and whose server nonce
// is the recorded one. With password "" alice has no credential: an
// unknown user.
func kcatServer(t testing.TB, password string) *Server {
	t.Helper()
	creds := &memCredentials{}
	if password != "" {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			salt, _ := base64.StdEncoding.DecodeString(kcatSaltB64)
			c, err := CredentialFromSaltedPassword(mech, salt, kcatSaltedPassword(t, mech, password), 4096)
			if err != nil {
				t.Fatal(err)
			}
			creds.put("alice", c)
		}
	}
	s := newTestServer(t, creds, nil)
	s.scramNonce = func() string { return kcatServerNonce }
	return s
}

// librdkafkaFinal is what librdkafka's client builds in answer to
// serverFirst (rd_kafka_sasl_scram_build_client_final_message), but with
// the channel binding, the nonce and any extensions given: the proof is
// over the AuthMessage of that message, so it is valid for whatever nonce
// is put in it. It also returns the server signature the client expects.
func librdkafkaFinal(newHash func() hash.Hash, saltedPassword []byte, clientFirstBare, serverFirst, cbind, nonce, extensions string) (clientFinal, serverFinal string) {
	hmacOf := func(key []byte, data string) []byte {
		m := hmac.New(newHash, key)
		m.Write([]byte(data))
		return m.Sum(nil)
	}
	clientKey := hmacOf(saltedPassword, "Client Key")
	h := newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	withoutProof := "c=" + cbind + ",r=" + nonce + extensions
	authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
	proof := hmacOf(storedKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	serverSignature := hmacOf(hmacOf(saltedPassword, "Server Key"), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof),
		"v=" + base64.StdEncoding.EncodeToString(serverSignature)
}

// Regression: Debian's kcat (librdkafka 2.0.2) failed every SCRAM login,
// because xdg-go refuses its doubled nonce. Reference: RFC 5802 section 3,
// confluentinc/librdkafka#4895.
func TestScramLibrdkafkaRecordedTranscript(t *testing.T) {
	if n := len(kcatClientNonce); n != 32 {
		t.Fatalf("client nonce of %d characters, want 32", n)
	}
	// The model of librdkafka used by the other tests makes the
	// recorded message byte for byte.
	sp := kcatSaltedPassword(t, ScramSHA512, kcatPassword)
	final, wantServerFinal := librdkafkaFinal(sha512.New, sp, "n=alice,r="+kcatClientNonce, kcatServerFirst,
		"biws", kcatClientNonce+kcatClientNonce+kcatServerNonce, "")
	if final != kcatClientFinal {
		t.Fatalf("librdkafkaFinal makes\n%s\nkcat sent\n%s", final, kcatClientFinal)
	}

	for _, tc := range []struct {
		name     string
		password string // alice's password on the server; "" for no alice
		// reason is in the failure's Reason; "" for a success.
		reason string
	}{
		{name: "right password", password: kcatPassword},
		{name: "wrong password", password: "alice-secreT", reason: "doubled nonce: proof invalid"},
		{name: "unknown user", password: "", reason: "unknown user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := start(t, kcatServer(t, tc.password), ScramSHA512)
			reply, done, err := x.Step([]byte(kcatClientFirst))
			if err != nil || done {
				t.Fatalf("client-first: %v %v", done, err)
			}
			if tc.password != "" && string(reply) != kcatServerFirst {
				t.Fatalf("server-first\n%s\nwant the recorded\n%s", reply, kcatServerFirst)
			}
			reply, done, err = x.Step([]byte(kcatClientFinal))
			if tc.reason == "" {
				if err != nil || !done || string(reply) != wantServerFinal {
					t.Fatalf("client-final: %q %v %v, want %q", reply, done, err, wantServerFinal)
				}
				if x.User() != "alice" || x.Principal() != "User:alice" {
					t.Fatalf("user %q principal %q", x.User(), x.Principal())
				}
				return
			}
			e := wantKind(t, err, ErrAuthenticationFailed)
			checkFailed(t, x, err)
			if e.Message != msgInvalidCredentials(ScramSHA512) || !strings.Contains(e.Reason, tc.reason) {
				t.Fatalf("message %q reason %q, want %q and a reason with %q",
					e.Message, e.Reason, msgInvalidCredentials(ScramSHA512), tc.reason)
			}
		})
	}
}

// Only librdkafka's exact shape is accepted, not Kafka's endsWith: each
// message here has a proof that is valid over its own AuthMessage, so
// the nonce (or the shape around it) is all that refuses it, and it is
// refused by xdg-go as before.
func TestScramLibrdkafkaNearMisses(t *testing.T) {
	const (
		c    = kcatClientNonce
		full = kcatClientNonce + kcatServerNonce
	)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name       string
		cbind      string // "" is "biws"
		nonce      string
		extensions string
		// reason is in the failure's Reason; "" for a success.
		reason string
	}{
		{name: "RFC 5802 nonce", nonce: full},
		{name: "librdkafka's doubled nonce", nonce: c + full},
		{name: "client nonce three times", nonce: c + c + full, reason: "nonce received did not match"},
		{name: "another prefix", nonce: strings.Repeat("A", len(c)) + full, reason: "nonce received did not match"},
		{name: "prefix one character short", nonce: c[1:] + full, reason: "nonce received did not match"},
		{name: "any prefix, as endsWith took", nonce: "x" + full, reason: "nonce received did not match"},
		{name: "server nonce missing", nonce: c + c, reason: "nonce received did not match"},
		{name: "server nonce cut short", nonce: c + full[:len(full)-1], reason: "nonce received did not match"},
		{name: "client nonce after", nonce: full + c, reason: "nonce received did not match"},
		{name: "trailing character", nonce: c + full + "x", reason: "nonce received did not match"},
		{name: "server nonce doubled", nonce: full + kcatServerNonce, reason: "nonce received did not match"},
		{name: "doubled nonce with an extension", nonce: c + full, extensions: ",x=y", reason: "nonce received did not match"},
		{name: "doubled nonce, channel binding of y,,", cbind: b64("y,,"), nonce: c + full, reason: "channel binding mismatch"},
		{name: "doubled nonce, channel binding of n,a=alice,", cbind: b64("n,a=alice,"), nonce: c + full, reason: "channel binding mismatch"},
	} {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				cbind := tc.cbind
				if cbind == "" {
					cbind = "biws"
				}
				x := start(t, kcatServer(t, kcatPassword), mech)
				serverFirst, _, err := x.Step([]byte(kcatClientFirst))
				if err != nil {
					t.Fatal(err)
				}
				final, wantServerFinal := librdkafkaFinal(scramNewHash(mech), kcatSaltedPassword(t, mech, kcatPassword),
					"n=alice,r="+c, string(serverFirst), cbind, tc.nonce, tc.extensions)
				reply, done, err := x.Step([]byte(final))
				if tc.reason == "" {
					if err != nil || !done || string(reply) != wantServerFinal {
						t.Fatalf("%q: %q %v %v, want %q", final, reply, done, err, wantServerFinal)
					}
					return
				}
				e := wantKind(t, err, ErrAuthenticationFailed)
				checkFailed(t, x, err)
				if e.Message != msgInvalidCredentials(mech) || !strings.Contains(e.Reason, tc.reason) {
					t.Fatalf("%q: message %q reason %q, want a reason with %q", final, e.Message, e.Reason, tc.reason)
				}
			})
		}
	}
}

// The recorded client-final message does not authenticate an exchange
// whose server nonce differs (RFC 5802 section 9): its r= holds the old
// server nonce, so it is not this exchange's doubled nonce, and xdg-go
// refuses it.
func TestScramLibrdkafkaReplay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nonce func() string // nil is the production nonce
	}{
		{"another fixed server nonce", func() string { return "AnotherServerNonce0123456789abcd" }},
		{"random server nonce", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := kcatServer(t, kcatPassword)
			s.scramNonce = tc.nonce
			x := start(t, s, ScramSHA512)
			reply, _, err := x.Step([]byte(kcatClientFirst))
			if err != nil || string(reply) == kcatServerFirst {
				t.Fatalf("client-first: %q %v", reply, err)
			}
			_, _, err = x.Step([]byte(kcatClientFinal))
			e := wantKind(t, err, ErrAuthenticationFailed)
			checkFailed(t, x, err)
			if e.Message != msgInvalidCredentials(ScramSHA512) || !strings.Contains(e.Reason, "nonce received did not match") {
				t.Fatalf("message %q reason %q", e.Message, e.Reason)
			}
		})
	}
}

// What the first message refuses is refused before the doubled nonce
// could matter: tokenauth and another user's authorization id.
func TestScramLibrdkafkaFirstMessageRules(t *testing.T) {
	for _, tc := range []struct {
		first, message string
	}{
		{kcatClientFirst + ",tokenauth=true", msgInvalidCredentials(ScramSHA512)},
		{"n,a=bob,n=alice,r=" + kcatClientNonce, msgAuthzidMismatch},
	} {
		x := start(t, kcatServer(t, kcatPassword), ScramSHA512)
		_, _, err := x.Step([]byte(tc.first))
		if e := wantKind(t, err, ErrAuthenticationFailed); e.Message != tc.message {
			t.Fatalf("%q: message %q, want %q", tc.first, e.Message, tc.message)
		}
		checkFailed(t, x, err)
	}
}

func TestNewScramFirstRound(t *testing.T) {
	for _, tc := range []struct {
		clientFirst, serverFirst string
		want                     scramFirstRound // zero: not ok
	}{
		{kcatClientFirst, kcatServerFirst, scramFirstRound{
			gs2Header: "n,,", clientFirstBare: "n=alice,r=" + kcatClientNonce, clientNonce: kcatClientNonce,
			serverFirst: kcatServerFirst, nonce: kcatClientNonce + kcatServerNonce,
		}},
		{"n,a=alice,n=alice,r=abc,foo=bar", "r=abcdef,s=c2FsdA==,i=4096", scramFirstRound{
			gs2Header: "n,a=alice,", clientFirstBare: "n=alice,r=abc,foo=bar", clientNonce: "abc",
			serverFirst: "r=abcdef,s=c2FsdA==,i=4096", nonce: "abcdef",
		}},
		{"n,,n=alice,r=abc", "r=abc,s=c2FsdA==,i=4096", scramFirstRound{}}, // no server part
		{"n,,n=alice,r=abc", "r=xyzdef,s=c2FsdA==,i=4096", scramFirstRound{}},
		{"n,,n=alice,r=", "r=def,s=c2FsdA==,i=4096", scramFirstRound{}},
		{"n,,n=alice", "r=def,s=c2FsdA==,i=4096", scramFirstRound{}},
		{"n,,n=alice,x=abc", "r=abcdef,s=c2FsdA==,i=4096", scramFirstRound{}},
		{"n,,n=alice,r=abc", "s=c2FsdA==,r=abcdef", scramFirstRound{}},
	} {
		got, ok := newScramFirstRound(tc.clientFirst, tc.serverFirst)
		if got != tc.want || ok != (tc.want != scramFirstRound{}) {
			t.Errorf("newScramFirstRound(%q, %q) = %+v %v, want %+v", tc.clientFirst, tc.serverFirst, got, ok, tc.want)
		}
	}
}

// doubledNonceFinal alone: the zero first round matches nothing, and a
// proof that is not base64 or not the hash's length is refused without
// a panic (xdg-go's parser refuses the first before the session gets
// here; the function does not rely on it).
func TestDoubledNonceFinalEdges(t *testing.T) {
	s := kcatServer(t, kcatPassword)
	c, _ := s.credentials.ScramCredential("alice", ScramSHA256)
	cred := scram.StoredCredentials{StoredKey: c.StoredKey, ServerKey: c.ServerKey}
	round, ok := newScramFirstRound(kcatClientFirst, kcatServerFirst)
	if !ok {
		t.Fatal("recorded first round does not split")
	}
	doubled := "c=biws,r=" + kcatClientNonce + kcatClientNonce + kcatServerNonce
	for _, tc := range []struct {
		name  string
		round scramFirstRound
		final string
		shape bool
	}{
		{"zero first round", scramFirstRound{}, kcatClientFinal, false},
		{"no proof", round, doubled + ",x=" + strings.Repeat("A", 44), false},
		{"proof not base64", round, doubled + ",p=!!", true},
		{"short proof", round, doubled + ",p=AAAA", true},
		{"SHA-512 proof for SHA-256", round, kcatClientFinal, true},
	} {
		final, shape, err := doubledNonceFinal(sha256.New, cred, tc.round, tc.final)
		if shape != tc.shape || final != "" || (shape && err == nil) {
			t.Errorf("%s: %q %v %v, want shape %v and a refusal", tc.name, final, shape, err, tc.shape)
		}
	}
}
