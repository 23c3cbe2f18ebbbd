package producerstate

// Snapshot files.
//
// A snapshot holds the state after every batch below an offset, and is
// named after it: "<offset, 20 digits>.snapshot" beside the segments. The
// log writes one at each segment roll (the new segment's base offset) and
// at a clean close (the log end offset); a reopened log loads the newest
// one at or below its log end offset and replays the batch headers after
// it.
//
// Format, version 3. Integers are big-endian; there is no padding.
//
//	magic          4 bytes  "FJPS"
//	version        uint16   3 (1: no coordinatorEpoch, no txnFirstOffset;
//	                        2: no decided transactions)
//	offset         int64    the offset in the file name
//	count          uint32   number of producers
//	count times, producer ids ascending:
//	  producerId       int64
//	  epoch            int16
//	  lastTimestamp    int64
//	  coordinatorEpoch int32    (version 2) the last marker's, -1: none
//	  txnFirstOffset   int64    (version 2) the open transaction's first offset, -1: none
//	  numBatches       uint8    0..5
//	  numBatches times, oldest first:
//	    firstSeq       int32
//	    lastSeq        int32
//	    firstOffset    int64
//	    lastOffset     int64
//	    maxTimestamp   int64
//	numDecided     uint32   (version 3) decided transactions that still
//	                        hold the last stable offset (txn.go), in
//	                        marker order:
//	  producerId       int64
//	  firstOffset      int64
//	  lastOffset       int64    the marker's
//	crc            uint32   CRC-32C (Castagnoli) of every byte before it
//
// Version 1 files (before transactions) are read as producers with no
// marker and no transaction open, version 2 files as holding no decided
// transaction. Without the decided ones, a reopened log's last stable
// offset would pass a transaction whose marker is not yet replicated. A file that breaks any of this (bad
// CRC, unknown magic or version, a count that the bytes do not hold,
// producer ids out of order, offsets out of order or at or past the
// snapshot's offset, an open transaction's first offset not below it,
// bytes left over) is
// ErrCorruptSnapshot; the log then falls back to an older snapshot or to
// the start of the log. Decoding never panics and never allocates more
// than the file's size warrants.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// ErrCorruptSnapshot is wrapped by every DecodeSnapshot error.
var ErrCorruptSnapshot = errors.New("corrupt producer state snapshot")

// SnapshotSuffix ends a snapshot file's name.
const SnapshotSuffix = ".snapshot"

const (
	snapshotMagic   = "FJPS"
	snapshotVersion = 3
	headerSize      = 4 + 2 + 8 + 4
	// entryHeaderSizeV1 is a version 1 producer's fixed part; version 2
	// adds the coordinator epoch and the open transaction's first offset.
	entryHeaderSizeV1 = 8 + 2 + 8 + 1
	entryHeaderSizeV2 = entryHeaderSizeV1 + 4 + 8
	batchSize         = 4 + 4 + 8 + 8 + 8
	decidedSize       = 8 + 8 + 8
	crcSize           = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotFileName names the snapshot valid at offset.
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, SnapshotSuffix)
}

// ParseSnapshotFileName returns the offset of a snapshot file name.
func ParseSnapshotFileName(name string) (int64, bool) {
	if len(name) != 20+len(SnapshotSuffix) || !strings.HasSuffix(name, SnapshotSuffix) {
		return 0, false
	}
	off, err := strconv.ParseInt(name[:20], 10, 64)
	return off, err == nil && off >= 0
}

// AppendSnapshot appends the snapshot of s at offset to dst.
func (s *State) AppendSnapshot(dst []byte, offset int64) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.producers)))
	for _, pid := range s.sortedIDs() {
		e := s.producers[pid]
		dst = binary.BigEndian.AppendUint64(dst, uint64(pid))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.lastTimestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.coordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.txnFirstOffset))
		dst = append(dst, e.n)
		for _, b := range e.batches[:e.n] {
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.FirstSeq))
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.LastSeq))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.FirstOffset))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.LastOffset))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.MaxTimestamp))
		}
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.decided)))
	for _, ct := range s.decided {
		dst = binary.BigEndian.AppendUint64(dst, uint64(ct.ProducerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(ct.FirstOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(ct.LastOffset))
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeSnapshot decodes a snapshot file that must be valid at offset.
// Its producers count as seen at nowMs (see RemoveExpired).
func DecodeSnapshot(b []byte, offset, nowMs int64) (*State, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < headerSize+crcSize {
		return nil, bad("%d bytes, shorter than a header", len(b))
	}
	body := b[:len(b)-crcSize]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return nil, bad("crc %#08x, computed %#08x", want, got)
	}
	if string(body[:4]) != snapshotMagic {
		return nil, bad("magic %q", body[:4])
	}
	version := binary.BigEndian.Uint16(body[4:])
	entryHeaderSize := entryHeaderSizeV2
	switch version {
	case 1:
		entryHeaderSize = entryHeaderSizeV1
	case 2, snapshotVersion:
	default:
		return nil, bad("unknown version %d", version)
	}
	if o := int64(binary.BigEndian.Uint64(body[6:])); o != offset {
		return nil, bad("holds the state at offset %d, named for %d", o, offset)
	}
	count := binary.BigEndian.Uint32(body[14:])
	rest := body[headerSize:]
	if uint64(count)*uint64(entryHeaderSize) > uint64(len(rest)) {
		return nil, bad("%d producers in %d bytes", count, len(rest))
	}
	s := &State{producers: make(map[int64]*entry, count), ongoing: map[int64]int64{}}
	prevPID := int64(-1)
	for i := range count {
		if len(rest) < entryHeaderSize {
			return nil, bad("producer %d of %d cut short", i, count)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := &entry{
			epoch:            int16(binary.BigEndian.Uint16(rest[8:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(rest[10:])),
			coordinatorEpoch: -1,
			txnFirstOffset:   -1,
			lastSeenMs:       nowMs,
		}
		if version >= 2 {
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(rest[18:]))
			e.txnFirstOffset = int64(binary.BigEndian.Uint64(rest[22:]))
			if e.txnFirstOffset < -1 || e.txnFirstOffset >= offset {
				return nil, bad("producer %d: open transaction from offset %d, snapshot at %d", pid, e.txnFirstOffset, offset)
			}
		}
		e.n = rest[entryHeaderSize-1]
		rest = rest[entryHeaderSize:]
		if pid <= prevPID {
			return nil, bad("producer id %d after %d", pid, prevPID)
		}
		prevPID = pid
		if int(e.n) > MaxBatches || len(rest) < int(e.n)*batchSize {
			return nil, bad("producer %d: %d batches in %d bytes", pid, e.n, len(rest))
		}
		prevLast := int64(-1)
		for k := range int(e.n) {
			bt := Batch{
				FirstSeq:     int32(binary.BigEndian.Uint32(rest)),
				LastSeq:      int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset:  int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:   int64(binary.BigEndian.Uint64(rest[16:])),
				MaxTimestamp: int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[batchSize:]
			if bt.FirstOffset <= prevLast || bt.LastOffset < bt.FirstOffset || bt.LastOffset >= offset {
				return nil, bad("producer %d: batch offsets %d..%d (previous ends at %d, snapshot at %d)",
					pid, bt.FirstOffset, bt.LastOffset, prevLast, offset)
			}
			prevLast = bt.LastOffset
			e.batches[k] = bt
		}
		s.producers[pid] = e
		if e.txnFirstOffset >= 0 {
			s.ongoing[pid] = e.txnFirstOffset
		}
	}
	if version >= 3 {
		if len(rest) < 4 {
			return nil, bad("no decided transactions count")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n)*decidedSize > uint64(len(rest)) {
			return nil, bad("%d decided transactions in %d bytes", n, len(rest))
		}
		prevMarker := int64(-1)
		for range n {
			ct := CompletedTxn{
				ProducerID:  int64(binary.BigEndian.Uint64(rest)),
				FirstOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(rest[16:])),
			}
			rest = rest[decidedSize:]
			if ct.ProducerID < 0 || ct.FirstOffset < 0 || ct.LastOffset <= ct.FirstOffset || ct.LastOffset <= prevMarker || ct.LastOffset >= offset {
				return nil, bad("producer %d: decided transaction %d..%d (previous marker at %d, snapshot at %d)",
					ct.ProducerID, ct.FirstOffset, ct.LastOffset, prevMarker, offset)
			}
			prevMarker = ct.LastOffset
			s.decided = append(s.decided, ct)
		}
	}
	if len(rest) != 0 {
		return nil, bad("%d bytes after the last producer", len(rest))
	}
	return s, nil
}
