package testcluster

import "syscall"

// procAttr makes the kernel SIGKILL the node if the test process dies
// (a panic, or go test's -timeout), so no node outlives its test. The
// signal is tied to the thread that forked, which the Go runtime keeps
// alive unless a goroutine exits while locked to it; the test's own
// cleanup kills nodes in the ordinary case anyway.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
