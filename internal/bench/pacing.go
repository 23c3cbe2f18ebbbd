package bench

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Pacing and the latency accounting it implies.
//
// A fixed-rate producer sends record i at its intended time
// start + i/rate, and every latency counts from that intended time, not
// from when the send happened. When the system stalls, the producer
// falls behind (its client's buffer fills and Send blocks, or acks stop
// coming back), and then sends the overdue records as fast as it can;
// each of them is charged the time it waited for its turn. Measuring
// from the actual send instead would charge the whole stall to the one
// record that was in flight and none to the thousands the producer did
// not get to send: the stall would vanish from every percentile below
// the top one ("coordinated omission").
//
// A producer with no rate (producerRate 0) sends as fast as the system
// takes records; its intended time is simply when it called Send.

// window is a half-open interval of unix nanoseconds: the part of a run
// that is measured. to is math.MaxInt64 while the end is not known in
// advance (a count or backlog run ends when its records are done).
type window struct{ from, to int64 }

func (w window) contains(t int64) bool { return t >= w.from && t < w.to }

// open reports whether the window's end is not fixed.
func (w window) open() bool { return w.to == math.MaxInt64 }

// pacer hands out intended send times.
type pacer struct {
	clock      Clock
	startNanos int64
	// intervalNanos is 1e9/rate; 0 means as fast as possible.
	intervalNanos float64
}

// wait returns record i's intended send time, first sleeping until then
// if it is still ahead. A producer behind schedule does not sleep: it
// catches up, and its records carry the times they were due.
func (p *pacer) wait(ctx context.Context, i int64) (int64, error) {
	if p.intervalNanos == 0 {
		return p.clock.Now().UnixNano(), nil
	}
	intended := p.startNanos + int64(float64(i)*p.intervalNanos)
	if ahead := intended - p.clock.Now().UnixNano(); ahead > 0 {
		if err := p.clock.Sleep(ctx, time.Duration(ahead)); err != nil {
			return 0, err
		}
	}
	return intended, nil
}

// producerTask is one producer of a run: its pacing, its payloads and
// what it measured.
//
// Threads: run is called on one goroutine, which owns sent; done is
// called from the driver's goroutines, so what it updates is atomic or
// behind the latency recorder's lock.
type producerTask struct {
	clock    Clock
	producer Producer
	pacer    pacer
	payload  *payloadWriter
	keys     *keyChooser
	// index is the producer's place among its topic's producers: the
	// top bits of its records' sequences.
	index int
	// win is the measured window. Sending stops at its end; acks inside
	// it count towards throughput, and records intended inside it
	// towards latency.
	win window
	// quota is how many records intended inside win to send (a count or
	// backlog run); -1 for no limit (a run measured by time).
	quota int64

	sent     int64
	acked    atomic.Int64
	failed   atomic.Int64
	winAcked atomic.Int64
	lastAck  atomic.Int64 // unix nanos of the latest ack counted in winAcked
	latency  *latencyRecorder

	errMu    sync.Mutex
	firstErr error
}

// ctxCheckEvery is how often (in records) a producer that never sleeps
// looks at its context.
const ctxCheckEvery = 64

// run sends records until the window ends, the quota is met or ctx ends.
func (t *producerTask) run(ctx context.Context) {
	var measured int64
	for i := int64(0); ; i++ {
		if i%ctxCheckEvery == 0 && ctx.Err() != nil {
			return
		}
		intended, err := t.pacer.wait(ctx, i)
		if err != nil || intended >= t.win.to {
			return
		}
		if t.quota >= 0 && intended >= t.win.from {
			if measured == t.quota {
				return
			}
			measured++
		}
		value := t.payload.next(intended, sequence(t.index, i))
		t.sent++
		t.producer.Send(ctx, t.keys.next(), value, func(err error) { t.done(intended, err) })
	}
}

// done accounts for one record's acknowledgement or failure.
func (t *producerTask) done(intended int64, err error) {
	now := t.clock.Now().UnixNano()
	if err != nil {
		if t.failed.Add(1) == 1 {
			t.errMu.Lock()
			t.firstErr = err
			t.errMu.Unlock()
		}
		return
	}
	t.acked.Add(1)
	if t.win.contains(now) {
		t.winAcked.Add(1)
		storeMax(&t.lastAck, now)
	}
	if t.win.contains(intended) {
		t.latency.record(now - intended)
	}
}

func (t *producerTask) err() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.firstErr
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
