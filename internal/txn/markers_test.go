package txn

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/testutil"
)

// waitCalls waits until the marker sender has been called n times.
func (h *harness) waitCalls(n int) {
	h.t.Helper()
	testutil.Eventually(h.t, waitBound, func() error {
		if got := len(h.markers.calls()); got != n {
			return fmt.Errorf("%d marker calls, want %d", got, n)
		}
		return nil
	})
}

// Reference: C§8.3: a retriable failure sends that partition's marker
// again after a backoff (doubling), and only that partition's; the
// Complete record waits for it (C§8.4), and meanwhile Describe shows the
// partitions still awaiting markers.
func TestMarkersRetriedAfterRetriableFailure(t *testing.T) {
	h := newHarness(t)
	a0, b0 := tp("a", 0), tp("b", 0)
	h.markers.queue(a0, kerr.NotLeaderForPartition, kerr.RequestTimedOut)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, a0, b0)
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	h.waitCalls(1)
	h.waitTimers(periodicTimers + 1)
	if d := h.describe("t"); d.State != StatePrepareCommit || !slices.Equal(d.Partitions, []TopicPartition{a0}) {
		t.Fatalf("while a0 waits: %+v", d)
	}

	h.clock.Advance(49 * time.Millisecond)
	if n := len(h.markers.calls()); n != 1 {
		t.Fatalf("%d calls before the first backoff (50ms) passed", n)
	}
	h.clock.Advance(time.Millisecond)
	h.waitCalls(2)
	h.waitTimers(periodicTimers + 1)
	h.clock.Advance(99 * time.Millisecond)
	if n := len(h.markers.calls()); n != 2 {
		t.Fatalf("%d calls before the second backoff (100ms) passed", n)
	}
	h.clock.Advance(time.Millisecond)
	h.waitCalls(3)
	h.waitCompleted("t")

	calls := h.markers.calls()
	if !slices.Equal(calls[0].Partitions, []TopicPartition{a0, b0}) ||
		!slices.Equal(calls[1].Partitions, []TopicPartition{a0}) || !slices.Equal(calls[2].Partitions, []TopicPartition{a0}) {
		t.Fatalf("calls %+v", calls)
	}
	if len(h.markers.written(a0)) != 1 || len(h.markers.written(b0)) != 1 {
		t.Fatal("each partition written once")
	}
	if got := h.log.states(t, "t"); got[len(got)-1] != StateCompleteCommit {
		t.Fatalf("records %v", got)
	}
}

// The backoff is capped at MarkerRetryBackoffMax.
func TestMarkerBackoffCapped(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.MarkerRetryBackoff = 10 * time.Millisecond
		cfg.MarkerRetryBackoffMax = 25 * time.Millisecond
	})
	a0 := tp("a", 0)
	h.markers.queue(a0, kerr.NotEnoughReplicas, kerr.NotEnoughReplicas, kerr.NotEnoughReplicas, kerr.NotEnoughReplicas)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, a0)
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	for i, wait := range []time.Duration{10, 20, 25, 25} {
		h.waitCalls(i + 1)
		h.waitTimers(periodicTimers + 1)
		h.clock.Advance(wait*time.Millisecond - 1)
		if n := len(h.markers.calls()); n != i+1 {
			t.Fatalf("retry %d came before its %dms", i+1, wait)
		}
		h.clock.Advance(1)
	}
	h.waitCalls(5)
	h.waitCompleted("t")
}

// Reference: C§8.1 ("likely deleted"), C§8.3 and Fjord's answer to
// KAFKA-19999: these results count as written, with no retry.
func TestMarkersCountedDone(t *testing.T) {
	for _, result := range []error{ErrPartitionDeleted, kerr.InvalidProducerEpoch, kerr.UnsupportedVersion, kerr.UnsupportedForMessageFormat} {
		t.Run(errName(result), func(t *testing.T) {
			h := newHarness(t)
			a0, b0 := tp("a", 0), tp("b", 0)
			h.markers.queue(a0, result)
			pid, epoch := h.init("t")
			h.add("t", pid, epoch, a0, b0)
			h.endV1("t", pid, epoch, false)
			if n := len(h.markers.calls()); n != 1 {
				t.Fatalf("%d marker calls, want 1", n)
			}
			if d := h.describe("t"); d.State != StateCompleteAbort {
				t.Fatalf("state %v", d.State)
			}
		})
	}
}

// Every other failure is retried, TRANSACTION_COORDINATOR_FENCED and a
// transport error included: nothing leaves a Prepare* transaction
// behind with nobody to finish it.
func TestMarkersOtherFailuresRetried(t *testing.T) {
	for _, result := range []error{kerr.TransactionCoordinatorFenced, kerr.NetworkException, errors.New("connection reset"), kerr.CorruptMessage} {
		t.Run(errName(result), func(t *testing.T) {
			h := newHarness(t)
			a0 := tp("a", 0)
			h.markers.queue(a0, result)
			pid, epoch := h.init("t")
			h.add("t", pid, epoch, a0)
			if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
				t.Fatal(err)
			}
			h.waitCalls(1)
			h.waitTimers(periodicTimers + 1)
			h.clock.Advance(h.c.cfg.MarkerRetryBackoff)
			h.waitCalls(2)
			h.waitCompleted("t")
			if len(h.markers.written(a0)) != 1 {
				t.Fatal("marker not written")
			}
		})
	}
}

// Reference: C§7.4 step 6: while markers are written (the Complete
// pending), every request for the id answers CONCURRENT_TRANSACTIONS,
// V2 ones at the bumped epoch included (C§12.10).
func TestRequestsWhileMarkersPending(t *testing.T) {
	h := newHarness(t)
	a0 := tp("a", 0)
	pid, epoch := h.init("t")
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{a0}, true); err != nil {
		t.Fatal(err)
	}
	release := h.markers.hold()
	_, bumped, err := h.c.EndTxn(ctx, "t", pid, epoch, true, true)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "InitProducerID", err, ErrConcurrentTransactions)
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, bumped)
	wantErr(t, "InitProducerID KIP-360", err, ErrConcurrentTransactions)
	wantErr(t, "AddPartitionsToTxn at the new epoch", h.c.AddPartitionsToTxn(ctx, "t", pid, bumped, []TopicPartition{tp("b", 0)}, true), ErrConcurrentTransactions)
	wantErr(t, "AddOffsetsToTxn", h.c.AddOffsetsToTxn(ctx, "t", pid, bumped, "g"), ErrConcurrentTransactions)
	_, _, err = h.c.EndTxn(ctx, "t", pid, bumped, false, true)
	wantErr(t, "EndTxn at the new epoch", err, ErrConcurrentTransactions)
	_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, true, true)
	wantErr(t, "EndTxn retry", err, ErrConcurrentTransactions)
	wantErr(t, "verify", h.c.VerifyPartitionsInTxn("t", pid, bumped, []TopicPartition{a0})[0], ErrConcurrentTransactions)
	release()
	h.waitCompleted("t")
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, bumped, []TopicPartition{tp("b", 0)}, true); err != nil {
		t.Fatalf("after completion: %v", err)
	}
}

// Reference: C§8.4: a Complete record that fails to append is retried,
// the transition still pending.
func TestCompleteRecordRetried(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0))
	release := h.markers.hold()
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	h.log.failNext(2, kerr.NotEnoughReplicas)
	release()
	h.waitTimers(periodicTimers + 1)
	cur, pending := h.current("t")
	if cur.state != StatePrepareCommit || !pending {
		t.Fatalf("after a failed Complete: %v, pending %v", cur.state, pending)
	}
	_, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false)
	wantErr(t, "meanwhile", err, ErrConcurrentTransactions)
	h.clock.Advance(h.c.cfg.MarkerRetryBackoff)
	h.waitTimers(periodicTimers + 1)
	h.clock.Advance(2 * h.c.cfg.MarkerRetryBackoff)
	h.waitCompleted("t")
	if d := h.describe("t"); d.State != StateCompleteCommit {
		t.Fatalf("state %v", d.State)
	}
	if n := len(h.markers.calls()); n != 1 {
		t.Fatalf("%d marker calls: the markers are not sent again for the Complete's retry", n)
	}
}

// Reference: C§2.5 onResignation, C§8.3: Unload stops a transaction's
// markers; the next leader's load sends them all again at its
// coordinator epoch and completes the transaction.
func TestUnloadStopsMarkersAndLoadResumes(t *testing.T) {
	h := newHarness(t)
	a0, b0 := tp("a", 0), tp("b", 0)
	h.markers.queue(b0, kerr.NotLeaderForPartition)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, a0, b0)
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	h.waitCalls(1)
	h.waitTimers(periodicTimers + 1)
	p := PartitionFor("t", testPartitions)
	h.c.Unload(p)
	h.waitTimers(periodicTimers) // the marker goroutine stopped its backoff
	h.clock.Advance(time.Second)
	if n := len(h.markers.calls()); n != 1 {
		t.Fatalf("%d marker calls after Unload", n)
	}
	if got := h.log.states(t, "t"); got[len(got)-1] != StatePrepareCommit {
		t.Fatalf("records %v: no Complete after Unload", got)
	}

	if err := h.c.Load(p, testCoordinatorEpoch+1, h.log.reader(p)); err != nil {
		t.Fatal(err)
	}
	h.waitCompleted("t")
	calls := h.markers.calls()
	last := calls[len(calls)-1]
	if !slices.Equal(last.Partitions, []TopicPartition{a0, b0}) || last.CoordinatorEpoch != testCoordinatorEpoch+1 || !last.Commit {
		t.Fatalf("markers after the load: %+v: every partition again, at the new coordinator epoch", last)
	}
	if len(h.markers.written(a0)) != 2 {
		t.Fatal("a0's marker is sent twice (a duplicate, which partitions accept)")
	}
	if d := h.describe("t"); d.State != StateCompleteCommit || d.ProducerEpoch != epoch {
		t.Fatalf("after the load %+v", d)
	}
}
