package storage

import (
	"fmt"

	"github.com/fjordmq/fjord/internal/storage/producerstate"
)

// TruncateTo removes every batch at or after offset, for a follower whose
// history diverged from its new leader's (KIP-101, KIP-279). A batch that
// straddles offset is removed whole, and the log end offset becomes the end
// of the data left, at or below offset (see truncateSegmentLocked).
// Truncating at or past the log end offset does nothing. The truncation is
// durable when it returns. It rescans the cut segment to rebuild its
// indexes: cheap for the small tails followers truncate, a full segment
// read at worst.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if offset >= l.leo.Load() {
		// Nothing to cut from the records, but the leader-epoch cache
		// may end in an entry at the log end: an epoch this node began
		// as leader and wrote nothing in, which the follower's new
		// leader does not have. Kafka's truncateTo drops it too. Kept,
		// the follower's next fetch names that epoch again as its last,
		// and the leader answers the same divergence forever.
		if err := l.epochs.TruncateFromEnd(offset); err != nil {
			return l.fail("truncate", err)
		}
		return nil
	}
	// Compaction can delete the first segment whole, leaving the log
	// start offset below the first segment's base: truncating into that
	// gap keeps nothing either.
	if offset <= l.logStartOffset.Load() || offset < (*l.segments.Load())[0].baseOffset {
		return l.truncateFullyLocked(offset)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.segLock.Lock()
	defer l.segLock.Unlock()

	segs := *l.segments.Load()
	keep := len(segs)
	for keep > 1 && segs[keep-1].baseOffset >= offset {
		keep--
	}
	for _, s := range segs[keep:] {
		if err := s.remove(); err != nil {
			return l.fail("truncate", err)
		}
	}
	// The removals must be durable before the last kept segment is cut:
	// the other order lets a crash bring the later segments back behind a
	// shortened one, a hole in the log.
	if keep < len(segs) {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail("truncate", err)
		}
	}
	kept := segs[:keep]
	last := kept[keep-1]
	newEnd, err := l.truncateSegmentLocked(last, offset)
	if err != nil {
		return l.fail("truncate", err)
	}
	l.segments.Store(&kept)
	if newEnd < l.logStartOffset.Load() {
		// The batch straddling offset began below the log start offset
		// (DeleteRecords moved it inside that batch) and went whole: keep
		// LogStartOffset <= LogEndOffset.
		l.logStartOffset.Store(newEnd)
	}
	l.leo.Store(newEnd)
	l.recoveryPoint.Store(min(l.recoveryPoint.Load(), newEnd))
	l.highWatermark.Store(min(l.highWatermark.Load(), newEnd))
	if err := l.epochs.TruncateFromEnd(newEnd); err != nil {
		return l.fail("truncate", err)
	}
	// Reloaded rather than undone in memory: the state keeps only each
	// producer's last five batches, so what preceded the removed ones is
	// known only to the snapshots and the log.
	if err := l.loadProducerStateLocked(); err != nil {
		return l.fail("truncate: producer state", err)
	}
	return nil
}

// truncateSegmentLocked cuts s before the first batch whose last offset is
// >= offset, rebuilding its indexes, and returns the new log end offset:
// where the data left in s ends (its base if none is left). That is below
// offset when a gap (compaction, or a follower's gapped append) precedes
// offset, because a reopened log finds its end from its data: ending the
// log at offset would have a restart move the end back and reuse offsets.
// REQUIRES: l.mu and l.segLock held.
func (l *Log) truncateSegmentLocked(s *segment, offset int64) (int64, error) {
	pos, _, err := s.findBatch(offset)
	if err != nil {
		return 0, err
	}
	if pos < 0 {
		pos = s.size.Load() // nothing at or after offset: a gap runs to it
	}
	f, err := s.handle()
	if err != nil {
		return 0, err
	}
	s.truncations.Add(1)
	if err := f.Truncate(pos); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	cfg := l.cfg.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.size.Store(pos)
	newEnd, _, err := s.rebuildLocked(cfg.IndexIntervalBytes, false, nil)
	if err != nil {
		return 0, err
	}
	if newEnd > offset {
		panic(fmt.Sprintf("truncation to %d left data up to %d in segment %d", offset, newEnd, s.baseOffset))
	}
	return newEnd, nil
}

// TruncateFullyAndStartAt deletes every segment and starts the log empty
// at offset: for a follower whose leader no longer has the offsets it
// needs, and for DeleteRecords past the end.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

// REQUIRES: l.mu held.
func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start offset %d", ErrOffsetOutOfRange, offset)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.segLock.Lock()
	defer l.segLock.Unlock()
	for _, s := range *l.segments.Load() {
		if err := s.remove(); err != nil {
			return l.fail("truncate fully", err)
		}
	}
	if err := l.deleteAllSnapshotsLocked(); err != nil {
		return l.fail("truncate fully", err)
	}
	l.producers = producerstate.New()
	l.publishUnstableLocked(true)
	s, err := createSegment(l.fs, l.dir, offset)
	if err != nil {
		return l.fail("truncate fully", err)
	}
	// Also makes the snapshot deletions durable.
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("truncate fully", err)
	}
	segs := []*segment{s}
	l.segments.Store(&segs)
	l.leo.Store(offset)
	l.logStartOffset.Store(offset)
	l.highWatermark.Store(offset)
	l.recoveryPoint.Store(offset)
	if err := l.epochs.Clear(); err != nil {
		return l.fail("truncate fully", err)
	}
	return nil
}

// DeleteRecordsBefore moves the log start offset to offset (Kafka's
// DeleteRecords): records below it are no longer served, and segments wholly
// below it are deleted by the next retention pass. Offsets above the high
// watermark are refused, as Kafka does.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return 0, err
	}
	if offset < 0 || offset > l.highWatermark.Load() {
		return 0, fmt.Errorf("%w: delete before %d, high watermark %d",
			ErrOffsetOutOfRange, offset, l.highWatermark.Load())
	}
	if offset > l.logStartOffset.Load() {
		l.logStartOffset.Store(offset)
		if err := l.epochs.TruncateFromStart(offset); err != nil {
			return 0, l.fail("delete records", err)
		}
		l.deleteSnapshotsBelowLocked(offset)
	}
	return l.logStartOffset.Load(), nil
}
