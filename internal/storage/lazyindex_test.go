package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// An unclean open leaves the active segment's rebuilt indexes in memory,
// marked dirty, and writes them when the segment is sealed (a roll or a
// clean close), not during recovery (open.go, recoverSegmentsFrom). These
// tests, on real files, pin the three things that must hold for that:
// reads after the lazy rebuild are right; a crash after it, whatever the
// index files on disk then hold, recovers every record and correct
// indexes; and the seal writes the files, which a clean open then uses.

// lazyFixture is a log whose active segment has index files on disk that
// are stale: it was closed cleanly (every index written), reopened,
// appended to, flushed and dropped as a crash would drop it.
type lazyFixture struct {
	dir        string
	cfg        Config
	model      *logModel
	leo        int64 // the recovery point at the crash: everything was flushed
	activeBase int64
	bases      []int64
}

func lazyWrite(t *testing.T) *lazyFixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders-3")
	cfg := logTestConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 100
	l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
	m := &logModel{}
	for i := range 50 {
		// Out-of-order timestamps inside a batch, so that the time index
		// and the batch max timestamps both matter.
		m.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 0)
	}
	logClose(t, l)
	// Big segments from here on, so the appends below stay in the active
	// segment and its index files fall behind it.
	cfg.SegmentBytes = 1 << 20
	l = openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{Clean: true})
	base := l.activeSegment().baseOffset
	for i := 50; i < 70; i++ {
		m.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 0)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if got := l.activeSegment().baseOffset; got != base || l.NumSegments() < 3 {
		t.Fatalf("active segment %d (was %d), %d segments: the fixture needs a stale active index", got, base, l.NumSegments())
	}
	f := &lazyFixture{dir: dir, cfg: cfg, model: m, leo: l.LogEndOffset(), activeBase: base}
	for _, s := range *l.segments.Load() {
		f.bases = append(f.bases, s.baseOffset)
	}
	logCloseHandles(l)
	return f
}

func (f *lazyFixture) path(base int64, ext string) string {
	return filepath.Join(f.dir, fmt.Sprintf("%020d%s", base, ext))
}

// lazyFile is what an index file on disk was at one moment: nil info if
// it did not exist.
type lazyFile struct {
	info os.FileInfo
	data []byte
}

func lazyStat(t *testing.T, path string) lazyFile {
	t.Helper()
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return lazyFile{}
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return lazyFile{info, data}
}

// unchanged says the file was neither rewritten (an atomic write renames
// a new inode over it) nor modified.
func (a lazyFile) unchanged(b lazyFile) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return os.SameFile(a.info, b.info) && bytes.Equal(a.data, b.data)
}

// lazyIndexState returns a segment's in-memory indexes, encoded as the
// files would hold them, and whether they are marked dirty.
func lazyIndexState(s *segment) (offsets, times []byte, dirty, loaded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.offsets.encode(), s.mu.times.encode(), s.mu.indexDirty, s.mu.loaded
}

// lazyCheckReads checks every record, a read at every offset, and the
// timestamp lookups against the model.
func lazyCheckReads(t *testing.T, l *Log, m *logModel) {
	t.Helper()
	m.check(t, l)
	m.checkTimestamps(t, l)
	for o := l.LogStartOffset(); o < l.LogEndOffset(); o++ {
		res, err := l.Read(o, 1, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if hs := logBatches(t, res.Records); len(hs) != 1 || hs[0].BaseOffset > o || hs[0].LastOffset() < o {
			t.Fatalf("read at %d: %v", o, logBases(hs))
		}
	}
}

// lazyCheckFilesMatch fails unless the segment's index files on disk hold
// exactly its in-memory indexes and it is not marked dirty.
func lazyCheckFilesMatch(t *testing.T, f *lazyFixture, s *segment) {
	t.Helper()
	offs, times, dirty, loaded := lazyIndexState(s)
	if !loaded || dirty {
		t.Fatalf("segment %d: loaded %v, dirty %v after its indexes were written", s.baseOffset, loaded, dirty)
	}
	if got := lazyStat(t, f.path(s.baseOffset, ".index")); !bytes.Equal(got.data, offs) || got.info == nil {
		t.Fatalf("segment %d: .index on disk has %d bytes, memory %d", s.baseOffset, len(got.data), len(offs))
	}
	if got := lazyStat(t, f.path(s.baseOffset, ".timeindex")); !bytes.Equal(got.data, times) || got.info == nil {
		t.Fatalf("segment %d: .timeindex on disk has %d bytes, memory %d", s.baseOffset, len(got.data), len(times))
	}
}

// TestRecoveryDefersActiveIndexes: an unclean open rebuilds the active
// segment's indexes in memory without writing its index files, and reads
// by offset and by timestamp are right. With the recovery point at 0 the
// inactive segments are scanned too; their files, written by the rolls,
// already match what the rebuild finds and are not rewritten either.
func TestRecoveryDefersActiveIndexes(t *testing.T) {
	for _, c := range []struct {
		name          string
		recoveryPoint func(f *lazyFixture) int64
	}{
		{"from the recovery point", func(f *lazyFixture) int64 { return f.leo }},
		{"every segment", func(*lazyFixture) int64 { return 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := lazyWrite(t)
			before := map[string]lazyFile{}
			for _, base := range f.bases {
				for _, ext := range []string{".index", ".timeindex"} {
					before[f.path(base, ext)] = lazyStat(t, f.path(base, ext))
				}
			}
			l := openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: c.recoveryPoint(f)})
			defer logClose(t, l)
			if l.LogEndOffset() != f.leo || l.RecoveryPoint() != f.leo {
				t.Fatalf("LEO %d, recovery point %d; want %d", l.LogEndOffset(), l.RecoveryPoint(), f.leo)
			}
			for p, b := range before {
				if !b.unchanged(lazyStat(t, p)) {
					t.Errorf("%s was written by recovery", filepath.Base(p))
				}
			}
			offs, _, dirty, loaded := lazyIndexState(l.activeSegment())
			if !loaded || !dirty {
				t.Fatalf("active segment after recovery: loaded %v, dirty %v", loaded, dirty)
			}
			if stale := before[f.path(f.activeBase, ".index")].data; len(offs) <= len(stale) {
				t.Fatalf("rebuilt active index has %d bytes, the stale file %d: the test needs a stale file", len(offs), len(stale))
			}
			lazyCheckReads(t, l, f.model)
		})
	}
}

// TestRecoveryCrashAfterDeferredIndexes: after an unclean open that left
// the active segment's index files unwritten, the log takes more appends
// and crashes again, with its index files stale, missing, cut or garbage.
// The next unclean open must recover every record and rebuild the indexes
// (never trust the files), and a clean close and clean open after that
// must be right too.
func TestRecoveryCrashAfterDeferredIndexes(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, f *lazyFixture, path string, ext string)
	}{
		{"stale", func(*testing.T, *lazyFixture, string, string) {}},
		{"missing", func(t *testing.T, _ *lazyFixture, path, _ string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		// Whole entries cut off: structurally sound, and short.
		{"cut to whole entries", func(t *testing.T, _ *lazyFixture, path, ext string) {
			b, _ := os.ReadFile(path)
			size := offsetEntrySize
			if ext == ".timeindex" {
				size = timeEntrySize
			}
			lazyWriteFile(t, path, b[:len(b)/size/2*size])
		}},
		{"torn", func(t *testing.T, _ *lazyFixture, path, _ string) {
			b, _ := os.ReadFile(path)
			lazyWriteFile(t, path, b[:len(b)-3])
		}},
		{"empty", func(t *testing.T, _ *lazyFixture, path, _ string) { lazyWriteFile(t, path, nil) }},
		{"garbage", func(t *testing.T, _ *lazyFixture, path, _ string) {
			b, _ := os.ReadFile(path)
			lazyWriteFile(t, path, slices.Repeat([]byte{0xa5}, len(b)+24))
		}},
		// Another segment's files: sorted and inside the segment's bounds,
		// but describing other batches.
		{"another segment's", func(t *testing.T, f *lazyFixture, path, ext string) {
			b, err := os.ReadFile(f.path(f.bases[1], ext))
			if err != nil {
				t.Fatal(err)
			}
			lazyWriteFile(t, path, b)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := lazyWrite(t)
			l := openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: f.leo})
			for i := 70; i < 80; i++ {
				f.model.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 1)
			}
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			// The checkpointed recovery point lags the log, as it would
			// between two checkpoint writes.
			rp := f.leo
			f.leo = l.LogEndOffset()
			logCloseHandles(l) // the crash

			for _, ext := range []string{".index", ".timeindex"} {
				c.damage(t, f, f.path(f.activeBase, ext), ext)
			}
			l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: rp})
			if l.LogEndOffset() != f.leo || l.RecoveryPoint() != f.leo {
				t.Fatalf("LEO %d, recovery point %d; want %d", l.LogEndOffset(), l.RecoveryPoint(), f.leo)
			}
			// The indexes came from the log, not from the files: they are
			// what a scan of the segment file alone gives.
			offs, times, _, _ := lazyIndexState(l.activeSegment())
			wantOffs, wantTimes := lazyScanIndexes(t, f, l.activeSegment())
			if !bytes.Equal(offs, wantOffs) || !bytes.Equal(times, wantTimes) {
				t.Fatalf("recovered active indexes (%d, %d bytes) differ from a scan of the segment (%d, %d)",
					len(offs), len(times), len(wantOffs), len(wantTimes))
			}
			lazyCheckReads(t, l, f.model)

			// A second crash straight after, and then a clean cycle.
			logCloseHandles(l)
			l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: rp})
			lazyCheckReads(t, l, f.model)
			logClose(t, l)
			l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{Clean: true})
			defer logClose(t, l)
			lazyCheckFilesMatch(t, f, l.activeSegment())
			lazyCheckReads(t, l, f.model)
		})
	}
}

// lazyScanIndexes rebuilds a segment's indexes from its log file alone,
// in a segment object of its own.
func lazyScanIndexes(t *testing.T, f *lazyFixture, s *segment) (offsets, times []byte) {
	t.Helper()
	fresh := openSegment(vfs.OS(), f.dir, s.baseOffset, s.size.Load())
	defer fresh.close()
	fresh.mu.Lock()
	defer fresh.mu.Unlock()
	if _, _, err := fresh.rebuildLocked(f.cfg.IndexIntervalBytes, false, nil); err != nil {
		t.Fatal(err)
	}
	return fresh.mu.offsets.encode(), fresh.mu.times.encode()
}

func lazyWriteFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryDeferredIndexesWrittenAtSeal: the indexes an unclean open
// left unwritten are written when the segment is sealed, by a roll or by
// a clean close, and the following clean open loads those files as they
// are (no rebuild, no rewrite) and reads right from them.
func TestRecoveryDeferredIndexesWrittenAtSeal(t *testing.T) {
	for _, seal := range []string{"roll", "close"} {
		t.Run(seal, func(t *testing.T) {
			f := lazyWrite(t)
			l := openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: f.leo})
			recovered := l.activeSegment()
			staleIndex := lazyStat(t, f.path(f.activeBase, ".index"))
			if seal == "roll" {
				cfg := f.cfg
				cfg.SegmentBytes = recovered.size.Load() + 1
				if err := l.SetConfig(cfg); err != nil {
					t.Fatal(err)
				}
				f.model.appendBatchTs(t, l, []int64{5000, 5001}, 1)
				if l.activeSegment() == recovered {
					t.Fatal("the append did not roll the recovered segment")
				}
				// Sealed: its files now hold the rebuilt indexes.
				lazyCheckFilesMatch(t, f, recovered)
				if lazyStat(t, f.path(f.activeBase, ".index")).unchanged(staleIndex) {
					t.Fatal("the roll left the stale index file")
				}
				f.model.appendBatchTs(t, l, []int64{5002}, 1)
				if err := l.SetConfig(f.cfg); err != nil {
					t.Fatal(err)
				}
			}
			logClose(t, l)
			active := l.activeSegment().baseOffset
			lazyFixtureBases := append(slices.Clone(f.bases), active)
			written := map[string]lazyFile{}
			for _, base := range lazyFixtureBases {
				for _, ext := range []string{".index", ".timeindex"} {
					written[f.path(base, ext)] = lazyStat(t, f.path(base, ext))
				}
			}
			if seal == "close" && written[f.path(f.activeBase, ".index")].unchanged(staleIndex) {
				t.Fatal("the clean close left the stale index file")
			}

			l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{Clean: true})
			defer logClose(t, l)
			if l.activeSegment().baseOffset != active {
				t.Fatalf("active segment %d after the clean open, was %d", l.activeSegment().baseOffset, active)
			}
			// The clean open loaded the active segment's files as written.
			lazyCheckFilesMatch(t, f, l.activeSegment())
			lazyCheckReads(t, l, f.model)
			for p, w := range written {
				if !w.unchanged(lazyStat(t, p)) {
					t.Errorf("%s was rewritten after the clean open: it was not trusted", filepath.Base(p))
				}
			}
		})
	}
}

// TestManagerUncleanStartDefersIndexes is the same through the log
// manager, whose clean-shutdown marker decides between trusting index
// files and rebuilding: a crash after an unclean start (which wrote no
// active index file) with the files then garbage is again an unclean
// start, and the clean close after it leaves files the next clean start
// can use.
func TestManagerUncleanStartDefersIndexes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := logTestConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 100
	opts := ManagerOptions{NoBackground: true, Logger: quietLogger}
	tp := TopicPartition{Topic: "orders", Partition: 3}
	abandon := func(m *Manager) { // the process dies
		for _, l := range m.Logs() {
			logCloseHandles(l)
		}
	}
	m, err := OpenManager(vfs.OS(), dir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	model := &logModel{}
	for i := range 40 {
		model.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 0)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := 40; i < 45; i++ {
		model.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 0)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	base := l.activeSegment().baseOffset
	indexPath := filepath.Join(l.Dir(), fmt.Sprintf("%020d.index", base))
	timeIndexPath := filepath.Join(l.Dir(), fmt.Sprintf("%020d.timeindex", base))
	abandon(m)

	m, err = OpenManager(vfs.OS(), dir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.CleanStart {
		t.Fatal("clean start after a crash")
	}
	l, _ = m.Log(tp)
	lazyCheckReads(t, l, model)
	for _, p := range []string{indexPath, timeIndexPath} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s exists after the unclean start (%v): the active segment's indexes were written", filepath.Base(p), err)
		}
	}
	abandon(m)
	for _, p := range []string{indexPath, timeIndexPath} {
		lazyWriteFile(t, p, slices.Repeat([]byte{0x5a}, 96))
	}

	m, err = OpenManager(vfs.OS(), dir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.CleanStart {
		t.Fatal("clean start after a crash that followed an unclean start")
	}
	l, _ = m.Log(tp)
	lazyCheckReads(t, l, model)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	written := map[string]lazyFile{}
	for _, p := range []string{indexPath, timeIndexPath} {
		written[p] = lazyStat(t, p)
		if written[p].info == nil || bytes.Equal(written[p].data, slices.Repeat([]byte{0x5a}, 96)) {
			t.Fatalf("%s not written by the clean close", filepath.Base(p))
		}
	}

	m, err = OpenManager(vfs.OS(), dir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.CleanStart {
		t.Fatal("no clean start after a clean close")
	}
	l, _ = m.Log(tp)
	lazyCheckReads(t, l, model)
	for p, w := range written {
		if !w.unchanged(lazyStat(t, p)) {
			t.Errorf("%s rewritten at the clean start: it was not trusted", filepath.Base(p))
		}
	}
}
