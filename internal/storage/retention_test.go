package storage

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Retention: whole segments go, oldest first, by time (the segment's
// largest timestamp), by size, or because DeleteRecords moved the log
// start offset past them; an expired active segment is rolled first.

// retentionFixture writes segments of five one-record batches each (the
// segment size fits five), segment i holding timestamps base+i*100 ...
// base+i*100+4.
func retentionFixture(t *testing.T, fsys vfs.FS, dir string, cfg Config, clock *fakeClock, segments int) (*Log, *logModel) {
	t.Helper()
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
	m := &logModel{}
	for s := range segments {
		for i := range 5 {
			m.appendBatch(t, l, 1, clock.ms+int64(s*100+i), 0)
		}
	}
	if l.NumSegments() != segments {
		t.Fatalf("%d segments, want %d", l.NumSegments(), segments)
	}
	l.SetHighWatermark(l.LogEndOffset())
	return l, m
}

// retentionConfig fits exactly five of logModel's one-record batches in a
// segment.
func retentionConfig(t *testing.T) Config {
	t.Helper()
	cfg := logTestConfig()
	b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: 1, key: "k1", value: "value-10"}})
	cfg.SegmentBytes = int64(5*len(b) + len(b)/2)
	return cfg
}

func TestRetentionByTime(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		cfg.RetentionMs = 1000
		l, m := retentionFixture(t, fsys, dir, cfg, clock, 6)
		defer logClose(t, l)
		// Segment i's largest timestamp is 1_000_000+i*100+4.
		sizes := map[int64]int64{}
		for _, seg := range *l.segments.Load() {
			sizes[seg.baseOffset] = seg.size.Load()
		}
		for _, step := range []struct {
			now        int64
			deleted    int // segments deleted by this pass
			logStartAt int64
		}{
			{1_001_004, 0, 0},  // segment 0 is exactly retention.ms old: kept
			{1_001_005, 1, 5},  // now older
			{1_001_104, 0, 5},  // segment 1 exactly retention.ms old
			{1_001_305, 3, 20}, // segments 1, 2 and 3
		} {
			clock.ms = step.now
			var wantBytes int64
			for _, seg := range *l.segments.Load() {
				if seg.baseOffset < step.logStartAt {
					wantBytes += sizes[seg.baseOffset]
				}
			}
			res, err := l.ApplyRetention()
			if err != nil {
				t.Fatal(err)
			}
			if res.SegmentsDeleted != step.deleted || l.LogStartOffset() != step.logStartAt {
				t.Fatalf("at %d: %+v, log start %d; want %d deleted, start %d", step.now, res, l.LogStartOffset(), step.deleted, step.logStartAt)
			}
			if res.BytesDeleted != wantBytes {
				t.Fatalf("%d bytes deleted, want %d", res.BytesDeleted, wantBytes)
			}
			if len(logSegmentFiles(t, fsys, dir)) != l.NumSegments() {
				t.Fatalf("files %v for %d segments", logSegmentFiles(t, fsys, dir), l.NumSegments())
			}
			if _, err := l.Read(step.logStartAt-1, 1<<20, 100); step.logStartAt > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below the start: %v", err)
			}
			m.check(t, l)
		}
		// retention.ms=-1 keeps everything, however old.
		cfg.RetentionMs = -1
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		clock.advance(365 * 24 * time.Hour)
		if res, err := l.ApplyRetention(); err != nil || res.SegmentsDeleted != 0 {
			t.Fatalf("retention.ms=-1: %+v %v", res, err)
		}
		// So does a compact-only policy.
		cfg.RetentionMs = 1
		cfg.CleanupPolicy = CleanupCompact
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if res, err := l.ApplyRetention(); err != nil || res.SegmentsDeleted != 0 {
			t.Fatalf("cleanup.policy=compact: %+v %v", res, err)
		}
	})
}

// TestRetentionStopsAtNewerSegment: only a prefix of the log goes; an old
// segment after a newer one waits for it, as in Kafka.
func TestRetentionStopsAtNewerSegment(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		cfg.RetentionMs = 1000
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		m := &logModel{}
		for _, ts := range []int64{0, 0, 0, 0, 0 /* segment 1 */, 0, 5000, 0, 0, 0 /* segment 2 */, 0, 0, 0, 0, 0, 1} {
			m.appendBatch(t, l, 1, clock.ms+ts, 0)
		}
		l.SetHighWatermark(l.LogEndOffset())
		clock.ms += 2000
		res, err := l.ApplyRetention()
		if err != nil || res.SegmentsDeleted != 1 || l.LogStartOffset() != 5 {
			t.Fatalf("%+v %v, start %d", res, err, l.LogStartOffset())
		}
		m.check(t, l)
	})
}

func TestRetentionBySize(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		l, m := retentionFixture(t, fsys, dir, cfg, clock, 6)
		defer logClose(t, l)
		var sizes []int64 // sizes[i]: the bytes of the last i segments
		segs := *l.segments.Load()
		sizes = append(sizes, 0)
		for i := len(segs) - 1; i >= 0; i-- {
			sizes = append(sizes, sizes[len(sizes)-1]+segs[i].size.Load())
		}
		for _, step := range []struct {
			retentionBytes int64
			wantSegments   int
		}{
			{sizes[6], 6},      // exactly the size: nothing to delete
			{sizes[5] + 1, 6},  // deleting the oldest would undershoot
			{sizes[5], 5},      // one segment too many
			{sizes[2] + 10, 3}, // down to three
			{0, 1},             // everything but an empty active segment
		} {
			cfg.RetentionBytes = step.retentionBytes
			if err := l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
			if l.NumSegments() != step.wantSegments {
				t.Fatalf("retention.bytes=%d: %d segments, want %d", step.retentionBytes, l.NumSegments(), step.wantSegments)
			}
			if l.Size() > step.retentionBytes && l.NumSegments() > 1 && l.Size()-(*l.segments.Load())[0].size.Load() >= step.retentionBytes {
				t.Fatalf("retention.bytes=%d: %d bytes left, a segment more than needed", step.retentionBytes, l.Size())
			}
			m.check(t, l)
		}
		if l.Size() != 0 || l.LogStartOffset() != 30 || l.LogEndOffset() != 30 {
			t.Fatalf("size %d start %d end %d", l.Size(), l.LogStartOffset(), l.LogEndOffset())
		}
	})
}

// TestRetentionRollsExpiredActiveSegment: when even the active segment has
// expired, the log rolls so it can go; the log then starts, empty, at its
// old end, and carries on from there, also after a restart.
func TestRetentionRollsExpiredActiveSegment(t *testing.T) {
	for _, restart := range []string{"clean", "unclean"} {
		t.Run(restart, func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				clock := &fakeClock{ms: 1_000_000}
				cfg := retentionConfig(t)
				cfg.RetentionMs = 1000
				l, m := retentionFixture(t, fsys, dir, cfg, clock, 3)
				m.appendBatch(t, l, 2, clock.ms+200, 0) // rolls: a fourth, active segment
				leo := l.LogEndOffset()
				l.SetHighWatermark(leo)
				clock.ms += 10_000
				res, err := l.ApplyRetention()
				if err != nil {
					t.Fatal(err)
				}
				if res.SegmentsDeleted != 4 || l.NumSegments() != 1 || l.Size() != 0 {
					t.Fatalf("%+v: %d segments of %d bytes left", res, l.NumSegments(), l.Size())
				}
				if l.LogStartOffset() != leo || l.LogEndOffset() != leo || l.HighWatermark() != leo {
					t.Fatalf("start %d end %d HW %d, want all %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), leo)
				}
				if files := logSegmentFiles(t, fsys, dir); len(files) != 1 || files[fmt.Sprintf("%020d.log", leo)] != 0 {
					t.Fatalf("segment files %v", files)
				}
				res2, err := l.Read(leo, 1<<20, leo)
				if err != nil || len(res2.Records) != 0 {
					t.Fatalf("read at the end: %v, %d bytes", err, len(res2.Records))
				}
				// A second pass has nothing to do: the empty active segment stays.
				if res, err := l.ApplyRetention(); err != nil || res.SegmentsDeleted != 0 || l.NumSegments() != 1 {
					t.Fatalf("second pass: %+v %v", res, err)
				}
				if restart == "clean" {
					logClose(t, l)
				} else {
					if err := l.Flush(leo); err != nil {
						t.Fatal(err)
					}
					logCloseHandles(l)
				}
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: restart == "clean", Now: clock.now})
				defer logClose(t, l)
				if l.LogStartOffset() != leo || l.LogEndOffset() != leo {
					t.Fatalf("after restart: start %d end %d, want %d", l.LogStartOffset(), l.LogEndOffset(), leo)
				}
				info := m.appendBatch(t, l, 1, clock.ms, 0)
				if info.FirstOffset != leo {
					t.Fatalf("next append at %d", info.FirstOffset)
				}
				m.check(t, l)
			})
		})
	}
}

// retentionBlockingFS lets a test hold a reader inside ReadAt of one file.
type retentionBlockingFS struct {
	vfs.FS
	target  string // files whose name ends with it block
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

type retentionBlockingFile struct {
	vfs.File
	fs *retentionBlockingFS
}

func (f retentionBlockingFile) ReadAt(p []byte, off int64) (int, error) {
	if strings.HasSuffix(f.Name(), f.fs.target) && f.fs.armed.CompareAndSwap(true, false) {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	return f.File.ReadAt(p, off)
}

func (b *retentionBlockingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return retentionBlockingFile{File: f, fs: b}, nil
}

func (b *retentionBlockingFS) Create(name string) (vfs.File, error) { return b.wrap(b.FS.Create(name)) }
func (b *retentionBlockingFS) Open(name string) (vfs.File, error)   { return b.wrap(b.FS.Open(name)) }
func (b *retentionBlockingFS) OpenReadWrite(name string) (vfs.File, error) {
	return b.wrap(b.FS.OpenReadWrite(name))
}

// TestRetentionWaitsForReader: a segment is never deleted while a reader
// is inside it. The reader is held in the middle of reading the oldest
// segment; retention, started then, must wait (it is seen queued on the
// segment lock) and the reader gets its batches whole.
func TestRetentionWaitsForReader(t *testing.T) {
	logForEachFS(t, func(t *testing.T, base vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		cfg.RetentionMs = 1000
		fsys := &retentionBlockingFS{FS: base, target: fmt.Sprintf("%020d.log", 0), entered: make(chan struct{}), release: make(chan struct{})}
		l, _ := retentionFixture(t, fsys, dir, cfg, clock, 4)
		defer logClose(t, l)
		clock.ms += 10_000

		fsys.armed.Store(true)
		type result struct {
			res ReadResult
			err error
		}
		read := make(chan result, 1)
		go func() {
			res, err := l.Read(1, 1<<20, l.LogEndOffset())
			read <- result{res, err}
		}()
		<-fsys.entered
		retained := make(chan error, 1)
		go func() {
			_, err := l.ApplyRetention()
			retained <- err
		}()
		// A writer queued on an RWMutex makes TryRLock fail: retention is
		// waiting for the reader.
		testutil.Eventually(t, 10*time.Second, func() error {
			if l.segLock.TryRLock() {
				l.segLock.RUnlock()
				return errors.New("retention not yet waiting on the segment lock")
			}
			return nil
		})
		select {
		case err := <-retained:
			t.Fatalf("retention finished while a reader was inside the segment: %v", err)
		default:
		}
		close(fsys.release)
		r := <-read
		if r.err != nil {
			t.Fatalf("read: %v", r.err)
		}
		hs := logBatches(t, r.res.Records)
		if len(hs) == 0 || hs[0].BaseOffset != 1 {
			t.Fatalf("read returned %v", logBases(hs))
		}
		if err := <-retained; err != nil {
			t.Fatal(err)
		}
		if l.NumSegments() != 1 || l.LogStartOffset() != 20 {
			t.Fatalf("%d segments, start %d after retention", l.NumSegments(), l.LogStartOffset())
		}
	})
}

// TestRetentionConcurrentReaders: readers chasing the log start offset
// while an appender writes and retention deletes; every read either
// succeeds with whole, correct batches or says the offset is out of range.
func TestRetentionConcurrentReaders(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		cfg.RetentionBytes = 3 * cfg.SegmentBytes
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
		defer logClose(t, l)
		done := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pos := int64(0)
				for n := 0; ; n++ {
					select {
					case <-done:
						return
					default:
					}
					leo := l.LogEndOffset()
					res, err := l.Read(pos, 1+r*200, leo)
					if errors.Is(err, ErrOffsetOutOfRange) {
						pos = l.LogStartOffset()
						continue
					}
					if err == nil {
						err = logVerifyBatches(res.Records)
					}
					if err != nil {
						errs <- fmt.Errorf("read at %d: %w", pos, err)
						return
					}
					if len(res.Records) > 0 {
						h, _ := record.ParseHeader(res.Records)
						pos = h.LastOffset() + 1
					}
				}
			}()
		}
		var m logModel
		for i := range 250 {
			m.appendBatch(t, l, 1+i%2, clock.ms, 0)
			l.SetHighWatermark(l.LogEndOffset())
			if i%7 == 0 {
				if _, err := l.ApplyRetention(); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// A pass leaves less than retention.bytes plus the oldest segment;
		// up to six appends follow the last pass.
		if l.LogStartOffset() == 0 || l.Size() > cfg.RetentionBytes+3*cfg.SegmentBytes {
			t.Fatalf("retention did not keep up: start %d size %d", l.LogStartOffset(), l.Size())
		}
		m.check(t, l)
	})
}

// TestRetentionStopsAtHighWatermark: retention deletes only segments wholly
// below the high watermark, as Kafka does: a record not yet on every
// in-sync replica must not vanish from the leader, however old it is.
func TestRetentionStopsAtHighWatermark(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		cfg := retentionConfig(t)
		cfg.RetentionMs = 1000
		l, m := retentionFixture(t, fsys, dir, cfg, clock, 4) // segments at 0, 5, 10, 15
		defer logClose(t, l)
		clock.ms += 10_000 // every segment has expired
		for _, step := range []struct {
			hw         int64
			deleted    int
			logStartAt int64
		}{
			{0, 0, 0},
			{4, 0, 0},   // segment 0 reaches offset 4, above the HW
			{5, 1, 5},   // now wholly below
			{12, 1, 10}, // segment 10 reaches above 12
			{20, 2, 20}, // the rest, the active segment rolled first
		} {
			l.SetHighWatermark(step.hw)
			res, err := l.ApplyRetention()
			if err != nil {
				t.Fatal(err)
			}
			if res.SegmentsDeleted != step.deleted || l.LogStartOffset() != step.logStartAt {
				t.Fatalf("hw %d: %+v, log start %d; want %d deleted, start %d",
					step.hw, res, l.LogStartOffset(), step.deleted, step.logStartAt)
			}
		}
		if l.LogEndOffset() != 20 || l.Size() != 0 {
			t.Fatalf("end %d size %d", l.LogEndOffset(), l.Size())
		}
		m.check(t, l)
	})
}
