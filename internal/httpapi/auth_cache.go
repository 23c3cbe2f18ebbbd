package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/sasl"
)

// passwordCache remembers the passwords that verified, so that a client
// sending Basic credentials on every request pays one PBKDF2, not one
// per request (a produce costs far less than the 1.8 ms of a check).
//
// An entry is keyed by a digest of the user and password, an HMAC under
// a key drawn when the process starts, never the password: a heap dump
// holds no password, and no digest that can be tested without that key.
// It holds the credential it was verified against (mechanism and
// StoredKey), and counts only while the user's credential in the image
// is still that one: a changed password (a new salt, so a new StoredKey),
// a removed and re-created user, or a removed user (no credential to
// compare with: never asked) all miss, and the next check runs in full.
// Failed checks are never remembered.
//
// Bounded: past max entries one is dropped (an arbitrary one, which Go's
// map iteration makes cheap and a guesser cannot aim at) before one is
// added. Each entry is about 200 bytes, so the default bound is ~2 MB.
type passwordCache struct {
	key [32]byte
	max int
	mu  struct {
		sync.Mutex
		entries map[[sha256.Size]byte]verifiedLogin
	}
}

// verifiedLogin is what a cached password was verified against.
type verifiedLogin struct {
	mechanism string
	storedKey []byte // a copy: the image's slices are not kept alive
}

func newPasswordCache(max int) (*passwordCache, error) {
	c := &passwordCache{max: max}
	if _, err := rand.Read(c.key[:]); err != nil {
		return nil, err
	}
	c.mu.entries = map[[sha256.Size]byte]verifiedLogin{}
	return c, nil
}

// digest is the cache key of user and password. The user's length comes
// first, so that no two (user, password) pairs make the same message.
func (c *passwordCache) digest(user, password string) [sha256.Size]byte {
	m := hmac.New(sha256.New, c.key[:])
	m.Write(binary.AppendUvarint(nil, uint64(len(user))))
	m.Write([]byte(user))
	m.Write([]byte(password))
	var d [sha256.Size]byte
	m.Sum(d[:0])
	return d
}

// verified reports whether the password of digest was verified against
// cred. An entry for another credential is stale and is dropped.
func (c *passwordCache) verified(d [sha256.Size]byte, cred sasl.ScramCredential) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.entries[d]
	if !ok {
		return false
	}
	if e.mechanism == cred.Mechanism && bytes.Equal(e.storedKey, cred.StoredKey) {
		return true
	}
	delete(c.mu.entries, d)
	return false
}

// remember records that the password of digest verified against cred.
func (c *passwordCache) remember(d [sha256.Size]byte, cred sasl.ScramCredential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.entries[d]; !ok && len(c.mu.entries) >= c.max {
		for k := range c.mu.entries {
			delete(c.mu.entries, k)
			break
		}
	}
	c.mu.entries[d] = verifiedLogin{mechanism: cred.Mechanism, storedKey: bytes.Clone(cred.StoredKey)}
}

// len is the number of entries (tests).
func (c *passwordCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.entries)
}

// defaultMaxSeenTokens bounds seenTokens: about 50 bytes an entry.
const defaultMaxSeenTokens = 10_000

// seenTokens remembers the bearer tokens that have logged in, until each
// expires, so that a client sending its token on every request writes
// one authentication-success audit event per token, not one per request
// (Basic writes one per password check, which the password cache makes
// one per credential; the Kafka listener one per SASL exchange). A
// failure is audited every time and is never remembered here.
//
// An entry is keyed by an HMAC of the token under a key drawn when the
// process starts, as the password cache is: no token, and nothing that
// can be tested against one without that key, is kept. Bounded: a full
// map first drops expired entries it meets (a few, so an insert stays
// O(1)), else an arbitrary one; a token dropped early is merely audited
// again.
type seenTokens struct {
	key [32]byte
	max int
	mu  struct {
		sync.Mutex
		// expiry of each token seen; the zero time: none (kept until
		// dropped for room).
		entries map[[sha256.Size]byte]time.Time
	}
}

func newSeenTokens(max int) (*seenTokens, error) {
	s := &seenTokens{max: max}
	if _, err := rand.Read(s.key[:]); err != nil {
		return nil, err
	}
	s.mu.entries = map[[sha256.Size]byte]time.Time{}
	return s, nil
}

// first reports whether token, valid until expiry, is not remembered at
// now, and remembers it.
func (s *seenTokens) first(token string, expiry, now time.Time) bool {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte(token))
	var d [sha256.Size]byte
	m.Sum(d[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.mu.entries[d]; ok && (exp.IsZero() || now.Before(exp)) {
		return false
	}
	if _, ok := s.mu.entries[d]; !ok && len(s.mu.entries) >= s.max {
		s.makeRoomLocked(now)
	}
	s.mu.entries[d] = expiry
	return true
}

// makeRoomLocked drops the expired entries among the first few the map
// yields, or, when none of them is, the first.
// REQUIRES: s.mu held.
func (s *seenTokens) makeRoomLocked(now time.Time) {
	const look = 8
	var victim [sha256.Size]byte
	n, dropped := 0, false
	for k, exp := range s.mu.entries {
		if n == 0 {
			victim = k
		}
		if !exp.IsZero() && !now.Before(exp) {
			delete(s.mu.entries, k)
			dropped = true
		}
		if n++; n == look {
			break
		}
	}
	if !dropped {
		delete(s.mu.entries, victim)
	}
}

// len is the number of entries (tests).
func (s *seenTokens) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.entries)
}
