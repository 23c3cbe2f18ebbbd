package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// A segment is one file of a partition's log, its two sparse indexes and
// its transaction index:
//
//	<dir>/00000000000000368769.log        batches, exactly as on the wire (v2)
//	<dir>/00000000000000368769.index      offset -> position (see index.go)
//	<dir>/00000000000000368769.timeindex  timestamp -> offset
//	<dir>/00000000000000368769.txnindex   aborted transactions (txnindex.go)
//
// The name is the base offset, zero-padded to 20 digits.
// Invariant: baseOffset <= every offset in this segment, and every offset in
// it is greater than every offset in the previous segment. Offsets may have
// gaps (compaction), never reversals.
//
// Concurrency: one appender at a time (the Log's mu), any number of readers.
// Readers never read at or past size, which the appender stores only after
// the batch bytes are written, so they never see a half-written batch.
// Closing and truncating the file happen only under the Log's segLock held
// exclusively, which readers hold shared while they read.
type segment struct {
	fs         vfs.FS
	dir        string
	baseOffset int64
	// indexInterval is index.interval.bytes for an index rebuilt lazily
	// (zero: the default).
	indexInterval int

	// size is the length of the whole batches in the log file.
	size atomic.Int64
	// truncations counts the times TruncateTo cut this segment, so that
	// the cleaner can tell a segment cut and refilled to the same size
	// from one that never changed while it cleaned it.
	truncations atomic.Int64

	fileMu  sync.Mutex
	file    vfs.File // opened lazily for segments loaded at startup
	removed bool     // REQUIRES: fileMu held. Set by remove: never reopen.
	shut    bool     // REQUIRES: fileMu held. Set when the log closes: never reopen.

	mu struct {
		sync.Mutex
		// loaded says whether the indexes below hold the segment's
		// entries; inactive segments load theirs on first lookup.
		loaded  bool
		offsets offsetIndex
		times   timeIndex
		// bytesSinceIndex counts batch bytes written since the last
		// offset-index entry.
		bytesSinceIndex int
		// maxTimestamp is the largest batch max timestamp seen (-1:
		// none); firstTimestamp the first batch's, which segment.ms
		// measures from (-1: empty segment).
		maxTimestamp   int64
		firstTimestamp int64
		// indexDirty: the in-memory indexes differ from the files (a
		// batch was indexed, or they were rebuilt, since the last write).
		indexDirty bool
	}

	// txn is the transaction index, with a lock of its own.
	txn txnIndex
}

func segmentPath(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

func (s *segment) logPath() string       { return segmentPath(s.dir, s.baseOffset, ".log") }
func (s *segment) indexPath() string     { return segmentPath(s.dir, s.baseOffset, ".index") }
func (s *segment) timeIndexPath() string { return segmentPath(s.dir, s.baseOffset, ".timeindex") }

// createSegment creates an empty segment file. The caller syncs the
// directory before anything in it is called durable.
func createSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{fs: fsys, dir: dir, baseOffset: base}
	f, err := fsys.Create(s.logPath())
	if err != nil {
		return nil, err
	}
	s.file = f
	s.mu.loaded = true
	s.mu.indexDirty = true
	s.mu.maxTimestamp = -1
	s.mu.firstTimestamp = -1
	// Stale index files from an earlier segment with this base offset
	// would be trusted after a clean restart; remove them.
	for _, p := range []string{s.indexPath(), s.timeIndexPath(), s.txnIndexPath()} {
		if err := fsys.Remove(p); err != nil && !vfs.IsNotExist(err) {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// openSegment makes a segment object for an existing file of known size
// without reading it.
func openSegment(fsys vfs.FS, dir string, base, size int64) *segment {
	s := &segment{fs: fsys, dir: dir, baseOffset: base}
	s.size.Store(size)
	s.mu.maxTimestamp = -1
	s.mu.firstTimestamp = -1
	return s
}

// handle returns the open log file, opening it on first use.
func (s *segment) handle() (vfs.File, error) {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.shut {
		return nil, ErrLogClosed
	}
	if s.removed {
		// Reopening by name would create an empty file, a stray segment
		// at the next start.
		return nil, fmt.Errorf("%w: %s", errSegmentRemoved, s.logPath())
	}
	if s.file == nil {
		f, err := s.fs.OpenReadWrite(s.logPath())
		if err != nil {
			return nil, err
		}
		s.file = f
	}
	return s.file, nil
}

func (s *segment) close() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

// shutdown closes the file for good: later uses fail with ErrLogClosed
// instead of reopening (and leaking) it.
func (s *segment) shutdown() error {
	err := errors.Join(s.close(), s.closeTxnIndex())
	s.fileMu.Lock()
	s.shut = true
	s.fileMu.Unlock()
	return err
}

// remove closes and deletes the segment's files.
// REQUIRES: Log.segLock held exclusively.
func (s *segment) remove() error {
	s.close()
	s.closeTxnIndex()
	s.fileMu.Lock()
	s.removed = true
	s.fileMu.Unlock()
	var first error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.txnIndexPath()} {
		if err := s.fs.Remove(p); err != nil && !vfs.IsNotExist(err) && first == nil {
			first = err
		}
	}
	return first
}

// relative converts an absolute offset of this segment.
func (s *segment) relative(offset int64) uint32 {
	rel := offset - s.baseOffset
	if rel < 0 || rel > 1<<32-1 {
		panic(fmt.Sprintf("offset %d outside segment %d", offset, s.baseOffset))
	}
	return uint32(rel)
}

// append writes batches (already validated, offsets assigned) at the end
// of the segment and indexes them.
// REQUIRES: Log.mu held.
func (s *segment) append(data []byte, hdrs []record.Header, indexInterval int) error {
	f, err := s.handle()
	if err != nil {
		return err
	}
	pos := s.size.Load()
	if _, err := f.WriteAt(data, pos); err != nil {
		return err
	}
	s.mu.Lock()
	for _, h := range hdrs {
		s.indexBatchLocked(h, pos, indexInterval)
		pos += int64(h.Size())
	}
	s.mu.Unlock()
	s.size.Store(pos)
	return nil
}

// indexBatchLocked accounts for one batch at pos, the way Kafka does: an
// index entry goes to the first batch after more than indexInterval bytes.
// REQUIRES: s.mu held; the indexes loaded.
func (s *segment) indexBatchLocked(h record.Header, pos int64, indexInterval int) {
	s.mu.indexDirty = true
	if s.mu.firstTimestamp < 0 {
		s.mu.firstTimestamp = max(h.MaxTimestamp, 0)
	}
	if h.MaxTimestamp > s.mu.maxTimestamp {
		s.mu.maxTimestamp = h.MaxTimestamp
	}
	if s.mu.bytesSinceIndex > indexInterval {
		rel := s.relative(h.BaseOffset)
		s.mu.offsets.append(rel, uint32(pos))
		s.mu.times.maybeAppend(s.mu.maxTimestamp, rel)
		s.mu.bytesSinceIndex = 0
	}
	s.mu.bytesSinceIndex += h.Size()
}

// scanner steps through the batches of the log file from pos, reading
// ahead in chunks so that stepping over small batches costs no syscall each.
type scanner struct {
	f        vfs.File
	pos, end int64 // next batch position; bytes past end are not read
	buf      []byte
	bufStart int64 // file position of buf[0]
}

func newScanner(f vfs.File, pos, end int64, chunk int) *scanner {
	// Never more read-ahead than there is to read: recovery and the
	// cleaner scan many small segments, and a 1 MiB buffer apiece was most
	// of their cost.
	chunk = int(min(int64(chunk), max(end-pos, 0)))
	return &scanner{f: f, pos: pos, end: end, buf: make([]byte, 0, chunk)}
}

// findReadAhead is findBatch's read-ahead from the index entry: the index
// interval (4 KiB by default) and then some, so the batch the entry points
// at and those up to the offset wanted usually come in one read.
const findReadAhead = 8 << 10

// findBufPool holds findBatch's read-ahead buffers (cap findReadAhead;
// the scanner reads no more than the segment holds past the position).
var findBufPool = sync.Pool{New: func() any { b := make([]byte, 0, findReadAhead); return &b }}

// errSegmentRemoved: the segment was deleted (retention, truncation,
// compaction) after the caller took it from the log's list.
var errSegmentRemoved = errors.New("segment removed")

// errTornBatch marks a batch that extends past the end of the segment: the
// tail of an interrupted write.
var errTornBatch = errors.New("batch extends past the end of the segment")

// fill makes [pos, pos+n) available in buf.
func (sc *scanner) fill(n int) ([]byte, error) {
	if sc.pos+int64(n) > sc.end {
		return nil, errTornBatch
	}
	if sc.pos >= sc.bufStart && sc.pos+int64(n) <= sc.bufStart+int64(len(sc.buf)) {
		off := sc.pos - sc.bufStart
		return sc.buf[off : off+int64(n)], nil
	}
	want := max(n, cap(sc.buf))
	if rest := sc.end - sc.pos; int64(want) > rest {
		want = int(rest)
	}
	if cap(sc.buf) < want {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:want]
	m, err := sc.f.ReadAt(sc.buf, sc.pos)
	sc.bufStart = sc.pos
	if m < n {
		sc.buf = sc.buf[:m]
		if err == nil || err == io.EOF {
			err = errTornBatch
		}
		return nil, err
	}
	sc.buf = sc.buf[:m]
	return sc.buf[:n], nil
}

// header returns the header of the batch at pos, or io.EOF at the end.
func (sc *scanner) header() (record.Header, error) {
	if sc.pos == sc.end {
		return record.Header{}, io.EOF
	}
	b, err := sc.fill(record.HeaderSize)
	if err != nil {
		return record.Header{}, err
	}
	return record.ParseHeader(b)
}

// batch returns the bytes of the batch at pos; valid until the next call.
func (sc *scanner) batch(h record.Header) ([]byte, error) { return sc.fill(h.Size()) }

func (sc *scanner) advance(h record.Header) { sc.pos += int64(h.Size()) }

// findBatch returns the position of the first batch whose last offset is
// >= offset, or -1 when every batch in the segment is below offset.
// REQUIRES: Log.segLock held (shared suffices).
func (s *segment) findBatch(offset int64) (int64, record.Header, error) {
	f, err := s.handle()
	if err != nil {
		return 0, record.Header{}, err
	}
	// Every fetch looks its offset up here, in each partition it reads:
	// a fresh read-ahead buffer per lookup made this the fetch path's
	// largest allocation for consumers at the log end.
	bp := findBufPool.Get().(*[]byte)
	defer findBufPool.Put(bp)
	for attempt := 0; ; attempt++ {
		var entry offsetEntry
		if offset > s.baseOffset {
			rel := offset - s.baseOffset
			if rel > 1<<32-1 {
				rel = 1<<32 - 1
			}
			if entry, err = s.indexLookup(uint32(rel)); err != nil {
				return 0, record.Header{}, err
			}
		}
		sc := &scanner{f: f, pos: int64(entry.pos), end: s.size.Load(), buf: (*bp)[:0]}
		for first := true; ; first = false {
			h, err := sc.header()
			if err == io.EOF {
				return -1, record.Header{}, nil
			}
			if first && entry.pos > 0 && (err != nil || h.BaseOffset != s.baseOffset+int64(entry.rel)) {
				// An index entry must point at the batch it names. One
				// that does not came from a damaged index file that
				// passed the structural checks: rebuild it from the log
				// once, rather than fail every read it covers.
				if attempt > 0 {
					return 0, record.Header{}, s.corrupt(sc.pos, fmt.Errorf("%w: index entry (%d,%d) does not match the log",
						record.ErrCorruptLength, entry.rel, entry.pos))
				}
				s.mu.Lock()
				err = s.rebuildIndexesLocked()
				s.mu.Unlock()
				if err != nil {
					return 0, record.Header{}, err
				}
				break
			}
			if err != nil {
				return 0, record.Header{}, s.corrupt(sc.pos, err)
			}
			if h.LastOffset() >= offset {
				return sc.pos, h, nil
			}
			sc.advance(h)
		}
	}
}

func (s *segment) corrupt(pos int64, err error) error {
	return fmt.Errorf("segment %s at position %d: %w", s.logPath(), pos, err)
}

// read returns whole batches from pos, at most maxBytes of them (but at
// least the first batch when minOne), stopping before the first batch whose
// last offset is >= maxOffset. It reads into buf if buf is large enough.
// REQUIRES: Log.segLock held (shared suffices).
func (s *segment) read(buf []byte, pos int64, first record.Header, maxBytes int, maxOffset int64, minOne bool) (data []byte, last int64, err error) {
	if first.LastOffset() >= maxOffset {
		return nil, -1, nil
	}
	n := s.size.Load() - pos
	if int64(maxBytes) < n {
		n = int64(maxBytes)
	}
	if n < int64(first.Size()) {
		if !minOne {
			return nil, -1, nil
		}
		n = int64(first.Size())
	}
	f, err := s.handle()
	if err != nil {
		return nil, -1, err
	}
	if int64(cap(buf)) >= n {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if m, err := f.ReadAt(buf, pos); m < len(buf) {
		if err == nil || err == io.EOF {
			err = errTornBatch
		}
		return nil, -1, s.corrupt(pos, err)
	}
	// Cut at the last whole batch below maxOffset.
	off, last := 0, int64(-1)
	for off+record.HeaderSize <= len(buf) {
		h, err := record.ParseHeader(buf[off:])
		if err != nil {
			return nil, -1, s.corrupt(pos+int64(off), err)
		}
		if h.LastOffset() >= maxOffset || off+h.Size() > len(buf) {
			break
		}
		off += h.Size()
		last = h.LastOffset()
	}
	return buf[:off], last, nil
}

// rangeEnd is read's bound without the bytes: the end of the whole
// batches from pos (whose first batch is first) that read would return.
// It walks batch headers from the last index entry inside the bounds, so
// a 1 MiB range costs an index search and a read or two of headers, not
// a read of the megabyte. last is the last offset of the last batch in
// the range (-1 for none); when the range ends just before an index
// entry the walk started at, it is that entry's offset less one, which a
// compaction gap there would make past the batch's true last offset.
// REQUIRES: Log.segLock held (shared suffices).
func (s *segment) rangeEnd(pos int64, first record.Header, maxBytes int, maxOffset int64, minOne bool) (end, last int64, err error) {
	if first.LastOffset() >= maxOffset {
		return pos, -1, nil
	}
	size := s.size.Load()
	firstEnd := pos + int64(first.Size())
	if firstEnd > size {
		return 0, -1, s.corrupt(pos, errTornBatch)
	}
	limit := min(size, pos+int64(maxBytes))
	if firstEnd > limit {
		if !minOne {
			return pos, -1, nil
		}
		return firstEnd, first.LastOffset(), nil
	}
	f, err := s.handle()
	if err != nil {
		return 0, -1, err
	}
	bp := findBufPool.Get().(*[]byte)
	defer findBufPool.Put(bp)
	// Every batch before an index entry ends below the entry's offset,
	// so with the entry's offset at most maxOffset the walk may start
	// there. An entry that does not name the batch it points at (a
	// damaged index) is ignored: the walk starts at pos instead.
	start, last := firstEnd, first.LastOffset()
	maxRel := min(max(maxOffset-s.baseOffset, 0), 1<<32-1)
	if e, ok, err := s.indexEntryWithin(limit, uint32(maxRel)); err != nil {
		return 0, -1, err
	} else if ok && int64(e.pos) > start {
		sc := &scanner{f: f, pos: int64(e.pos), end: limit, buf: (*bp)[:0]}
		if h, err := sc.header(); err == nil && h.BaseOffset == s.baseOffset+int64(e.rel) {
			start, last = int64(e.pos), h.BaseOffset-1
		}
	}
	sc := &scanner{f: f, pos: start, end: limit, buf: (*bp)[:0]}
	for {
		h, err := sc.header()
		switch {
		case err == io.EOF || errors.Is(err, errTornBatch):
			return sc.pos, last, nil // the byte limit cuts the next header
		case err != nil:
			return 0, -1, s.corrupt(sc.pos, err)
		case h.LastOffset() >= maxOffset || sc.pos+int64(h.Size()) > limit:
			return sc.pos, last, nil
		}
		sc.advance(h)
		last = h.LastOffset()
	}
}

// fileRange returns read's batches as a FileRange when they come to at
// least minBytes and the file is an operating-system file; ok is false
// when they should be read instead.
// REQUIRES: Log.segLock held (shared suffices): it keeps the descriptor
// open while it is duplicated.
func (s *segment) fileRange(pos int64, first record.Header, maxBytes int, maxOffset int64, minBytes int) (r FileRange, last int64, ok bool, err error) {
	end, last, err := s.rangeEnd(pos, first, maxBytes, maxOffset, true)
	if err != nil || end-pos < int64(max(minBytes, 1)) {
		return FileRange{}, -1, false, err
	}
	f, err := s.handle()
	if err != nil {
		return FileRange{}, -1, false, err
	}
	dup, err := vfs.DupOSFile(f)
	if errors.Is(err, vfs.ErrNotOSFile) {
		return FileRange{}, -1, false, nil
	}
	if err != nil {
		return FileRange{}, -1, false, fmt.Errorf("segment %s: %w", s.logPath(), err)
	}
	return FileRange{File: dup, Pos: pos, Size: int(end - pos)}, last, true, nil
}

// indexEntryWithin is offsetIndex.lastEntryWithin, loading the index
// first if the segment was opened lazily.
func (s *segment) indexEntryWithin(maxPos int64, maxRel uint32) (offsetEntry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return offsetEntry{}, false, err
	}
	e, ok := s.mu.offsets.lastEntryWithin(maxPos, maxRel)
	return e, ok, nil
}

// indexLookup returns the offset index's position for rel, loading (or
// rebuilding) the index first if the segment was opened lazily. The lookup
// runs under s.mu: the appender grows the entries slice concurrently, so
// handing the index out and searching it unlocked would race with it.
func (s *segment) indexLookup(rel uint32) (offsetEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return offsetEntry{}, err
	}
	return s.mu.offsets.lookupEntry(rel), nil
}

// loadLocked reads the index files of a segment opened at startup. They
// are trusted only when they pass the checks of decode*; otherwise the
// segment is scanned and they are rebuilt. The last offset bound used for
// the checks is the 32-bit range: the next segment's base is not known here
// and positions are checked against the file size.
// REQUIRES: s.mu held.
func (s *segment) loadLocked() error {
	if s.mu.loaded {
		return nil
	}
	size := s.size.Load()
	ob, oerr := readWhole(s.fs, s.indexPath())
	tb, terr := readWhole(s.fs, s.timeIndexPath())
	if oerr == nil && terr == nil {
		offs, oerr := decodeOffsetIndex(ob, size, 1<<32)
		times, terr := decodeTimeIndex(tb, 1<<32)
		if oerr == nil && terr == nil && (size == 0 || len(times.entries) > 0) {
			s.mu.offsets, s.mu.times = offs, times
			if e, ok := times.last(); ok {
				s.mu.maxTimestamp = e.ts
			}
			s.mu.loaded = true
			return nil
		}
	}
	// Missing or damaged: rebuild from the log, checking every batch.
	return s.rebuildIndexesLocked()
}

// rebuildIndexesLocked rebuilds the indexes from the log and writes them.
// REQUIRES: s.mu held.
func (s *segment) rebuildIndexesLocked() error {
	interval := s.indexInterval
	if interval == 0 {
		interval = DefaultConfig().IndexIntervalBytes
	}
	if _, _, err := s.rebuildLocked(interval, false, nil); err != nil {
		return err
	}
	return s.writeIndexesLocked()
}

// rebuildLocked scans the whole segment, validating every batch, and
// rebuilds the indexes. With truncate, it cuts the file at the first bad
// batch and reports what it cut; without, a bad batch is an error (a
// segment below the recovery point must not be damaged).
// It returns the offset after the last good batch (baseOffset if none).
// REQUIRES: s.mu held.
// onBatch, if not nil, sees each good batch's header in order.
func (s *segment) rebuildLocked(indexInterval int, truncate bool, onBatch func(record.Header)) (nextOffset int64, truncated int64, err error) {
	f, err := s.handle()
	if err != nil {
		return 0, 0, err
	}
	fileSize, err := f.Size()
	if err != nil {
		return 0, 0, err
	}
	s.mu.offsets = offsetIndex{}
	s.mu.times = timeIndex{}
	s.mu.indexDirty = true
	s.mu.bytesSinceIndex = 0
	s.mu.maxTimestamp, s.mu.firstTimestamp = -1, -1
	s.mu.loaded = true
	nextOffset = s.baseOffset
	sc := newScanner(f, 0, fileSize, 1<<20)
	var lastMaxTsRel uint32
	for {
		h, err := sc.header()
		if err == io.EOF {
			break
		}
		var b []byte
		if err == nil {
			b, err = sc.batch(h)
		}
		if err == nil {
			_, err = record.Validate(b, record.ValidateOptions{})
		}
		// LastOffset < BaseOffset: the offsets overflow int64, which only
		// a damaged base offset (outside the CRC) makes.
		if err == nil && (h.BaseOffset < nextOffset || h.LastOffset() < h.BaseOffset || h.LastOffset()-s.baseOffset > 1<<32-1) {
			err = fmt.Errorf("%w: batch offsets %d..%d out of order (expected >= %d)",
				record.ErrCorruptLength, h.BaseOffset, h.LastOffset(), nextOffset)
		}
		if err != nil {
			// An unknown codec under a valid CRC is damage too: no
			// writer of this log makes one, and refusing to open would
			// take the whole partition down for one bad batch.
			damaged := record.IsCorruption(err) || errors.Is(err, errTornBatch) || errors.Is(err, record.ErrUnsupportedCodec)
			if !truncate || !damaged {
				return 0, 0, s.corrupt(sc.pos, err)
			}
			if err := f.Truncate(sc.pos); err != nil {
				return 0, 0, err
			}
			if err := f.Sync(); err != nil {
				return 0, 0, err
			}
			truncated = fileSize - sc.pos
			break
		}
		if h.MaxTimestamp > s.mu.maxTimestamp {
			lastMaxTsRel = s.relative(h.BaseOffset)
		}
		if onBatch != nil {
			onBatch(h)
		}
		s.indexBatchLocked(h, sc.pos, indexInterval)
		nextOffset = h.LastOffset() + 1
		sc.advance(h)
	}
	// A final time-index entry, so the last entry is the segment's
	// largest timestamp (retention reads it without scanning).
	if s.mu.maxTimestamp >= 0 {
		s.mu.times.maybeAppend(s.mu.maxTimestamp, lastMaxTsRel)
	}
	s.size.Store(sc.pos)
	return nextOffset, truncated, nil
}

// writeIndexesLocked writes both index files atomically, so a crash leaves
// the old file, the new one, or none: never a torn one.
// REQUIRES: s.mu held.
func (s *segment) writeIndexesLocked() error {
	if err := checkpoint.WriteFileAtomic(s.fs, s.indexPath(), s.mu.offsets.encode()); err != nil {
		return err
	}
	if err := checkpoint.WriteFileAtomic(s.fs, s.timeIndexPath(), s.mu.times.encode()); err != nil {
		return err
	}
	s.mu.indexDirty = false
	return nil
}

// indexFilesMatchLocked reports whether both index files exist and hold
// exactly the in-memory entries, so that writing them would change nothing;
// if they do, the indexes are no longer dirty.
// REQUIRES: s.mu held; the indexes loaded.
func (s *segment) indexFilesMatchLocked() bool {
	ob, err := readWhole(s.fs, s.indexPath())
	if err != nil || !bytes.Equal(ob, s.mu.offsets.encode()) {
		return false
	}
	tb, err := readWhole(s.fs, s.timeIndexPath())
	if err != nil || !bytes.Equal(tb, s.mu.times.encode()) {
		return false
	}
	s.mu.indexDirty = false
	return true
}

// seal is called when the segment stops being the active one (roll, clean
// shutdown): it adds the final time-index entry and writes the indexes.
// REQUIRES: Log.mu held.
func (s *segment) seal(lastBatchBase int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.loaded || !s.mu.indexDirty {
		// Untouched since its indexes were loaded or last written: the
		// files are current, and rewriting them (four fsyncs) for each
		// of thousands of idle logs made a clean shutdown take seconds.
		return nil
	}
	if s.mu.maxTimestamp >= 0 && lastBatchBase >= s.baseOffset {
		s.mu.times.maybeAppend(s.mu.maxTimestamp, s.relative(lastBatchBase))
	}
	// Indexes rebuilt by an unclean open are dirty, but for a partition
	// that took no batch since its files were last written (most of a
	// broker's, after a crash) the files already hold them: two small
	// reads instead of four fsyncs, which made the clean close after an
	// unclean start of 10,000 idle logs take 11 s. A file that matches
	// is durable: recovery synced the directory after it saw the files,
	// and every later write is atomic and synced.
	if s.indexFilesMatchLocked() {
		return nil
	}
	return s.writeIndexesLocked()
}

// maxTimestamp returns the largest timestamp in the segment (-1 if none),
// loading the indexes of a lazily opened segment.
func (s *segment) maxTimestamp() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return 0, err
	}
	return s.mu.maxTimestamp, nil
}

func (s *segment) firstTimestamp() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.firstTimestamp
}

func readWhole(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if m, err := f.ReadAt(b, 0); m < len(b) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// offsetForTimestamp finds the first record at or after start (and below
// end) whose timestamp is >= ts.
// REQUIRES: Log.segLock held (shared suffices).
func (s *segment) offsetForTimestamp(ts, start, end int64) (offset, timestamp int64, found bool, err error) {
	s.mu.Lock()
	if err := s.loadLocked(); err != nil {
		s.mu.Unlock()
		return 0, 0, false, err
	}
	e, ok := s.mu.times.lookupBefore(ts)
	s.mu.Unlock()
	var pos int64
	if ok {
		// findBatch checks the offset index against the log (and
		// rebuilds it if they disagree) before trusting a position.
		if pos, _, err = s.findBatch(s.baseOffset + int64(e.rel)); err != nil {
			return 0, 0, false, err
		}
		if pos < 0 {
			return 0, 0, false, nil
		}
	}
	f, err := s.handle()
	if err != nil {
		return 0, 0, false, err
	}
	sc := newScanner(f, pos, s.size.Load(), 64<<10)
	for {
		h, err := sc.header()
		if err == io.EOF {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, s.corrupt(sc.pos, err)
		}
		if h.BaseOffset >= end {
			return 0, 0, false, nil
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= start {
			b, err := sc.batch(h)
			if err != nil {
				return 0, 0, false, s.corrupt(sc.pos, err)
			}
			err = record.ForEachRecord(b, func(r *record.Record) error {
				if r.Offset >= start && r.Offset < end && r.Timestamp >= ts {
					offset, timestamp, found = r.Offset, r.Timestamp, true
					return errStopIteration
				}
				return nil
			})
			if err != nil && err != errStopIteration {
				return 0, 0, false, s.corrupt(sc.pos, err)
			}
			if found {
				return offset, timestamp, true, nil
			}
		}
		sc.advance(h)
	}
}

var errStopIteration = errors.New("stop")
