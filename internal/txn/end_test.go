package txn

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// inState returns metadata of id in state (producer 10 at epoch 5, last
// epoch 4, partitions a-0 when a transaction is open), on h's first
// partition, with a transition pending if pending.
func (h *harness) inState(state State, pending bool) *transactionMetadata {
	cur := newTransit(10, testTimeoutMs, 0)
	cur.prevProducerID = 10
	cur.producerEpoch, cur.lastProducerEpoch, cur.state = 5, 4, state
	if state == StateOngoing || state.isPrepare() {
		cur.partitions = []TopicPartition{tp("a", 0)}
		cur.startMs = 1
	}
	if state.isComplete() {
		cur.startMs = 1
	}
	m := newTransactionMetadata("id", newTxnPartition(ctx, 0, 1), cur)
	if pending {
		p := cur
		m.mu.pending = &p
	}
	return m
}

// Reference: C§7.2, the V1 table, every cell, through the decision
// itself (Prepare* rows with no transition pending are reachable in
// Kafka only after it gives up on markers; Fjord keeps the Complete
// pending while Prepare*, so through the API they answer
// CONCURRENT_TRANSACTIONS: TestEndTxnV1).
func TestEndTxnV1Table(t *testing.T) {
	h := newHarness(t)
	type want struct {
		to  State // the Prepare* written, or 0 with err
		err error
	}
	answered := want{} // nil, nothing written: a retry of a completed end
	for _, tc := range []struct {
		state         State
		commit, abort want
	}{
		{StateOngoing, want{to: StatePrepareCommit}, want{to: StatePrepareAbort}},
		{StateCompleteCommit, answered, want{err: ErrInvalidTxnState}},
		{StateCompleteAbort, want{err: ErrInvalidTxnState}, answered},
		{StatePrepareCommit, want{err: ErrConcurrentTransactions}, want{err: ErrInvalidTxnState}},
		{StatePrepareAbort, want{err: ErrInvalidTxnState}, want{err: ErrConcurrentTransactions}},
		{StateEmpty, want{err: ErrInvalidTxnState}, want{err: ErrInvalidTxnState}},
	} {
		for _, commit := range []bool{true, false} {
			w := tc.abort
			if commit {
				w = tc.commit
			}
			name := fmt.Sprintf("%v commit=%v", tc.state, commit)
			m := h.inState(tc.state, false)
			d := h.c.decideEndV1Locked(m, 10, 5, commit)
			wantErr(t, name, d.err, w.err)
			switch {
			case w.to == 0 && d.next != nil:
				t.Errorf("%s: writes %v", name, d.next.state)
			case w.to != 0 && (d.next == nil || d.next.state != w.to || d.next.producerEpoch != 5 || d.next.clientTransactionVersion != 0):
				t.Errorf("%s: next %+v, want %v at epoch 5, V0", name, d.next, w.to)
			}
		}
	}
	// The checks before the table, in order.
	m := h.inState(StateOngoing, true)
	wantErr(t, "another producer id", h.c.decideEndV1Locked(m, 11, 5, true).err, ErrInvalidProducerIDMapping)
	wantErr(t, "an older epoch", h.c.decideEndV1Locked(m, 10, 4, true).err, ErrProducerFenced)
	wantErr(t, "a newer epoch", h.c.decideEndV1Locked(m, 10, 6, true).err, ErrProducerFenced)
	wantErr(t, "a transition pending", h.c.decideEndV1Locked(m, 10, 5, true).err, ErrConcurrentTransactions)
}

// Reference: C§7.3, the V2 table, every cell: E = 5, a retry is e = 4.
func TestEndTxnV2Table(t *testing.T) {
	h := newHarness(t)
	const (
		writes  = "writes"
		fromCur = "from state"
	)
	type cell struct {
		result string
		err    error
	}
	pf, its, ct := cell{err: ErrProducerFenced}, cell{err: ErrInvalidTxnState}, cell{err: ErrConcurrentTransactions}
	for _, tc := range []struct {
		state                                                State
		abortRetry, abortCurrent, commitRetry, commitCurrent cell
	}{
		{StateOngoing, pf, cell{result: writes}, pf, cell{result: writes}},
		{StateEmpty, pf, cell{result: writes}, pf, its},
		{StateCompleteAbort, cell{result: fromCur}, cell{result: writes}, its, its},
		{StateCompleteCommit, its, cell{result: writes}, cell{result: fromCur}, its},
		{StatePrepareCommit, its, pf, ct, pf},
		{StatePrepareAbort, ct, pf, its, pf},
	} {
		for _, c := range []struct {
			commit bool
			epoch  int16
			want   cell
		}{
			{false, 4, tc.abortRetry}, {false, 5, tc.abortCurrent}, {true, 4, tc.commitRetry}, {true, 5, tc.commitCurrent},
		} {
			name := fmt.Sprintf("%v commit=%v epoch=%d", tc.state, c.commit, c.epoch)
			m := h.inState(tc.state, false)
			d := h.c.decideEndV2Locked(m, 10, c.epoch, c.commit, -1)
			wantErr(t, name, d.err, c.want.err)
			switch c.want.result {
			case writes:
				target := StatePrepareAbort
				if c.commit {
					target = StatePrepareCommit
				}
				if d.next == nil || d.next.state != target || d.next.producerEpoch != 6 || d.next.lastProducerEpoch != 5 ||
					d.next.clientTransactionVersion != 2 {
					t.Errorf("%s: next %+v, want %v at epoch 6, last 5, V2", name, d.next, target)
				}
			case fromCur:
				if d.next != nil || d.producerID != 10 || d.producerEpoch != 5 {
					t.Errorf("%s: %+v, want the current (10, 5) and no write", name, d)
				}
			default:
				if d.next != nil {
					t.Errorf("%s: writes %v", name, d.next.state)
				}
			}
		}
	}
	m := h.inState(StateOngoing, true)
	wantErr(t, "a transition pending, first", h.c.decideEndV2Locked(m, 99, 0, true, -1).err, ErrConcurrentTransactions)
	m = h.inState(StateOngoing, false)
	wantErr(t, "another producer id", h.c.decideEndV2Locked(m, 11, 5, true, -1).err, ErrInvalidProducerIDMapping)
	wantErr(t, "a newer epoch", h.c.decideEndV2Locked(m, 10, 6, true, -1).err, ErrProducerFenced)
	wantErr(t, "two epochs old", h.c.decideEndV2Locked(m, 10, 3, true, -1).err, ErrProducerFenced)
}

// Reference: C§7.2 through the API: V1 keeps the epoch; the client is
// answered after the Prepare record; markers, then the Complete record;
// a retry of the commit is answered from the state.
func TestEndTxnV1(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0), tp("b", 2))

	release := h.markers.hold()
	p, e, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false)
	if err != nil || p != -1 || e != -1 {
		t.Fatalf("EndTxn v4: (%d, %d), %v; want (-1, -1), nil", p, e, err)
	}
	if d := h.describe("t"); d.State != StatePrepareCommit || len(d.Partitions) != 2 {
		t.Fatalf("answered before the markers: %+v", d)
	}
	for _, commit := range []bool{true, false} {
		_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, commit, false)
		wantErr(t, "while markers are written", err, ErrConcurrentTransactions)
	}
	release()
	h.waitCompleted("t")

	want := []State{StateEmpty, StateOngoing, StatePrepareCommit, StateCompleteCommit}
	if got := h.log.states(t, "t"); !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	hist := h.log.history(t, "t")
	if prep := hist[2]; prep.producerEpoch != epoch || prep.clientTransactionVersion != 0 || len(prep.partitions) != 2 {
		t.Fatalf("PrepareCommit %+v", prep)
	}
	if done := hist[3]; done.producerEpoch != epoch || done.partitions != nil || done.startMs == -1 {
		t.Fatalf("CompleteCommit %+v", done)
	}
	for _, p := range []TopicPartition{tp("a", 0), tp("b", 2)} {
		w := h.markers.written(p)
		if len(w) != 1 || !w[0].Commit || w[0].ProducerEpoch != epoch || w[0].TransactionVersion != 0 || w[0].CoordinatorEpoch != testCoordinatorEpoch {
			t.Fatalf("marker to %v: %+v", p, w)
		}
	}

	records := len(hist)
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, false, false)
	wantErr(t, "abort after commit", err, ErrInvalidTxnState)
	if n := len(h.log.history(t, "t")); n != records {
		t.Fatalf("%d records; answers from state write none", n)
	}

	// The next transaction, aborted, at the same epoch.
	h.add("t", pid, epoch, tp("c", 0))
	if d := h.describe("t"); d.State != StateOngoing || d.StartTimeMs != t0.UnixMilli() {
		t.Fatalf("next transaction %+v", d)
	}
	h.endV1("t", pid, epoch, false)
	if w := h.markers.written(tp("c", 0)); len(w) != 1 || w[0].Commit {
		t.Fatalf("abort marker %+v", w)
	}
	if d := h.describe("t"); d.State != StateCompleteAbort || d.ProducerEpoch != epoch || len(d.Partitions) != 0 {
		t.Fatalf("after abort %+v", d)
	}
	_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, true, false)
	wantErr(t, "commit of an aborted transaction", err, ErrInvalidTxnState)
}

// Reference: C§7.3 through the API (KIP-890 part 2): each end bumps the
// epoch; the answer carries the new one; a retry is answered from the
// state; the old epoch is fenced.
func TestEndTxnV2(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{tp("a", 0)}, true); err != nil {
		t.Fatal(err)
	}
	p, e, err := h.c.EndTxn(ctx, "t", pid, epoch, true, true)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("EndTxn v5: (%d, %d), %v; want (%d, %d)", p, e, err, pid, epoch+1)
	}
	h.waitCompleted("t")
	hist := h.log.history(t, "t")
	prep := hist[len(hist)-2]
	if prep.state != StatePrepareCommit || prep.producerEpoch != epoch+1 || prep.lastProducerEpoch != epoch || prep.clientTransactionVersion != 2 {
		t.Fatalf("PrepareCommit %+v", prep)
	}
	if w := h.markers.written(tp("a", 0)); len(w) != 1 || w[0].ProducerEpoch != epoch+1 || w[0].TransactionVersion != 2 {
		t.Fatalf("marker %+v: the bumped epoch, version 2", w)
	}

	// The answer was lost: the retry, at the old epoch, learns the new.
	p, e, err = h.c.EndTxn(ctx, "t", pid, epoch, true, true)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("retry: (%d, %d), %v", p, e, err)
	}
	_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, false, true)
	wantErr(t, "retry as an abort", err, ErrInvalidTxnState)
	err = h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{tp("a", 0)}, true)
	wantErr(t, "a late add at the old epoch", err, ErrProducerFenced)

	// The next transaction at the new epoch, aborted.
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, epoch+1, []TopicPartition{tp("b", 0)}, true); err != nil {
		t.Fatal(err)
	}
	if p, e, err = h.c.EndTxn(ctx, "t", pid, epoch+1, false, true); err != nil || e != epoch+2 {
		t.Fatalf("abort: (%d, %d), %v", p, e, err)
	}
	h.waitCompleted("t")
	if d := h.describe("t"); d.State != StateCompleteAbort || d.ProducerEpoch != epoch+2 {
		t.Fatalf("after abort %+v", d)
	}
	if p, e, err = h.c.EndTxn(ctx, "t", pid, epoch+1, false, true); err != nil || e != epoch+2 {
		t.Fatalf("abort retry: (%d, %d), %v", p, e, err)
	}
}

// Reference: C§7.3 "bump" at an exhausted epoch, C§12.5 (KAFKA-18660):
// the Prepare record carries the next producer id, the markers the old id
// at the last epoch, and the Complete record moves to the new id at epoch
// 0, which the client is told at once; a retry from the old id is
// recognised (retryOnOverflow).
func TestEndTxnV2ProducerIDRollover(t *testing.T) {
	h := newHarness(t).withMaxEpoch(4) // exhausted at 3
	pid, _ := h.init("t")
	for range 3 {
		h.init("t")
	}
	const exhausted = 3
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, exhausted, []TopicPartition{tp("a", 0)}, true); err != nil {
		t.Fatal(err)
	}
	p, e, err := h.c.EndTxn(ctx, "t", pid, exhausted, true, true)
	if err != nil || p == pid || e != 0 {
		t.Fatalf("EndTxn at the exhausted epoch: (%d, %d), %v; want a new producer id at 0", p, e, err)
	}
	newPID := p
	h.waitCompleted("t")
	hist := h.log.history(t, "t")
	prep, done := hist[len(hist)-2], hist[len(hist)-1]
	if prep.producerID != pid || prep.producerEpoch != 4 || prep.nextProducerID != newPID {
		t.Fatalf("PrepareCommit %+v", prep)
	}
	if done.producerID != newPID || done.producerEpoch != 0 || done.prevProducerID != pid || done.nextProducerID != -1 || done.lastProducerEpoch != exhausted {
		t.Fatalf("CompleteCommit %+v", done)
	}
	if w := h.markers.written(tp("a", 0)); len(w) != 1 || w[0].ProducerID != pid || w[0].ProducerEpoch != 4 {
		t.Fatalf("marker %+v: the old producer id at the last epoch", w)
	}
	p, e, err = h.c.EndTxn(ctx, "t", pid, exhausted, true, true)
	if err != nil || p != newPID || e != 0 {
		t.Fatalf("retry across the rollover: (%d, %d), %v", p, e, err)
	}
	if err := h.c.AddPartitionsToTxn(ctx, "t", newPID, 0, []TopicPartition{tp("b", 0)}, true); err != nil {
		t.Fatalf("the new producer id: %v", err)
	}
}

// A new producer id that cannot be fetched fails the V2 end and changes
// nothing.
func TestEndTxnV2RolloverAllocationFails(t *testing.T) {
	h := newHarness(t).withMaxEpoch(3)
	pid, _ := h.init("t")
	h.init("t")
	h.init("t") // epoch 2, exhausted; ids 1000-1009 are fetched
	h.add("t", pid, 2, tp("a", 0))
	h.alloc.mu.Lock()
	h.alloc.errs = []error{nil, kerr.RequestTimedOut} // the second fetch fails
	h.alloc.mu.Unlock()
	h.c.pids.mu.Lock()
	h.c.pids.mu.next = h.c.pids.mu.end // the block is used up
	h.c.pids.mu.Unlock()
	_, _, err := h.c.EndTxn(ctx, "t", pid, 2, true, true)
	wantErr(t, "rollover without a producer id", err, ErrCoordinatorLoadInProgress)
	if cur, pending := h.current("t"); cur.state != StateOngoing || pending {
		t.Fatalf("after the failure: %v, pending %v", cur.state, pending)
	}
	if _, e, err := h.c.EndTxn(ctx, "t", pid, 2, true, true); err != nil || e != 0 {
		t.Fatalf("retry: %d, %v", e, err)
	}
}

// Reference: C§7.3 (*), C§12.9: a V2 abort with no transaction (an
// implicit add that registered nothing the client knows of) bumps the
// epoch and completes at once, with no markers. A commit of nothing is
// INVALID_TXN_STATE on either path.
func TestEndTxnV2EmptyAbort(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	_, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, true)
	wantErr(t, "V2 commit of Empty", err, ErrInvalidTxnState)
	_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, false, false)
	wantErr(t, "V1 abort of Empty", err, ErrInvalidTxnState)

	h.clock.Advance(3 * time.Second)
	p, e, err := h.c.EndTxn(ctx, "t", pid, epoch, false, true)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("V2 abort of Empty: (%d, %d), %v", p, e, err)
	}
	h.waitCompleted("t")
	want := []State{StateEmpty, StatePrepareAbort, StateCompleteAbort}
	if got := h.log.states(t, "t"); !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if prep := h.log.history(t, "t")[1]; prep.startMs != h.clock.Now().UnixMilli() || prep.partitions != nil {
		t.Fatalf("empty PrepareAbort %+v: starts now, no partitions", prep)
	}
	if n := len(h.markers.calls()); n != 0 {
		t.Fatalf("%d marker calls for no partitions", n)
	}
	// And again from CompleteAbort, at the current epoch.
	if _, e, err := h.c.EndTxn(ctx, "t", pid, epoch+1, false, true); err != nil || e != epoch+2 {
		t.Fatalf("V2 abort of CompleteAbort: %d, %v", e, err)
	}
}

// Reference: C§7.1, the common first checks.
func TestEndTxnRequestChecks(t *testing.T) {
	h := newHarness(t)
	_, _, err := h.c.EndTxn(ctx, "", 1, 0, true, false)
	wantErr(t, "empty id", err, ErrInvalidRequest)
	for _, tv2 := range []bool{false, true} {
		_, _, err = h.c.EndTxn(ctx, "unknown", 1, 0, true, tv2)
		wantErr(t, "unknown id", err, ErrInvalidProducerIDMapping)
	}
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0))
	for _, tv2 := range []bool{false, true} {
		_, _, err = h.c.EndTxn(ctx, "t", pid+1, epoch, true, tv2)
		wantErr(t, fmt.Sprintf("another producer id (V2 %v)", tv2), err, ErrInvalidProducerIDMapping)
	}
}

// Reference: C§7.4 step 1: a Prepare record that fails to append changes
// nothing and sends no marker; the client's retry runs again.
func TestEndTxnAppendFailure(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0))
	for _, tv2 := range []bool{false, true} {
		h.log.failNext(1, kerr.NotEnoughReplicasAfterAppend)
		_, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, tv2)
		wantErr(t, "failed Prepare", err, ErrCoordinatorNotAvailable)
		cur, pending := h.current("t")
		if cur.state != StateOngoing || cur.producerEpoch != epoch || pending {
			t.Fatalf("after a failed Prepare: %+v, pending %v", cur, pending)
		}
	}
	if n := len(h.markers.calls()); n != 0 {
		t.Fatalf("%d marker calls", n)
	}
	h.endV1("t", pid, epoch, true)
	if d := h.describe("t"); d.State != StateCompleteCommit {
		t.Fatalf("retry: %v", d.State)
	}
}
