package audit

import (
	"hash/maphash"
	"time"
)

// The rate limits are token buckets, decided here without goroutines or
// clocks: the caller passes the time in, so tests drive them by hand.
//
// Two buckets stand between an event and the queue, asked in this order:
//
//  1. the bucket of the event's key (limitKey: who, from which host), so
//     one client hammering a password or a topic it may not touch
//     spends its own tokens and not everyone's;
//  2. the log's bucket, which bounds the whole log's rate and so the
//     disk it can fill per second.
//
// The key's bucket is asked first: a token of the global bucket spent on
// an event its key then refused would let a flooder crowd out the rest
// after all.

// bucket is a token bucket. It holds at most burst tokens and gains rate
// tokens a second; an event takes one.
//
// Invariant: 0 <= tokens <= burst.
type bucket struct {
	tokens float64
	// last is when tokens was last brought up to date.
	last time.Time
}

// fullBucket is a bucket as of now that has not been used for a while.
func fullBucket(now time.Time, burst float64) bucket {
	return bucket{tokens: burst, last: now}
}

// refill brings b up to date at now. A clock that went backwards adds
// nothing (and does not move last back, so the tokens are not earned
// twice when it comes forward again).
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed.Seconds()*rate)
		b.last = now
	}
}

// take takes a token if there is one.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.refill(now, rate, burst)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full reports whether b, brought up to now, is full: it is then the
// same as a bucket never used, and may be forgotten.
func (b *bucket) full(now time.Time, rate, burst float64) bool {
	b.refill(now, rate, burst)
	return b.tokens >= burst
}

// limitKey is what a per-client bucket is kept for: a principal and the
// host it came from. For a failed authentication the principal is left
// out (keyFor): a name the client only claimed is not an identity, and an
// attacker trying a new user name on every attempt would otherwise get a
// fresh bucket for each.
type limitKey struct {
	principal, host string
}

// limiter decides which events are written. It is not safe for
// concurrent use; Log calls it under its lock.
type limiter struct {
	rate, burst       float64 // the whole log's
	keyRate, keyBurst float64 // each key's
	maxKeys           int

	global bucket
	// keys are the buckets of the keys seen lately, by a hash of the key
	// (maphash with a seed of this limiter's, so a client cannot choose
	// names that collide; a collision would only share a bucket).
	// Invariant: a key not in keys has a full bucket, so dropping a full
	// bucket (sweep) changes no decision. len(keys) <= maxKeys.
	keys map[uint64]*bucket
	seed maphash.Seed
	// overflow is the one bucket of every key that finds keys full of
	// buckets still in use: memory stays bounded when an attacker
	// spreads itself over more hosts than maxKeys, and those keys share
	// one key's rate while the keys already known keep theirs.
	overflow bucket
	// lastSweep is when keys was last swept for full buckets.
	lastSweep time.Time
}

// sweepInterval is how often at most the key map is swept when it is
// full (a sweep visits every key: at MaxClients 10,000, some 100 µs);
// idleSweepInterval how often it is swept anyway, when a new key comes,
// so the memory of a burst of clients is given back.
const (
	sweepInterval     = time.Second
	idleSweepInterval = time.Minute
)

func newLimiter(now time.Time, cfg Config) *limiter {
	return &limiter{
		rate: cfg.Rate, burst: float64(cfg.Burst),
		keyRate: cfg.ClientRate, keyBurst: float64(cfg.ClientBurst),
		maxKeys:   cfg.MaxClients,
		global:    fullBucket(now, float64(cfg.Burst)),
		keys:      make(map[uint64]*bucket),
		seed:      maphash.MakeSeed(),
		overflow:  fullBucket(now, float64(cfg.ClientBurst)),
		lastSweep: now,
	}
}

// allow reports whether an event of key k at now may be written, and
// takes its tokens if so; clientOver says that k's own bucket refused it
// (rather than the log's).
func (l *limiter) allow(now time.Time, k limitKey) (ok, clientOver bool) {
	if !l.keyBucket(now, k).take(now, l.keyRate, l.keyBurst) {
		return false, true
	}
	return l.global.take(now, l.rate, l.burst), false
}

// keyBucket returns k's bucket, making one if there is room.
func (l *limiter) keyBucket(now time.Time, k limitKey) *bucket {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(k.principal)
	h.WriteByte(0) // "ab"+"c" and "a"+"bc" are different keys
	h.WriteString(k.host)
	sum := h.Sum64()
	if b, ok := l.keys[sum]; ok {
		return b
	}
	if since := now.Sub(l.lastSweep); since >= idleSweepInterval || (len(l.keys) >= l.maxKeys && since >= sweepInterval) {
		l.sweep(now)
	}
	if len(l.keys) >= l.maxKeys {
		return &l.overflow
	}
	b := fullBucket(now, l.keyBurst)
	l.keys[sum] = &b
	return &b
}

// sweep forgets the keys whose buckets are full again.
func (l *limiter) sweep(now time.Time) {
	for sum, b := range l.keys {
		if b.full(now, l.keyRate, l.keyBurst) {
			delete(l.keys, sum)
		}
	}
	l.lastSweep = now
}
