package clock

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeRunsTimersInDeadlineOrder(t *testing.T) {
	c := NewFake(t0)
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

// TestFakeFromManyGoroutines arms and stops timers from several goroutines
// while another advances the clock (run it under -race): every timer whose
// Stop returned false fires exactly once, none whose Stop returned true
// fires, and callbacks run one at a time with the time never going back.
func TestFakeFromManyGoroutines(t *testing.T) {
	const (
		arming   = 4
		perArmer = 500
	)
	c := NewFake(t0)
	// fired and lastNow are written by callbacks without a lock: the race
	// detector fails the test if two callbacks ever run at once.
	var fired int
	lastNow := t0
	wrongOrder := false
	type armed struct {
		runs    atomic.Int32
		stopped bool
	}
	timers := make([][]*armed, arming)

	stop := make(chan struct{})
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		for {
			select {
			case <-stop: // the armers are done
				return
			default: // keep time moving under them
				c.Advance(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range arming {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range perArmer {
				a := &armed{}
				tm := c.AfterFunc(time.Duration(rng.IntN(50))*time.Millisecond, func() {
					a.runs.Add(1)
					fired++
					now := c.Now()
					if now.Before(lastNow) {
						wrongOrder = true
					}
					lastNow = now
				})
				if rng.IntN(2) == 0 {
					a.stopped = tm.Stop()
				}
				timers[g] = append(timers[g], a)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-advanced
	c.Advance(time.Second) // everything still pending is due

	want := 0
	for g := range timers {
		for i, a := range timers[g] {
			switch runs := a.runs.Load(); {
			case a.stopped && runs != 0:
				t.Fatalf("timer %d/%d: Stop returned true, then it ran %d times", g, i, runs)
			case !a.stopped && runs != 1:
				t.Fatalf("timer %d/%d ran %d times, want 1", g, i, runs)
			case !a.stopped:
				want++
			}
		}
	}
	if fired != want {
		t.Fatalf("callbacks ran %d times, want %d", fired, want)
	}
	if wrongOrder {
		t.Fatal("a callback saw an earlier time than the one before it")
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("Timers() = %d after every deadline passed, want 0", n)
	}
}
