package replica

import (
	"sync/atomic"
	"time"
)

// Replay isolation (issue 19): consumer fetches that read far behind
// their partition's log end (more than replay.tail.bytes: a backfill, a
// new consumer group reading from the start) draw on a per-node byte
// budget, replay.max.bytes.per.second, so a backfill at full speed
// cannot take the cores, disks and page cache that the consumers and
// producers at the tail need. Reads at the tail never draw on it, nor do
// followers' fetches (the reassignment throttle, throttle.go, is theirs).
//
// The budget is a token bucket of one second (byteRate, as the
// reassignment throttle's). A replay read asks for at most what the
// bucket holds and is charged what it returned once its fetch answers
// (a long-polling fetch reads again when woken, and only its last read
// is sent); the first partition of a fetch may still return one whole
// batch past it, as every fetch does, and the bucket goes into debt.
// While the bucket is empty a replay partition returns nothing, and a
// fetch with nothing else to return waits (up to its MaxWait) until the
// bucket holds bytes again rather than answering at once, so a held
// consumer does not spin; appends to its partitions do not wake it
// meanwhile (they would only have it read and be held again).

// replayBudget is the node's budget: the rate from each image, and the
// tail size that tells a replay from a tail read.
type replayBudget struct {
	bucket byteRate
	// on: a rate is set (read on every consumer fetch partition without
	// the bucket's lock).
	on   atomic.Bool
	tail atomic.Int64
	// read and held count replay bytes returned and replay partition
	// reads held back for an empty bucket, since the node started.
	read, held atomic.Int64
}

func (r *replayBudget) set(rate, tail int64, now time.Time) {
	r.bucket.setRate(rate, now)
	r.tail.Store(tail)
	r.on.Store(rate > 0)
}

// ReplayStats is the replay budget's state, for the node's metrics.
type ReplayStats struct {
	// Rate is replay.max.bytes.per.second (0: none) and TailBytes
	// replay.tail.bytes.
	Rate, TailBytes int64
	// Bytes counts what replay reads returned, Held the replay partition
	// reads held back for an empty budget, since the node started.
	Bytes, Held int64
}

// ReplayStats reports the replay budget.
func (m *Manager) ReplayStats() ReplayStats {
	return ReplayStats{
		Rate: m.replay.bucket.currentRate(), TailBytes: m.replay.tail.Load(),
		Bytes: m.replay.read.Load(), Held: m.replay.held.Load(),
	}
}

// replayLimit is the limit of a consumer read of p at offset: limit
// itself at the tail or without a budget; for a replay, at most what the
// bucket holds, and replay true. held: the bucket is empty, so nothing
// may be read.
func (f *fetch) replayLimit(p *Partition, offset int64, limit int) (newLimit int, replay, held bool) {
	b := &f.m.replay
	if !b.on.Load() || f.params.Isolation == IsolationLogEnd {
		return limit, false, false
	}
	behind, err := p.log.BytesBehind(offset)
	if err != nil || behind <= b.tail.Load() {
		return limit, false, false
	}
	// Less what this read took already from other replay partitions:
	// it is charged when the fetch answers.
	avail := b.bucket.available(f.m.opts.Now()) - int64(f.replayBytes)
	if avail <= 0 {
		b.held.Add(1)
		return 0, true, true
	}
	return int(min(int64(limit), avail)), true, false
}

// chargeReplay charges what the fetch's last read returned for replay
// partitions: once, as the fetch answers.
func (f *fetch) chargeReplay() {
	if f.replayBytes > 0 {
		f.m.replay.bucket.charge(f.replayBytes, f.m.opts.Now())
		f.m.replay.read.Add(int64(f.replayBytes))
	}
}

// replayWait is how long a fetch held by the budget should wait before
// reading again: until the bucket holds bytes, at most maxWait.
func (f *fetch) replayWait(maxWait time.Duration) time.Duration {
	if !f.replayHeld {
		return maxWait
	}
	return min(maxWait, max(f.m.replay.bucket.wait(f.m.opts.Now()), time.Millisecond))
}
