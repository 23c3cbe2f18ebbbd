package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
)

func TestCheckNotTmpfs(t *testing.T) {
	// /dev/shm is tmpfs on Linux: a store there would never touch a disk.
	if err := checkNotTmpfs("/dev/shm"); !errors.Is(err, errTmpfs) {
		t.Fatalf("checkNotTmpfs(/dev/shm) = %v, want errTmpfs", err)
	}
	// /proc is not tmpfs (nor a disk, but the check is only about memory
	// filesystems), so the check does not refuse everything.
	if err := checkNotTmpfs("/proc"); err != nil {
		t.Fatalf("checkNotTmpfs(/proc) = %v, want nil", err)
	}
	if err := checkNotTmpfs("/does/not/exist"); err == nil {
		t.Fatal("checkNotTmpfs of a missing directory = nil, want an error")
	}
}

func TestRunRefusesTmpfs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), os.Args[0], []string{"max-rate-1p-1kb", "--dir", "/dev/shm", "--out", t.TempDir()}, &stdout, &stderr)
	if !errors.Is(err, errTmpfs) {
		t.Fatalf("run with --dir /dev/shm = %v, want errTmpfs", err)
	}
}
