package node

import (
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
)

// The leader lease runs for its duration from the send time of the last
// answered heartbeat; a grant that this node's own active controller may
// have answered ends when that controller's term does; a cluster of one
// never enforces it.
func TestLease(t *testing.T) {
	const d = 600 * time.Millisecond
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var term uint64
	l := newLease(clk, d, func() uint64 { return term }, true)
	if l.Held() {
		t.Fatal("held before any heartbeat was answered")
	}

	// Remote answer: runs d from the send time, not the answer's.
	sent := l.now()
	clk.Advance(90 * time.Millisecond) // the answer took 90 ms
	l.renew(sent, 0, 0)
	clk.Advance(d - 90*time.Millisecond - time.Millisecond)
	if !l.Held() || l.Remaining() != time.Millisecond {
		t.Fatalf("held %v, remaining %v, 1 ms before the end; want held, 1ms", l.Held(), l.Remaining())
	}
	clk.Advance(time.Millisecond)
	if l.Held() || l.Remaining() != 0 {
		t.Fatal("still held a whole lease after the send")
	}

	// A renewal takes it back.
	l.renew(l.now(), 0, 0)
	if !l.Held() {
		t.Fatal("not held after a renewal")
	}

	// Local answer in term 4: ends the moment term 4 does, long before d.
	term = 4
	l.renew(l.now(), 4, 4)
	clk.Advance(10 * time.Millisecond)
	if !l.Held() {
		t.Fatal("a grant of this node's active controller is not held within its term")
	}
	term = 0
	if l.Held() {
		t.Fatal("still held after this node's active controller stepped down")
	}
	term = 5 // active again, a new term: that grant is not this one's
	if l.Held() {
		t.Fatal("a grant of term 4 is held in term 5")
	}

	// Active before the heartbeat, not after: it may have answered, and
	// has stepped down since.
	term = 0
	l.renew(l.now(), 5, 0)
	if l.Held() {
		t.Fatal("held on a grant of a term that ended during the heartbeat")
	}

	// A cluster of one: always held.
	one := newLease(clk, d, func() uint64 { return 0 }, false)
	if !one.Held() {
		t.Fatal("a cluster of one's lease is not held")
	}
}
