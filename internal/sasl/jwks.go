package sasl

// The identity provider's public keys: a JSON Web Key Set (RFC 7517)
// read from a file or fetched from a URL, kept, and refreshed
//
//   - every RefreshInterval: the URL fetched again, the file read again if
//     its modification time, size or identity changed (a rename over it
//     counts);
//   - when a token names a key that is not in the set, at most once every
//     unknownKeyRefreshInterval, reading the file even if it looks
//     unchanged: this is how a rotation to a new key is picked up at once.
//
// A refresh that fails keeps the keys there were: an identity provider
// that is down for a while must not lock every client out. The first
// load, in NewValidator, must succeed.
//
// No goroutine of its own: the Validate call that finds a refresh due
// does it, and the calls meanwhile use the keys there are (the one that
// claimed the refresh is the only one that waits for it).
//
// Kafka reads a JWKS file once at startup (JwksFileVerificationKeyResolver)
// and refreshes a JWKS URL on a schedule and on an unknown key id
// (RefreshingHttpsJwks). Kafka's unknown-key refresh runs in the
// background, at most once a minute per key id, and fails the token that
// asked for it; here it runs in the caller, so that the first token
// signed by a new key is accepted, and at most once every 10 s whatever
// the key id, so that made-up key ids cannot make the broker hammer the
// identity provider.

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// maxJWKSBytes bounds a key set read or fetched. Real ones are a few KB.
const maxJWKSBytes = 1 << 20

// keySet is one parsed JWKS: its usable signature verification keys.
// Immutable once made.
type keySet struct {
	// Invariant: every Key is an *rsa.PublicKey, *ecdsa.PublicKey or
	// ed25519.PublicKey, and no Use is other than "" or "sig".
	keys []jose.JSONWebKey
}

// parseJWKS keeps the keys of a JWKS that can verify a signature. It
// skips, rather than refuses the set for, a key it cannot use (a
// symmetric one, an encryption one, a type go-jose does not know), as
// identity providers publish sets with keys for other purposes. A set with
// no usable key is an error.
func parseJWKS(data []byte) (*keySet, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("JWKS is not a JSON key set: %w", err)
	}
	set := &keySet{}
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		// A private key's public half; invalid (Key nil) for a
		// symmetric key.
		pub := k.Public()
		if !pub.Valid() {
			continue
		}
		switch pub.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			set.keys = append(set.keys, pub)
		}
	}
	if len(set.keys) == 0 {
		return nil, fmt.Errorf("JWKS has no usable signature key (of %d)", len(raw.Keys))
	}
	return set, nil
}

// match returns the keys that may have signed a token with header kid
// and alg: those with that key id (any, for a token without one), no
// other algorithm named in the key, and a type that fits alg.
func (s *keySet) match(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range s.keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != string(alg) {
			continue
		}
		if keyFitsAlgorithm(k.Key, alg) {
			out = append(out, k)
		}
	}
	return out
}

// jwksLoader reads a key set from where it lives.
type jwksLoader interface {
	// load returns the set's bytes, or nil and no error when force is
	// false and the source is known not to have changed since the last
	// load. REQUIRES: keySource.loadMu held (it owns the loader's state).
	load(ctx context.Context, force bool) ([]byte, error)
}

// keySource is the current key set and its refreshes.
type keySource struct {
	loader          jwksLoader
	refreshInterval time.Duration
	now             func() time.Time

	// loadMu serializes loads and owns the loader. Lock order: loadMu,
	// then mu; mu is never held during I/O.
	loadMu sync.Mutex

	mu struct {
		sync.Mutex
		// Invariant: non-nil once newKeySource has returned.
		set *keySet
		// checkedAt is when the last periodic refresh was claimed.
		checkedAt time.Time
		// forcedAt is when the last unknown-key refresh was claimed.
		forcedAt time.Time
		// lastErr is the last refresh's failure, nil after a success.
		lastErr error
	}
}

func newKeySource(loader jwksLoader, refreshInterval time.Duration, now func() time.Time) (*keySource, error) {
	ks := &keySource{loader: loader, refreshInterval: refreshInterval, now: now}
	ks.loadMu.Lock()
	defer ks.loadMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	data, err := loader.load(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKSUnavailable, err)
	}
	set, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKSUnavailable, err)
	}
	ks.mu.set = set
	ks.mu.checkedAt = now()
	return ks, nil
}

// lookup returns the keys that may have signed a token with header kid
// and alg (keySet.match), refreshing the set first if a periodic refresh
// is due, or else, if no key matches, if an unknown-key refresh is
// allowed.
func (ks *keySource) lookup(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	now := ks.now()
	ks.mu.Lock()
	set := ks.mu.set
	due := now.Sub(ks.mu.checkedAt) >= ks.refreshInterval
	if due {
		ks.mu.checkedAt = now // claimed: the other callers go on with set
	}
	ks.mu.Unlock()
	if due {
		set = ks.reload(false)
	}
	if keys := set.match(kid, alg); len(keys) > 0 || due {
		// A set refreshed just now is not refreshed again for this
		// token: the unknown-key refresh is for keys published since.
		return keys
	}
	ks.mu.Lock()
	force := now.Sub(ks.mu.forcedAt) >= unknownKeyRefreshInterval
	if force {
		ks.mu.forcedAt = now
	}
	ks.mu.Unlock()
	if !force {
		return nil
	}
	return ks.reload(true).match(kid, alg)
}

// reload loads the set again and returns the set in force after it: the
// new one, or the old one if the source was unchanged or the load failed.
func (ks *keySource) reload(force bool) *keySet {
	ks.loadMu.Lock()
	defer ks.loadMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	data, err := ks.loader.load(ctx, force)
	var set *keySet
	if err == nil && data != nil {
		set, err = parseJWKS(data)
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	switch {
	case err != nil:
		ks.mu.lastErr = err
	case set != nil:
		ks.mu.set = set
		ks.mu.lastErr = nil
	default:
		ks.mu.lastErr = nil // unchanged
	}
	return ks.mu.set
}

// RefreshError returns why the last refresh of the key set failed, or nil
// if it succeeded: for a health check or a log line. The keys in use are
// then the last ones loaded.
func (v *Validator) RefreshError() error {
	v.keys.mu.Lock()
	defer v.keys.mu.Unlock()
	return v.keys.mu.lastErr
}

// fileLoader reads a JWKS file.
type fileLoader struct {
	path string
	// last is the file as it was at the last load; owned by loadMu.
	last os.FileInfo
}

func (f *fileLoader) load(_ context.Context, force bool) ([]byte, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, err
	}
	if !force && f.last != nil && os.SameFile(f.last, fi) && fi.ModTime().Equal(f.last.ModTime()) && fi.Size() == f.last.Size() {
		return nil, nil
	}
	if fi.Size() > maxJWKSBytes {
		return nil, fmt.Errorf("JWKS file %s is %d bytes, more than %d", f.path, fi.Size(), maxJWKSBytes)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	// Remembered even if data does not parse: a broken file is not read
	// again until it changes (or a token names an unknown key).
	f.last = fi
	return data, nil
}

// urlLoader fetches a JWKS over HTTP(S). It always fetches: an identity
// provider's JWKS endpoint is cheap and RefreshInterval already bounds
// how often.
type urlLoader struct {
	url    string
	client *http.Client
}

func (u *urlLoader) load(ctx context.Context, _ bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u.url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.url, err)
	}
	if len(data) > maxJWKSBytes {
		return nil, errors.New("JWKS response larger than 1 MiB")
	}
	return data, nil
}
