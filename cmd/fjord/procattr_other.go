//go:build !unix

package main

import "syscall"

// nodeProcAttr: without Unix process groups or death signals a node is
// stopped only by its parent's own stop (a kill, where SIGTERM cannot be
// sent).
func nodeProcAttr() *syscall.SysProcAttr { return nil }
