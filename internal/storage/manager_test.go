package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// The log manager: one data directory of partition logs, opened together
// (recovering after an unclean shutdown), checkpointed, flushed on
// flush.ms, shut down cleanly with a marker that lets the next start skip
// recovery.

// managerForEachFS runs fn on a data directory of real files and on MemFS.
func managerForEachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { fn(t, vfs.OS(), filepath.Join(t.TempDir(), "data")) })
	t.Run("mem", func(t *testing.T) { fn(t, vfs.NewMem(), "/data") })
}

func managerOpen(t testing.TB, fsys vfs.FS, dir string, opts ManagerOptions) *Manager {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	if opts.FlushCheckInterval == 0 && opts.RetentionCheckInterval == 0 && opts.CheckpointInterval == 0 && opts.CleanerInterval == 0 {
		opts.NoBackground = true
	}
	m, err := OpenManager(fsys, dir, managerConfig(), opts)
	if err != nil {
		t.Fatalf("open manager: %v", err)
	}
	return m
}

func managerTP(topic string, partition int32) TopicPartition {
	return TopicPartition{Topic: topic, Partition: partition}
}

func managerConfig() Config {
	cfg := logTestConfig()
	cfg.SegmentBytes = 800
	return cfg
}

// managerTopics are partitions whose topic names contain the characters
// Kafka allows besides letters and digits.
var managerTopics = []TopicPartition{
	{Topic: "orders", Partition: 0},
	{Topic: "orders", Partition: 1},
	{Topic: "orders", Partition: 12},
	{Topic: "web-clicks", Partition: 0},
	{Topic: "web-clicks-2", Partition: 3},
	{Topic: "app.events", Partition: 0},
	{Topic: "a.b-c_d", Partition: 7},
	{Topic: "x-1", Partition: 1},
	{Topic: "-", Partition: 0},
	{Topic: "ends-", Partition: 2},
}

// managerFill appends n single-record batches to every log and returns
// their models.
func managerFill(t testing.TB, m *Manager, n int) map[TopicPartition]*logModel {
	t.Helper()
	models := map[TopicPartition]*logModel{}
	for _, tp := range managerTopics {
		l, err := m.GetOrCreateLog(tp, managerConfig())
		if err != nil {
			t.Fatalf("%v: %v", tp, err)
		}
		mdl := &logModel{}
		for i := range n + int(tp.Partition) {
			mdl.appendBatch(t, l, 1, int64(i), 0)
		}
		models[tp] = mdl
	}
	return models
}

func managerCheck(t testing.TB, m *Manager, models map[TopicPartition]*logModel) {
	t.Helper()
	if got := len(m.Logs()); got != len(models) {
		t.Fatalf("%d logs, want %d", got, len(models))
	}
	for tp, mdl := range models {
		l, ok := m.Log(tp)
		if !ok {
			t.Fatalf("log %v missing", tp)
		}
		mdl.check(t, l)
	}
}

func TestParseLogDirName(t *testing.T) {
	for _, c := range []struct {
		name string
		tp   TopicPartition
		ok   bool
	}{
		{"orders-0", managerTP("orders", 0), true},
		{"orders-12", managerTP("orders", 12), true},
		{"web-clicks-3", managerTP("web-clicks", 3), true},
		{"a.b-c_d-7", managerTP("a.b-c_d", 7), true},
		{"x-1-1", managerTP("x-1", 1), true},
		{"--0", managerTP("-", 0), true},
		{"ends--2", managerTP("ends-", 2), true},
		{"t-2147483647", managerTP("t", 2147483647), true},
		{"orders", TopicPartition{}, false},
		{"orders-", TopicPartition{}, false},
		{"-0", TopicPartition{}, false},
		{"orders-x", TopicPartition{}, false},
		{"orders-01", TopicPartition{}, false},
		{"orders-+1", TopicPartition{}, false},
		{"orders--1", managerTP("orders-", 1), true}, // topic "orders-", partition 1
		{"orders-2147483648", TopicPartition{}, false},
		{"orders-1.5", TopicPartition{}, false},
		{"orders-0.1700000000-delete", TopicPartition{}, false},
		{"", TopicPartition{}, false},
	} {
		tp, ok := ParseLogDirName(c.name)
		if ok != c.ok || tp != c.tp {
			t.Errorf("ParseLogDirName(%q) = %v, %v; want %v, %v", c.name, tp, ok, c.tp, c.ok)
		}
		if ok && logDirName(tp) != c.name {
			t.Errorf("logDirName(%v) = %q, want %q", tp, logDirName(tp), c.name)
		}
	}
}

// TestManagerOpensManyLogs: logs created through the manager are all found
// again, with their records, after a clean restart and after an unclean one.
func TestManagerOpensManyLogs(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		m := managerOpen(t, fsys, dir, ManagerOptions{})
		if m.CleanStart {
			t.Fatal("a new data directory reports a clean start")
		}
		if !m.NewDir || m.StartKind() != "new" {
			t.Fatalf("a new data directory: NewDir %v, start %q; want true, new", m.NewDir, m.StartKind())
		}
		models := managerFill(t, m, 30)
		// Something that is not a partition log is ignored, not fatal.
		if err := fsys.MkdirAll(filepath.Join(dir, "not_a_log")); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}

		m = managerOpen(t, fsys, dir, ManagerOptions{RecoveryConcurrency: 3})
		if !m.CleanStart || m.NewDir || m.StartKind() != "clean" {
			t.Fatalf("clean shutdown not recognised: CleanStart %v, NewDir %v, start %q", m.CleanStart, m.NewDir, m.StartKind())
		}
		managerCheck(t, m, models)
		for tp, mdl := range models {
			l, _ := m.Log(tp)
			mdl.appendBatch(t, l, 2, 99, 1)
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		// Dropped without Close: the next start is unclean.
		m.closeLogs()
		m = managerOpen(t, fsys, dir, ManagerOptions{RecoveryConcurrency: 1})
		defer m.Close()
		if m.CleanStart || m.NewDir || m.StartKind() != "unclean" {
			t.Fatalf("an unclean shutdown: CleanStart %v, NewDir %v, start %q; want false, false, unclean", m.CleanStart, m.NewDir, m.StartKind())
		}
		managerCheck(t, m, models)
	})
}

func TestManagerGetOrCreateLog(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		m := managerOpen(t, fsys, dir, ManagerOptions{})
		tp := TopicPartition{Topic: "payments", Partition: 4}
		l, err := m.GetOrCreateLog(tp, managerConfig())
		if err != nil {
			t.Fatal(err)
		}
		if l.Dir() != filepath.Join(dir, "payments-4") {
			t.Fatalf("log directory %s", l.Dir())
		}
		if info, err := fsys.Stat(l.Dir()); err != nil || !info.IsDir {
			t.Fatalf("stat %s: %v %v", l.Dir(), info, err)
		}
		// The same log again, with the new config applied.
		cfg := managerConfig()
		cfg.RetentionMs = 12345
		again, err := m.GetOrCreateLog(tp, cfg)
		if err != nil || again != l || l.Config().RetentionMs != 12345 {
			t.Fatalf("second GetOrCreateLog: %p %v (first %p), retention.ms %d", again, err, l, l.Config().RetentionMs)
		}
		bad := managerConfig()
		bad.SegmentBytes = 1
		if _, err := m.GetOrCreateLog(tp, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("bad config: %v", err)
		}
		for _, name := range []TopicPartition{managerTP("", 0), managerTP("a/b", 0), managerTP(`a\b`, 0), managerTP(".", 0), managerTP("..", 0), managerTP("nul\x00", 0), managerTP("ok", -1)} {
			if _, err := m.GetOrCreateLog(name, managerConfig()); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("GetOrCreateLog(%q, %d): %v", name.Topic, name.Partition, err)
			}
		}
		if len(m.Logs()) != 1 {
			t.Fatalf("%d logs", len(m.Logs()))
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.GetOrCreateLog(managerTP("late", 0), managerConfig()); !errors.Is(err, ErrLogClosed) {
			t.Fatalf("GetOrCreateLog after Close: %v", err)
		}
	})
}

// TestManagerDeleteLog: a deleted log is gone from the manager and the
// disk, refuses further writes, and can be created again empty.
func TestManagerDeleteLog(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		m := managerOpen(t, fsys, dir, ManagerOptions{})
		models := managerFill(t, m, 10)
		tp := managerTopics[3]
		l, _ := m.Log(tp)
		if err := m.DeleteLog(tp); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Log(tp); ok {
			t.Fatal("deleted log still listed")
		}
		if _, err := l.Append(testBatch(t, 1, 1, 1, nil), 0); !errors.Is(err, ErrLogClosed) {
			t.Fatalf("append to a deleted log: %v", err)
		}
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n == logDirName(tp) || strings.HasSuffix(n, "-delete") {
				t.Fatalf("%s left in the data directory", n)
			}
		}
		if err := m.DeleteLog(tp); err != nil {
			t.Fatalf("deleting a deleted log: %v", err)
		}
		delete(models, tp)
		managerCheck(t, m, models)

		l, err = m.GetOrCreateLog(tp, managerConfig())
		if err != nil || l.LogEndOffset() != 0 || l.Size() != 0 {
			t.Fatalf("recreated: %v, LEO %d", err, l.LogEndOffset())
		}
		models[tp] = &logModel{}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m = managerOpen(t, fsys, dir, ManagerOptions{})
		defer m.Close()
		managerCheck(t, m, models)
	})
}

// TestManagerDeleteLogCrash: a crash at any point of DeleteLog leaves
// either the whole log or nothing of it, and no renamed-aside directory
// once the manager has started again. Every crash point is tried.
func TestManagerDeleteLogCrash(t *testing.T) {
	setup := func(t *testing.T) (*vfs.MemFS, *Manager, map[TopicPartition]*logModel) {
		fsys := vfs.NewMem()
		m := managerOpen(t, fsys, "/data", ManagerOptions{})
		models := managerFill(t, m, 5)
		for _, l := range m.Logs() {
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		return fsys, m, models
	}
	tp := managerTopics[5]
	fsys, m, _ := setup(t)
	start := fsys.MutatingOps()
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	ops := fsys.MutatingOps() - start
	if ops < 3 {
		t.Fatalf("DeleteLog did %d mutating operations", ops)
	}
	for n := range ops + 1 {
		t.Run(fmt.Sprintf("after %d of %d", n, ops), func(t *testing.T) {
			fsys, m, models := setup(t)
			fsys.CrashAfter(n)
			m.DeleteLog(tp)
			fsys.Crash()
			m = managerOpen(t, fsys, "/data", ManagerOptions{})
			defer m.Close()
			if _, ok := m.Log(tp); !ok {
				delete(models, tp) // gone whole; otherwise it must be whole
			}
			managerCheck(t, m, models)
			names, err := fsys.List("/data")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if strings.HasSuffix(name, "-delete") {
					t.Fatalf("%s survives a restart", name)
				}
			}
		})
	}
}

// TestManagerCheckpoints: recovery points, log start offsets and high
// watermarks are written for every log and read back at the next start.
func TestManagerCheckpoints(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		m := managerOpen(t, fsys, dir, ManagerOptions{})
		models := managerFill(t, m, 20)
		want := map[string]map[TopicPartition]int64{
			RecoveryPointCheckpoint: {}, LogStartOffsetCheckpoint: {}, HighWatermarkCheckpoint: {},
		}
		for i, tp := range managerTopics {
			l, _ := m.Log(tp)
			if err := l.Flush(l.LogEndOffset() - int64(i%3)); err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(l.LogEndOffset() - 2)
			if _, err := l.DeleteRecordsBefore(int64(i)); err != nil {
				t.Fatal(err)
			}
			want[RecoveryPointCheckpoint][tp] = l.RecoveryPoint()
			want[LogStartOffsetCheckpoint][tp] = int64(i)
			want[HighWatermarkCheckpoint][tp] = l.LogEndOffset() - 2
			models[tp].truncate(0) // rebuilt below from what is kept
		}
		if err := m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			got, err := checkpoint.ReadOffsets(fsys, filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(got) != len(w) {
				t.Fatalf("%s: %v, want %v", name, got, w)
			}
			for tp, o := range w {
				if got[tp] != o {
					t.Fatalf("%s: %v = %d, want %d", name, tp, got[tp], o)
				}
			}
		}
		// An unclean restart takes the log start offsets and high
		// watermarks from the checkpoints.
		m.closeLogs()
		m = managerOpen(t, fsys, dir, ManagerOptions{})
		defer m.Close()
		for tp := range want[HighWatermarkCheckpoint] {
			l, ok := m.Log(tp)
			if !ok {
				t.Fatalf("%v missing", tp)
			}
			if l.HighWatermark() != want[HighWatermarkCheckpoint][tp] || l.LogStartOffset() != want[LogStartOffsetCheckpoint][tp] {
				t.Fatalf("%v: HW %d start %d, want %d %d", tp, l.HighWatermark(), l.LogStartOffset(),
					want[HighWatermarkCheckpoint][tp], want[LogStartOffsetCheckpoint][tp])
			}
		}
		// A damaged checkpoint costs a full recovery, never the start.
		m.closeLogs()
		if err := checkpoint.WriteFileAtomic(fsys, filepath.Join(dir, RecoveryPointCheckpoint), []byte("garbage")); err != nil {
			t.Fatal(err)
		}
		m2 := managerOpen(t, fsys, dir, ManagerOptions{})
		defer m2.Close()
		if len(m2.Logs()) != len(managerTopics) {
			t.Fatalf("%d logs after a damaged checkpoint", len(m2.Logs()))
		}
	})
}

// managerDamageMiddle flips a byte in the records of a batch in the middle
// of tp's first segment, below every recovery point: only a scan would see
// it.
func managerDamageMiddle(t testing.TB, dir string, tp TopicPartition) {
	t.Helper()
	path := filepath.Join(dir, logDirName(tp), fmt.Sprintf("%020d.log", 0))
	pos, hs := recoveryBatchPositions(t, path)
	at := pos[2] + int64(hs[2].Size()) - 1
	recoveryPatch(t, path, at, []byte{^recoveryByteAt(t, path, at)})
}

// TestManagerCleanShutdownSkipsRecovery: after a clean shutdown the
// segments are trusted as they are. The proof is observable: a batch
// damaged in an old segment after the clean shutdown is not cut off by the
// next clean start (nothing scanned it), while the same damage after an
// unclean shutdown (marker gone, recovery point lost) truncates the log
// there.
func TestManagerCleanShutdownSkipsRecovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	fsys := vfs.OS()
	m := managerOpen(t, fsys, dir, ManagerOptions{})
	models := managerFill(t, m, 40)
	tp := managerTopics[0]
	l, _ := m.Log(tp)
	leo, segments := l.LogEndOffset(), l.NumSegments()
	if segments < 3 {
		t.Fatalf("%d segments", segments)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	managerDamageMiddle(t, dir, tp)

	m = managerOpen(t, fsys, dir, ManagerOptions{})
	if !m.CleanStart {
		t.Fatal("clean start not recognised")
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("the marker outlives the start (a crash now would be taken for clean): %v", err)
	}
	l, _ = m.Log(tp)
	if l.LogEndOffset() != leo || l.NumSegments() != segments {
		t.Fatalf("clean start changed the log: LEO %d segments %d, were %d %d", l.LogEndOffset(), l.NumSegments(), leo, segments)
	}
	// The other logs are as they were.
	for other, mdl := range models {
		if other != tp {
			ol, _ := m.Log(other)
			mdl.check(t, ol)
		}
	}
	// Now an unclean start with no recovery point: the scan finds the
	// damage and cuts the log at batch 2.
	m.closeLogs()
	if err := os.Remove(filepath.Join(dir, RecoveryPointCheckpoint)); err != nil {
		t.Fatal(err)
	}
	m = managerOpen(t, fsys, dir, ManagerOptions{})
	defer m.Close()
	if m.CleanStart {
		t.Fatal("unclean start taken for clean")
	}
	l, _ = m.Log(tp)
	if l.LogEndOffset() != 2 || l.NumSegments() != 1 {
		t.Fatalf("unclean start: LEO %d with %d segments, want the log cut at 2", l.LogEndOffset(), l.NumSegments())
	}
	models[tp].truncate(2)
	managerCheck(t, m, models)
}

// TestManagerUncleanStartRecovers: a power cut with unflushed and torn
// tails; every log comes back with at least what was flushed and exactly a
// prefix of what was written.
func TestManagerUncleanStartRecovers(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			fsys := vfs.NewMem()
			m := managerOpen(t, fsys, "/data", ManagerOptions{})
			models := managerFill(t, m, 15)
			flushed := map[TopicPartition]int64{}
			for tp, mdl := range models {
				l, _ := m.Log(tp)
				if err := l.Flush(l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
				flushed[tp] = l.LogEndOffset()
				for i := range 7 {
					mdl.appendBatch(t, l, 1+i%3, 500, 0)
				}
			}
			if err := m.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			fsys.CrashTorn(rand.New(rand.NewPCG(seed, 7)))
			m = managerOpen(t, fsys, "/data", ManagerOptions{})
			defer m.Close()
			if m.CleanStart {
				t.Fatal("crash taken for a clean shutdown")
			}
			for tp, mdl := range models {
				l, ok := m.Log(tp)
				if !ok {
					t.Fatalf("%v lost", tp)
				}
				if l.LogEndOffset() < flushed[tp] {
					t.Fatalf("%v: LEO %d below the flushed %d", tp, l.LogEndOffset(), flushed[tp])
				}
				mdl.truncate(l.LogEndOffset())
				mdl.check(t, l)
			}
		})
	}
}

// TestManagerFlushDue: logs with flush.policy=interval are fsynced once
// flush.ms has passed since their last flush (or, for a log never
// flushed, since it was opened, as Kafka counts it); flush.policy=ack
// logs are left to their producers.
func TestManagerFlushDue(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		m := managerOpen(t, fsys, dir, ManagerOptions{Now: clock.now})
		defer m.Close()
		cfg := managerConfig()
		cfg.FlushPolicy, cfg.FlushMs = FlushInterval, 1000
		interval, err := m.GetOrCreateLog(managerTP("interval", 0), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := m.GetOrCreateLog(managerTP("ack", 0), managerConfig())
		if err != nil {
			t.Fatal(err)
		}
		appendBoth := func() {
			for _, l := range []*Log{interval, ack} {
				if _, err := l.Append(testBatch(t, 2, 10, 1, nil), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendBoth()
		m.FlushDue() // opened just now: not due
		if interval.RecoveryPoint() != 0 || ack.RecoveryPoint() != 0 {
			t.Fatalf("recovery points interval=%d ack=%d, want 0 before flush.ms has passed since the open", interval.RecoveryPoint(), ack.RecoveryPoint())
		}
		clock.advance(999 * time.Millisecond)
		m.FlushDue()
		if interval.RecoveryPoint() != 0 {
			t.Fatalf("999 ms after the open: recovery point %d, want 0", interval.RecoveryPoint())
		}
		clock.advance(time.Millisecond)
		m.FlushDue() // flush.ms since the open
		if interval.RecoveryPoint() != 2 {
			t.Fatalf("flush.ms after the open: recovery point %d, want 2", interval.RecoveryPoint())
		}
		for _, step := range []struct {
			advance time.Duration
			want    int64
		}{
			{0, 2},
			{999 * time.Millisecond, 2},
			{time.Millisecond, 4},
			{500 * time.Millisecond, 4},
			{500 * time.Millisecond, 6},
		} {
			if step.want != interval.RecoveryPoint() {
				appendBoth()
			}
			clock.advance(step.advance)
			m.FlushDue()
			if interval.RecoveryPoint() != step.want {
				t.Fatalf("after %v: recovery point %d, want %d (LEO %d)", step.advance, interval.RecoveryPoint(), step.want, interval.LogEndOffset())
			}
		}
		if ack.RecoveryPoint() != 0 {
			t.Fatalf("flush.policy=ack log flushed in the background: %d", ack.RecoveryPoint())
		}
	})
}

// TestManagerBackgroundFlush: the manager's own goroutine does it.
func TestManagerBackgroundFlush(t *testing.T) {
	fsys := vfs.NewMem()
	m := managerOpen(t, fsys, "/data", ManagerOptions{FlushCheckInterval: time.Millisecond, RetentionCheckInterval: time.Hour, CheckpointInterval: time.Hour, CleanerInterval: time.Hour})
	cfg := managerConfig()
	cfg.FlushPolicy, cfg.FlushMs = FlushInterval, 1
	l, err := m.GetOrCreateLog(managerTP("bg", 0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(testBatch(t, 3, 10, 1, nil), 0); err != nil {
			t.Fatal(err)
		}
		leo := l.LogEndOffset()
		testutil.Eventually(t, 10*time.Second, func() error {
			if rp := l.RecoveryPoint(); rp < leo {
				return fmt.Errorf("recovery point %d, LEO %d", rp, leo)
			}
			return nil
		})
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// What the background flush made durable survives a power cut.
	fsys.Crash()
	m = managerOpen(t, fsys, "/data", ManagerOptions{})
	defer m.Close()
	l, ok := m.Log(managerTP("bg", 0))
	if !ok || l.LogEndOffset() != 9 {
		t.Fatalf("after the crash: %v, LEO %d", ok, l.LogEndOffset())
	}
}

// TestManagerRetentionAndCleaner: the manager's passes reach every log
// and do to each what its config says.
func TestManagerRetentionAndCleaner(t *testing.T) {
	managerForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clock := &fakeClock{ms: 1_000_000}
		m := managerOpen(t, fsys, dir, ManagerOptions{Now: clock.now})
		deleteCfg := managerConfig()
		deleteCfg.RetentionMs = 1000
		compactCfg := managerConfig()
		compactCfg.CleanupPolicy = CleanupCompact
		compactCfg.MinCleanableDirtyRatio = 0.5
		del, err := m.GetOrCreateLog(managerTP("expiring", 0), deleteCfg)
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := m.GetOrCreateLog(managerTP("table", 0), compactCfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			b := logBatchRecs(t, record.DefaultBatchOptions(), []logRec{{ts: clock.ms, key: "k", value: fmt.Sprintf("value-%d", i)}})
			if _, err := del.Append(slices.Clone(b), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := cmp.Append(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		del.SetHighWatermark(del.LogEndOffset())
		cmp.SetHighWatermark(cmp.LogEndOffset())
		delSegs, cmpSegs := del.NumSegments(), cmp.NumSegments()
		clock.advance(time.Hour)
		m.ApplyRetention()
		if del.NumSegments() != 1 || del.LogStartOffset() != 60 {
			t.Fatalf("delete log: %d of %d segments left, start %d", del.NumSegments(), delSegs, del.LogStartOffset())
		}
		if cmp.NumSegments() != cmpSegs {
			t.Fatalf("retention deleted segments of a compact-only log")
		}
		n, err := m.CleanOnce()
		if err != nil || n != 1 {
			t.Fatalf("CleanOnce: %d %v", n, err)
		}
		got := compactionContents(t, cmp)
		bound := cmp.activeSegment().baseOffset
		// One key: below the active segment only its newest record stays.
		for o := bound - 1; o < 60; o++ {
			if _, ok := got[o]; !ok {
				t.Fatalf("offset %d missing after compaction: %v", o, got)
			}
		}
		if len(got) != int(60-bound+1) {
			t.Fatalf("compaction kept %v, want offsets %d..59", got, bound-1)
		}
		ck, err := checkpoint.ReadOffsets(fsys, filepath.Join(dir, CleanerCheckpoint))
		if err != nil || ck[managerTP("table", 0)] != bound {
			t.Fatalf("cleaner checkpoint %v %v, want first dirty offset %d", ck, err, bound)
		}
		// Nothing is dirty now: the next pass leaves the log alone.
		if n, err := m.CleanOnce(); err != nil || n != 0 {
			t.Fatalf("second CleanOnce: %d %v", n, err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
