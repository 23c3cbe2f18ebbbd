package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance is called, so tests can
// expire sessions, rebalances, lag and heartbeat deadlines in microseconds
// and without races against real time.
//
// Threads: every method may be called from any goroutine. Advance runs
// the callbacks of the timers it passes on the calling goroutine, one at a
// time, in deadline order (ties in creation order), with the clock's Now
// set to each timer's deadline while it runs; a callback may call
// AfterFunc (a timer it sets inside the advanced span fires in the same
// Advance) but must not call Advance.
type Fake struct {
	advanceMu sync.Mutex // one Advance at a time, so callbacks run in order
	mu        struct {
		sync.Mutex
		now    time.Time
		seq    uint64
		timers fakeTimers
	}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake {
	c := &Fake{}
	c.mu.now = start
	return c
}

// Now returns the clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// AfterFunc arranges for f to run when the clock has been advanced by d
// (d <= 0: at the next Advance, even Advance(0)).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.seq++
	t := &fakeTimer{clock: c, at: c.mu.now.Add(d), seq: c.mu.seq, f: f, index: -1}
	heap.Push(&c.mu.timers, t)
	return t
}

// Advance moves the clock forward by d, running every timer due on the
// way.
func (c *Fake) Advance(d time.Duration) {
	c.advanceMu.Lock()
	defer c.advanceMu.Unlock()
	c.mu.Lock()
	target := c.mu.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.mu.timers) == 0 || c.mu.timers[0].at.After(target) {
			c.mu.now = target
			c.mu.Unlock()
			return
		}
		t := heap.Pop(&c.mu.timers).(*fakeTimer)
		if t.at.After(c.mu.now) {
			c.mu.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}

// Timers returns how many timers are waiting, so a test can wait for a
// goroutine to have armed one before it advances the clock.
func (c *Fake) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.timers)
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	seq   uint64
	f     func()
	index int // in the heap; -1 once fired or stopped
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.mu.timers, t.index)
	return true
}

// fakeTimers is a min-heap by (deadline, creation order).
type fakeTimers []*fakeTimer

func (h fakeTimers) Len() int { return len(h) }
func (h fakeTimers) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h fakeTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeTimers) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
