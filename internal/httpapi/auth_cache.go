package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"

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
