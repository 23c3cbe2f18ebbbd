package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/testutil"
)

// reload unloads and loads id's partition at a new coordinator epoch, as
// a failover back to this node would.
func (h *harness) reload(id string, epoch int32) {
	h.t.Helper()
	p := PartitionFor(id, testPartitions)
	h.c.Unload(p)
	if err := h.c.Load(p, epoch, h.log.reader(p)); err != nil {
		h.t.Fatal(err)
	}
}

// Reference: C§2.5 step 2: the last record per id wins; a tombstone
// removes the id.
func TestLoadReplay(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("a")
	h.add("a", pid, epoch, tp("x", 0), tp("x", 1))
	h.init("b")
	p := PartitionFor("b", testPartitions)
	h.log.add(p, txnTombstone("b"))
	cpid, cepoch := h.init("c")
	h.add("c", cpid, cepoch, tp("y", 0))
	h.endV1("c", cpid, cepoch, false)

	want := map[string]transit{}
	for _, id := range []string{"a", "c"} {
		want[id], _ = h.current(id)
	}
	for q := int32(0); q < testPartitions; q++ {
		h.c.Unload(q)
		if err := h.c.Load(q, testCoordinatorEpoch+1, h.log.reader(q)); err != nil {
			t.Fatal(err)
		}
	}
	for id, w := range want {
		if got, pending := h.current(id); !reflect.DeepEqual(got, w) || pending {
			t.Fatalf("%s reloaded as %+v (pending %v), want %+v", id, got, pending, w)
		}
	}
	if d := h.c.DescribeTransactions([]string{"b"})[0]; d.Err != ErrTransactionalIDNotFound {
		t.Fatalf("tombstoned id: %+v", d)
	}
	// The reloaded Ongoing transaction carries on.
	h.add("a", pid, epoch, tp("x", 2))
	h.endV1("a", pid, epoch, true)
}

// Reference: C§2.5 steps 4-5, C§12.4(b): a loaded PrepareCommit (the
// previous leader died while writing its markers) has every marker sent
// again, at the new coordinator epoch, and is completed; meanwhile the
// id answers CONCURRENT_TRANSACTIONS.
func TestLoadCompletesPrepareCommit(t *testing.T) {
	h := newHarness(t)
	id := "t"
	p := PartitionFor(id, testPartitions)
	prep := ongoing()
	prep.state = StatePrepareCommit
	h.c.Unload(p)
	h.log.add(p, txnRecord(id, prep))

	release := h.markers.hold()
	if err := h.c.Load(p, 42, h.log.reader(p)); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.c.EndTxn(ctx, id, prep.producerID, prep.producerEpoch, true, false)
	wantErr(t, "EndTxn retry while completing", err, ErrConcurrentTransactions)
	_, _, err = h.c.InitProducerID(ctx, id, testTimeoutMs, -1, -1)
	wantErr(t, "InitProducerID while completing", err, ErrConcurrentTransactions)
	release()
	h.waitCompleted(id)

	calls := h.markers.calls()
	if len(calls) != 1 || !calls[0].Commit || calls[0].CoordinatorEpoch != 42 || calls[0].ProducerID != 10 ||
		calls[0].ProducerEpoch != 3 || !slices.Equal(calls[0].Partitions, prep.partitions) {
		t.Fatalf("markers %+v", calls)
	}
	hist := h.log.history(t, id)
	if done := hist[len(hist)-1]; done.state != StateCompleteCommit || done.producerEpoch != 3 || done.startMs != prep.startMs {
		t.Fatalf("Complete record %+v", done)
	}
	// The client's retry is now answered from the state.
	if _, _, err := h.c.EndTxn(ctx, id, 10, 3, true, false); err != nil {
		t.Fatalf("retry after completion: %v", err)
	}
}

// KAFKA-20310: the next producer id of a V2 Prepare at an exhausted
// epoch is persisted, so a load completes it with the new producer id.
func TestLoadCompletesOverflowingPrepare(t *testing.T) {
	h := newHarness(t)
	id := "t"
	p := PartitionFor(id, testPartitions)
	cur := ongoing()
	cur.producerEpoch = 32766
	prep := cur.prepareAbortOrCommit(StatePrepareAbort, 2, endClient, 5000, 32767, 9)
	h.c.Unload(p)
	h.log.add(p, txnRecord(id, prep))
	if err := h.c.Load(p, 8, h.log.reader(p)); err != nil {
		t.Fatal(err)
	}
	h.waitCompleted(id)
	got, _ := h.current(id)
	if got.state != StateCompleteAbort || got.producerID != 5000 || got.producerEpoch != 0 || got.prevProducerID != 10 {
		t.Fatalf("completed as %+v", got)
	}
	if w := h.markers.calls(); len(w) != 1 || w[0].ProducerID != 10 || w[0].ProducerEpoch != 32767 || w[0].TransactionVersion != 2 {
		t.Fatalf("markers %+v", w)
	}
	// The client's retry from the old producer id learns the new one.
	if p, e, err := h.c.EndTxn(ctx, id, 10, 32766, false, true); err != nil || p != 5000 || e != 0 {
		t.Fatalf("retry across the rollover after a load: (%d, %d), %v", p, e, err)
	}
}

// C§12.4(d): Fjord persists the last epoch and the previous producer id,
// so retries are recognised across a coordinator failover.
func TestRetriesAcrossFailover(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.init("t")
	if _, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 0); err != nil || e != 1 {
		t.Fatalf("KIP-360 bump: %d, %v", e, err)
	}
	h.reload("t", testCoordinatorEpoch+1)
	if p, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 0); err != nil || p != pid || e != 1 {
		t.Fatalf("KIP-360 retry after a failover: (%d, %d), %v; want the same answer", p, e, err)
	}

	h2 := newHarness(t).withMaxEpoch(3)
	pid, _ = h2.init("u")
	h2.init("u")
	h2.init("u") // epoch 2, exhausted
	newPID, _, err := h2.c.InitProducerID(ctx, "u", testTimeoutMs, pid, 2)
	if err != nil || newPID == pid {
		t.Fatalf("rotation: %d, %v", newPID, err)
	}
	h2.reload("u", testCoordinatorEpoch+1)
	if p, e, err := h2.c.InitProducerID(ctx, "u", testTimeoutMs, pid, 2); err != nil || p != newPID || e != 0 {
		t.Fatalf("rotation retry after a failover: (%d, %d), %v", p, e, err)
	}
}

// Reference: C§2.3 (Fjord treats a bad record as fatal for the
// partition), C§2.2 (keys of another version are skipped).
func TestLoadRefusesMalformedRecords(t *testing.T) {
	badVersion := txnValue(ongoing())
	binary.BigEndian.PutUint16(badVersion, 5)
	otherKey := txnKey("zzz")
	binary.BigEndian.PutUint16(otherKey, 1)
	for _, tc := range []struct {
		name string
		rec  Record
		want error
	}{
		{"value of version 5", Record{Key: txnKey("t"), Value: badVersion}, ErrUnknownRecordVersion},
		{"value cut short", Record{Key: txnKey("t"), Value: txnValue(ongoing())[:9]}, ErrMalformedRecord},
		{"garbage value", Record{Key: txnKey("t"), Value: []byte{0, 1, 0xff}}, ErrMalformedRecord},
		{"key cut short", Record{Key: []byte{0}, Value: txnValue(ongoing())}, ErrMalformedRecord},
		{"key with a bad length", Record{Key: []byte{0, 0, 0, 9, 'a'}, Value: txnValue(ongoing())}, ErrMalformedRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := PartitionFor("t", testPartitions)
			h.init("t")
			h.c.Unload(p)
			h.log.add(p, tc.rec)
			err := h.c.Load(p, 9, h.log.reader(p))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
			if tc.rec.Key[len(tc.rec.Key)-1] == 't' && !strings.Contains(err.Error(), `"t"`) {
				t.Fatalf("the error does not name the id: %v", err)
			}
			_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
			wantErr(t, "after a failed load", err, ErrNotCoordinator)
		})
	}

	h := newHarness(t)
	p := PartitionFor("t", testPartitions)
	h.init("t")
	h.c.Unload(p)
	h.log.add(p, Record{Key: otherKey, Value: []byte("not ours")})
	if err := h.c.Load(p, 9, h.log.reader(p)); err != nil {
		t.Fatalf("a key of another version: %v; Kafka skips it", err)
	}
	if d := h.describe("t"); d.ProducerEpoch != 0 {
		t.Fatalf("after skipping: %+v", d)
	}
}

// An id on the wrong partition means the partition count changed:
// Kafka refuses to load then too.
func TestLoadRefusesIDOnAnotherPartition(t *testing.T) {
	h := newHarness(t)
	id := "t"
	other := (PartitionFor(id, testPartitions) + 1) % testPartitions
	h.c.Unload(other)
	h.log.add(other, txnRecord(id, ongoing()))
	err := h.c.Load(other, 9, h.log.reader(other))
	if err == nil || !strings.Contains(err.Error(), "partition count") {
		t.Fatalf("Load: %v", err)
	}
}

// Unload, or another Load, during a Load: the first load is superseded
// and installs nothing.
func TestLoadSuperseded(t *testing.T) {
	for _, how := range []string{"unload", "load again"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			h.init("t")
			p := PartitionFor("t", testPartitions)
			release := make(chan struct{})
			loaded := make(chan error, 1)
			read := h.log.reader(p)
			go func() {
				loaded <- h.c.Load(p, 20, func(fn func(Record) error) error {
					<-release
					return read(fn)
				})
			}()
			testutil.Eventually(t, waitBound, func() error {
				if d := h.c.DescribeTransactions([]string{"t"})[0]; d.Err != ErrCoordinatorLoadInProgress {
					return fmt.Errorf("describe: %v", d.Err)
				}
				return nil
			})
			if how == "unload" {
				h.c.Unload(p)
			} else if err := h.c.Load(p, 21, h.log.reader(p)); err != nil {
				t.Fatal(err)
			}
			close(release)
			wantErr(t, "first load", <-loaded, ErrLoadSuperseded)
			d := h.c.DescribeTransactions([]string{"t"})[0]
			if how == "unload" {
				wantErr(t, "after unload", d.Err, ErrNotCoordinator)
			} else if d.Err != nil || d.ProducerEpoch != 0 {
				t.Fatalf("after the second load: %+v", d)
			}
		})
	}
}

// Reference: C§2.4 ("an unload+reload cannot slip in between"): a
// reload waits for the appends the previous incarnation had under way,
// so its replay sees what they wrote; their requests are answered
// NOT_COORDINATOR and memory is the log's.
func TestLoadWaitsForPreviousAppends(t *testing.T) {
	h := newHarness(t)
	h.init("t")
	p := PartitionFor("t", testPartitions)
	release := h.log.holdIgnoringCtx()
	answered := make(chan error, 1)
	go func() {
		_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
		answered <- err
	}()
	waitAppends(t, h.log, 1)
	loaded := make(chan error, 1)
	go func() { loaded <- h.c.Load(p, 30, h.log.reader(p)) }()
	testutil.Eventually(t, waitBound, func() error {
		if d := h.c.DescribeTransactions([]string{"t"})[0]; d.Err != ErrCoordinatorLoadInProgress {
			return fmt.Errorf("describe: %v", d.Err)
		}
		return nil
	})
	select {
	case err := <-loaded:
		t.Fatalf("Load returned (%v) while an append of the previous incarnation was under way", err)
	default:
	}
	release()
	wantErr(t, "the request of the previous incarnation", <-answered, ErrNotCoordinator)
	wantErr(t, "load", <-loaded, nil)
	if d := h.describe("t"); d.ProducerEpoch != 1 {
		t.Fatalf("after the reload: epoch %d; the record that landed (epoch 1) is the truth", d.ProducerEpoch)
	}
}

func TestLoadOnClosedCoordinator(t *testing.T) {
	h := newHarness(t)
	h.c.Close()
	wantErr(t, "Load", h.c.Load(0, 1, h.log.reader(0)), ErrClosed)
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "InitProducerID", err, ErrCoordinatorNotAvailable)
	_, _, err = h.c.ListTransactions(ListTransactionsFilter{DurationFilterMs: -1})
	wantErr(t, "ListTransactions", err, ErrCoordinatorNotAvailable)
}
