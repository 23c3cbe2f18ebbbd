package testcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/netfault"
)

// Errors the harness reports (wrapped with detail; the tests see them
// through t.Fatal).
var (
	// ErrNotReady: /readyz did not answer 200 before the ready deadline.
	ErrNotReady = errors.New("testcluster: node not ready before the deadline")
	// ErrExited: the process ended by itself (before it was ready, or
	// before the test killed or stopped it).
	ErrExited = errors.New("testcluster: node exited")
	// ErrUncleanExit: after SIGTERM the process exited with a failure
	// status, or did not exit in time.
	ErrUncleanExit = errors.New("testcluster: node did not exit cleanly")
	// ErrNotRunning: Kill, Stop or Signal on a node with no live process.
	ErrNotRunning = errors.New("testcluster: node is not running")
	// ErrNoNetwork: a network fault (Cut, Delay, Heal, ...) or DialFrom
	// on a cluster started without ClusterOptions.Network.
	ErrNoNetwork = errors.New("testcluster: the cluster was not started with ClusterOptions.Network")
)

// Defaults for Options' zero values.
const (
	// DefaultReadyTimeout is generous because the tests share two cores
	// with compilers; a node on an idle machine is ready in well under a
	// second.
	DefaultReadyTimeout = 60 * time.Second
	DefaultStopTimeout  = 30 * time.Second
	DefaultLogLevel     = "info"

	// killTimeout bounds the wait after SIGKILL, which cannot be caught:
	// only a process stuck in the kernel (D state) takes longer.
	killTimeout = 10 * time.Second
	// readyPollInterval is how often /readyz is asked.
	readyPollInterval = 20 * time.Millisecond
	// logTailLines is how much of a node's output a failed test prints.
	logTailLines = 60
	// logWarningLines is how many of a node's warnings and errors, from
	// all of its output, a failed test prints: the line that explains a
	// failure is often long before the tail.
	logWarningLines = 80
	// startAttempts bounds Start's retries when a port was taken in the
	// gap between finding it and the node binding it.
	startAttempts = 3
)

// Options configure a node. The zero value is a node with id 1 in a fresh
// temporary data directory.
type Options struct {
	// NodeID is --node-id (default 1).
	NodeID int32
	// DataDir is --data-dir. Empty: a new t.TempDir(). Give the same one
	// to a second Start to model a replaced process on the same disk.
	DataDir string
	// LogLevel is --log-level (default "info").
	LogLevel string
	// Args are extra `fjord serve` arguments, after the harness's own.
	Args []string
	// Listeners are named Kafka listeners besides the PLAINTEXT one of
	// KafkaAddr, each on a port of its own (ListenerAddr): with them the
	// node is started with --listeners, PLAINTEXT first, and
	// --listener-security-protocol-map. Their TLS files and the like go
	// in Args.
	Listeners []Listener
	// InterBrokerListener is --inter-broker-listener-name (default:
	// PLAINTEXT).
	InterBrokerListener string
	// Env are extra environment entries (KEY=VALUE). The harness removes
	// FJORD_* variables inherited from the test's environment so a
	// developer's shell cannot change what the node does.
	Env []string
	// Binary is the executable to run (default: Binary(t)).
	Binary string
	// ReadyTimeout bounds the wait for /readyz (DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopTimeout bounds the wait for exit after SIGTERM (DefaultStopTimeout).
	StopTimeout time.Duration
}

// Listener is one named listener of Options.Listeners.
type Listener struct {
	// Name is the listener name; Protocol its security protocol (SSL,
	// SASL_SSL, ...).
	Name, Protocol string
}

// portsPerNode is how many ports a node of o listens on.
func (o Options) portsPerNode() int { return 3 + len(o.Listeners) }

// networkListenerPorts are the ports of n extra listeners in network
// mode, after fjord's defaults.
func networkListenerPorts(n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ports[i] = 9100 + i
	}
	return ports
}

// Node is one fjord process and the ports and directory it keeps across
// restarts.
type Node struct {
	t    owner
	opts Options // defaults filled in

	// Fixed for the node's life once Start returns, so Restart brings it
	// back where clients expect it.
	dataDir        string
	logDir         string
	logPath        string
	kafkaAddr      string
	controllerAddr string
	httpAddr       string
	// listenerAddrs are Options.Listeners' addresses, in their order.
	listenerAddrs []string
	// voters is --controller-quorum-voters for a node of a Cluster,
	// empty for a node alone (a cluster of one).
	voters string
	// net is the cluster's network in network mode, where the node
	// runs in the namespace of its id; nil on loopback.
	net *netfault.Network

	httpClient *http.Client

	mu struct {
		sync.Mutex
		// proc is the latest process started; nil before the first.
		proc *process
		// starts counts launches, for the marker lines in the log file.
		starts int
		// startOffset is the log file's size when the latest process
		// started: where its own output begins.
		startOffset int64
	}
}

// process is one run of the binary.
type process struct {
	cmd *exec.Cmd
	// launched is when cmd was started, by the harness's clock.
	launched time.Time
	done     chan struct{} // closed once cmd.Wait returned
	err      error         // cmd.Wait's result; read only after done is closed
	// ended is set (under Node.mu) when the test kills or stops the
	// process, so an exit it caused is not reported as a crash.
	ended bool
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start runs a node and waits until its /readyz answers 200. It fails the
// test if the node exits or is not ready in time. The node is SIGKILLed at
// the end of the test if still running, and its output's tail is printed
// if the test failed.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	n, err := start(t, opts)
	if err != nil {
		t.Fatalf("starting node %d: %v", opts.NodeID, err)
	}
	return n
}

func start(t owner, opts Options) (*Node, error) {
	n, err := newNode(t, opts)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(opts.portsPerNode())
		if err != nil {
			return nil, err
		}
		n.setPorts(ports)
		err = n.launch()
		if err == nil {
			return n, nil
		}
		if attempt < startAttempts && n.portTaken(err) {
			continue
		}
		return nil, err
	}
}

// newNode fills in opts' defaults and makes the node's directories; it
// starts nothing and has no ports yet.
func newNode(t owner, opts Options) (*Node, error) {
	if opts.NodeID == 0 {
		opts.NodeID = 1
	}
	if opts.LogLevel == "" {
		opts.LogLevel = DefaultLogLevel
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.Binary == "" {
		b, err := binary()
		if err != nil {
			return nil, err
		}
		opts.Binary = b
	}
	n := &Node{
		t:       t,
		opts:    opts,
		dataDir: opts.DataDir,
		logDir:  t.TempDir(),
		httpClient: &http.Client{
			Timeout: 2 * time.Second,
			// A fresh connection per probe: pooled ones would outlive
			// a killed process and leak goroutines into the test.
			Transport: &http.Transport{DisableKeepAlives: true},
		},
	}
	if n.dataDir == "" {
		n.dataDir = t.TempDir()
	}
	n.logPath = filepath.Join(n.logDir, fmt.Sprintf("node-%d.log", opts.NodeID))
	// Registered after the TempDirs, so it runs before they are removed:
	// the process must be gone before its directory is.
	t.Cleanup(n.cleanup)
	return n, nil
}

// setPorts gives the node its listeners' ports on 127.0.0.1, which it
// keeps across restarts: Kafka, controller, HTTP, then
// Options.Listeners'.
func (n *Node) setPorts(ports []int) {
	n.setAddrs(loopbackHost, ports[0], ports[1], ports[2], ports[3:]...)
}

// setAddrs gives the node its listeners' host and ports, which it keeps
// across restarts: 127.0.0.1 on loopback, its namespace's address in
// network mode. Each listener is also what the node advertises (the
// Kafka address to clients, the controller address in the voter list).
func (n *Node) setAddrs(host string, kafka, controller, http int, listeners ...int) {
	n.kafkaAddr = net.JoinHostPort(host, strconv.Itoa(kafka))
	n.controllerAddr = net.JoinHostPort(host, strconv.Itoa(controller))
	n.httpAddr = net.JoinHostPort(host, strconv.Itoa(http))
	n.listenerAddrs = n.listenerAddrs[:0]
	for _, p := range listeners {
		n.listenerAddrs = append(n.listenerAddrs, net.JoinHostPort(host, strconv.Itoa(p)))
	}
}

// ListenerAddr is the address (host:port) of the listener of
// Options.Listeners named name, "" for none.
func (n *Node) ListenerAddr(name string) string {
	for i, l := range n.opts.Listeners {
		if l.Name == name {
			return n.listenerAddrs[i]
		}
	}
	return ""
}

// portTaken reports whether err, a failed launch, was the node finding
// one of its ports taken in the gap the package doc describes: worth a
// retry with fresh ports.
func (n *Node) portTaken(err error) bool {
	return errors.Is(err, ErrExited) && n.latestOutputContains("address already in use")
}

// loopbackHost is where a node listens outside network mode.
const loopbackHost = "127.0.0.1"

func hostPort(p int) string { return net.JoinHostPort(loopbackHost, strconv.Itoa(p)) }

// Brokers is the bootstrap address list for Kafka clients.
func (n *Node) Brokers() string { return n.kafkaAddr }

// KafkaAddr is the Kafka listener (host:port).
func (n *Node) KafkaAddr() string { return n.kafkaAddr }

// ControllerAddr is the Raft listener (host:port).
func (n *Node) ControllerAddr() string { return n.controllerAddr }

// HTTPAddr is the HTTP listener (host:port).
func (n *Node) HTTPAddr() string { return n.httpAddr }

// DataDir is the node's --data-dir.
func (n *Node) DataDir() string { return n.dataDir }

// Reconfigure replaces, for the node's next starts, its
// --controller-quorum-voters (empty: none) and the extra serve arguments
// (Options.Args), as an operator changes a unit file between two runs
// (a voter brought back broker-only, say). Call it while the node is
// stopped, from the test's goroutine.
func (n *Node) Reconfigure(voters string, args []string) error {
	if n.Running() {
		return fmt.Errorf("testcluster: node %d is running; stop it before reconfiguring it", n.opts.NodeID)
	}
	n.voters, n.opts.Args = voters, slices.Clone(args)
	return nil
}

// ID is the node's --node-id.
func (n *Node) ID() int32 { return n.opts.NodeID }

// LogPath is the file holding the node's stdout and stderr, all runs.
func (n *Node) LogPath() string { return n.logPath }

// Running reports whether the node's latest process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.proc != nil && !n.mu.proc.exited()
}

// Pid is the latest process's id (0 before the first start).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.proc == nil {
		return 0
	}
	return n.mu.proc.cmd.Process.Pid
}

func (n *Node) args() []string {
	args := []string{
		"serve",
		"--node-id", strconv.Itoa(int(n.opts.NodeID)),
		"--data-dir", n.dataDir,
		"--controller-addr", n.controllerAddr,
		"--http-addr", n.httpAddr,
		"--log-level", n.opts.LogLevel,
	}
	if len(n.opts.Listeners) == 0 {
		args = append(args, "--kafka-addr", n.kafkaAddr, "--advertised-kafka-addr", n.kafkaAddr)
	} else {
		ls := []string{"PLAINTEXT://" + n.kafkaAddr}
		protocols := []string{"PLAINTEXT:PLAINTEXT"}
		for i, l := range n.opts.Listeners {
			ls = append(ls, l.Name+"://"+n.listenerAddrs[i])
			protocols = append(protocols, l.Name+":"+l.Protocol)
		}
		args = append(args, "--listeners", strings.Join(ls, ","), "--listener-security-protocol-map", strings.Join(protocols, ","))
		if n.opts.InterBrokerListener != "" {
			args = append(args, "--inter-broker-listener-name", n.opts.InterBrokerListener)
		}
	}
	if n.voters != "" {
		args = append(args, "--controller-quorum-voters", n.voters)
	}
	return append(args, n.opts.Args...)
}

func (n *Node) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FJORD_") {
			env = append(env, kv)
		}
	}
	return append(env, n.opts.Env...)
}

// launch starts a process and waits for it to be ready; on failure no
// process is left running.
func (n *Node) launch() error {
	p, err := n.spawn()
	if err != nil {
		return err
	}
	return n.awaitReady(p, time.Now().Add(n.opts.ReadyTimeout))
}

// spawn starts a process and returns at once: a node of a quorum cannot
// be ready before a majority of the voters runs.
func (n *Node) spawn() (*process, error) {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	cmd := n.command()
	// A flag the node ignored would make it write relative paths (the
	// default ./fjord-data) into the package directory; here they land
	// in a temporary directory instead.
	cmd.Dir = n.logDir
	cmd.Env = n.env()
	// An *os.File is handed to the child as is: no copying goroutine that
	// a SIGKILL could leave blocked.
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = procAttr()

	n.mu.Lock()
	n.mu.starts++
	fmt.Fprintf(f, "=== testcluster: start %d: %s\n", n.mu.starts, strings.Join(cmd.Args, " "))
	n.mu.startOffset = st.Size()
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("running %s: %v", n.opts.Binary, err)
	}
	p := &process{cmd: cmd, launched: time.Now(), done: make(chan struct{})}
	n.mu.proc = p
	n.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// command is the node's process to start: the binary, or in network mode
// the binary in its namespace (netfault.Network.Command: `ip netns exec`
// execs the binary in the same process), so the pid the harness signals
// (SIGKILL, SIGSTOP, SIGTERM) and waits for is fjord's own, and
// Pdeathsig still kills it with the test.
func (n *Node) command() *exec.Cmd {
	if n.net == nil {
		return exec.Command(n.opts.Binary, n.args()...)
	}
	return n.net.Command(int(n.opts.NodeID), n.opts.Binary, n.args()...)
}

// awaitReady waits for p to be ready (waitReady); on failure p is killed.
func (n *Node) awaitReady(p *process, deadline time.Time) error {
	if err := n.waitReady(p, deadline); err != nil {
		n.end(p)
		killProcess(p)
		return err
	}
	return nil
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// deadline passes.
func (n *Node) waitReady(p *process, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	var last error
	for {
		if last = n.CheckReady(); last == nil {
			return nil
		}
		select {
		case <-p.done:
			// The process is gone: no point polling on.
			return fmt.Errorf("%w before it was ready: %v", ErrExited, p.err)
		case <-timer.C:
			return fmt.Errorf("%w (%v): last /readyz: %v", ErrNotReady, n.opts.ReadyTimeout, last)
		case <-tick.C:
			// Poll again.
		}
	}
}

// CheckReady asks /readyz once: nil when it answers 200.
func (n *Node) CheckReady() error {
	code, body, err := n.HTTPGet("/readyz")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/readyz: %d %s", code, bytes.TrimSpace(body))
	}
	return nil
}

// HTTPGet fetches path from the node's HTTP listener.
func (n *Node) HTTPGet(path string) (status int, body []byte, err error) {
	resp, err := n.httpClient.Get("http://" + n.httpAddr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// current returns the live process, or an error saying why there is none.
func (n *Node) current() (*process, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.mu.proc
	switch {
	case p == nil:
		return nil, ErrNotRunning
	case p.exited() && p.ended:
		return nil, fmt.Errorf("%w: it was already killed or stopped", ErrNotRunning)
	case p.exited():
		return nil, fmt.Errorf("%w by itself (%v) before the test ended it", ErrExited, p.err)
	}
	return p, nil
}

// end marks p as ended by the test (Kill or Stop).
func (n *Node) end(p *process) {
	n.mu.Lock()
	p.ended = true
	n.mu.Unlock()
}

// Kill sends SIGKILL and waits for the process to exit: a crash, as a
// power cut or the OOM killer would cause (page-cache writes survive it;
// this is not a disk failure).
func (n *Node) Kill() {
	n.t.Helper()
	if err := n.kill(); err != nil {
		n.t.Fatalf("killing node %d: %v", n.opts.NodeID, err)
	}
}

func (n *Node) kill() error {
	p, err := n.current()
	if err != nil {
		return err
	}
	n.end(p)
	return killProcess(p)
}

func killProcess(p *process) error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		return fmt.Errorf("SIGKILL: %v", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// Stop sends SIGTERM and waits for a clean exit (status 0); it fails the
// test if the node exits with a failure status or not within the stop
// timeout (then it is SIGKILLed).
func (n *Node) Stop() {
	n.t.Helper()
	if err := n.stop(); err != nil {
		n.t.Fatalf("stopping node %d: %v", n.opts.NodeID, err)
	}
}

func (n *Node) stop() error {
	p, err := n.current()
	if err != nil {
		return err
	}
	n.end(p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
		return fmt.Errorf("SIGTERM: %v", err)
	}
	t := time.NewTimer(n.opts.StopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		// A hung shutdown is a bug in the node; SIGQUIT makes the Go
		// runtime write every goroutine's stack to the node's log, which
		// is what the next engineer needs to find it.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
		killProcess(p)
		return fmt.Errorf("%w: still running %v after SIGTERM (goroutines dumped to %s, killed)", ErrUncleanExit, n.opts.StopTimeout, n.logPath)
	}
	if p.err != nil {
		return fmt.Errorf("%w after SIGTERM: %v", ErrUncleanExit, p.err)
	}
	return nil
}

// Restart starts the node again on the same ports and data directory and
// waits until it is ready. A node still running is first stopped cleanly
// (Stop); to model a crash, Kill first.
func (n *Node) Restart() {
	n.t.Helper()
	if err := n.restart(); err != nil {
		n.t.Fatalf("restarting node %d: %v", n.opts.NodeID, err)
	}
}

func (n *Node) restart() error {
	if n.Running() {
		if err := n.stop(); err != nil {
			return err
		}
	}
	return n.launch()
}

// Signal sends sig to the live process (SIGSTOP and SIGCONT model a node
// that hangs).
func (n *Node) Signal(sig os.Signal) error {
	p, err := n.current()
	if err != nil {
		return err
	}
	return p.cmd.Process.Signal(sig)
}

// cleanup runs at the end of the test: no process outlives it, and a
// failed test shows what the node said.
func (n *Node) cleanup() {
	n.mu.Lock()
	p := n.mu.proc
	n.mu.Unlock()
	if p != nil && !p.exited() {
		killProcess(p)
	}
	if n.t.Failed() {
		n.logTail(n.t)
		n.keepLog()
	}
}

// KeepLogsEnv names a directory where a failed test's node logs are
// copied whole (the test's own temporary directory is removed): set it
// when a failure needs more than the tail the test prints.
const KeepLogsEnv = "FJORD_TEST_KEEP_LOGS"

// keepLog copies the node's log into $FJORD_TEST_KEEP_LOGS, if set.
func (n *Node) keepLog() {
	dir := os.Getenv(KeepLogsEnv)
	if dir == "" {
		return
	}
	b, err := os.ReadFile(n.logPath)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	// The log's directory is the cluster's own temporary one: unique.
	name := filepath.Join(dir, fmt.Sprintf("%s-node-%d.log", filepath.Base(filepath.Dir(n.logPath)), n.opts.NodeID))
	if err == nil {
		err = os.WriteFile(name, b, 0o644)
	}
	if err != nil {
		n.t.Logf("keeping node %d's log: %v", n.opts.NodeID, err)
		return
	}
	n.t.Logf("node %d's whole log is in %s", n.opts.NodeID, name)
}

// logTail logs, through t, where the node lives and its output's last
// lines.
func (n *Node) logTail(t owner) {
	t.Helper()
	t.Logf("node %d (kafka %s, data %s): last %d lines of %s:\n%s",
		n.opts.NodeID, n.kafkaAddr, n.dataDir, logTailLines, n.logPath, n.LogTail(logTailLines))
	if w := n.Warnings(logWarningLines); w != "" {
		t.Logf("node %d: its last %d warnings and errors, all runs:\n%s", n.opts.NodeID, logWarningLines, w)
	}
}

// Warnings returns the last lines of the node's output (all runs) logged
// at level WARN or ERROR.
func (n *Node) Warnings(lines int) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", n.logPath, err)
	}
	defer f.Close()
	var kept []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			kept = append(kept, line)
			if len(kept) > 2*lines {
				kept = append(kept[:0], kept[len(kept)-lines:]...)
			}
		}
	}
	if len(kept) > lines {
		kept = kept[len(kept)-lines:]
	}
	return strings.Join(kept, "\n")
}

// LogTail returns the last lines of the node's output (all runs).
func (n *Node) LogTail(lines int) string {
	b, err := readTail(n.logPath, 0)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", n.logPath, err)
	}
	return lastLines(b, lines)
}

// LogMark is the node's log size now, for LogSince: a check of what the
// node logged after an event reads from the mark, not from a tail that a
// burst of lines (one per partition on a leader change) can push it out
// of.
func (n *Node) LogMark() int64 {
	st, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSinceBytes bounds what LogSince reads.
const logSinceBytes = 64 << 20

// LogSince returns what the node logged from mark (a LogMark) on, all
// of it up to logSinceBytes.
func (n *Node) LogSince(mark int64) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", n.logPath, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, mark, logSinceBytes))
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", n.logPath, err)
	}
	return string(b)
}

// LatestOutput returns the latest process's own output (its last
// readTailBytes), after the node's earlier runs in the same log file.
func (n *Node) LatestOutput() string {
	n.mu.Lock()
	off := n.mu.startOffset
	n.mu.Unlock()
	b, err := readTail(n.logPath, off)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", n.logPath, err)
	}
	return string(b)
}

// latestOutputContains reports whether the latest process's own output
// contains s.
func (n *Node) latestOutputContains(s string) bool {
	return strings.Contains(n.LatestOutput(), s)
}

// readTailBytes bounds what readTail reads: a node at debug level can
// write a lot, and only the end matters.
const readTailBytes = 256 << 10

// readTail reads the file from offset from, but at most its last
// readTailBytes.
func readTail(path string, from int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size()-from > readTailBytes {
		from = st.Size() - readTailBytes
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

func lastLines(b []byte, n int) string {
	if n <= 0 {
		return ""
	}
	b = bytes.TrimRight(b, "\n")
	end := len(b) // the tail is b[end+1:] once end is the n-th newline from the end
	for ; n > 0; n-- {
		end = bytes.LastIndexByte(b[:end], '\n')
		if end < 0 {
			return string(b)
		}
	}
	return string(b[end+1:])
}
