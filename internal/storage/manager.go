package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// TopicPartition names a partition log.
type TopicPartition = checkpoint.TopicPartition

// Files a Manager keeps in its data directory, beside one directory per
// partition named "<topic>-<partition>", as Kafka lays them out.
const (
	CleanShutdownFile          = ".clean-shutdown"
	RecoveryPointCheckpoint    = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpoint   = "log-start-offset-checkpoint"
	HighWatermarkCheckpoint    = "replication-offset-checkpoint"
	deletedDirSuffix           = "-delete"
	defaultFlushCheckInterval  = 100 * time.Millisecond
	defaultRetentionInterval   = 5 * time.Minute
	defaultCheckpointInterval  = time.Minute
	defaultRecoveryConcurrency = 8
)

// ManagerOptions tunes a Manager. Zero values take the defaults.
type ManagerOptions struct {
	Now    func() time.Time
	Logger *slog.Logger
	// FlushCheckInterval is how often logs with flush.policy=interval are
	// checked against their flush.ms.
	FlushCheckInterval time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// CheckpointInterval is how often recovery points, log start offsets
	// and high watermarks are written (a stale recovery point only means
	// more scanning after a crash).
	CheckpointInterval time.Duration
	// CleanerInterval is how often the cleaner looks for compacted logs
	// to clean.
	CleanerInterval time.Duration
	// RecoveryConcurrency bounds how many logs open (and recover) at once.
	RecoveryConcurrency int
	// NoBackground disables the background goroutines; tests call
	// FlushDue, ApplyRetention, CleanOnce and Checkpoint themselves.
	NoBackground bool
	// ReservedDirs names directories in the data directory that are not
	// partition logs (the node keeps its Raft state in "metadata"). They
	// are skipped without a warning, and never removed.
	ReservedDirs []string
	// ObserveSync is given to every log (OpenOptions.ObserveSync).
	ObserveSync func(time.Duration)
}

// Manager owns the partition logs of one data directory: it opens them
// all at startup (recovering after an unclean shutdown), runs flushing,
// retention, checkpoints and the cleaner in the background with bounded
// concurrency, and shuts down cleanly.
//
// Threads: one background goroutine runs the periodic work one log at a
// time; the cleaner has its own goroutine. Log lookups take mu shared.
type Manager struct {
	fs       vfs.FS
	dir      string
	defaults Config
	opts     ManagerOptions
	log      *slog.Logger

	mu struct {
		sync.RWMutex
		logs   map[TopicPartition]*Log
		closed bool
	}

	// CleanStart reports whether the last shutdown was clean.
	CleanStart bool
	// NewDir reports that the data directory held nothing of a Manager's
	// (no partition log, checkpoint or clean-shutdown marker): a first
	// start, with nothing to recover. CleanStart is false then, but
	// nothing crashed, and the start is logged as "new", not "unclean".
	NewDir bool

	cleaner *Cleaner
	stop    chan struct{}
	wg      sync.WaitGroup

	// onLogFailure is OnLogFailure's handler, nil until one is set.
	onLogFailure atomic.Pointer[func(TopicPartition, error)]
}

// OpenManager opens every log under dir with the default config (the
// broker later applies per-topic configs with Log.SetConfig).
func OpenManager(fsys vfs.FS, dir string, defaults Config, opts ManagerOptions) (*Manager, error) {
	if err := defaults.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FlushCheckInterval <= 0 {
		opts.FlushCheckInterval = defaultFlushCheckInterval
	}
	if opts.RetentionCheckInterval <= 0 {
		opts.RetentionCheckInterval = defaultRetentionInterval
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = defaultCheckpointInterval
	}
	if opts.CleanerInterval <= 0 {
		opts.CleanerInterval = 15 * time.Second
	}
	if opts.RecoveryConcurrency <= 0 {
		opts.RecoveryConcurrency = max(defaultRecoveryConcurrency, 2*runtime.GOMAXPROCS(0))
	}
	m := &Manager{fs: fsys, dir: dir, defaults: defaults, opts: opts, log: opts.Logger, stop: make(chan struct{})}
	m.mu.logs = map[TopicPartition]*Log{}
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, err
	}
	marker := filepath.Join(dir, CleanShutdownFile)
	if _, err := fsys.Stat(marker); err == nil {
		m.CleanStart = true
		// From here on a crash is an unclean shutdown.
		if err := fsys.Remove(marker); err != nil {
			return nil, err
		}
		if err := fsys.SyncDir(dir); err != nil {
			return nil, err
		}
	} else if !vfs.IsNotExist(err) {
		return nil, err
	}
	if err := m.openAll(); err != nil {
		m.closeLogs()
		return nil, err
	}
	if !m.CleanStart {
		// A crash may have cut short the creation of a log directory (or
		// of the data directory) between its mkdir and the sync of its
		// parent. It is opened as a log all the same, so its entry must be
		// made durable now, or it and all that is flushed into it would
		// vanish at the next power cut.
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := fsys.SyncDir(d); err != nil {
				m.closeLogs()
				return nil, err
			}
		}
	}
	m.cleaner = newCleaner(m)
	if !opts.NoBackground {
		m.wg.Add(2)
		go m.backgroundLoop()
		go m.cleaner.loop()
	}
	return m, nil
}

func (m *Manager) readCheckpoint(name string) map[TopicPartition]int64 {
	offsets, err := checkpoint.ReadOffsets(m.fs, filepath.Join(m.dir, name))
	if err != nil {
		// A damaged checkpoint costs a longer recovery, never data.
		m.log.Warn("ignoring damaged checkpoint", "file", name, "err", err)
		return map[TopicPartition]int64{}
	}
	return offsets
}

func (m *Manager) openAll() error {
	names, err := m.fs.List(m.dir)
	if err != nil {
		return err
	}
	recovery := m.readCheckpoint(RecoveryPointCheckpoint)
	starts := m.readCheckpoint(LogStartOffsetCheckpoint)
	hws := m.readCheckpoint(HighWatermarkCheckpoint)

	type job struct {
		tp  TopicPartition
		dir string
	}
	var jobs []job
	for _, n := range names {
		p := filepath.Join(m.dir, n)
		info, err := m.fs.Stat(p)
		if err != nil {
			return err
		}
		if !info.IsDir || slices.Contains(m.opts.ReservedDirs, n) {
			continue
		}
		if strings.HasSuffix(n, deletedDirSuffix) {
			// A deletion interrupted by a crash.
			if err := m.fs.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		tp, ok := ParseLogDirName(n)
		if !ok {
			m.log.Warn("ignoring directory that is not a partition log", "dir", n)
			continue
		}
		jobs = append(jobs, job{tp, p})
	}

	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan job)
	)
	for range min(m.opts.RecoveryConcurrency, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				l, err := Open(m.fs, j.dir, m.defaults, OpenOptions{
					Name:           logDirName(j.tp),
					Clean:          m.CleanStart,
					RecoveryPoint:  recovery[j.tp],
					LogStartOffset: starts[j.tp],
					HighWatermark:  hws[j.tp],
					Now:            m.opts.Now,
					Logger:         m.log,
					ObserveSync:    m.opts.ObserveSync,
					OnFail:         m.logFailed(j.tp),
				})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				} else if err == nil {
					m.mu.logs[j.tp] = l
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if !m.CleanStart && len(jobs) == 0 {
		m.NewDir = true
		for _, n := range []string{RecoveryPointCheckpoint, LogStartOffsetCheckpoint, HighWatermarkCheckpoint} {
			if slices.Contains(names, n) {
				m.NewDir = false
			}
		}
	}
	m.log.Info("opened logs", "dir", m.dir, "logs", len(jobs), "start", m.StartKind(), "took", time.Since(start))
	return nil
}

// StartKind names how the data directory was found, for logs: "new" (see
// NewDir), "clean" (the last shutdown was clean) or "unclean" (logs past
// their recovery points were scanned and truncated at the first damage).
func (m *Manager) StartKind() string {
	switch {
	case m.NewDir:
		return "new"
	case m.CleanStart:
		return "clean"
	}
	return "unclean"
}

// ParseLogDirName splits "<topic>-<partition>". Topic names may contain
// '-', so the partition is what follows the last one.
func ParseLogDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

func logDirName(tp TopicPartition) string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// OnLogFailure sets the handler told of each log's first failure (an
// I/O error after which the log refuses writes with ErrStorage until the
// process restarts; Log.Failed). Kafka's LogDirFailureChannel, for one
// log: Fjord has one data directory per node, so what fails is a
// partition's log, and its owner takes that replica offline. The
// handler runs on the goroutine that met the error, possibly holding the
// log's locks: it must not block or call the log. A failure before the
// handler is set is told to nobody; Log.Failed still says so.
func (m *Manager) OnLogFailure(handler func(tp TopicPartition, err error)) {
	m.onLogFailure.Store(&handler)
}

// logFailed is the OpenOptions.OnFail of tp's log.
func (m *Manager) logFailed(tp TopicPartition) func(op string, err error) {
	return func(op string, err error) {
		if h := m.onLogFailure.Load(); h != nil && *h != nil {
			(*h)(tp, fmt.Errorf("%s: %w", op, err))
		}
	}
}

// Log returns the log of tp, if this directory has it.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.mu.logs[tp]
	return l, ok
}

// Logs returns every log (a snapshot).
func (m *Manager) Logs() map[TopicPartition]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]*Log, len(m.mu.logs))
	for tp, l := range m.mu.logs {
		out[tp] = l
	}
	return out
}

// GetOrCreateLog returns tp's log, creating it empty with cfg if needed;
// an existing log gets cfg applied.
func (m *Manager) GetOrCreateLog(tp TopicPartition, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tp.Topic == "" || strings.ContainsAny(tp.Topic, "/\\\x00") || tp.Topic == "." || tp.Topic == ".." || tp.Partition < 0 {
		return nil, fmt.Errorf("%w: partition name %q-%d", ErrInvalidConfig, tp.Topic, tp.Partition)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrLogClosed
	}
	if l, ok := m.mu.logs[tp]; ok {
		return l, l.SetConfig(cfg)
	}
	dir := filepath.Join(m.dir, logDirName(tp))
	if err := m.fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	if err := m.fs.SyncDir(m.dir); err != nil {
		return nil, err
	}
	l, err := Open(m.fs, dir, cfg, OpenOptions{Name: logDirName(tp), Clean: true, Now: m.opts.Now, Logger: m.log,
		ObserveSync: m.opts.ObserveSync, OnFail: m.logFailed(tp)})
	if err != nil {
		return nil, err
	}
	m.mu.logs[tp] = l
	return l, nil
}

// DeleteLog closes tp's log and removes its directory: first renamed
// aside (so a crash midway leaves a directory that startup finishes
// removing, never a half-deleted log that looks live), then removed.
func (m *Manager) DeleteLog(tp TopicPartition) error {
	m.mu.Lock()
	l, ok := m.mu.logs[tp]
	delete(m.mu.logs, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	m.cleaner.forget(tp)
	l.mu.Lock()
	l.closed.Store(true)
	l.segLock.Lock()
	for _, s := range *l.segments.Load() {
		s.shutdown()
	}
	l.segLock.Unlock()
	l.mu.Unlock()
	aside := filepath.Join(m.dir, fmt.Sprintf("%s.%d%s", logDirName(tp), time.Now().UnixNano(), deletedDirSuffix))
	if err := m.fs.Rename(l.dir, aside); err != nil {
		return err
	}
	if err := m.fs.SyncDir(m.dir); err != nil {
		return err
	}
	return m.fs.RemoveAll(aside)
}

func (m *Manager) backgroundLoop() {
	defer m.wg.Done()
	flush := time.NewTicker(m.opts.FlushCheckInterval)
	retention := time.NewTicker(m.opts.RetentionCheckInterval)
	ckpt := time.NewTicker(m.opts.CheckpointInterval)
	defer flush.Stop()
	defer retention.Stop()
	defer ckpt.Stop()
	for {
		select {
		case <-m.stop: // Close: the caller finishes the work itself.
			return
		case <-flush.C: // flush.policy=interval logs whose flush.ms passed
			m.FlushDue()
		case <-retention.C:
			m.ApplyRetention()
		case <-ckpt.C:
			if err := m.Checkpoint(); err != nil {
				m.log.Error("writing checkpoints", "err", err)
			}
		}
	}
}

// FlushDue flushes the logs with flush.policy=interval whose flush.ms has
// passed since their last flush.
func (m *Manager) FlushDue() {
	now := m.opts.Now().UnixMilli()
	for _, l := range m.Logs() {
		cfg := l.cfg.Load()
		if cfg.FlushPolicy != FlushInterval || l.recoveryPoint.Load() >= l.leo.Load() {
			continue
		}
		if now-l.lastFlushMs.Load() < cfg.FlushMs {
			continue
		}
		if err := l.Flush(l.leo.Load()); err != nil && !errors.Is(err, ErrLogClosed) {
			m.log.Error("background flush", "log", l.name, "err", err)
		}
	}
}

// ApplyRetention runs a retention pass over every log, one at a time.
func (m *Manager) ApplyRetention() {
	for _, l := range m.Logs() {
		if _, err := l.ApplyRetention(); err != nil && !errors.Is(err, ErrLogClosed) {
			m.log.Error("retention", "log", l.name, "err", err)
		}
	}
}

// Checkpoint writes the recovery points, log start offsets and high
// watermarks of every log.
func (m *Manager) Checkpoint() error {
	logs := m.Logs()
	rp := make(map[TopicPartition]int64, len(logs))
	ls := make(map[TopicPartition]int64, len(logs))
	hw := make(map[TopicPartition]int64, len(logs))
	for tp, l := range logs {
		rp[tp] = l.RecoveryPoint()
		ls[tp] = l.LogStartOffset()
		hw[tp] = l.HighWatermark()
	}
	if err := checkpoint.WriteOffsets(m.fs, filepath.Join(m.dir, RecoveryPointCheckpoint), rp); err != nil {
		return err
	}
	if err := checkpoint.WriteOffsets(m.fs, filepath.Join(m.dir, LogStartOffsetCheckpoint), ls); err != nil {
		return err
	}
	return checkpoint.WriteOffsets(m.fs, filepath.Join(m.dir, HighWatermarkCheckpoint), hw)
}

func (m *Manager) closeLogs() error {
	logs := m.Logs()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, m.opts.RecoveryConcurrency)
	)
	for _, l := range logs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := l.Close()
			if err == nil && l.failed.Load() {
				// Close skips the flush of a failed log and says nothing;
				// its files are in a state nobody knows, so the shutdown
				// is not clean and the marker must not be written.
				err = fmt.Errorf("%w: %s failed before close", ErrStorage, l.name)
			}
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// Close stops the background work, flushes and closes every log, writes
// the checkpoints and, if all of that succeeded, the clean-shutdown marker
// that lets the next start skip recovery.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	closeErr := m.closeLogs()
	// The healthy logs' recovery points are worth keeping even when one
	// log failed: they spare the next start from scanning them all.
	if err := m.Checkpoint(); err != nil || closeErr != nil {
		return errors.Join(closeErr, err)
	}
	if err := checkpoint.WriteFileAtomic(m.fs, filepath.Join(m.dir, CleanShutdownFile), nil); err != nil {
		return err
	}
	m.log.Info("log manager closed cleanly", "dir", m.dir)
	return nil
}
