package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/storage/leaderepoch"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Log is one partition's log: an ordered list of segments, the last of
// which (the active segment) takes appends.
//
// Offsets, in Kafka's words:
//
//	LogStartOffset <= HighWatermark <= LogEndOffset
//	RecoveryPoint <= LogEndOffset: everything below it is fsynced.
//
// Threads: one appender at a time (Append, AppendAsFollower, truncation,
// retention and cleaner swaps serialize on mu); any number of readers
// (Read, OffsetForTimestamp), which take no lock but segLock shared while
// they touch files; any number of Flush callers, which serialize on flushMu
// and share fsyncs. Lock order: mu -> segLock, flushMu -> segLock.
type Log struct {
	fs   vfs.FS
	dir  string
	name string // "<topic>-<partition>", for errors and log lines
	now  func() time.Time
	// observeSync is OpenOptions.ObserveSync, or nil.
	observeSync func(time.Duration)
	// onFail is OpenOptions.OnFail, or nil.
	onFail func(op string, err error)
	log    *slog.Logger

	cfg    atomic.Pointer[Config]
	epochs *leaderepoch.Cache
	// recoveredEpochs: the leader epoch starts seen by recovery, applied
	// to epochs once it is open. Used only during Open.
	recoveredEpochs []checkpoint.EpochEntry

	// Published state, read without mu. The appender stores leo after the
	// segment's size, so a reader that loads leo first never finds an
	// offset below it missing from the segments.
	segments       atomic.Pointer[[]*segment] // sorted by base offset; last is active
	leo            atomic.Int64
	logStartOffset atomic.Int64
	highWatermark  atomic.Int64
	recoveryPoint  atomic.Int64
	failed         atomic.Bool
	// dirDirty says a segment file was created since the directory was
	// last synced; the next Flush syncs it, or an acknowledged batch in a
	// new segment could lose its file name at a crash.
	dirDirty atomic.Bool
	// lastFlushMs is when Flush last completed, for flush.ms.
	lastFlushMs atomic.Int64

	mu      sync.Mutex   // the appender lock
	segLock sync.RWMutex // exclusive: removing, truncating, closing files
	flushMu sync.Mutex   // one fsync round at a time; waiters share the next
	// cleanMu: one compaction pass at a time. Passes write the same
	// "<base>.log.cleaned" names, so two at once swapped in each other's
	// half-written copies. Taken before mu.
	cleanMu sync.Mutex
	// closed: Close or DeleteLog ran; every call but Close then fails
	// with ErrLogClosed.
	closed atomic.Bool

	// Idempotent-producer state (producer.go). REQUIRES: mu held.
	producers *producerstate.State
	// unstable is the producer state's unstable transactions as last
	// published (txn.go), for LastStableOffset to read without mu;
	// unstableGen is the producer state generation it is of (REQUIRES:
	// mu held).
	unstable    atomic.Pointer[[]producerstate.UnstableTxn]
	unstableGen uint64
	// snapshots: offsets of the producer state snapshot files, ascending.
	// REQUIRES: mu held.
	snapshots []int64
}

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset   int64 // offset of the first record appended
	LastOffset    int64 // offset of the last
	LogAppendTime int64 // -1 unless the log stamps LogAppendTime
	MaxTimestamp  int64
	NumBatches    int // batches written; 0 for a duplicate
	// Duplicate: the batches were a retry of ones an idempotent producer
	// already wrote. Nothing was written; FirstOffset, LastOffset and
	// MaxTimestamp (and LogAppendTime, under LogAppendTime) are those of
	// the batches first written, as Kafka answers a retried produce.
	Duplicate bool
	// Keyed: a leader's append (Append, AppendVerified,
	// AppendAsCoordinator) wrote at least one record with a non-null
	// key. False for a duplicate (it wrote nothing) and for a follower's
	// append (the leader saw those records first). The replica manager
	// reports the first one so the topic is marked as having keyed
	// records (DESIGN.md section 24).
	Keyed bool
}

func (l *Log) Config() Config { return *l.cfg.Load() }

// SetConfig replaces the log's config; it applies to the next append,
// roll, flush and retention pass.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.cfg.Store(&cfg)
	return nil
}

func (l *Log) Dir() string                      { return l.dir }
func (l *Log) LogEndOffset() int64              { return l.leo.Load() }
func (l *Log) LogStartOffset() int64            { return l.logStartOffset.Load() }
func (l *Log) HighWatermark() int64             { return l.highWatermark.Load() }
func (l *Log) RecoveryPoint() int64             { return l.recoveryPoint.Load() }
func (l *Log) LeaderEpochs() *leaderepoch.Cache { return l.epochs }

// SetHighWatermark moves the high watermark, clamped to
// [LogStartOffset, LogEndOffset]. The replica layer owns its value.
func (l *Log) SetHighWatermark(hw int64) {
	hw = min(max(hw, l.logStartOffset.Load()), l.leo.Load())
	l.highWatermark.Store(hw)
}

// Size returns the bytes of all segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range *l.segments.Load() {
		n += s.size.Load()
	}
	return n
}

// NumSegments returns the number of segments.
func (l *Log) NumSegments() int { return len(*l.segments.Load()) }

func (l *Log) checkWritable() error {
	if l.closed.Load() {
		return ErrLogClosed
	}
	if l.failed.Load() {
		return fmt.Errorf("%w: %s", ErrStorage, l.name)
	}
	return nil
}

// Failed reports whether an I/O error failed the log (ErrStorage): it
// refuses writes until the process restarts and recovers it.
func (l *Log) Failed() bool { return l.failed.Load() }

// fail marks the log failed after an I/O error that may have left files
// in an unknown state; it refuses writes from then on. The first failure
// is logged and told to OpenOptions.OnFail.
func (l *Log) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if !l.failed.Swap(true) {
		l.log.Error("log failed; refusing writes until restart", "log", l.name, "op", op, "err", err)
		if l.onFail != nil {
			l.onFail(op, err)
		}
	}
	return fmt.Errorf("%w: %s: %s: %v", ErrStorage, l.name, op, err)
}

// Append appends batches produced by a client: data holds one or more
// whole v2 batches. Every batch is validated before any is written, so a
// bad one leaves the log unchanged. The log assigns offsets from the log
// end offset and stamps leaderEpoch into each batch, rewriting data in
// place. The batches are not durable until Flush covers them.
//
// Batches from idempotent producers are checked against the producer state
// first (producerstate.State.Check): a retry of batches already written
// writes nothing and answers Duplicate with their offsets; a sequence gap
// or a fenced epoch is ErrOutOfOrderSequence or ErrInvalidProducerEpoch,
// and then no batch of data is written.
//
// Append does not verify transactions: a transactional batch opens its
// producer's transaction here unasked. The produce path uses
// AppendVerified (txn.go) for a request with a transactional id; Append
// stays for tests and for writes that need no coordinator's word.
func (l *Log) Append(data []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.appendChecked(data, leaderEpoch, l.producers.Check)
}

// AppendAsCoordinator appends batches a coordinator of this node wrote
// for a producer: the group coordinator's transactional offset commits
// (TxnOffsetCommit), which carry the producer's id and epoch so that the
// transaction's marker ends them, but whose sequence numbers are not the
// producer's (it never writes here itself). As Kafka's appends of origin
// COORDINATOR, they are checked for the producer's epoch and for a
// transaction left open by a non-transactional batch, never for sequence
// or duplicates (producerstate.State.CheckCoordinator). With verify, a
// batch that opens the producer's transaction needs guard, as
// AppendVerified's do.
func (l *Log) AppendAsCoordinator(data []byte, leaderEpoch int32, verify bool, guard uint64) (AppendInfo, error) {
	return l.appendChecked(data, leaderEpoch, func(hdrs []record.Header) (producerstate.Duplicate, bool, error) {
		return producerstate.Duplicate{}, false, l.producers.CheckCoordinator(hdrs, verify, guard)
	})
}

// appendChecked is Append with check in place of the producer state's
// Check; l.mu is held across check.
func (l *Log) appendChecked(data []byte, leaderEpoch int32, check func([]record.Header) (producerstate.Duplicate, bool, error)) (AppendInfo, error) {
	cfg := l.cfg.Load()
	hdrs, keyed, err := validateBatches(data, cfg, true)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	if dup, isDup, err := check(hdrs); err != nil {
		return AppendInfo{}, fmt.Errorf("%w (log %s)", err, l.name)
	} else if isDup {
		info := AppendInfo{FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset, LogAppendTime: -1,
			MaxTimestamp: dup.MaxTimestamp, Duplicate: true}
		if cfg.LogAppendTime {
			info.LogAppendTime = dup.MaxTimestamp // the stamp the batch was written with
		}
		return info, nil
	}
	info := AppendInfo{FirstOffset: l.leo.Load(), LogAppendTime: -1, MaxTimestamp: -1, NumBatches: len(hdrs), Keyed: keyed}
	if cfg.LogAppendTime {
		info.LogAppendTime = l.now().UnixMilli()
	}
	next := info.FirstOffset
	pos := 0
	for i := range hdrs {
		b := data[pos : pos+hdrs[i].Size()]
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, leaderEpoch)
		if cfg.LogAppendTime {
			record.SetLogAppendTime(b, info.LogAppendTime)
			hdrs[i].MaxTimestamp = info.LogAppendTime
		}
		hdrs[i].BaseOffset = next
		hdrs[i].PartitionLeaderEpoch = leaderEpoch
		info.MaxTimestamp = max(info.MaxTimestamp, hdrs[i].MaxTimestamp)
		next = hdrs[i].LastOffset() + 1
		pos += hdrs[i].Size()
	}
	info.LastOffset = next - 1
	// The epoch goes into the leader-epoch checkpoint before its batches
	// reach the segment, as Kafka does: the other order lets a crash keep
	// batches (written, even if not yet synced, they survive a killed
	// process) whose epoch the cache never learns, and OffsetForLeaderEpoch
	// then answers wrongly. An entry without its batches is dropped by
	// TruncateFromEnd when the log reopens.
	if err := l.maybeAssignEpochLocked(leaderEpoch, info.FirstOffset); err != nil {
		return AppendInfo{}, l.fail("leader epoch checkpoint", err)
	}
	if err := l.appendLocked(data, hdrs, cfg); err != nil {
		return AppendInfo{}, err
	}
	return info, nil
}

// AppendAsFollower appends batches copied from the leader, offsets and
// leader epochs already set. They must start at or after the log end
// offset (a gap is allowed: the leader's log may be compacted).
func (l *Log) AppendAsFollower(data []byte) (AppendInfo, error) {
	cfg := l.cfg.Load()
	hdrs, _, err := validateBatches(data, cfg, false)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	next := l.leo.Load()
	info := AppendInfo{FirstOffset: hdrs[0].BaseOffset, LogAppendTime: -1, MaxTimestamp: -1, NumBatches: len(hdrs)}
	for _, h := range hdrs {
		if h.BaseOffset < next {
			return AppendInfo{}, fmt.Errorf("%w: batch at %d, log end offset %d", ErrNonMonotonicOffset, h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
	}
	info.LastOffset = next - 1
	for _, h := range hdrs { // epochs first, as in Append
		if err := l.maybeAssignEpochLocked(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
			return AppendInfo{}, l.fail("leader epoch checkpoint", err)
		}
	}
	if err := l.appendLocked(data, hdrs, cfg); err != nil {
		return AppendInfo{}, err
	}
	return info, nil
}

// AssignLeaderEpoch records that leader epoch epoch starts at offset
// start (a new leader's log end, before it writes anything in the
// epoch), as Kafka's leader does on becoming leader. An epoch at or below
// the latest one recorded changes nothing; start must be the log end.
func (l *Log) AssignLeaderEpoch(epoch int32, start int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if leo := l.leo.Load(); start != leo {
		return fmt.Errorf("%w: leader epoch %d cannot start at %d, the log ends at %d", leaderepoch.ErrInvalidEpochEntry, epoch, start, leo)
	}
	return l.maybeAssignEpochLocked(epoch, start)
}

// maybeAssignEpochLocked records the start of a new leader epoch.
// REQUIRES: l.mu held.
func (l *Log) maybeAssignEpochLocked(epoch int32, start int64) error {
	if epoch < 0 {
		return nil
	}
	if latest, ok := l.epochs.LatestEpoch(); ok && latest >= epoch {
		return nil
	}
	return l.epochs.Assign(epoch, start)
}

// validateBatches checks every batch in data and returns their headers,
// and whether any record has a non-null key (from the same walk over the
// records, compressed ones included: record.ValidateBatch).
func validateBatches(data []byte, cfg *Config, client bool) (hdrs []record.Header, keyed bool, err error) {
	if len(data) == 0 {
		return nil, false, fmt.Errorf("%w: no record batch", ErrInvalidBatch)
	}
	opts := record.ValidateOptions{
		MaxBatchBytes:           cfg.MaxMessageBytes,
		Client:                  client,
		VerifyCompressedRecords: true,
	}
	for pos := 0; pos < len(data); {
		h, err := record.ParseHeader(data[pos:])
		if err != nil {
			return nil, false, err
		}
		if h.Size() > len(data)-pos {
			return nil, false, fmt.Errorf("%w: batch length %d, %d bytes left", record.ErrCorruptLength, h.Size(), len(data)-pos)
		}
		b := data[pos : pos+h.Size()]
		v, err := record.ValidateBatch(b, opts)
		if err != nil {
			if errors.Is(err, record.ErrBatchTooLarge) {
				return nil, false, fmt.Errorf("%w: %v", ErrBatchTooLarge, err)
			}
			if errors.Is(err, record.ErrInvalidRecordBatch) {
				return nil, false, fmt.Errorf("%w: %v", ErrInvalidBatch, err)
			}
			return nil, false, err
		}
		h = v.Header
		keyed = keyed || v.Keyed
		if !client && (h.BaseOffset < 0 || h.LastOffset() < h.BaseOffset) {
			// Offsets from a leader that overflow int64 would make the log
			// end offset negative.
			return nil, false, fmt.Errorf("%w: batch offsets %d..%d", ErrInvalidBatch, h.BaseOffset, h.LastOffset())
		}
		if int64(h.Size()) > cfg.SegmentBytes {
			return nil, false, fmt.Errorf("%w: batch of %d bytes, segment.bytes %d", ErrBatchTooLarge, h.Size(), cfg.SegmentBytes)
		}
		if client && h.HasProducerID() && (h.ProducerEpoch < 0 || h.BaseSequence < 0) {
			// Kafka's LogValidator refuses these too: sequence numbers
			// are what the producer state is built from.
			return nil, false, fmt.Errorf("%w: producer id %d with epoch %d and base sequence %d",
				ErrInvalidBatch, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		if client && cfg.CleanupPolicy.Compact() {
			if err := requireKeys(b); err != nil {
				return nil, false, err
			}
		}
		hdrs = append(hdrs, h)
		pos += h.Size()
	}
	return hdrs, keyed, nil
}

// requireKeys refuses keyless records for a compacted log, as Kafka does:
// compaction keeps the newest record per key, and a record with no key
// could never be superseded nor removed.
func requireKeys(b []byte) error {
	return record.ForEachRecord(b, func(r *record.Record) error {
		if r.Key == nil {
			return fmt.Errorf("%w: compacted topic cannot accept a record without a key (offset delta %d)",
				ErrInvalidBatch, r.Offset)
		}
		return nil
	})
}

// appendLocked writes validated batches with offsets assigned, rolling
// first if they do not belong in the active segment.
// REQUIRES: l.mu held.
func (l *Log) appendLocked(data []byte, hdrs []record.Header, cfg *Config) error {
	first, last := hdrs[0], hdrs[len(hdrs)-1]
	var maxTs int64 = -1
	for _, h := range hdrs {
		maxTs = max(maxTs, h.MaxTimestamp)
	}
	active := l.activeSegment()
	if l.shouldRoll(active, cfg, int64(len(data)), first.BaseOffset, last.LastOffset(), maxTs) {
		var err error
		if active, err = l.rollLocked(first.BaseOffset); err != nil {
			return l.fail("roll", err)
		}
	}
	if err := active.append(data, hdrs, cfg.IndexIntervalBytes); err != nil {
		return l.fail("append", err)
	}
	l.leo.Store(last.LastOffset() + 1)
	var nowMs int64 = -1
	pos := 0
	for _, h := range hdrs {
		b := data[pos : pos+h.Size()]
		pos += h.Size()
		if !h.HasProducerID() {
			continue
		}
		if nowMs < 0 {
			nowMs = l.now().UnixMilli()
		}
		if err := l.applyBatchLocked(active, h, b, nowMs); err != nil {
			return l.fail("transaction index", err)
		}
	}
	l.producers.OnHighWatermark(l.highWatermark.Load())
	l.publishUnstableLocked(false)
	return nil
}

func (l *Log) activeSegment() *segment {
	segs := *l.segments.Load()
	return segs[len(segs)-1]
}

// shouldRoll applies Kafka's roll rules: the segment would pass
// segment.bytes, it is older than segment.ms (measured between the first
// batch's timestamp and the new batches', as Kafka does), or the new offsets
// do not fit its 32-bit relative offsets.
func (l *Log) shouldRoll(s *segment, cfg *Config, size, firstOffset, lastOffset, maxTs int64) bool {
	cur := s.size.Load()
	if cur == 0 {
		return firstOffset-s.baseOffset > 1<<32-1 || firstOffset < s.baseOffset
	}
	if cur+size > cfg.SegmentBytes || lastOffset-s.baseOffset > 1<<32-1 {
		return true
	}
	if ft := s.firstTimestamp(); ft >= 0 && maxTs-ft > cfg.SegmentMs {
		return true
	}
	return false
}

// rollLocked seals the active segment and starts a new one at base.
// REQUIRES: l.mu held.
func (l *Log) rollLocked(base int64) (*segment, error) {
	old := l.activeSegment()
	if old.size.Load() > 0 {
		// The new segment's name can become durable with any later
		// directory sync (an index write, a compaction swap, retention),
		// and recovery takes an empty last segment to mean the log ends
		// at its base. If the old segment's tail were still unsynced then,
		// a crash would lose it yet keep the offsets above it: a hole that
		// a replica would count as data. So no segment is ever created
		// while an earlier one holds unsynced batches.
		f, err := old.handle()
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return nil, err
		}
		if err := old.seal(l.lastBatchBaseLocked(old)); err != nil {
			return nil, err
		}
		// Its aborted transactions are below the snapshot written next,
		// which no rebuild replays: durable first (txnindex.go).
		if err := old.syncTxnIndex(); err != nil {
			return nil, err
		}
	}
	// The producer state where the new segment starts (see producer.go).
	// Written before the segment is created, so a segment that survives a
	// crash has its snapshot too, and after the old segment's fsync, so
	// that the batches it covers are durable before it claims them.
	if err := l.writeSnapshotLocked(base); err != nil {
		return nil, err
	}
	s, err := createSegment(l.fs, l.dir, base)
	if err != nil {
		return nil, err
	}
	l.dirDirty.Store(true)
	segs := *l.segments.Load()
	next := make([]*segment, 0, len(segs)+1)
	if old.size.Load() == 0 {
		// An empty active segment is replaced rather than kept, so no
		// empty segment sits between two others.
		l.segLock.Lock()
		old.remove()
		l.segLock.Unlock()
		next = append(next, segs[:len(segs)-1]...)
	} else {
		next = append(next, segs...)
	}
	next = append(next, s)
	l.segments.Store(&next)
	return s, nil
}

// lastBatchBaseLocked finds the base offset of the segment's last batch by
// scanning from its last index entry.
// REQUIRES: l.mu held.
func (l *Log) lastBatchBaseLocked(s *segment) int64 {
	pos, h, err := s.findBatch(l.leo.Load() - 1)
	if err != nil || pos < 0 {
		return -1
	}
	return h.BaseOffset
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Records holds whole batches, possibly starting before the requested
	// offset (the batch that holds it) as Kafka does; clients skip the
	// records below what they asked for.
	Records []byte
	// Range, from ReadRange, holds the batches instead of Records when
	// it is set (Range.File != nil).
	Range FileRange
	// LastOffset is the last offset of the last batch in Records or
	// Range, -1 when there is none: what a fetch hands out runs from its
	// fetch offset to here (see segment.rangeEnd for the one case where
	// it may pass the true last offset).
	LastOffset     int64
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	// LastStableOffset is the log's, as the read began.
	LastStableOffset int64
	// AbortedTxns, from ReadCommitted only, are the aborted transactions
	// that overlap what was read: a read_committed reader skips their
	// producers' batches within them. Nil when there are none.
	AbortedTxns []AbortedTxn
}

// A FileRange is Size bytes of whole batches at Pos in File, for a fetch
// to send from the page cache without copying them through Go (sendfile).
// File is a new descriptor of the segment file, owned by the caller, who
// must Close it; the bytes stay readable through it even if retention or
// compaction deletes the segment meanwhile. Only a truncation (a follower
// cutting its log) can change them: a sender that finds the file shorter
// than the range must give up on its response.
type FileRange struct {
	File *os.File
	Pos  int64
	Size int
}

// Read returns batches starting with the one that holds offset: at most
// maxBytes of them but always the first whole batch when there is one (so
// a consumer can make progress past a batch larger than its limit), and
// none whose last offset is at or past maxOffset (the high watermark or the
// last stable offset; the log end offset for a follower). An offset below
// the log start offset or above the log end offset is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	return l.ReadInto(nil, offset, maxBytes, maxOffset)
}

// ReadInto is Read into buf when buf has the capacity (Records then
// aliases buf), for a fetch path that recycles its buffers. A fresh buffer
// per 1 MiB read costs more than the read itself: allocating it, the GC
// cycles it drives and the page faults on memory the runtime gave back to
// the kernel cut a warm sequential scan from 9.3 to 1.7 GB/s (BENCHMARKS.md).
func (l *Log) ReadInto(buf []byte, offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	return l.read(buf, offset, maxBytes, maxOffset, -1, false)
}

// ReadRange is ReadInto, except that batches coming to at least
// minRangeBytes are returned as a FileRange instead of being read, when
// the log's files are the operating system's (not in tests' MemFS).
// Smaller ones are read into buf: for them one copy is cheaper than the
// extra descriptor and system calls a range costs.
func (l *Log) ReadRange(buf []byte, offset int64, maxBytes int, maxOffset int64, minRangeBytes int) (ReadResult, error) {
	return l.read(buf, offset, maxBytes, maxOffset, minRangeBytes, false)
}

// read is ReadInto (minRangeBytes < 0), ReadRange and, with committed,
// ReadCommitted.
func (l *Log) read(buf []byte, offset int64, maxBytes int, maxOffset int64, minRangeBytes int, committed bool) (ReadResult, error) {
	if l.closed.Load() {
		return ReadResult{}, ErrLogClosed
	}
	res := ReadResult{
		LastOffset:     -1,
		LogEndOffset:   l.leo.Load(),
		LogStartOffset: l.logStartOffset.Load(),
		HighWatermark:  l.highWatermark.Load(),
	}
	res.LastStableOffset = l.LastStableOffset()
	if committed {
		maxOffset = min(maxOffset, res.LastStableOffset)
	}
	if offset < res.LogStartOffset || offset > res.LogEndOffset {
		return res, fmt.Errorf("%w: offset %d, log %s has [%d, %d]",
			ErrOffsetOutOfRange, offset, l.name, res.LogStartOffset, res.LogEndOffset)
	}
	maxOffset = min(maxOffset, res.LogEndOffset)
	if offset >= maxOffset {
		return res, nil
	}
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	segs := *l.segments.Load()
	for i := segmentFor(segs, offset); i < len(segs); i++ {
		s := segs[i]
		if s.baseOffset >= maxOffset {
			break
		}
		pos, h, err := s.findBatch(offset)
		if err != nil {
			return res, err
		}
		if pos < 0 {
			continue // every batch here is below offset (compaction gap)
		}
		if minRangeBytes >= 0 {
			if r, last, ok, err := s.fileRange(pos, h, maxBytes, maxOffset, minRangeBytes); err != nil || ok {
				res.Range, res.LastOffset = r, last
				return l.withAbortedTxns(res, segs, offset, committed, err)
			}
		}
		data, last, err := s.read(buf, pos, h, maxBytes, maxOffset, true)
		res.Records, res.LastOffset = data, last
		return l.withAbortedTxns(res, segs, offset, committed, err)
	}
	return res, nil
}

// withAbortedTxns adds to a committed read's result the aborted
// transactions that overlap what it read. They are found under the same
// segLock as the read, so that no segment it read from has lost its index
// to retention meanwhile.
// REQUIRES: l.segLock held.
func (l *Log) withAbortedTxns(res ReadResult, segs []*segment, offset int64, committed bool, err error) (ReadResult, error) {
	if !committed || err != nil || res.LastOffset < offset {
		return res, err
	}
	if res.AbortedTxns, err = abortedTxns(segs, offset, res.LastOffset+1); err != nil {
		if res.Range.File != nil {
			res.Range.File.Close()
			res.Range = FileRange{}
		}
		return res, err
	}
	return res, nil
}

// Flush makes every offset below upTo durable, and returns once it is.
// Callers that arrive while an fsync is running wait for it and are then
// served together by the next one (group commit): the caller that gets
// flushMu syncs everything appended until then. A failed fsync fails the
// log: the page cache may have dropped the dirty pages, so retrying could
// report success for data that is gone.
func (l *Log) Flush(upTo int64) error {
	if l.recoveryPoint.Load() >= upTo {
		return nil
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.recoveryPoint.Load() >= upTo {
		return nil
	}
	if l.failed.Load() {
		return fmt.Errorf("%w: %s", ErrStorage, l.name)
	}
	if l.closed.Load() {
		// Close flushes before it sets closed; after that there are no
		// files left to sync, and reopening them would leak them.
		return ErrLogClosed
	}
	target := l.leo.Load()
	from := l.recoveryPoint.Load()
	start := time.Now() // not l.now: a test's clock may stand still
	l.segLock.RLock()
	segs := *l.segments.Load()
	var err error
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].baseOffset <= from {
			continue // wholly below the recovery point: already durable
		}
		var f vfs.File
		if f, err = s.handle(); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = s.syncTxnIndex()
		}
		if err != nil {
			break
		}
	}
	l.segLock.RUnlock()
	if err == nil && l.dirDirty.Swap(false) {
		if err = l.fs.SyncDir(l.dir); err != nil {
			l.dirDirty.Store(true)
		}
	}
	if l.observeSync != nil {
		l.observeSync(time.Since(start))
	}
	if err != nil {
		return l.fail("fsync", err)
	}
	if target > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(target)
	}
	l.lastFlushMs.Store(l.now().UnixMilli())
	return nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// whose timestamp is >= ts (ListOffsets by timestamp), or found=false when
// no record is that new.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	start := l.logStartOffset.Load()
	end := l.leo.Load()
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	for _, s := range *l.segments.Load() {
		maxTs, err := s.maxTimestamp()
		if err != nil {
			return 0, 0, false, err
		}
		if maxTs < ts || s.size.Load() == 0 {
			continue
		}
		o, t, ok, err := s.offsetForTimestamp(ts, start, end)
		if err != nil || ok {
			return o, t, ok, err
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734); found=false for
// an empty log.
func (l *Log) MaxTimestamp() (offset, timestamp int64, found bool, err error) {
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	segs := *l.segments.Load()
	best := -1
	var bestTs int64 = -1
	for i, s := range segs {
		ts, err := s.maxTimestamp()
		if err != nil {
			return 0, 0, false, err
		}
		if ts > bestTs && s.size.Load() > 0 {
			best, bestTs = i, ts
		}
	}
	if best < 0 {
		return 0, 0, false, nil
	}
	o, t, ok, err := segs[best].offsetForTimestamp(bestTs, l.logStartOffset.Load(), l.leo.Load())
	return o, t, ok, err
}

// Close flushes the log, writes the active segment's indexes and closes
// every file. It does not write the clean-shutdown marker; the log
// manager does, once every log is closed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var err error
	if !l.failed.Load() {
		err = l.Flush(l.leo.Load())
		if err == nil {
			active := l.activeSegment()
			err = active.seal(l.lastBatchBaseLocked(active))
		}
		if err == nil {
			err = l.snapshotAtCloseLocked()
		}
	}
	l.closed.Store(true)
	l.segLock.Lock()
	for _, s := range *l.segments.Load() {
		if cerr := s.shutdown(); err == nil {
			err = cerr
		}
	}
	l.segLock.Unlock()
	return err
}
