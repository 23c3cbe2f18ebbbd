package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The README's quickstart, run line by line with sh against a fresh
// `fjord serve`, as a new user runs it: ./fjord is this binary, and
// FJORD_BROKERS points the commands at the node's port.
func TestReadmeQuickstart(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart:begin -->\n```sh\n(.*?)```\n<!-- quickstart:end -->").FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md has no quickstart block")
	}
	var lines []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 5 {
		t.Fatalf("quickstart block has %d commands:\n%s", len(lines), m[1])
	}

	dir := t.TempDir()
	cmd, out, done := startServe(t, nil, append([]string{"--data-dir", filepath.Join(dir, "data")}, freePorts...)...)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}()
	addr := logValue(t, out.String(), "kafka_addr")
	wrapper := "#!/bin/sh\nFJORD_TEST_RUN_MAIN=1 exec '" + os.Args[0] + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "fjord"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}

	var printed string
	for _, l := range lines {
		c := exec.Command("sh", "-c", l)
		c.Dir = dir
		c.Env = append(os.Environ(), "FJORD_BROKERS="+addr)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\nnode:\n%s", l, err, b, out)
		}
		if strings.Contains(l, "fjord consume") {
			printed = string(b)
		}
	}
	// Same key, same partition, in the order written.
	requireGreetings(t, printed)
}
