//go:build unix

package tlsconf

import (
	"os"
	"syscall"
)

// statFile returns what a check compares to notice a change: the
// device and inode (a file replaced by rename, or a symlink swapped to
// another target, has new ones), the size and the mtime (a file written
// in place). Stat follows symlinks, which is what makes Kubernetes'
// "..data" swap of a mounted Secret visible.
func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{ok: true, size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}
	if sys, isStat := fi.Sys().(*syscall.Stat_t); isStat {
		st.dev, st.ino = uint64(sys.Dev), uint64(sys.Ino) // their types differ between unixes
	}
	return st, nil
}
