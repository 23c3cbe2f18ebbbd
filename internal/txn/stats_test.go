package txn

import (
	"testing"
	"time"
)

// Stats counts what holds last stable offsets now and what completed.
func TestStats(t *testing.T) {
	h := newHarness(t)
	if s := h.c.Stats(); s != (Stats{}) {
		t.Fatalf("a new coordinator: %+v", s)
	}
	commit, ce := h.init("commit")
	h.add("commit", commit, ce, tp("a", 0))
	abandon, ae := h.init("abandon")
	h.add("abandon", abandon, ae, tp("a", 1))
	if s := h.c.Stats(); s.Ongoing != 2 {
		t.Fatalf("two open transactions: %+v", s)
	}
	if _, _, err := h.c.EndTxn(ctx, "commit", commit, ce, true, false); err != nil {
		t.Fatal(err)
	}
	h.waitCompleted("commit")
	h.clock.Advance(70 * time.Second) // past the 60 s timeout, at a check
	h.waitCompleted("abandon")
	if s := h.c.Stats(); s != (Stats{Ongoing: 0, Committed: 1, Aborted: 1, TimedOut: 1}) {
		t.Fatalf("after a commit and a timed-out abort: %+v", s)
	}
}
