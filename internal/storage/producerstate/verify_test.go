package producerstate

import (
	"errors"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
)

// Transaction verification, the partition's side. Reference: KIP-890
// part 1; docs/kafka-transactions/partition.md 5.1 and 5.2.

// mustGuard asks for producer pid's guard at epoch and fails the test
// unless it is needed (and so not 0).
func mustGuard(t *testing.T, s *State, pid int64, epoch int16, nowMs int64) uint64 {
	t.Helper()
	g, needed, err := s.VerificationGuard(pid, epoch, nowMs, false)
	if err != nil || !needed || g == 0 {
		t.Fatalf("VerificationGuard(%d, %d): guard %d needed %v err %v; want a guard", pid, epoch, g, needed, err)
	}
	return g
}

// checkVerified runs CheckVerified and fails the test on an error or a
// duplicate.
func checkVerified(t *testing.T, s *State, guard uint64, hs ...record.Header) {
	t.Helper()
	if _, dup, err := s.CheckVerified(hs, guard); err != nil || dup {
		t.Fatalf("CheckVerified(%+v, guard %d): dup %v err %v", hs, guard, dup, err)
	}
}

// refusedUnverified fails the test unless CheckVerified refuses hs with
// ErrInvalidTxnState, saying why.
func refusedUnverified(t *testing.T, s *State, guard uint64, what string, hs ...record.Header) {
	t.Helper()
	_, dup, err := s.CheckVerified(hs, guard)
	if !errors.Is(err, ErrInvalidTxnState) || dup {
		t.Fatalf("%s: dup %v err %v; want ErrInvalidTxnState", what, dup, err)
	}
	if !strings.Contains(err.Error(), "not verified as part of the producer's transaction") {
		t.Fatalf("%s: %q does not say the partition was not verified", what, err)
	}
}

// The guard is needed exactly when the producer's batch at the epoch
// would open a transaction here; one entry per producer, its guard
// unique and never 0.
func TestVerificationGuardNeeded(t *testing.T) {
	s := New()
	g1 := mustGuard(t, s, 1, 0, 100) // a producer this partition does not know
	if again := mustGuard(t, s, 1, 0, 200); again != g1 {
		t.Fatalf("asked twice: guards %d then %d, want the same", g1, again)
	}
	if g2 := mustGuard(t, s, 2, 0, 100); g2 == g1 {
		t.Fatalf("two producers share guard %d", g1)
	}
	// An idempotent producer here, with no transaction open: needed.
	write(t, s, hdr(3, 0, 0, 1, 0))
	mustGuard(t, s, 3, 0, 100)

	// Producer 4 has a transaction open at epoch 2: not needed at 2, needed
	// at 3 (the transaction open is of another epoch), refused at 1.
	write(t, s, txnHdr(4, 2, 0, 1, 1))
	if g, needed, err := s.VerificationGuard(4, 2, 100, false); err != nil || needed || g != 0 {
		t.Fatalf("transaction open at the epoch: guard %d needed %v err %v; want 0, false", g, needed, err)
	}
	mustGuard(t, s, 4, 3, 100)
	if g, needed, err := s.VerificationGuard(4, 1, 100, false); !errors.Is(err, ErrInvalidProducerEpoch) || needed || g != 0 {
		t.Fatalf("an epoch older than the producer's: guard %d needed %v err %v; want ErrInvalidProducerEpoch", g, needed, err)
	}
	// The entry keeps the newest epoch asked for, and its guard.
	g5 := mustGuard(t, s, 5, 4, 100)
	if g := mustGuard(t, s, 5, 2, 100); g != g5 || s.verifying[5].epoch != 4 {
		t.Fatalf("an older epoch asked of an entry: guard %d (was %d), epoch %d; want the same guard at epoch 4", g, g5, s.verifying[5].epoch)
	}
}

// The batch that would open a transaction needs the guard; once it is
// written the transaction is open and the batches after it join it
// without one. The late-produce-after-abort case: a guard taken before
// the marker never matches after it.
func TestCheckVerified(t *testing.T) {
	s := New()
	g := mustGuard(t, s, 1, 0, 100)
	first := txnHdr(1, 0, 0, 2, 0)
	refusedUnverified(t, s, 0, "no guard", first)
	refusedUnverified(t, s, g+1000, "a guard not the producer's", first)
	other := mustGuard(t, s, 2, 0, 100)
	refusedUnverified(t, s, other, "another producer's guard", first)
	// Plain Check asks for none: it is what Append keeps.
	if _, _, err := s.Check([]record.Header{first}); err != nil {
		t.Fatalf("Check of an opening batch: %v", err)
	}

	checkVerified(t, s, g, first)
	s.Update(first, 150)
	if _, ok := s.verifying[1]; ok {
		t.Fatal("the batch that opened the transaction left the verification entry")
	}
	// Phase 2: the transaction is open at epoch 0.
	next := txnHdr(1, 0, 2, 1, 2)
	checkVerified(t, s, 0, next)
	checkVerified(t, s, g, next) // a stale guard does not matter either
	s.Update(next, 160)
	// A retry of the first batch is a duplicate, answered before any
	// verification; so is it after the marker (the entry is gone then).
	if d, dup, err := s.CheckVerified([]record.Header{first}, 0); err != nil || !dup || d.FirstOffset != 0 || d.LastOffset != 1 {
		t.Fatalf("retry: %+v dup %v err %v", d, dup, err)
	}

	// The coordinator aborts. Produces of the transaction that asked
	// before the marker arrive after it: refused, or each would open a
	// transaction no coordinator knows. One asked at epoch 0 while the
	// transaction was open there, and was told no verification was
	// needed (guard 0); one asked at the next epoch, and was given a
	// guard (and the coordinator's yes).
	if g0, needed, err := s.VerificationGuard(1, 0, 170, false); err != nil || needed || g0 != 0 {
		t.Fatalf("the transaction open: guard %d needed %v err %v", g0, needed, err)
	}
	late := mustGuard(t, s, 1, 1, 170)
	if late == g {
		t.Fatalf("a guard %d handed out again", g)
	}
	if _, ok := s.UpdateMarker(markerHdr(1, 0, 3), Marker{Commit: false}, 180); !ok {
		t.Fatal("the abort completed nothing")
	}
	if _, ok := s.verifying[1]; ok {
		t.Fatal("the marker left the verification entry")
	}
	refusedUnverified(t, s, 0, "no verification needed before the abort marker", txnHdr(1, 0, 3, 1, 4))
	refusedUnverified(t, s, late, "a guard from before the abort marker", txnHdr(1, 1, 0, 1, 4))
	if d, dup, err := s.CheckVerified([]record.Header{first}, 0); err != nil || !dup || d.FirstOffset != 0 {
		t.Fatalf("retry after the marker: %+v dup %v err %v", d, dup, err)
	}
	// A new guard, taken after the marker, opens the next transaction.
	checkVerified(t, s, mustGuard(t, s, 1, 1, 190), txnHdr(1, 1, 0, 1, 4))

	// A marker for a producer with no transaction open clears its entry
	// too (the coordinator sends markers to every partition it added).
	g3 := mustGuard(t, s, 3, 0, 200)
	s.UpdateMarker(markerHdr(3, 0, 5), Marker{Commit: true}, 200)
	refusedUnverified(t, s, g3, "a guard from before a marker that completed nothing", txnHdr(3, 0, 0, 1, 6))
}

// The rules in Kafka's order (5.2): duplicate, then a fenced epoch, then
// the guard, then the sequence; and within one produce, the batch after
// an opening one joins the transaction it opens.
func TestCheckVerifiedOrder(t *testing.T) {
	s := New()
	write(t, s, hdr(1, 2, 0, 1, 0)) // idempotent, epoch 2, no transaction
	g := mustGuard(t, s, 1, 2, 100)
	// An older epoch is the epoch's error, guard or not.
	if _, _, err := s.CheckVerified([]record.Header{txnHdr(1, 1, 0, 1, 1)}, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("an older epoch without a guard: %v, want ErrInvalidProducerEpoch", err)
	}
	// A sequence gap without the guard is the guard's error ...
	refusedUnverified(t, s, 0, "a gap without a guard", txnHdr(1, 2, 5, 1, 1))
	// ... and with it, the sequence's.
	if _, _, err := s.CheckVerified([]record.Header{txnHdr(1, 2, 5, 1, 1)}, g); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a gap with the guard: %v, want ErrOutOfOrderSequence", err)
	}
	// Two batches of one produce: the first opens the transaction, and
	// the guard covers the produce.
	checkVerified(t, s, g, txnHdr(1, 2, 1, 1, 1), txnHdr(1, 2, 2, 1, 2))
	refusedUnverified(t, s, 0, "two batches without a guard", txnHdr(1, 2, 1, 1, 1), txnHdr(1, 2, 2, 1, 2))
	// An idempotent batch then a transactional one: the second opens.
	refusedUnverified(t, s, 0, "a transactional batch after an idempotent one", hdr(1, 2, 1, 1, 1), txnHdr(1, 2, 2, 1, 2))
	checkVerified(t, s, g, hdr(1, 2, 1, 1, 1), txnHdr(1, 2, 2, 1, 2))
	// Non-transactional batches need no guard.
	checkVerified(t, s, 0, hdr(1, 2, 1, 1, 1), hdr(9, 0, 0, 1, 2))

	// A transaction open at epoch 2; a batch at epoch 3 would not join
	// it (Kafka's hasOngoingTransaction compares the epoch): it needs a
	// guard, which the batch clears when written.
	write(t, s, txnHdr(1, 2, 1, 1, 1))
	refusedUnverified(t, s, 0, "a newer epoch than the open transaction's", txnHdr(1, 3, 0, 1, 2))
	g3 := mustGuard(t, s, 1, 3, 100)
	checkVerified(t, s, g3, txnHdr(1, 3, 0, 1, 2))
	s.Update(txnHdr(1, 3, 0, 1, 2), 100)
	if _, ok := s.verifying[1]; ok {
		t.Fatal("a transactional batch left the verification entry")
	}
	checkVerified(t, s, 0, txnHdr(1, 3, 1, 1, 3))
}

// Verification entries expire with the producers (as Kafka's
// producer.id.expiration.ms), are not in snapshots, and a clone has its
// own.
func TestVerificationExpiryAndSnapshots(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 0, 0, 1, 0)) // an open transaction: never expires
	old := mustGuard(t, s, 2, 0, 1_000)
	young := mustGuard(t, s, 3, 0, 1_000)
	mustGuard(t, s, 3, 0, 1_500) // asked again: its timestamp moves
	s.RemoveExpired(2_000, 1_000)
	refusedUnverified(t, s, old, "an expired guard", txnHdr(2, 0, 0, 1, 1))
	checkVerified(t, s, young, txnHdr(3, 0, 0, 1, 1))
	if g := mustGuard(t, s, 2, 0, 2_000); g == old {
		t.Fatal("an expired guard handed out again")
	}

	c := s.Clone()
	c.clearVerification(3)
	checkVerified(t, s, young, txnHdr(3, 0, 0, 1, 1))

	loaded, err := DecodeSnapshot(s.AppendSnapshot(nil, 1), 1, 2_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.verifying) != 0 {
		t.Fatalf("a snapshot carried verification entries: %v", loaded.verifying)
	}
	refusedUnverified(t, loaded, young, "a guard across a snapshot", txnHdr(3, 0, 0, 1, 1))
	if !loaded.HasOngoingTransaction(1, 0) {
		t.Fatal("the snapshot lost the open transaction")
	}
	// A state with verification entries encodes as the same state
	// decoded, which has none.
	if string(s.AppendSnapshot(nil, 1)) != string(loaded.AppendSnapshot(nil, 1)) {
		t.Fatal("verification entries changed the snapshot's bytes")
	}
}

// Transactions V2: the coordinator bumps the epoch as it ends a
// transaction, so the previous transaction's marker carries the epoch
// the next one's batches use. The next transaction's verification (its
// implicit add) may start before that marker lands here; the marker must
// not clear it (Kafka's isV2NextTransactionStarted). The next
// transaction's own marker, at the epoch after, does; and a V1 entry at
// the marker's epoch is cleared as before.
func TestVerificationAcrossATransactionsV2Marker(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 0, 0, 1, 0)) // transaction N at epoch 0
	g, needed, err := s.VerificationGuard(1, 1, 100, true)
	if err != nil || !needed || g == 0 {
		t.Fatalf("the next transaction's guard at epoch 1: %d %v %v", g, needed, err)
	}
	s.UpdateMarker(markerHdr(1, 1, 1), Marker{Commit: true}, 110) // N's V2 marker, at epoch 1
	checkVerified(t, s, g, txnHdr(1, 1, 0, 1, 2))
	s.Update(txnHdr(1, 1, 0, 1, 2), 120)

	// The transaction after: its guard at epoch 2 goes with its own
	// abort marker, at epoch 3.
	g2, _, _ := s.VerificationGuard(1, 2, 130, true)
	s.UpdateMarker(markerHdr(1, 2, 3), Marker{Commit: true}, 140) // the epoch-1 transaction's marker
	if v, ok := s.verifying[1]; !ok || v.guard != g2 {
		t.Fatalf("the previous transaction's marker cleared the next one's entry: %+v", v)
	}
	s.UpdateMarker(markerHdr(1, 3, 4), Marker{Commit: false}, 150)
	if _, ok := s.verifying[1]; ok {
		t.Fatal("a V2 entry outlived its own transaction's marker")
	}

	// V1 keeps one epoch: a marker at the entry's epoch is the end of
	// the transaction the entry asked about, and clears it.
	v1 := New()
	g1, _, _ := v1.VerificationGuard(5, 0, 100, false)
	v1.UpdateMarker(markerHdr(5, 0, 0), Marker{Commit: false}, 110)
	refusedUnverified(t, v1, g1, "a V1 guard after a marker at its epoch", txnHdr(5, 0, 0, 1, 1))
}
