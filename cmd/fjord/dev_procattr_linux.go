package main

import "syscall"

// devProcAttr puts a dev node in a process group of its own, so a
// terminal's Ctrl-C reaches dev alone (dev.go says why), and has the
// kernel SIGKILL it if dev dies, however it dies: no node outlives its
// dev. The death signal is tied to the thread that forked the node,
// which the Go runtime keeps alive unless a goroutine exits while
// locked to it, and dev locks none.
func devProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
