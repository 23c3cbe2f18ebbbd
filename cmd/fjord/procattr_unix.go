//go:build unix && !linux

package main

import "syscall"

// nodeProcAttr puts a node (fjord dev's, bench's or verify's) in a
// process group of its own, so a terminal's Ctrl-C reaches its parent
// alone (dev.go says why). Only Linux can tie a child's life to its
// parent's; elsewhere a parent killed with SIGKILL leaves its nodes
// running, and their data directories' locks name them.
func nodeProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
