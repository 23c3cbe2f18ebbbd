package main

import "syscall"

// Filesystem magic numbers from statfs(2).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// checkNotTmpfs refuses a directory held in memory: JetStream writing to
// tmpfs never touches a disk, and Fjord's figures are on a disk.
func checkNotTmpfs(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Type == tmpfsMagic || st.Type == ramfsMagic {
		return errTmpfs
	}
	return nil
}
