//go:build linux

package limits

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and only the metadata needed to read it
// back, such as its size), as a broker's log flush does.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// fsMagic returns statfs(2) f_type of the file system holding dir.
func fsMagic(dir string) (uint32, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	// f_type is signed on some architectures; the magic numbers are
	// 32-bit patterns either way.
	return uint32(st.Type), nil
}

// freeBytes returns the bytes an unprivileged writer may still use in
// dir's file system (f_bavail: root's reserve is not ours).
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
