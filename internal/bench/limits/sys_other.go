//go:build !linux

package limits

import "os"

// fdatasync falls back to fsync where there is no fdatasync; it syncs
// more metadata, so figures from such systems are not comparable with
// Linux ones.
func fdatasync(f *os.File) error { return f.Sync() }

// fsMagic is Linux's statfs f_type; elsewhere the file system is not
// identified and no directory is refused.
func fsMagic(string) (uint32, error) { return 0, nil }

// freeBytes is unknown outside Linux (-1); the writes then fail with the
// system's own error if the disk fills.
func freeBytes(string) (int64, error) { return -1, nil }
