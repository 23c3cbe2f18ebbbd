package main

import "syscall"

// nodeProcAttr is for the fjord serve children of fjord dev, bench
// --local and verify --local: it puts a node in a process group of its
// own, so a terminal's Ctrl-C reaches the parent alone, which stops its
// nodes itself (dev.go says why; verify must heal and read back first),
// and has the kernel SIGKILL it if the parent dies, however it dies: no
// node outlives its parent. The death signal is tied to the thread that
// forked the node, which the Go runtime keeps alive unless a goroutine
// exits while locked to it, and no goroutine that starts nodes locks
// one.
func nodeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
