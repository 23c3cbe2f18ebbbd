package storage

import (
	"errors"
	"io"
	"path/filepath"
	"slices"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Idempotent-producer state (Kafka's ProducerStateManager, see package
// producerstate) and its snapshot files.
//
// Log.Append checks every batch that carries a producer id against the
// state before it writes any; every batch written (appended, replicated,
// or read back while rebuilding) then updates it. The state lives in memory
// and is rebuilt when the log opens: from the newest snapshot file at or
// below the log end offset, plus the headers of the batches after it (only
// headers: producer id, epoch and sequence are in the v2 batch header, so
// nothing is decompressed). Snapshots are written:
//
//   - at every roll, at the new segment's base offset, before the segment
//     is created. A truncation into that segment reloads from it, and when
//     retention deletes the segments below, it keeps the state of the
//     producers whose batches went;
//   - at a clean close, at the log end offset, so that a clean start loads
//     it and replays nothing. Skipped when the newest snapshot is already
//     at the log end offset (an idle log), or when the log is empty and
//     has never had one (nothing to replay either way).
//
// Invariants, all under Log.mu:
//
//   - Log.producers is the state after every batch below the log end
//     offset, less the producers expired since;
//   - Log.snapshots lists the snapshot files, ascending; each holds the
//     state after every batch below its offset as the log held them then;
//   - once Open or a truncation returns, no snapshot lies above the log
//     end offset, and its deletion is durable: a stale one that came back
//     after a crash would be loaded once the log grew past it again with
//     other batches.
//
// Retention and DeleteRecords delete the snapshots below the new log
// start offset but the newest at or below it, which is the state where
// the first remaining segment begins. Producers whose batches were all
// deleted stay in the state (and the snapshots) until they expire
// (Config.ProducerIDExpirationMs, Kafka's producer.id.expiration.ms,
// measured by the broker's clock: see producerstate.State.RemoveExpired):
// that is what still deduplicates a retry of a batch retention already
// removed, and what lets the producer go on at its next sequence number.
// Expiry runs with each retention pass.
// Compaction leaves the state alone (the cleaner keeps each producer's
// last batch), but a pass that drops a transaction marker deletes every
// snapshot at or below it first (cleaner.go, swapSegment): one taken
// while the marker's transaction was open would have a rebuild from it
// find the transaction open, with no marker left to end it.

// snapshotReadChunk is the scanner's read-ahead while replaying headers:
// small, since only 61 bytes of each batch are wanted.
const snapshotReadChunk = 16 << 10

func (l *Log) snapshotPath(offset int64) string {
	return filepath.Join(l.dir, producerstate.SnapshotFileName(offset))
}

// listSnapshots returns the offsets of the snapshot files in the log
// directory, ascending.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, n := range names {
		if off, ok := producerstate.ParseSnapshotFileName(n); ok {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// loadProducerStateLocked rebuilds the producer state at the log end
// offset: from the newest readable snapshot at or below it and the batches
// after it, or from every batch in the log when there is none. Snapshots
// above the log end offset are deleted first; a damaged one is deleted
// with a log line.
// REQUIRES: l.mu held (or the log not yet shared, in Open).
func (l *Log) loadProducerStateLocked() error {
	leo := l.leo.Load()
	nowMs := l.now().UnixMilli()
	if err := l.deleteSnapshotsAboveLocked(leo); err != nil {
		return err
	}
	for i := len(l.snapshots) - 1; i >= 0; i-- {
		off := l.snapshots[i]
		b, err := readWhole(l.fs, l.snapshotPath(off))
		if err != nil {
			return err
		}
		st, err := producerstate.DecodeSnapshot(b, off, nowMs)
		if err == nil {
			l.producers = st
			return l.rebuildIfDamagedLocked(l.replayProducersLocked(off, leo, nowMs), leo, nowMs)
		}
		l.log.Warn("ignoring damaged producer state snapshot; rebuilding from an older one or the log",
			"log", l.name, "offset", off, "err", err)
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !isNotExist(err) {
			return err
		}
		l.snapshots = slices.Delete(l.snapshots, i, i+1)
	}
	l.producers = producerstate.New()
	return l.replayProducersLocked(0, leo, nowMs)
}

// rebuildIfDamagedLocked answers a replay's error: a damaged transaction
// index, which the replay from a snapshot cannot rebuild below the
// snapshot, has the state rebuilt from the whole log instead (which
// rewrites every index). Producers whose batches retention deleted are
// forgotten then: only the snapshot knew them.
// REQUIRES: l.mu held.
func (l *Log) rebuildIfDamagedLocked(err error, leo, nowMs int64) error {
	if !errors.Is(err, ErrCorruptTxnIndex) {
		return err
	}
	l.log.Warn("damaged transaction index; rebuilding the producer state and the transaction indexes from the log",
		"log", l.name, "err", err)
	l.producers = producerstate.New()
	return l.replayProducersLocked(0, leo, nowMs)
}

// replayProducersLocked applies the batches with base offsets in [from,
// to) to the producer state, as seen at nowMs: their headers, and a
// control batch's marker. The transaction indexes are rebuilt with it:
// their entries for markers at or past from are dropped first and the
// replay appends them again (txnindex.go), so nothing a crash or a
// truncation took from the log stays indexed. The entries appended are
// synced before it returns: the log's recovery point may already be
// past them, so no Flush would.
// REQUIRES: l.mu held (nothing removes segments meanwhile).
func (l *Log) replayProducersLocked(from, to, nowMs int64) error {
	defer l.publishUnstableLocked(true)
	segs := *l.segments.Load()
	first := len(segs) // the first segment that may hold from's markers
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].baseOffset <= from {
			continue // wholly below from: its markers are too
		}
		first = min(first, i)
		if err := s.truncateTxnIndex(from); err != nil {
			return err
		}
	}
	if err := l.replayBatchesLocked(segs, from, to, nowMs); err != nil {
		return err
	}
	for _, s := range segs[first:] {
		if err := s.syncTxnIndex(); err != nil {
			return err
		}
	}
	return nil
}

// replayBatchesLocked is replayProducersLocked's replay.
// REQUIRES: l.mu held.
func (l *Log) replayBatchesLocked(segs []*segment, from, to, nowMs int64) error {
	if from >= to {
		return nil
	}
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].baseOffset <= from {
			continue // wholly below from
		}
		if s.baseOffset >= to {
			break
		}
		size := s.size.Load()
		if size == 0 {
			continue
		}
		var pos int64
		if from > s.baseOffset {
			p, _, err := s.findBatch(from)
			if err != nil {
				return err
			}
			if p < 0 {
				continue
			}
			pos = p
		}
		f, err := s.handle()
		if err != nil {
			return err
		}
		sc := newScanner(f, pos, size, snapshotReadChunk)
		for {
			h, err := sc.header()
			if err == io.EOF {
				break
			}
			if err != nil {
				return s.corrupt(sc.pos, err)
			}
			if h.BaseOffset >= to {
				return nil
			}
			if h.BaseOffset >= from && h.HasProducerID() {
				var b []byte
				if h.IsControl() {
					if b, err = sc.batch(h); err != nil {
						return s.corrupt(sc.pos, err)
					}
				}
				if err := l.applyBatchLocked(s, h, b, nowMs); err != nil {
					return err
				}
			}
			sc.advance(h)
		}
	}
	return nil
}

// writeSnapshotLocked writes the producer state as the snapshot at
// offset, atomically and durably.
// REQUIRES: l.mu held.
func (l *Log) writeSnapshotLocked(offset int64) error {
	if err := checkpoint.WriteFileAtomic(l.fs, l.snapshotPath(offset), l.producers.AppendSnapshot(nil, offset)); err != nil {
		return err
	}
	if i, found := slices.BinarySearch(l.snapshots, offset); !found {
		l.snapshots = slices.Insert(l.snapshots, i, offset)
	}
	return nil
}

// snapshotAtCloseLocked writes the snapshot a clean start loads, unless
// one at the log end offset exists or there is nothing to replay anyway.
// REQUIRES: l.mu held; the log flushed.
func (l *Log) snapshotAtCloseLocked() error {
	leo := l.leo.Load()
	if n := len(l.snapshots); n > 0 && l.snapshots[n-1] == leo {
		return nil
	}
	if len(l.snapshots) == 0 && l.producers.Len() == 0 && leo == (*l.segments.Load())[0].baseOffset {
		return nil
	}
	return l.writeSnapshotLocked(leo)
}

// deleteSnapshotsAboveLocked deletes the snapshots above offset and syncs
// the directory if it deleted any (see the invariants above).
// REQUIRES: l.mu held.
func (l *Log) deleteSnapshotsAboveLocked(offset int64) error {
	i, _ := slices.BinarySearch(l.snapshots, offset+1)
	if i == len(l.snapshots) {
		return nil
	}
	for _, off := range l.snapshots[i:] {
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !isNotExist(err) {
			return err
		}
	}
	l.snapshots = l.snapshots[:i]
	return l.fs.SyncDir(l.dir)
}

// deleteSnapshotsBelowLocked deletes the snapshots below start but the
// newest at or below it. The deletions need not be durable: a snapshot
// that comes back after a crash is older than the one kept, read only if
// every newer one is damaged, and deleted again by the next pass. A
// failed deletion is logged and left for the next pass.
// REQUIRES: l.mu held.
func (l *Log) deleteSnapshotsBelowLocked(start int64) {
	i, found := slices.BinarySearch(l.snapshots, start)
	if !found {
		i-- // the newest below start is kept
	}
	if i <= 0 {
		return
	}
	kept := l.snapshots[:0]
	for j, off := range l.snapshots {
		if j < i {
			if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !isNotExist(err) {
				l.log.Warn("deleting old producer state snapshot", "log", l.name, "offset", off, "err", err)
			} else {
				continue
			}
		}
		kept = append(kept, off)
	}
	l.snapshots = kept
}

// deleteSnapshotsUpToLocked deletes the snapshots at or below offset, and
// syncs the directory if it deleted any.
// REQUIRES: l.mu held.
func (l *Log) deleteSnapshotsUpToLocked(offset int64) error {
	n, _ := slices.BinarySearch(l.snapshots, offset+1)
	if n == 0 {
		return nil
	}
	for i, off := range l.snapshots[:n] {
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !isNotExist(err) {
			l.snapshots = l.snapshots[i:]
			return err
		}
	}
	l.snapshots = slices.Delete(l.snapshots, 0, n)
	return l.fs.SyncDir(l.dir)
}

// deleteAllSnapshotsLocked deletes every snapshot, for a log that starts
// over empty. The caller syncs the directory.
// REQUIRES: l.mu held.
func (l *Log) deleteAllSnapshotsLocked() error {
	for _, off := range l.snapshots {
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !isNotExist(err) {
			return err
		}
	}
	l.snapshots = nil
	return nil
}

// ActiveProducers returns a copy of the idempotent-producer state: each
// producer's epoch and last batches.
func (l *Log) ActiveProducers() map[int64]producerstate.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.All()
}

// expireProducersLocked forgets producers idle for longer than the
// config's producer id expiration.
// REQUIRES: l.mu held.
func (l *Log) expireProducersLocked(cfg *Config, nowMs int64) {
	if n := l.producers.RemoveExpired(nowMs, cfg.producerIDExpirationMs()); n > 0 {
		l.log.Info("expired idle producers", "log", l.name, "producers", n)
	}
}
