package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/storage"
)

// The tests run the real command in a child process: the test binary
// re-executes itself as `fjord` when FJORD_TEST_RUN_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("FJORD_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fjordCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FJORD_TEST_RUN_MAIN=1")
	return cmd
}

// startServe runs `fjord serve` and waits for its start line.
// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startServe(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	cmd := fjordCommand(t, append([]string{"serve"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	out := &syncBuffer{}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "fjord node started") {
				once = true
				close(started)
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("serve exited before starting: %v\n%s", err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start\n%s", out.String())
	}
	return cmd, out, done
}

func TestServeShutsDownCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cmd, out, done := startServe(t, nil, "--data-dir", dir)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("serve exited with %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
				t.Fatalf("no clean-shutdown marker after %v: %v\n%s", sig, err, out)
			}
			// The next start sees the clean shutdown.
			cmd, out, done = startServe(t, nil, "--data-dir", dir)
			if !strings.Contains(out.String(), "clean_start=true") {
				t.Errorf("second start not clean:\n%s", out)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if err := <-done; err != nil {
				t.Fatalf("second serve exited with %v\n%s", err, out)
			}
		})
	}
}

func TestServeReadsEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "from-env")
	cmd := fjordCommand(t, "serve")
	cmd.Env = append(cmd.Env, "FJORD_DATA_DIR="+dir, "FJORD_LOG_LEVEL=verbose")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"verbose"`) {
		t.Fatalf("bad FJORD_LOG_LEVEL accepted or not named: err=%v\n%s", err, out)
	}

	cmd, log, done := startServe(t, []string{"FJORD_DATA_DIR=" + dir})
	if !strings.Contains(log.String(), "data_dir="+dir) {
		t.Errorf("FJORD_DATA_DIR not used:\n%s", log)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("serve exited with %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("data dir from environment not used: %v", err)
	}
}

func TestServeRejectsBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"serve", "--no-such-flag"}, "unknown flag"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, `--log-level "loud"`},
		{"empty data dir", []string{"serve", "--data-dir", ""}, "--data-dir is empty"},
		{"data dir is a file", []string{"serve", "--data-dir", file}, "opening data directory"},
		{"extra argument", []string{"serve", "extra"}, "unknown command"},
		{"unknown command", []string{"bogus"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := fjordCommand(t, tc.args...).CombinedOutput()
			if err == nil {
				t.Fatalf("accepted: %s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("error does not say %q:\n%s", tc.want, out)
			}
			if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n > 3 {
				t.Errorf("error is %d lines, want a short message:\n%s", n+1, out)
			}
		})
	}
}
