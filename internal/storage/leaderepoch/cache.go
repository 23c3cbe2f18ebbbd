// Package leaderepoch keeps a partition's leader-epoch history, Kafka's
// LeaderEpochFileCache: for each leader epoch that wrote to this replica's
// log, the offset of the first record it wrote. It is what lets a replica
// find where its log diverged from a new leader's by asking for the end of
// an epoch (OffsetForLeaderEpoch) instead of trusting the high watermark,
// which can lose or diverge acknowledged records across quick leader
// changes.
//
// Reference: KIP-101 (truncate by leader epoch, not high watermark) and
// KIP-279 (answer with the largest epoch at or below the requested one, so
// that a follower several epochs behind converges in a few round trips).
//
// The history lives in memory and in the partition directory's
// leader-epoch-checkpoint file (see package checkpoint), rewritten
// atomically on every change before the change is visible. Kafka flushes
// truncations in the background and repairs a stale file when it reloads
// the log; writing every change synchronously makes the file exactly the
// cache, which is simpler to trust and cheap because changes are rare:
// a new epoch, a truncation, a log-start-offset move. The common call, an
// Assign of the current epoch for every appended batch, writes nothing.
//
// Invariant (of the cache and of the file): epochs and start offsets are
// both >= 0 and both strictly increasing from the oldest entry to the
// newest.
package leaderepoch

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// EpochEntry says leader epoch Epoch began at StartOffset.
type EpochEntry = checkpoint.EpochEntry

// The answer EndOffsetFor gives when it has none, Kafka's
// UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// Errors. A corrupt checkpoint file is reported by Open as an error
// wrapping checkpoint.ErrCorruptCheckpoint.
var (
	// ErrInvalidEpochEntry: Assign of a negative epoch or start offset
	// (Kafka throws IllegalArgumentException). Nothing changes.
	ErrInvalidEpochEntry = errors.New("invalid leader epoch entry")
)

// Cache is one partition's leader-epoch history. It is safe for
// concurrent use: readers never wait for a checkpoint write, and changes
// are applied, and written, one at a time in the order they are made.
//
// A change whose checkpoint write fails returns the error and leaves the
// cache as it was; the file then holds either the old history or the new
// one. Kafka takes the log directory offline on such an error, and the
// caller should do the same rather than carry on.
type Cache struct {
	fs   vfs.FS
	path string

	// writeMu serializes changes, so the file is written in the order the
	// changes are made. It is held across the checkpoint write (an fsync)
	// and mu is not, so readers never wait for the disk.
	// Lock order: writeMu before mu.
	writeMu sync.Mutex
	mu      struct {
		sync.RWMutex
		// entries is the history, oldest first. It is replaced whole and
		// never modified in place, so a reader may keep the slice after
		// unlocking. Written only with writeMu held as well.
		// Invariant: see the package doc.
		entries []EpochEntry
	}
}

// Open loads the history from the checkpoint file at path, in its
// partition directory, which must exist. A missing file is an empty
// history (a new partition, or one that never had a leader that wrote);
// a file that does not parse or breaks the invariant is an error wrapping
// checkpoint.ErrCorruptCheckpoint.
func Open(fs vfs.FS, path string) (*Cache, error) {
	entries, err := checkpoint.ReadEpochs(fs, path)
	if err != nil {
		return nil, fmt.Errorf("leader epoch cache: %w", err)
	}
	c := &Cache{fs: fs, path: path}
	c.mu.entries = entries
	return c, nil
}

// snapshot returns the current history; the caller must not modify it.
func (c *Cache) snapshot() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.entries
}

// update applies change to a copy of the history and, if the result
// differs, writes it to the checkpoint and then publishes it.
func (c *Cache) update(change func(entries []EpochEntry) []EpochEntry) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	old := c.snapshot()
	next := change(slices.Clone(old))
	if slices.Equal(next, old) {
		return nil
	}
	if err := checkpoint.WriteEpochs(c.fs, c.path, next); err != nil {
		return fmt.Errorf("leader epoch cache: %w", err)
	}
	c.mu.Lock()
	c.mu.entries = next
	c.mu.Unlock()
	return nil
}

// Assign records that epoch began at startOffset. A leader calls it for
// every batch it appends, a follower for every batch it copies, so the
// common case must be cheap: when epoch is the latest epoch and startOffset
// is not before its start, Assign changes nothing and writes nothing (an
// epoch's start offset, once assigned, is never moved later).
//
// Otherwise the entry is added at the end, after dropping, from the end,
// every entry that conflicts with it: those of epoch >= epoch, and those
// starting at or after startOffset. So:
//   - a newer epoch at a later offset is appended;
//   - a newer epoch at the latest entry's start offset replaces it (the
//     older epoch wrote nothing);
//   - the latest epoch at an earlier offset moves its start back;
//   - an older epoch, or one starting before the latest entry, rewrites the
//     tail of the history (the log was truncated without the cache being
//     told; Kafka warns and does the same).
//
// A negative epoch or startOffset is ErrInvalidEpochEntry.
func (c *Cache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("%w: epoch %d start offset %d", ErrInvalidEpochEntry, epoch, startOffset)
	}
	// Decide under the read lock first, so the per-batch call does not
	// contend with readers or wait behind a checkpoint write.
	if !assignNeeded(c.snapshot(), epoch, startOffset) {
		return nil
	}
	return c.update(func(entries []EpochEntry) []EpochEntry {
		if !assignNeeded(entries, epoch, startOffset) {
			return entries // another Assign got here first
		}
		keep := len(entries)
		for keep > 0 && (entries[keep-1].Epoch >= epoch || entries[keep-1].StartOffset >= startOffset) {
			keep--
		}
		return append(entries[:keep], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	})
}

func assignNeeded(entries []EpochEntry, epoch int32, startOffset int64) bool {
	if len(entries) == 0 {
		return true
	}
	latest := entries[len(entries)-1]
	return epoch != latest.Epoch || startOffset < latest.StartOffset
}

// LatestEpoch returns the newest epoch in the history; false if it is empty.
func (c *Cache) LatestEpoch() (int32, bool) {
	entries := c.snapshot()
	if len(entries) == 0 {
		return 0, false
	}
	return entries[len(entries)-1].Epoch, true
}

// EarliestEntry returns the oldest entry; false if the history is empty.
func (c *Cache) EarliestEntry() (EpochEntry, bool) {
	entries := c.snapshot()
	if len(entries) == 0 {
		return EpochEntry{}, false
	}
	return entries[0], true
}

// Entries returns a copy of the history, oldest first.
func (c *Cache) Entries() []EpochEntry {
	return slices.Clone(c.snapshot())
}

// EndOffsetFor answers OffsetForLeaderEpoch for the requested epoch: the
// largest epoch <= requested that this log has, and the end offset of that
// epoch, which is the start offset of the first epoch after requested, or
// logEndOffset when requested is the latest epoch. In detail:
//   - requested is the latest epoch: (requested, logEndOffset). A leader is
//     still writing its epoch; a consumer validating its position after a
//     rebalance may ask for it too.
//   - the history has epochs on both sides of requested: the largest epoch
//     <= requested and the start offset of the next one (KIP-279).
//   - requested is older than every epoch here: (requested, start offset of
//     the first entry). The epochs before it were deleted with the log's
//     head; the follower should not keep anything past where this log
//     starts its history.
//   - requested is newer than every epoch here, or the history is empty, or
//     requested is UndefinedEpoch: (UndefinedEpoch, UndefinedEpochOffset),
//     so the follower falls back to truncating to its high watermark.
//
// Kafka checks for UndefinedEpoch (-1) only; here every negative epoch gets
// that answer, rather than being echoed back as if it were an epoch.
func (c *Cache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	entries := c.snapshot()
	if requested < 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if n := len(entries); n > 0 && entries[n-1].Epoch == requested {
		return requested, logEndOffset
	}
	next := sort.Search(len(entries), func(i int) bool { return entries[i].Epoch > requested })
	switch {
	case next == len(entries):
		return UndefinedEpoch, UndefinedEpochOffset
	case next == 0:
		return requested, entries[0].StartOffset
	default:
		return entries[next-1].Epoch, entries[next].StartOffset
	}
}

// EpochForOffset returns the epoch whose leader wrote offset: the epoch of
// the last entry starting at or before offset. False when offset is before
// the history's first start offset, or the history is empty. It does not
// know where the log ends: past the log end offset it answers the latest
// epoch.
func (c *Cache) EpochForOffset(offset int64) (int32, bool) {
	entries := c.snapshot()
	after := sort.Search(len(entries), func(i int) bool { return entries[i].StartOffset > offset })
	if after == 0 {
		return 0, false
	}
	return entries[after-1].Epoch, true
}

// TruncateFromEnd drops every entry starting at or after endOffset: the
// log was truncated to end there (a follower matching its new leader), so
// those epochs no longer have records here. A negative endOffset
// (UndefinedEpochOffset) changes nothing.
func (c *Cache) TruncateFromEnd(endOffset int64) error {
	if endOffset < 0 {
		return nil
	}
	return c.update(func(entries []EpochEntry) []EpochEntry {
		keep := len(entries)
		for keep > 0 && entries[keep-1].StartOffset >= endOffset {
			keep--
		}
		return entries[:keep]
	})
}

// TruncateFromStart follows the log start offset forward (retention,
// DeleteRecords): entries starting at or before startOffset are dropped,
// except that the last of them, the epoch that covers startOffset, is kept
// with its start moved up to startOffset. An entry starting exactly at
// startOffset is thus kept as it is, and an offset before the first entry
// (or negative) changes nothing.
func (c *Cache) TruncateFromStart(startOffset int64) error {
	return c.update(func(entries []EpochEntry) []EpochEntry {
		covered := 0
		for covered < len(entries) && entries[covered].StartOffset <= startOffset {
			covered++
		}
		if covered == 0 {
			return entries
		}
		first := EpochEntry{Epoch: entries[covered-1].Epoch, StartOffset: startOffset}
		return append([]EpochEntry{first}, entries[covered:]...)
	})
}

// Clear empties the history, in memory and in the file (the log was
// truncated fully, or is being replaced).
func (c *Cache) Clear() error {
	return c.update(func([]EpochEntry) []EpochEntry { return []EpochEntry{} })
}
