// Package clock is the time of Fjord's control-plane deadlines: the group
// coordinator's sessions, rebalances and offset retention today, and the
// follower fetchers, the ISR's lag checks and the broker heartbeats of
// the cluster work. Code that keeps such deadlines takes a Clock; Real
// is the time package and Fake is a clock a test moves by hand.
//
// Code that only reads the time (storage's append times and retention, the
// HTTP API's idempotency window) takes a Now func() time.Time instead and
// needs no Clock.
//
// # Why tests use Fake
//
// A test that sleeps until a deadline passes is slow when the deadline is
// long (a 30-minute session, a day's retention) and flaky when it is
// short: whether the timer fired before the test looked depends on how
// busy the machine was. On a Fake, time is an input. Advance(d) runs every
// timer due within d, in deadline order, before it returns, so after it
// the test sees exactly the state those deadlines produce: no sleeps, no
// wall-clock luck, and a week of retention costs microseconds.
//
// # Threads
//
// Every method of Real and Fake may be called from any goroutine at once.
// An AfterFunc callback runs on a goroutine of the Clock's choosing:
// Real's runs on its own (time.AfterFunc); Fake's on the goroutine calling
// Advance, one callback at a time. A callback may block and may call
// AfterFunc. Stop can lose the race with a callback that is starting, so a
// callback must check, under its owner's lock, that it is still wanted.
package clock

import (
	"context"
	"time"
)

// Clock is the time and the timers of code whose deadlines tests control.
//
// It is as small as its callers need: the group coordinator uses Now and
// AfterFunc, and nothing yet uses Reset, NewTimer, After or Sleep (a
// callback that re-arms calls AfterFunc again). Add one only with a caller
// that needs it, and give Fake the same behaviour.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once d has passed, unless the timer is stopped
	// first. See the package's Threads section for where f runs.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc. Stop reports whether it stopped f from
// running; f may already be running (or have run) when Stop returns
// false, which is why callbacks re-check that they are still wanted.
type Timer interface{ Stop() bool }

// Real returns the machine's clock: time.Now and time.AfterFunc.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Sleep waits d, or less if ctx ends first: it reports whether the whole
// of d passed. For the loops that poll or back off between tries and
// must stop when their context does (time.Sleep would hold them); their
// waits are not deadlines a test moves, so it is the time package's.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
