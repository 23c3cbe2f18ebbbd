package storage

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/leaderepoch"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Unit tests of one Log: appends, reads, rolls, timestamps lookups, flush
// and truncation. Every test runs on real files and on MemFS (logForEachFS),
// since the two differ in how handles, renames and sizes behave.

// logForEachFS runs fn on real files in a temporary directory and on a
// fresh MemFS, each in a subtest.
func logForEachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { fn(t, vfs.OS(), filepath.Join(t.TempDir(), "events-0")) })
	t.Run("mem", func(t *testing.T) { fn(t, vfs.NewMem(), "/data/events-0") })
}

// logTestConfig is the default config with room for a few small batches
// per segment, so that tests cross segment boundaries without writing much.
func logTestConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 128
	cfg.RetentionMs = -1
	return cfg
}

// logRec describes one record a test wrote, at its offset.
type logRec struct {
	offset int64
	ts     int64
	key    string
	value  string
}

// logBatchRecs builds a client batch with one record per rec (offsets are
// ignored: the log assigns them).
func logBatchRecs(t testing.TB, opts record.BatchOptions, recs []logRec) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for _, r := range recs {
		var key []byte
		if r.key != "" {
			key = []byte(r.key)
		}
		b.Add(key, []byte(r.value), nil, r.ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// logModel is what a test expects the log to hold: the records in offset
// order, each with its offset.
type logModel struct {
	recs []logRec
}

// appendBatch appends one batch of n records at timestamp ts through
// Append and records them in the model. Values name their offset, so any
// record served at the wrong offset shows.
func (m *logModel) appendBatch(t testing.TB, l *Log, n int, ts int64, epoch int32) AppendInfo {
	t.Helper()
	return m.appendBatchTs(t, l, slices.Repeat([]int64{ts}, n), epoch)
}

// appendBatchTs appends one batch whose records have timestamps tss.
func (m *logModel) appendBatchTs(t testing.TB, l *Log, tss []int64, epoch int32) AppendInfo {
	t.Helper()
	next := l.LogEndOffset()
	recs := make([]logRec, len(tss))
	for i, ts := range tss {
		o := next + int64(i)
		recs[i] = logRec{offset: o, ts: ts, key: fmt.Sprintf("k%d", o%7), value: fmt.Sprintf("value-%d", o)}
	}
	info, err := l.Append(logBatchRecs(t, record.DefaultBatchOptions(), recs), epoch)
	if err != nil {
		t.Fatalf("append at %d: %v", next, err)
	}
	if info.FirstOffset != next || info.LastOffset != next+int64(len(tss))-1 {
		t.Fatalf("append at %d: got offsets %d..%d", next, info.FirstOffset, info.LastOffset)
	}
	m.recs = append(m.recs, recs...)
	return info
}

// truncate drops the model's records at or after offset.
func (m *logModel) truncate(offset int64) {
	i := logSearch(m.recs, offset)
	m.recs = m.recs[:i]
}

// from returns the model's records at or after offset.
func (m *logModel) from(offset int64) []logRec {
	return m.recs[logSearch(m.recs, offset):]
}

func logSearch(recs []logRec, offset int64) int {
	i, _ := slices.BinarySearchFunc(recs, offset, func(r logRec, o int64) int {
		switch {
		case r.offset < o:
			return -1
		case r.offset > o:
			return 1
		}
		return 0
	})
	return i
}

// offsetForTimestamp is the brute-force answer Log.OffsetForTimestamp must
// give: the first record at or after start whose timestamp is >= ts.
func (m *logModel) offsetForTimestamp(ts, start int64) (int64, int64, bool) {
	for _, r := range m.recs {
		if r.offset >= start && r.ts >= ts {
			return r.offset, r.ts, true
		}
	}
	return 0, 0, false
}

// maxTimestamp is the first record with the largest timestamp.
func (m *logModel) maxTimestamp(start int64) (int64, int64, bool) {
	best := -1
	for i, r := range m.recs {
		if r.offset >= start && (best < 0 || r.ts > m.recs[best].ts) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return m.recs[best].offset, m.recs[best].ts, true
}

// check reads the whole log as a consumer would and compares it with the
// model: same offsets, keys, values and timestamps, nothing more.
func (m *logModel) check(t testing.TB, l *Log) {
	t.Helper()
	start := l.LogStartOffset()
	got := readAllRecords(t, l, start, l.LogEndOffset())
	want := m.from(start)
	if len(got) != len(want) {
		t.Fatalf("log holds %d records from %d, model %d", len(got), start, len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Offset != w.offset || string(r.Value) != w.value || string(r.Key) != w.key || r.Timestamp != w.ts {
			t.Fatalf("record %d: got %s ts=%d, want %d:%q=%q ts=%d", i, describe(r), r.Timestamp, w.offset, w.key, w.value, w.ts)
		}
	}
}

// checkTimestamps compares OffsetForTimestamp for every timestamp around
// the model's, and MaxTimestamp, with brute force.
func (m *logModel) checkTimestamps(t testing.TB, l *Log) {
	t.Helper()
	start := l.LogStartOffset()
	seen := map[int64]bool{}
	var probes []int64
	for _, r := range m.recs {
		for _, ts := range []int64{r.ts - 1, r.ts, r.ts + 1} {
			if !seen[ts] {
				seen[ts] = true
				probes = append(probes, ts)
			}
		}
	}
	probes = append(probes, -1, 0, 1<<62)
	for _, ts := range probes {
		o, gotTs, ok, err := l.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
		}
		wo, wts, wok := m.offsetForTimestamp(ts, start)
		if ok != wok || o != wo || gotTs != wts {
			t.Fatalf("OffsetForTimestamp(%d) = (%d, %d, %v), want (%d, %d, %v)", ts, o, gotTs, ok, wo, wts, wok)
		}
	}
	o, ts, ok, err := l.MaxTimestamp()
	if err != nil {
		t.Fatalf("MaxTimestamp: %v", err)
	}
	wo, wts, wok := m.maxTimestamp(start)
	if ok != wok || o != wo || ts != wts {
		t.Fatalf("MaxTimestamp = (%d, %d, %v), want (%d, %d, %v)", o, ts, ok, wo, wts, wok)
	}
}

// logBatches splits Read's bytes into batches, failing the test unless
// each is whole and passes its CRC, and returns their headers.
func logBatches(t testing.TB, data []byte) []record.Header {
	t.Helper()
	var hs []record.Header
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			t.Fatalf("read returned a bad batch: %v", err)
		}
		if h.Size() > len(data) {
			t.Fatalf("read returned a partial batch: %d of %d bytes", len(data), h.Size())
		}
		if _, err := record.Validate(data[:h.Size()], record.ValidateOptions{}); err != nil {
			t.Fatalf("read returned a batch that does not validate: %v", err)
		}
		hs = append(hs, h)
		data = data[h.Size():]
	}
	return hs
}

func logBases(hs []record.Header) []int64 {
	out := make([]int64, len(hs))
	for i, h := range hs {
		out[i] = h.BaseOffset
	}
	return out
}

// logSegmentFiles returns the sizes of the .log files in dir, by name.
func logSegmentFiles(t testing.TB, fsys vfs.FS, dir string) map[string]int64 {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			info, err := fsys.Stat(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = info.Size
		}
	}
	return out
}

// logCloseHandles drops a log without Close: no flush, no index write, no
// clean-shutdown state; only the file handles are released, as the
// process dying would.
func logCloseHandles(l *Log) {
	l.mu.Lock()
	l.closed.Store(true)
	l.segLock.Lock()
	l.closeFiles()
	l.segLock.Unlock()
	l.mu.Unlock()
}

func logClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// A new leader's epoch is recorded at the log end before any write in
// it; it must start at the log end, and an epoch not past the latest
// changes nothing. Its first append keeps the entry, and it survives a
// reopen.
func TestLogAssignLeaderEpoch(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		var m logModel
		m.appendBatch(t, l, 3, 1000, 0)
		if err := l.AssignLeaderEpoch(4, 2); !errors.Is(err, leaderepoch.ErrInvalidEpochEntry) {
			t.Fatalf("epoch starting before the log end: %v, want ErrInvalidEpochEntry", err)
		}
		if err := l.AssignLeaderEpoch(4, 3); err != nil {
			t.Fatal(err)
		}
		if err := l.AssignLeaderEpoch(2, 3); err != nil {
			t.Fatal(err)
		}
		want := []leaderepoch.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 4, StartOffset: 3}}
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("epochs %v, want %v", got, want)
		}
		m.appendBatch(t, l, 2, 1001, 4)
		if err := l.Flush(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		logClose(t, l)
		l = openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("epochs after a reopen %v, want %v", got, want)
		}
	})
}

// A leader that wrote nothing in its epoch before losing it ends its
// epoch cache in an entry at the log end. Truncating to the log end (a
// follower told by its new leader that the histories part there) cuts
// no record but drops that entry, so the follower's next fetch names the
// epoch before it; the entry also stays gone after a reopen.
func TestLogTruncateToTheEndDropsAnEmptyEpoch(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		var m logModel
		m.appendBatch(t, l, 3, 1000, 0)
		if err := l.AssignLeaderEpoch(1, 3); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(3); err != nil {
			t.Fatal(err)
		}
		want := []leaderepoch.EpochEntry{{Epoch: 0, StartOffset: 0}}
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) || l.LogEndOffset() != 3 {
			t.Fatalf("after TruncateTo(3): epochs %v, log end %d; want %v and 3", got, l.LogEndOffset(), want)
		}
		// Past the end: nothing changes.
		if err := l.TruncateTo(10); err != nil {
			t.Fatal(err)
		}
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("after TruncateTo(10): epochs %v, want %v", got, want)
		}
		logClose(t, l)
		l = openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("epochs after a reopen %v, want %v", got, want)
		}
	})
}

func TestLogAppendAssignsOffsetsAndEpochs(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		var m logModel
		for i, c := range []struct {
			n     int
			epoch int32
		}{{1, 0}, {3, 0}, {5, 2}, {2, 2}, {1, 7}} {
			info := m.appendBatch(t, l, c.n, int64(1000+i), c.epoch)
			if info.NumBatches != 1 || info.MaxTimestamp != int64(1000+i) || info.LogAppendTime != -1 {
				t.Fatalf("append %d: info %+v", i, info)
			}
		}
		if l.LogEndOffset() != 12 {
			t.Fatalf("LEO = %d, want 12", l.LogEndOffset())
		}
		// Several batches in one Append get consecutive offsets too.
		two := append(logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 5, key: "k5", value: "value-12"}, {ts: 5, key: "k6", value: "value-13"}}),
			logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 6, key: "k0", value: "value-14"}})...)
		info, err := l.Append(two, 9)
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset != 12 || info.LastOffset != 14 || info.NumBatches != 2 || info.MaxTimestamp != 6 {
			t.Fatalf("two-batch append: %+v", info)
		}
		// The caller's bytes were rewritten in place: offsets and epoch.
		if h, _ := record.ParseHeader(two); h.BaseOffset != 12 || h.PartitionLeaderEpoch != 9 {
			t.Fatalf("appended bytes not stamped: base %d epoch %d", h.BaseOffset, h.PartitionLeaderEpoch)
		}
		m.recs = append(m.recs, logRec{12, 5, "k5", "value-12"}, logRec{13, 5, "k6", "value-13"}, logRec{14, 6, "k0", "value-14"})
		m.check(t, l)

		res, err := l.Read(0, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		var got [][3]int64
		for _, h := range logBatches(t, res.Records) {
			got = append(got, [3]int64{h.BaseOffset, h.LastOffset(), int64(h.PartitionLeaderEpoch)})
		}
		want := [][3]int64{{0, 0, 0}, {1, 3, 0}, {4, 8, 2}, {9, 10, 2}, {11, 11, 7}, {12, 13, 9}, {14, 14, 9}}
		if !slices.Equal(got, want) {
			t.Fatalf("batches (base, last, epoch) = %v, want %v", got, want)
		}
		wantEpochs := []leaderepoch.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 4}, {Epoch: 7, StartOffset: 11}, {Epoch: 9, StartOffset: 12}}
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, wantEpochs) {
			t.Fatalf("leader epochs %v, want %v", got, wantEpochs)
		}
	})
}

func TestLogAppendLogAppendTime(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_700_000_000_000}
		cfg := logTestConfig()
		cfg.LogAppendTime = true
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		// The producer's CreateTime timestamps are replaced by the
		// broker's clock, batch by batch.
		var stamps []int64
		for i := range 3 {
			b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 5, key: "a", value: "x"}, {ts: 9, key: "b", value: "y"}})
			info, err := l.Append(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if info.LogAppendTime != clock.ms || info.MaxTimestamp != clock.ms || info.FirstOffset != int64(2*i) {
				t.Fatalf("append %d: %+v, clock %d", i, info, clock.ms)
			}
			stamps = append(stamps, clock.ms)
			clock.advance(time.Second)
		}
		res, err := l.Read(0, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		hs := logBatches(t, res.Records) // CRCs were recomputed
		if len(hs) != 3 {
			t.Fatalf("%d batches", len(hs))
		}
		for i, h := range hs {
			if h.TimestampType() != record.LogAppendTime || h.MaxTimestamp != stamps[i] {
				t.Fatalf("batch %d: type %v max %d, want LogAppendTime %d", i, h.TimestampType(), h.MaxTimestamp, stamps[i])
			}
		}
		for _, r := range readAllRecords(t, l, 0, l.LogEndOffset()) {
			if want := stamps[r.Offset/2]; r.Timestamp != want {
				t.Fatalf("record %d timestamp %d, want %d", r.Offset, r.Timestamp, want)
			}
		}
		if o, ts, ok, err := l.OffsetForTimestamp(stamps[1]); err != nil || !ok || o != 2 || ts != stamps[1] {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v", stamps[1], o, ts, ok, err)
		}
		if o, ts, ok, err := l.MaxTimestamp(); err != nil || !ok || o != 4 || ts != stamps[2] {
			t.Fatalf("MaxTimestamp = %d, %d, %v, %v", o, ts, ok, err)
		}
	})
}

func TestLogRead(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		var m logModel
		// Batches: [0..2] [3] [4..8] [9].
		var sizes []int
		for _, n := range []int{3, 1, 5, 1} {
			m.appendBatch(t, l, n, 100, 0)
		}
		res, err := l.Read(0, 1<<20, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range logBatches(t, res.Records) {
			sizes = append(sizes, h.Size())
		}
		l.SetHighWatermark(9)

		for _, c := range []struct {
			name      string
			offset    int64
			maxBytes  int
			maxOffset int64
			want      []int64 // base offsets of the batches returned
			err       error
		}{
			{"everything", 0, 1 << 20, 10, []int64{0, 3, 4, 9}, nil},
			{"starts with the batch holding the offset", 1, 1 << 20, 10, []int64{0, 3, 4, 9}, nil},
			{"inside a later batch", 6, 1 << 20, 10, []int64{4, 9}, nil},
			{"last batch", 9, 1 << 20, 10, []int64{9}, nil},
			{"one whole batch even above maxBytes", 4, 1, 10, []int64{4}, nil},
			{"zero maxBytes still one batch", 0, 0, 10, []int64{0}, nil},
			{"maxBytes exactly two batches", 0, sizes[0] + sizes[1], 10, []int64{0, 3}, nil},
			{"maxBytes one short of two batches", 0, sizes[0] + sizes[1] - 1, 10, []int64{0}, nil},
			{"maxOffset cuts before a batch it would split", 0, 1 << 20, 4, []int64{0, 3}, nil},
			{"maxOffset inside the first batch", 0, 1 << 20, 2, nil, nil},
			{"maxOffset at the first batch's end", 0, 1 << 20, 3, []int64{0}, nil},
			{"maxOffset is the high watermark", 5, 1 << 20, l.HighWatermark(), []int64{4}, nil},
			{"maxOffset above the log end", 0, 1 << 20, 1000, []int64{0, 3, 4, 9}, nil},
			{"at the log end offset: empty", 10, 1 << 20, 10, nil, nil},
			{"at maxOffset: empty", 4, 1 << 20, 4, nil, nil},
			{"above the log end offset", 11, 1 << 20, 100, nil, ErrOffsetOutOfRange},
			{"negative", -1, 1 << 20, 10, nil, ErrOffsetOutOfRange},
		} {
			t.Run(c.name, func(t *testing.T) {
				res, err := l.Read(c.offset, c.maxBytes, c.maxOffset)
				if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				if got := logBases(logBatches(t, res.Records)); !slices.Equal(got, c.want) {
					t.Fatalf("batches at %v, want %v", got, c.want)
				}
				if res.LogStartOffset != 0 || res.LogEndOffset != 10 || res.HighWatermark != 9 {
					t.Fatalf("result offsets start=%d end=%d hw=%d", res.LogStartOffset, res.LogEndOffset, res.HighWatermark)
				}
			})
		}

		// Below the log start offset, once DeleteRecords moved it.
		l.SetHighWatermark(10)
		if _, err := l.DeleteRecordsBefore(4); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Read(3, 1<<20, 10); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below the log start offset: %v", err)
		}
		res, err = l.Read(4, 1<<20, 10)
		if err != nil || !slices.Equal(logBases(logBatches(t, res.Records)), []int64{4, 9}) || res.LogStartOffset != 4 {
			t.Fatalf("read at the log start offset: %v, start %d", err, res.LogStartOffset)
		}
		m.check(t, l)
	})
}

// TestLogReadAcrossRolls writes enough to roll several times by
// segment.bytes and checks every segment respects it, every offset reads
// back from the batch that holds it, and a read never spans two segments
// but does continue into the next one.
func TestLogReadAcrossRolls(t *testing.T) {
	for _, interval := range []int{0, 128, 4096} {
		t.Run(fmt.Sprintf("index.interval.bytes=%d", interval), func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				cfg := logTestConfig()
				cfg.SegmentBytes = 1000
				cfg.IndexIntervalBytes = interval
				l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
				defer logClose(t, l)
				var m logModel
				for i := range 60 {
					m.appendBatch(t, l, 1+i%4, int64(i), 0)
				}
				if l.NumSegments() < 5 {
					t.Fatalf("only %d segments", l.NumSegments())
				}
				files := logSegmentFiles(t, fsys, dir)
				if len(files) != l.NumSegments() {
					t.Fatalf("%d segment files for %d segments", len(files), l.NumSegments())
				}
				for name, size := range files {
					if size > cfg.SegmentBytes || size == 0 {
						t.Fatalf("segment %s has %d bytes, segment.bytes %d", name, size, cfg.SegmentBytes)
					}
				}
				m.check(t, l)
				for o := int64(0); o < l.LogEndOffset(); o++ {
					res, err := l.Read(o, 1, l.LogEndOffset())
					if err != nil {
						t.Fatal(err)
					}
					hs := logBatches(t, res.Records)
					if len(hs) != 1 || hs[0].BaseOffset > o || hs[0].LastOffset() < o {
						t.Fatalf("read at %d returned batches %v", o, logBases(hs))
					}
				}
				m.checkTimestamps(t, l)
			})
		})
	}
}

// TestLogRollBySegmentMs: segment.ms measures from the first batch's
// timestamp to the new batch's, so a fake clock and LogAppendTime drive it,
// as do producer timestamps under CreateTime.
func TestLogRollBySegmentMs(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := logTestConfig()
		cfg.SegmentMs = 1000
		cfg.LogAppendTime = true
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		var m logModel
		steps := []struct {
			advance  time.Duration
			segments int
		}{
			{0, 1},
			{500 * time.Millisecond, 1},
			{500 * time.Millisecond, 1}, // exactly segment.ms: not yet
			{1 * time.Millisecond, 2},   // past it: roll, the new segment starts here
			{999 * time.Millisecond, 2},
			{2 * time.Millisecond, 3},
			{time.Hour, 4},
		}
		var bases []int64
		for i, s := range steps {
			clock.advance(s.advance)
			info := m.appendBatch(t, l, 2, 0, 0)
			for j := range 2 {
				m.recs[len(m.recs)-1-j].ts = clock.ms
			}
			if got := l.NumSegments(); got != s.segments {
				t.Fatalf("step %d: %d segments, want %d", i, got, s.segments)
			}
			if i == 0 || steps[i-1].segments != s.segments {
				bases = append(bases, info.FirstOffset)
			}
		}
		var got []int64
		for name := range logSegmentFiles(t, fsys, dir) {
			base, _ := parseSegmentName(name, ".log")
			got = append(got, base)
		}
		slices.Sort(got)
		if !slices.Equal(got, bases) {
			t.Fatalf("segments at %v, want %v", got, bases)
		}
		m.check(t, l)

		// CreateTime: the producer's timestamps decide.
		cfg.LogAppendTime = false
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		before := l.NumSegments()
		m.appendBatch(t, l, 1, 5_000_000, 0) // rolls: the active segment started an hour earlier
		m.appendBatch(t, l, 1, 5_000_900, 0)
		if l.NumSegments() != before+1 {
			t.Fatalf("%d segments, want %d", l.NumSegments(), before+1)
		}
		m.appendBatch(t, l, 1, 5_001_001, 0)
		if l.NumSegments() != before+2 {
			t.Fatalf("%d segments, want %d", l.NumSegments(), before+2)
		}
		m.check(t, l)
	})
}

// TestLogOffsetForTimestamp compares OffsetForTimestamp and MaxTimestamp
// with brute force over a log whose timestamps go up and down inside and
// across batches and segments, on the live log, after a clean reopen
// (inactive segments load their indexes lazily, from the files) and after
// an unclean one (indexes rebuilt by the scan).
func TestLogOffsetForTimestamp(t *testing.T) {
	for _, interval := range []int{0, 200, 4096} {
		t.Run(fmt.Sprintf("index.interval.bytes=%d", interval), func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				cfg := logTestConfig()
				cfg.SegmentBytes = 700
				cfg.IndexIntervalBytes = interval
				l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
				var m logModel
				if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
					t.Fatalf("empty log: found=%v err=%v", ok, err)
				}
				if _, _, ok, err := l.MaxTimestamp(); ok || err != nil {
					t.Fatalf("empty log MaxTimestamp: found=%v err=%v", ok, err)
				}
				// Timestamps rise overall but dip inside batches, repeat
				// across batches, and the largest comes twice.
				batches := [][]int64{
					{100, 90, 110}, {105}, {120, 120}, {115, 130, 125},
					{130}, {200, 150}, {140}, {300, 100, 250},
					{260}, {300}, {299, 301}, {50}, {400, 390, 410},
					{410}, {405}, {500},
				}
				for i, tss := range batches {
					m.appendBatchTs(t, l, tss, int32(i/4))
				}
				if l.NumSegments() < 3 {
					t.Fatalf("only %d segments", l.NumSegments())
				}
				m.checkTimestamps(t, l)

				logClose(t, l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
				for i, s := range *l.segments.Load() {
					if last := i == l.NumSegments()-1; s.mu.loaded != last {
						t.Fatalf("segment %d loaded=%v after a clean open", i, s.mu.loaded)
					}
				}
				m.checkTimestamps(t, l)
				m.check(t, l)
				m.appendBatchTs(t, l, []int64{600, 550}, 9)
				m.checkTimestamps(t, l)

				logCloseHandles(l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: false})
				defer logClose(t, l)
				m.checkTimestamps(t, l)
				m.check(t, l)

				// The log start offset hides records below it.
				l.SetHighWatermark(l.LogEndOffset())
				if _, err := l.DeleteRecordsBefore(8); err != nil {
					t.Fatal(err)
				}
				m.checkTimestamps(t, l)
			})
		})
	}
}

// TestLogFlushGroupCommit pins the group commit: callers that arrive while
// an fsync runs are all served by the one after it. The first flusher's
// fsync is held until fifteen more appenders have appended and called
// Flush; then exactly one more fsync round covers all of them.
func TestLogFlushGroupCommit(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/data/events-0", logTestConfig(), OpenOptions{})
	defer logClose(t, l)
	if _, err := l.Append(testBatch(t, 1, 10, 1, nil), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil { // the new segment's directory entry
		t.Fatal(err)
	}

	const others = 15
	var syncs atomic.Int64
	release := make(chan struct{})
	first := make(chan struct{})
	var once sync.Once
	fsys.SetHook(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") {
			if syncs.Add(1) == 1 {
				once.Do(func() { close(first) })
				<-release
			}
		}
		return nil
	})
	defer fsys.SetHook(nil)

	errs := make(chan error, others+1)
	go func() {
		info, err := l.Append(testBatch(t, 1, 10, 2, nil), 0)
		if err == nil {
			err = l.Flush(info.LastOffset + 1)
		}
		errs <- err
	}()
	<-first // the first fsync round is under way and holds flushMu
	appended := make(chan struct{}, others)
	for range others {
		go func() {
			info, err := l.Append(testBatch(t, 1, 10, 3, nil), 0)
			if err != nil {
				errs <- err
				return
			}
			appended <- struct{}{}
			if err = l.Flush(info.LastOffset + 1); err == nil && l.RecoveryPoint() <= info.LastOffset {
				err = fmt.Errorf("Flush(%d) returned with recovery point %d", info.LastOffset+1, l.RecoveryPoint())
			}
			errs <- err
		}()
	}
	for range others {
		<-appended
	}
	close(release)
	for range others + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs.Load(); got != 2 {
		t.Fatalf("%d segment fsyncs for %d flushes; want 2 (one group commit after the first)", got, others+1)
	}
	if l.RecoveryPoint() != l.LogEndOffset() || l.LogEndOffset() != others+2 {
		t.Fatalf("recovery point %d, LEO %d", l.RecoveryPoint(), l.LogEndOffset())
	}
}

// TestLogFlushConcurrentDurability: sixteen producers append and flush
// while the machine loses power at an arbitrary moment. Every offset whose
// Flush returned nil must be in the recovered log with its value, and the
// recovery point never moves backwards while the log runs.
func TestLogFlushConcurrentDurability(t *testing.T) {
	for seed := range 4 {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			fsys := vfs.NewMem()
			dir := "/data/events-0"
			cfg := logTestConfig()
			cfg.SegmentBytes = 4096 // roll often: new files must be durable too
			l := openTestLog(t, fsys, dir, cfg, OpenOptions{})

			const producers = 16
			var (
				mu    sync.Mutex
				acked = map[int64]string{}
				total atomic.Int64
				wg    sync.WaitGroup
				stop  = make(chan struct{})
			)
			crashAt := int64(200 + 150*seed)
			crashed := make(chan struct{})
			var crashOnce sync.Once
			for p := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-crashed:
							return
						default:
						}
						val := fmt.Sprintf("p%d-%d", p, i)
						b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: int64(i), key: "k", value: val}})
						info, err := l.Append(b, 0)
						if err != nil {
							return // the crash failed the log
						}
						if err := l.Flush(info.LastOffset + 1); err != nil {
							return
						}
						if rp := l.RecoveryPoint(); rp <= info.LastOffset {
							t.Errorf("Flush(%d) returned, recovery point %d", info.LastOffset+1, rp)
						}
						mu.Lock()
						acked[info.FirstOffset] = val
						mu.Unlock()
						if total.Add(1) == crashAt {
							crashOnce.Do(func() { fsys.Crash(); close(crashed) })
						}
					}
				}()
			}
			watcher := make(chan error, 1)
			go func() {
				var last int64
				for {
					select {
					case <-stop:
						watcher <- nil
						return
					default:
					}
					rp := l.RecoveryPoint()
					if rp < last {
						watcher <- fmt.Errorf("recovery point went from %d to %d", last, rp)
						return
					}
					last = rp
					runtime.Gosched()
				}
			}()
			wg.Wait()
			close(stop)
			if err := <-watcher; err != nil {
				t.Fatal(err)
			}
			select {
			case <-crashed:
			default:
				t.Fatal("the producers stopped before the crash")
			}

			r := openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: false})
			defer logClose(t, r)
			got := map[int64]string{}
			for _, rec := range readAllRecords(t, r, 0, r.LogEndOffset()) {
				got[rec.Offset] = string(rec.Value)
			}
			if int64(len(got)) != r.LogEndOffset() {
				t.Fatalf("recovered log has %d records below LEO %d", len(got), r.LogEndOffset())
			}
			for o, v := range acked {
				if got[o] != v {
					t.Fatalf("acknowledged offset %d: recovered %q, want %q (LEO %d, %d acked)", o, got[o], v, r.LogEndOffset(), len(acked))
				}
			}
			if len(acked) < int(crashAt) {
				t.Fatalf("only %d acknowledged before the crash", len(acked))
			}
		})
	}
}

// TestLogReadersDuringAppends: readers racing an appender (which rolls
// segments) only ever get whole batches that pass their CRC, with the
// offsets and values the appender wrote, and never an error.
func TestLogReadersDuringAppends(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := logTestConfig()
		cfg.SegmentBytes = 3000
		cfg.IndexIntervalBytes = 100
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		const batches = 400
		done := make(chan struct{})
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pos := int64(0)
				for {
					select {
					case <-done:
						errs <- nil
						return
					default:
					}
					leo := l.LogEndOffset()
					if leo == 0 {
						runtime.Gosched() // nothing appended yet
						continue
					}
					start := pos
					if r%2 == 1 && leo > 0 {
						start = leo - 1 - (pos % leo) // jump around behind the end
					}
					res, err := l.Read(start, 1+int(pos%5)*300, leo)
					if err != nil {
						errs <- fmt.Errorf("read at %d: %v", start, err)
						return
					}
					for b := res.Records; len(b) > 0; {
						h, err := record.ParseHeader(b)
						if err == nil && h.Size() > len(b) {
							err = fmt.Errorf("partial batch: %d of %d bytes", len(b), h.Size())
						}
						if err == nil {
							_, err = record.Validate(b[:h.Size()], record.ValidateOptions{})
						}
						if err == nil && h.LastOffset() >= leo {
							err = fmt.Errorf("batch %d..%d at or past the LEO %d read before", h.BaseOffset, h.LastOffset(), leo)
						}
						if err == nil {
							err = record.ForEachRecord(b[:h.Size()], func(rec *record.Record) error {
								if want := fmt.Sprintf("value-%d", rec.Offset); string(rec.Value) != want {
									return fmt.Errorf("offset %d holds %q", rec.Offset, rec.Value)
								}
								return nil
							})
						}
						if err != nil {
							errs <- fmt.Errorf("read at %d: %v", start, err)
							return
						}
						if r%2 == 0 {
							pos = h.LastOffset() + 1
						}
						b = b[h.Size():]
					}
					if r%2 == 1 {
						pos++
					}
				}
			}()
		}
		var m logModel
		for i := range batches {
			m.appendBatch(t, l, 1+i%5, int64(i), 0)
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if l.NumSegments() < 10 {
			t.Fatalf("only %d segments: the appender should have rolled often", l.NumSegments())
		}
		m.check(t, l)
	})
}

// logFollowerBatch builds a batch as a leader would send it to a follower:
// offsets and leader epoch already set.
func logFollowerBatch(t testing.TB, base int64, n int, epoch int32, ts int64) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.BaseOffset = base
	opts.PartitionLeaderEpoch = epoch
	recs := make([]logRec, n)
	for i := range recs {
		recs[i] = logRec{ts: ts, key: "k", value: fmt.Sprintf("value-%d", base+int64(i))}
	}
	return logBatchRecs(t, opts, recs)
}

// TestLogAppendAsFollower: a follower keeps the leader's offsets and
// epochs, accepts gaps (the leader's log may be compacted), refuses
// anything below its log end offset, and records each new epoch.
func TestLogAppendAsFollower(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		steps := []struct {
			base  int64
			n     int
			epoch int32
			err   error
			leo   int64
		}{
			{0, 3, 1, nil, 3},
			{3, 2, 1, nil, 5},
			{10, 3, 3, nil, 13}, // a gap
			{12, 1, 3, ErrNonMonotonicOffset, 13},
			{5, 1, 3, ErrNonMonotonicOffset, 13},
			{13, 1, 2, nil, 14}, // an older epoch does not go back in the cache
			{14, 2, 5, nil, 16},
		}
		for i, s := range steps {
			size := l.Size()
			info, err := l.AppendAsFollower(logFollowerBatch(t, s.base, s.n, s.epoch, 10))
			if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
				t.Fatalf("step %d: err %v, want %v", i, err, s.err)
			}
			if err == nil && (info.FirstOffset != s.base || info.LastOffset != s.base+int64(s.n)-1) {
				t.Fatalf("step %d: info %+v", i, info)
			}
			if err != nil && l.Size() != size {
				t.Fatalf("step %d: refused append changed the size from %d to %d", i, size, l.Size())
			}
			if l.LogEndOffset() != s.leo {
				t.Fatalf("step %d: LEO %d, want %d", i, l.LogEndOffset(), s.leo)
			}
		}
		// Several batches at once, the first of them fine and the second
		// going backwards: all refused.
		two := append(logFollowerBatch(t, 16, 1, 5, 10), logFollowerBatch(t, 16, 1, 5, 10)...)
		if _, err := l.AppendAsFollower(two); !errors.Is(err, ErrNonMonotonicOffset) {
			t.Fatalf("batches going backwards: %v", err)
		}
		if l.LogEndOffset() != 16 {
			t.Fatalf("LEO %d after a refused append", l.LogEndOffset())
		}
		var offsets []int64
		for _, r := range readAllRecords(t, l, 0, l.LogEndOffset()) {
			if string(r.Value) != fmt.Sprintf("value-%d", r.Offset) {
				t.Fatalf("offset %d holds %q", r.Offset, r.Value)
			}
			offsets = append(offsets, r.Offset)
		}
		if want := []int64{0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 15}; !slices.Equal(offsets, want) {
			t.Fatalf("offsets %v, want %v", offsets, want)
		}
		// A read inside the gap returns the batch after it.
		res, err := l.Read(7, 1<<20, l.LogEndOffset())
		if err != nil || logBases(logBatches(t, res.Records))[0] != 10 {
			t.Fatalf("read in the gap: %v %v", err, logBases(logBatches(t, res.Records)))
		}
		res, _ = l.Read(0, 1<<20, l.LogEndOffset())
		for _, h := range logBatches(t, res.Records) {
			if want := map[int64]int32{0: 1, 3: 1, 10: 3, 13: 2, 14: 5}[h.BaseOffset]; h.PartitionLeaderEpoch != want {
				t.Fatalf("batch %d has epoch %d, want %d", h.BaseOffset, h.PartitionLeaderEpoch, want)
			}
		}
		want := []leaderepoch.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}, {Epoch: 5, StartOffset: 14}}
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("leader epochs %v, want %v", got, want)
		}
	})
}

// logTruncateFixture writes 40 batches of two records (offsets 0..79),
// roughly five batches a segment, with leader epoch i/10 for batch i: epoch
// 0 starts at 0, 1 at 20, 2 at 40, 3 at 60.
func logTruncateFixture(t *testing.T, fsys vfs.FS, dir string) (*Log, *logModel, Config) {
	t.Helper()
	cfg := logTestConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	m := &logModel{}
	for i := range 40 {
		m.appendBatchTs(t, l, []int64{int64(1000 + 3*i), int64(1000 + 3*i + 1)}, int32(i/10))
	}
	return l, m, cfg
}

// TestLogTruncateTo: a follower truncating to its new leader's history.
// Reference: KIP-101, KIP-279.
func TestLogTruncateTo(t *testing.T) {
	cases := []struct {
		name string
		// to returns the truncation offset, given the segments' bases.
		to      func(bases []int64) int64
		wantLEO func(to int64) int64
	}{
		{"middle of the active segment", func(b []int64) int64 { return b[len(b)-1] + 2 }, logSame},
		{"middle of an older segment", func(b []int64) int64 { return b[3] + 4 }, logSame},
		{"segment boundary", func(b []int64) int64 { return b[4] }, logSame},
		{"into the first segment", func(b []int64) int64 { return 2 }, logSame},
		{"straddling batch", func(b []int64) int64 { return b[2] + 3 }, func(to int64) int64 { return to - 1 }},
		{"one before the end", func(b []int64) int64 { return 79 }, func(int64) int64 { return 78 }},
		{"at the log end offset: no-op", func(b []int64) int64 { return 80 }, func(int64) int64 { return 80 }},
		{"past the log end offset: no-op", func(b []int64) int64 { return 1000 }, func(int64) int64 { return 80 }},
		{"to zero", func(b []int64) int64 { return 0 }, logSame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				l, m, cfg := logTruncateFixture(t, fsys, dir)
				var bases []int64
				for _, s := range *l.segments.Load() {
					bases = append(bases, s.baseOffset)
				}
				if len(bases) < 6 {
					t.Fatalf("fixture has %d segments", len(bases))
				}
				if err := l.Flush(l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
				l.SetHighWatermark(l.LogEndOffset())
				to := c.to(bases)
				want := c.wantLEO(to)
				if err := l.TruncateTo(to); err != nil {
					t.Fatal(err)
				}
				m.truncate(want)
				logCheckTruncated(t, fsys, dir, l, m, want)
				if l.HighWatermark() != want || l.RecoveryPoint() > want {
					t.Fatalf("HW %d, recovery point %d after truncating to %d", l.HighWatermark(), l.RecoveryPoint(), want)
				}
				// Appends continue at the new end, and their epoch starts there.
				m.appendBatchTs(t, l, []int64{5000, 5001, 4999}, 8)
				m.appendBatch(t, l, 1, 6000, 8)
				logCheckTruncated(t, fsys, dir, l, m, want+4)
				if got := l.LeaderEpochs().Entries(); got[len(got)-1] != (leaderepoch.EpochEntry{Epoch: 8, StartOffset: want}) {
					t.Fatalf("leader epochs after the append: %v", got)
				}

				// And the same holds after a clean and an unclean restart.
				logClose(t, l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
				logCheckTruncated(t, fsys, dir, l, m, want+4)
				logCloseHandles(l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
				defer logClose(t, l)
				logCheckTruncated(t, fsys, dir, l, m, want+4)
			})
		})
	}
}

func logSame(o int64) int64 { return o }

// logCheckTruncated checks a truncated log against the model: LEO, every
// record, reads at every offset (so the rebuilt indexes point at batch
// starts), timestamp lookups, the leader epochs and the files on disk.
func logCheckTruncated(t *testing.T, fsys vfs.FS, dir string, l *Log, m *logModel, leo int64) {
	t.Helper()
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
	}
	m.check(t, l)
	m.checkTimestamps(t, l)
	for o := l.LogStartOffset(); o < leo; o++ {
		res, err := l.Read(o, 1, leo)
		if err != nil {
			t.Fatal(err)
		}
		hs := logBatches(t, res.Records)
		if len(hs) != 1 || hs[0].BaseOffset > o || hs[0].LastOffset() < o {
			t.Fatalf("read at %d returned %v", o, logBases(hs))
		}
	}
	for _, e := range l.LeaderEpochs().Entries() {
		if e.StartOffset >= leo {
			t.Fatalf("leader epoch %v starts at or past the LEO %d", e, leo)
		}
	}
	var total int64
	segs := *l.segments.Load()
	for name, size := range logSegmentFiles(t, fsys, dir) {
		base, _ := parseSegmentName(name, ".log")
		if base > leo {
			t.Fatalf("segment file %s past the LEO %d", name, leo)
		}
		total += size
	}
	if total != l.Size() || len(logSegmentFiles(t, fsys, dir)) != len(segs) {
		t.Fatalf("files hold %d bytes in %d segments, log says %d in %d", total, len(logSegmentFiles(t, fsys, dir)), l.Size(), len(segs))
	}
}

// TestLogTruncateToBelowLogStart: truncating at or below the log start
// offset starts the log afresh there, and a truncation whose straddling
// batch begins below the log start offset never leaves the log end below
// its start.
func TestLogTruncateToBelowLogStart(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l, m, _ := logTruncateFixture(t, fsys, dir)
		defer logClose(t, l)
		m.appendBatch(t, l, 3, 9000, 5) // [80, 82]
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.DeleteRecordsBefore(81); err != nil {
			t.Fatal(err)
		}
		// 82 is above the log start offset, but the batch holding it
		// starts below.
		if err := l.TruncateTo(82); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() > l.LogEndOffset() || l.HighWatermark() > l.LogEndOffset() {
			t.Fatalf("log start %d, HW %d, LEO %d", l.LogStartOffset(), l.HighWatermark(), l.LogEndOffset())
		}
		if _, err := l.Read(l.LogStartOffset(), 1<<20, l.LogEndOffset()); err != nil {
			t.Fatalf("read at the log start offset: %v", err)
		}
		if err := l.TruncateTo(10); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 || l.NumSegments() != 1 {
			t.Fatalf("start %d end %d segments %d after truncating below the start", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments())
		}
	})
}

// TestLogTruncateFullyAndStartAt: the log empties and restarts at the
// offset, durably.
func TestLogTruncateFullyAndStartAt(t *testing.T) {
	for _, restart := range []string{"none", "clean", "unclean", "crash"} {
		t.Run(restart, func(t *testing.T) {
			forEach := logForEachFS
			if restart == "crash" { // a power cut needs MemFS
				forEach = func(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
					fn(t, vfs.NewMem(), "/data/events-0")
				}
			}
			forEach(t, func(t *testing.T, fsys vfs.FS, dir string) {
				l, _, cfg := logTruncateFixture(t, fsys, dir)
				if err := l.Flush(l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
				l.SetHighWatermark(50)
				if err := l.TruncateFullyAndStartAt(1000); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Read(999, 1<<20, 2000); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read below the new start: %v", err)
				}
				if _, ok := l.LeaderEpochs().LatestEpoch(); ok {
					t.Fatalf("leader epochs survive a full truncation: %v", l.LeaderEpochs().Entries())
				}
				switch restart {
				case "clean":
					logClose(t, l)
					l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
				case "unclean":
					logCloseHandles(l)
					l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
				case "crash":
					fsys.(*vfs.MemFS).Crash()
					l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
				}
				defer logClose(t, l)
				if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.HighWatermark() != 1000 || l.NumSegments() != 1 {
					t.Fatalf("start %d end %d hw %d segments %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.NumSegments())
				}
				if files := logSegmentFiles(t, fsys, dir); len(files) != 1 || files["00000000000000001000.log"] != 0 {
					t.Fatalf("segment files %v", files)
				}
				m := &logModel{}
				info := m.appendBatch(t, l, 3, 7, 4)
				if info.FirstOffset != 1000 {
					t.Fatalf("first append at %d", info.FirstOffset)
				}
				m.check(t, l)
				if got := l.LeaderEpochs().Entries(); !slices.Equal(got, []leaderepoch.EpochEntry{{Epoch: 4, StartOffset: 1000}}) {
					t.Fatalf("leader epochs %v", got)
				}
			})
		})
	}
}

// TestLogDeleteRecordsBefore: DeleteRecords moves the log start offset (not
// above the high watermark, never backwards) and the next retention pass
// deletes the segments wholly below it.
func TestLogDeleteRecordsBefore(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l, m, _ := logTruncateFixture(t, fsys, dir)
		defer logClose(t, l)
		segsBefore := *l.segments.Load()
		l.SetHighWatermark(30)
		for _, c := range []struct {
			offset, want int64
			err          error
		}{
			{31, 0, ErrOffsetOutOfRange}, // above the HW
			{-1, 0, ErrOffsetOutOfRange},
			{0, 0, nil},
			{17, 17, nil}, // inside batch [16, 17]
			{5, 17, nil},  // never backwards
			{30, 30, nil}, // exactly the HW
		} {
			got, err := l.DeleteRecordsBefore(c.offset)
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("DeleteRecordsBefore(%d): %v, want %v", c.offset, err, c.err)
			}
			if err == nil && got != c.want {
				t.Fatalf("DeleteRecordsBefore(%d) = %d, want %d", c.offset, got, c.want)
			}
			if l.LogStartOffset() != max(c.want, 0) && err == nil {
				t.Fatalf("log start offset %d", l.LogStartOffset())
			}
		}
		if _, err := l.Read(29, 1<<20, 80); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below the log start offset: %v", err)
		}
		m.check(t, l)
		// Nothing is deleted until retention runs; then exactly the
		// segments whose successors start at or below 30.
		if l.NumSegments() != len(segsBefore) {
			t.Fatalf("segments deleted before retention ran")
		}
		var wantKept int
		for i, s := range segsBefore {
			if i == len(segsBefore)-1 || segsBefore[i+1].baseOffset > 30 {
				wantKept++
			}
			_ = s
		}
		res, err := l.ApplyRetention()
		if err != nil {
			t.Fatal(err)
		}
		if l.NumSegments() != wantKept || res.SegmentsDeleted != len(segsBefore)-wantKept {
			t.Fatalf("%d segments kept (%+v), want %d", l.NumSegments(), res, wantKept)
		}
		if first := (*l.segments.Load())[0].baseOffset; first > 30 || l.LogStartOffset() != 30 {
			t.Fatalf("first segment at %d, log start %d", first, l.LogStartOffset())
		}
		if len(logSegmentFiles(t, fsys, dir)) != wantKept {
			t.Fatalf("segment files %v", logSegmentFiles(t, fsys, dir))
		}
		m.check(t, l)
		// The leader epoch covering the new start moves up to it.
		if e, _ := l.LeaderEpochs().EarliestEntry(); e != (leaderepoch.EpochEntry{Epoch: 1, StartOffset: 30}) {
			t.Fatalf("earliest leader epoch %v", e)
		}
	})
}

// TestConfigValidate: every value out of range is refused with
// ErrInvalidConfig, and the error names the setting and the value.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string // in the message: Kafka's name and the value
	}{
		{"segment.bytes too small", func(c *Config) { c.SegmentBytes = 13 }, "segment.bytes=13"},
		{"segment.bytes too large", func(c *Config) { c.SegmentBytes = 1 << 31 }, "segment.bytes=2147483648"},
		{"segment.ms", func(c *Config) { c.SegmentMs = 0 }, "segment.ms=0"},
		{"index.interval.bytes", func(c *Config) { c.IndexIntervalBytes = -1 }, "index.interval.bytes=-1"},
		{"max.message.bytes", func(c *Config) { c.MaxMessageBytes = -5 }, "max.message.bytes=-5"},
		{"flush.policy", func(c *Config) { c.FlushPolicy = 7 }, "flush.policy=7"},
		{"flush.ms", func(c *Config) { c.FlushMs = 0 }, "flush.ms=0"},
		{"retention.ms", func(c *Config) { c.RetentionMs = -2 }, "retention.ms=-2"},
		{"retention.bytes", func(c *Config) { c.RetentionBytes = -2 }, "retention.bytes=-2"},
		{"cleanup.policy zero", func(c *Config) { c.CleanupPolicy = 0 }, "cleanup.policy=0"},
		{"cleanup.policy unknown bit", func(c *Config) { c.CleanupPolicy = 4 }, "cleanup.policy=4"},
		{"delete.retention.ms", func(c *Config) { c.DeleteRetentionMs = -1 }, "delete.retention.ms=-1"},
		{"min.cleanable.dirty.ratio above 1", func(c *Config) { c.MinCleanableDirtyRatio = 1.5 }, "min.cleanable.dirty.ratio=1.5"},
		{"min.cleanable.dirty.ratio negative", func(c *Config) { c.MinCleanableDirtyRatio = -0.1 }, "min.cleanable.dirty.ratio=-0.1"},
		{"min.cleanable.dirty.ratio NaN", func(c *Config) { c.MinCleanableDirtyRatio = math.NaN() }, "min.cleanable.dirty.ratio=NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.change(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v; want ErrInvalidConfig naming %q", err, c.want)
			}
			// Every entry point that takes a config refuses it.
			if _, err := Open(vfs.NewMem(), "/d/t-0", cfg, OpenOptions{Logger: quietLogger}); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Open: %v", err)
			}
			l := openTestLog(t, vfs.NewMem(), "/d/t-0", DefaultConfig(), OpenOptions{})
			defer logClose(t, l)
			if err := l.SetConfig(cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("SetConfig: %v", err)
			}
			if l.Config() != DefaultConfig() {
				t.Fatalf("a refused SetConfig changed the config")
			}
		})
	}
	// The edges that are allowed.
	for _, change := range []func(*Config){
		func(c *Config) { c.SegmentBytes = 14 },
		func(c *Config) { c.SegmentBytes = 1<<31 - 1 },
		func(c *Config) { c.RetentionMs, c.RetentionBytes = -1, -1 },
		func(c *Config) { c.RetentionMs, c.RetentionBytes, c.DeleteRetentionMs = 0, 0, 0 },
		func(c *Config) { c.IndexIntervalBytes, c.MaxMessageBytes = 0, 0 },
		func(c *Config) { c.MinCleanableDirtyRatio = 0 },
		func(c *Config) { c.MinCleanableDirtyRatio = 1 },
		func(c *Config) { c.CleanupPolicy = CleanupCompact | CleanupDelete },
		func(c *Config) { c.FlushPolicy = FlushInterval },
	} {
		cfg := DefaultConfig()
		change(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	for _, c := range []struct {
		in   string
		want FlushPolicy
	}{{"ack", FlushAck}, {"interval", FlushInterval}} {
		got, err := ParseFlushPolicy(c.in)
		if err != nil || got != c.want || got.String() != c.in {
			t.Fatalf("ParseFlushPolicy(%q) = %v, %v", c.in, got, err)
		}
	}
	for _, in := range []string{"", "Ack", "ACK", "always", "ack,interval", " ack"} {
		_, err := ParseFlushPolicy(in)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprintf("flush.policy %q", in)) {
			t.Fatalf("ParseFlushPolicy(%q) = %v", in, err)
		}
	}
	for _, c := range []struct {
		in, str string
		want    CleanupPolicy
	}{
		{"delete", "delete", CleanupDelete},
		{"compact", "compact", CleanupCompact},
		{"compact,delete", "compact,delete", CleanupCompact | CleanupDelete},
		{"delete,compact", "compact,delete", CleanupCompact | CleanupDelete},
	} {
		got, err := ParseCleanupPolicy(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Fatalf("ParseCleanupPolicy(%q) = %v, %v", c.in, got, err)
		}
		if got.Compact() != (c.want&CleanupCompact != 0) || got.Delete() != (c.want&CleanupDelete != 0) {
			t.Fatalf("%v: Compact()=%v Delete()=%v", got, got.Compact(), got.Delete())
		}
	}
	for _, in := range []string{"", "Delete", "compact, delete", "compact,compact", "delete,", "none"} {
		_, err := ParseCleanupPolicy(in)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprintf("cleanup.policy %q", in)) {
			t.Fatalf("ParseCleanupPolicy(%q) = %v", in, err)
		}
	}
}

// TestLogAppendAsFollowerOverflowingOffsets pins a fix: a follower batch
// whose last offset overflows int64 was accepted and made the log end
// offset negative (and could panic indexing it).
func TestLogAppendAsFollowerOverflowingOffsets(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		defer logClose(t, l)
		if _, err := l.AppendAsFollower(logFollowerBatch(t, 0, 2, 0, 1)); err != nil {
			t.Fatal(err)
		}
		for _, base := range []int64{math.MaxInt64 - 1, math.MaxInt64} {
			if _, err := l.AppendAsFollower(logFollowerBatch(t, base, 3, 0, 1)); !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("batch at %d: %v", base, err)
			}
		}
		if l.LogEndOffset() != 2 {
			t.Fatalf("LEO %d", l.LogEndOffset())
		}
	})
}

// logVerifyBatches checks, without a testing.TB (it runs on reader
// goroutines), that data is whole batches that pass their CRC and whose
// records hold the values logModel writes ("value-<offset>").
func logVerifyBatches(data []byte) error {
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return err
		}
		if h.Size() > len(data) {
			return fmt.Errorf("partial batch: %d of %d bytes", len(data), h.Size())
		}
		b := data[:h.Size()]
		if _, err := record.Validate(b, record.ValidateOptions{}); err != nil {
			return err
		}
		err = record.ForEachRecord(b, func(r *record.Record) error {
			if want := fmt.Sprintf("value-%d", r.Offset); string(r.Value) != want {
				return fmt.Errorf("offset %d holds %q", r.Offset, r.Value)
			}
			return nil
		})
		if err != nil {
			return err
		}
		data = data[h.Size():]
	}
	return nil
}

// TestLogClosed: after Close (or a manager's DeleteLog) every call fails
// with ErrLogClosed; none reopens a file by name, which would leak the
// handle or, after a delete, recreate the file.
func TestLogClosed(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
		m := &logModel{}
		m.appendBatch(t, l, 3, 1000, 0)
		logClose(t, l)
		if _, err := l.Read(0, 1<<20, l.LogEndOffset()); !errors.Is(err, ErrLogClosed) {
			t.Errorf("Read after Close: %v", err)
		}
		if _, err := l.Append(testBatch(t, 1, 10, 1, nil), 0); !errors.Is(err, ErrLogClosed) {
			t.Errorf("Append after Close: %v", err)
		}
		// Offsets above the recovery point would need an fsync.
		l.recoveryPoint.Store(0)
		if err := l.Flush(l.LogEndOffset()); !errors.Is(err, ErrLogClosed) {
			t.Errorf("Flush after Close: %v", err)
		}
		if l.failed.Load() {
			t.Error("a closed log was marked failed")
		}
		for _, s := range *l.segments.Load() {
			if s.file != nil {
				t.Errorf("segment %d reopened its file after Close", s.baseOffset)
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestLogCloseSkipsUnchangedIndexes: a clean close rewrites a segment's
// index files only when they changed since they were loaded or written:
// thousands of idle logs must not cost four fsyncs each at shutdown. One
// append makes them current again.
func TestLogCloseSkipsUnchangedIndexes(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/events-0"
	cfg := logTestConfig()
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	m := &logModel{}
	for i := range 20 {
		m.appendBatch(t, l, 2, int64(1000+i), 0)
	}
	logClose(t, l)

	var indexWrites int
	fsys.SetHook(func(op vfs.Op, path string) error {
		if strings.Contains(path, "index") && (op == vfs.OpCreate || op == vfs.OpRename) {
			indexWrites++
		}
		return nil
	})
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
	m.check(t, l)
	logClose(t, l)
	if indexWrites != 0 {
		t.Fatalf("an idle open and close wrote index files %d times", indexWrites)
	}

	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
	m.appendBatch(t, l, 2, 5000, 0)
	logClose(t, l)
	if indexWrites == 0 {
		t.Fatal("close after an append did not write the index files")
	}
	fsys.SetHook(nil)
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
	defer logClose(t, l)
	m.check(t, l)
	m.checkTimestamps(t, l)
}

// ObserveSync hears of every Flush that fsyncs, and only of those: a Flush
// the recovery point already covers costs no fsync and reports none.
func TestObserveSync(t *testing.T) {
	var observed []time.Duration
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", logTestConfig(), OpenOptions{
		ObserveSync: func(d time.Duration) { observed = append(observed, d) },
	})
	for i := range 3 {
		info, err := l.Append(testBatch(t, 2, 10, int64(i), nil), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(info.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(info.LastOffset + 1); err != nil { // already durable
			t.Fatal(err)
		}
	}
	if len(observed) != 3 {
		t.Fatalf("%d syncs observed for 3 flushes that synced: %v", len(observed), observed)
	}
	for _, d := range observed {
		if d < 0 {
			t.Fatalf("negative sync time %v", d)
		}
	}
}
