//go:build unix

package replica

import "syscall"

// DiskSpace returns the size of the file system holding dir and the bytes
// an unprivileged writer may still use (statfs f_bavail, not f_bfree: the
// blocks reserved for root are not Fjord's).
func DiskSpace(dir string) (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize, nil
}
