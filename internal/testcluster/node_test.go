package testcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// starts returns the lines the fake wrote, one per start, in dir.
func starts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "starts"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func dialable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func TestStartKillRestartStop(t *testing.T) {
	opts := fakeOptions(t, fakeOK)
	opts.NodeID = 7
	opts.Args = []string{"--extra", "x"}
	n := Start(t, opts)

	if n.Brokers() != n.KafkaAddr() {
		t.Fatalf("Brokers() = %q, KafkaAddr() = %q", n.Brokers(), n.KafkaAddr())
	}
	addrs := map[string]bool{n.KafkaAddr(): true, n.ControllerAddr(): true, n.HTTPAddr(): true}
	if len(addrs) != 3 {
		t.Fatalf("ports not distinct: %v %v %v", n.KafkaAddr(), n.ControllerAddr(), n.HTTPAddr())
	}
	for a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("address %q not on 127.0.0.1", a)
		}
	}
	if n.ID() != 7 || !n.Running() || n.Pid() == 0 {
		t.Fatalf("ID=%d Running=%v Pid=%d", n.ID(), n.Running(), n.Pid())
	}
	if err := n.CheckReady(); err != nil {
		t.Fatal(err)
	}
	if err := dialable(n.Brokers()); err != nil {
		t.Fatal(err)
	}
	first := starts(t, n.DataDir())
	want := fmt.Sprintf("kafka=%s controller=%s http=%s level=info extra=x", n.KafkaAddr(), n.ControllerAddr(), n.HTTPAddr())
	if len(first) != 1 || !strings.Contains(first[0], want) {
		t.Fatalf("fake saw %q, want it to contain %q", first, want)
	}

	pid := n.Pid()
	n.Kill()
	if n.Running() {
		t.Fatal("Running after Kill")
	}
	if err := dialable(n.Brokers()); err == nil {
		t.Fatal("Kafka port still accepts after Kill")
	}
	if err := n.kill(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second kill: %v, want ErrNotRunning", err)
	}

	n.Restart()
	if n.Pid() == pid || !n.Running() {
		t.Fatalf("after Restart: pid %d (was %d), running %v", n.Pid(), pid, n.Running())
	}
	second := starts(t, n.DataDir())
	if len(second) != 2 || !strings.Contains(second[1], want) {
		t.Fatalf("restart did not reuse ports and data dir: %q", second)
	}

	// Restart of a running node stops it cleanly first.
	n.Restart()
	if got := starts(t, n.DataDir()); len(got) != 3 {
		t.Fatalf("starts after second Restart: %q", got)
	}
	n.Stop()
	if n.Running() {
		t.Fatal("Running after Stop")
	}
	log, err := os.ReadFile(n.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	// Three runs in one file, each marked, the last two ending on SIGTERM.
	if got := strings.Count(string(log), "=== testcluster: start "); got != 3 {
		t.Fatalf("%d start markers in log:\n%s", got, log)
	}
	if got := strings.Count(string(log), "fake: SIGTERM"); got != 2 {
		t.Fatalf("%d SIGTERM lines in log:\n%s", got, log)
	}
}

func TestStopReportsUncleanExit(t *testing.T) {
	n := Start(t, fakeOptions(t, fakeBadExit))
	if err := n.stop(); !errors.Is(err, ErrUncleanExit) || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("stop: %v, want ErrUncleanExit with the status", err)
	}
	if n.Running() {
		t.Fatal("running after stop")
	}
}

func TestStopKillsAfterTimeout(t *testing.T) {
	opts := fakeOptions(t, fakeIgnoreTerm)
	opts.StopTimeout = 200 * time.Millisecond
	n := Start(t, opts)
	if err := n.stop(); !errors.Is(err, ErrUncleanExit) || !strings.Contains(err.Error(), "after SIGTERM") {
		t.Fatalf("stop: %v, want ErrUncleanExit after the timeout", err)
	}
	if n.Running() {
		t.Fatal("running after a timed-out stop")
	}
}

func TestStartFailsFastWhenNodeExits(t *testing.T) {
	opts := fakeOptions(t, fakeExit)
	opts.ReadyTimeout = time.Minute
	begin := time.Now()
	n, err := start(t, opts)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("start: %v, want ErrExited with the status", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("start took %v: it waited for the ready deadline instead of the exit", d)
	}
	if n != nil {
		t.Fatalf("start returned a node with its error")
	}
}

func TestStartNotReadyKillsNode(t *testing.T) {
	opts := fakeOptions(t, fakeNeverReady)
	opts.ReadyTimeout = 300 * time.Millisecond
	opts.DataDir = t.TempDir()
	_, err := start(t, opts)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("start: %v, want ErrNotReady naming the last answer", err)
	}
	// The process that never got ready must be gone: its pid is in the
	// fake's record, and signal 0 probes for it.
	line := starts(t, opts.DataDir)[0]
	var pid int
	if _, err := fmt.Sscanf(line, "pid=%d", &pid); err != nil {
		t.Fatalf("parsing %q: %v", line, err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if err := syscall.Kill(pid, 0); err == nil {
			return fmt.Errorf("pid %d still alive", pid)
		}
		return nil
	})
}

func TestStartRetriesWhenPortTaken(t *testing.T) {
	opts := fakeOptions(t, fakePortTaken)
	opts.DataDir = t.TempDir()
	n := Start(t, opts)
	lines := starts(t, opts.DataDir)
	if len(lines) != 2 {
		t.Fatalf("want a failed start and a good one, got %q", lines)
	}
	if !strings.Contains(lines[1], "kafka="+n.KafkaAddr()) || strings.Contains(lines[0], "kafka="+n.KafkaAddr()) {
		t.Fatalf("the retry did not take fresh ports: %q (node on %s)", lines, n.KafkaAddr())
	}
}

func TestKillAfterCrashReportsExit(t *testing.T) {
	n := Start(t, fakeOptions(t, fakeOK))
	// Something other than the test kills it: a crash, as far as the
	// test is concerned.
	if err := syscall.Kill(n.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n.Running() {
			return errors.New("still running")
		}
		return nil
	})
	for name, op := range map[string]func() error{"kill": n.kill, "stop": n.stop} {
		if err := op(); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("%s after a crash: %v, want ErrExited with the signal", name, err)
		}
	}
	// Restart brings it back anyway: a crashed node is restarted.
	n.Restart()
	if !n.Running() {
		t.Fatal("not running after Restart")
	}
}

func TestInheritedFjordEnvIsDropped(t *testing.T) {
	t.Setenv("FJORD_DATA_DIR", "/should/not/be/seen")
	opts := fakeOptions(t, fakeOK)
	opts.Env = append(opts.Env, "FJORD_GIVEN=1")
	n := Start(t, opts)
	line := starts(t, n.DataDir())[0]
	if !strings.Contains(line, "env=[FJORD_GIVEN=1]") {
		t.Fatalf("fake saw %q: want only the FJORD_ variables given in Options.Env", line)
	}
}

// recordingTB stands in for the test so cleanup's behaviour on failure can
// be observed without failing the real test.
type recordingTB struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool     { return r.failed }
func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestCleanupKillsAndPrintsTailOnFailure(t *testing.T) {
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", failed), func(t *testing.T) {
			rt := &recordingTB{TB: t}
			n, err := start(rt, fakeOptions(t, fakeOK))
			if err != nil {
				t.Fatal(err)
			}
			pid := n.Pid()
			rt.failed = failed
			rt.runCleanups()
			if n.Running() {
				t.Fatal("cleanup left the node running")
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Fatalf("pid %d alive after cleanup", pid)
			}
			printed := strings.Join(rt.logs, "\n")
			if failed != strings.Contains(printed, "fake: serving on "+n.KafkaAddr()) {
				t.Fatalf("failed=%v, cleanup logged %q", failed, printed)
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c"},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc\n", 10, "a\nb\nc"},
		{"\nb\n", 1, "b"},
		{"\nb\n", 2, "\nb"},
	} {
		if got := lastLines([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestBinaryFromEnv(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinaryEnv, exe)
	if got, err := binary(); err != nil || got != exe {
		t.Fatalf("binary() = %q, %v; want %q", got, err, exe)
	}
	notExec := filepath.Join(t.TempDir(), "fjord")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinaryEnv, notExec)
	if _, err := binary(); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("binary() with a non-executable: %v", err)
	}
	t.Setenv(BinaryEnv, filepath.Join(t.TempDir(), "missing"))
	if _, err := binary(); err == nil {
		t.Fatal("binary() with a missing file: no error")
	}
}
