package limits

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// WriteOptions shape one sequential-write run.
type WriteOptions struct {
	// TotalBytes is the size of the file written; the last block is
	// short when BlockBytes does not divide it.
	TotalBytes int64
	BlockBytes int64
	// SyncEveryBytes, when positive, adds an fdatasync each time this
	// many bytes were written since the last one. There is always one
	// at the end: the figure is for data on the disk, not in the cache.
	SyncEveryBytes int64
}

// SequentialWrite creates (or truncates) path and writes o.TotalBytes of
// random bytes to it in blocks of o.BlockBytes, with fdatasync as o says.
// The timed interval runs from the first write to the return of the
// last fdatasync; creating and closing the file are outside it. The
// file is left in place for the caller to read or remove.
//
// The bytes are random so that a file system or device that compresses
// or deduplicates cannot flatter the figure.
func SequentialWrite(ctx context.Context, path string, o WriteOptions) (Sample, error) {
	if o.TotalBytes < 1 || o.BlockBytes < 1 || o.SyncEveryBytes < 0 {
		return Sample{}, fmt.Errorf("%w: write total %d, block %d, sync every %d", ErrInvalidConfig, o.TotalBytes, o.BlockBytes, o.SyncEveryBytes)
	}
	block := randomBytes(int(min(o.BlockBytes, o.TotalBytes)))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return Sample{}, err
	}
	defer f.Close()

	start := time.Now()
	var written, sinceSync int64
	for written < o.TotalBytes {
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		b := block[:min(int64(len(block)), o.TotalBytes-written)]
		n, err := f.Write(b)
		written += int64(n)
		sinceSync += int64(n)
		if err != nil {
			return Sample{}, fmt.Errorf("write %s at %d: %w", path, written, err)
		}
		if o.SyncEveryBytes > 0 && sinceSync >= o.SyncEveryBytes {
			if err := fdatasync(f); err != nil {
				return Sample{}, fmt.Errorf("fdatasync %s: %w", path, err)
			}
			sinceSync = 0
		}
	}
	if sinceSync > 0 || o.SyncEveryBytes == 0 {
		if err := fdatasync(f); err != nil {
			return Sample{}, fmt.Errorf("fdatasync %s: %w", path, err)
		}
	}
	d := time.Since(start)
	if err := f.Close(); err != nil {
		return Sample{}, err
	}
	return newSample(written, d), nil
}

// ReadOptions shape one page-cache read run.
type ReadOptions struct {
	// TotalBytes is how much is read; when the file is smaller, reading
	// goes round it again from the start.
	TotalBytes int64
	BlockBytes int64
}

// PageCacheRead reads the file at path once, untimed, so that all of it
// is in the page cache, then times sequential reads of o.BlockBytes until
// o.TotalBytes were read. It measures memory-to-user copies through the
// read system call, which is what a broker serving recent data to a
// consumer from a file does (Fjord does not use sendfile).
func PageCacheRead(ctx context.Context, path string, o ReadOptions) (Sample, error) {
	if o.TotalBytes < 1 || o.BlockBytes < 1 {
		return Sample{}, fmt.Errorf("%w: read total %d, block %d", ErrInvalidConfig, o.TotalBytes, o.BlockBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return Sample{}, err
	}
	defer f.Close()
	buf := make([]byte, o.BlockBytes)
	// Warm the cache (and fault in buf) outside the timed interval.
	var size int64
	for {
		n, err := f.Read(buf)
		size += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return Sample{}, fmt.Errorf("warm read %s: %w", path, err)
		}
	}
	if size == 0 {
		return Sample{}, fmt.Errorf("page-cache read: %s is empty", path)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Sample{}, err
	}

	start := time.Now()
	var read int64
	for read < o.TotalBytes {
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		n, err := f.Read(buf[:min(int64(len(buf)), o.TotalBytes-read)])
		read += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return Sample{}, err
			}
			continue
		}
		if err != nil {
			return Sample{}, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return newSample(read, time.Since(start)), nil
}

// randomBytes returns n bytes from crypto/rand: incompressible, and fast
// enough for the few MiB of buffers built once per run.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return b
}

// CheckDir refuses a directory on a memory file system (tmpfs, ramfs):
// a write there is a memory copy and fdatasync a no-op, so its figures
// would not be disk limits.
func CheckDir(dir string) error {
	magic, err := fsMagic(dir)
	if err != nil {
		return fmt.Errorf("bench directory %s: %w", dir, err)
	}
	return checkFSMagic(dir, magic)
}

// Magic numbers of statfs(2) f_type for file systems held in memory
// (linux/magic.h).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// checkFSMagic is CheckDir's decision, apart from the system call.
func checkFSMagic(dir string, magic uint32) error {
	var name string
	switch magic {
	case tmpfsMagic:
		name = "tmpfs"
	case ramfsMagic:
		name = "ramfs"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is on %s, so its figures would be memory speed, not disk speed; "+
		"give a directory on a disk with --dir or FJORD_BENCH_DIR", ErrMemoryFS, dir, name)
}

// checkFreeSpace refuses to start when dir's file system cannot hold
// need bytes plus a margin for whatever else is writing there.
func checkFreeSpace(dir string, need int64) error {
	free, err := freeBytes(dir)
	if err != nil || free < 0 {
		return nil // unknown: let the write fail with the system's error
	}
	const margin = 256 * MiB
	if free < need+margin {
		return fmt.Errorf("%w: %s has %s free, the measurements need %s (plus %s spare); use smaller sizes or another --dir",
			ErrNoSpace, dir, FormatSize(free), FormatSize(need), FormatSize(margin))
	}
	return nil
}
