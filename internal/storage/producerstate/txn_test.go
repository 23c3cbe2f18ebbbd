package producerstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
)

// txnHdr is a transactional batch's header.
func txnHdr(pid int64, epoch int16, seq, n int32, base int64) record.Header {
	h := hdr(pid, epoch, seq, n, base)
	h.Attributes |= 1 << 4 // transactional
	return h
}

// markerHdr is a transaction marker's header, written at base.
func markerHdr(pid int64, epoch int16, base int64) record.Header {
	return record.Header{BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1,
		NumRecords: 1, MaxTimestamp: 1000 + base, Attributes: 1<<4 | 1<<5}
}

// A transaction opens with its producer's first transactional batch, is
// held open across later ones, and completes at its marker; until the high
// watermark passes the marker it still holds the first unstable offset.
func TestTransactionLifecycle(t *testing.T) {
	s := New()
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("an empty state has a first unstable offset")
	}
	write(t, s, hdr(7, 0, 0, 2, 0)) // idempotent, not transactional: opens nothing
	if _, ok := s.FirstUnstableOffset(); ok || s.HasOngoingTransaction(7, 0) {
		t.Fatal("an idempotent batch opened a transaction")
	}
	write(t, s, txnHdr(1, 0, 0, 3, 10), txnHdr(2, 0, 0, 1, 13))
	write(t, s, txnHdr(1, 0, 3, 2, 14)) // continues producer 1's
	if first, ok := s.FirstUnstableOffset(); !ok || first != 10 || !s.HasOngoingTransaction(1, 0) || s.HasOngoingTransaction(1, 1) {
		t.Fatalf("first unstable %d %v", first, ok)
	}
	if got := s.OngoingTransactions(); !reflect.DeepEqual(got, map[int64]int64{1: 10, 2: 13}) {
		t.Fatalf("ongoing %v", got)
	}
	if e, _ := s.Get(1); e.TxnFirstOffset != 10 || e.CoordinatorEpoch != -1 {
		t.Fatalf("entry %+v", e)
	}

	// Producer 1 aborts at 20: producer 2's transaction, open since 13,
	// is the index entry's last stable offset.
	ct, ok := s.UpdateMarker(markerHdr(1, 0, 20), Marker{Commit: false, CoordinatorEpoch: 4}, 0)
	if !ok || ct != (CompletedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 20, Aborted: true, LastStableOffset: 13}) {
		t.Fatalf("completed %+v %v", ct, ok)
	}
	if e, _ := s.Get(1); e.TxnFirstOffset != -1 || e.CoordinatorEpoch != 4 {
		t.Fatalf("entry after its marker %+v", e)
	}
	// Decided, not yet replicated: it still holds the first unstable offset.
	if first, _ := s.FirstUnstableOffset(); first != 10 {
		t.Fatalf("first unstable %d, want 10 until the marker is below the high watermark", first)
	}
	s.OnHighWatermark(20) // the marker is at 20: not below
	if first, _ := s.FirstUnstableOffset(); first != 10 {
		t.Fatalf("first unstable %d at hw 20", first)
	}
	s.OnHighWatermark(21)
	if first, _ := s.FirstUnstableOffset(); first != 13 {
		t.Fatalf("first unstable %d at hw 21, want producer 2's 13", first)
	}
	// Producer 2 commits alone: its entry's last stable offset is past
	// its marker.
	if ct, ok := s.UpdateMarker(markerHdr(2, 0, 22), Marker{Commit: true}, 0); !ok || ct.Aborted || ct.LastStableOffset != 23 || ct.FirstOffset != 13 {
		t.Fatalf("completed %+v %v", ct, ok)
	}
	// A marker for a producer with nothing open completes nothing.
	if _, ok := s.UpdateMarker(markerHdr(7, 0, 24), Marker{Commit: true}, 0); ok {
		t.Fatal("a marker for no open transaction completed one")
	}
	s.OnHighWatermark(25)
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("nothing open, everything replicated, and still unstable")
	}
}

// Unstable lists what holds the last stable offset, by first offset, and
// its generation changes exactly when the list may have.
func TestUnstable(t *testing.T) {
	s := New()
	u, gen := s.Unstable()
	if len(u) != 0 {
		t.Fatalf("empty state: %+v", u)
	}
	step := func(what string, changes bool, fn func(), want ...UnstableTxn) {
		t.Helper()
		fn()
		got, g := s.Unstable()
		if changes == (g == gen) || g != s.TxnGeneration() {
			t.Fatalf("%s: generation %d -> %d (TxnGeneration %d), a change: %v", what, gen, g, s.TxnGeneration(), changes)
		}
		gen = g
		if len(got) != 0 || len(want) != 0 {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: unstable %+v, want %+v", what, got, want)
			}
		}
	}
	step("an idempotent batch", false, func() { s.Update(hdr(7, 0, 0, 1, 0), 0) })
	step("producer 2 opens", true, func() { s.Update(txnHdr(2, 0, 0, 1, 3), 0) }, UnstableTxn{3, -1})
	step("producer 1 opens", true, func() { s.Update(txnHdr(1, 0, 0, 1, 5), 0) }, UnstableTxn{3, -1}, UnstableTxn{5, -1})
	step("producer 2 goes on", false, func() { s.Update(txnHdr(2, 0, 1, 1, 6), 0) }, UnstableTxn{3, -1}, UnstableTxn{5, -1})
	step("producer 2 commits", true, func() { s.UpdateMarker(markerHdr(2, 0, 7), Marker{Commit: true}, 0) },
		UnstableTxn{3, 7}, UnstableTxn{5, -1})
	step("the high watermark at the marker", false, func() { s.OnHighWatermark(7) }, UnstableTxn{3, 7}, UnstableTxn{5, -1})
	step("the high watermark past it", true, func() { s.OnHighWatermark(8) }, UnstableTxn{5, -1})
	step("a marker for nothing open", false, func() { s.UpdateMarker(markerHdr(9, 0, 8), Marker{}, 0) }, UnstableTxn{5, -1})
}

// A transaction that opened after a marker's offset is not the marker's
// concern: the entry's last stable offset only looks below the marker.
func TestMarkerLastStableOnlyLooksBelow(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 0, 0, 1, 0))
	s.Update(txnHdr(2, 0, 0, 1, 9), 0) // replicated after the marker below, in one append
	ct, _ := s.UpdateMarker(markerHdr(1, 0, 5), Marker{}, 0)
	if ct.LastStableOffset != 6 {
		t.Fatalf("last stable %d, want 6: producer 2's transaction began at 9, past the marker", ct.LastStableOffset)
	}
}

// The leader's checks: a non-transactional batch inside a transaction,
// a marker from an old producer epoch (or, under Transactions V2, not a
// newer one), one from an old coordinator epoch.
func TestTransactionChecks(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 3, 0, 1, 0))
	if _, _, err := s.Check([]record.Header{hdr(1, 3, 1, 1, 1)}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a non-transactional batch inside a transaction: %v", err)
	}
	// A retry of the transaction's batch is still a duplicate, first.
	if _, dup, err := s.Check([]record.Header{txnHdr(1, 3, 0, 1, 0)}); err != nil || !dup {
		t.Fatalf("retry: dup %v, %v", dup, err)
	}
	for _, tc := range []struct {
		epoch  int16
		ce     int32
		strict bool
		want   error
	}{
		{2, 0, false, ErrInvalidProducerEpoch},
		{3, 0, false, nil},
		{3, 0, true, ErrInvalidProducerEpoch},
		{4, 0, true, nil},
	} {
		if err := s.CheckMarker(1, tc.epoch, tc.ce, tc.strict); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("CheckMarker(epoch %d, strict %v): %v, want %v", tc.epoch, tc.strict, err, tc.want)
		}
	}
	s.UpdateMarker(markerHdr(1, 4, 1), Marker{Commit: true, CoordinatorEpoch: 9}, 0)
	if err := s.CheckMarker(1, 4, 8, false); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("an older coordinator epoch: %v", err)
	}
	if err := s.CheckMarker(1, 4, 9, false); err != nil {
		t.Fatalf("the same coordinator epoch: %v", err)
	}
	if err := s.CheckMarker(99, 0, 0, true); err != nil {
		t.Fatalf("a producer this partition does not know: %v", err)
	}
	// Under Transactions V2, the marker at epoch 4 again, with nothing
	// open, is a resend: it passes.
	if err := s.CheckMarker(1, 4, 9, true); err != nil {
		t.Fatalf("a resent V2 marker: %v", err)
	}
	// The marker took epoch 4: its batch history is gone, the next
	// transaction starts at sequence 0.
	write(t, s, txnHdr(1, 4, 0, 1, 2))
	// With a transaction open at epoch 4, a V2 marker at 4 is not a
	// resend: that transaction's marker carries 5.
	if err := s.CheckMarker(1, 4, 9, true); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("a V2 marker at the epoch of an open transaction: %v", err)
	}
}

// An open transaction survives a snapshot, and its producer never
// expires; a version 1 snapshot reads as producers with none.
func TestTransactionSnapshotAndExpiry(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 0, 0, 2, 0), hdr(2, 0, 0, 1, 2))
	s.UpdateMarker(markerHdr(2, 1, 3), Marker{Commit: true, CoordinatorEpoch: 6}, 0)
	got, err := DecodeSnapshot(s.AppendSnapshot(nil, 4), 4, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.All(), s.All()) || !reflect.DeepEqual(got.OngoingTransactions(), map[int64]int64{1: 0}) {
		t.Fatalf("decoded %+v, ongoing %v\nwant %+v", got.All(), got.OngoingTransactions(), s.All())
	}
	if n := got.RemoveExpired(1_000_000, 10); n != 1 || got.Len() != 1 || !got.HasOngoingTransaction(1, 0) {
		t.Fatalf("expired %d, left %d: the producer with a transaction open must stay", n, got.Len())
	}
	// An open transaction at or past the snapshot's offset cannot be in
	// it (the producer has no batches here: a marker emptied them).
	open := New()
	open.producers[3] = &entry{coordinatorEpoch: -1, txnFirstOffset: 5}
	open.ongoing[3] = 5
	if _, err := DecodeSnapshot(open.AppendSnapshot(nil, 5), 5, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("an open transaction at the snapshot's offset: %v", err)
	}
	if _, err := DecodeSnapshot(open.AppendSnapshot(nil, 6), 6, 0); err != nil {
		t.Fatalf("an open transaction below the snapshot's offset: %v", err)
	}

	// Version 1: the same producers, written the old way.
	v1 := New()
	write(t, v1, hdr(5, 2, 0, 3, 0))
	old := encodeV1(v1, 3)
	dec, err := DecodeSnapshot(old, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := dec.Get(5); e.Epoch != 2 || e.TxnFirstOffset != -1 || e.CoordinatorEpoch != -1 || len(e.Batches) != 1 {
		t.Fatalf("version 1 entry %+v", e)
	}
}

// A decided transaction whose marker the high watermark has not passed
// survives a snapshot: it still holds the first unstable offset after a
// reopen. A version 2 snapshot has none.
func TestDecidedSnapshot(t *testing.T) {
	s := New()
	write(t, s, txnHdr(1, 0, 0, 2, 0), txnHdr(2, 0, 0, 1, 2))
	s.UpdateMarker(markerHdr(1, 0, 3), Marker{Commit: true}, 0)
	s.UpdateMarker(markerHdr(2, 0, 4), Marker{}, 0)
	s.OnHighWatermark(4) // producer 1's marker is replicated, producer 2's not
	b := s.AppendSnapshot(nil, 5)
	got, err := DecodeSnapshot(b, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if first, ok := got.FirstUnstableOffset(); !ok || first != 2 {
		t.Fatalf("first unstable after the snapshot %d %v, want producer 2's 2", first, ok)
	}
	if u, _ := got.Unstable(); !reflect.DeepEqual(u, []UnstableTxn{{2, 4}}) {
		t.Fatalf("unstable %+v", u)
	}

	// Version 2: the same without the decided section.
	v2 := bytes.Clone(b[:len(b)-crcSize-4-decidedSize])
	v2[5] = 2
	v2 = binary.BigEndian.AppendUint32(v2, crc32.Checksum(v2, castagnoli))
	dec, err := DecodeSnapshot(v2, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dec.FirstUnstableOffset(); ok || !reflect.DeepEqual(dec.All(), got.All()) {
		t.Fatalf("version 2: producers %+v", dec.All())
	}

	// Damage in the decided section.
	for _, tc := range []struct {
		name string
		ct   []CompletedTxn
	}{
		{"a marker at the snapshot's offset", []CompletedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 5}}},
		{"markers out of order", []CompletedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 3}, {ProducerID: 2, FirstOffset: 1, LastOffset: 2}}},
		{"a first offset past the marker", []CompletedTxn{{ProducerID: 1, FirstOffset: 4, LastOffset: 3}}},
		{"a negative producer id", []CompletedTxn{{ProducerID: -1, FirstOffset: 0, LastOffset: 3}}},
	} {
		bad := New()
		bad.decided = tc.ct
		if _, err := DecodeSnapshot(bad.AppendSnapshot(nil, 5), 5, 0); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	short := New().AppendSnapshot(nil, 5)
	short = short[:len(short)-crcSize]
	binary.BigEndian.PutUint32(short[len(short)-4:], 1<<30) // more decided than bytes
	short = binary.BigEndian.AppendUint32(short, crc32.Checksum(short, castagnoli))
	if _, err := DecodeSnapshot(short, 5, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("a decided count the bytes do not hold: %v", err)
	}
}

// encodeV1 writes s as a version 1 snapshot (what Fjord wrote before
// transactions), for the reader's compatibility test.
func encodeV1(s *State, offset int64) []byte {
	var b []byte
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.producers)))
	for _, pid := range s.sortedIDs() {
		e := s.producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = append(b, e.n)
		for _, bt := range e.batches[:e.n] {
			b = binary.BigEndian.AppendUint32(b, uint32(bt.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(bt.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(bt.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(bt.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(bt.MaxTimestamp))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ParseMarker reads what EndTxnMarkerBatch wrote.
func TestParseMarker(t *testing.T) {
	b, err := record.EndTxnMarkerBatch(1, 0, 12, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := record.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := ParseMarker(&recs[0]); !ok || m != (Marker{Commit: false, CoordinatorEpoch: 12}) {
		t.Fatalf("%+v %v", m, ok)
	}
	if _, ok := ParseMarker(&record.Record{Key: record.ControlRecordKey(record.ControlType(2))}); ok {
		t.Fatal("another control record read as a marker")
	}
}
