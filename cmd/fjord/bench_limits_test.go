package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/bench/limits"
)

// limitsDiskDir is a directory on a disk for `fjord bench limits`, which
// refuses tmpfs: the test's temporary directory unless /tmp is in memory,
// else one beside the test (ignored by git as .benchdata-*).
func limitsDiskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if limits.CheckDir(dir) == nil {
		return dir
	}
	dir, err := os.MkdirTemp(".", ".benchdata-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// execBenchLimits runs the command as `fjord bench limits ARGS...` would.
func execBenchLimits(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newBenchLimitsCommand()
	var o, e bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&o)
	cmd.SetErr(&e)
	err = cmd.Execute()
	return o.String(), e.String(), err
}

var tinyLimitsArgs = []string{
	"--runs", "1", "--block-size", "64KiB", "--write-size", "256KiB", "--read-size", "512KiB",
	"--tcp-size", "1MiB", "--ingest-size", "256 KiB", "--record-size", "1KiB", "--batch-size", "64KiB",
}

func TestBenchLimitsCommand(t *testing.T) {
	dir := limitsDiskDir(t)
	out := filepath.Join(t.TempDir(), "results", "limits.json")
	stdout, stderr, err := execBenchLimits(t, append([]string{"--dir", dir, "--out", out}, tinyLimitsArgs...)...)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr)
	}
	res, err := limits.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Measurements) != 6 {
		t.Fatalf("%d measurements in the JSON, want 6", len(res.Measurements))
	}
	for _, m := range res.Measurements {
		if len(m.Runs) != 1 || m.MedianMBps <= 0 {
			t.Errorf("%s: %d runs, median %v MB/s; want 1 run and a positive figure", m.Name, len(m.Runs), m.MedianMBps)
		}
		if !strings.Contains(stdout, m.Description) {
			t.Errorf("table lacks %q:\n%s", m.Description, stdout)
		}
		if !strings.Contains(stderr, m.Name) {
			t.Errorf("progress lacks %q:\n%s", m.Name, stderr)
		}
	}
	// The flags reached the measurements.
	for _, m := range res.Measurements {
		if m.Name == limits.NameLoopbackTCP && m.Runs[0].Bytes != 1<<20 {
			t.Errorf("loopback run moved %d bytes, want the --tcp-size 1MiB", m.Runs[0].Bytes)
		}
	}
	if res.Config.BatchBytes != 64<<10 || res.Config.RecordBytes != 1024 || res.Config.Runs != 1 {
		t.Errorf("config in the JSON: %+v", res.Config)
	}
	if !strings.Contains(stdout, "median MB/s") || !strings.Contains(stdout, "machine:") {
		t.Errorf("table lacks its header or the machine line:\n%s", stdout)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left in --dir: %v", left)
	}
}

func TestBenchLimitsDirFromEnvironment(t *testing.T) {
	dir := limitsDiskDir(t)
	t.Setenv(limitsDirEnv, dir)
	out := filepath.Join(t.TempDir(), "limits.json")
	if _, stderr, err := execBenchLimits(t, append([]string{"--out", out}, tinyLimitsArgs...)...); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr)
	}
	res, err := limits.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = filepath.EvalSymlinks(want); err != nil {
		t.Fatal(err)
	}
	if res.Machine.Disk.Dir != want {
		t.Errorf("measured in %q, want $%s = %q", res.Machine.Disk.Dir, limitsDirEnv, want)
	}
}

func TestBenchLimitsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--write-size", "-1"}, `"--write-size"`},
		{[]string{"--write-size", "-1"}, "must be positive"},
		{[]string{"--tcp-size=0"}, `"--tcp-size"`},
		{[]string{"--ingest-size", "lots"}, "e.g. 1GiB"},
		{[]string{"--runs", "-3"}, "allowed: an integer from 1 to 100"},
		{[]string{"--runs", "0"}, `"--runs"`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"extra-argument"}, `unknown command "extra-argument"`},
		{[]string{"--record-size", "4KiB", "--batch-size", "2KiB"}, "record size 4096 does not fit a batch of 2048 bytes"},
		{[]string{"--batch-size", "2GiB"}, "allowed up to 1 GiB"},
		{[]string{"--block-size", "1GiB"}, "block size"},
	} {
		dir := filepath.Join(t.TempDir(), "bench-data")
		out := filepath.Join(t.TempDir(), "limits.json")
		args := append([]string{"--dir", dir, "--out", out}, tc.args...)
		stdout, stderr, err := execBenchLimits(t, args...)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not say %q", tc.args, err, tc.want)
		}
		// One error and nothing else: no usage dump, no partial table.
		if stdout != "" || stderr != "" {
			t.Errorf("%q: printed besides the error:\nstdout: %s\nstderr: %s", tc.args, stdout, stderr)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%q: --dir was created before the flags were checked", tc.args)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%q: --out was written", tc.args)
		}
	}
}
