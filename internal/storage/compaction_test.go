package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Log compaction (cleanup.policy=compact): the newest record per key stays,
// at its offset; tombstones stay for delete.retention.ms; aborted
// transactions go, committed ones stay; nothing at or above the first
// unstable offset, the high watermark or the active segment is touched.

// compactionConfig is a compacted log with small segments and a day of
// tombstone retention.
func compactionConfig() Config {
	cfg := logTestConfig()
	cfg.CleanupPolicy = CleanupCompact
	cfg.SegmentBytes = 400
	cfg.IndexIntervalBytes = 64
	cfg.DeleteRetentionMs = 24 * int64(time.Hour/time.Millisecond)
	return cfg
}

// compactionKV is one record: a nil value is a tombstone.
type compactionKV struct {
	key   string
	value []byte
}

func compactionPut(key, value string) compactionKV { return compactionKV{key, []byte(value)} }
func compactionTombstone(key string) compactionKV  { return compactionKV{key, nil} }

// compactionBatch builds a batch at base as the log stores it, with the
// given producer fields.
func compactionBatch(t testing.TB, opts record.BatchOptions, base int64, ts int64, recs ...compactionKV) []byte {
	t.Helper()
	opts.BaseOffset = base
	opts.PartitionLeaderEpoch = 0
	b := record.NewBuilder(opts)
	for _, r := range recs {
		b.Add([]byte(r.key), r.value, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compactionTxn returns batch options for producer pid's transactions.
func compactionTxn(pid int64) record.BatchOptions {
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, 0
	opts.Transactional = true
	return opts
}

// compactionMarker builds producer pid's transaction marker at base, in
// Kafka's form: a transactional control batch of one record whose key is
// (version 0, type) and value an EndTxnMarker (version 0, coordinator
// epoch).
func compactionMarker(t testing.TB, pid, base, ts int64, typ record.ControlType) []byte {
	t.Helper()
	opts := compactionTxn(pid)
	opts.Control = true
	opts.BaseSequence = -1
	opts.BaseOffset = base
	opts.PartitionLeaderEpoch = 0
	b := record.NewBuilder(opts)
	b.Add(record.ControlRecordKey(typ), record.EndTxnMarkerValue(3), nil, ts)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compactionFollow(t testing.TB, l *Log, batches ...[]byte) {
	t.Helper()
	for _, b := range batches {
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatalf("append at %d: %v", l.LogEndOffset(), err)
		}
	}
}

// compactionRoll starts a new active segment at the log end offset.
func compactionRoll(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.rollLocked(l.leo.Load()); err != nil {
		t.Fatal(err)
	}
}

// compactionContents is what a consumer sees: offset -> key=value, with
// "<nil>" for a tombstone, markers left out.
func compactionContents(t testing.TB, l *Log) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	control := map[int64]bool{}
	for _, h := range compactionBatches(t, l) {
		if h.IsControl() {
			control[h.BaseOffset] = true
		}
	}
	for _, r := range readAllRecords(t, l, l.LogStartOffset(), l.LogEndOffset()) {
		if control[r.Offset] {
			continue // a transaction marker: consumers do not see it
		}
		v := string(r.Value)
		if r.Value == nil {
			v = "<nil>"
		}
		out[r.Offset] = string(r.Key) + "=" + v
	}
	return out
}

// compactionBatches returns every batch's header, in order, checking each
// passes its CRC.
func compactionBatches(t testing.TB, l *Log) []record.Header {
	t.Helper()
	var hs []record.Header
	for pos := l.LogStartOffset(); pos < l.LogEndOffset(); {
		res, err := l.Read(pos, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got := logBatches(t, res.Records)
		if len(got) == 0 {
			break
		}
		for _, h := range got {
			if h.LastOffset() >= pos {
				hs = append(hs, h)
			}
		}
		pos = got[len(got)-1].LastOffset() + 1
	}
	return hs
}

func compactionActiveBytes(t testing.TB, fsys vfs.FS, l *Log) []byte {
	t.Helper()
	b, err := readWhole(fsys, l.activeSegment().logPath())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompactionKeepsNewestPerKey: below the cleaning bound each key keeps
// only its newest record, at its offset; batches keep their offset ranges;
// the active segment's bytes are untouched; a second pass changes nothing;
// and the result survives a clean and an unclean restart.
func TestCompactionKeepsNewestPerKey(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		written := map[int64]string{}
		keyOf := func(o int64) string { return fmt.Sprintf("k%d", (o*7)%11) }
		for i := 0; i < 60; {
			// Batches of one to three records; keys repeat inside batches too.
			n := 1 + i%3
			recs := make([]logRec, n)
			for j := range recs {
				o := int64(i + j)
				recs[j] = logRec{ts: clock.ms, key: keyOf(o), value: fmt.Sprintf("value-%d", o)}
				if j == 2 {
					recs[j].key = recs[0].key
				}
				written[o] = recs[j].key + "=" + recs[j].value
			}
			if _, err := l.Append(logBatchRecs(t, record.DefaultBatchOptions(), recs), 0); err != nil {
				t.Fatal(err)
			}
			i += n
		}
		if l.NumSegments() < 5 {
			t.Fatalf("%d segments", l.NumSegments())
		}
		before := compactionBatches(t, l)
		active := compactionActiveBytes(t, fsys, l)
		leo, start := l.LogEndOffset(), l.LogStartOffset()
		segments := l.NumSegments()

		// Without a high watermark nothing is cleanable.
		if res, err := l.Compact(); err != nil || res.SegmentsCleaned != 0 {
			t.Fatalf("compact with HW 0: %+v %v", res, err)
		}
		l.SetHighWatermark(leo)
		res, err := l.Compact()
		if err != nil {
			t.Fatal(err)
		}
		bound := l.activeSegment().baseOffset
		if res.FirstDirtyOffset != bound || res.SegmentsCleaned != segments-1 || res.BytesAfter >= res.BytesBefore {
			t.Fatalf("compact: %+v, active segment at %d", res, bound)
		}
		want := map[int64]string{}
		newest := map[string]int64{}
		for o := int64(0); o < bound; o++ {
			k, _, _ := bytes.Cut([]byte(written[o]), []byte("="))
			newest[string(k)] = o
		}
		for o, r := range written {
			k, _, _ := bytes.Cut([]byte(r), []byte("="))
			if o >= bound || newest[string(k)] == o {
				want[o] = r
			}
		}
		check := func(l *Log) {
			t.Helper()
			if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
				t.Fatalf("log holds %v\nwant %v", got, want)
			}
			// A segment compaction emptied is deleted, so after a restart
			// the log may start at the first segment left; never past a
			// surviving record.
			firstKept := leo
			for o := range want {
				firstKept = min(firstKept, o)
			}
			if l.LogEndOffset() != leo || l.LogStartOffset() < start || l.LogStartOffset() > firstKept {
				t.Fatalf("LEO %d start %d; were %d %d, first record at %d", l.LogEndOffset(), l.LogStartOffset(), leo, start, firstKept)
			}
			// Every surviving batch kept its offset range; reads at removed
			// offsets land on the next batch.
			ranges := map[int64]int64{}
			for _, h := range before {
				ranges[h.BaseOffset] = h.LastOffset()
			}
			for _, h := range compactionBatches(t, l) {
				if last, ok := ranges[h.BaseOffset]; !ok || last != h.LastOffset() {
					t.Fatalf("batch %d..%d was not a batch before compaction", h.BaseOffset, h.LastOffset())
				}
			}
			for o := l.LogStartOffset(); o < leo; o++ {
				res, err := l.Read(o, 1, leo)
				if err != nil {
					t.Fatal(err)
				}
				if hs := logBatches(t, res.Records); len(hs) != 1 || hs[0].LastOffset() < o {
					t.Fatalf("read at %d: %v", o, logBases(hs))
				}
			}
		}
		check(l)
		if !bytes.Equal(compactionActiveBytes(t, fsys, l), active) {
			t.Fatalf("compaction changed the active segment")
		}
		res2, err := l.Compact()
		if err != nil || res2.BytesAfter != res2.BytesBefore {
			t.Fatalf("second pass: %+v %v", res2, err)
		}
		check(l)

		logClose(t, l)
		l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true, Now: clock.now})
		check(l)
		logCloseHandles(l)
		l = openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		check(l)
	})
}

func compactionMapsEqual(a, b map[int64]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCompactionHighWatermarkBounds: nothing at or above the high
// watermark is cleaned: a follower may still truncate it.
func TestCompactionHighWatermarkBounds(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		for i := range 8 {
			compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), int64(i), 1, compactionPut("a", fmt.Sprint(i))))
			compactionRoll(t, l)
		}
		l.SetHighWatermark(5)
		res, err := l.Compact()
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstDirtyOffset != 5 || res.SegmentsCleaned != 5 {
			t.Fatalf("%+v", res)
		}
		want := map[int64]string{4: "a=4", 5: "a=5", 6: "a=6", 7: "a=7"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestCompactionTombstones: a tombstone removes its key's older values at
// once, and is itself removed once it is older than delete.retention.ms.
func TestCompactionTombstones(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 10_000_000}
		cfg := compactionConfig()
		cfg.DeleteRetentionMs = 1000
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		t0 := clock.ms
		compactionFollow(t, l,
			compactionBatch(t, record.DefaultBatchOptions(), 0, t0, compactionPut("a", "1"), compactionPut("b", "1")),
			compactionBatch(t, record.DefaultBatchOptions(), 2, t0, compactionTombstone("a"), compactionPut("c", "1")),
		)
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 4, t0+500, compactionTombstone("b")))
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 5, t0+600, compactionPut("z", "1")))
		l.SetHighWatermark(l.LogEndOffset())

		for _, step := range []struct {
			now  int64
			want map[int64]string
		}{
			{t0 + 100, map[int64]string{2: "a=<nil>", 3: "c=1", 4: "b=<nil>", 5: "z=1"}},
			{t0 + 1000, map[int64]string{2: "a=<nil>", 3: "c=1", 4: "b=<nil>", 5: "z=1"}}, // exactly delete.retention.ms
			{t0 + 1001, map[int64]string{3: "c=1", 4: "b=<nil>", 5: "z=1"}},
			{t0 + 1501, map[int64]string{3: "c=1", 5: "z=1"}},
		} {
			clock.ms = step.now
			if _, err := l.Compact(); err != nil {
				t.Fatal(err)
			}
			if got := compactionContents(t, l); !compactionMapsEqual(got, step.want) {
				t.Fatalf("at +%d: %v, want %v", step.now-t0, got, step.want)
			}
		}
		// The emptied segment went entirely; the log still reads from its start.
		if _, err := l.Read(0, 1<<20, l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCompactionKeylessRecords: a compacted log refuses keyless records at
// Append; ones written while the log was not compacted are dropped by the
// cleaner, since nothing could ever supersede them.
func TestCompactionKeylessRecords(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		cfg.CleanupPolicy = CleanupDelete
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		keyless := testBatch(t, 2, 10, 1, nil)
		if _, err := l.Append(slices.Clone(keyless), 0); err != nil {
			t.Fatal(err)
		}
		cfg.CleanupPolicy = CleanupCompact
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(slices.Clone(keyless), 0); !errors.Is(err, ErrInvalidBatch) {
			t.Fatalf("keyless append to a compacted log: %v", err)
		}
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 2, 1, compactionPut("k", "v")))
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 3, 1, compactionPut("z", "v")))
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		if got, want := compactionContents(t, l), map[int64]string{2: "k=v", 3: "z=v"}; !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestCompactionTransactions: records of aborted transactions are removed
// and those of committed ones kept; a marker stays while its transaction
// has records left or it is younger than delete.retention.ms.
func TestCompactionTransactions(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 50_000_000}
		cfg := compactionConfig()
		cfg.DeleteRetentionMs = 1000
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		ts := clock.ms
		plain := record.DefaultBatchOptions()
		compactionFollow(t, l,
			compactionBatch(t, plain, 0, ts, compactionPut("a", "plain-0")),
			compactionBatch(t, compactionTxn(100), 1, ts, compactionPut("a", "aborted-1"), compactionPut("b", "aborted-2")),
			compactionBatch(t, compactionTxn(200), 3, ts, compactionPut("c", "committed-3")),
		)
		compactionRoll(t, l)
		compactionFollow(t, l,
			compactionBatch(t, compactionTxn(100), 4, ts, compactionPut("d", "aborted-4")),
			compactionMarker(t, 100, 5, ts, record.ControlAbort),
			compactionMarker(t, 200, 6, ts, record.ControlCommit),
		)
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, plain, 7, ts, compactionPut("z", "plain-7")))
		l.SetHighWatermark(l.LogEndOffset())

		markers := func() []int64 {
			var out []int64
			for _, h := range compactionBatches(t, l) {
				if h.IsControl() {
					out = append(out, h.BaseOffset)
				}
			}
			return out
		}
		clock.ms = ts + 10 // markers younger than delete.retention.ms
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{0: "a=plain-0", 3: "c=committed-3", 7: "z=plain-7"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		if got := markers(); !slices.Equal(got, []int64{5, 6}) {
			t.Fatalf("markers at %v, want [5 6]", got)
		}
		clock.ms = ts + 5000
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		// The abort marker's transaction has nothing left: it goes. The
		// commit marker's still has offset 3: it stays.
		if got := markers(); !slices.Equal(got, []int64{6}) {
			t.Fatalf("markers at %v, want [6]", got)
		}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		// Once a later value supersedes the committed record, its marker
		// goes too.
		compactionFollow(t, l, compactionBatch(t, plain, 8, clock.ms, compactionPut("c", "plain-8")))
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, plain, 9, clock.ms, compactionPut("y", "plain-9")))
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		if got := markers(); len(got) != 0 {
			t.Fatalf("markers at %v, want none", got)
		}
		want = map[int64]string{0: "a=plain-0", 7: "z=plain-7", 8: "c=plain-8", 9: "y=plain-9"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestCompactionOpenTransactionBounds: a transaction with no marker yet
// bounds cleaning at its first offset; once it aborts, its records go.
func TestCompactionOpenTransactionBounds(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 50_000_000}
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		plain := record.DefaultBatchOptions()
		ts := clock.ms
		compactionFollow(t, l, compactionBatch(t, plain, 0, ts, compactionPut("a", "0")), compactionBatch(t, plain, 1, ts, compactionPut("a", "1")))
		compactionRoll(t, l) // segment 2..
		compactionFollow(t, l, compactionBatch(t, plain, 2, ts, compactionPut("a", "2")), compactionBatch(t, compactionTxn(300), 3, ts, compactionPut("b", "open-3")))
		compactionRoll(t, l) // segment 4..
		compactionFollow(t, l, compactionBatch(t, plain, 4, ts, compactionPut("a", "4")), compactionBatch(t, plain, 5, ts, compactionPut("b", "5")))
		compactionRoll(t, l) // segment 6.. (active)
		compactionFollow(t, l, compactionBatch(t, plain, 6, ts, compactionPut("z", "6")))
		l.SetHighWatermark(l.LogEndOffset())
		res, err := l.Compact()
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstDirtyOffset != 2 || res.SegmentsCleaned != 1 {
			t.Fatalf("%+v: the open transaction at 3 should bound cleaning at segment 2", res)
		}
		want := map[int64]string{1: "a=1", 2: "a=2", 3: "b=open-3", 4: "a=4", 5: "b=5", 6: "z=6"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		compactionFollow(t, l, compactionMarker(t, 300, 7, ts, record.ControlAbort))
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, plain, 8, ts, compactionPut("z", "8")))
		l.SetHighWatermark(l.LogEndOffset())
		if res, err = l.Compact(); err != nil {
			t.Fatal(err)
		}
		if res.FirstDirtyOffset != 8 {
			t.Fatalf("%+v", res)
		}
		// z=6 stays: its successor is in the active segment, which
		// neither cleans nor supersedes.
		want = map[int64]string{4: "a=4", 5: "b=5", 6: "z=6", 8: "z=8"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestCompactionKeepsProducersLastBatch: when every record of a producer's
// last batch is superseded the batch stays, empty, with its offsets and
// producer fields, so the producer's sequence numbers survive; its earlier
// batches go.
func TestCompactionKeepsProducersLastBatch(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		idem := record.DefaultBatchOptions()
		idem.ProducerID, idem.ProducerEpoch = 400, 2
		first, last := idem, idem
		first.BaseSequence, last.BaseSequence = 0, 2
		compactionFollow(t, l,
			compactionBatch(t, first, 0, 1, compactionPut("a", "0"), compactionPut("b", "1")),
			compactionBatch(t, last, 2, 1, compactionPut("a", "2"), compactionPut("b", "3"), compactionPut("a", "4")),
		)
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 5, 1, compactionPut("a", "5"), compactionPut("b", "6")))
		compactionRoll(t, l)
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 7, 1, compactionPut("z", "7")))
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		if got, want := compactionContents(t, l), map[int64]string{5: "a=5", 6: "b=6", 7: "z=7"}; !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		hs := compactionBatches(t, l)
		if len(hs) != 3 {
			t.Fatalf("batches at %v, want [2 5 7]", logBases(hs))
		}
		h := hs[0]
		if h.BaseOffset != 2 || h.LastOffset() != 4 || h.NumRecords != 0 || h.ProducerID != 400 || h.ProducerEpoch != 2 || h.BaseSequence != 2 {
			t.Fatalf("producer's last batch: %+v", h)
		}
	})
}

// TestCompactionConcurrent: compaction passes run while an appender writes
// and readers read; readers only ever see whole, valid batches with the
// values written at their offsets, and in the end every key's newest value
// is there.
func TestCompactionConcurrent(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		done := make(chan struct{})
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pos := int64(0)
				for {
					select {
					case <-done:
						return
					default:
					}
					res, err := l.Read(pos, 100+r*500, l.LogEndOffset())
					if err == nil {
						err = logVerifyBatches(res.Records)
					}
					if err != nil {
						errs <- fmt.Errorf("read at %d: %w", pos, err)
						return
					}
					pos++
					if pos >= l.LogEndOffset() {
						pos = 0
					}
				}
			}()
		}
		// The cleaner runs a pass whenever poked (every few appends), so
		// passes overlap appends without spinning on fsyncs.
		poke := make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-poke:
				}
				if _, err := l.Compact(); err != nil {
					errs <- fmt.Errorf("compact: %w", err)
					return
				}
			}
		}()
		newest := map[string]int64{}
		for i := range 250 {
			o := l.LogEndOffset()
			key := fmt.Sprintf("k%d", i%13)
			b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 1, key: key, value: fmt.Sprintf("value-%d", o)}})
			if _, err := l.Append(b, 0); err != nil {
				t.Fatal(err)
			}
			newest[key] = o
			l.SetHighWatermark(l.LogEndOffset())
			if i%5 == 0 {
				select {
				case poke <- struct{}{}:
				default: // a pass is pending already
				}
			}
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		got := compactionContents(t, l)
		for key, o := range newest {
			if got[o] != fmt.Sprintf("%s=value-%d", key, o) {
				t.Fatalf("newest %s at %d: %q", key, o, got[o])
			}
		}
		bound := l.activeSegment().baseOffset
		seen := map[string]bool{}
		for o := int64(0); o < bound; o++ {
			if r, ok := got[o]; ok {
				k, _, _ := bytes.Cut([]byte(r), []byte("="))
				if seen[string(k)] {
					t.Fatalf("key %s twice below the active segment", k)
				}
				seen[string(k)] = true
			}
		}
		if l.Size() > 60*int64(cfg.SegmentBytes) {
			t.Fatalf("log is %d bytes after compaction", l.Size())
		}
	})
}

// TestCompactionSegmentTruncatedAndRefilled pins a fix: the cleaner
// recognised "the segment I cleaned is unchanged" by its size alone. A
// follower truncating into that segment mid-pass, then appending its new
// leader's batches to the same size (and rolling), had its new records
// replaced by the cleaned copy of the old ones.
func TestCompactionSegmentTruncatedAndRefilled(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := compactionConfig()
	cfg.SegmentBytes = 1 << 20
	l := openTestLog(t, fsys, "/data/t-0", cfg, OpenOptions{})
	defer logClose(t, l)
	batch := func(o int64, prefix string) []byte {
		return compactionBatch(t, record.DefaultBatchOptions(), o, 1, compactionPut("k", fmt.Sprintf("%s-%d", prefix, o)))
	}
	for o := range int64(4) {
		compactionFollow(t, l, batch(o, "old"))
	}
	compactionRoll(t, l)
	compactionFollow(t, l, batch(4, "old"))
	compactionRoll(t, l)
	compactionFollow(t, l, batch(5, "zzz"))
	l.SetHighWatermark(l.LogEndOffset())

	var fired bool
	fsys.SetHook(func(op vfs.Op, path string) error {
		if op != vfs.OpSync || fired || !bytes.HasSuffix([]byte(path), []byte("00000000000000000000.log.cleaned")) {
			return nil
		}
		fired = true
		// Mid-pass: the follower truncates into the segment being
		// cleaned and refills it, byte for byte as long, then rolls.
		if err := l.TruncateTo(2); err != nil {
			return err
		}
		for o := int64(2); o < 4; o++ {
			if _, err := l.AppendAsFollower(batch(o, "new")); err != nil {
				return err
			}
		}
		compactionRoll(t, l)
		compactionFollow(t, l, batch(4, "new"))
		return nil
	})
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	fsys.SetHook(nil)
	if !fired {
		t.Fatal("the hook never ran")
	}
	got := compactionContents(t, l)
	for o := int64(2); o < 5; o++ {
		if want := fmt.Sprintf("k=new-%d", o); got[o] != want {
			t.Fatalf("offset %d holds %q, want %q (log %v)", o, got[o], want, got)
		}
	}
}

// TestCompactionSegmentDeletedMidPass pins a fix: a segment that retention
// deleted while a compaction pass was about to read it was reopened by
// name, which created an empty file of that name (a stray segment after a
// restart) and failed the pass with a damaged-segment error.
func TestCompactionSegmentDeletedMidPass(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/t-0"
	cfg := compactionConfig()
	cfg.CleanupPolicy = CleanupCompact | CleanupDelete
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	for o := range int64(6) {
		compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), o, 1, compactionPut("k", fmt.Sprint(o))))
		compactionRoll(t, l)
	}
	compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), 6, 1, compactionPut("z", "6")))
	l.SetHighWatermark(l.LogEndOffset())

	var fired bool
	fsys.SetHook(func(op vfs.Op, path string) error {
		if op != vfs.OpCreate || fired || !bytes.HasSuffix([]byte(path), []byte("00000000000000000000.log.cleaned")) {
			return nil
		}
		fired = true
		if _, err := l.DeleteRecordsBefore(3); err != nil {
			return err
		}
		_, err := l.ApplyRetention()
		return err
	})
	_, err := l.Compact()
	fsys.SetHook(nil)
	if !fired {
		t.Fatal("the hook never ran")
	}
	if err != nil {
		t.Fatalf("compaction racing retention: %v", err)
	}
	for name := range logSegmentFiles(t, fsys, dir) {
		if base, _ := parseSegmentName(name, ".log"); base < 3 {
			t.Fatalf("segment file %s below the log start offset recreated", name)
		}
	}
	if l.LogStartOffset() != 3 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	logClose(t, l)
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
	defer logClose(t, l)
	if l.LogStartOffset() != 3 || l.LogEndOffset() != 7 {
		t.Fatalf("after restart: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestCompactionPassesConcurrent: two compaction passes over one log at
// once (the background cleaner and a CleanOnce called by hand) must not
// interfere: both write "<base>.log.cleaned", and a swapped-in copy must
// never be one the other pass was still writing.
func TestCompactionPassesConcurrent(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		cfg.SegmentBytes = 2000
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		newest := map[string]int64{}
		for round := range 20 {
			for i := range 40 {
				o := l.LogEndOffset()
				key := fmt.Sprintf("k%d", (i*round)%17)
				b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 1, key: key, value: fmt.Sprintf("value-%d", o)}})
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
				newest[key] = o
			}
			l.SetHighWatermark(l.LogEndOffset())
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := l.Compact(); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("round %d: %v", round, err)
			}
			res, err := l.Read(0, 1<<30, l.LogEndOffset())
			if err == nil {
				err = logVerifyBatches(res.Records)
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got := compactionContents(t, l)
		for key, o := range newest {
			if got[o] != fmt.Sprintf("%s=value-%d", key, o) {
				t.Fatalf("newest %s at %d: %q", key, o, got[o])
			}
		}
	})
}

// TestCompactionKeepsLogStartAcrossRestart: when compaction empties the
// log's first segment, the segment stays (empty), so the log start offset
// after a restart is where it was, not the next surviving segment's base.
func TestCompactionKeepsLogStartAcrossRestart(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := compactionConfig()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		for i := range 4 {
			compactionFollow(t, l, compactionBatch(t, record.DefaultBatchOptions(), int64(i), 1, compactionPut("a", fmt.Sprint(i))))
			compactionRoll(t, l)
		}
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{3: "a=3"}
		if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		segs := *l.segments.Load()
		if segs[0].baseOffset != 0 || segs[0].size.Load() != 0 {
			t.Fatalf("first segment: base %d, %d bytes; want the emptied segment at 0", segs[0].baseOffset, segs[0].size.Load())
		}
		logClose(t, l)
		for _, clean := range []bool{true, false} {
			l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: clean})
			if l.LogStartOffset() != 0 {
				t.Fatalf("clean=%v: log start %d after restart, want 0", clean, l.LogStartOffset())
			}
			if got := compactionContents(t, l); !compactionMapsEqual(got, want) {
				t.Fatalf("clean=%v: got %v, want %v", clean, got, want)
			}
			res, err := l.Read(0, 1<<20, l.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if hs := logBatches(t, res.Records); len(hs) != 1 || hs[0].BaseOffset != 3 {
				t.Fatalf("clean=%v: read at 0 gave %v, want the batch at 3", clean, logBases(hs))
			}
			logClose(t, l)
		}
	})
}
