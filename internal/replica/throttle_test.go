package replica

import (
	"math"
	"testing"
	"time"
)

// The bucket on a made-up clock: no throttle lets anything through; a
// throttle starts empty, fills at its rate up to a second's worth, goes
// into debt when charged more than it held, and says how long until it
// holds a byte again.
func TestByteRate(t *testing.T) {
	var b byteRate
	t0 := time.Unix(1000, 0)
	if got := b.available(t0); got != math.MaxInt64 {
		t.Fatalf("no throttle: available %d", got)
	}
	b.charge(1<<30, t0)
	if b.wait(t0) != 0 {
		t.Fatal("no throttle: a charge made it wait")
	}

	b.setRate(1000, t0)
	if got := b.available(t0); got != 0 {
		t.Fatalf("a new throttle holds %d, want 0 (it starts empty)", got)
	}
	if got := b.wait(t0); got != time.Millisecond {
		t.Fatalf("wait for the first byte at 1000 B/s: %v, want 1ms", got)
	}
	if got := b.available(t0.Add(250 * time.Millisecond)); got != 250 {
		t.Fatalf("after 250ms: %d, want 250", got)
	}
	if got := b.available(t0.Add(10 * time.Second)); got != 1000 {
		t.Fatalf("after 10s idle: %d, want the burst, 1000", got)
	}
	t1 := t0.Add(10 * time.Second)
	b.charge(3000, t1) // a first batch larger than what was left
	if got := b.available(t1); got != -2000 {
		t.Fatalf("after a charge of 3000 on 1000: %d, want -2000", got)
	}
	if got := b.wait(t1); got != 2001*time.Millisecond {
		t.Fatalf("wait to pay back the debt: %v, want 2.001s", got)
	}
	// Lowering the rate caps what it holds at the new burst; removing
	// the throttle and setting one again starts empty once more.
	t2 := t1.Add(time.Hour)
	b.setRate(100, t2)
	if got := b.available(t2); got != 100 {
		t.Fatalf("after lowering the rate: %d, want 100", got)
	}
	b.setRate(0, t2)
	b.setRate(100, t2.Add(time.Hour))
	if got := b.available(t2.Add(time.Hour)); got != 0 {
		t.Fatalf("a throttle set again holds %d, want 0", got)
	}
	if b.currentRate() != 100 {
		t.Fatalf("rate %d", b.currentRate())
	}
}

// Over a span, what the bucket lets through is the rate times the span
// (plus what it held at the start), however the fetches are sized.
func TestByteRateHoldsTheRate(t *testing.T) {
	var b byteRate
	now := time.Unix(0, 0)
	b.setRate(1<<20, now)
	var copied int64
	end := now.Add(10 * time.Second)
	for now.Before(end) {
		if avail := b.available(now); avail > 0 {
			n := int(min(avail, 1<<20)) + 16<<10 // the leader's answer overshoots by a batch
			b.charge(n, now)
			copied += int64(n)
		}
		now = now.Add(b.wait(now) + 3*time.Millisecond) // a round trip
	}
	if rate := float64(copied) / 10; rate < 0.95*(1<<20) || rate > 1.05*(1<<20) {
		t.Fatalf("copied at %.0f B/s, want 1 MiB/s within 5%%", rate)
	}
}
