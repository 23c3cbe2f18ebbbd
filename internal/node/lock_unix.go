//go:build unix

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the data directory's `.lock` (Kafka's name): an exclusive
// flock held for the node's life, so a second process on the same
// directory fails at once with a message instead of two processes
// writing the same logs (or the second hanging on the Raft bolt database,
// whose own lock waits forever). The kernel drops the lock when the
// process dies, so a crash never leaves the directory locked.
const lockFileName = ".lock"

type dirLock struct{ f *os.File }

func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = " (process " + pid + ")"
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another fjord node%s; stop it or use another data directory",
				ErrDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("opening data directory %s: locking %s: %w", dir, path, err)
	}
	// The pid is only for the message above; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// unlock releases the lock; the file stays (removing it would race with
// a process that has just opened it).
func (l *dirLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
