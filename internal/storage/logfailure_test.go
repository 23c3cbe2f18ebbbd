package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// The log-failure hook (Manager.OnLogFailure, OpenOptions.OnFail): an
// fsync that returns EIO fails the log, which refuses writes with
// ErrStorage from then on and says so once, to its owner, naming the
// partition; its neighbours are untouched. It covers the logs the manager
// opened at start and those it created since, and a failure before a
// handler is set is still visible through Log.Failed.
func TestManagerToldOfLogFailure(t *testing.T) {
	fsys := vfs.NewMem()
	clock := &fakeClock{ms: 1_700_000_000_000}
	opened := TopicPartition{Topic: "opened", Partition: 0}
	created := TopicPartition{Topic: "created", Partition: 3}
	healthy := TopicPartition{Topic: "healthy", Partition: 0}

	// A first manager makes "opened" exist on disk, so the second opens
	// it at start rather than creating it.
	m, err := OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetOrCreateLog(opened, crashConfig()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	var (
		mu   sync.Mutex
		told []TopicPartition
		errs []error
	)
	m.OnLogFailure(func(tp TopicPartition, err error) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, tp)
		errs = append(errs, err)
	})
	failing := map[string]bool{}
	fsys.SetHook(func(op vfs.Op, path string) error {
		for dir := range failing {
			if op == vfs.OpSync && strings.HasPrefix(path, dir+"/") {
				return syscall.EIO
			}
		}
		return nil
	})
	appendSome := func(l *Log) error {
		_, err := l.Append(testBatch(t, 2, 100, 1, func(i int) []byte { return []byte{byte(i)} }), 0)
		return err
	}

	for _, tp := range []TopicPartition{opened, created} {
		l, err := m.GetOrCreateLog(tp, crashConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := appendSome(l); err != nil {
			t.Fatal(err)
		}
		failing[filepath.Join(crashDataDir, logDirName(tp))] = true
		if err := l.Flush(l.LogEndOffset()); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), syscall.EIO.Error()) {
			t.Fatalf("%s: flush with an EIO fsync: %v, want ErrStorage naming EIO", tp, err)
		}
		if !l.Failed() {
			t.Fatalf("%s: not failed after a failed fsync", tp)
		}
		if err := appendSome(l); !errors.Is(err, ErrStorage) {
			t.Fatalf("%s: append after the failure: %v, want ErrStorage", tp, err)
		}
		// A second failure (another flush) says nothing more.
		_ = l.Flush(l.LogEndOffset() + 1)
	}
	mu.Lock()
	if len(told) != 2 || told[0] != opened || told[1] != created {
		t.Fatalf("told %v, want [%v %v] once each", told, opened, created)
	}
	for _, err := range errs {
		if !strings.Contains(err.Error(), "fsync") || !strings.Contains(err.Error(), syscall.EIO.Error()) {
			t.Errorf("told %v, want the fsync's EIO", err)
		}
	}
	mu.Unlock()

	h, err := m.GetOrCreateLog(healthy, crashConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := appendSome(h); err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(h.LogEndOffset()); err != nil || h.Failed() {
		t.Fatalf("a neighbour of the failed logs: flush %v, failed %v", err, h.Failed())
	}

	// Without a handler the failure is only in the log's state.
	m.OnLogFailure(nil)
	failing[filepath.Join(crashDataDir, logDirName(healthy))] = true
	if err := appendSome(h); err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(h.LogEndOffset()); !errors.Is(err, ErrStorage) || !h.Failed() {
		t.Fatalf("flush without a handler: %v, failed %v", err, h.Failed())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 {
		t.Fatalf("told %v after the handler was removed", told)
	}
}
