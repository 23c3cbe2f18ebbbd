// Package vfs is the file-system seam under Fjord's storage.
//
// Every file the partition log touches goes through FS, so a test can swap
// the operating system for MemFS, a strict in-memory file system that
// forgets everything not made durable when it is told to crash. That makes
// crash consistency something a unit test can check exactly and quickly,
// the idea of pebble's vfs.NewStrictMem.
//
// Durability rules, the same for OS and MemFS:
//
//   - File data is durable once File.Sync returns.
//   - A directory entry (created, renamed or removed name) is durable once
//     FS.SyncDir of its parent directory returns.
//
// Code that needs a name and its contents to survive a crash must do both.
// A directory is an entry of its parent like a file is, so a new directory
// tree needs a SyncDir of every new directory's parent: MkdirAllDurable does
// that.
package vfs

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// File is an open file. Offsets are explicit: there is no shared file
// position, so concurrent ReadAt and WriteAt calls on different ranges are
// safe, as with pread/pwrite. A reader never observes bytes of a WriteAt
// that has not returned (callers publish sizes after writes complete).
type File interface {
	// ReadAt reads len(p) bytes at off. Reading past the end returns the
	// bytes that exist and io.EOF.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, growing the file if needed.
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes the file's current contents and size durable.
	Sync() error
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Size returns the current size.
	Size() (int64, error)
	// Close releases the handle. It does not sync.
	Close() error
	// Name returns the path the file was opened with.
	Name() string
}

// FS is the set of operations the storage layer needs. Paths are
// slash-separated and joined with path/filepath by callers.
type FS interface {
	// Create creates or truncates name for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading only.
	Open(name string) (File, error)
	// OpenReadWrite opens name for reading and writing, creating it empty
	// if it does not exist, never truncating it.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a directory tree. Missing paths are not an error.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	// Stat reports whether name exists, its size and whether it is a dir.
	Stat(name string) (FileInfo, error)
	// SyncDir makes the entries of dir durable.
	SyncDir(dir string) error
}

// FileInfo is the part of a stat result the storage layer uses.
type FileInfo struct {
	Size  int64
	IsDir bool
}

// Errors, always wrapped (in *fs.PathError, or *os.LinkError for Rename):
// test them with errors.Is. MemFS uses these for every condition below. OS
// passes the operating system's errors through (EISDIR, ENOTDIR,
// ENOTEMPTY, ...), which satisfy ErrNotExist where they should; only Open
// of a directory (ErrIsDir) and MkdirAllDurable below a file (ErrNotDir)
// give these sentinels on both.
var (
	// ErrNotExist is returned (wrapped) for a missing file or directory;
	// errors.Is(err, fs.ErrNotExist) holds for both OS and MemFS.
	ErrNotExist = fs.ErrNotExist
	// ErrCrashed is returned by every method of a MemFS handle opened
	// before MemFS.Crash, and by every mutating operation that
	// MemFS.CrashAfter refuses. Nothing returns it on OS.
	ErrCrashed = errors.New("vfs: file system crashed")
	// ErrIsDir: a file operation (Open, Create, renaming a file over a
	// directory) named a directory.
	ErrIsDir = errors.New("vfs: is a directory")
	// ErrNotDir: a path component, or a directory operation's target, is a
	// file.
	ErrNotDir = errors.New("vfs: not a directory")
	// ErrNotOSFile: DupOSFile was given a File that has no operating
	// system descriptor (MemFS), or runs where descriptors are not
	// duplicated.
	ErrNotOSFile = errors.New("vfs: not an operating-system file")
	// ErrNotEmpty: Remove or Rename over a directory that has entries.
	ErrNotEmpty = errors.New("vfs: directory not empty")
	// ErrTooLarge: a MemFS write or truncate would make a file larger than
	// MemFS allows (1 GiB), which in a test is a bug, not a workload.
	ErrTooLarge = errors.New("vfs: file too large for MemFS")
)

// IsNotExist reports whether err says a path does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// MkdirAllDurable creates dir and its missing parents and makes every
// directory it created durable, by syncing the parent of each, topmost
// first.
//
// Directories that already existed are taken to be durable already: making
// them so was the job of whoever created them. That keeps this from syncing
// (or failing to open) ancestors such as / or a home directory that Fjord
// does not own.
func MkdirAllDurable(fsys FS, dir string) error {
	dir = filepath.Clean(dir)
	// created lists, deepest first, the directories MkdirAll is about to
	// create. Stat stops at the first one that exists.
	var created []string
	for d := dir; ; {
		info, err := fsys.Stat(d)
		if err == nil {
			if !info.IsDir {
				return &fs.PathError{Op: "mkdir", Path: d, Err: ErrNotDir}
			}
			break
		}
		if !IsNotExist(err) {
			return err
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}
