package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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
	nodes       int32
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
	producer          string
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
workload against it, stops it and removes the directory; --nodes N starts N
nodes as one cluster (one controller quorum, each node with its own data
directory and loopback ports) and reports each node's figures. The topics'
replication factor is the workload's replicationFactor, else 3 with 3 or more
nodes (as many as there are, with fewer). Otherwise the workload runs against
--brokers; --node-pid names that node's process for the resource figures.
With --local, --cpu-profile FILE also writes a CPU profile of the node over
the measured window (read it with go tool pprof; with several nodes, one
file per node, FILE with -node<id> before its extension); a
catch-up or message-count run, whose window ends with its last record, needs
--cpu-profile-seconds for the profile's length. --client-cpu-profile FILE
writes one of this process, the load generator, over the measured window.

--producer raw replaces franz-go's producers with pre-encoded Produce requests
(each producer's batch encoded once, the request framed once per partition,
the records' values, the batch header and its CRC written per send; acks=all,
idempotent, pipelined on one connection per broker): the least a client can
do, so a figure can tell how much of the cost is the nodes' and how much
franz-go's. Consumers are franz-go's either way; keyed workloads need franz-go.

--group runs each subscription's consumers as members of one consumer group,
which assigns them the partitions (cooperative-sticky), as OMB's Kafka driver
does; by default each consumer reads its own share of the partitions directly.

--security-protocol (SSL, SASL_SSL, SASL_PLAINTEXT) and its TLS and SASL flags,
as the other client commands take them, are for --brokers: every client the
run makes (admin, producers, consumers) connects with them. The raw producer
speaks PLAINTEXT only.

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
			if !o.local && cmd.Flags().Changed("nodes") {
				return errors.New("--nodes is for --local: how many nodes it starts (--brokers names a running cluster)")
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
			if o.local && o.client.securityProtocol != "PLAINTEXT" {
				return fmt.Errorf("--security-protocol %s is for --brokers: the nodes --local starts listen on PLAINTEXT", o.client.securityProtocol)
			}
			return runBench(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.client.addFlags(cmd)
	f := cmd.Flags()
	addBoolFlag(f, &o.local, "local", false, "start a node (or --nodes of them) in a temporary directory for the run, then stop it")
	f.Var(newIntFlag(&o.nodes, 1, 1, maxLocalNodes, ""), "nodes", "with --local: how many nodes to start as one cluster (one controller quorum)")
	f.StringVar(&o.dataDir, "data-dir", "", "with --local: the directory to make the node's temporary directory in (default: the system's temporary directory)")
	f.StringVar(&o.out, "out", defaultBenchOut, "directory for the JSON and PNG results")
	f.Var(newEnumFlag(&o.flushPolicy, "", "ack", "interval"), "flush-policy", "flush.policy of the run's topics: ack or interval (default: the broker's, ack on Fjord)")
	f.DurationVar(&o.duration, "duration", 0, "measured duration, e.g. 30s (default: the workload's testDurationSeconds)")
	f.DurationVar(&o.warmup, "warmup", 0, "warmup before the measured window, e.g. 10s (default: the workload's warmupSeconds)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "with --local: write a CPU profile of the node over the measured window to this file")
	f.Var(newIntFlag(&o.cpuProfileSeconds, 0, 0, 3600, "(0: the measured window's)"), "cpu-profile-seconds", "length of the node's CPU profile from the window's start, in seconds (required for a run whose window ends with its last record)")
	f.StringVar(&o.clientProfile, "client-cpu-profile", "", "write a CPU profile of this process, the load generator, over the measured window to this file")
	f.Var(newEnumFlag(&o.producer, bench.ProducerFranzGo, bench.ProducerFranzGo, bench.ProducerRaw), "producer",
		"the load generator: franz-go, or raw (pre-encoded produce requests, the least a client can do) to tell the nodes' cost from the client's")
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
	rf, err := replicationFactor(w, o)
	if err != nil {
		return err
	}
	// The connection's security, read (files, password) before a node
	// starts, so a mistake in it costs nothing.
	security, err := o.client.securityOpts()
	if err != nil {
		return err
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
	var nodes []bench.NodeProcess
	if o.nodePID != 0 {
		nodes = []bench.NodeProcess{{PID: int(o.nodePID)}}
	}
	var cluster *localCluster
	if o.local {
		if o.nodes == 1 {
			fmt.Fprintf(stderr, "starting a local node...\n")
		} else {
			fmt.Fprintf(stderr, "starting %d local nodes...\n", o.nodes)
		}
		cluster, err = startLocalCluster(ctx, localClusterOptions{parent: o.dataDir, nodes: int(o.nodes), pprof: o.cpuProfile != ""})
		if err != nil {
			return err
		}
		// The nodes go away on every path out, after the results.
		defer func() {
			if serr := cluster.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		seeds, nodes = cluster.seeds(), cluster.processes()
		for _, n := range cluster.nodes {
			label := "local node"
			if o.nodes > 1 {
				label += " " + strconv.Itoa(n.id)
			}
			fmt.Fprintf(stderr, "%s: pid %d, Kafka %s, data in %s\n", label, n.pid(), n.kafkaAddr, n.dataDir())
		}
	} else if seeds, err = o.client.seeds(); err != nil {
		return err
	}

	// The run ends early, with the reason, if a local node dies.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cluster != nil {
		cluster.watch(runCtx, cancel)
	}

	d, err := bench.NewKafkaDriver(runCtx, w, bench.KafkaConfig{
		Brokers: seeds, FlushPolicy: o.flushPolicy, ReplicationFactor: int16(rf), Producer: o.producer,
		SecurityProtocol: o.client.securityProtocol, ClientOpts: security,
	})
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintf(stderr, "running %s against %s\n", w.Name, strings.Join(seeds, ","))

	opts := bench.RunOptions{Nodes: nodes, Progress: stderr, Groups: o.groups}
	var profiles []*nodeProfile
	if o.cpuProfile != "" {
		for _, n := range cluster.nodes {
			profiles = append(profiles, &nodeProfile{
				url:  "http://" + n.pprofAddr + "/debug/pprof/profile",
				path: nodeProfilePath(o.cpuProfile, n.id, len(cluster.nodes)),
				done: make(chan struct{}),
			})
		}
	}
	var client *clientProfile
	if o.clientProfile != "" {
		client = &clientProfile{path: o.clientProfile}
	}
	opts.OnMeasure = func(seconds float64) {
		if o.cpuProfileSeconds > 0 {
			seconds = float64(o.cpuProfileSeconds)
		}
		for _, p := range profiles {
			p.start(runCtx, seconds, stderr)
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
	for _, p := range profiles {
		if perr := p.wait(); perr != nil {
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
			return context.Cause(runCtx) // a local node died
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

// replicationFactor is the replication factor of the run's topics: the
// workload's, else, with --local, as many replicas as the nodes allow
// up to 3 (Kafka's usual factor, and Fjord's default), else 0, the
// brokers' own default.
func replicationFactor(w *bench.Workload, o benchRunOptions) (int, error) {
	rf := w.ReplicationFactor
	if !o.local {
		return rf, nil
	}
	if rf == 0 {
		return min(int(o.nodes), 3), nil
	}
	if rf > int(o.nodes) {
		return 0, fmt.Errorf("%s has replicationFactor %d, more than the %d node(s) --local starts: give --nodes %d or more", w.Name, rf, o.nodes, rf)
	}
	return rf, nil
}

// nodeProfilePath is where node id's CPU profile goes: path itself for
// a lone node, else path with -node<id> before its extension.
func nodeProfilePath(path string, id, nodes int) string {
	if nodes == 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-node" + strconv.Itoa(id) + ext
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
