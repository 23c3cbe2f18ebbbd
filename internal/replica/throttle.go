package replica

import (
	"math"
	"sync"
	"time"
)

// The reassignment throttle (follower.replication.throttled.rate): the
// bytes per second this node's followers may copy for the replicas a
// partition reassignment is adding here, so a new replica catching up
// on a large log leaves the disks and network to live traffic. Only
// those replicas are throttled; a replica already in its partition's
// replica set is never slowed, even while it catches up after a restart,
// because holding it back keeps its partition under-replicated.
//
// Kafka throttles both the leader's answers and the follower's fetches
// for the replicas named in topic configs. Fjord throttles the follower
// only: it is where the copy is written, and it knows from the image
// which of its replicas are being added, so no list of them has to be
// kept in step with the reassignment.
//
// The rate holds for all of this node's fetchers together (one per
// leader): a token bucket that a fetch draws on before it is sent (each
// throttled partition asks for at most what is left) and is charged
// with what was appended after. A first batch larger than what is left
// is still returned (Kafka's fetch always makes progress), so the
// bucket may go into debt; the next throttled fetch waits until it is
// paid back. Over any span longer than the burst, the bytes copied are
// the rate times the span.

// throttleBurst is how much the bucket holds at most: a second at the
// rate. It must cover a whole fetch round (the fetch, the append and,
// under flush.policy=ack, the fsync), or a slow round would lose what
// the bucket should have gained meanwhile and the copy run below the
// rate. A throttle that is set starts empty, so a reassignment started
// right after it does not begin with a burst.
const throttleBurst = time.Second

type byteRate struct {
	mu     sync.Mutex
	rate   float64 // bytes per second; 0: no throttle
	tokens float64
	last   time.Time
}

// setRate changes the rate (bytes per second, 0 for none), keeping
// what the bucket holds up to the new burst.
func (b *byteRate) setRate(rate int64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if float64(rate) == b.rate {
		return
	}
	b.refillLocked(now)
	if b.rate == 0 {
		b.tokens = 0
	}
	b.rate = float64(rate)
	if b.tokens > b.burstLocked() {
		b.tokens = b.burstLocked()
	}
}

func (b *byteRate) burstLocked() float64 {
	return max(b.rate*throttleBurst.Seconds(), 1)
}

func (b *byteRate) refillLocked(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.tokens+b.rate*now.Sub(b.last).Seconds(), b.burstLocked())
	}
	b.last = now
}

// available is what a fetch may ask for now: MaxInt64 without a
// throttle, 0 or less while the bucket is empty or in debt.
func (b *byteRate) available(now time.Time) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate == 0 {
		return math.MaxInt64
	}
	b.refillLocked(now)
	return int64(b.tokens)
}

// charge takes n copied bytes from the bucket.
func (b *byteRate) charge(n int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate == 0 {
		return
	}
	b.refillLocked(now)
	b.tokens -= float64(n)
}

// wait is how long until the bucket holds at least one byte again
// (0 when it does, or without a throttle).
func (b *byteRate) wait(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate == 0 {
		return 0
	}
	b.refillLocked(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// currentRate is the rate in bytes per second, 0 for none.
func (b *byteRate) currentRate() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.rate)
}
