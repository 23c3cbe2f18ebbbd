package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
)

// Compaction (cleanup.policy=compact): keep the newest record per key.
//
// A pass over a log works on its cleanable segments: every segment wholly
// below the cleaning bound, which is the lowest of the active segment's
// base offset, the last stable offset (never clean what a follower may
// still truncate, nor a transaction not yet decided and replicated) and
// the first offset of a transaction whose outcome is not in the cleanable
// range yet (its records must not supersede older ones before it
// commits). It then:
//
//  1. scans the cleanable segments once, noting aborted transactions (their
//     records are dropped), each producer's last batch, and for every key
//     the offset of its newest record;
//  2. rewrites each segment, oldest first, keeping a record only if it is
//     the newest for its key, is not in an aborted transaction, and is not
//     a tombstone older than delete.retention.ms. Offsets never change:
//     kept batches keep their base and last offsets, so gaps appear. A
//     producer's last batch stays, empty if need be, so its sequence
//     numbers survive. A transaction marker stays until its transaction
//     has no records left and it is older than delete.retention.ms;
//  3. swaps each rewritten segment in crash-safely: written as
//     "<base>.log.cleaned" and synced, renamed to "<base>.log.swap" and the
//     directory synced (from here recovery finishes the swap), the old
//     indexes removed, the swap renamed over "<base>.log", the new indexes
//     written. The transaction index stays as it was: its entries whose
//     batches the pass dropped name no batch any more, which is harmless,
//     and a segment emptied whole goes with its index, its aborted batches
//     gone too. Swapping oldest first means a crash between two swaps never
//     leaves a tombstone removed while the value it deleted survives.
//
// The active segment is never touched. Whole-log offset maps are held in
// memory: a bound on that memory (Kafka's dedupe buffer) and merging small
// cleaned segments are left for later.

// CleanResult says what a compaction pass did.
type CleanResult struct {
	SegmentsCleaned int
	BytesBefore     int64
	BytesAfter      int64
	// FirstDirtyOffset is the cleaning bound: everything below it is clean.
	FirstDirtyOffset int64
}

// Compact runs one compaction pass. It is safe to run beside appends and
// reads; it serializes with truncation and retention by checking, at swap
// time, that the segments it rewrote are unchanged.
func (l *Log) Compact() (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if l.failed.Load() {
		return CleanResult{}, fmt.Errorf("%w: %s", ErrStorage, l.name)
	}
	cfg := l.cfg.Load()
	nowMs := l.now().UnixMilli()
	segs := *l.segments.Load()
	bound := min(l.activeSegment().baseOffset, l.LastStableOffset())

	// Pass 1: scan.
	var (
		cleanable    []*segment
		sizes        []int64
		latest       = map[string]int64{}
		pending      = map[int64][]int64{} // producer -> its open transaction's batches
		abortedBatch = map[int64]bool{}    // base offsets of batches in aborted transactions
		lastBatch    = map[int64]int64{}   // producer -> base offset of its last batch
		firstUnstab  = bound
		// truncations as of the start: loaded before the size, so a
		// segment cut and refilled to its old size still shows as changed.
		truncations = map[*segment]int64{}
	)
	for i, s := range segs {
		if i+1 >= len(segs) || segs[i+1].baseOffset > bound {
			break
		}
		cleanable = append(cleanable, s)
		truncations[s] = s.truncations.Load()
		sizes = append(sizes, s.size.Load())
	}
	scan := func(s *segment, size int64, fn func(h record.Header, b []byte) error) error {
		l.segLock.RLock()
		defer l.segLock.RUnlock()
		f, err := s.handle()
		if err != nil {
			return err
		}
		sc := newScanner(f, 0, size, 1<<20)
		for {
			h, err := sc.header()
			if err == io.EOF {
				return nil
			}
			var b []byte
			if err == nil {
				b, err = sc.batch(h)
			}
			if err != nil {
				return s.corrupt(sc.pos, err)
			}
			if err := fn(h, b); err != nil {
				return err
			}
			sc.advance(h)
		}
	}
	for i, s := range cleanable {
		err := scan(s, sizes[i], func(h record.Header, b []byte) error {
			if h.HasProducerID() {
				lastBatch[h.ProducerID] = h.BaseOffset
			}
			if h.IsControl() {
				isAbort := false
				err := record.ForEachRecord(b, func(r *record.Record) error {
					t, err := record.ParseControlRecord(r)
					isAbort = err == nil && t == record.ControlAbort
					return err
				})
				if err != nil {
					return err
				}
				if isAbort {
					for _, o := range pending[h.ProducerID] {
						abortedBatch[o] = true
					}
				}
				delete(pending, h.ProducerID)
				return nil
			}
			if h.IsTransactional() {
				pending[h.ProducerID] = append(pending[h.ProducerID], h.BaseOffset)
			}
			return nil
		})
		if errors.Is(err, errSegmentRemoved) {
			return CleanResult{}, nil // retention or truncation won the race
		}
		if err != nil {
			return CleanResult{}, err
		}
	}
	// A transaction still open bounds what may be cleaned: until its
	// marker arrives its records must neither supersede others nor go.
	for _, bases := range pending {
		firstUnstab = min(firstUnstab, bases[0])
	}
	for len(cleanable) > 0 && segs[len(cleanable)].baseOffset > firstUnstab {
		cleanable, sizes = cleanable[:len(cleanable)-1], sizes[:len(sizes)-1]
	}
	if len(cleanable) == 0 {
		return CleanResult{FirstDirtyOffset: segs[0].baseOffset}, nil
	}
	for i, s := range cleanable {
		err := scan(s, sizes[i], func(h record.Header, b []byte) error {
			if h.IsControl() || abortedBatch[h.BaseOffset] {
				return nil
			}
			return record.ForEachRecord(b, func(r *record.Record) error {
				if r.Key != nil {
					latest[string(r.Key)] = r.Offset
				}
				return nil
			})
		})
		if errors.Is(err, errSegmentRemoved) {
			return CleanResult{}, nil // retention or truncation won the race
		}
		if err != nil {
			return CleanResult{}, err
		}
	}

	// Pass 2: rewrite and swap, oldest first.
	res := CleanResult{FirstDirtyOffset: segs[len(cleanable)].baseOffset}
	horizon := nowMs - cfg.DeleteRetentionMs
	retained := map[int64]bool{} // producer -> its open transaction kept a record
	for i, s := range cleanable {
		before := sizes[i]
		// The log's first segment stays even when emptied: its base
		// offset is where the log starts after a restart, and removing it
		// would move the log start offset past offsets consumers may ask
		// for (they get the next record instead, as in any gap).
		keepEmpty := s == segs[0]
		var lastDropped int64 = -1 // the last marker this segment's copy drops
		out, err := l.cleanSegment(s, sizes[i], cfg, keepEmpty, scan, func(h record.Header, b []byte, dst []byte) ([]byte, error) {
			if h.IsControl() {
				keep := retained[h.ProducerID] || h.MaxTimestamp >= horizon
				delete(retained, h.ProducerID)
				if keep {
					return append(dst, b...), nil
				}
				lastDropped = h.BaseOffset
				return dst, nil
			}
			if abortedBatch[h.BaseOffset] {
				if lastBatch[h.ProducerID] == h.BaseOffset {
					return record.EmptyBatch(dst, h), nil
				}
				return dst, nil
			}
			tombstoneExpired := h.MaxTimestamp < horizon
			filtered, kept, err := record.Filter(nil, b, func(r *record.Record) bool {
				if r.Key == nil || latest[string(r.Key)] > r.Offset {
					return false
				}
				return r.Value != nil || !tombstoneExpired
			})
			if err != nil {
				return nil, err
			}
			if kept > 0 && h.IsTransactional() {
				retained[h.ProducerID] = true
			}
			switch {
			case kept == int(h.NumRecords):
				return append(dst, b...), nil // untouched: keep the producer's bytes
			case kept > 0:
				return append(dst, filtered...), nil
			case h.HasProducerID() && lastBatch[h.ProducerID] == h.BaseOffset:
				return record.EmptyBatch(dst, h), nil
			}
			return dst, nil
		})
		if errors.Is(err, errSegmentRemoved) {
			return res, nil // retention or truncation won the race
		}
		if err != nil {
			return res, err
		}
		ok, err := l.swapSegment(s, before, truncations[s], out, lastDropped)
		if err != nil {
			return res, err
		}
		if !ok {
			// Truncated or deleted under us: what we wrote is stale.
			return res, nil
		}
		res.SegmentsCleaned++
		res.BytesBefore += before
		if out != nil {
			res.BytesAfter += out.size.Load()
		}
	}
	return res, nil
}

// cleanSegment writes the filtered copy of s as "<base>.log.cleaned" and
// returns it as a segment (nil when nothing is left), its indexes built
// and its file synced. With keepEmpty an empty copy is kept.
func (l *Log) cleanSegment(s *segment, size int64, cfg *Config, keepEmpty bool,
	scan func(*segment, int64, func(record.Header, []byte) error) error,
	filter func(h record.Header, b []byte, dst []byte) ([]byte, error)) (*segment, error) {

	path := s.logPath() + ".cleaned"
	f, err := l.fs.Create(path)
	if err != nil {
		return nil, err
	}
	out := &segment{fs: l.fs, dir: l.dir, baseOffset: s.baseOffset, file: f}
	out.mu.loaded = true
	out.mu.maxTimestamp, out.mu.firstTimestamp = -1, -1
	var pos int64
	var lastBase int64 = -1
	buf := make([]byte, 0, min(size, 1<<20)) // most segments are smaller than 1 MiB; filtering only shrinks them
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if _, err := f.WriteAt(buf, pos-int64(len(buf))); err != nil {
			return err
		}
		buf = buf[:0]
		return nil
	}
	err = scan(s, size, func(h record.Header, b []byte) error {
		n := len(buf)
		var err error
		if buf, err = filter(h, b, buf); err != nil {
			return err
		}
		for off := n; off < len(buf); {
			nh, err := record.ParseHeader(buf[off:])
			if err != nil {
				return err
			}
			out.indexBatchLocked(nh, pos, cfg.IndexIntervalBytes)
			lastBase = nh.BaseOffset
			pos += int64(nh.Size())
			off += nh.Size()
		}
		if len(buf) >= 1<<20 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, err
	}
	out.size.Store(pos)
	if pos == 0 && !keepEmpty {
		f.Close()
		if err := l.fs.Remove(path); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if out.mu.maxTimestamp >= 0 {
		out.mu.times.maybeAppend(out.mu.maxTimestamp, out.relative(lastBase))
	}
	return out, nil
}

// swapSegment replaces old (which must still be in the log with the size
// and truncation count it had when cleaning began) by its cleaned copy, or
// removes it when the copy is empty. It reports false, and discards the
// copy, when old changed.
//
// lastDropped is the offset of the last marker the copy drops, -1 if
// none. A producer snapshot at or below it may have been taken while the
// marker's transaction was open: a rebuild from it (a truncation into the
// cleaned segments) would find the transaction open and no marker left to
// end it, and hold the last stable offset at its first offset for good.
// So those snapshots are deleted first, durably, before the swap: a
// rebuild there then replays the cleaned segments from the log's start,
// where every transaction that kept a record kept its marker. (The
// marker's transaction may have lost its records in an earlier pass, so
// where it began is not known here.)
func (l *Log) swapSegment(old *segment, size, truncations int64, cleaned *segment, lastDropped int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	discard := func() {
		if cleaned != nil {
			cleaned.close()
			l.fs.Remove(cleaned.logPath() + ".cleaned")
		}
	}
	if err := l.checkWritable(); err != nil {
		discard()
		return false, err
	}
	segs := *l.segments.Load()
	idx := -1
	for i, s := range segs[:len(segs)-1] {
		if s == old {
			idx = i
		}
	}
	if idx < 0 || old.size.Load() != size || old.truncations.Load() != truncations {
		discard()
		return false, nil
	}
	if err := l.deleteSnapshotsUpToLocked(lastDropped); err != nil {
		discard()
		return false, l.fail("clean", err)
	}
	l.segLock.Lock()
	defer l.segLock.Unlock()
	next := append([]*segment(nil), segs[:idx]...)
	if cleaned == nil {
		if err := old.remove(); err != nil {
			return false, l.fail("clean", err)
		}
	} else {
		swap := old.logPath() + ".swap"
		if err := l.fs.Rename(old.logPath()+".cleaned", swap); err != nil {
			return false, l.fail("clean", err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return false, l.fail("clean", err)
		}
		// Committed: recovery finishes the swap from here.
		old.close()
		if err := old.closeTxnIndex(); err != nil {
			return false, l.fail("clean", err)
		}
		for _, p := range []string{old.indexPath(), old.timeIndexPath()} {
			if err := l.fs.Remove(p); err != nil && !isNotExist(err) {
				return false, l.fail("clean", err)
			}
		}
		if err := l.fs.Rename(swap, old.logPath()); err != nil {
			return false, l.fail("clean", err)
		}
		cleaned.mu.Lock()
		err := cleaned.writeIndexesLocked()
		cleaned.mu.Unlock()
		if err != nil {
			return false, l.fail("clean", err)
		}
		next = append(next, cleaned)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return false, l.fail("clean", err)
	}
	next = append(next, segs[idx+1:]...)
	l.segments.Store(&next)
	return true, nil
}

// Cleaner runs compaction passes over a manager's compacted logs, one log
// at a time, on one goroutine (Kafka's log.cleaner.threads=1).
type Cleaner struct {
	m  *Manager
	mu struct {
		sync.Mutex
		firstDirty map[TopicPartition]int64
	}
}

// CleanerCheckpoint holds each compacted log's first dirty offset.
const CleanerCheckpoint = "cleaner-offset-checkpoint"

func newCleaner(m *Manager) *Cleaner {
	c := &Cleaner{m: m}
	c.mu.firstDirty = m.readCheckpoint(CleanerCheckpoint)
	return c
}

func (c *Cleaner) forget(tp TopicPartition) {
	c.mu.Lock()
	delete(c.mu.firstDirty, tp)
	c.mu.Unlock()
}

func (c *Cleaner) loop() {
	defer c.m.wg.Done()
	t := time.NewTicker(c.m.opts.CleanerInterval)
	defer t.Stop()
	for {
		select {
		case <-c.m.stop: // shutting down
			return
		case <-t.C: // look for logs dirty enough to clean
			if _, err := c.m.CleanOnce(); err != nil {
				c.m.log.Error("log cleaner", "err", err)
			}
		}
	}
}

// CleanOnce compacts every compacted log whose dirty share of non-active
// bytes is at least its min.cleanable.dirty.ratio, and returns how many it
// cleaned.
func (m *Manager) CleanOnce() (int, error) {
	c := m.cleaner
	cleaned := 0
	var errs error
	for tp, l := range m.Logs() {
		cfg := l.Config()
		if !cfg.CleanupPolicy.Compact() {
			continue
		}
		c.mu.Lock()
		firstDirty := c.mu.firstDirty[tp]
		c.mu.Unlock()
		if dirtyRatio(l, firstDirty) < cfg.MinCleanableDirtyRatio {
			continue
		}
		res, err := l.Compact()
		if err != nil {
			if !errors.Is(err, ErrLogClosed) {
				errs = errors.Join(errs, fmt.Errorf("compact %s: %w", l.name, err))
			}
			continue
		}
		if res.SegmentsCleaned > 0 {
			cleaned++
			m.log.Info("compacted log", "log", l.name, "segments", res.SegmentsCleaned,
				"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
		}
		c.mu.Lock()
		c.mu.firstDirty[tp] = res.FirstDirtyOffset
		snapshot := make(map[TopicPartition]int64, len(c.mu.firstDirty))
		for k, v := range c.mu.firstDirty {
			snapshot[k] = v
		}
		c.mu.Unlock()
		if err := checkpoint.WriteOffsets(m.fs, filepath.Join(m.dir, CleanerCheckpoint), snapshot); err != nil {
			errs = errors.Join(errs, err)
		}
	}
	return cleaned, errs
}

// dirtyRatio is the share of the non-active bytes at or above firstDirty.
func dirtyRatio(l *Log, firstDirty int64) float64 {
	segs := *l.segments.Load()
	var total, dirty int64
	for i, s := range segs[:len(segs)-1] {
		n := s.size.Load()
		total += n
		if segs[i+1].baseOffset > firstDirty {
			dirty += n
		}
	}
	if total == 0 {
		return 0
	}
	return float64(dirty) / float64(total)
}
