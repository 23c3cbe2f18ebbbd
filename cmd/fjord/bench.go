package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fjordmq/fjord/internal/bench"
)

// newBenchCommand is `fjord bench`: `run` here, and whatever other
// subcommands the caller adds (limits, peer), each defined in its own
// file.
func newBenchCommand(extra ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark Fjord with standard workloads",
		Long: `Benchmark Fjord in the style of the OpenMessaging Benchmark: a workload
(topics, partitions, record size, producers, consumers, rate, duration) runs
against a node, and the result is printed as a table and written as JSON and
a PNG. See BENCHMARKS.md for the standard set and where Fjord stands.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchRunCommand())
	cmd.AddCommand(extra...)
	return cmd
}

// benchRunOptions are the flags of `fjord bench run`.
type benchRunOptions struct {
	client      clientOptions
	local       bool
	dataDir     string
	out         string
	flushPolicy string
	duration    time.Duration
	warmup      time.Duration
	warmupSet   bool
	nodePID     int32
	cpuProfile  string
	// cpuProfileSeconds is the node profile's length; 0 is the measured
	// window's.
	cpuProfileSeconds int32
	clientProfile     string
	groups            bool
}

const defaultBenchOut = "./bench-results"

func newBenchRunCommand() *cobra.Command {
	var o benchRunOptions
	cmd := &cobra.Command{
		Use:   "run WORKLOAD",
		Short: "Run a workload against a node (--brokers) or a fresh local one (--local)",
		Long: `Run a workload and print its result: produce and consume throughput,
produce-ack and end-to-end latency percentiles (from each record's intended
send time, so a stall shows), errors, and the node's peak memory and CPU time
when it runs on this machine.

WORKLOAD is a shipped workload's name (` + strings.Join(bench.WorkloadNames(), ", ") + `)
or a path to a workload YAML file with OMB's field names.

--local starts a node from this binary in a temporary directory, runs the
workload against it, stops it and removes the directory. Otherwise the
workload runs against --brokers; --node-pid names that node's process for the
resource figures. With --local, --cpu-profile FILE also writes a CPU profile
of the node over the measured window (read it with go tool pprof); a
catch-up or message-count run, whose window ends with its last record, needs
--cpu-profile-seconds for the profile's length. --client-cpu-profile FILE
writes one of this process, the load generator, over the measured window.

--group runs each subscription's consumers as members of one consumer group,
which assigns them the partitions (cooperative-sticky), as OMB's Kafka driver
does; by default each consumer reads its own share of the partitions directly.

The result is written to <out>/<workload>-fjord.json and .png. The run checks
its own numbers (every record acknowledged is consumed exactly once, intact;
no send failed) and exits non-zero when a check fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.client.applyEnv(cmd); err != nil {
				return err
			}
			if o.local && cmd.Flags().Changed("brokers") {
				return errors.New("give --local or --brokers, not both")
			}
			if !o.local && cmd.Flags().Changed("data-dir") {
				return errors.New("--data-dir is for --local: where the local node keeps its data")
			}
			o.warmupSet = cmd.Flags().Changed("warmup")
			if o.local && o.nodePID != 0 {
				return errors.New("--node-pid is for --brokers: --local knows its node's process")
			}
			if !o.local && o.cpuProfile != "" {
				return errors.New("--cpu-profile is for --local: it profiles the node the run starts")
			}
			if o.cpuProfile == "" && o.cpuProfileSeconds != 0 {
				return errors.New("--cpu-profile-seconds is the length of --cpu-profile's profile; give --cpu-profile too")
			}
			return runBench(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.client.addFlags(cmd)
	f := cmd.Flags()
	addBoolFlag(f, &o.local, "local", false, "start a node in a temporary directory for the run, then stop it")
	f.StringVar(&o.dataDir, "data-dir", "", "with --local: the directory to make the node's temporary directory in (default: the system's temporary directory)")
	f.StringVar(&o.out, "out", defaultBenchOut, "directory for the JSON and PNG results")
	f.Var(newEnumFlag(&o.flushPolicy, "", "ack", "interval"), "flush-policy", "flush.policy of the run's topics: ack or interval (default: the broker's, ack on Fjord)")
	f.DurationVar(&o.duration, "duration", 0, "measured duration, e.g. 30s (default: the workload's testDurationSeconds)")
	f.DurationVar(&o.warmup, "warmup", 0, "warmup before the measured window, e.g. 10s (default: the workload's warmupSeconds)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "with --local: write a CPU profile of the node over the measured window to this file")
	f.Var(newIntFlag(&o.cpuProfileSeconds, 0, 0, 3600, "(0: the measured window's)"), "cpu-profile-seconds", "length of the node's CPU profile from the window's start, in seconds (required for a run whose window ends with its last record)")
	f.StringVar(&o.clientProfile, "client-cpu-profile", "", "write a CPU profile of this process, the load generator, over the measured window to this file")
	addBoolFlag(f, &o.groups, "group", false, "run each subscription's consumers as one consumer group (cooperative-sticky), as OMB does, instead of giving each its own partitions")
	f.Var(newIntFlag(&o.nodePID, 0, 0, 1<<22, "(0: none)"), "node-pid", "with --brokers: the node's process id on this machine, for its memory and CPU figures")
	return cmd
}

// benchWorkload loads the workload and applies --duration and --warmup.
func benchWorkload(o benchRunOptions, name string) (*bench.Workload, error) {
	w, err := bench.LoadWorkload(name)
	if err != nil {
		return nil, err
	}
	if o.duration != 0 {
		if o.duration < 0 {
			return nil, fmt.Errorf("--duration %v: want a positive duration, e.g. 30s", o.duration)
		}
		if w.ConsumerBacklogSizeGB > 0 {
			return nil, fmt.Errorf("--duration: %s is a catch-up run, which lasts until its %g GiB backlog is consumed", w.Name, w.ConsumerBacklogSizeGB)
		}
		w.TestDurationSeconds, w.MessageCount = o.duration.Seconds(), 0
	}
	if o.warmupSet {
		if o.warmup < 0 {
			return nil, fmt.Errorf("--warmup %v: want 0 or a positive duration, e.g. 10s", o.warmup)
		}
		if w.ConsumerBacklogSizeGB > 0 && o.warmup > 0 {
			return nil, fmt.Errorf("--warmup: %s is a catch-up run, which measures its whole backlog", w.Name)
		}
		w.WarmupSeconds = o.warmup.Seconds()
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

func runBench(ctx context.Context, o benchRunOptions, workload string, stdout, stderr io.Writer) (err error) {
	w, err := benchWorkload(o, workload)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" && o.cpuProfileSeconds == 0 && (w.ConsumerBacklogSizeGB > 0 || w.MessageCount > 0) {
		// The node's profile is fetched with its length, asked for when
		// the window starts.
		return fmt.Errorf("--cpu-profile: %s's measured window ends with its last record, so its length is not known when it starts; "+
			"give --cpu-profile-seconds", w.Name)
	}
	// Made now, as --out is: a profile is written mid-run, and a
	// missing directory found then would waste the whole run.
	for flag, path := range map[string]string{"--cpu-profile": o.cpuProfile, "--client-cpu-profile": o.clientProfile} {
		if path == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var seeds []string
	pid := int(o.nodePID)
	var node *localNode
	if o.local {
		fmt.Fprintf(stderr, "starting a local node...\n")
		node, err = startLocalNode(ctx, o.dataDir, o.cpuProfile != "")
		if err != nil {
			return err
		}
		// The node goes away on every path out, after the results.
		defer func() {
			if serr := node.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		seeds, pid = []string{node.kafkaAddr}, node.pid()
		fmt.Fprintf(stderr, "local node: pid %d, Kafka %s, data in %s\n", pid, node.kafkaAddr, node.dataDir())
	} else if seeds, err = o.client.seeds(); err != nil {
		return err
	}

	// The run ends early, with the reason, if a local node dies.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if node != nil {
		go func() {
			select {
			case <-node.done: // exited by itself
				cancel(fmt.Errorf("the local node exited during the run (%v); last lines of its log:\n%s", node.waitErr, node.logTail(20)))
			case <-runCtx.Done(): // the run is over
			}
		}()
	}

	d, err := bench.NewKafkaDriver(runCtx, w, bench.KafkaConfig{Brokers: seeds, FlushPolicy: o.flushPolicy})
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintf(stderr, "running %s against %s\n", w.Name, strings.Join(seeds, ","))

	opts := bench.RunOptions{Progress: stderr, Groups: o.groups}
	if pid > 0 {
		opts.Nodes = []bench.NodeProcess{{PID: pid}}
	}
	var profile *nodeProfile
	if o.cpuProfile != "" {
		profile = &nodeProfile{url: "http://" + node.pprofAddr + "/debug/pprof/profile", path: o.cpuProfile, done: make(chan struct{})}
	}
	var client *clientProfile
	if o.clientProfile != "" {
		client = &clientProfile{path: o.clientProfile}
	}
	opts.OnMeasure = func(seconds float64) {
		if profile != nil {
			if o.cpuProfileSeconds > 0 {
				seconds = float64(o.cpuProfileSeconds)
			}
			profile.start(runCtx, seconds, stderr)
		}
		if client != nil {
			client.start(stderr)
		}
	}
	opts.OnMeasureEnd = func() {
		if client != nil {
			client.stop()
		}
	}
	res, runErr := bench.Run(runCtx, w, d, opts)
	var profErr error
	if client != nil {
		client.stop() // the run may have ended before its window did
		profErr = client.err
	}
	if profile != nil {
		if perr := profile.wait(); perr != nil {
			profErr = perr
		}
	}
	if profErr != nil && runErr == nil && res != nil {
		// The results are still written below; the exit says the
		// profile is missing.
		defer func() {
			if err == nil {
				err = profErr
			}
		}()
	}
	if res == nil {
		switch {
		case ctx.Err() != nil:
			return errors.New("interrupted")
		case runCtx.Err() != nil:
			return context.Cause(runCtx) // the local node died
		}
		return runErr
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(o.out, w.Name+"-"+res.System)
	if err := res.WriteJSON(base + ".json"); err != nil {
		return err
	}
	if err := res.WritePNG(base + ".png"); err != nil {
		return err
	}
	res.WriteTable(stdout)
	fmt.Fprintf(stdout, "\nwrote %s.json and %s.png\n", base, base)
	return runErr
}

// nodeProfile fetches the local node's CPU profile over the measured
// window, from the node's --pprof-addr.
type nodeProfile struct {
	url     string
	path    string
	started bool
	done    chan struct{} // closed when the fetch ended; err is then set
	err     error
}

// start begins the fetch; it is called as the window starts. pprof
// takes whole seconds, so the profile covers the window's whole seconds
// (at least one).
func (p *nodeProfile) start(ctx context.Context, window float64, stderr io.Writer) {
	seconds := max(int(window), 1)
	p.started = true
	fmt.Fprintf(stderr, "profiling the node for %d s into %s\n", seconds, p.path)
	go func() {
		defer close(p.done)
		p.err = p.fetch(ctx, seconds)
	}()
}

func (p *nodeProfile) fetch(ctx context.Context, seconds int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"?seconds="+strconv.Itoa(seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("--cpu-profile: reading the profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("--cpu-profile: the node answered %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	if err := os.WriteFile(p.path, body, 0o644); err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	return nil
}

// wait returns the fetch's error once it ended; nil when it never
// started (the run ended before its window did, and says why itself).
func (p *nodeProfile) wait() error {
	if !p.started {
		return nil
	}
	<-p.done
	return p.err
}

// clientProfile is a CPU profile of this process over the measured
// window.
type clientProfile struct {
	path    string
	f       *os.File
	stopped bool
	err     error
}

func (p *clientProfile) start(stderr io.Writer) {
	f, err := os.Create(p.path)
	if err != nil {
		p.err = fmt.Errorf("--client-cpu-profile: %w", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		p.err = fmt.Errorf("--client-cpu-profile: %w", err)
		return
	}
	p.f = f
	fmt.Fprintf(stderr, "profiling this process over the window into %s\n", p.path)
}

// stop ends the profile; it is safe to call more than once, and before
// start (then nothing was profiled, and the run says why it ended).
func (p *clientProfile) stop() {
	if p.f == nil || p.stopped {
		return
	}
	p.stopped = true
	pprof.StopCPUProfile()
	if err := p.f.Close(); err != nil && p.err == nil {
		p.err = fmt.Errorf("--client-cpu-profile: %w", err)
	}
}

// localNode is a `fjord serve` child process for --local: this same
// binary, on free loopback ports, in a temporary directory removed when
// it stops.
type localNode struct {
	dir       string // holds data/ and node.log
	kafkaAddr string
	httpAddr  string
	pprofAddr string // empty: not profiled
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process exited; waitErr is then set
	waitErr   error
}

const (
	localReadyTimeout = 60 * time.Second
	localStopTimeout  = 30 * time.Second
	localReadyPoll    = 20 * time.Millisecond
	localStartTries   = 3
)

func (n *localNode) dataDir() string { return filepath.Join(n.dir, "data") }
func (n *localNode) logPath() string { return filepath.Join(n.dir, "node.log") }
func (n *localNode) pid() int        { return n.cmd.Process.Pid }

func startLocalNode(ctx context.Context, parent string, pprof bool) (*localNode, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--local: finding this binary: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "fjord-bench-")
	if err != nil {
		return nil, fmt.Errorf("--local: %w", err)
	}
	for try := 1; ; try++ {
		n, err := launchLocalNode(ctx, exe, dir, pprof)
		if err == nil {
			return n, nil
		}
		// A port found free can be taken before the node binds it.
		if try < localStartTries && n != nil && strings.Contains(n.logTail(20), "address already in use") {
			continue
		}
		os.RemoveAll(dir)
		return nil, err
	}
}

// launchLocalNode starts the process and waits until /readyz answers
// 200. On failure the process is gone; the node is returned (when it
// was started) so the caller can read its log.
func launchLocalNode(ctx context.Context, exe, dir string, pprof bool) (*localNode, error) {
	ports, err := freeLoopbackPorts(4)
	if err != nil {
		return nil, err
	}
	n := &localNode{dir: dir, kafkaAddr: ports[0], httpAddr: ports[2], done: make(chan struct{})}
	if pprof {
		n.pprofAddr = ports[3]
	}
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	// Every serve flag is given, and --config "" too, so FJORD_*
	// variables in the user's environment cannot change the node.
	n.cmd = exec.Command(exe, "serve",
		"--config", "",
		"--node-id", "1",
		"--data-dir", n.dataDir(),
		"--kafka-addr", n.kafkaAddr,
		"--advertised-kafka-addr", n.kafkaAddr,
		"--controller-addr", ports[1],
		"--http-addr", n.httpAddr,
		"--pprof-addr", n.pprofAddr,
		"--auto-create-topics=false",
		"--num-partitions", "1",
		"--log-level", "warn",
		// A --group catch-up run's window opens before its consumers
		// join; Kafka's 3 s wait for more members would be measured.
		"--group-initial-rebalance-delay-ms", "0",
	)
	n.cmd.Dir = dir
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("--local: starting %s serve: %w", exe, err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		close(n.done)
	}()
	if err := n.waitReady(ctx); err != nil {
		n.cmd.Process.Kill()
		<-n.done
		return n, err
	}
	return n, nil
}

func (n *localNode) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.NewTimer(localReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(localReadyPoll)
	defer tick.Stop()
	var last error
	for {
		resp, err := client.Get("http://" + n.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		last = err
		select {
		case <-n.done: // no point asking a process that is gone
			return fmt.Errorf("--local: the node exited before it was ready (%v); last lines of its log:\n%s", n.waitErr, n.logTail(20))
		case <-deadline.C: // too slow
			return fmt.Errorf("--local: the node was not ready after %v (%v); last lines of its log:\n%s", localReadyTimeout, last, n.logTail(20))
		case <-ctx.Done(): // interrupted
			return ctx.Err()
		case <-tick.C: // ask again
		}
	}
}

// stop shuts the node down with SIGTERM (SIGKILL if it has not exited
// after localStopTimeout) and removes its directory. An unclean exit is
// an error: a benchmark that crashes the node has found a bug.
func (n *localNode) stop() error {
	defer os.RemoveAll(n.dir)
	select {
	case <-n.done: // already gone; the run reported why
		return nil
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping the local node: %w", err)
	}
	t := time.NewTimer(localStopTimeout)
	defer t.Stop()
	select {
	case <-n.done: // exited
	case <-t.C: // hung: kill it
		n.cmd.Process.Kill()
		<-n.done
		return fmt.Errorf("the local node did not exit within %v of SIGTERM (killed); last lines of its log:\n%s", localStopTimeout, n.logTail(20))
	}
	if n.waitErr != nil {
		return fmt.Errorf("the local node did not shut down cleanly (%v); last lines of its log:\n%s", n.waitErr, n.logTail(20))
	}
	return nil
}

// logTail returns the last lines of the node's output.
func (n *localNode) logTail(lines int) string {
	b, err := os.ReadFile(n.logPath())
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	parts := bytes.Split(b, []byte{'\n'})
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte{'\n'}))
}

// freeLoopbackPorts returns n distinct 127.0.0.1 addresses whose ports
// were free a moment ago: the node cannot report a port it picked itself
// (":0") back to this process, so the ports are chosen here, with the
// small race that a retry covers.
func freeLoopbackPorts(n int) ([]string, error) {
	var addrs []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("--local: finding a free port: %w", err)
		}
		held = append(held, l)
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)))
	}
	return addrs, nil
}
