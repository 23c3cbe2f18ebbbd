package sasl

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

func mustValidate(t *testing.T, v *Validator, token string) {
	t.Helper()
	if _, _, err := v.Validate(token); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func mustRefuse(t *testing.T, v *Validator, token string) {
	t.Helper()
	if _, _, err := v.Validate(token); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Validate: %v, want ErrInvalidToken", err)
	}
}

// Key rotation through the file: a token signed by a new key is accepted
// as soon as the file has it (its unknown kid makes the validator read
// the file again), and a key removed from the file stops working at the
// next periodic check.
func TestJWKSFileRotation(t *testing.T) {
	now := newFakeNow()
	k := keys()
	v, path := fileValidator(t, now, func(c *OAuthConfig) { c.RefreshInterval = time.Minute },
		publicJWK(k.rsa, "old", ""))
	oldTok := sign(t, k.rsa, jose.RS256, "old", claims(now.Now(), nil))
	newTok := sign(t, k.ec, jose.ES256, "new", claims(now.Now(), nil))
	mustValidate(t, v, oldTok)
	mustRefuse(t, v, newTok) // not published yet

	// Publish the new key next to the old one. The refusal above used
	// the unknown-key refresh: the next one is allowed 10 s later.
	writeJWKS(t, path, publicJWK(k.rsa, "old", ""), publicJWK(k.ec, "new", ""))
	mustRefuse(t, v, newTok)
	now.Advance(unknownKeyRefreshInterval)
	mustValidate(t, v, newTok)
	mustValidate(t, v, oldTok)

	// Retire the old key: refused once the periodic check sees the file
	// changed, not before.
	writeJWKS(t, path, publicJWK(k.ec, "new", ""))
	mustValidate(t, v, oldTok)
	now.Advance(time.Minute)
	mustRefuse(t, v, oldTok)
	mustValidate(t, v, newTok)
	if err := v.RefreshError(); err != nil {
		t.Fatal(err)
	}
}

// A file that goes bad keeps the keys there were, and says why.
func TestJWKSFileBroken(t *testing.T) {
	now := newFakeNow()
	k := keys()
	v, path := fileValidator(t, now, func(c *OAuthConfig) { c.RefreshInterval = time.Minute }, publicJWK(k.rsa, "a", ""))
	tok := sign(t, k.rsa, jose.RS256, "a", claims(now.Now(), nil))
	for _, broken := range []string{"{not json", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, ""} {
		if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		now.Advance(time.Minute)
		mustValidate(t, v, sign(t, k.rsa, jose.RS256, "a", claims(now.Now(), nil)))
		if v.RefreshError() == nil {
			t.Fatalf("file %q: no refresh error", broken)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	now.Advance(time.Minute)
	mustValidate(t, v, sign(t, k.rsa, jose.RS256, "a", claims(now.Now(), nil)))
	writeJWKS(t, path, publicJWK(k.rsa, "a", ""))
	now.Advance(time.Minute)
	mustValidate(t, v, tok)
	if err := v.RefreshError(); err != nil {
		t.Fatal(err)
	}
}

// jwksServer serves a key set that a test can change and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	status  int
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, ks ...jose.JSONWebKey) *jwksServer {
	s := &jwksServer{body: jwksJSON(t, ks...), status: http.StatusOK}
	// httptest listens on 127.0.0.1.
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.WriteHeader(s.status)
		w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(t *testing.T, status int, ks ...jose.JSONWebKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, jwksJSON(t, ks...)
}

func urlValidator(t *testing.T, now *fakeNow, url string) *Validator {
	t.Helper()
	v, err := NewValidator(OAuthConfig{JWKSURL: url, RefreshInterval: time.Hour, Now: now.Now,
		ExpectedAudience: []string{"fjord"}, ExpectedIssuer: "https://idp.example"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Reference: Kafka's RefreshingHttpsJwks: fetched every refresh interval
// and on an unknown key id, the latter at most once per 10 s.
func TestJWKSURL(t *testing.T) {
	now := newFakeNow()
	k := keys()
	srv := newJWKSServer(t, publicJWK(k.rsa, "a", ""))
	v := urlValidator(t, now, srv.URL+"/jwks")
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") || srv.fetches.Load() != 1 {
		t.Fatalf("server %s, %d fetches at start", srv.URL, srv.fetches.Load())
	}
	// Valid through every Advance below.
	long := claims(now.Now(), map[string]any{"exp": now.Now().Add(1000 * time.Hour).Unix()})
	tokA := sign(t, k.rsa, jose.RS256, "a", long)
	tokB := sign(t, k.ec, jose.ES256, "b", long)
	for range 5 {
		mustValidate(t, v, tokA)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for known keys", n)
	}

	// Unknown kids: one fetch, then none for 10 s however many come.
	for range 5 {
		mustRefuse(t, v, tokB)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after unknown kids, want 2", n)
	}
	srv.set(t, http.StatusOK, publicJWK(k.rsa, "a", ""), publicJWK(k.ec, "b", ""))
	now.Advance(9 * time.Second)
	mustRefuse(t, v, tokB)
	now.Advance(time.Second)
	mustValidate(t, v, tokB)
	if n := srv.fetches.Load(); n != 3 {
		t.Fatalf("%d fetches, want 3", n)
	}

	// The periodic refresh drops a retired key.
	srv.set(t, http.StatusOK, publicJWK(k.ec, "b", ""))
	now.Advance(time.Hour)
	mustValidate(t, v, tokB) // the fetch that drops "a"
	mustRefuse(t, v, tokA)   // and "a" is unknown: a refresh, at most every 10 s
	if n := srv.fetches.Load(); n != 5 {
		t.Fatalf("%d fetches, want 5", n)
	}

	// An identity provider that fails keeps the keys there were.
	srv.set(t, http.StatusInternalServerError)
	now.Advance(time.Hour)
	mustValidate(t, v, tokB)
	if err := v.RefreshError(); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("RefreshError = %v", err)
	}
}

func TestJWKSURLUnavailableAtStart(t *testing.T) {
	srv := newJWKSServer(t)
	srv.set(t, http.StatusNotFound, publicJWK(keys().rsa, "a", ""))
	if _, err := NewValidator(OAuthConfig{JWKSURL: srv.URL}); !errors.Is(err, ErrJWKSUnavailable) {
		t.Fatalf("404: %v", err)
	}
	srv.set(t, http.StatusOK) // no keys
	if _, err := NewValidator(OAuthConfig{JWKSURL: srv.URL}); !errors.Is(err, ErrJWKSUnavailable) {
		t.Fatalf("empty set: %v", err)
	}
}

// Concurrent validations while the keys refresh: for the race detector.
func TestJWKSConcurrentRefresh(t *testing.T) {
	now := newFakeNow()
	k := keys()
	srv := newJWKSServer(t, publicJWK(k.rsa, "a", ""))
	v := urlValidator(t, now, srv.URL)
	long := claims(now.Now(), map[string]any{"exp": now.Now().Add(1000 * time.Hour).Unix()})
	tok := sign(t, k.rsa, jose.RS256, "a", long)
	unknown := sign(t, k.rsa, jose.RS256, "zz", long)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				if i == 0 {
					now.Advance(time.Hour)
				}
				if j%2 == 0 {
					v.Validate(unknown)
				} else if _, _, err := v.Validate(tok); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestParseJWKS(t *testing.T) {
	k := keys()
	set, err := parseJWKS([]byte(`{"keys":[
		{"kty":"oct","k":"c2VjcmV0","kid":"hmac"},
		{"kty":"XYZ","kid":"future"},
		{"kty":"EC","crv":"P-256","kid":"broken","x":"AA","y":"AA"},
		` + strings.TrimSuffix(strings.TrimPrefix(string(jwksJSON(t, jose.JSONWebKey{Key: k.ec.Public(), KeyID: "enc", Use: "enc"})), `{"keys":[`), `]}`) + `,
		` + strings.TrimSuffix(strings.TrimPrefix(string(jwksJSON(t, jose.JSONWebKey{Key: k.ed, KeyID: "private"})), `{"keys":[`), `]}`) + `,
		` + strings.TrimSuffix(strings.TrimPrefix(string(jwksJSON(t, publicJWK(k.rsa, "rsa", ""))), `{"keys":[`), `]}`) + `
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, key := range set.keys {
		kids = append(kids, key.KeyID)
		if !key.IsPublic() {
			t.Fatalf("key %s kept private", key.KeyID)
		}
	}
	if strings.Join(kids, ",") != "private,rsa" {
		t.Fatalf("kept %v, want the Ed25519 key's public half and the RSA key", kids)
	}
}
