package sasl

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strings"
	"testing"
)

func saltedPassword(t testing.TB, mechanism, password string, salt []byte, iterations int) []byte {
	t.Helper()
	h, size := sha512.New, 64
	if mechanism == ScramSHA256 {
		h, size = sha256.New, 32
	}
	sp, err := pbkdf2.Key(func() hash.Hash { return h() }, password, salt, iterations, size)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// The HMACs written out in CredentialFromSaltedPassword must give what
// xdg-go/scram's client derives from the password, which is what a
// client computes when it logs in.
func TestCredentialFromSaltedPasswordMatchesLibrary(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		for _, iterations := range []int32{MinIterations, 8192, MaxIterations} {
			t.Run(fmt.Sprintf("%s/%d", mech, iterations), func(t *testing.T) {
				salt := []byte("some salt of some length")
				want, err := credentialFromPassword(mech, "pa55 wörd", salt, iterations)
				if err != nil {
					t.Fatal(err)
				}
				got, err := CredentialFromSaltedPassword(mech, salt, saltedPassword(t, mech, "pa55 wörd", salt, int(iterations)), iterations)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.StoredKey, want.StoredKey) || !bytes.Equal(got.ServerKey, want.ServerKey) ||
					!bytes.Equal(got.Salt, want.Salt) || got.Iterations != want.Iterations || got.Mechanism != mech {
					t.Fatalf("from salted password %x/%x, from password %x/%x", got.StoredKey, got.ServerKey, want.StoredKey, want.ServerKey)
				}
				if !VerifyPassword(got, "pa55 wörd") || VerifyPassword(got, "pa55 word") {
					t.Fatal("VerifyPassword disagrees with the credential")
				}
			})
		}
	}
}

// Reference: Kafka's ScramControlManager.validateUpsertion (iterations
// 4096..16384, UNACCEPTABLE_CREDENTIAL) and ScramMechanism (only the two
// SCRAM mechanisms, UNSUPPORTED_SASL_MECHANISM).
func TestCredentialFromSaltedPasswordValidation(t *testing.T) {
	sp512 := make([]byte, 64)
	for _, tc := range []struct {
		name       string
		mechanism  string
		salt, sp   []byte
		iterations int32
		want       error
	}{
		{"ok", ScramSHA512, []byte("s"), sp512, 4096, nil},
		{"max iterations", ScramSHA512, []byte("s"), sp512, 16384, nil},
		{"too few iterations", ScramSHA512, []byte("s"), sp512, 4095, ErrUnacceptableCredential},
		{"too many iterations", ScramSHA512, []byte("s"), sp512, 16385, ErrUnacceptableCredential},
		{"negative iterations", ScramSHA512, []byte("s"), sp512, -1, ErrUnacceptableCredential},
		{"empty salt", ScramSHA512, nil, sp512, 4096, ErrUnacceptableCredential},
		{"short salted password", ScramSHA512, []byte("s"), sp512[:32], 4096, ErrUnacceptableCredential},
		{"SHA-256 wants 32 bytes", ScramSHA256, []byte("s"), sp512, 4096, ErrUnacceptableCredential},
		{"PLAIN is no SCRAM", Plain, []byte("s"), sp512, 4096, ErrUnsupportedMechanism},
		{"lower case name", "scram-sha-512", []byte("s"), sp512, 4096, ErrUnsupportedMechanism},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CredentialFromSaltedPassword(tc.mechanism, tc.salt, tc.sp, tc.iterations)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewCredential(t *testing.T) {
	a, err := NewCredential(ScramSHA512, "secret", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCredential(ScramSHA512, "secret", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Salt) != saltBytes || bytes.Equal(a.Salt, b.Salt) || bytes.Equal(a.StoredKey, b.StoredKey) {
		t.Fatalf("two credentials share a salt or keys: %x %x", a.Salt, b.Salt)
	}
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		mech       string
		password   string
		iterations int32
		want       error
	}{
		{ScramSHA512, "", 4096, ErrUnacceptableCredential},
		{ScramSHA512, "x", 100, ErrUnacceptableCredential},
		{OAuthBearer, "x", 4096, ErrUnsupportedMechanism},
	} {
		if _, err := NewCredential(bad.mech, bad.password, bad.iterations); !errors.Is(err, bad.want) {
			t.Errorf("NewCredential(%s, %q, %d): %v, want %v", bad.mech, bad.password, bad.iterations, err, bad.want)
		}
	}
}

func TestVerifyPassword(t *testing.T) {
	good, err := NewCredential(ScramSHA256, "correct horse", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(c *ScramCredential)) ScramCredential {
		c := good
		c.Salt = bytes.Clone(good.Salt)
		c.StoredKey = bytes.Clone(good.StoredKey)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name     string
		c        ScramCredential
		password string
		want     bool
	}{
		{"right", good, "correct horse", true},
		{"wrong", good, "correct horse ", false},
		{"empty", good, "", false},
		{"other salt", mutate(func(c *ScramCredential) { c.Salt[0] ^= 1 }), "correct horse", false},
		{"other stored key", mutate(func(c *ScramCredential) { c.StoredKey[0] ^= 1 }), "correct horse", false},
		{"mechanism mismatch", mutate(func(c *ScramCredential) { c.Mechanism = ScramSHA512 }), "correct horse", false},
		{"too many iterations", mutate(func(c *ScramCredential) { c.Iterations = 1 << 30 }), "correct horse", false},
		{"zero value", ScramCredential{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := VerifyPassword(tc.c, tc.password); got != tc.want {
				t.Fatalf("VerifyPassword = %v, want %v", got, tc.want)
			}
		})
	}
}

// Kafka's clients salt the password's UTF-8 bytes as they are, without
// SASLprep (which would turn U+00AA FEMININE ORDINAL INDICATOR into "a"):
// so must VerifyPassword, or a user whose password has such a character
// could log in with SCRAM but not with PLAIN.
func TestPasswordNotNormalised(t *testing.T) {
	salt := []byte("salt")
	c, err := CredentialFromSaltedPassword(ScramSHA512, salt, saltedPassword(t, ScramSHA512, "horse\u00aa", salt, 4096), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !VerifyPassword(c, "horse\u00aa") || VerifyPassword(c, "horsea") {
		t.Fatal("password normalised")
	}
}

func TestCredentialStringHidesSecrets(t *testing.T) {
	c, err := NewCredential(ScramSHA512, "secret", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
		if strings.Contains(s, fmt.Sprint(c.StoredKey[:4])) || strings.Contains(s, fmt.Sprintf("%x", c.Salt[:4])) || !strings.Contains(s, "hidden") {
			t.Fatalf("credential printed as %q", s)
		}
	}
}

// The decoy of an unknown user is stable per user (asking twice shows the
// same salt, as a real user's does), differs between users and servers,
// and looks like a real credential.
func TestDecoyCredential(t *testing.T) {
	var s1, s2 [32]byte
	s2[0] = 1
	a := decoyCredential(&s1, "mallory", ScramSHA512)
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	if b := decoyCredential(&s1, "mallory", ScramSHA512); !bytes.Equal(a.Salt, b.Salt) || !bytes.Equal(a.StoredKey, b.StoredKey) {
		t.Fatal("decoy not stable")
	}
	if b := decoyCredential(&s1, "trent", ScramSHA512); bytes.Equal(a.Salt, b.Salt) {
		t.Fatal("two users share a decoy salt")
	}
	if b := decoyCredential(&s2, "mallory", ScramSHA512); bytes.Equal(a.Salt, b.Salt) {
		t.Fatal("two servers share a decoy salt")
	}
	if len(a.Salt) != saltBytes || len(a.StoredKey) != 64 || len(decoyCredential(&s1, "x", ScramSHA256).StoredKey) != 32 {
		t.Fatal("decoy lengths")
	}
}

func BenchmarkVerifyPassword(b *testing.B) {
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		b.Run(fmt.Sprintf("%s/%d", mech, DefaultIterations), func(b *testing.B) {
			c, err := NewCredential(mech, "secret", DefaultIterations)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if !VerifyPassword(c, "secret") {
					b.Fatal("refused")
				}
			}
		})
	}
}
