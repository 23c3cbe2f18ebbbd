//go:build !unix

package main

import "syscall"

// devProcAttr: without Unix process groups or death signals a node is
// stopped only by dev's own stop (a kill, where SIGTERM cannot be sent).
func devProcAttr() *syscall.SysProcAttr { return nil }
