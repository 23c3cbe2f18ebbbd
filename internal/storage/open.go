package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/storage/leaderepoch"
	"github.com/fjordmq/fjord/internal/vfs"
)

// LeaderEpochCheckpointFile is the per-partition leader epoch cache file.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// OpenOptions carries what the log manager knows about a log from its
// checkpoints.
type OpenOptions struct {
	Name string // "<topic>-<partition>"; defaults to the directory's name
	// Clean says the data directory was shut down cleanly: every segment
	// and index on disk is whole, and no scan is needed.
	Clean bool
	// RecoveryPoint is the offset below which the log was fsynced (from
	// the recovery-point checkpoint). After an unclean shutdown, segments
	// from the one holding it onwards are scanned and repaired.
	RecoveryPoint  int64
	LogStartOffset int64
	HighWatermark  int64
	Now            func() time.Time
	Logger         *slog.Logger
	// ObserveSync, when set, is told how long each Flush spent in fsync
	// (the node exports it as a histogram). It runs under the log's
	// flush lock: it must be quick.
	ObserveSync func(time.Duration)
	// OnFail, when set, is told of the log's first failure (an I/O error
	// that leaves it refusing writes with ErrStorage until a restart):
	// the operation that failed and its error. It runs once, on the
	// goroutine that met the error, which may hold the log's locks: it
	// must be quick, must not block and must not call the log.
	OnFail func(op string, err error)
}

// Open opens (or creates) the log in dir.
//
// After an unclean shutdown it scans every segment from the one holding the
// recovery point, validating each batch (length, magic, CRC, records, offset
// order), truncates at the first bad one and deletes the segments after it:
// what survives is exactly the longest valid prefix. The indexes of scanned
// segments are rebuilt; the active segment's are written only when it is
// sealed (see recoverSegmentsFrom). A clean open reads only the active
// segment's tail.
func Open(fsys vfs.FS, dir string, cfg Config, opts OpenOptions) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, name: opts.Name, now: opts.Now, log: opts.Logger, observeSync: opts.ObserveSync, onFail: opts.OnFail}
	if l.name == "" {
		l.name = filepath.Base(dir)
	}
	if l.now == nil {
		l.now = time.Now
	}
	// flush.ms counts from the open, as Kafka's lastFlushedTime starts
	// at the log's load: a new log's first records wait flush.ms like
	// any others instead of being flushed at the first check.
	l.lastFlushMs.Store(l.now().UnixMilli())
	if l.log == nil {
		l.log = slog.Default()
	}
	l.cfg.Store(&cfg)
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, err
	}
	segs, err := l.loadSegments()
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		s, err := createSegment(fsys, dir, max(opts.LogStartOffset, 0))
		if err != nil {
			return nil, err
		}
		if err := fsys.SyncDir(dir); err != nil {
			s.close()
			return nil, err
		}
		segs = append(segs, s)
	}
	l.segments.Store(&segs)

	var leo int64
	if opts.Clean {
		leo, err = l.openClean()
	} else {
		leo, err = l.recover(opts.RecoveryPoint)
	}
	if err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("open log %s: %w", l.name, err)
	}
	l.leo.Store(leo)
	l.recoveryPoint.Store(leo)

	segs = *l.segments.Load()
	start := min(max(opts.LogStartOffset, segs[0].baseOffset), leo)
	l.logStartOffset.Store(start)
	l.highWatermark.Store(min(max(opts.HighWatermark, start), leo))

	if l.epochs, err = leaderepoch.Open(fsys, filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("open log %s: %w", l.name, err)
	}
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		l.closeFiles()
		return nil, err
	}
	// The batches scanned by recovery carry their leader epochs; any the
	// cache lacks (its checkpoint write lost, or never made) are added
	// back from them, as Kafka's recovery does.
	for _, e := range l.recoveredEpochs {
		if latest, ok := l.epochs.LatestEpoch(); (!ok || e.Epoch > latest) && e.StartOffset < leo {
			if err := l.epochs.Assign(e.Epoch, e.StartOffset); err != nil {
				l.closeFiles()
				return nil, err
			}
		}
	}
	l.recoveredEpochs = nil
	if err := l.epochs.TruncateFromStart(start); err != nil {
		l.closeFiles()
		return nil, err
	}
	if l.snapshots, err = listSnapshots(fsys, dir); err == nil {
		err = l.loadProducerStateLocked()
	}
	if err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("open log %s: producer state: %w", l.name, err)
	}
	return l, nil
}

func (l *Log) closeFiles() {
	if p := l.segments.Load(); p != nil {
		for _, s := range *p {
			s.close()
		}
	}
}

// loadSegments lists the directory, finishes or discards what an
// interrupted operation left behind, and returns the segments in order.
//
//	*.cleaned, *.tmp  a cleaner or checkpoint write that never finished: removed
//	*.swap            a cleaned segment fully written but not yet swapped in:
//	                  the swap is completed (its indexes are rebuilt; its
//	                  transaction index is kept: see cleaner.go)
//	*.index, *.timeindex, *.txnindex without a .log: removed
func (l *Log) loadSegments() ([]*segment, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, n := range names {
		p := filepath.Join(l.dir, n)
		switch {
		case strings.HasSuffix(n, ".cleaned") || strings.HasSuffix(n, ".tmp"):
			if err := l.fs.Remove(p); err != nil {
				return nil, err
			}
			changed = true
		case strings.HasSuffix(n, ".log.swap"):
			final := strings.TrimSuffix(p, ".swap")
			if err := l.fs.Rename(p, final); err != nil {
				return nil, err
			}
			base := strings.TrimSuffix(final, ".log")
			for _, ext := range []string{".index", ".timeindex"} {
				if err := l.fs.Remove(base + ext); err != nil && !vfs.IsNotExist(err) {
					return nil, err
				}
			}
			changed = true
		case strings.HasSuffix(n, ".swap"):
			// An index written beside a swapped segment; rebuilt instead.
			if err := l.fs.Remove(p); err != nil {
				return nil, err
			}
			changed = true
		}
	}
	if changed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, err
		}
		if names, err = l.fs.List(l.dir); err != nil {
			return nil, err
		}
	}
	logs := map[int64]bool{}
	var segs []*segment
	for _, n := range names {
		if base, ok := parseSegmentName(n, ".log"); ok {
			info, err := l.fs.Stat(filepath.Join(l.dir, n))
			if err != nil {
				return nil, err
			}
			logs[base] = true
			s := openSegment(l.fs, l.dir, base, info.Size)
			s.indexInterval = l.cfg.Load().IndexIntervalBytes
			segs = append(segs, s)
		}
	}
	for _, n := range names {
		for _, ext := range []string{".index", ".timeindex", ".txnindex"} {
			if base, ok := parseSegmentName(n, ext); ok && !logs[base] {
				if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
					return nil, err
				}
			}
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].baseOffset < segs[j].baseOffset })
	return segs, nil
}

// noteRecoveredEpoch records where a batch scanned by recovery starts a
// higher leader epoch than the batches before it.
func (l *Log) noteRecoveredEpoch(h record.Header) {
	n := len(l.recoveredEpochs)
	if h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > l.recoveredEpochs[n-1].Epoch) {
		l.recoveredEpochs = append(l.recoveredEpochs, checkpoint.EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
	}
}

func parseSegmentName(name, ext string) (int64, bool) {
	if len(name) != 20+len(ext) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	return base, err == nil && base >= 0
}

// openClean opens after a clean shutdown: the active segment's indexes are
// loaded (and checked) and its tail after the last index entry is walked to
// find the log end offset. Inactive segments are not read at all until used.
func (l *Log) openClean() (int64, error) {
	next, err := l.openCleanActive()
	if err == errNeedsRecovery {
		return l.recoverSegmentsFrom(len(*l.segments.Load()) - 1)
	}
	return next, err
}

// errNeedsRecovery: the active segment is not whole although the shutdown
// was called clean; it is scanned and repaired instead of trusted.
var errNeedsRecovery = errors.New("active segment needs recovery")

func (l *Log) openCleanActive() (int64, error) {
	active := l.activeSegment()
	active.mu.Lock()
	defer active.mu.Unlock()
	if err := active.loadLocked(); err != nil {
		l.log.Warn("active segment unreadable after clean shutdown; recovering", "log", l.name, "err", err)
		return 0, errNeedsRecovery
	}
	f, err := active.handle()
	if err != nil {
		return 0, err
	}
	size := active.size.Load()
	var pos int64
	if e, ok := active.mu.offsets.last(); ok {
		pos = int64(e.pos)
	}
	sc := newScanner(f, pos, size, 64<<10)
	next := active.baseOffset
	first := true
	for {
		h, err := sc.header()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A clean shutdown never leaves a partial batch.
			l.log.Warn("active segment not whole after clean shutdown; recovering", "log", l.name, "err", err)
			return 0, errNeedsRecovery
		}
		if first && pos == 0 {
			active.mu.firstTimestamp = max(h.MaxTimestamp, 0)
		}
		first = false
		next = h.LastOffset() + 1
		active.mu.maxTimestamp = max(active.mu.maxTimestamp, h.MaxTimestamp)
		sc.advance(h)
	}
	active.mu.bytesSinceIndex = int(size - pos)
	if active.mu.firstTimestamp < 0 && size > 0 {
		if b, err := readAt(f, 0, record.HeaderSize); err == nil {
			if h, err := record.ParseHeader(b); err == nil {
				active.mu.firstTimestamp = max(h.MaxTimestamp, 0)
			}
		}
	}
	if size == 0 {
		if segs := *l.segments.Load(); len(segs) > 1 {
			// An empty active segment: its base is the log end offset.
			return active.baseOffset, nil
		}
	}
	return next, nil
}

func readAt(f vfs.File, pos int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if m, err := f.ReadAt(b, pos); m < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// recover scans from the segment holding recoveryPoint.
func (l *Log) recover(recoveryPoint int64) (int64, error) {
	segs := *l.segments.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > recoveryPoint }) - 1
	return l.recoverSegmentsFrom(max(i, 0))
}

// recoverSegmentsFrom rebuilds segments i.. and returns the log end
// offset. At the first damaged batch the segment is cut and every later
// segment deleted, so the log is the longest valid prefix.
func (l *Log) recoverSegmentsFrom(i int) (int64, error) {
	segs := *l.segments.Load()
	cfg := l.cfg.Load()
	next := segs[i].baseOffset
	for ; i < len(segs); i++ {
		s := segs[i]
		if s.baseOffset < next {
			// Overlaps its predecessor: only damage makes that.
			break
		}
		s.mu.Lock()
		n, cut, err := s.rebuildLocked(cfg.IndexIntervalBytes, true, l.noteRecoveredEpoch)
		// The segment that ends the log (the last, or the one cut here,
		// after which the rest is deleted) stays active: its rebuilt
		// indexes are left in memory, marked dirty, and written when it
		// is sealed, by a roll or a clean close, as an appended batch's
		// index entries are. Writing them here cost four fsyncs per log
		// (two atomic file writes, each a file and a directory sync), most
		// of an unclean start of 10,000 logs (BENCHMARKS.md).
		//
		// Until then the files on disk may be stale, torn or missing, and
		// nothing trusts them: this process has the segment loaded, so it
		// never reads them; a crash before the seal is an unclean start
		// again (the manager removes the clean-shutdown marker before it
		// opens any log), and every unclean start rebuilds the last
		// segment from the log, whatever its recovery point; and the
		// marker is written only after every log's Close, and so every
		// seal, has succeeded. Only a clean start loads an active
		// segment's index files, and then they were written by that seal.
		//
		// An inactive segment is never sealed again, so its indexes are
		// made current now, unless the files already hold exactly what
		// the rebuild found (the usual case: a roll wrote them).
		keepsActive := i+1 == len(segs) || cut > 0
		if err == nil && !keepsActive && !s.indexFilesMatchLocked() {
			err = s.writeIndexesLocked()
		}
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		// Recovered bytes may be only in the page cache (the process died,
		// the machine did not); make them durable before the recovery
		// point claims them. This fsync stays, unlike the index writes:
		//   - Skipping it and keeping the checkpointed recovery point is
		//     not safe. The checkpoint can claim more than is synced: a
		//     truncation lowers the recovery point in memory only, so a
		//     crash after a follower truncated and re-appended, before the
		//     next checkpoint, leaves unsynced bytes below it.
		//   - Skipping it and lowering the recovery point to the active
		//     segment's base (everything below it was synced by the roll
		//     that sealed it) is safe, but under flush.policy=ack the high
		//     watermark counts only the leader's recovery point, so an
		//     idle partition's recovered tail would stay invisible until
		//     the next produce flushed it.
		//   - A segment with nothing unsynced costs little to fsync (about
		//     50 us on this machine's ext4, against ~0.5 ms for each of
		//     the index writes' four), and one that has unsynced bytes
		//     must be synced before the recovery point may pass them.
		if f, err := s.handle(); err != nil {
			return 0, err
		} else if err := f.Sync(); err != nil {
			return 0, err
		}
		if i+1 < len(segs) {
			// An inactive segment reopens on its next read; keeping it
			// open would cost a descriptor per recovered segment.
			if err := s.close(); err != nil {
				return 0, err
			}
		}
		if s.size.Load() > 0 || i == 0 {
			next = n
		}
		if cut > 0 {
			l.log.Warn("truncated damaged log tail", "log", l.name, "segment", s.baseOffset,
				"bytes", cut, "next_offset", n)
			i++
			break
		}
	}
	if i < len(segs) {
		for _, s := range segs[i:] {
			l.log.Warn("deleting segment after damaged data", "log", l.name, "segment", s.baseOffset)
			if err := s.remove(); err != nil {
				return 0, err
			}
		}
		kept := segs[:i]
		l.segments.Store(&kept)
	}
	// What recovery saw must be durable before the recovery point claims
	// it, names as well as bytes: a segment created just before the
	// crash may have a name that was never synced (rollLocked leaves
	// that to the next Flush), and this process's Flush syncs the
	// directory only after it creates a segment itself. Index files kept
	// because they matched were read through the page cache too: a crash
	// between an atomic write's rename and its directory sync leaves the
	// new name visible but not durable, and a power cut after the next
	// clean shutdown could bring back the older file, which a clean start
	// would trust. The index writes this replaces synced the directory as
	// a side effect; this one sync per log does it on purpose (and makes
	// the deletions above durable).
	if err := l.fs.SyncDir(l.dir); err != nil {
		return 0, err
	}
	// The active segment measures segment.ms from its first batch.
	active := l.activeSegment()
	if active.size.Load() == 0 {
		if segs := *l.segments.Load(); len(segs) > 1 && active.baseOffset > next {
			next = active.baseOffset
		}
	}
	return next, nil
}
