package bench

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Pacing and latency accounting, on a clock the test controls: time
// moves only when the producer sleeps or the fake broker spends time, so
// a half-second stall is exact and costs no real time.

// fakeClock's Sleep advances the time instead of waiting.
type fakeClock struct {
	mu  sync.Mutex
	now int64 // unix nanos
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Unix(0, c.now)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.advance(d)
	return ctx.Err()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now += int64(d)
	}
}

// clockedBroker is a Producer that takes service time of the fake
// clock for each record, and stalls once: the record sent first at or
// after stallAt takes stallFor. It acknowledges synchronously, and
// records what a producer measuring from the actual send would see.
type clockedBroker struct {
	clock             *fakeClock
	service           time.Duration
	stallAt           int64
	stallFor          time.Duration
	stalled           bool
	fromActualSend    *hdrhistogram.Histogram
	intended, counter []int64
}

func (b *clockedBroker) Send(_ context.Context, _, value []byte, done func(error)) {
	sent, seq, ok := readHeader(value)
	if !ok {
		panic("value without a header")
	}
	_, counter := splitSequence(seq)
	b.intended = append(b.intended, sent)
	b.counter = append(b.counter, counter)
	start := b.clock.Now().UnixNano()
	b.clock.advance(b.service)
	if !b.stalled && start >= b.stallAt {
		b.stalled = true
		b.clock.advance(b.stallFor)
	}
	recordNanos(b.fromActualSend, b.clock.Now().UnixNano()-start)
	done(nil)
}

func (b *clockedBroker) Flush(context.Context) error { return nil }
func (b *clockedBroker) Close() error                { return nil }

const clockStart = int64(1_700_000_000) * 1e9

func newPacedTask(clock *fakeClock, broker *clockedBroker, rate float64, win window, quota int64) *producerTask {
	var interval float64
	if rate > 0 {
		interval = 1e9 / rate
	}
	return &producerTask{
		clock:    clock,
		producer: broker,
		pacer:    pacer{clock: clock, startNanos: clockStart, intervalNanos: interval},
		payload:  newPayloadWriter(make([]byte, 4096), 64, 1, 0),
		keys:     &keyChooser{dist: NoKey},
		index:    3,
		win:      win,
		quota:    quota,
		latency:  newLatencyRecorder(),
	}
}

func taskLatency(p *producerTask) Latency {
	h := newLatencyHistogram()
	p.latency.mergeInto(h)
	return summarizeLatency(h)
}

// The acceptance point: a stalled broker shows up in p99.
func TestPacingStallShowsInP99(t *testing.T) {
	clock := &fakeClock{now: clockStart}
	broker := &clockedBroker{
		clock:          clock,
		service:        10 * time.Microsecond,
		stallAt:        clockStart + 2*int64(time.Second),
		stallFor:       500 * time.Millisecond,
		fromActualSend: newLatencyHistogram(),
	}
	// 1,000 records/s for 10 s: 10,000 records, of which the 500 due
	// during the stall wait up to 500 ms for their turn.
	win := window{clockStart, clockStart + 10*int64(time.Second)}
	task := newPacedTask(clock, broker, 1000, win, -1)
	task.run(context.Background())

	if task.sent != 10_000 || task.acked.Load() != 10_000 {
		t.Fatalf("sent %d, acked %d; want 10,000 records at 1,000/s for 10 s", task.sent, task.acked.Load())
	}
	l := taskLatency(task)
	// Records 2,000..2,499 were due during the stall and are charged
	// 500, 499, ..., 1 ms: 5% of all records, so p99 is about 400 ms.
	if l.P99Ms < 380 || l.P99Ms > 420 {
		t.Errorf("p99 = %.1f ms, want about 400 ms (the stall charged to every record due during it)", l.P99Ms)
	}
	if l.MaxMs < 499 || l.MaxMs > 501 {
		t.Errorf("max = %.1f ms, want the 500 ms stall", l.MaxMs)
	}
	if l.P50Ms > 0.011 {
		t.Errorf("p50 = %.3f ms, want the 10 µs service time", l.P50Ms)
	}
	// Measured from the actual send, the stall hits one record: p99 is
	// the service time and only the max shows anything. That is the
	// coordinated omission the intended send time avoids.
	naiveP99 := float64(broker.fromActualSend.ValueAtQuantile(99)) / 1000
	if naiveP99 > 0.011 {
		t.Errorf("from the actual send p99 = %.3f ms; the test's premise is that it hides the stall", naiveP99)
	}
	// The stalled records' latencies fall evenly from 500 ms to 0: the
	// 250 slowest (p97.5) waited at least 250 ms.
	h := newLatencyHistogram()
	task.latency.mergeInto(h)
	if p := float64(h.ValueAtQuantile(97.5)) / 1000; p < 245 || p > 255 {
		t.Errorf("p97.5 = %.1f ms, want about 250 ms", p)
	}
}

// Record i is intended at start + i/rate exactly, and carries that time
// and its counter in its header; a producer ahead of schedule sleeps.
func TestPacingHonoursTheRate(t *testing.T) {
	clock := &fakeClock{now: clockStart}
	broker := &clockedBroker{clock: clock, service: time.Microsecond, stallAt: math.MaxInt64, fromActualSend: newLatencyHistogram()}
	win := window{clockStart, clockStart + 2*int64(time.Second)}
	task := newPacedTask(clock, broker, 5000, win, -1)
	task.run(context.Background())
	if task.sent != 10_000 {
		t.Fatalf("sent %d records at 5,000/s for 2 s, want 10,000", task.sent)
	}
	for i, sent := range broker.intended {
		if want := clockStart + int64(i)*200_000; sent != want {
			t.Fatalf("record %d intended at %d, want start + %d µs", i, sent-clockStart, i*200)
		}
		if broker.counter[i] != int64(i) {
			t.Fatalf("record %d has counter %d", i, broker.counter[i])
		}
	}
	// Every record left on time, so each latency is the service time.
	if l := taskLatency(task); l.MaxMs > 0.0011 {
		t.Errorf("max latency %.4f ms with a 1 µs broker that never stalls", l.MaxMs)
	}
}

// Without a rate a producer sends as fast as the broker takes records,
// each intended when it is sent; a quota ends the run.
func TestPacingMaxRateAndQuota(t *testing.T) {
	clock := &fakeClock{now: clockStart}
	broker := &clockedBroker{clock: clock, service: 50 * time.Microsecond, stallAt: math.MaxInt64, fromActualSend: newLatencyHistogram()}
	task := newPacedTask(clock, broker, 0, window{clockStart, math.MaxInt64}, 1234)
	task.run(context.Background())
	if task.sent != 1234 {
		t.Fatalf("sent %d, want the quota of 1,234", task.sent)
	}
	for i := 1; i < len(broker.intended); i++ {
		if d := broker.intended[i] - broker.intended[i-1]; d != 50_000 {
			t.Fatalf("records %d and %d intended %d ns apart, want back to back (50 µs)", i-1, i, d)
		}
	}
	if l := taskLatency(task); l.P50Ms != 0.05 || l.Count != 1234 {
		t.Errorf("latency p50 %.3f ms over %d records, want 0.05 ms over 1,234", l.P50Ms, l.Count)
	}
	if got := clock.Now().UnixNano() - clockStart; got != 1234*50_000 {
		t.Errorf("the run took %d ns of clock, want 1,234 x 50 µs", got)
	}
}

// A warmup's records are sent and acknowledged but not measured; the
// quota counts measured records only.
func TestPacingWarmupNotMeasured(t *testing.T) {
	clock := &fakeClock{now: clockStart}
	broker := &clockedBroker{clock: clock, service: time.Microsecond, stallAt: math.MaxInt64, fromActualSend: newLatencyHistogram()}
	from := clockStart + int64(time.Second)
	task := newPacedTask(clock, broker, 100, window{from, math.MaxInt64}, 50)
	task.run(context.Background())
	if task.sent != 150 || task.acked.Load() != 150 {
		t.Errorf("sent %d, acked %d; want 100 warmup + 50 measured", task.sent, task.acked.Load())
	}
	if l := taskLatency(task); l.Count != 50 {
		t.Errorf("latency of %d records, want the 50 measured", l.Count)
	}
	if n := task.winAcked.Load(); n != 50 {
		t.Errorf("%d acks in the window, want 50", n)
	}
}

// A cancelled context ends a producer that is asleep or sending.
func TestPacingStopsOnCancel(t *testing.T) {
	clock := &fakeClock{now: clockStart}
	broker := &clockedBroker{clock: clock, service: time.Microsecond, stallAt: math.MaxInt64, fromActualSend: newLatencyHistogram()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, rate := range []float64{0, 1000} {
		task := newPacedTask(clock, broker, rate, window{clockStart, math.MaxInt64}, -1)
		task.run(ctx)
		if task.sent > ctxCheckEvery {
			t.Errorf("rate %v: sent %d records after the context ended", rate, task.sent)
		}
	}
}

// shares splits a count evenly between producers.
func TestShares(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		k    int
		want []int64
	}{{10, 3, []int64{4, 3, 3}}, {2, 4, []int64{1, 1, 0, 0}}, {8, 2, []int64{4, 4}}} {
		got := shares(tc.n, tc.k)
		var sum int64
		for i := range got {
			sum += got[i]
			if got[i] != tc.want[i] {
				t.Errorf("shares(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
				break
			}
		}
		if sum != tc.n {
			t.Errorf("shares(%d, %d) sums to %d", tc.n, tc.k, sum)
		}
	}
}
