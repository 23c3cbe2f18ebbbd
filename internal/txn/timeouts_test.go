package txn

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reference: C§9.1, C§7.5: an Ongoing transaction older than its timeout
// is aborted by the coordinator at the next check: the epoch bumped
// once, markers at that epoch, CompleteAbort. The producer is fenced: its
// V1 requests get PRODUCER_FENCED, its V2 abort looks like a retry and
// learns the new epoch, its V2 commit is INVALID_TXN_STATE.
func TestTimedOutTransactionAborted(t *testing.T) {
	for _, tv := range []int16{0, 2} {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.TransactionVersion = tv })
			a0 := tp("a", 0)
			pid, epoch, err := h.c.InitProducerID(ctx, "t", 1000, -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			h.add("t", pid, epoch, a0)

			h.clock.Advance(10 * time.Second) // the first check: 10s > 1s
			h.waitCompleted("t")
			want := []State{StateEmpty, StateOngoing, StatePrepareAbort, StateCompleteAbort}
			if got := h.log.states(t, "t"); !slices.Equal(got, want) {
				t.Fatalf("records %v, want %v", got, want)
			}
			abort := h.log.history(t, "t")[2]
			wantLast := int16(-1)
			if tv == 2 {
				wantLast = epoch
			}
			if abort.producerEpoch != epoch+1 || abort.lastProducerEpoch != wantLast || abort.clientTransactionVersion != tv {
				t.Fatalf("PrepareAbort %+v: epoch+1 (once), last %d, the cluster's version %d", abort, wantLast, tv)
			}
			w := h.markers.written(a0)
			if len(w) != 1 || w[0].Commit || w[0].ProducerEpoch != epoch+1 || w[0].TransactionVersion != int8(tv) {
				t.Fatalf("markers %+v", w)
			}

			err = h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{tp("b", 0)}, false)
			wantErr(t, "AddPartitionsToTxn", err, ErrProducerFenced)
			_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, true, false)
			wantErr(t, "EndTxn v4", err, ErrProducerFenced)
			_, _, err = h.c.EndTxn(ctx, "t", pid, epoch, true, true)
			wantErr(t, "EndTxn v5 commit", err, ErrInvalidTxnState)
			p, e, err := h.c.EndTxn(ctx, "t", pid, epoch, false, true)
			if err != nil || p != pid || e != epoch+1 {
				t.Fatalf("EndTxn v5 abort: (%d, %d), %v; want the new epoch", p, e, err)
			}
			// KIP-360 recovery with the fenced epoch is fenced too (V1);
			// a fresh session gets the next epoch.
			if tv == 0 {
				_, _, err = h.c.InitProducerID(ctx, "t", 1000, pid, epoch)
				wantErr(t, "KIP-360 with the fenced epoch", err, ErrProducerFenced)
			}
			if _, e := h.init("t"); e != epoch+2 {
				t.Fatalf("next session: epoch %d", e)
			}
		})
	}
}

// The timeout counts from the transaction's start (its first add), not
// its last activity, and a transaction exactly at its timeout is kept.
func TestTimeoutCountsFromStart(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t") // 60s timeout
	h.add("t", pid, epoch, tp("a", 0))
	h.clock.Advance(50 * time.Second)
	h.add("t", pid, epoch, tp("b", 0)) // activity
	h.clock.Advance(10 * time.Second)  // the check at 60s: start + 60s is not before now
	if cur, pending := h.current("t"); cur.state != StateOngoing || pending {
		t.Fatalf("at its timeout: %v", cur.state)
	}
	h.clock.Advance(10 * time.Second) // 70s
	h.waitCompleted("t")
	if d := h.describe("t"); d.State != StateCompleteAbort || d.ProducerEpoch != epoch+1 {
		t.Fatalf("after its timeout: %+v", d)
	}
}

// Reference: C§8.4, C§9.1: Prepare* transactions, and Empty and
// Complete* ones, never time out.
func TestOnlyOngoingTimesOut(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("stuck")
	h.add("stuck", pid, epoch, tp("a", 0))
	h.markers.queue(tp("a", 0), kerr.NotLeaderForPartition, kerr.NotLeaderForPartition, kerr.NotLeaderForPartition)
	release := h.markers.hold()
	if _, _, err := h.c.EndTxn(ctx, "stuck", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	idle, _ := h.init("idle")
	h.clock.Advance(5 * time.Minute)
	if cur, _ := h.current("stuck"); cur.state != StatePrepareCommit || cur.producerEpoch != epoch {
		t.Fatalf("a Prepare* transaction timed out: %+v", cur)
	}
	if cur, _ := h.current("idle"); cur.state != StateEmpty || cur.producerID != idle || cur.producerEpoch != 0 {
		t.Fatalf("an Empty id was touched: %+v", cur)
	}
	if got := h.log.states(t, "stuck"); slices.Contains(got, StatePrepareAbort) {
		t.Fatalf("records %v", got)
	}
	release()
}

// A timeout abort whose record fails is tried again at the next check.
func TestTimeoutAbortRetried(t *testing.T) {
	h := newHarness(t)
	pid, epoch, err := h.c.InitProducerID(ctx, "t", 1000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.add("t", pid, epoch, tp("a", 0))
	h.log.failNext(1, kerr.NotEnoughReplicas)
	h.clock.Advance(10 * time.Second)
	if cur, pending := h.current("t"); cur.state != StateOngoing || cur.producerEpoch != epoch || pending {
		t.Fatalf("after a failed abort: %+v, pending %v", cur, pending)
	}
	h.clock.Advance(10 * time.Second)
	h.waitCompleted("t")
	if d := h.describe("t"); d.State != StateCompleteAbort || d.ProducerEpoch != epoch+1 {
		t.Fatalf("after the retry: %+v (the failed fence bumped nothing)", d)
	}
}

// Reference: C§2.6, C§9.2: an id idle in Empty or Complete* for
// transactional.id.expiration.ms is tombstoned and forgotten; an Ongoing
// one is not. The producer of a forgotten id gets
// INVALID_PRODUCER_ID_MAPPING; its next session a new producer id.
func TestTransactionalIDExpiration(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.TransactionalIDExpiration = time.Hour
		cfg.RemoveExpiredTransactionalIDCleanupInterval = 10 * time.Minute
		cfg.MaxTransactionTimeout = 3 * time.Hour
	})
	idlePID, idleEpoch := h.init("idle")
	donePID, doneEpoch := h.init("done")
	h.add("done", donePID, doneEpoch, tp("a", 0))
	h.endV1("done", donePID, doneEpoch, true)
	busyPID, busyEpoch, err := h.c.InitProducerID(ctx, "busy", int32((3 * time.Hour).Milliseconds()), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.add("busy", busyPID, busyEpoch, tp("b", 0))

	h.clock.Advance(50 * time.Minute)
	h.init("later") // idle from 50 minutes on
	h.clock.Advance(20 * time.Minute)

	for _, id := range []string{"idle", "done"} {
		if d := h.c.DescribeTransactions([]string{id})[0]; d.Err != ErrTransactionalIDNotFound {
			t.Fatalf("%s after expiry: %+v", id, d)
		}
		if got := h.log.states(t, id); got[len(got)-1] != StateDead {
			t.Fatalf("%s records %v: want a tombstone last", id, got)
		}
	}
	for _, id := range []string{"busy", "later"} {
		if got := h.log.states(t, id); slices.Contains(got, StateDead) {
			t.Fatalf("%s was tombstoned: %v", id, got)
		}
		h.describe(id)
	}
	err = h.c.AddPartitionsToTxn(ctx, "idle", idlePID, idleEpoch, []TopicPartition{tp("a", 0)}, false)
	wantErr(t, "an expired id's producer", err, ErrInvalidProducerIDMapping)
	if p, e := h.init("idle"); p == idlePID || e != 0 {
		t.Fatalf("expired id's next session: (%d, %d), want a new producer id at 0", p, e)
	}
	// The new session, at epoch 0, is not confused with the old.
	_, _, err = h.c.InitProducerID(ctx, "done", testTimeoutMs, donePID, doneEpoch)
	wantErr(t, "KIP-360 of an expired id: a new producer id", err, nil)
}

// A tombstone that fails to append leaves the id as it was; the next
// check writes it.
func TestExpirationAppendFails(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.TransactionalIDExpiration = time.Minute
		cfg.RemoveExpiredTransactionalIDCleanupInterval = time.Minute
		cfg.AbortTimedOutTransactionCleanupInterval = time.Hour
	})
	pid, epoch := h.init("t")
	h.log.failNext(1, kerr.NotEnoughReplicas)
	h.clock.Advance(time.Minute) // expiration needs lastUpdate <= now - 1m: it is
	if cur, pending := h.current("t"); cur.producerID != pid || cur.producerEpoch != epoch || pending {
		t.Fatalf("after a failed tombstone: %+v, pending %v", cur, pending)
	}
	h.clock.Advance(time.Minute)
	if d := h.c.DescribeTransactions([]string{"t"})[0]; d.Err != ErrTransactionalIDNotFound {
		t.Fatalf("after the next check: %+v", d)
	}
}

// KAFKA-13099: expiring many ids at once writes several batches, none
// over maxTombstoneBatchBytes.
func TestExpirationBatchesBounded(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.TransactionalIDExpiration = time.Minute
		cfg.RemoveExpiredTransactionalIDCleanupInterval = time.Minute
		cfg.TransactionPartitions = 1
	})
	long := strings.Repeat("x", MaxTransactionalIDBytes-8) // ids at the limit
	const ids = 150                                        // 600 KB of keys on one partition
	for i := range ids {
		h.init(fmt.Sprintf("%s-%d", long, i))
	}
	before := len(h.log.appendedBatches())
	h.clock.Advance(time.Minute)
	batches := h.log.appendedBatches()[before:]
	if len(batches) < 3 {
		t.Fatalf("%d tombstone batches for %d ids of 4 KB", len(batches), ids)
	}
	total := 0
	for _, b := range batches {
		size := 0
		for _, r := range b {
			if r.Value != nil {
				t.Fatal("a batch of tombstones holds a value")
			}
			size += len(r.Key)
		}
		if size > maxTombstoneBatchBytes {
			t.Fatalf("a batch of %d bytes", size)
		}
		total += len(b)
	}
	if total != ids {
		t.Fatalf("%d tombstones for %d ids", total, ids)
	}
	if txns, _, err := h.c.ListTransactions(ListTransactionsFilter{DurationFilterMs: -1}); err != nil || len(txns) != 0 {
		t.Fatalf("left after expiry: %d, %v", len(txns), err)
	}
}
