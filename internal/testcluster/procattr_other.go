//go:build !linux

package testcluster

import "syscall"

// procAttr: only Linux can tie a child's life to its parent's; elsewhere
// the test's cleanup is the only thing that kills leftover nodes.
func procAttr() *syscall.SysProcAttr { return nil }
