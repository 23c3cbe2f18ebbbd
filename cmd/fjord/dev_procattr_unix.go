//go:build unix && !linux

package main

import "syscall"

// devProcAttr puts a dev node in a process group of its own, so a
// terminal's Ctrl-C reaches dev alone (dev.go says why). Only Linux can
// tie a child's life to its parent's; elsewhere a dev killed with
// SIGKILL leaves its nodes running, and their data directories' locks
// name them.
func devProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
