package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/tlsconf"
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
	devNodeRow     = regexp.MustCompile(`(?m)^(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+https?://(\S+)\s+(\S+)$`)
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

// The issue's acceptance point 8: `fjord dev --nodes 3` (the README's
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
		{name: "tls user without tls", args: []string{"--tls-user", "alice"},
			want: `--tls-user "alice": needs --tls`},
		{name: "tls user with a separator", args: []string{"--tls", "--tls-user", "a;b"},
			want: `--tls-user "a;b": allowed: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`},
		{name: "empty tls user", args: []string{"--tls", "--tls-user", ""},
			want: `--tls-user "": allowed: 1 to 64 letters`},
		{name: "tls user is the nodes'", args: []string{"--tls", "--tls-user", "broker"},
			want: "--tls-user broker: that is the nodes' own user; choose another name"},
		{name: "tls not a bool", args: []string{"--tls=maybe"},
			want: `invalid argument "maybe" for "--tls" flag: allowed: true or false`},
		{name: "tls on a plaintext cluster", args: []string{"--tls"},
			want: "holds a cluster made without --tls (",
			setup: func(t *testing.T, dataDir string) {
				// A cluster of one as dev wrote it before --tls.
				writeRawLayout(t, dataDir, fmt.Sprintf(`{"host": "127.0.0.1", "nodes": [{"id": 1, "kafka_port": %d, "controller_port": %d, "http_port": %d}]}`,
					heldPort, heldPort+devPortStride, heldPort+2*devPortStride))
			}},
		{name: "no tls on a tls cluster",
			want: "holds a cluster made with --tls (",
			setup: func(t *testing.T, dataDir string) {
				l := baseLayout("127.0.0.1", 1, heldPort)
				l.TLS = &devLayoutTLS{User: "dev"}
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := writeDevLayout(dataDir, l); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "another tls user", args: []string{"--tls", "--tls-user", "alice"},
			want: "--tls-user alice: --data-dir ",
			setup: func(t *testing.T, dataDir string) {
				l := baseLayout("127.0.0.1", 1, heldPort)
				l.TLS = &devLayoutTLS{User: "dev"}
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := writeDevLayout(dataDir, l); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "layout with a bad tls user", args: []string{"--tls"}, want: `its tls user "a,b" is not one fjord dev makes`,
			setup: func(t *testing.T, dataDir string) {
				writeRawLayout(t, dataDir, fmt.Sprintf(`{"host": "127.0.0.1", "nodes": [{"id": 1, "kafka_port": %d, "controller_port": %d, "http_port": %d}], "tls": {"user": "a,b"}}`,
					heldPort, heldPort+devPortStride, heldPort+2*devPortStride))
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

// writeRawLayout writes dev-cluster.json as given, as an older dev or a
// hand edit left it.
func writeRawLayout(t *testing.T, dataDir, layout string) {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, devLayoutFile), []byte(layout), 0o644); err != nil {
		t.Fatal(err)
	}
}

// planDevLayout's decisions, without processes: what a new directory,
// --base-port and a saved layout give, and what a saved layout refuses.
func TestDevLayoutPlan(t *testing.T) {
	saved := baseLayout("127.0.0.1", 3, 19092)
	secured := baseLayout("127.0.0.1", 3, 19092)
	secured.TLS = &devLayoutTLS{User: "dev"}
	for _, tc := range []struct {
		name  string
		saved *devLayout
		o     devOptions
		want  devLayout // compared when wantErr is ""
		// fresh: the plan leaves the ports to be picked.
		fresh   bool
		wantErr string
		// wantTLSUser is the plan's --tls user, "" for a plaintext
		// cluster.
		wantTLSUser string
	}{
		{name: "new, tls", o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "dev"}, fresh: true, wantTLSUser: "dev"},
		{name: "new, tls, base port, own user", o: devOptions{nodes: 3, host: "127.0.0.1", basePort: 19092, tls: true, tlsUser: "alice", tlsUserGiven: true},
			want: saved, wantTLSUser: "alice"},
		{name: "saved tls, tls", saved: &secured, o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "dev"}, want: saved, wantTLSUser: "dev"},
		{name: "saved tls, default user not given", saved: &secured, o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "other"},
			want: saved, wantTLSUser: "dev"},
		{name: "saved tls, same user given", saved: &secured, o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "dev", tlsUserGiven: true},
			want: saved, wantTLSUser: "dev"},
		{name: "saved tls, other user", saved: &secured, o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "alice", tlsUserGiven: true},
			wantErr: "--tls-user alice: --data-dir d holds a cluster made for user dev (d/dev-cluster.json): leave --tls-user out to run it"},
		{name: "saved tls, no tls", saved: &secured, o: devOptions{nodes: 3, host: "127.0.0.1"},
			wantErr: "--data-dir d holds a cluster made with --tls (d/dev-cluster.json): run it with --tls, give another --data-dir, or remove d to start over"},
		{name: "saved plaintext, tls", saved: &saved, o: devOptions{nodes: 3, host: "127.0.0.1", tls: true, tlsUser: "dev"},
			wantErr: "--tls: --data-dir d holds a cluster made without --tls (d/dev-cluster.json), which cannot take it on: leave --tls out to run it"},
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
			if tc.wantErr != "" {
				return
			}
			switch {
			case tc.wantTLSUser == "" && got.TLS != nil:
				t.Errorf("plan is --tls for user %s, want a plaintext cluster", got.TLS.User)
			case tc.wantTLSUser != "" && (got.TLS == nil || got.TLS.User != tc.wantTLSUser):
				t.Errorf("plan's tls %+v, want --tls for user %s", got.TLS, tc.wantTLSUser)
			case tc.fresh && tc.wantTLSUser != "" && got.withPorts([]int{1, 2, 3, 4, 5, 6, 7, 8, 9}).TLS != got.TLS:
				t.Errorf("picking ports dropped the tls setting")
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

// dev-cluster.json as dev wrote it before --tls existed still opens, as
// a plaintext cluster; a plaintext layout is still written without a
// tls key (an older dev reads it), and a --tls one keeps its user.
func TestDevLayoutFileCompat(t *testing.T) {
	dir := t.TempDir()
	old := `{
  "host": "127.0.0.1",
  "nodes": [
    {
      "id": 1,
      "kafka_port": 19092,
      "controller_port": 19102,
      "http_port": 19112
    }
  ]
}
`
	writeRawLayout(t, dir, old)
	l, err := openDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.TLS != nil || !sameLayout(*l, baseLayout("127.0.0.1", 1, 19092)) {
		t.Fatalf("the old layout read as %+v (tls %+v), want the plaintext cluster of one on 19092", l, l.TLS)
	}
	if err := writeDevLayout(dir, *l); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, devLayoutFile)); err != nil || string(b) != old {
		t.Errorf("a plaintext layout is written as\n%s\nwant the old format\n%s(%v)", b, old, err)
	}

	l.TLS = &devLayoutTLS{User: "alice"}
	if err := writeDevLayout(dir, *l); err != nil {
		t.Fatal(err)
	}
	back, err := openDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.TLS == nil || back.TLS.User != "alice" {
		t.Errorf("a --tls layout read back with tls %+v, want user alice", back.TLS)
	}
}

// fileMode is path's permission bits.
func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// prepareDevTLS without processes: what a first start makes and with
// which modes, what a restart reuses, and what it remakes (a missing,
// expired, foreign or wrong-host node certificate; a CA without its key
// or about to expire) or refuses (a damaged CA, a password lost after
// the users were made), each saying why.
func TestDevTLSFiles(t *testing.T) {
	absDir := t.TempDir()
	l := baseLayout("127.0.0.1", 1, 19092)
	l.TLS = &devLayoutTLS{User: "dev"}
	now := time.Now()
	first, err := prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if !first.newCA || !first.newCert || !first.newUser || !first.newBroker {
		t.Fatalf("a first start made CA %v, certificate %v, users %v/%v; want all", first.newCA, first.newCert, first.newUser, first.newBroker)
	}
	if notes := strings.Join(first.notes(), "\n"); !strings.Contains(notes, "made a CA, "+first.caFile+" (SHA-256 "+first.caFingerprint+")") ||
		!strings.Contains(notes, "issued the node certificate "+first.certFile) || !strings.Contains(notes, "made the SCRAM users dev") {
		t.Errorf("first start's notes:\n%s", notes)
	}
	tlsDir := filepath.Join(absDir, devTLSDir)
	for name, want := range map[string]os.FileMode{
		".": 0o700, "ca.key": 0o600, "node.key": 0o600, "dev.password": 0o600, "broker.password": 0o600, "client.properties": 0o600,
		"ca.crt": 0o644, "node.crt": 0o644,
	} {
		if got := fileMode(t, filepath.Join(tlsDir, name)); got != want {
			t.Errorf("%s has mode %v, want %v", name, got, want)
		}
	}
	if first.userPassword == first.brokerPassword || len(first.userPassword) != 32 {
		t.Errorf("passwords %q and %q: want two different 32-character ones", first.userPassword, first.brokerPassword)
	}
	props, err := os.ReadFile(first.propertiesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bootstrap.servers=127.0.0.1:19092\n", "security.protocol=SASL_SSL\n", "sasl.mechanism=SCRAM-SHA-512\n",
		"sasl.username=dev\n", "sasl.password=" + first.userPassword + "\n", "ssl.ca.location=" + first.caFile + "\n"} {
		if !strings.Contains(string(props), want) {
			t.Errorf("client.properties lacks %q:\n%s", want, props)
		}
	}
	if env := first.bootstrapEnv(); env != "FJORD_BOOTSTRAP_SCRAM_USERS=SCRAM-SHA-512=[name=broker,password="+first.brokerPassword+"] "+
		"SCRAM-SHA-512=[name=dev,password="+first.userPassword+"] SCRAM-SHA-256=[name=dev,password="+first.userPassword+"]" {
		t.Errorf("bootstrap users %q", env)
	} else if users, err := node.ParseBootstrapUsers(strings.TrimPrefix(env, "FJORD_BOOTSTRAP_SCRAM_USERS=")); err != nil || len(users) != 3 {
		t.Errorf("serve would not read the bootstrap users: %v", err)
	}

	// A node has run: from now on the users exist in its log.
	if err := os.MkdirAll(filepath.Join(absDir, "node-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	caBytes := func() string {
		b, err := os.ReadFile(first.caFile)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	firstCA := caBytes()
	again, err := prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if again.newCA || again.newCert || again.newUser || again.newBroker || again.caFingerprint != first.caFingerprint ||
		again.userPassword != first.userPassword || again.brokerPassword != first.brokerPassword {
		t.Fatalf("a restart remade files: CA %v, certificate %v, users %v/%v", again.newCA, again.newCert, again.newUser, again.newBroker)
	}
	if notes := strings.Join(again.notes(), "\n"); notes != "using the CA "+first.caFile+" (SHA-256 "+first.caFingerprint+"), valid until "+
		first.caNotAfter.UTC().Format(time.DateOnly) {
		t.Errorf("restart's notes:\n%s", notes)
	}

	ca, err := tlsconf.LoadCA(first.caFile, first.caKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := tlsconf.NewCA("another CA", time.Hour*24*365)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *tlsconf.CA, o tlsconf.IssueOptions) func(t *testing.T) {
		return func(t *testing.T) {
			cert, key, err := ca.Issue(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tlsconf.WriteFiles(tlsDir, "node", cert, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T)
		wantNote string
	}{
		{"node key missing", func(t *testing.T) { os.Remove(filepath.Join(tlsDir, "node.key")) }, "issued the node certificate "},
		{"node certificate expired", issue(ca, tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
			NotBefore: now.Add(-48 * time.Hour), ValidFor: 24 * time.Hour}), " expires " + now.Add(-24*time.Hour).UTC().Format("2006-01-02T15")},
		{"node certificate expiring within the renewal window", issue(ca, tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames: []string{"localhost"}, ValidFor: devCertRenewBefore / 2}), " expires "},
		{"node certificate for another host", issue(ca, tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(10, 1, 2, 3)}, DNSNames: []string{"localhost"}}),
			" does not serve 127.0.0.1 "},
		{"node certificate without localhost", issue(ca, tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}),
			" does not serve localhost "},
		{"node certificate of another CA", issue(otherCA, tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}),
			" is not signed by the CA fjord dev CA: issued a new one"},
		{"node key of another certificate", func(t *testing.T) {
			_, key, err := ca.Issue(tlsconf.IssueOptions{Server: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tlsDir, "node.key"), key, 0o600); err != nil {
				t.Fatal(err)
			}
		}, " cannot be used (tls: private key does not match public key): issued a new one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.damage(t)
			got, err := prepareDevTLS(absDir, l, now)
			if err != nil {
				t.Fatal(err)
			}
			if got.newCA || !got.newCert || got.caFingerprint != first.caFingerprint || caBytes() != firstCA {
				t.Errorf("new CA %v, new certificate %v: want only the certificate reissued", got.newCA, got.newCert)
			}
			if notes := strings.Join(got.notes(), "\n"); !strings.Contains(notes, tc.wantNote) {
				t.Errorf("notes do not say %q:\n%s", tc.wantNote, notes)
			}
			leaf, why := loadDevNodeCert(got.certFile, got.keyFile)
			if leaf == nil || devNodeCertProblem(leaf, ca.Certificate(), "127.0.0.1", now) != "" {
				t.Errorf("the reissued certificate does not serve: %s", why)
			}
		})
	}

	// Refusals change nothing.
	refuse := func(want string) {
		t.Helper()
		certBefore, _ := os.ReadFile(first.certFile)
		caBefore := caBytes()
		if _, err := prepareDevTLS(absDir, l, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want one saying %q", err, want)
		}
		if certAfter, _ := os.ReadFile(first.certFile); string(certAfter) != string(certBefore) || caBytes() != caBefore {
			t.Errorf("a refused start rewrote the CA or the node certificate")
		}
	}
	pw := filepath.Join(tlsDir, "dev.password")
	if err := os.Rename(pw, pw+".saved"); err != nil {
		t.Fatal(err)
	}
	refuse(pw + " is missing, and the cluster's user dev was made with the password it held: put the file back, or remove " + absDir + " to start over")
	if err := os.WriteFile(pw, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	refuse("--tls: user dev's password file: " + pw + ": empty password")
	if err := os.Rename(pw+".saved", pw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(first.caFile, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse("no PEM data: remove " + first.caFile + " and " + first.caKeyFile + " for a new CA (clients must then be given the new ca.crt)")

	// A CA that lost its key, or is about to expire, is replaced, and
	// the node certificate with it.
	if err := os.WriteFile(first.caFile, []byte(firstCA), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(first.caKeyFile); err != nil {
		t.Fatal(err)
	}
	keyless, err := prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(keyless.notes(), "\n"); !keyless.newCA || !keyless.newCert || keyless.caFingerprint == first.caFingerprint ||
		!strings.Contains(notes, "the CA "+first.caFile+" has no key "+first.caKeyFile+": made a new one (SHA-256 "+keyless.caFingerprint+
			"); give clients that trusted the old one the new file") || !strings.Contains(notes, "is not signed by the CA") {
		t.Errorf("a CA without its key: new CA %v, new certificate %v, notes:\n%s", keyless.newCA, keyless.newCert, notes)
	}
	if keyless.userPassword != first.userPassword {
		t.Errorf("a new CA changed the password")
	}
	short, err := tlsconf.NewCA("short", devCertRenewBefore/2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.WriteFiles(tlsDir, "ca", short.CertPEM(), short.KeyPEM()); err != nil {
		t.Fatal(err)
	}
	renewed, err := prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(renewed.notes(), "\n"); !renewed.newCA || !renewed.newCert ||
		!strings.Contains(notes, "the CA "+first.caFile+" expires "+short.Certificate().NotAfter.UTC().Format(time.RFC3339)+": made a new one") {
		t.Errorf("a CA about to expire: new CA %v, new certificate %v, notes:\n%s", renewed.newCA, renewed.newCert, notes)
	}
}

// The node certificate never outlives its CA: issued by a CA with less
// than devNodeCertValidity left, it ends when the CA does; by a young CA
// it gets its full validity. A certificate that outlives its CA (as one
// issued before the cap could) is reissued.
func TestDevNodeCertCappedByCA(t *testing.T) {
	now := time.Now()
	leafOf := func(t *testing.T, ca *tlsconf.CA) *x509.Certificate {
		t.Helper()
		certPEM, _, err := ca.Issue(devNodeCertOptions("127.0.0.1", ca.Certificate(), now))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	old, err := tlsconf.NewCA("old", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := leafOf(t, old)
	if !leaf.NotAfter.Equal(old.Certificate().NotAfter) {
		t.Errorf("from a CA valid until %v: certificate valid until %v, want the CA's end", old.Certificate().NotAfter, leaf.NotAfter)
	}
	if why := devNodeCertProblem(leaf, old.Certificate(), "127.0.0.1", now); why != "" {
		t.Errorf("the capped certificate is refused: %s", why)
	}
	young, err := tlsconf.NewCA("young", devCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	leaf = leafOf(t, young)
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got != devNodeCertValidity || leaf.NotBefore.After(now) {
		t.Errorf("from a young CA: valid %v from %v, want %v from before %v", got, leaf.NotBefore, devNodeCertValidity, now)
	}

	// prepareDevTLS with a CA of 30 days: the node certificate it
	// issues ends with the CA; one that outlives the CA is reissued.
	absDir := t.TempDir()
	tlsDir := filepath.Join(absDir, devTLSDir)
	if _, err := tlsconf.WriteFiles(tlsDir, "ca", old.CertPEM(), old.KeyPEM()); err != nil {
		t.Fatal(err)
	}
	l := baseLayout("127.0.0.1", 1, 19092)
	l.TLS = &devLayoutTLS{User: "dev"}
	got, err := prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.newCA || !got.certNotAfter.Equal(old.Certificate().NotAfter) {
		t.Errorf("new CA %v, node certificate until %v; want the CA kept and the certificate ending with it (%v)",
			got.newCA, got.certNotAfter, old.Certificate().NotAfter)
	}
	outliving, key, err := old.Issue(tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ValidFor: devNodeCertValidity})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.WriteFiles(tlsDir, "node", outliving, key); err != nil {
		t.Fatal(err)
	}
	got, err = prepareDevTLS(absDir, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(got.notes(), "\n"); !got.newCert || !got.certNotAfter.Equal(old.Certificate().NotAfter) || !strings.Contains(notes, ", after its CA (") {
		t.Errorf("a certificate outliving its CA: reissued %v, until %v; notes:\n%s", got.newCert, got.certNotAfter, notes)
	}
}

// --tls on a host other than a loopback address warns that the
// controller ports are plaintext, naming them; on loopback it says
// nothing.
func TestDevTLSHostWarning(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "127.0.0.2", "::1", "localhost"} {
		if w := devTLSHostWarning(baseLayout(host, 3, 19092)); w != "" {
			t.Errorf("--host %s: warned %q", host, w)
		}
	}
	for _, host := range []string{"10.0.0.7", "192.168.1.20", "2001:db8::7", "dev.example"} {
		l := baseLayout(host, 2, 19092)
		w := devTLSHostWarning(l)
		want := "warning: --host " + host + " is not a loopback address: --tls secures the Kafka and HTTP listeners, but the controller (Raft) ports " +
			l.addr(l.Nodes[0].Controller) + "," + l.addr(l.Nodes[1].Controller) + " are plaintext and unauthenticated"
		if !strings.HasPrefix(w, want) {
			t.Errorf("--host %s: warning\n%s\nwant it to start\n%s", host, w, want)
		}
	}
}

// The node certificate's names for each kind of --host: the host, and
// localhost by name and loopback address.
func TestDevNodeCertNames(t *testing.T) {
	ca, err := tlsconf.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "::1", "10.0.0.7", "dev.example"} {
		certPEM, _, err := ca.Issue(devNodeCertOptions(host, ca.Certificate(), time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{host, "localhost", "127.0.0.1", "::1"} {
			if err := leaf.VerifyHostname(name); err != nil {
				t.Errorf("--host %s: the certificate does not serve %s: %v", host, name, err)
			}
		}
		if err := leaf.VerifyHostname("10.9.9.9"); err == nil {
			t.Errorf("--host %s: the certificate serves 10.9.9.9", host)
		}
	}
}

// devTLSBanner is what a --tls banner tells a client.
type devTLSBanner struct {
	props        map[string]string // the librdkafka lines
	passwordFile string
	fingerprint  string
	cliFlags     string
	curl         string
}

var (
	devPropertyLine    = regexp.MustCompile(`(?m)^  ([a-z.]+)=(\S+)$`)
	devPasswordLine    = regexp.MustCompile(`(?m)^  # sasl\.password=<the first line of (\S+)>$`)
	devFingerprintLine = regexp.MustCompile(`(?m)^Security: SASL_SSL, SCRAM-SHA-512 as user (\S+) \(a super user\), certificates of the CA (\S+) \(SHA-256 ([0-9A-F:]{95})\)$`)
	devFlagsLine       = regexp.MustCompile(`(?m)^  (--security-protocol SASL_SSL .*)$`)
	devCurlLine        = regexp.MustCompile(`(?m)^  (printf .* \| curl .*)$`)
)

// tlsBanner parses the banner's client settings.
func (d *devRun) tlsBanner() devTLSBanner {
	d.t.Helper()
	out := d.stdout.String()
	b := devTLSBanner{props: map[string]string{}}
	for _, m := range devPropertyLine.FindAllStringSubmatch(out, -1) {
		b.props[m[1]] = m[2]
	}
	pw, fp, flags, curl := devPasswordLine.FindStringSubmatch(out), devFingerprintLine.FindStringSubmatch(out),
		devFlagsLine.FindStringSubmatch(out), devCurlLine.FindStringSubmatch(out)
	if pw == nil || fp == nil || flags == nil || curl == nil {
		d.t.Fatalf("the banner lacks the password file, the CA's fingerprint, the client flags or the curl line:\n%s", out)
	}
	b.passwordFile, b.fingerprint, b.cliFlags, b.curl = pw[1], fp[3], flags[1], curl[1]
	if fp[1] != b.props["sasl.username"] || fp[2] != b.props["ssl.ca.location"] {
		d.t.Errorf("the Security line names %s and %s, the properties %s and %s", fp[1], fp[2], b.props["sasl.username"], b.props["ssl.ca.location"])
	}
	return b
}

// client is a franz-go client of the cluster made only from what the
// banner printed: its CA file in a plain crypto/tls configuration (as
// any program would, not through Fjord's tlsconf), its user, and the
// password read from its file.
func (b devTLSBanner) client(t *testing.T, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	pem, err := os.ReadFile(b.props["ssl.ca.location"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", b.props["ssl.ca.location"])
	}
	pw, err := node.ReadPasswordFile(b.passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(b.props["bootstrap.servers"], ",")...),
		kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}),
		kgo.SASL(kscram.Auth{User: b.props["sasl.username"], Pass: pw}.AsSha512Mechanism())}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeOne reads the first record of topic with cl.
func consumeOne(t *testing.T, ctx context.Context, cl *kgo.Client) *kgo.Record {
	t.Helper()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record within the deadline: %v", err)
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch: topic %s partition %d: %v", e.Topic, e.Partition, e.Err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

// The issue's point: `fjord dev --tls` (one node, to keep it short)
// starts SASL_SSL and HTTPS, and the settings it prints are enough for
// a client: franz-go, with the CA file and the user and password file
// printed, makes a topic, produces and consumes; kcat reads the
// client.properties it names; the printed fjord flags and curl line
// work. A plaintext client and a wrong password are refused on that
// port; key and password files are 0600. Run again, a dev without --tls
// or for another user is refused, and a dev with --tls reuses the CA
// (same fingerprint) while reissuing an expired node certificate, and
// serves the same data to the same user.
func TestDevTLS(t *testing.T) {
	kcat := testutil.KcatPath(t) // installs Debian's kcat if it must
	dir := t.TempDir()
	writeFjordWrapper(t, dir)
	dataDir := filepath.Join(dir, "cluster")
	tlsDir := filepath.Join(dataDir, devTLSDir)
	d := startDev(t, dir, "--nodes", "1", "--tls", "--data-dir", dataDir)
	if len(d.nodes) != 1 {
		t.Fatalf("banner lists %d nodes, want 1:\n%s", len(d.nodes), d.stdout)
	}
	b := d.tlsBanner()
	for k, want := range map[string]string{
		"bootstrap.servers": d.brokers, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.username": "dev", "ssl.ca.location": filepath.Join(tlsDir, "ca.crt"),
	} {
		if got := b.props[k]; got != want {
			t.Errorf("banner's %s=%s, want %s", k, got, want)
		}
	}
	if want := filepath.Join(tlsDir, "dev.password"); b.passwordFile != want {
		t.Errorf("banner's password file %s, want %s", b.passwordFile, want)
	}
	if want := fmt.Sprintf("--security-protocol SASL_SSL --ssl-ca-file %s --sasl-username dev --sasl-password-file %s", b.props["ssl.ca.location"], b.passwordFile); b.cliFlags != want {
		t.Errorf("banner's fjord flags\n%s\nwant\n%s", b.cliFlags, want)
	}
	for _, want := range []string{"made a CA, " + b.props["ssl.ca.location"] + " (SHA-256 " + b.fingerprint + ")", "issued the node certificate", "made the SCRAM users dev"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, d.stderr)
		}
	}
	for name, want := range map[string]os.FileMode{".": 0o700, "ca.key": 0o600, "node.key": 0o600, "dev.password": 0o600, "broker.password": 0o600, "client.properties": 0o600} {
		if got := fileMode(t, filepath.Join(tlsDir, name)); got != want {
			t.Errorf("%s has mode %v, want %v", name, got, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "secured"
	cl := b.client(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("creating a topic as dev over SASL_SSL: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("over SASL_SSL")}).FirstErr(); err != nil {
		t.Fatalf("producing over SASL_SSL: %v", err)
	}
	consumer := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if r := consumeOne(t, ctx, consumer); string(r.Value) != "over SASL_SSL" {
		t.Errorf("consumed %q, want the record produced", r.Value)
	}

	// Refused on the same port: a plaintext Kafka client (its first
	// bytes are no TLS handshake), and the right CA with a wrong
	// password.
	plain, err := kgo.NewClient(kgo.SeedBrokers(d.brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = plain.SeedBrokers()[0].Request(pctx, kmsg.NewPtrApiVersionsRequest())
	pcancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a plaintext client's ApiVersions got %v, want the connection closed at once", err)
	}
	wrong := b
	wrong.passwordFile = filepath.Join(dir, "wrong-password")
	if err := os.WriteFile(wrong.passwordFile, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(wrong.client(t, kgo.RequestRetries(0))).BrokerMetadata(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password got %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// The printed lines, as a user pastes them: a fjord command with the
	// flags, kcat with client.properties, curl over HTTPS.
	run := func(line string) string {
		t.Helper()
		c := exec.Command("sh", "-c", line)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	if out := run("./fjord cluster describe --brokers " + d.brokers + " " + b.cliFlags); !strings.Contains(out, "Brokers: 1\n") {
		t.Errorf("fjord cluster describe with the printed flags:\n%s", out)
	}
	kcatLine := fmt.Sprintf("%s -F %s -C -t %s -o beginning -c 1 -e -f '%%s\\n'", kcat, filepath.Join(tlsDir, "client.properties"), topic)
	if !strings.Contains(d.stdout.String(), "kcat -F "+filepath.Join(tlsDir, "client.properties")) {
		t.Errorf("the banner does not name kcat -F with client.properties:\n%s", d.stdout)
	}
	if out := run(kcatLine); !strings.Contains(out, "over SASL_SSL") {
		t.Errorf("kcat with client.properties read:\n%s", out)
	}
	// The password reaches curl on stdin (-K -), never its argv.
	if !strings.Contains(b.curl, "https://"+d.nodes[0].httpAddr+"/v1/cluster") || !strings.Contains(b.curl, "--cacert "+b.props["ssl.ca.location"]) ||
		!strings.HasPrefix(b.curl, `printf 'user = "dev:%s"\n' "$(cat `+b.passwordFile+`)" | curl `) || !strings.Contains(b.curl, " -K - ") ||
		strings.Contains(b.curl, " -u ") {
		t.Errorf("curl line %q: want HTTPS with --cacert, and the user from stdin (-K -)", b.curl)
	}
	if out := run(b.curl); !strings.Contains(out, `"cluster_id"`) {
		t.Errorf("%s:\n%s", b.curl, out)
	}
	d.interrupt()

	// The directory is a --tls cluster's: dev without --tls, or for
	// another user, is refused before any node starts.
	requireDevError(t, runDevOnce(t, dir, "--data-dir", dataDir),
		"--data-dir "+dataDir+" holds a cluster made with --tls ("+filepath.Join(dataDir, devLayoutFile)+"): run it with --tls")
	requireDevError(t, runDevOnce(t, dir, "--data-dir", dataDir, "--tls", "--tls-user", "alice"),
		"--tls-user alice: --data-dir "+dataDir+" holds a cluster made for user dev")

	// The node certificate expired while dev was stopped (a year on):
	// the next start reissues it from the same CA, so the clients' CA
	// file stays good.
	ca, err := tlsconf.LoadCA(filepath.Join(tlsDir, "ca.crt"), filepath.Join(tlsDir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caBefore, err := os.ReadFile(filepath.Join(tlsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	expired, key, err := ca.Issue(tlsconf.IssueOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-48 * time.Hour), ValidFor: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.WriteFiles(tlsDir, "node", expired, key); err != nil {
		t.Fatal(err)
	}
	again := startDev(t, dir, "--tls", "--data-dir", dataDir)
	b2 := again.tlsBanner()
	if b2.fingerprint != b.fingerprint {
		t.Errorf("the CA's fingerprint changed from %s to %s", b.fingerprint, b2.fingerprint)
	}
	if caAfter, err := os.ReadFile(filepath.Join(tlsDir, "ca.crt")); err != nil || string(caAfter) != string(caBefore) {
		t.Errorf("ca.crt was rewritten (%v)", err)
	}
	for _, want := range []string{"using the CA " + b.props["ssl.ca.location"] + " (SHA-256 " + b.fingerprint + ")",
		"the node certificate " + filepath.Join(tlsDir, "node.crt") + " expires "} {
		if !strings.Contains(again.stderr.String(), want) {
			t.Errorf("restart's stderr does not say %q:\n%s", want, again.stderr)
		}
	}
	if strings.Contains(again.stderr.String(), "made the SCRAM users") {
		t.Errorf("the restart made the users again:\n%s", again.stderr)
	}
	if r := consumeOne(t, ctx, b2.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))); string(r.Value) != "over SASL_SSL" {
		t.Errorf("after the restart consumed %q, want the record produced before", r.Value)
	}
	again.interrupt()
}
