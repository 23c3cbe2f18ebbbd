// Package testutil holds helpers shared by Fjord's tests. It is imported
// only from _test.go files.
package testutil

import (
	"testing"
	"time"
)

// pollInterval is how often Eventually looks again: short enough that a
// test waits for the condition, not for the poll.
const pollInterval = 5 * time.Millisecond

// Eventually calls cond until it returns nil, and fails the test with
// cond's last error once d has passed. Tests wait for conditions, not for
// time (STYLE.md, example 10): d is a bound on a condition that normally
// holds in milliseconds, never a duration the test relies on.
func Eventually(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	if err := Wait(d, cond); err != nil {
		t.Fatalf("condition not met after %v: %v", d, err)
	}
}

// Wait is Eventually for a caller that explains a failure itself: it
// returns nil once cond does, or cond's last error once d has passed.
func Wait(d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		<-tick.C // poll again
	}
}

// Receive waits for a value on ch and returns it, failing the test once
// d has passed without one; what names the value awaited, for the
// failure. As with Eventually, d bounds something that normally comes in
// milliseconds: a test that wants to show an answer came from somewhere
// other than a timeout gives the request a timeout far past d.
func Receive[T any](t testing.TB, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C: // the bound: fail
		t.Fatalf("%s not received after %v", what, d)
		panic("unreachable: Fatalf returned")
	}
}
