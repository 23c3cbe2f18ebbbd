package storage

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/fjordmq/fjord/internal/vfs"
)

// The transaction index: a segment's aborted transactions (Kafka's
// TransactionIndex; DESIGN.md section 23).
//
//	<dir>/00000000000000368769.txnindex   one entry per aborted transaction
//	                                      whose marker is in the segment,
//	                                      in marker order
//
// Entry, 34 bytes, big-endian, no padding (Kafka's AbortedTxn):
//
//	version           int16   0
//	producerId        int64
//	firstOffset       int64   the transaction's first offset on the partition
//	lastOffset        int64   its abort marker's offset
//	lastStableOffset  int64   the earliest other transaction open below the
//	                          marker, or lastOffset+1: no transaction indexed
//	                          after this one began below it
//
// A missing file is an empty index (most segments never see an abort). A
// trailing part of an entry (a torn write) is ignored; an entry of another
// version, or whose marker is not above the previous one's, is damage.
//
// Durability: entries are written as markers are appended and fsynced with
// the segment (Flush, and the roll that seals it), so every entry below
// the newest producer-state snapshot is durable: a snapshot is written at
// a roll, after the sealed segment's sync, and at a clean close, after a
// flush. The producer-state rebuild that every open and truncation runs
// from that snapshot (producer.go) first drops the entries at or past its
// start and appends them again as it replays the markers, so the index is
// complete whatever a crash kept of the tail.

// AbortedTxn is one entry of a transaction index: an aborted transaction.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the abort marker's offset.
	LastOffset int64
	// LastStableOffset: see the file comment.
	LastStableOffset int64
}

const (
	txnIndexEntrySize = 34
	txnIndexVersion   = 0
)

func (s *segment) txnIndexPath() string { return segmentPath(s.dir, s.baseOffset, ".txnindex") }

// txnIndex is a segment's transaction index in memory, loaded on first
// use.
type txnIndex struct {
	mu      sync.Mutex
	loaded  bool
	entries []AbortedTxn
	// file is open for appends once one was made; dirty says it holds
	// entries not yet fsynced.
	file  vfs.File
	dirty bool
}

// loadLocked reads the file once. REQUIRES: t.mu held.
func (t *txnIndex) loadLocked(s *segment) error {
	if t.loaded {
		return nil
	}
	b, err := readWhole(s.fs, s.txnIndexPath())
	if vfs.IsNotExist(err) {
		b, err = nil, nil
	}
	if err != nil {
		return err
	}
	entries, err := decodeTxnIndex(b, s.baseOffset)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptTxnIndex, s.txnIndexPath(), err)
	}
	t.entries, t.loaded = entries, true
	return nil
}

// openLocked opens the file for writing, made if need be. REQUIRES: t.mu
// held.
func (t *txnIndex) openLocked(s *segment) error {
	if t.file != nil {
		return nil
	}
	f, err := s.fs.OpenReadWrite(s.txnIndexPath())
	if err != nil {
		return err
	}
	t.file = f
	return nil
}

// decodeTxnIndex reads a transaction index's entries; bytes past the last
// whole entry are ignored.
func decodeTxnIndex(b []byte, base int64) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for ; len(b) >= txnIndexEntrySize; b = b[txnIndexEntrySize:] {
		if v := int16(binary.BigEndian.Uint16(b)); v != txnIndexVersion {
			return nil, fmt.Errorf("entry %d: version %d", len(out), v)
		}
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if e.LastOffset < base || e.FirstOffset > e.LastOffset || (len(out) > 0 && e.LastOffset <= out[len(out)-1].LastOffset) {
			return nil, fmt.Errorf("entry %d: transaction %d..%d in a segment from %d, after one ending at %d",
				len(out), e.FirstOffset, e.LastOffset, base, lastMarker(out))
		}
		out = append(out, e)
	}
	return out, nil
}

func lastMarker(entries []AbortedTxn) int64 {
	if len(entries) == 0 {
		return -1
	}
	return entries[len(entries)-1].LastOffset
}

func appendTxnIndexEntry(dst []byte, e AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
}

// abortedTxns returns the segment's entries. The slice is shared: do not
// change it.
func (s *segment) abortedTxns() ([]AbortedTxn, error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loadLocked(s); err != nil {
		return nil, err
	}
	return t.entries, nil
}

// appendAbortedTxn adds an entry, written at once and fsynced with the
// segment. An entry whose marker is not above the last one's is already
// there (a replay over entries kept) and is skipped.
// REQUIRES: Log.mu held.
func (s *segment) appendAbortedTxn(e AbortedTxn) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loadLocked(s); err != nil {
		return err
	}
	if e.LastOffset <= lastMarker(t.entries) {
		return nil
	}
	if err := t.openLocked(s); err != nil {
		return err
	}
	if _, err := t.file.WriteAt(appendTxnIndexEntry(nil, e), int64(len(t.entries))*txnIndexEntrySize); err != nil {
		return err
	}
	t.entries = append(t.entries, e)
	t.dirty = true
	return nil
}

// syncTxnIndex fsyncs the entries written since the last sync, if any.
func (s *segment) syncTxnIndex() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty || t.file == nil {
		return nil
	}
	if err := t.file.Sync(); err != nil {
		return err
	}
	t.dirty = false
	return nil
}

// truncateTxnIndex drops the entries whose marker is at or past offset,
// durably: an entry that came back after a crash would have
// read_committed readers skip the batches of a producer whose transaction
// it no longer describes. The file is rewritten whole (it is small), or
// removed when nothing is left.
// REQUIRES: Log.mu held.
func (s *segment) truncateTxnIndex(offset int64) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := 0
	if offset <= s.baseOffset {
		// Every entry goes, so they are not read: nor trusted, which is
		// how a damaged index is rebuilt (producer.go).
		if t.file == nil {
			f, err := s.fs.Open(s.txnIndexPath())
			if vfs.IsNotExist(err) {
				t.entries, t.loaded = nil, true
				return nil
			}
			if err != nil {
				return err
			}
			f.Close()
		}
	} else {
		if err := t.loadLocked(s); err != nil {
			return err
		}
		keep = len(t.entries)
		for keep > 0 && t.entries[keep-1].LastOffset >= offset {
			keep--
		}
		if keep == len(t.entries) {
			return nil
		}
	}
	if err := t.openLocked(s); err != nil {
		return err
	}
	if err := t.file.Truncate(int64(keep) * txnIndexEntrySize); err != nil {
		return err
	}
	if err := t.file.Sync(); err != nil {
		return err
	}
	t.entries = t.entries[:keep:keep]
	t.loaded, t.dirty = true, false
	return nil
}

// closeTxnIndex closes the index file, if open.
func (s *segment) closeTxnIndex() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == nil {
		return nil
	}
	err := t.file.Close()
	t.file = nil
	return err
}
