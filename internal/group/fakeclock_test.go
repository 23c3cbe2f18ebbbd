package group

import (
	"slices"
	"testing"
	"time"
)

func TestFakeClockRunsTimersInDeadlineOrder(t *testing.T) {
	c := NewFakeClock(t0)
	var ran []string
	var at []time.Duration
	record := func(name string) func() {
		return func() {
			ran = append(ran, name)
			at = append(at, c.Now().Sub(t0))
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	c.AfterFunc(time.Second, record("a2")) // same deadline: creation order
	stopped := c.AfterFunc(2*time.Second, record("never"))
	c.AfterFunc(10*time.Second, record("later"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.AfterFunc(0, func() {
		record("zero")()
		// A timer set by a callback inside the advanced span fires in
		// the same Advance.
		c.AfterFunc(time.Second, record("nested"))
	})
	if c.Timers() != 5 {
		t.Fatalf("Timers() = %d, want 5", c.Timers())
	}
	c.Advance(5 * time.Second)
	want := []string{"zero", "a", "a2", "nested", "c"}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	wantAt := []time.Duration{0, time.Second, time.Second, time.Second, 3 * time.Second}
	if !slices.Equal(at, wantAt) {
		t.Fatalf("ran at %v, want %v", at, wantAt)
	}
	if got := c.Now().Sub(t0); got != 5*time.Second {
		t.Fatalf("Now is t0+%v, want t0+5s", got)
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers() = %d, want 1 (later)", c.Timers())
	}
}
