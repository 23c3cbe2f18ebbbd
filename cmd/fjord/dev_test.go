package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// `fjord dev` as a user runs it: a real process (this test binary run as
// fjord, see TestMain) whose nodes are real `fjord serve` children of
// it, driven by the README's local-cluster lines through sh, stopped
// with the signals a terminal and a kill send. Whether a node is gone is
// read from /proc: a process that has exited but that nobody reaped (a
// node whose dev was SIGKILLed is reparented to pid 1, which need not
// reap) holds no port and no file, and counts as gone.

const (
	// devBannerTimeout bounds a start: three nodes on a busy machine
	// are ready in seconds; dev's own bound is a minute.
	devBannerTimeout = 90 * time.Second
	// devExitTimeout bounds dev's exit after SIGINT: its nodes' stop is
	// bounded at 15 s, then it kills them.
	devExitTimeout = 30 * time.Second
)

// devRun is one running `fjord dev`.
type devRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *testutil.Buffer
	stderr *testutil.Buffer
	done   chan struct{} // closed once cmd.Wait returned; err is then set
	err    error

	// From the banner.
	brokers string
	nodes   []devBannerNode
}

// devBannerNode is one row of the banner's table.
type devBannerNode struct {
	id, pid                     int
	kafka, controller, httpAddr string
	log                         string
}

// startDev runs `fjord dev args...` in dir, as ./fjord (the name the
// banner's commands then use, and the wrapper the README's lines run),
// and waits for its banner. dev is SIGKILLed at the end of the test if
// it still runs, and so, by Pdeathsig, are its nodes; any node of dir
// still alive after that is killed too, so no exit path leaves one.
func startDev(t *testing.T, dir string, args ...string) *devRun {
	t.Helper()
	d := &devRun{t: t, stdout: &testutil.Buffer{}, stderr: &testutil.Buffer{}, done: make(chan struct{})}
	d.cmd = fjordCommand(t, append([]string{"dev"}, args...)...)
	d.cmd.Args[0] = "./fjord"
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = d.stdout, d.stderr
	// dev's own attributes: its own process group, so a signal meant
	// for the test's group does not reach it, and on Linux it dies with
	// the test binary (a panic, go test's -timeout), taking its nodes.
	d.cmd.SysProcAttr = nodeProcAttr()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		killLeftovers(t, dir)
		if t.Failed() {
			t.Logf("fjord dev %s in %s:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), dir, d.stdout, d.stderr)
		}
	})
	d.waitBanner()
	return d
}

var (
	devBrokersLine = regexp.MustCompile(`(?m)^Bootstrap servers: (\S+)$`)
	devNodeRow     = regexp.MustCompile(`(?m)^(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+http://(\S+)\s+(\S+)$`)
)

// waitBanner waits for the banner's last line and parses the banner.
func (d *devRun) waitBanner() {
	d.t.Helper()
	deadline := time.After(devBannerTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(d.stdout.String(), "Ctrl-C stops every node.") {
		select {
		case <-d.done: // dev gave up: its stderr says why
			d.t.Fatalf("fjord dev exited before its banner (%v):\n%s%s", d.err, d.stdout, d.stderr)
		case <-deadline: // too slow
			d.t.Fatalf("no banner from fjord dev within %v:\n%s%s", devBannerTimeout, d.stdout, d.stderr)
		case <-tick.C: // look again
		}
	}
	out := d.stdout.String()
	m := devBrokersLine.FindStringSubmatch(out)
	if m == nil {
		d.t.Fatalf("no bootstrap servers in the banner:\n%s", out)
	}
	d.brokers = m[1]
	for _, r := range devNodeRow.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.Atoi(r[1])
		pid, _ := strconv.Atoi(r[2])
		d.nodes = append(d.nodes, devBannerNode{id: id, pid: pid, kafka: r[3], controller: r[4], httpAddr: r[5], log: r[6]})
	}
	var kafka []string
	for i, n := range d.nodes {
		if n.id != i+1 || n.pid <= 0 {
			d.t.Fatalf("banner row %d is node %d, pid %d:\n%s", i+1, n.id, n.pid, out)
		}
		kafka = append(kafka, n.kafka)
	}
	if got := strings.Join(kafka, ","); got != d.brokers {
		d.t.Fatalf("bootstrap servers %s are not the nodes' Kafka addresses %s:\n%s", d.brokers, got, out)
	}
}

// interrupt sends SIGINT, as Ctrl-C does, and requires a clean exit
// within devExitTimeout with every node gone and every port free.
func (d *devRun) interrupt() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(devExitTimeout):
		d.t.Fatalf("fjord dev still running %v after SIGINT:\n%s", devExitTimeout, d.stderr)
	}
	if d.err != nil {
		d.t.Fatalf("fjord dev exited with %v after SIGINT, want 0:\n%s", d.err, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), "every node stopped") {
		d.t.Errorf("stderr does not say the nodes stopped:\n%s", d.stderr)
	}
	// dev reaped its children, so they are gone now, not eventually.
	if err := d.gone(); err != nil {
		d.t.Error(err)
	}
}

// gone says which node's process or listener is left, if any.
func (d *devRun) gone() error {
	var errs []error
	for _, n := range d.nodes {
		if processAlive(n.pid) {
			errs = append(errs, fmt.Errorf("node %d (pid %d) is still running", n.id, n.pid))
		}
		for _, addr := range []string{n.kafka, n.controller, n.httpAddr} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("node %d's address %s cannot be bound again: %v", n.id, addr, err))
				continue
			}
			l.Close()
		}
	}
	return errors.Join(errs...)
}

// processAlive reports whether pid is a live process: one of whose
// threads is neither a zombie nor dead. The thread group's leader shows
// Z as soon as it has exited itself, while the other threads may still
// be tearing down and holding the process's sockets, so every thread
// is asked.
func processAlive(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false // no such process (or no /proc)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // exited while we looked
		}
		// tid (comm) state ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// processesUsing returns the live processes whose command line names
// dir: every node of a dev cluster in dir has its data directory under
// it on its command line.
func processesUsing(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), dir) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killLeftovers SIGKILLs whatever still runs with dir on its command
// line, and fails the test if there was any: a test's cleanup must not
// leave a node, nor hide that one was left.
func killLeftovers(t *testing.T, dir string) {
	for _, pid := range processesUsing(dir) {
		t.Errorf("pid %d, a process of %s, was still running at the end of the test: killed", pid, dir)
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}

// readmeBlock returns the non-empty lines of README's sh block between
// <!-- name:begin --> and <!-- name:end -->.
func readmeBlock(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(name) + ":begin -->\n```sh\n(.*?)```\n<!-- " + regexp.QuoteMeta(name) + ":end -->")
	m := re.FindSubmatch(raw)
	if m == nil {
		t.Fatalf("README.md has no %s block", name)
	}
	var lines []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// withoutComment cuts a README line's trailing "   # comment".
func withoutComment(line string) string {
	return strings.TrimSpace(regexp.MustCompile(`\s+#[^']*$`).ReplaceAllString(line, ""))
}

// writeFjordWrapper makes dir/fjord run this test binary as fjord, for
// the README's ./fjord lines.
func writeFjordWrapper(t *testing.T, dir string) {
	t.Helper()
	wrapper := "#!/bin/sh\nFJORD_TEST_RUN_MAIN=1 exec '" + os.Args[0] + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "fjord"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The acceptance point 8: `fjord dev --nodes 3` (the README's
// line), then the README's topic, produce and consume lines against the
// bootstrap servers it printed: the records come back, each partition
// on three replicas. SIGINT stops it with exit 0, no node left and every
// port free. The directory then refuses another node count, and a run
// without flags starts the same cluster, same ports, same records.
func TestDevCluster(t *testing.T) {
	start := readmeBlock(t, "dev-start")
	if len(start) != 1 {
		t.Fatalf("README's dev-start block has %d lines, want the one fjord dev line: %q", len(start), start)
	}
	words := strings.Fields(withoutComment(start[0]))
	if len(words) < 2 || words[0] != "./fjord" || words[1] != "dev" {
		t.Fatalf("README's dev-start line is not ./fjord dev: %q", start[0])
	}
	try := readmeBlock(t, "dev-try")
	if len(try) < 4 {
		t.Fatalf("README's dev-try block has %d lines:\n%s", len(try), strings.Join(try, "\n"))
	}

	// The README's data directory, the default ./fjord-dev, lands in
	// the test's directory, which is dev's working directory.
	dir := t.TempDir()
	writeFjordWrapper(t, dir)
	d := startDev(t, dir, words[2:]...)
	if len(d.nodes) != 3 {
		t.Fatalf("banner lists %d nodes, want 3:\n%s", len(d.nodes), d.stdout)
	}
	if !strings.Contains(d.stdout.String(), "export FJORD_BROKERS="+d.brokers+"\n") {
		t.Errorf("banner has no export FJORD_BROKERS=%s line:\n%s", d.brokers, d.stdout)
	}
	for _, n := range d.nodes {
		if want := filepath.Join("fjord-dev", fmt.Sprintf("node-%d.log", n.id)); n.log != want {
			t.Errorf("node %d's log is %s, want %s", n.id, n.log, want)
		} else if st, err := os.Stat(filepath.Join(dir, want)); err != nil || st.Size() == 0 {
			t.Errorf("node %d's log %s is missing or empty: %v", n.id, want, err)
		}
	}

	var consumed, described, cluster string
	for _, l := range try {
		// Each README line is one of the banner's, which give the
		// brokers as a flag rather than in the environment.
		if want := "  " + withoutComment(l) + " --brokers " + d.brokers + "\n"; !strings.Contains(d.stdout.String(), want) {
			t.Errorf("the banner does not offer README's line %q as\n%s\nbanner:\n%s", l, want, d.stdout)
		}
		c := exec.Command("sh", "-c", l)
		c.Dir = dir
		c.Env = append(os.Environ(), "FJORD_BROKERS="+d.brokers)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", l, err, b)
		}
		switch {
		case strings.Contains(l, "fjord consume"):
			consumed = string(b)
		case strings.Contains(l, "fjord topic describe"):
			described = string(b)
		case strings.Contains(l, "fjord cluster describe"):
			cluster = string(b)
		}
	}
	requireGreetings(t, consumed)
	rows := describeRows(t, described)
	if len(rows) != 3 {
		t.Fatalf("topic describe shows %d partitions, want 3:\n%s", len(rows), described)
	}
	for p, f := range rows {
		// PARTITION LEADER EPOCH REPLICAS ISR LOG-START LOG-END STATUS
		if len(f) != 8 || len(strings.Split(f[3], ",")) != 3 || len(strings.Split(f[4], ",")) != 3 || f[7] != "ok" {
			t.Errorf("partition %d: %v, want three replicas, all in the ISR, ok", p, f)
		}
	}
	for _, want := range []string{"Brokers: 3\n", "voters 1, 2, 3,"} {
		if !strings.Contains(cluster, want) {
			t.Errorf("cluster describe does not say %q:\n%s", want, cluster)
		}
	}

	d.interrupt()
	if pids := processesUsing(dir); len(pids) > 0 {
		t.Errorf("processes %v of %s still running after dev exited", pids, dir)
	}

	// Another node count against the directory: refused, nothing
	// started.
	r := runDevOnce(t, dir, "--nodes", "2")
	requireDevError(t, r, "--nodes 2: --data-dir fjord-dev holds a cluster of 3 nodes (fjord-dev/dev-cluster.json)")
	if pids := processesUsing(dir); len(pids) > 0 {
		t.Errorf("a refused dev left processes %v running", pids)
	}

	// Again, without flags: the same cluster, its data kept.
	again := startDev(t, dir)
	if again.brokers != d.brokers || len(again.nodes) != 3 {
		t.Errorf("second run's bootstrap servers %s, want the first run's %s", again.brokers, d.brokers)
	}
	for i, n := range again.nodes {
		if old := d.nodes[i]; n.kafka != old.kafka || n.controller != old.controller || n.httpAddr != old.httpAddr {
			t.Errorf("node %d moved from %+v to %+v", n.id, old, n)
		}
	}
	c := exec.Command("sh", "-c", "./fjord consume greetings --from-beginning --max-messages 3 --format '%p/%o %k=%v\\n' --brokers "+again.brokers)
	c.Dir = dir
	b, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("consuming from the restarted cluster: %v\n%s", err, b)
	}
	requireGreetings(t, string(b))
	again.interrupt()
}

// requireGreetings checks the README's three records, alice's two in
// one partition in the order written.
func requireGreetings(t *testing.T, printed string) {
	t.Helper()
	got := regexp.MustCompile(`(?m)^\d+/\d+ \w+=\w+$`).FindAllString(printed, -1)
	if len(got) != 3 {
		t.Fatalf("consume printed %d records, want 3:\n%s", len(got), printed)
	}
	part := func(s string) string { return s[:strings.IndexByte(s, '/')] }
	var alice []string
	for _, r := range got {
		if strings.HasSuffix(r, "alice=hello") || strings.HasSuffix(r, "alice=bye") {
			alice = append(alice, r)
		}
	}
	if len(alice) != 2 || part(alice[0]) != part(alice[1]) || !strings.HasSuffix(alice[0], "hello") {
		t.Errorf("alice's records not in one partition in order: %v", got)
	}
}

// A dev killed with SIGKILL, which it cannot catch, takes its nodes
// with it (Pdeathsig): no node runs on, no port stays taken.
func TestDevKilledLeavesNoNode(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "--nodes", "3", "--data-dir", filepath.Join(dir, "cluster"))
	if len(d.nodes) != 3 {
		t.Fatalf("banner lists %d nodes, want 3:\n%s", len(d.nodes), d.stdout)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	// The kernel signals the nodes as dev dies; they are gone, and
	// their ports free, an instant later.
	testutil.Eventually(t, 10*time.Second, d.gone)
	if pids := processesUsing(dir); len(pids) > 0 {
		t.Errorf("processes %v of %s still running after dev was killed", pids, dir)
	}
}

// A node that dies under dev (SIGKILL, as the OOM killer would) is
// named with how it ended; dev stops the others and exits 1.
func TestDevNodeDiesStopsTheRest(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "--nodes", "3", "--data-dir", filepath.Join(dir, "cluster"))
	if len(d.nodes) != 3 {
		t.Fatalf("banner lists %d nodes, want 3:\n%s", len(d.nodes), d.stdout)
	}
	victim, err := os.FindProcess(d.nodes[1].pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(devExitTimeout):
		t.Fatalf("fjord dev still running %v after node 2 died:\n%s", devExitTimeout, d.stderr)
	}
	var exit *exec.ExitError
	if !errors.As(d.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("fjord dev exited with %v after node 2 died, want status 1", d.err)
	}
	if want := "fjord: node 2 exited by itself (signal: killed; log " + filepath.Join(dir, "cluster", "node-2.log") + "); stopped the other nodes"; !strings.Contains(d.stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, d.stderr)
	}
	if err := d.gone(); err != nil {
		t.Error(err)
	}
}

type devResult struct {
	stdout, stderr string
	err            error
}

// runDevOnce runs `fjord dev args...` in dir that must fail before it
// starts a cluster; a run that instead starts one is stopped at once.
func runDevOnce(t *testing.T, dir string, args ...string) devResult {
	t.Helper()
	cmd := fjordCommand(t, append([]string{"dev"}, args...)...)
	cmd.Dir = dir
	cmd.SysProcAttr = nodeProcAttr()
	var stdout, stderr testutil.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return devResult{stdout.String(), stderr.String(), err}
	case <-time.After(devBannerTimeout):
		cmd.Process.Kill()
		<-done
		killLeftovers(t, dir)
		t.Fatalf("fjord dev %s did not exit:\n%s%s", strings.Join(args, " "), &stdout, &stderr)
		return devResult{}
	}
}

// requireDevError checks a refusal: exit 1, nothing on stdout, one line
// on stderr saying want.
func requireDevError(t *testing.T, r devResult, want string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit %v, want status 1\nstderr:\n%s", r.err, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout is not empty:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
		t.Errorf("error is %d lines, want one:\n%s", n+1, r.stderr)
	}
}

// Bad input: each a one-line error and exit 1 before any node starts,
// so no process names the data directory, and a refused run makes no
// directory.
func TestDevBadInput(t *testing.T) {
	// A port held by this test: node 1's Kafka port of a --base-port
	// layout, the first dev checks, so no other port of the layout can
	// be found taken first.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	if heldPort > 65535-2*devPortStride-2 {
		t.Fatalf("port %d leaves no room for a three-node --base-port layout", heldPort)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		setup func(t *testing.T, dataDir string) // nil: the directory does not exist
		want  string
	}{
		{name: "no nodes", args: []string{"--nodes", "0"},
			want: `invalid argument "0" for "--nodes" flag: allowed: an integer from 1 to 9`},
		{name: "too many nodes", args: []string{"--nodes", "10"},
			want: `invalid argument "10" for "--nodes" flag: allowed: an integer from 1 to 9`},
		{name: "nodes not a number", args: []string{"--nodes", "x"},
			want: `invalid argument "x" for "--nodes" flag: allowed: an integer from 1 to 9`},
		{name: "taken port", args: []string{"--base-port", strconv.Itoa(heldPort)},
			want: fmt.Sprintf("127.0.0.1:%d (node 1's Kafka listener) is in use: choose another --base-port", heldPort)},
		{name: "ports past 65535", args: []string{"--base-port", "65530"},
			want: "--base-port 65530: node 3's HTTP port would be 65552"},
		{name: "negative restart delay", args: []string{"--restart-killed-after", "-1s"},
			want: "--restart-killed-after -1s: allowed: 0 (a killed node stops the others) to 1h"},
		{name: "restart delay past an hour", args: []string{"--restart-killed-after", "2h"},
			want: "--restart-killed-after 2h0m0s: allowed: 0 (a killed node stops the others) to 1h"},
		{name: "restart delay not a duration", args: []string{"--restart-killed-after", "soon"},
			want: `invalid argument "soon" for "--restart-killed-after" flag`},
		{name: "wildcard host", args: []string{"--host", "0.0.0.0"},
			want: "--host 0.0.0.0: give an address the clients and the other nodes can dial"},
		{name: "data dir is a file", want: "is a file, not a directory",
			setup: func(t *testing.T, dataDir string) {
				if err := os.WriteFile(dataDir, []byte("not a directory\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "data dir of something else", want: "holds files but no dev-cluster.json, so fjord dev did not make it",
			setup: func(t *testing.T, dataDir string) {
				if err := os.MkdirAll(filepath.Join(dataDir, "metadata"), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "data dir of another node count", args: []string{"--nodes", "3"},
			want: "holds a cluster of 1 node (",
			setup: func(t *testing.T, dataDir string) {
				// What dev writes first for a cluster of one.
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := writeDevLayout(dataDir, baseLayout("127.0.0.1", 1, heldPort)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "damaged layout file", want: "is not a dev cluster's layout",
			setup: func(t *testing.T, dataDir string) {
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dataDir, devLayoutFile), []byte(`{"host": "127.0.0.1", "nodes": [{"id": 2}]}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dataDir := filepath.Join(dir, "cluster")
			if tc.setup != nil {
				tc.setup(t, dataDir)
			}
			r := runDevOnce(t, dir, append(tc.args, "--data-dir", dataDir)...)
			requireDevError(t, r, tc.want)
			killLeftovers(t, dir)
			if tc.setup == nil {
				if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused dev made its data directory (%v)", err)
				}
			}
		})
	}
}

// planDevLayout's decisions, without processes: what a new directory,
// --base-port and a saved layout give, and what a saved layout refuses.
func TestDevLayoutPlan(t *testing.T) {
	saved := baseLayout("127.0.0.1", 3, 19092)
	for _, tc := range []struct {
		name  string
		saved *devLayout
		o     devOptions
		want  devLayout // compared when wantErr is ""
		// fresh: the plan leaves the ports to be picked.
		fresh   bool
		wantErr string
	}{
		{name: "new, free ports", o: devOptions{nodes: 3, host: "127.0.0.1"}, fresh: true},
		{name: "new, base port", o: devOptions{nodes: 3, host: "127.0.0.1", basePort: 19092}, want: saved},
		{name: "saved, no flags", saved: &saved, o: devOptions{nodes: 3, host: "127.0.0.1"}, want: saved},
		{name: "saved, defaults differ but not given", saved: &saved, o: devOptions{nodes: 5, host: "localhost"}, want: saved},
		{name: "saved, same flags", saved: &saved, o: devOptions{nodes: 3, nodesGiven: true, host: "127.0.0.1", hostGiven: true, basePort: 19092}, want: saved},
		{name: "saved, other count", saved: &saved, o: devOptions{nodes: 5, nodesGiven: true, host: "127.0.0.1"},
			wantErr: "--nodes 5: --data-dir d holds a cluster of 3 nodes"},
		{name: "saved, other host", saved: &saved, o: devOptions{nodes: 3, host: "localhost", hostGiven: true},
			wantErr: "--host localhost: --data-dir d holds a cluster on 127.0.0.1"},
		{name: "saved, other base port", saved: &saved, o: devOptions{nodes: 3, host: "127.0.0.1", basePort: 20000},
			wantErr: "--base-port 20000: --data-dir d holds a cluster on other ports"},
		{name: "base port too high", o: devOptions{nodes: 9, host: "127.0.0.1", basePort: 65510},
			wantErr: "node 9's HTTP port would be 65538; allowed: at most 65507 for 9 nodes"},
		{name: "IPv6 wildcard", o: devOptions{nodes: 3, host: "::"}, wantErr: "--host ::: give an address"},
		{name: "host with a space", o: devOptions{nodes: 3, host: "my host"}, wantErr: "not an address the nodes can dial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planDevLayout(tc.saved, tc.o, "d")
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.fresh:
				if !got.needsPorts() || len(got.Nodes) != int(tc.o.nodes) {
					t.Fatalf("plan %+v, want %d nodes whose ports are to be picked", got, tc.o.nodes)
				}
				if err := checkLayout(got.withPorts([]int{1, 2, 3, 4, 5, 6, 7, 8, 9})); err != nil {
					t.Errorf("picked ports make a bad layout: %v", err)
				}
			case !sameLayout(got, tc.want):
				t.Fatalf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := saved.voters(); got != "1@127.0.0.1:19102,2@127.0.0.1:19103,3@127.0.0.1:19104" {
		t.Errorf("voters %s", got)
	}
	if got := baseLayout("127.0.0.1", 1, 19092).voters(); got != "" {
		t.Errorf("a cluster of one has voters %q, want none (serve's lone voter)", got)
	}
}
