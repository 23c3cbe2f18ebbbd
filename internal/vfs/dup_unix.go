//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// DupOSFile returns a new descriptor for f's open file, owned by the
// caller, when f came from OS; ErrNotOSFile otherwise. The new
// descriptor stays valid when f is closed or its name removed, so a
// caller may hand it to sendfile after letting go of f's locks.
func DupOSFile(f File) (*os.File, error) {
	of, ok := unwrap(f).(*osFile)
	if !ok {
		return nil, ErrNotOSFile
	}
	rc, err := of.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var dupErr error
	if err := rc.Control(func(fd uintptr) {
		// Close-on-exec, as every descriptor Go opens: a child process
		// (the node starts none, tests do) must not inherit it.
		nfd, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, &os.PathError{Op: "dup", Path: of.f.Name(), Err: dupErr}
	}
	return os.NewFile(uintptr(nfd), of.f.Name()), nil
}
