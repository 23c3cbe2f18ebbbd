//go:build !unix

package tlsconf

import "os"

// statFile returns what a check compares to notice a change. Without
// inodes, a file replaced by rename is noticed by its mtime and size
// only (and, within racyWindow of its mtime, by its content); Fjord is
// developed and tested on Linux.
func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{ok: true, size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}, nil
}
