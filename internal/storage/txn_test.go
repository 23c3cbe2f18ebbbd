package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Transactions in the log (txn.go, txnindex.go; DESIGN.md section 23).

// txnLog drives a log as transactional producers and their coordinator
// would: each producer's batches in sequence, markers at the end.
type txnLog struct {
	t   testing.TB
	l   *Log
	seq map[int64]int32
}

func newTxnLog(t testing.TB, l *Log) *txnLog { return &txnLog{t: t, l: l, seq: map[int64]int32{}} }

// send appends a transactional batch of n records from producer pid
// (epoch 0) and returns its first offset.
func (x *txnLog) send(pid int64, n int) int64 {
	x.t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, x.seq[pid]
	opts.Transactional = true
	info, err := x.l.Append(testBatchOpts(x.t, opts, n, 40, 1, nil), 0)
	if err != nil {
		x.t.Fatalf("producer %d: %v", pid, err)
	}
	x.seq[pid] += int32(n)
	return info.FirstOffset
}

// plain appends a batch of n records with no producer.
func (x *txnLog) plain(n int) int64 {
	x.t.Helper()
	info, err := x.l.Append(testBatch(x.t, n, 40, 1, nil), 0)
	if err != nil {
		x.t.Fatal(err)
	}
	return info.FirstOffset
}

// end writes producer pid's marker and returns its offset.
func (x *txnLog) end(pid int64, commit bool) int64 {
	x.t.Helper()
	info, err := x.l.AppendTxnMarker(TxnMarker{ProducerID: pid, CoordinatorEpoch: 1, Commit: commit}, 0)
	if err != nil {
		x.t.Fatalf("marker for producer %d: %v", pid, err)
	}
	if info.FirstOffset != info.LastOffset {
		x.t.Fatalf("a marker took offsets %d..%d", info.FirstOffset, info.LastOffset)
	}
	return info.FirstOffset
}

func (x *txnLog) expectLSO(what string, hw, want int64) {
	x.t.Helper()
	x.l.SetHighWatermark(hw)
	if got := x.l.LastStableOffset(); got != want {
		x.t.Fatalf("%s: high watermark %d: last stable offset %d, want %d", what, hw, got, want)
	}
}

func (x *txnLog) expectAborted(what string, from, upTo int64, want ...AbortedTxn) {
	x.t.Helper()
	got, err := x.l.AbortedTransactions(from, upTo)
	if err != nil {
		x.t.Fatalf("%s: %v", what, err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		x.t.Fatalf("%s: aborted transactions in [%d, %d)\n%+v\nwant\n%+v", what, from, upTo, got, want)
	}
}

// segmentOf returns the segment that holds offset.
func segmentOf(l *Log, offset int64) *segment {
	segs := *l.segments.Load()
	for i := len(segs) - 1; i > 0; i-- {
		if segs[i].baseOffset <= offset {
			return segs[i]
		}
	}
	return segs[0]
}

func TestTxnLastStableOffset(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", producerConfig(), OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)

	x.plain(2) // 0..1
	x.expectLSO("no transaction", 2, 2)
	a := x.send(1, 2) // 2..3
	x.expectLSO("a transaction open", 4, a)
	x.expectLSO("a transaction open above the high watermark", 1, 1)
	b := x.send(2, 2) // 4..5
	x.send(1, 2)      // 6..7: the same transaction goes on
	x.expectLSO("two open", l.LogEndOffset(), a)

	ma := x.end(1, true) // 8
	x.expectLSO("committed, the marker not replicated", ma, a)
	x.expectLSO("committed and replicated", ma+1, b)
	mb := x.end(2, false) // 9
	x.expectLSO("aborted, the marker not replicated", mb, b)
	x.expectLSO("both decided and replicated", mb+1, mb+1)
	// The next append forgets the decided transactions; nothing moves.
	x.plain(1)
	x.expectLSO("after the next append", l.LogEndOffset(), l.LogEndOffset())

	// A marker for a producer with nothing open here completes nothing.
	x.end(3, false)
	x.expectLSO("a marker of no transaction", l.LogEndOffset(), l.LogEndOffset())
	x.expectAborted("a marker of no transaction", 0, l.LogEndOffset(),
		AbortedTxn{ProducerID: 2, FirstOffset: b, LastOffset: mb, LastStableOffset: mb + 1})

	// DeleteRecords past an open transaction's start: the LSO never
	// falls below the log start.
	c := x.send(4, 3)
	x.plain(1)
	x.expectLSO("open before DeleteRecords", l.LogEndOffset(), c)
	if _, err := l.DeleteRecordsBefore(c + 1); err != nil {
		t.Fatal(err)
	}
	x.expectLSO("DeleteRecords inside an open transaction", l.LogEndOffset(), c+1)
}

func TestTxnAbortedIndex(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/data/t-0", producerConfig(), OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)

	// Producer 1's transaction spans rolls (700-byte segments) and is
	// aborted while producer 2's, begun below its marker, is open: its
	// entry's last stable offset is producer 2's first offset.
	a := x.send(1, 3)
	for range 6 {
		x.send(1, 3)
	}
	b := x.send(2, 1)
	ma := x.end(1, false)
	mb := x.end(2, false)
	c := x.send(1, 2)
	mc := x.end(1, true) // committed: no entry
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments: the transaction was meant to span rolls", l.NumSegments())
	}
	ea := AbortedTxn{ProducerID: 1, FirstOffset: a, LastOffset: ma, LastStableOffset: b}
	eb := AbortedTxn{ProducerID: 2, FirstOffset: b, LastOffset: mb, LastStableOffset: mb + 1}
	leo := l.LogEndOffset()
	x.expectAborted("the whole log", 0, leo, ea, eb)
	x.expectAborted("from producer 1's first batch", a+1, a+2, ea)
	// Past producer 1's marker: its entry no longer overlaps.
	x.expectAborted("past the first marker", ma+1, leo, eb)
	// Below producer 2's start: its entry begins at or past the upper
	// bound, and producer 1's entry's last stable offset says so.
	x.expectAborted("below producer 2's start", a, b, ea)
	x.expectAborted("after both", mb+1, leo)
	x.expectAborted("the committed transaction", c, mc+1)

	// The entries are in the segment of their markers.
	segs := *l.segments.Load()
	for _, s := range segs {
		entries, err := s.abortedTxns()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.LastOffset < s.baseOffset || s != segs[len(segs)-1] && e.LastOffset >= segs[len(segs)-1].baseOffset {
				t.Fatalf("segment %d holds the entry of the marker at %d", s.baseOffset, e.LastOffset)
			}
		}
	}

	// A read_committed read: the aborted transactions that overlap what
	// it read, and nothing past the last stable offset.
	// A read returns one segment's batches at most.
	l.SetHighWatermark(leo)
	for _, from := range []int64{a, b} {
		res, err := l.ReadCommitted(nil, from, 1<<20, leo, -1)
		if err != nil {
			t.Fatal(err)
		}
		var want []AbortedTxn
		for _, e := range []AbortedTxn{ea, eb} {
			if e.LastOffset >= from && e.FirstOffset <= res.LastOffset {
				want = append(want, e)
			}
		}
		if res.LastStableOffset != leo || len(want) == 0 || !reflect.DeepEqual(res.AbortedTxns, want) {
			t.Fatalf("read_committed from %d to %d: last stable %d, aborted %+v, want %+v",
				from, res.LastOffset, res.LastStableOffset, res.AbortedTxns, want)
		}
	}
	// With producer 3's transaction open, the read stops at its start.
	d := x.send(3, 2)
	x.send(3, 2)
	l.SetHighWatermark(l.LogEndOffset())
	res, err := l.ReadCommitted(nil, c, 1<<20, l.LogEndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Range.File != nil {
		defer res.Range.File.Close()
	}
	if res.LastStableOffset != d || res.LastOffset != d-1 || len(res.AbortedTxns) != 0 {
		t.Fatalf("read_committed with a transaction open at %d: last stable %d, last offset %d, aborted %+v",
			d, res.LastStableOffset, res.LastOffset, res.AbortedTxns)
	}
	// At the last stable offset: empty, not out of range.
	res, err = l.ReadCommitted(nil, d, 1<<20, l.LogEndOffset(), -1)
	if err != nil || len(res.Records) != 0 || res.LastOffset != -1 {
		t.Fatalf("read_committed at the last stable offset: %d bytes to %d, %v", len(res.Records), res.LastOffset, err)
	}
	// read_uncommitted reads on, and answers no aborted transactions.
	res, err = l.ReadInto(nil, d, 1<<20, l.LogEndOffset())
	if err != nil || res.LastOffset != l.LogEndOffset()-1 || res.AbortedTxns != nil {
		t.Fatalf("read_uncommitted at %d: to %d, aborted %+v, %v", d, res.LastOffset, res.AbortedTxns, err)
	}
}

func TestTxnMarkerChecks(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", producerConfig(), OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)
	x.send(1, 2)
	refused := func(what string, m TxnMarker, want error) {
		t.Helper()
		leo := l.LogEndOffset()
		if _, err := l.AppendTxnMarker(m, 0); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("%s: the refused marker was written", what)
		}
	}
	// Producer 1 is at epoch 0, and coordinator epoch 5 ends its first
	// transaction.
	if _, err := l.AppendTxnMarker(TxnMarker{ProducerID: 1, CoordinatorEpoch: 5}, 0); err != nil {
		t.Fatal(err)
	}
	refused("an older coordinator", TxnMarker{ProducerID: 1, CoordinatorEpoch: 4}, ErrCoordinatorFenced)
	// Under Transactions V2 a marker at the producer's epoch is refused
	// while a transaction is open (its marker carries the next epoch),
	// and written as a resend when none is (KAFKA-19999).
	x.send(1, 1)
	refused("Transactions V2 at the producer's epoch", TxnMarker{ProducerID: 1, CoordinatorEpoch: 5, StrictEpoch: true}, ErrInvalidProducerEpoch)
	refused("a negative producer id", TxnMarker{ProducerID: -1}, ErrInvalidBatch)
	refused("a negative epoch", TxnMarker{ProducerID: 1, ProducerEpoch: -1}, ErrInvalidBatch)
	// Transactions V2: the marker carries the bumped epoch, which the
	// producer takes; an older epoch is fenced from then on.
	if _, err := l.AppendTxnMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5, StrictEpoch: true, Commit: true}, 0); err != nil {
		t.Fatal(err)
	}
	if e := l.ActiveProducers()[1]; e.Epoch != 1 || e.CoordinatorEpoch != 5 || e.TxnFirstOffset != -1 {
		t.Fatalf("after a V2 marker: %+v", e)
	}
	before := l.LogEndOffset()
	if _, err := l.AppendTxnMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5, StrictEpoch: true, Commit: true}, 0); err != nil || l.LogEndOffset() != before+1 {
		t.Fatalf("a resent V2 marker: %v (log end %d -> %d)", err, before, l.LogEndOffset())
	}
	refused("an older epoch", TxnMarker{ProducerID: 1, CoordinatorEpoch: 5}, ErrInvalidProducerEpoch)

	// Inside a transaction, the producer's plain batch is refused.
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 2, 0, 0, true
	if _, err := l.Append(testBatchOpts(t, opts, 1, 10, 1, nil), 0); err != nil {
		t.Fatal(err)
	}
	opts.BaseSequence, opts.Transactional = 1, false
	leo := l.LogEndOffset()
	if _, err := l.Append(testBatchOpts(t, opts, 1, 10, 1, nil), 0); !errors.Is(err, ErrInvalidTxnState) || l.LogEndOffset() != leo {
		t.Fatalf("a plain batch inside a transaction: %v (log end %d -> %d)", err, leo, l.LogEndOffset())
	}
	// A client may not write a marker itself.
	b := compactionMarker(t, 2, 0, 1, record.ControlAbort)
	if _, err := l.Append(b, 0); !errors.Is(err, ErrInvalidBatch) || l.LogEndOffset() != leo {
		t.Fatalf("a client's control batch: %v", err)
	}
}

// TestTxnFollowerTruncation: a follower computes the same from the
// batches it copies, and a truncation undoes the markers it removes.
func TestTxnFollowerTruncation(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", producerConfig(), OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)
	at := int64(0)
	follow := func(b []byte) int64 {
		t.Helper()
		info, err := l.AppendAsFollower(b)
		if err != nil {
			t.Fatal(err)
		}
		at = info.LastOffset + 1
		return info.FirstOffset
	}
	txnBatch := func(pid int64, seq int32) []byte {
		opts := compactionTxn(pid)
		opts.BaseOffset, opts.BaseSequence, opts.PartitionLeaderEpoch = at, seq, 0
		return testBatchOpts(t, opts, 2, 40, 1, nil)
	}
	a := follow(txnBatch(1, 0))
	follow(txnBatch(1, 2))
	ma := follow(compactionMarker(t, 1, at, 1, record.ControlAbort))
	b := follow(txnBatch(2, 0))
	leo := l.LogEndOffset()
	x.expectAborted("as a follower", 0, leo, AbortedTxn{ProducerID: 1, FirstOffset: a, LastOffset: ma, LastStableOffset: ma + 1})
	x.expectLSO("as a follower", leo, b)

	// Cut below the abort marker: the transaction is open again, and not
	// indexed.
	if err := l.TruncateTo(ma); err != nil {
		t.Fatal(err)
	}
	x.expectAborted("cut below the marker", 0, l.LogEndOffset())
	x.expectLSO("cut below the marker", l.LogEndOffset(), a)
	// The new leader's history: a commit there instead.
	at = l.LogEndOffset()
	follow(compactionMarker(t, 1, at, 1, record.ControlCommit))
	x.expectAborted("committed on the new leader", 0, l.LogEndOffset())
	x.expectLSO("committed on the new leader", l.LogEndOffset(), l.LogEndOffset())
	// Cut below the transaction: nothing of it is left.
	if err := l.TruncateTo(a); err != nil {
		t.Fatal(err)
	}
	x.expectLSO("cut below the transaction", l.LogEndOffset(), l.LogEndOffset())
	if e, ok := l.ActiveProducers()[1]; ok {
		t.Fatalf("cut below the transaction: %+v", e)
	}
}

// TestTxnReopen: open transactions and the index survive a clean restart
// and a crash (what was flushed).
func TestTxnReopen(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "crash"}[clean]
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewMem()
			dir := "/data/t-0"
			l := openTestLog(t, fsys, dir, producerConfig(), OpenOptions{})
			x := newTxnLog(t, l)
			a := x.send(1, 3)
			for range 5 {
				x.send(1, 3)
			}
			b := x.send(2, 2)
			ma := x.end(1, false)
			c := x.send(3, 1)
			x.send(2, 1)
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			durable := l.LogEndOffset()
			// Past the flush: lost at a crash, kept at a clean close.
			mb := x.end(2, false)
			leo := l.LogEndOffset()
			if clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				fsys.Crash()
			}
			l = openTestLog(t, fsys, dir, producerConfig(), OpenOptions{})
			defer l.Close()
			x = newTxnLog(t, l)
			ea := AbortedTxn{ProducerID: 1, FirstOffset: a, LastOffset: ma, LastStableOffset: b}
			if clean {
				x.expectAborted("after a clean restart", 0, leo, ea,
					AbortedTxn{ProducerID: 2, FirstOffset: b, LastOffset: mb, LastStableOffset: c})
				x.expectLSO("after a clean restart", leo, c)
				return
			}
			if l.LogEndOffset() != durable {
				t.Fatalf("after a crash the log ends at %d, flushed to %d", l.LogEndOffset(), durable)
			}
			x.expectAborted("after a crash", 0, durable, ea)
			x.expectLSO("after a crash", durable, b)
			if e := l.ActiveProducers()[2]; e.TxnFirstOffset != b {
				t.Fatalf("producer 2 after a crash: %+v", e)
			}
		})
	}
}

// TestTxnIndexDamage: a damaged index fails the reads that need it, and
// is rebuilt from the log; a torn entry is ignored and overwritten.
func TestTxnIndexDamage(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/t-0"
	l := openTestLog(t, fsys, dir, producerConfig(), OpenOptions{})
	x := newTxnLog(t, l)
	a := x.send(1, 2)
	b := x.send(2, 2)
	ma := x.end(1, false)
	for range 8 { // roll past the marker's segment
		x.plain(4)
	}
	mb := x.end(2, false)
	want := []AbortedTxn{
		{ProducerID: 1, FirstOffset: a, LastOffset: ma, LastStableOffset: b},
		{ProducerID: 2, FirstOffset: b, LastOffset: mb, LastStableOffset: mb + 1},
	}
	sealed, active := segmentOf(l, ma), segmentOf(l, mb)
	if sealed == active || active != l.activeSegment() {
		t.Fatal("the markers were meant to be in a sealed segment and the active one")
	}
	leo := l.LogEndOffset()
	x.expectAborted("before", 0, leo, want...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damage := func(s *segment, b []byte) {
		t.Helper()
		f, err := fsys.Create(s.txnIndexPath())
		if err == nil {
			_, err = f.WriteAt(b, 0)
		}
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reopen := func() {
		t.Helper()
		l = openTestLog(t, fsys, dir, producerConfig(), OpenOptions{})
		x = newTxnLog(t, l)
		l.SetHighWatermark(l.LogEndOffset())
	}

	// A sealed segment's index: its version is wrong. The read that needs
	// it fails; a read_uncommitted one does not.
	garbled := appendTxnIndexEntry(nil, want[0])
	garbled[1] = 7
	damage(sealed, garbled)
	reopen()
	if _, err := l.ReadCommitted(nil, a, 1<<20, leo, -1); !errors.Is(err, ErrCorruptTxnIndex) {
		t.Fatalf("read_committed over a damaged index: %v", err)
	}
	if _, err := l.Read(a, 1<<20, leo); err != nil {
		t.Fatalf("read_uncommitted over a damaged index: %v", err)
	}
	// Without the producer snapshots, the open rebuilds every index.
	l.Close()
	snaps, err := listSnapshots(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range snaps {
		if err := fsys.Remove(filepath.Join(dir, producerstate.SnapshotFileName(off))); err != nil {
			t.Fatal(err)
		}
	}
	reopen()
	x.expectAborted("rebuilt without the snapshots", 0, leo, want...)

	// The active segment's index, damaged: the open finds it and
	// rebuilds.
	l.Close()
	damage(active, append(appendTxnIndexEntry(nil, want[1]), appendTxnIndexEntry(nil, want[1])...))
	reopen()
	x.expectAborted("rebuilt at the open", 0, leo, want...)

	// A torn entry at the end: ignored, then overwritten by the next.
	l.Close()
	damage(active, append(appendTxnIndexEntry(nil, want[1]), 0, 0, 9))
	reopen()
	x.expectAborted("a torn entry", 0, leo, want...)
	c := x.send(3, 1)
	mc := x.end(3, false)
	ec := AbortedTxn{ProducerID: 3, FirstOffset: c, LastOffset: mc, LastStableOffset: mc + 1}
	x.expectAborted("after the torn entry", 0, l.LogEndOffset(), append(want, ec)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := readWhole(fsys, active.txnIndexPath())
	if err != nil || len(raw) != 2*txnIndexEntrySize {
		t.Fatalf("the active segment's index: %d bytes, %v; want 2 entries", len(raw), err)
	}
}

// TestTxnIndexGoesWithItsSegment: retention deletes a segment's index
// with it, and a stale index never outlives a new segment at its base.
func TestTxnIndexGoesWithItsSegment(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/t-0"
	cfg := producerConfig()
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)
	x.send(1, 1)
	m := x.end(1, false)
	for range 8 {
		x.plain(4)
	}
	marked := segmentOf(l, m)
	if marked == l.activeSegment() {
		t.Fatal("the marker was meant to be in a sealed segment")
	}
	path := marked.txnIndexPath()
	if _, err := fsys.Stat(path); err != nil {
		t.Fatalf("the marker's segment's index: %v", err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	cfg.RetentionBytes = 0
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(path); !vfs.IsNotExist(err) {
		t.Fatalf("the deleted segment's index: %v", err)
	}
	x.expectAborted("after retention", 0, l.LogEndOffset())

	// A stale index left at a base offset (a crash between removing a
	// segment's files) is not inherited by a new segment there.
	f, err := fsys.Create(path)
	if err == nil {
		_, err = f.WriteAt(appendTxnIndexEntry(nil, AbortedTxn{ProducerID: 1, LastOffset: m, LastStableOffset: m + 1}), 0)
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(marked.baseOffset); err != nil {
		t.Fatal(err)
	}
	x.expectAborted("started over", 0, 1<<40)
}

// TestTxnCompactionDoesNotReviveATransaction: compaction drops an abort
// marker with its transaction's records; a truncation into the cleaned
// segments must not rebuild from a snapshot taken while the transaction
// was open (it would stay open for good: no marker is left to end it).
func TestTxnCompactionDoesNotReviveATransaction(t *testing.T) {
	fsys := vfs.NewMem()
	clock := &fakeClock{ms: 1_700_000_000_000}
	cfg := compactionConfig()
	cfg.SegmentBytes = 1000
	cfg.DeleteRetentionMs = 0
	l := openTestLog(t, fsys, "/data/t-0", cfg, OpenOptions{Now: clock.now})
	defer l.Close()
	ts := clock.ms
	at := int64(0)
	follow := func(b []byte) {
		t.Helper()
		info, err := l.AppendAsFollower(b)
		if err != nil {
			t.Fatal(err)
		}
		at = info.LastOffset + 1
	}
	plain := func(key string) {
		follow(compactionBatch(t, record.DefaultBatchOptions(), at, ts, compactionPut(key, string(make([]byte, 200)))))
	}
	follow(compactionBatch(t, compactionTxn(7), at, ts, compactionPut("a", "aborted"), compactionPut("b", "aborted")))
	for l.NumSegments() < 2 {
		plain(fmt.Sprint("k", at))
	}
	marker := at
	follow(compactionMarker(t, 7, at, ts, record.ControlAbort))
	for l.NumSegments() < 4 {
		plain(fmt.Sprint("k", at))
	}
	l.SetHighWatermark(l.LogEndOffset())
	clock.advance(time.Minute)
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Read(marker, 1<<20, marker+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) > 0 {
		if h, _ := record.ParseHeader(res.Records); h.BaseOffset == marker {
			t.Fatal("the cleaner kept the marker: the test needs it dropped")
		}
	}
	// A follower's truncation into the cleaned segments, past the marker.
	if err := l.TruncateTo(marker + 2); err != nil {
		t.Fatal(err)
	}
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw {
		t.Fatalf("after the truncation: last stable offset %d, high watermark %d", lso, hw)
	}
	if e, ok := l.ActiveProducers()[7]; ok && e.TxnFirstOffset != -1 {
		t.Fatalf("producer 7's aborted transaction is open again: %+v", e)
	}
}

// A coordinator's batches for a producer (the group coordinator's
// transactional offset commits) all start at sequence 0: they are
// checked for the producer's epoch and open transaction, never taken
// for duplicates of each other or refused as out of sequence.
func TestAppendAsCoordinator(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/__consumer_offsets-0", producerConfig(), OpenOptions{})
	defer l.Close()
	x := newTxnLog(t, l)
	commit := func(pid int64, epoch int16, txn bool) (AppendInfo, error) {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, 0, txn
		return l.AppendAsCoordinator(testBatchOpts(t, opts, 2, 40, 1, nil), 0, false, 0)
	}
	first, err := commit(7, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	again, err := commit(7, 3, true) // the same sequence, a second commit
	if err != nil {
		t.Fatal(err)
	}
	if again.Duplicate || again.FirstOffset != first.LastOffset+1 {
		t.Fatalf("second commit at sequence 0: %+v, want written after %+v", again, first)
	}
	x.expectLSO("the producer's transaction is open", l.LogEndOffset(), first.FirstOffset)
	if _, err := commit(7, 2, true); !errors.Is(err, producerstate.ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if _, err := commit(7, 3, false); !errors.Is(err, producerstate.ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside the transaction: %v, want ErrInvalidTxnState", err)
	}
	info, err := l.AppendTxnMarker(TxnMarker{ProducerID: 7, ProducerEpoch: 3, CoordinatorEpoch: 1, Commit: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	x.expectLSO("committed", info.LastOffset+1, info.LastOffset+1)
	if got := l.LogEndOffset(); got != info.LastOffset+1 {
		t.Fatalf("log end %d, want %d: a refused batch was written", got, info.LastOffset+1)
	}
	// A producer's own sequence rules are untouched: its retry is a
	// duplicate on the client path.
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 9, 0, 0
	b := testBatchOpts(t, opts, 1, 40, 1, nil)
	if _, err := l.Append(append([]byte(nil), b...), 0); err != nil {
		t.Fatal(err)
	}
	if dup, err := l.Append(b, 0); err != nil || !dup.Duplicate {
		t.Fatalf("client retry: %+v, %v; want a duplicate", dup, err)
	}
}

// Transaction verification on a log (KIP-890 part 1): AppendVerified
// opens a producer's transaction only with the guard TxnVerificationGuard
// handed out and no marker has cleared since, and writes nothing when it
// refuses; Append opens one unasked, as before. Reference: KIP-890;
// docs/kafka-transactions/partition.md 5.1 and 5.2.
func TestAppendVerified(t *testing.T) {
	clock := &fakeClock{ms: 1_700_000_000_000}
	cfg := producerConfig()
	cfg.ProducerIDExpirationMs = 60_000
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", cfg, OpenOptions{Now: clock.now})
	defer l.Close()
	x := newTxnLog(t, l)
	batch := func(pid int64, epoch int16, seq int32, txn bool) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, txn
		return testBatchOpts(t, opts, 2, 40, 1, nil)
	}
	guard := func(pid int64, epoch int16) uint64 {
		t.Helper()
		g, needed, err := l.TxnVerificationGuard(pid, epoch, false)
		if err != nil || !needed || g == 0 {
			t.Fatalf("TxnVerificationGuard(%d, %d): %d, %v, %v; want a guard", pid, epoch, g, needed, err)
		}
		return g
	}
	refused := func(what string, pid int64, b []byte, g uint64) {
		t.Helper()
		leo := l.LogEndOffset()
		if _, err := l.AppendVerified(b, 0, g); !errors.Is(err, ErrInvalidTxnState) {
			t.Fatalf("%s: %v, want ErrInvalidTxnState", what, err)
		}
		if got := l.LogEndOffset(); got != leo {
			t.Fatalf("%s: log end %d -> %d: the refused batch was written", what, leo, got)
		}
		if e, ok := l.ActiveProducers()[pid]; ok && e.TxnFirstOffset >= 0 {
			t.Fatalf("%s: the refused batch opened a transaction", what)
		}
	}

	// Producer 1, epoch 1.
	g := guard(1, 1)
	if again := guard(1, 1); again != g {
		t.Fatalf("asked twice: %d then %d", g, again)
	}
	refused("no guard", 1, batch(1, 1, 0, true), 0)
	refused("a wrong guard", 1, batch(1, 1, 0, true), g+1)
	first, err := l.AppendVerified(batch(1, 1, 0, true), 0, g)
	if err != nil {
		t.Fatal(err)
	}
	x.expectLSO("the verified transaction is open", l.LogEndOffset(), first.FirstOffset)
	// Open now: no guard is needed for the producer's next batches.
	if g0, needed, err := l.TxnVerificationGuard(1, 1, false); err != nil || needed || g0 != 0 {
		t.Fatalf("with the transaction open: %d, %v, %v; want 0, false", g0, needed, err)
	}
	if _, err := l.AppendVerified(batch(1, 1, 2, true), 0, 0); err != nil {
		t.Fatalf("a batch of the open transaction: %v", err)
	}
	// A retry of the first batch is a duplicate, guard or not.
	if dup, err := l.AppendVerified(batch(1, 1, 0, true), 0, 0); err != nil || !dup.Duplicate || dup.FirstOffset != first.FirstOffset {
		t.Fatalf("retry of the first batch: %+v, %v; want a duplicate at %d", dup, err, first.FirstOffset)
	}
	if _, _, err := l.TxnVerificationGuard(1, 0, false); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("an epoch older than the producer's: %v", err)
	}

	// The late produce after its transaction's abort: verified (guard
	// taken, the coordinator's yes given) before the marker, appended
	// after it. Refused: it would open a transaction no coordinator
	// knows.
	late := guard(1, 2) // a bumped epoch asks while epoch 1's transaction is open
	if _, err := l.AppendTxnMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 1}, 0); err != nil {
		t.Fatal(err)
	}
	refused("a guard from before the abort marker", 1, batch(1, 2, 0, true), late)
	// So is one that asked while the transaction was open at its epoch,
	// and was told no verification was needed.
	refused("no verification needed before the abort marker", 1, batch(1, 1, 4, true), 0)
	// A marker replicated while this node followed clears a guard too.
	g = guard(1, 2)
	marker, err := record.EndTxnMarkerBatch(1, 2, 1, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(marker, l.LogEndOffset())
	record.SetPartitionLeaderEpoch(marker, 0)
	if _, err := l.AppendAsFollower(marker); err != nil {
		t.Fatal(err)
	}
	refused("a guard from before a replicated marker", 1, batch(1, 2, 0, true), g)
	if _, err := l.AppendVerified(batch(1, 2, 0, true), 0, guard(1, 2)); err != nil {
		t.Fatalf("a guard taken after the marker: %v", err)
	}

	// Append verifies nothing: a transactional batch opens unasked.
	before := l.LogEndOffset()
	if _, err := l.Append(batch(2, 0, 0, true), 0); err != nil {
		t.Fatalf("Append of an unverified transactional batch: %v", err)
	}
	if got := l.ActiveProducers()[2].TxnFirstOffset; got != before {
		t.Fatalf("Append opened producer 2's transaction at %d, want %d", got, before)
	}
	// AppendVerified of batches that open nothing needs no guard.
	if _, err := l.AppendVerified(batch(3, 0, 0, false), 0, 0); err != nil {
		t.Fatalf("an idempotent batch: %v", err)
	}

	// An entry nobody came back for expires with the producers.
	stale := guard(4, 0)
	clock.advance(time.Minute)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	refused("an expired guard", 4, batch(4, 0, 0, true), stale)

	l.Close()
	if _, _, err := l.TxnVerificationGuard(5, 0, false); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("a closed log: %v", err)
	}
}

// A coordinator's verified append (a TxnOffsetCommit's, KIP-890) needs
// the producer's guard to open its transaction, as AppendVerified does,
// and none once the transaction is open; a marker clears the guard.
func TestAppendAsCoordinatorVerified(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/__consumer_offsets-1", producerConfig(), OpenOptions{})
	defer l.Close()
	commit := func(guard uint64) error {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 8, 0, 0, true
		_, err := l.AppendAsCoordinator(testBatchOpts(t, opts, 1, 40, 1, nil), 0, true, guard)
		return err
	}
	if err := commit(0); !errors.Is(err, producerstate.ErrInvalidTxnState) {
		t.Fatalf("unverified: %v, want ErrInvalidTxnState", err)
	}
	g, needed, err := l.TxnVerificationGuard(8, 0, false)
	if err != nil || !needed {
		t.Fatalf("guard: %d %v %v", g, needed, err)
	}
	if err := commit(g + 1); !errors.Is(err, producerstate.ErrInvalidTxnState) {
		t.Fatalf("a wrong guard: %v, want ErrInvalidTxnState", err)
	}
	if err := commit(g); err != nil {
		t.Fatalf("verified: %v", err)
	}
	if err := commit(0); err != nil {
		t.Fatalf("the transaction open: %v", err)
	}
	if _, err := l.AppendTxnMarker(TxnMarker{ProducerID: 8, ProducerEpoch: 0, CoordinatorEpoch: 1}, 0); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	if err := commit(g); !errors.Is(err, producerstate.ErrInvalidTxnState) {
		t.Fatalf("a guard from before the abort marker: %v, want ErrInvalidTxnState", err)
	}
	if l.LogEndOffset() != end {
		t.Fatal("a refused commit was written")
	}
}
