package audit

import (
	"cmp"
	"hash/maphash"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// The rate limits are token buckets, decided here without goroutines or
// clocks: the caller passes the time in, so tests drive them by hand.
//
// An event is of one of three classes (class): a success, a failed
// authentication, or a denial. Two tiers of buckets stand between it
// and the queue, asked in this order:
//
//  1. the bucket of its key (limitKey: its class, who, and from which
//     host, an IPv6 host by its /64), so one client hammering a password
//     or a topic it may not touch spends its own tokens and not
//     everyone's;
//  2. its class's log-wide budget, which bounds the disk the log can
//     fill a second:
//     - successes have a bucket of their own (Rate, Burst), so a busy
//     cluster's logins can never crowd out a failure or a denial;
//     - failures and denials share one budget of Rate and Burst, split
//     in three: a quarter reserved for failed authentications, a
//     quarter reserved for denials, and half for either. An event
//     takes from its class's reserve first, then from the shared half.
//
// The reserves are there because the per-key buckets cannot stop many
// keys at once: 20 IPv4 hosts at 50 a second fill a 1,000-a-second
// bucket, and (with the overflow bucket full) a /48 holds 65,536 /64s.
// A failed login needs no credentials, a denial needs a principal that
// authenticated: with the reserves, hosts that cannot log in can hide
// no denial, and a principal flooding denials cannot hide the failed
// logins of a password attack. Within one class a flood from many keys
// can still crowd out that class's other events; they are counted, and
// the dropped line names the keys that dropped the most (droppers).
//
// The key's bucket is asked first: a token of a log-wide bucket spent
// on an event its key then refused would let a flooder crowd out the
// rest after all.

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

// class is which log-wide budget an event draws on.
type class uint8

const (
	classSuccess class = iota // authentication successes
	classFailure              // failed authentications
	classDenial               // authorization denials (and any other result)
	numClasses
)

// limitKey is what a per-client bucket is kept for: a class, a principal
// and the host it came from (clientHost: an IPv6 host by its /64). For a
// failed authentication the principal is left out (keyFor): a name the
// client only claimed is not an identity, and an attacker trying a new
// user name on every attempt would otherwise get a fresh bucket for
// each. The class keeps a busy client's successes from spending the
// tokens of its own failures and denials.
type limitKey struct {
	class           class
	principal, host string
}

// keyFor is the rate limit key of e.
func keyFor(e *Event) limitKey {
	host := clientHost(e.Client)
	switch {
	case e.Result == ResultSuccess:
		return limitKey{class: classSuccess, principal: e.Principal, host: host}
	case e.Kind == KindAuthentication && e.Result == ResultFailure:
		return limitKey{class: classFailure, host: host}
	default:
		return limitKey{class: classDenial, principal: e.Principal, host: host}
	}
}

// clientHost returns the host of a client address (host:port, or a bare
// host) as a rate limit key: an IPv4 address (or an IPv4-mapped IPv6
// one) as itself, an IPv6 address as its /64 ("2001:db8:1:2::/64"),
// anything else as it is. One IPv6 host is commonly given a whole /64 and
// may use any address in it: keyed by address, one host would have
// unlimited buckets.
func clientHost(client string) string {
	host := client
	if h, _, err := net.SplitHostPort(client); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return host
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64) // drops a zone too
	if err != nil {
		// Unreachable: 64 is within an IPv6 address.
		return host
	}
	return p.String()
}

// limiter decides which events are written. It is not safe for
// concurrent use; Log calls it under its lock.
type limiter struct {
	keyRate, keyBurst float64 // each key's
	maxKeys           int

	// The log-wide budgets (see the top of the file): successes' own,
	// the reserves of classFailure and classDenial, and the shared half
	// of failures and denials. reserveBurst is Burst/4 rounded down: a
	// Burst below 4 reserves nothing.
	// Invariant: 2*reserveRate+sharedRate == Rate and
	// 2*reserveBurst+sharedBurst == Burst.
	rate, burst               float64
	reserveRate, reserveBurst float64
	sharedRate, sharedBurst   float64
	successes, shared         bucket
	reserves                  [numClasses]bucket // of classFailure and classDenial

	// keys are the buckets of the keys seen lately, by a hash of the key
	// (maphash with a seed of this limiter's, so a client cannot choose
	// names that collide; a collision would only share a bucket).
	// Invariant: a key not in keys has a full bucket, so dropping a full
	// bucket (sweep) changes no decision. len(keys) <= maxKeys.
	keys map[uint64]*bucket
	seed maphash.Seed
	// overflow is, for each class, the one bucket of every key of it
	// that finds keys full of buckets still in use: memory stays bounded
	// when an attacker spreads itself over more hosts than maxKeys, and
	// those keys share one key's rate while the keys already known keep
	// theirs. One a class, so that hosts failing to log in cannot spend
	// the bucket of the denials (or successes) of new keys.
	overflow [numClasses]bucket
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
	reserveBurst := float64(cfg.Burst / 4)
	l := &limiter{
		keyRate: cfg.ClientRate, keyBurst: float64(cfg.ClientBurst),
		maxKeys:      cfg.MaxClients,
		rate:         cfg.Rate,
		burst:        float64(cfg.Burst),
		reserveRate:  cfg.Rate / 4,
		reserveBurst: reserveBurst,
		sharedRate:   cfg.Rate - 2*(cfg.Rate/4),
		sharedBurst:  float64(cfg.Burst) - 2*reserveBurst,
		keys:         make(map[uint64]*bucket),
		seed:         maphash.MakeSeed(),
		lastSweep:    now,
	}
	l.successes = fullBucket(now, l.burst)
	l.shared = fullBucket(now, l.sharedBurst)
	for c := range l.reserves {
		l.reserves[c] = fullBucket(now, l.reserveBurst)
		l.overflow[c] = fullBucket(now, l.keyBurst)
	}
	return l
}

// allow reports whether an event of key k at now may be written, and
// takes its tokens if so; clientOver says that k's own bucket refused it
// (rather than a log-wide one).
func (l *limiter) allow(now time.Time, k limitKey) (ok, clientOver bool) {
	if !l.keyBucket(now, k).take(now, l.keyRate, l.keyBurst) {
		return false, true
	}
	if k.class == classSuccess {
		return l.successes.take(now, l.rate, l.burst), false
	}
	if l.reserves[k.class].take(now, l.reserveRate, l.reserveBurst) {
		return true, false
	}
	return l.shared.take(now, l.sharedRate, l.sharedBurst), false
}

// keyBucket returns k's bucket, making one if there is room.
func (l *limiter) keyBucket(now time.Time, k limitKey) *bucket {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteByte(byte(k.class))
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
		return &l.overflow[k.class]
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

// droppers counts the events dropped by key (principal and host; the
// class left out) since the last one queued, for the dropped line's
// "top", so an operator sees who flooded the log. It is the Space-Saving
// algorithm (Metwally, Agrawal, El Abbadi 2005) in maxDroppers counters:
// memory stays bounded however many keys drop, and a key that dropped
// more than 1/maxDroppers of the events is sure to be among them. A key
// seen when every counter is taken replaces the smallest, inheriting its
// count as over; count-over is then a lower bound of the key's drops.
// Exact while at most maxDroppers keys have dropped. Tried first: a map
// of exact counts bounded at N keys, which an attacker defeats by
// dropping N events from N decoys before flooding from its own host.
type droppers struct {
	n int // counters in use
	c [maxDroppers]dropper
}

type dropper struct {
	principal, host string
	count, over     int64
}

const (
	maxDroppers = 16
	// topDroppers is how many keys a dropped line names at most.
	topDroppers = 3
)

// add counts one event of k dropped.
func (d *droppers) add(k limitKey) {
	for i := range d.n {
		if c := &d.c[i]; c.principal == k.principal && c.host == k.host {
			c.count++
			return
		}
	}
	if d.n < len(d.c) {
		d.c[d.n] = dropper{principal: k.principal, host: k.host, count: 1}
		d.n++
		return
	}
	least := &d.c[0]
	for i := range d.c {
		if d.c[i].count < least.count {
			least = &d.c[i]
		}
	}
	*least = dropper{principal: k.principal, host: k.host, count: least.count + 1, over: least.count}
}

// top returns the topDroppers keys that dropped the most, most first,
// with the number each is sure to have dropped, or nil if none has.
func (d *droppers) top() []droppedKey {
	c := slices.Clone(d.c[:d.n])
	slices.SortFunc(c, func(a, b dropper) int {
		return cmp.Or(cmp.Compare(b.count-b.over, a.count-a.over), cmp.Compare(a.host, b.host), cmp.Compare(a.principal, b.principal))
	})
	var out []droppedKey
	for _, x := range c[:min(len(c), topDroppers)] {
		out = append(out, droppedKey{Principal: x.principal, Host: x.host, Count: x.count - x.over})
	}
	return out
}

// reset forgets the counts (their dropped line is on its way).
func (d *droppers) reset() { *d = droppers{} }
