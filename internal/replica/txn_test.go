package replica

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Transactions across replicas: a follower learns a partition's
// transactions from the batches and markers it copies, and a truncation
// of a diverged history undoes the markers it cuts.

// txnBatch is a transactional batch of n records from producer pid at
// epoch 0.
func txnBatch(t testing.TB, pid int64, seq int32, prefix string, n int) []byte {
	t.Helper()
	return txnBatchAt(t, pid, 0, seq, prefix, n)
}

// txnBatchAt is txnBatch at epoch.
func txnBatchAt(t testing.TB, pid int64, epoch int16, seq int32, prefix string, n int) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, true
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(nil, fmt.Appendf(nil, "%s-%d", prefix, i), nil, time.Now().UnixMilli())
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeMarker writes producer pid's marker through the leader and waits
// for it, as WriteTxnMarkers does.
func writeMarker(t testing.TB, m *Manager, pid int64, coordinatorEpoch int32, commit bool) error {
	t.Helper()
	pending, err := m.StartTxnMarker("r", 0, storage.TxnMarker{ProducerID: pid, CoordinatorEpoch: coordinatorEpoch, Commit: commit})
	if err != nil {
		return err
	}
	_, err = pending.Wait(context.Background(), 10*time.Second)
	return err
}

// txnView is what a replica says of its transactions.
type txnView struct {
	leo, lso int64
	aborted  []storage.AbortedTxn
}

func viewOf(t testing.TB, l *storage.Log) txnView {
	t.Helper()
	aborted, err := l.AbortedTransactions(0, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return txnView{leo: l.LogEndOffset(), lso: l.LastStableOffset(), aborted: aborted}
}

func TestFollowerKeepsTheLeadersTransactions(t *testing.T) {
	_, nodes := newPair(t)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1, 2)
	follower.set(1, 0, 1, 2)
	ctx := context.Background()
	appendAll := func(data []byte) int64 {
		t.Helper()
		res, err := leader.m.Append(ctx, "r", 0, data, AcksAll, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	a := appendAll(txnBatch(t, 5, 0, "a", 3))
	appendAll(txnBatch(t, 6, 0, "c", 2))
	if err := writeMarker(t, leader.m, 5, 2, false); err != nil {
		t.Fatal(err)
	}
	// acks=all: answered once the follower holds the marker.
	if leo, want := follower.log().LogEndOffset(), leader.log().LogEndOffset(); leo != want {
		t.Fatalf("a marker answered with the follower at %d, the leader at %d", leo, want)
	}
	if err := writeMarker(t, leader.m, 6, 2, true); err != nil {
		t.Fatal(err)
	}
	o := appendAll(txnBatch(t, 7, 0, "o", 1))
	appendAll(batch(t, "plain", 2, 1000))

	want := viewOf(t, leader.log())
	if want.lso != o || len(want.aborted) != 1 || want.aborted[0].ProducerID != 5 || want.aborted[0].FirstOffset != a {
		t.Fatalf("the leader's view %+v: want the last stable offset at %d and producer 5's abort", want, o)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := viewOf(t, follower.log()); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("the follower's view %+v, the leader's %+v", got, want)
		}
		return nil
	})
	// A marker from an older coordinator epoch is refused on the leader
	// and reaches no replica.
	leo := leader.log().LogEndOffset()
	if err := writeMarker(t, leader.m, 5, 1, true); err == nil || leader.log().LogEndOffset() != leo {
		t.Fatalf("a fenced coordinator's marker: %v, log end %d -> %d", err, leo, leader.log().LogEndOffset())
	}
}

// A node that led alone and wrote an abort nobody copied, then follows a
// leader that committed the transaction, cuts its abort and ends with the
// commit: no index entry of the cut marker survives to hide committed
// records from read_committed consumers.
func TestFollowerUndoesAMarkerItCuts(t *testing.T) {
	_, nodes := newPair(t)
	one, two := nodes[0], nodes[1]
	one.set(1, 0, 1, 2)
	two.set(1, 0, 1, 2)
	ctx := context.Background()
	first, err := one.m.Append(ctx, "r", 0, txnBatch(t, 5, 0, "t", 4), AcksAll, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Node 2 leads epoch 1 alone and aborts producer 5's transaction.
	one.set(-1, 1, 2)
	two.set(2, 1, 2)
	pending, err := two.m.StartTxnMarker("r", 0, storage.TxnMarker{ProducerID: 5, CoordinatorEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = pending // never acknowledged: nobody copies it
	if v := viewOf(t, two.log()); len(v.aborted) != 1 {
		t.Fatalf("node 2 after its abort: %+v", v)
	}
	// Node 1 leads epoch 2 and commits it.
	one.set(1, 2, 1)
	two.set(1, 2, 1)
	pending, err = one.m.StartTxnMarker("r", 0, storage.TxnMarker{ProducerID: 5, CoordinatorEpoch: 2, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.m.Append(ctx, "r", 0, batch(t, "after", 1, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	want := viewOf(t, one.log())
	if len(want.aborted) != 0 || want.lso != one.log().HighWatermark() {
		t.Fatalf("node 1's view %+v", want)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		got := viewOf(t, two.log())
		if got.leo != want.leo || len(got.aborted) != 0 {
			return fmt.Errorf("node 2's view %+v, node 1's %+v", got, want)
		}
		return nil
	})
	if e := two.log().ActiveProducers()[5]; e.TxnFirstOffset != -1 || e.CoordinatorEpoch != 2 {
		t.Fatalf("producer 5 on node 2: %+v (its transaction began at %d)", e, first.BaseOffset)
	}
}

// Transaction verification (KIP-890 part 1) through the replica manager:
// a guard is only taken where this node leads, refused as an append is;
// StartAppendVerified opens a producer's transaction only with its guard,
// and answers INVALID_TXN_STATE, nothing written, without it or after a
// marker cleared it.
func TestTxnVerification(t *testing.T) {
	e := newEnv(t, "")
	e.put(withPartition(newTopic("v", 1, 2, nil), 1, func(p *metadata.Partition) {
		p.Replicas, p.Leader, p.LeaderEpoch = []int32{2, testNode}, 2, 3
	}))
	if _, _, err := e.m.TxnVerificationGuard("v", 1, 7, 0, false); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a partition this node follows: %v, want ErrNotLeader", err)
	}
	if _, _, err := e.m.TxnVerificationGuard("nope", 0, 7, 0, false); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("an unknown partition: %v, want ErrUnknownTopicOrPartition", err)
	}
	if _, err := e.m.StartAppendVerified("v", 1, txnBatch(t, 7, 0, "f", 1), AcksLeader, 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("StartAppendVerified on a follower: %v, want ErrNotLeader", err)
	}

	ctx := context.Background()
	appendVerified := func(data []byte, guard uint64) error {
		t.Helper()
		pending, err := e.m.StartAppendVerified("v", 0, data, AcksLeader, guard)
		if err != nil {
			return err
		}
		_, err = pending.Wait(ctx, 10*time.Second)
		return err
	}
	l := e.log("v", 0)
	unverified := func(what string, data []byte, guard uint64) {
		t.Helper()
		leo := l.LogEndOffset()
		err := appendVerified(data, guard)
		checkBoundary(t, what, err, ErrInvalidTxnState, kerr.InvalidTxnState, nil)
		if l.LogEndOffset() != leo {
			t.Fatalf("%s: log end %d -> %d: the refused batch was written", what, leo, l.LogEndOffset())
		}
	}
	guard, needed, err := e.m.TxnVerificationGuard("v", 0, 7, 0, false)
	if err != nil || !needed || guard == 0 {
		t.Fatalf("TxnVerificationGuard: %d, %v, %v; want a guard", guard, needed, err)
	}
	unverified("no guard", txnBatch(t, 7, 0, "a", 2), 0)
	unverified("a wrong guard", txnBatch(t, 7, 0, "a", 2), guard+1)
	if err := appendVerified(txnBatch(t, 7, 0, "a", 2), guard); err != nil {
		t.Fatalf("with the guard: %v", err)
	}
	if g, needed, err := e.m.TxnVerificationGuard("v", 0, 7, 0, false); err != nil || needed || g != 0 {
		t.Fatalf("the transaction open: %d, %v, %v; want no verification", g, needed, err)
	}
	if err := appendVerified(txnBatch(t, 7, 2, "b", 1), 0); err != nil {
		t.Fatalf("a later batch of the open transaction: %v", err)
	}
	// The late produce: verified (at the producer's next epoch, while
	// epoch 0's transaction is open) before the abort marker, appended
	// after it.
	late, needed, err := e.m.TxnVerificationGuard("v", 0, 7, 1, false)
	if err != nil || !needed {
		t.Fatalf("the next epoch: %d, %v, %v; want a guard", late, needed, err)
	}
	marker, err := e.m.StartTxnMarker("v", 0, storage.TxnMarker{ProducerID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := marker.Wait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	unverified("a guard from before the abort marker", txnBatchAt(t, 7, 1, 0, "c", 1), late)
	next, _, err := e.m.TxnVerificationGuard("v", 0, 7, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendVerified(txnBatchAt(t, 7, 1, 0, "c", 1), next); err != nil {
		t.Fatalf("a guard taken after the marker: %v", err)
	}
	// An epoch older than the producer's is refused before any round
	// trip, answered as the append would be.
	_, _, err = e.m.TxnVerificationGuard("v", 0, 7, 0, false)
	checkBoundary(t, "an older epoch", err, ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch, nil)
}
