package failpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// SyncEIOEnv arms an injected fsync failure in a real node, for tests of
// Kafka's log-dir failure handling (DESIGN.md section 25):
//
//	FJORD_FSYNC_EIO=<directory>@<marker file>
//
// Once the marker file exists, every fsync of a file in the directory,
// and of the directory itself, fails with EIO, as a disk that has gone
// bad does; until then they pass. Both paths, when relative, are taken
// from the node's data directory, so one value set on every node of a
// test cluster arms each node separately: the test creates the marker in
// the data directory of the node it wants to fail, at the moment it
// chooses. The directory is a partition's log directory
// ("<topic>-<partition>"), so exactly that replica's log fails.
const SyncEIOEnv = "FJORD_FSYNC_EIO"

// SyncEIO returns the fault FJORD_FSYNC_EIO asks for, for the node whose
// data directory is dataDir, as vfs.SyncFaults wants it: nil (nothing
// to wrap, nothing to pay) when the variable is unset or malformed.
func SyncEIO(dataDir string) func(name string) error {
	dir, marker := parse(os.Getenv(SyncEIOEnv))
	if dir == "" {
		return nil
	}
	return syncEIO(dataDir, dir, marker)
}

func syncEIO(dataDir, dir, marker string) func(name string) error {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(dataDir, dir)
	}
	if !filepath.IsAbs(marker) {
		marker = filepath.Join(dataDir, marker)
	}
	dir = filepath.Clean(dir)
	var fired atomic.Bool
	return func(name string) error {
		if name = filepath.Clean(name); name != dir && !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			return nil
		}
		if !fired.Load() {
			// Until the marker appears, a stat per sync of this one
			// directory; once it has, none (the failure is for good,
			// as a dead disk's).
			if _, err := os.Stat(marker); err != nil {
				return nil
			}
			fired.Store(true)
		}
		return &fs.PathError{Op: "sync", Path: name, Err: syscall.EIO}
	}
}
