package txn

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/group"
)

// Reference: C§5.3: the first add starts the transaction (Ongoing, the
// start time now) with a record; adding what is in already writes
// nothing; adding more writes the union.
func TestAddPartitionsToTxn(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.clock.Advance(5 * time.Second)
	start := h.clock.Now().UnixMilli()
	h.add("t", pid, epoch, tp("b", 1), tp("a", 0), tp("a", 0))
	d := h.describe("t")
	if d.State != StateOngoing || d.StartTimeMs != start || !slices.Equal(d.Partitions, []TopicPartition{tp("a", 0), tp("b", 1)}) {
		t.Fatalf("after the first add: %+v", d)
	}
	records := len(h.log.history(t, "t"))

	h.clock.Advance(time.Second)
	h.add("t", pid, epoch, tp("b", 1))
	h.add("t", pid, epoch) // nothing
	if n := len(h.log.history(t, "t")); n != records {
		t.Fatalf("%d records after adding nothing new, want %d", n, records)
	}
	h.add("t", pid, epoch, tp("c", 7), tp("a", 0))
	hist := h.log.history(t, "t")
	last := hist[len(hist)-1]
	if len(hist) != records+1 || last.state != StateOngoing || last.startMs != start || len(last.partitions) != 3 || last.clientTransactionVersion != 0 {
		t.Fatalf("second add wrote %+v (%d records)", last, len(hist))
	}
	// A partition leader's implicit add (v4+, Transactions V2) records
	// its version.
	if err := h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{tp("d", 0)}, true); err != nil {
		t.Fatal(err)
	}
	if cur, _ := h.current("t"); cur.clientTransactionVersion != 2 {
		t.Fatalf("client version %d after a V2 add", cur.clientTransactionVersion)
	}
}

// Reference: C§5.3, the checks in order.
func TestAddPartitionsToTxnErrors(t *testing.T) {
	h := newHarness(t)
	a0 := []TopicPartition{tp("a", 0)}
	wantErr(t, "empty id", h.c.AddPartitionsToTxn(ctx, "", 1, 0, a0, false), ErrInvalidRequest)
	wantErr(t, "negative partition", h.c.AddPartitionsToTxn(ctx, "t", 1, 0, []TopicPartition{tp("a", -1)}, false), ErrInvalidRequest)
	wantErr(t, "no topic", h.c.AddPartitionsToTxn(ctx, "t", 1, 0, []TopicPartition{tp("", 0)}, false), ErrInvalidRequest)
	wantErr(t, "unknown id", h.c.AddPartitionsToTxn(ctx, "t", 1, 0, a0, false), ErrInvalidProducerIDMapping)

	pid, epoch := h.init("t")
	wantErr(t, "another producer id", h.c.AddPartitionsToTxn(ctx, "t", pid+1, epoch, a0, false), ErrInvalidProducerIDMapping)
	wantErr(t, "an older epoch", h.c.AddPartitionsToTxn(ctx, "t", pid, epoch-1, a0, false), ErrProducerFenced)
	wantErr(t, "a newer epoch", h.c.AddPartitionsToTxn(ctx, "t", pid, epoch+1, a0, false), ErrProducerFenced)

	done, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "a caller gone", h.c.AddPartitionsToTxn(done, "t", pid, epoch, a0, false), ErrCoordinatorNotAvailable)

	h.add("t", pid, epoch, a0...)
	release := h.markers.hold()
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "PrepareCommit", h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, a0, false), ErrConcurrentTransactions)
	// Checked first (KAFKA-18660): even with another producer id.
	wantErr(t, "pending before the producer id", h.c.AddPartitionsToTxn(ctx, "t", pid+1, epoch, a0, false), ErrConcurrentTransactions)
	release()
	h.waitCompleted("t")

	// Adding to a completed transaction starts the next.
	h.add("t", pid, epoch, tp("b", 0))
	if d := h.describe("t"); d.State != StateOngoing || !slices.Equal(d.Partitions, []TopicPartition{tp("b", 0)}) {
		t.Fatalf("next transaction: %+v", d)
	}

	// An append that fails changes nothing.
	h.log.failNext(1, kerr.NotEnoughReplicas)
	wantErr(t, "failed append", h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{tp("c", 0)}, false), ErrCoordinatorNotAvailable)
	if d := h.describe("t"); len(d.Partitions) != 1 {
		t.Fatalf("after a failed add: %+v", d)
	}
	if _, pending := h.current("t"); pending {
		t.Fatal("a failed add left a transition pending")
	}
}

// Reference: C§6.1: AddOffsetsToTxn adds the group's __consumer_offsets
// partition, placed as Kafka places groups.
func TestAddOffsetsToTxn(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	if err := h.c.AddOffsetsToTxn(ctx, "t", pid, epoch, "my-group"); err != nil {
		t.Fatal(err)
	}
	want := TopicPartition{ConsumerOffsetsTopic, group.PartitionFor("my-group", 50)}
	if d := h.describe("t"); !slices.Equal(d.Partitions, []TopicPartition{want}) {
		t.Fatalf("partitions %v, want %v", d.Partitions, want)
	}
	if want.Partition != 12 {
		t.Fatalf("my-group placed on %d; Kafka places it on 12 of 50", want.Partition)
	}
	wantErr(t, "fenced", h.c.AddOffsetsToTxn(ctx, "t", pid, epoch+1, "g"), ErrProducerFenced)

	h2 := newHarness(t, func(cfg *Config) {
		cfg.OffsetsPartitionFor = func(groupID string) int32 { return int32(len(groupID)) }
	})
	pid, epoch = h2.init("t")
	if err := h2.c.AddOffsetsToTxn(ctx, "t", pid, epoch, "abc"); err != nil {
		t.Fatal(err)
	}
	if d := h2.describe("t"); !slices.Equal(d.Partitions, []TopicPartition{{ConsumerOffsetsTopic, 3}}) {
		t.Fatalf("configured placement: %v", d.Partitions)
	}
	if cur, _ := h2.current("t"); cur.clientTransactionVersion != 0 {
		t.Fatalf("AddOffsetsToTxn is V0/V1: %d", cur.clientTransactionVersion)
	}
}

// Reference: C§5.4, KIP-890 part 1: verification writes nothing and
// answers per partition.
func TestVerifyPartitionsInTxn(t *testing.T) {
	h := newHarness(t)
	a0, b0 := tp("a", 0), tp("b", 0)
	errs := h.c.VerifyPartitionsInTxn("t", 1, 0, []TopicPartition{a0, b0})
	for _, err := range errs {
		wantErr(t, "unknown id", err, ErrInvalidProducerIDMapping)
	}
	wantErr(t, "empty id", h.c.VerifyPartitionsInTxn("", 1, 0, []TopicPartition{a0})[0], ErrInvalidRequest)

	pid, epoch := h.init("t")
	wantErr(t, "Empty", h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{a0})[0], ErrTransactionAbortable)
	h.add("t", pid, epoch, a0)
	records := len(h.log.history(t, "t"))
	errs = h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{a0, b0})
	wantErr(t, "in the transaction", errs[0], nil)
	wantErr(t, "not in the transaction", errs[1], ErrTransactionAbortable)
	wantErr(t, "another producer id", h.c.VerifyPartitionsInTxn("t", pid+1, epoch, []TopicPartition{a0})[0], ErrInvalidProducerIDMapping)
	wantErr(t, "another epoch", h.c.VerifyPartitionsInTxn("t", pid, epoch+1, []TopicPartition{a0})[0], ErrProducerFenced)

	// A transition in flight is not checked: the add being written is
	// simply not in the transaction yet.
	releaseLog := h.log.hold()
	added := make(chan error, 1)
	go func() { added <- h.c.AddPartitionsToTxn(ctx, "t", pid, epoch, []TopicPartition{b0}, false) }()
	waitAppends(t, h.log, 1)
	errs = h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{a0, b0})
	wantErr(t, "pending: a0", errs[0], nil)
	wantErr(t, "pending: b0", errs[1], ErrTransactionAbortable)
	releaseLog()
	wantErr(t, "add", <-added, nil)
	wantErr(t, "after the add", h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{b0})[0], nil)
	if n := len(h.log.history(t, "t")); n != records+1 {
		t.Fatalf("%d records, want %d: verification writes none", n, records+1)
	}

	release := h.markers.hold()
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "PrepareAbort", h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{a0})[0], ErrConcurrentTransactions)
	release()
	h.waitCompleted("t")
	wantErr(t, "CompleteAbort", h.c.VerifyPartitionsInTxn("t", pid, epoch, []TopicPartition{a0})[0], ErrTransactionAbortable)
}
