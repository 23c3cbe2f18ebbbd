// Command nats runs a Fjord bench workload against NATS JetStream, the
// peer system in BENCHMARKS.md, and writes the same result (JSON, table,
// PNG) that `fjord bench run` writes for Fjord, so the two sit side by
// side from one sitting.
//
//	go run . WORKLOAD [--out DIR] [--duration D] [--warmup D] [--dir DIR] [--replicas N] [--sync S] [--max-pending N] [--consumer pull|push] [--read-ahead N]
//
// WORKLOAD is a shipped workload's name (max-rate-1p-1kb) or a path to a
// workload file, as bench.LoadWorkload reads them. The server is an
// embedded nats-server with JetStream on file storage, R1, run in a
// child process (see server.go) so its memory and CPU are measured
// alone; --replicas 3 (or a workload's replicationFactor: 3) runs three
// such servers as one cluster and gives every stream three replicas
// (see cluster.go), beside Fjord's 3 nodes at RF=3. `fjord bench peer
// nats` runs this command.
//
// This is its own Go module so that Fjord's module does not depend on
// nats-server; it reaches Fjord's internal/bench through a replace
// directive, which Go's internal rule allows because this module's path
// is under github.com/fjordmq/fjord.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/fjordmq/fjord/internal/bench"
)

// serverStopTimeout bounds the server's shutdown after the run.
const serverStopTimeout = 30 * time.Second

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		os.Exit(serverMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats bench:", err)
		os.Exit(1)
	}
	if err := run(ctx, exe, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nats bench:", err)
		os.Exit(1)
	}
}

// options is the parsed command line.
type options struct {
	workload   string
	out        string
	duration   time.Duration
	warmup     time.Duration
	warmupSet  bool
	dir        string
	sync       string
	maxPending int
	readAhead  int
	consumer   string
	// replicas is each stream's replicas and the servers run; 0: the
	// workload's replicationFactor, else 1.
	replicas int
}

func parseArgs(args []string) (options, error) {
	var o options
	fs := pflag.NewFlagSet("nats", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", ".", "directory for <workload>-nats.json and .png")
	fs.DurationVar(&o.duration, "duration", 0, "override the workload's duration")
	fs.DurationVar(&o.warmup, "warmup", 0, "override the workload's warmup")
	fs.StringVar(&o.dir, "dir", "", "parent of the server's store directory (default: the system temp dir); must be a disk, not tmpfs")
	fs.StringVar(&o.sync, "sync", "default", "JetStream fsync: default (every 2m), always (per write), or a duration")
	fs.IntVar(&o.maxPending, "max-pending", 0, "unacknowledged publishes per producer (0: as Fjord's driver sizes its buffer: 4 MiB at max rate, 1s of a producer's rate at a fixed rate)")
	fs.StringVar(&o.consumer, "consumer", consumerPull, "ordered consumer kind: pull (read ahead --read-ahead, asks again) or push (the server sends, flow-controlled)")
	fs.IntVar(&o.readAhead, "read-ahead", defaultPullMaxMessages, "messages each consumer asks the server for ahead of reading them")
	fs.IntVar(&o.replicas, "replicas", 0, "replicas of every stream, on a cluster of as many servers (default: the workload's replicationFactor, else 1)")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return o, errUsage
	}
	o.workload = fs.Arg(0)
	if _, _, err := parseSync(o.sync); err != nil {
		return o, err
	}
	if o.maxPending < 0 {
		return o, fmt.Errorf("%w: --max-pending must not be negative", errUsage)
	}
	if o.consumer != consumerPull && o.consumer != consumerPush {
		return o, fmt.Errorf("%w: %q", errBadConsumer, o.consumer)
	}
	if o.readAhead <= 0 {
		return o, fmt.Errorf("%w: --read-ahead must be positive", errUsage)
	}
	if o.duration < 0 {
		return o, fmt.Errorf("%w: --duration must not be negative", errUsage)
	}
	o.warmupSet = fs.Changed("warmup")
	if o.warmup < 0 {
		return o, fmt.Errorf("%w: --warmup must not be negative", errUsage)
	}
	if o.replicas < 0 || o.replicas > maxReplicas {
		return o, fmt.Errorf("%w: --replicas %d (allowed: 1 to %d, JetStream's limit)", errBadReplicas, o.replicas, maxReplicas)
	}
	return o, nil
}

// run runs one workload against a fresh server started from exe.
func run(ctx context.Context, exe string, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseArgs(args)
	if err != nil {
		return err
	}
	w, err := bench.LoadWorkload(o.workload)
	if err != nil {
		return err
	}
	if o.duration > 0 {
		if err := setDuration(w, o.duration); err != nil {
			return err
		}
	}
	if o.warmupSet {
		if err := setWarmup(w, o.warmup); err != nil {
			return err
		}
	}

	parent := o.dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := checkNotTmpfs(parent); err != nil {
		return fmt.Errorf("%s: %w; pass --dir on a disk", parent, err)
	}
	store, err := os.MkdirTemp(parent, "fjord-bench-nats-")
	if err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(store); rmErr != nil && err == nil {
			err = rmErr
		}
	}()

	replicas := o.replicas
	if replicas == 0 {
		replicas = max(1, w.ReplicationFactor)
	}
	if replicas > maxReplicas {
		return fmt.Errorf("%w: %s has replicationFactor %d; a JetStream stream has at most %d replicas", errBadReplicas, w.Name, replicas, maxReplicas)
	}
	servers, err := startServers(exe, replicas, store, o.sync, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := servers.Stop(serverStopTimeout); stopErr != nil && err == nil {
			err = fmt.Errorf("nats server: %w", stopErr)
		}
	}()

	if o.maxPending == 0 {
		o.maxPending = maxPendingFor(w)
	}
	d, err := newDriver(driverConfig{URLs: servers.URLs(), Replicas: replicas, Sync: o.sync, MaxPending: o.maxPending, PullMaxMessages: o.readAhead, Consumer: o.consumer})
	if err != nil {
		return err
	}
	defer d.Close()

	res, runErr := bench.Run(ctx, w, d, bench.RunOptions{Nodes: servers.Nodes(), Progress: stderr})
	if res == nil {
		return runErr
	}
	// A run that failed a sanity check still has a result, written and
	// printed so the failure can be read; the error then fails the
	// command.
	if err := writeResult(res, o.out, w.Name, stdout); err != nil {
		return err
	}
	return runErr
}

// writeResult writes <out>/<name>-nats.json and .png and prints the
// table.
func writeResult(res *bench.Result, out, name string, stdout io.Writer) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(out, name+"-nats")
	if err := res.WriteJSON(base + ".json"); err != nil {
		return err
	}
	if err := res.WritePNG(base + ".png"); err != nil {
		return err
	}
	res.WriteTable(stdout)
	fmt.Fprintf(stdout, "wrote %s.json and %s.png\n", base, base)
	return nil
}

// setDuration makes w run for d after its warmup instead of its own
// duration or message count.
func setDuration(w *bench.Workload, d time.Duration) error {
	if w.ConsumerBacklogSizeGB > 0 {
		return fmt.Errorf("%w: --duration does not apply to %s, a catch-up run that lasts until its backlog is read", errUsage, w.Name)
	}
	w.TestDurationSeconds = d.Seconds()
	w.MessageCount = 0
	return w.Validate()
}

// setWarmup makes w warm up for d before its measured window.
func setWarmup(w *bench.Workload, d time.Duration) error {
	if w.ConsumerBacklogSizeGB > 0 && d > 0 {
		return fmt.Errorf("%w: --warmup does not apply to %s, a catch-up run that measures its whole backlog", errUsage, w.Name)
	}
	w.WarmupSeconds = d.Seconds()
	return w.Validate()
}

// Producer windows sized as Fjord's franz-go driver sizes its producers'
// buffers (internal/bench/kafkadriver.go), so that neither system gets
// more records in flight than the other.
const (
	maxRateWindowBytes = 4 << 20
	minWindowRecords   = 1000
)

// maxPendingFor is the default --max-pending for w: 4 MiB of records
// per producer at max rate, one second of a producer's share at a fixed
// rate, never fewer than minWindowRecords.
func maxPendingFor(w *bench.Workload) int {
	var n int
	if w.ProducerRate > 0 {
		n = int(w.ProducerRate / float64(w.Topics*w.ProducersPerTopic))
	} else {
		n = maxRateWindowBytes / w.MessageSize
	}
	return max(n, minWindowRecords)
}
