package bench

import (
	"context"
	"time"
)

// Clock is the time source of pacing and latency accounting, so a test
// can run producers against a clock it controls (a broker that stalls for
// exactly half a second, with no real waiting).
//
// Threads: Now is called from producer, consumer and driver goroutines at
// once; Sleep from one producer goroutine each.
//
// Not clock.Clock: pacing sleeps, and its test clock moves on Sleep, not Advance.
type Clock interface {
	Now() time.Time
	// Sleep returns after d, or early with ctx.Err() when ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the machine's clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C: // slept the whole time
		return nil
	case <-ctx.Done(): // the run was cancelled
		return ctx.Err()
	}
}
