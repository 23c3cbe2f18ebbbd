package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// A test identity provider: real keys, real signatures.

type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	ec        *ecdsa.PrivateKey
	ec384     *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}

// keys are made once: RSA key generation is most of the package's test
// time otherwise.
var keys = sync.OnceValue(func() testKeys {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var k testKeys
	var err error
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	_, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	return k
})

// testNow is the time of the OAuth tests: fixed, moved by hand.
var testEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeNow struct{ ns atomic.Int64 }

func newFakeNow() *fakeNow {
	n := &fakeNow{}
	n.ns.Store(testEpoch.UnixNano())
	return n
}

func (n *fakeNow) Now() time.Time          { return time.Unix(0, n.ns.Load()).UTC() }
func (n *fakeNow) Advance(d time.Duration) { n.ns.Add(int64(d)) }

// publicJWK is the JWKS entry of key's public half.
func publicJWK(key crypto.Signer, kid, alg string) jose.JSONWebKey {
	return jose.JSONWebKey{Key: key.Public(), KeyID: kid, Algorithm: alg, Use: "sig"}
}

// standardJWKS is the set most tests use: an RSA, a P-256, a P-384 and an
// Ed25519 key.
func standardJWKS() []jose.JSONWebKey {
	k := keys()
	return []jose.JSONWebKey{
		publicJWK(k.rsa, "rsa-1", ""),
		publicJWK(k.ec, "ec-1", "ES256"),
		publicJWK(k.ec384, "ec384-1", ""),
		publicJWK(k.ed, "ed-1", ""),
	}
}

func jwksJSON(t testing.TB, ks ...jose.JSONWebKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: ks})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeJWKS replaces path's contents the way a deployment would: a new
// file renamed over the old one.
func writeJWKS(t testing.TB, path string, ks ...jose.JSONWebKey) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".jwks.tmp")
	if err := os.WriteFile(tmp, jwksJSON(t, ks...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// claims are a valid token's claims at now, with changes: a nil value
// deletes the claim.
func claims(now time.Time, changes map[string]any) map[string]any {
	c := map[string]any{
		"sub": "alice",
		"iss": "https://idp.example",
		"aud": []string{"fjord"},
		"exp": now.Add(time.Hour).Unix(),
		"iat": now.Add(-time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign makes a compact JWS of claims with key, alg and kid ("" for no kid).
func sign(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, c map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsecured makes an "alg":"none" token (RFC 7519 section 6), which
// go-jose will not sign.
func unsecured(t testing.TB, c map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT","kid":"rsa-1"}`)) + "." + enc(payload) + "."
}

// fileValidator is a Validator over a JWKS file in a temporary directory,
// holding ks, at the time now.
func fileValidator(t testing.TB, now *fakeNow, change func(*OAuthConfig), ks ...jose.JSONWebKey) (*Validator, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, ks...)
	cfg := OAuthConfig{
		JWKSFile:         path,
		ExpectedAudience: []string{"kafka", "fjord"},
		ExpectedIssuer:   "https://idp.example",
		Now:              now.Now,
	}
	if change != nil {
		change(&cfg)
	}
	v, err := NewValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v, path
}
