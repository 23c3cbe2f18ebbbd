package storage

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// The sparse indexes of a segment, Kafka's .index and .timeindex.
//
//	.index      entries of 8 bytes:  relative offset uint32 | file position uint32
//	.timeindex  entries of 12 bytes: timestamp int64        | relative offset uint32
//
// Both are big endian and sorted by every field. An offset-index entry says
// "the batch whose base offset is baseOffset+rel starts at this position";
// one is added whenever index.interval.bytes of batches were written since
// the last. A time-index entry, added beside an offset-index entry when the
// segment's largest timestamp grew, says "every record in this segment up to
// and including the batch at baseOffset+rel has a timestamp <= ts". A lookup
// binary-searches and then scans the log forward from the position found.
//
// Fjord keeps the entries of a segment in memory (8 bytes per 4 KiB of log)
// and writes the files whole, atomically, when the segment rolls and at a
// clean shutdown. They are not written as batches arrive: after a crash the
// segments past the recovery point are scanned and their indexes rebuilt, so
// an index on disk is only ever trusted for a segment that was complete
// when it was written, and it is checked before it is trusted. The active
// segment's rebuilt indexes are not written by recovery either, only at its
// next seal, for the same reason (see recoverSegmentsFrom).

const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

type offsetEntry struct {
	rel uint32 // offset - segment base offset
	pos uint32 // position of the batch in the .log file
}

type timeEntry struct {
	ts  int64
	rel uint32
}

// offsetIndex is the in-memory form of a .index file.
// Invariant: entries strictly increase in rel and in pos.
type offsetIndex struct {
	entries []offsetEntry
}

// lookupEntry returns the last entry whose offset is <= rel, or the zero
// entry (the segment's start) when none is.
func (x *offsetIndex) lookupEntry(rel uint32) offsetEntry {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].rel > rel })
	if i == 0 {
		return offsetEntry{}
	}
	return x.entries[i-1]
}

func (x *offsetIndex) append(rel, pos uint32) {
	if n := len(x.entries); n > 0 && (x.entries[n-1].rel >= rel || x.entries[n-1].pos >= pos) {
		panic(fmt.Sprintf("offset index out of order: last=(%d,%d) new=(%d,%d)",
			x.entries[n-1].rel, x.entries[n-1].pos, rel, pos))
	}
	x.entries = append(x.entries, offsetEntry{rel, pos})
}

func (x *offsetIndex) last() (offsetEntry, bool) {
	if len(x.entries) == 0 {
		return offsetEntry{}, false
	}
	return x.entries[len(x.entries)-1], true
}

func (x *offsetIndex) encode() []byte {
	b := make([]byte, 0, len(x.entries)*offsetEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

// decodeOffsetIndex parses a .index file and checks it against what the
// segment must look like: entries increasing, positions inside the log,
// offsets below limitRel (the next segment's base, relative). A file that
// fails is rebuilt from the log by the caller.
func decodeOffsetIndex(b []byte, logSize int64, limitRel uint64) (offsetIndex, error) {
	if len(b)%offsetEntrySize != 0 {
		return offsetIndex{}, fmt.Errorf("index size %d is not a multiple of %d", len(b), offsetEntrySize)
	}
	x := offsetIndex{entries: make([]offsetEntry, 0, len(b)/offsetEntrySize)}
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])}
		if n := len(x.entries); n > 0 && (x.entries[n-1].rel >= e.rel || x.entries[n-1].pos >= e.pos) {
			return offsetIndex{}, fmt.Errorf("index entry %d out of order", n)
		}
		if int64(e.pos) >= logSize || uint64(e.rel) >= limitRel {
			return offsetIndex{}, fmt.Errorf("index entry (%d,%d) outside the segment (size %d)", e.rel, e.pos, logSize)
		}
		x.entries = append(x.entries, e)
	}
	return x, nil
}

// timeIndex is the in-memory form of a .timeindex file.
// Invariant: entries strictly increase in ts and in rel.
type timeIndex struct {
	entries []timeEntry
}

// lookupBefore returns the last entry with ts < target: every record up to
// and including the batch at its offset is older than target, so a search
// for the first record at or after target may start after that batch.
func (x *timeIndex) lookupBefore(target int64) (timeEntry, bool) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].ts >= target })
	if i == 0 {
		return timeEntry{}, false
	}
	return x.entries[i-1], true
}

// maybeAppend adds an entry if ts is larger than every entry's.
func (x *timeIndex) maybeAppend(ts int64, rel uint32) {
	if n := len(x.entries); n > 0 && (x.entries[n-1].ts >= ts || x.entries[n-1].rel >= rel) {
		return
	}
	x.entries = append(x.entries, timeEntry{ts, rel})
}

func (x *timeIndex) last() (timeEntry, bool) {
	if len(x.entries) == 0 {
		return timeEntry{}, false
	}
	return x.entries[len(x.entries)-1], true
}

func (x *timeIndex) encode() []byte {
	b := make([]byte, 0, len(x.entries)*timeEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

func decodeTimeIndex(b []byte, limitRel uint64) (timeIndex, error) {
	if len(b)%timeEntrySize != 0 {
		return timeIndex{}, fmt.Errorf("time index size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	x := timeIndex{entries: make([]timeEntry, 0, len(b)/timeEntrySize)}
	for i := 0; i < len(b); i += timeEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(b[i:])), binary.BigEndian.Uint32(b[i+8:])}
		if n := len(x.entries); n > 0 && (x.entries[n-1].ts >= e.ts || x.entries[n-1].rel >= e.rel) {
			return timeIndex{}, fmt.Errorf("time index entry %d out of order", n)
		}
		if uint64(e.rel) >= limitRel {
			return timeIndex{}, fmt.Errorf("time index entry offset %d outside the segment", e.rel)
		}
		x.entries = append(x.entries, e)
	}
	return x, nil
}

// lastEntryWithin returns the last entry at or before position maxPos
// whose relative offset is at most maxRel (the entries grow in both),
// or false when there is none.
func (x *offsetIndex) lastEntryWithin(maxPos int64, maxRel uint32) (offsetEntry, bool) {
	byPos := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].pos) > maxPos })
	byRel := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].rel > maxRel })
	i := min(byPos, byRel)
	if i == 0 {
		return offsetEntry{}, false
	}
	return x.entries[i-1], true
}
