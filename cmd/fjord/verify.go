package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/timeline"
)

// verify: a Jepsen-style checker of a cluster's guarantees (issue 16;
// DESIGN.md section 22). A workload writes unique, keyed records to a
// topic of its own while readers and a consumer group read it, faults
// are injected, and at the end every partition is read back and
// internal/history checks what was acknowledged, read and committed
// against what is there. The files:
//
//	verify.go           the command, its options, the run
//	verify_workload.go  the workloads' parts (queue, groups) and what they share
//	verify_group.go     the consumer group, steady or churning
//	verify_http.go      the http workload
//	verify_faults.go    the fault schedule, --fault-cmd, --local's signals and links
//	verify_disk.go      --local's disk faults
//	verify_policy.go    what flush.policy=interval may lose
//	verify_replicas.go  --local's byte-for-byte comparison of the replicas
//	verify_anomaly.go   the operations around an anomaly
//	verify_report.go    the report: text, JSON and the PNG timeline

// The kinds of violation fjord verify finds itself, beside the
// checker's (history.Kind*).
const (
	// kindNoProgress: nothing was acknowledged in the whole run.
	kindNoProgress = "no-progress"
	// kindNotLive: after a heal, a write to every partition was not
	// acknowledged and read back within --live-within.
	kindNotLive = "not-live"
	// kindFaultFailed: a fault or its heal failed (a node that did not
	// come back, exited by itself, or a fault script that failed).
	kindFaultFailed = "fault-failed"
	// kindReplicasDiffer: a partition's replicas not byte-identical
	// once the writes stopped (--local).
	kindReplicasDiffer = "replicas-differ"
	// kindDamageUnnoticed: a node started again after a disk fault did
	// not find the damage in its logs (--local).
	kindDamageUnnoticed = "damage-unnoticed"
	// kindGroupBehind: the groups workload's group did not commit every
	// partition to its end within --live-within of the writes' end.
	kindGroupBehind = "group-behind"
)

// verifyProgressInterval is how often a run says where it is.
const verifyProgressInterval = 5 * time.Second

// The workloads.
const (
	workloadQueue  = "queue"
	workloadGroups = "groups"
	workloadHTTP   = "http"
	workloadTxn    = "txn"
)

type verifyOptions struct {
	workload   string
	duration   time.Duration
	rate       int
	producers  int
	partitions int32
	rf         int16
	valueSize  int
	topic      string
	// topicCount is --topics: how many topics the run writes; names are
	// the topic's (one) or topic-0, topic-1, ... (more). topics holds
	// them once the seed is known.
	topicCount int
	topics     []string
	seed       uint64
	// groupMembers is how many members of a consumer group read the
	// topic meanwhile (0: none); in the groups workload, the most at
	// once, and churnInterval how often one joins, leaves or dies.
	groupMembers  int
	churnInterval time.Duration
	// flushPolicy and flushMs are the topic's flush.policy and flush.ms
	// ("" and 0: the cluster's defaults).
	flushPolicy string
	flushMs     int64
	// httpAddrs is --http: the HTTP API of the nodes, for the http
	// workload against --brokers.
	httpAddrs string
	// reportDir is where the report's files go ("": none).
	reportDir string

	// local starts a cluster of nodes nodes in a new directory under
	// dataDir (the system's temporary directory when empty).
	local   bool
	nodes   int
	dataDir string
	// faultCmd is a user's fault script (--brokers mode).
	faultCmd string
	// faults is the --faults mix; faultInterval how often a fault
	// starts and how long it is held; liveWithin how soon after a heal
	// the cluster must take writes and reads again.
	faults        string
	faultInterval time.Duration
	liveWithin    time.Duration
}

// verifyEnv is where a run's faults come from, and, with --local, the
// cluster it started.
type verifyEnv struct {
	faulter faulter
	mix     []string
	cluster *localCluster
	// leftOut says, for each kind the default mix leaves out, why.
	leftOut []string
	// http is the nodes' HTTP API, for the http workload.
	http *httpNodes
}

func newVerifyCommand() *cobra.Command {
	var (
		o      clientOptions
		v      verifyOptions
		output string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the cluster's guarantees: write a workload under faults, read it back, report anything lost, duplicated or reordered",
		Long: `Check a cluster's guarantees with a workload of its own, under faults.

The queue workload: --producers idempotent producers (acks=all) write
keyed records to a new topic, --rate records a second in all, for
--duration; then every partition is read back from its start to its high
watermark and checked. The groups workload is the same with a consumer
group whose members join, leave and die (connections cut, never
leaving) every --churn-interval, between one and --group-members (4),
which must have committed everything once the writes stop. The http
workload is the queue workload over the HTTP API (--http names the
nodes' listeners; --local knows its own): one record at a time per
producer, each with an idempotency key, resent with the same key to the
next node when its outcome is unknown; the reader on the records route;
the group consuming, committing and now and then seeking back. The txn
workload's producers are transactional, committing four transactions
in five and aborting the fifth; its reader and read-back read
read_committed, and a record of an aborted transaction read anywhere is
a violation (aborted-read). Checked:

  - every acknowledged record is at the partition and offset it was
    acknowledged at;
  - no record is there twice, and none that was never sent;
  - each key's records are in the order they were sent;
  - a reader reading meanwhile: what it was served is still there, at
    the same offset;
  - a consumer group (--group-members) reading meanwhile: a partition
    has one owner per generation, and its committed offsets never pass
    what was processed, never go backwards, are never lost and skip
    nothing;
  - after every fault is healed, the cluster takes a write to every
    partition and serves it back within --live-within;
  - each producer's records in a partition are in the order it sent
    them;
  - with --local, every partition's replicas hold the same bytes once
    the nodes are stopped.

The topic's flush policy (--flush-policy, --flush-ms; the cluster's
otherwise) decides what a crash of every node at once may lose: under
ack nothing; under interval what was acknowledged within flush.ms (and
about a second) before it. Those records are reported as lost as the
policy allows, not as violations.

Where the faults come from:

  --brokers host:port,...  a running cluster, faulted by hand meanwhile
                           (restart nodes while it runs), or by
                           --fault-cmd
  --fault-cmd SCRIPT       with --brokers: called as SCRIPT kill NODE,
                           SCRIPT pause NODE, SCRIPT isolate NODE and
                           SCRIPT heal (NODE a broker id; heal ends every
                           fault in force and returns once the nodes run;
                           exit status 0 means done), so any environment
                           can be faulted: systemd, containers, cloud
  --local --nodes N        a cluster of N fjord serve processes of this
                           binary, started for the run and removed after
                           a pass (kept after a failure, to look at),
                           faulted with signals: kill (SIGKILL), pause
                           (SIGSTOP, then SIGCONT), restart (SIGTERM, a
                           controlled shutdown) and kill-all (every node
                           SIGKILLed at once); its nodes keep unsynced
                           writes in memory, so a SIGKILL loses them as
                           a power cut would. Disk faults kill a node
                           and damage its files as a power cut can:
                           torn-write (each log's last write only partly
                           on the disk) and bit-flip (one bit flipped in
                           a batch its recovery scans); the node's
                           recovery must find the damage. As root (Linux, with ip
                           and tc) each node runs in a network namespace
                           of its own and the links between nodes are
                           faulted too, while the clients still reach
                           every node: isolate (one node cut off), split
                           (a minority and a majority), bridge (two
                           halves joined by one node), cut (one link,
                           one way) and delay (a node's links slowed
                           200ms each way). The default mix is every
                           kind the machine can do; what it cannot is
                           said, with why, when the run starts.

Every --fault-interval one fault is drawn from the --faults mix (a kind
named twice is drawn twice as often) on a node drawn at random, held for
an interval and healed; the last interval of the run has none. The seed
draws the same faults in the same order again.

The verdict line says PASS or FAIL with the first violations; the faults,
the seed and the command to run it again are printed. Exit status 0 only
on a pass. The topic (fjord-verify-SEED unless --topic) and the group,
named after it, are deleted after a pass and kept after a failure.

The report is also written to --report-dir as verify-SEED.json (what -o
json prints) and verify-SEED.png: every fault as a span against the
writes acknowledged and failed, the acknowledgement latency and the
readers' and group's errors, second by second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			env, err := v.check(cmd)
			if err != nil {
				return err
			}
			if v.topic == "" {
				v.topic = fmt.Sprintf("fjord-verify-%d", v.seed)
			}
			v.topics = []string{v.topic}
			if v.topicCount > 1 {
				v.topics = v.topics[:0]
				for i := range v.topicCount {
					v.topics = append(v.topics, fmt.Sprintf("%s-%d", v.topic, i))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			for _, why := range env.leftOut {
				fmt.Fprintf(cmd.ErrOrStderr(), "left out of the faults: %s\n", why)
			}
			if v.local {
				network := needsNetwork(env.mix)
				where := "on loopback"
				if network {
					where = "each in a network namespace of its own"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "starting %d local nodes, %s...\n", v.nodes, where)
				// Unsynced writes die with a killed node, as in a power
				// cut: what flush.policy=interval gives up shows.
				c, cerr := startLocalCluster(ctx, localClusterOptions{parent: v.dataDir, nodes: v.nodes,
					serveArgs: []string{"--unsynced-writes-in-memory"}, network: network})
				if cerr != nil {
					return cerr
				}
				env.cluster = c
				lf := env.faulter.(*localFaulter)
				lf.c, lf.topics, lf.partitions = c, v.topics, v.partitions
				var addrs []string
				for _, n := range c.nodes {
					addrs = append(addrs, n.httpAddr)
				}
				env.http = newHTTPNodes(addrs)
				o.brokers = strings.Join(c.seeds(), ",")
				defer func() {
					if serr := c.stop(); serr != nil && err == nil {
						err = serr
					}
				}()
			}
			if v.httpAddrs != "" {
				env.http = newHTTPNodes(seeds(v.httpAddrs))
			}
			cl, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer cl.Close()
			if v.faultCmd != "" {
				ids, err := faultNodeIDs(ctx, cl)
				if err != nil {
					return err
				}
				env.faulter = &cmdFaulter{path: v.faultCmd, ids: ids}
			}
			r, tl, err := runVerify(ctx, cmd.ErrOrStderr(), cl, o.brokers, v, env)
			if err != nil {
				return err
			}
			r.Command = verifyCommandLine(o.brokers, v)
			if !r.Pass && env.cluster != nil {
				env.cluster.keep = true
				r.DataDir = env.cluster.dir
			}
			if v.reportDir != "" {
				// A report that cannot be written is said, and the verdict
				// stands: the check itself ran.
				if err := writeVerifyReport(v.reportDir, &r, tl); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "writing the report to %s: %v\n", v.reportDir, err)
				}
			}
			if err := printResult(cmd, output, r); err != nil {
				return err
			}
			if !r.Pass {
				kept := "the topics " + strings.Join(v.topics, ", ") + " and the group " + v.topic + " are kept"
				if r.DataDir != "" {
					kept = "the nodes' directories are kept in " + r.DataDir
				}
				return fmt.Errorf("FAIL: %d violations (%s); %s; seed %d; rerun with: %s", r.Violations, countSummary(r.ViolationCounts), kept, r.Seed, r.Command)
			}
			return nil
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&v.workload, "workload", workloadQueue, "the workload: queue (producers, a reader and a steady group), groups (the same, with a group whose members join, leave and die), http (the queue workload over the HTTP API, with idempotency keys) or txn (transactional producers committing four transactions in five, read back read_committed)")
	f.DurationVar(&v.duration, "duration", 30*time.Second, "how long to write")
	f.IntVar(&v.rate, "rate", 1000, "records a second, all producers together")
	f.IntVar(&v.producers, "producers", 3, "idempotent producers writing at once")
	f.Var(newIntFlag(&v.partitions, 6, 1, 10000, ""), "partitions", "the topic's partitions")
	f.Var(newIntFlag(&v.rf, 0, 0, 32767, ""), "replication-factor", "the topic's replication factor (0: the cluster's default)")
	f.IntVar(&v.valueSize, "value-size", 100, "bytes of each record's value, at least 32")
	f.IntVar(&v.groupMembers, "group-members", 2, "members of a consumer group reading the topic meanwhile, committing what they processed (0: none); with --workload groups the most at once (default 4)")
	f.DurationVar(&v.churnInterval, "churn-interval", 2*time.Second, "with --workload groups: how often a member joins, leaves or dies")
	f.StringVar(&v.reportDir, "report-dir", defaultVerifyReportDir, "where the report's files go: verify-SEED.json (what -o json prints) and verify-SEED.png (the faults against throughput, latency and errors); empty for none")
	f.StringVar(&v.httpAddrs, "http", "", "with --workload http and --brokers: the nodes' HTTP API addresses, host:port,... (a request that fails goes to the next)")
	f.StringVar(&v.flushPolicy, "flush-policy", "", "the topic's flush.policy: ack (every replica fsyncs before a write is acknowledged) or interval (every --flush-ms; durability by replication) (default: the cluster's)")
	f.Int64Var(&v.flushMs, "flush-ms", 0, "with --flush-policy interval: the topic's flush.ms (default: the cluster's)")
	f.StringVar(&v.topic, "topic", "", "the topic to write, which must not exist (default fjord-verify-SEED); with --topics N, the topics are TOPIC-0 to TOPIC-(N-1), and the group is named TOPIC")
	f.IntVar(&v.topicCount, "topics", 1, "how many topics to write, each with --partitions partitions (a key belongs to one)")
	f.Uint64Var(&v.seed, "seed", 0, "the run's seed, which names its topic and values and draws its faults (default: random, printed)")
	f.BoolVar(&v.local, "local", false, "start a cluster of --nodes nodes of this binary for the run, and fault it")
	f.IntVar(&v.nodes, "nodes", 3, "with --local: how many nodes (1 to 5)")
	f.StringVar(&v.dataDir, "data-dir", "", "with --local: where the nodes' directory goes (default: the system's temporary directory)")
	f.StringVar(&v.faultCmd, "fault-cmd", "", "with --brokers: a script run as SCRIPT kill|pause|isolate NODE and SCRIPT heal")
	f.StringVar(&v.faults, "faults", "", "the fault mix, kinds separated by commas, or none (default: every kind the machine can do with --local; kill,pause with --fault-cmd)")
	f.DurationVar(&v.faultInterval, "fault-interval", 10*time.Second, "how often a fault starts, and how long it is held")
	f.DurationVar(&v.liveWithin, "live-within", 30*time.Second, "how soon after a heal a write to every partition must be acknowledged and read back")
	addOutputFlag(cmd, &output)
	return cmd
}

// check refuses bad settings before anything connects or starts, draws
// a seed when none was given, and returns the fault mix.
func (v *verifyOptions) check(cmd *cobra.Command) (verifyEnv, error) {
	var env verifyEnv
	changed := cmd.Flags().Changed
	switch {
	case v.workload != workloadQueue && v.workload != workloadGroups && v.workload != workloadHTTP && v.workload != workloadTxn:
		return env, fmt.Errorf("--workload %q: want queue, groups, http or txn", truncate(v.workload, 64))
	case v.workload == workloadTxn && changed("group-members") && v.groupMembers > 0:
		return env, errors.New("--group-members goes without --workload txn: its records are checked by a read_committed reader and read-back (the group is the groups workload's)")
	case v.workload == workloadHTTP && !v.local && v.httpAddrs == "":
		return env, errors.New("--workload http needs --http host:port,... (the nodes' HTTP API; --local knows its own)")
	case v.workload != workloadHTTP && changed("http"):
		return env, errors.New("--http goes with --workload http")
	case v.local && changed("http"):
		return env, errors.New("--http goes without --local: --local's nodes serve their own HTTP API")
	case v.workload == workloadGroups && changed("group-members") && v.groupMembers < 2:
		return env, fmt.Errorf("--group-members %d: the groups workload needs 2 or more (members join, leave and die)", v.groupMembers)
	case v.workload != workloadGroups && changed("churn-interval"):
		return env, errors.New("--churn-interval goes with --workload groups")
	case v.churnInterval < 100*time.Millisecond || v.churnInterval > time.Hour:
		return env, fmt.Errorf("--churn-interval %v: want 100ms to 1h", v.churnInterval)
	case v.duration <= 0 || v.duration > 24*time.Hour:
		return env, fmt.Errorf("--duration %v: want more than 0 and at most 24h", v.duration)
	case v.rate < 1 || v.rate > 1_000_000:
		return env, fmt.Errorf("--rate %d: want 1 to 1000000 records a second", v.rate)
	case v.topicCount < 1 || v.topicCount > 100:
		return env, fmt.Errorf("--topics %d: want 1 to 100", v.topicCount)
	case v.producers < 1 || v.producers > 64:
		return env, fmt.Errorf("--producers %d: want 1 to 64", v.producers)
	case v.groupMembers < 0 || v.groupMembers > 64:
		return env, fmt.Errorf("--group-members %d: want 0 to 64", v.groupMembers)
	case v.valueSize < 32 || v.valueSize > 1<<20:
		return env, fmt.Errorf("--value-size %d: want 32 to 1048576 bytes (a value holds the run's seed, its producer and a counter)", v.valueSize)
	case v.local && changed("brokers"):
		return env, errors.New("--local starts its own cluster: --brokers goes without it")
	case v.local && v.faultCmd != "":
		return env, errors.New("--fault-cmd goes with --brokers: --local faults its own nodes")
	case !v.local && changed("nodes"):
		return env, errors.New("--nodes goes with --local")
	case !v.local && changed("data-dir"):
		return env, errors.New("--data-dir goes with --local")
	case v.local && (v.nodes < 1 || v.nodes > maxLocalNodes):
		return env, fmt.Errorf("--nodes %d: want 1 to %d", v.nodes, maxLocalNodes)
	case !v.local && v.faultCmd == "" && (changed("faults") || changed("fault-interval")):
		return env, errors.New("--faults and --fault-interval go with --local or --fault-cmd")
	case v.faultInterval < time.Second || v.faultInterval > time.Hour:
		return env, fmt.Errorf("--fault-interval %v: want 1s to 1h", v.faultInterval)
	case v.liveWithin < time.Second || v.liveWithin > time.Hour:
		return env, fmt.Errorf("--live-within %v: want 1s to 1h", v.liveWithin)
	case v.flushPolicy != "" && v.flushPolicy != "ack" && v.flushPolicy != "interval":
		return env, fmt.Errorf("--flush-policy %q: want ack or interval", truncate(v.flushPolicy, 64))
	case changed("flush-ms") && v.flushPolicy != "interval":
		return env, errors.New("--flush-ms goes with --flush-policy interval")
	case changed("flush-ms") && (v.flushMs < 1 || v.flushMs > 86_400_000):
		return env, fmt.Errorf("--flush-ms %d: want 1 to 86400000 (a day)", v.flushMs)
	}
	var kinds faulter
	switch {
	case v.local:
		lf := newLocalFaulter(v.nodes)
		kinds, env.faulter = lf, lf
		if !changed("faults") {
			// Every kind this machine can do; what it cannot is said
			// when the run starts (env.leftOut).
			can, cannot := lf.kinds()
			v.faults = strings.Join(can, ",")
			for _, k := range networkFaultKinds {
				if why := cannot[k]; why != "" {
					env.leftOut = append(env.leftOut, k+" "+why)
				}
			}
		}
	case v.faultCmd != "":
		if _, err := exec.LookPath(v.faultCmd); err != nil {
			return env, fmt.Errorf("--fault-cmd: %w", err)
		}
		kinds = &cmdFaulter{}
		if !changed("faults") {
			v.faults = "kill,pause"
		}
	}
	if kinds != nil {
		mix, err := parseFaultMix(v.faults, kinds)
		if err != nil {
			return env, err
		}
		env.mix = mix
	}
	if v.workload == workloadGroups && !changed("group-members") {
		v.groupMembers = 4
	}
	if v.workload == workloadTxn {
		v.groupMembers = 0
	}
	if !changed("seed") {
		v.seed = rand.Uint64() >> 1
	}
	return env, nil
}

// faultNodeIDs is the cluster's broker ids, the NODE a fault script is
// given.
func faultNodeIDs(ctx context.Context, cl *kgo.Client) ([]int, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("listing the brokers for --fault-cmd: %w", err)
	}
	var ids []int
	for _, b := range resp.Brokers {
		ids = append(ids, int(b.NodeID))
	}
	slices.Sort(ids)
	return ids, nil
}

// verifyCommandLine is the command that repeats the run.
func verifyCommandLine(brokers string, v verifyOptions) string {
	where := "--brokers " + brokers
	switch {
	case v.local:
		where = fmt.Sprintf("--local --nodes %d", v.nodes)
	case v.faultCmd != "":
		where += " --fault-cmd " + shellWord(v.faultCmd)
	}
	faults := ""
	if v.local || v.faultCmd != "" {
		faults = fmt.Sprintf(" --faults %s --fault-interval %v --live-within %v", shellWord(v.faults), v.faultInterval, v.liveWithin)
	}
	if v.workload == workloadGroups {
		faults += fmt.Sprintf(" --churn-interval %v", v.churnInterval)
	}
	if v.httpAddrs != "" {
		faults += " --http " + v.httpAddrs
	}
	if v.flushPolicy != "" {
		faults += " --flush-policy " + v.flushPolicy
	}
	if v.flushMs > 0 {
		faults += fmt.Sprintf(" --flush-ms %d", v.flushMs)
	}
	return fmt.Sprintf("fjord verify %s --workload %s --duration %v --rate %d --producers %d --topics %d --partitions %d --replication-factor %d --value-size %d --group-members %d%s --seed %d",
		where, v.workload, v.duration, v.rate, v.producers, v.topicCount, v.partitions, v.rf, v.valueSize, v.groupMembers, faults, v.seed)
}

// runVerify creates the topic, writes the workload, reads it back and
// checks it.
func runVerify(ctx context.Context, progress io.Writer, cl *kgo.Client, brokers string, v verifyOptions, env verifyEnv) (verifyReport, *timeline.Timeline, error) {
	r := verifyReport{Workload: v.workload, Topic: v.topic, Topics: v.topics, Seed: v.seed, Anomalies: []string{}, ViolationCounts: map[string]int{},
		AnomalyDetails: []anomalyDetail{}, AllowedCounts: map[string]int{}, AllowedExamples: []string{}, ReportFiles: []string{},
		Mode: "brokers", Faults: []faultEvent{}, FaultCounts: map[string]int{}, GroupChurn: map[string]int{}}
	if env.cluster != nil {
		r.Mode, r.Nodes = "local", len(env.cluster.nodes)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(requestTimeout / time.Millisecond))
	rf := v.rf
	if rf == 0 {
		rf = -1 // the cluster's default
	}
	if v.groupMembers > 0 {
		// The group is named after the topic: offsets it committed in an
		// earlier run would be a history this run did not make.
		fctx, cancel := context.WithTimeout(ctx, requestTimeout)
		offsets, err := adm.FetchOffsets(fctx, v.topic)
		// Nodes that have just started have no __consumer_offsets
		// leaders yet, and franz-go gives up on the coordinator after a
		// few tries: retry the retriable answers while the deadline lasts.
		for err != nil && kerr.IsRetriable(err) && clock.Sleep(fctx, 100*time.Millisecond) {
			offsets, err = adm.FetchOffsets(fctx, v.topic)
		}
		cancel()
		if err == nil && len(offsets) > 0 {
			err = fmt.Errorf("the group %s has committed offsets from an earlier run: delete it first (fjord group delete %s)", v.topic, v.topic)
		}
		if err != nil {
			return r, nil, err
		}
	}
	for _, topic := range v.topics {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		created, err := adm.CreateTopic(cctx, v.partitions, rf, v.topicConfigs(), topic)
		cancel()
		if err == nil && created.Err != nil {
			err = kafkaError(created.Err, created.ErrMessage)
		}
		if err != nil {
			return r, nil, fmt.Errorf("creating the topic %s (it must not exist: the check needs every record in it to be one this run sent): %w", topic, err)
		}
	}
	// The topics are made alike: the first's policy is every one's.
	var err error
	if r.Flush, err = describeFlushPolicy(ctx, adm, v.topics[0]); err != nil {
		return r, nil, err
	}

	checker := history.NewChecker()
	start := time.Now()
	tl := timeline.New(start)
	w, reader, group, err := startWorkload(ctx, seeds(brokers), env.http, v, checker, tl)
	if err != nil {
		return r, nil, err
	}
	stopAt := start.Add(v.duration)
	var faults *faultRun
	probe := &liveProbe{seeds: seeds(brokers), v: v, checker: checker}
	faultsDone := make(chan struct{})
	if env.faulter != nil {
		faults = newFaultRun(env.faulter, env.mix, v, start, progress, probe, r.Flush.lossWindow())
		go func() { defer close(faultsDone); faults.run(ctx, stopAt) }()
	} else {
		close(faultsDone)
	}
	churnDone := make(chan struct{})
	if kg, ok := group.(*verifyGroup); ok && v.workload == workloadGroups {
		go func() {
			defer close(churnDone)
			kg.churnUntil(ctx, rand.New(rand.NewPCG(v.seed, 0xc4c4)), v.churnInterval, v.groupMembers, stopAt)
		}()
	} else {
		close(churnDone)
	}
	werr := w.run(ctx, progress, stopAt)
	<-faultsDone // every fault healed
	<-churnDone
	if werr != nil {
		reader.stop()
		group.stop()
		return r, nil, werr
	}
	var groupBehind error
	if (v.workload == workloadGroups || v.workload == workloadHTTP) && ctx.Err() == nil {
		groupBehind = drainGroup(ctx, adm, v.topic, v.topics, v.liveWithin)
	}
	r.GroupChurn = group.churned()
	r.ReaderErrors, r.FirstReaderError = reader.stop()
	r.GroupErrors, r.FirstGroupError = group.stop()
	if v.groupMembers > 0 {
		if err := fetchCommitted(context.WithoutCancel(ctx), adm, v.topic, checker); err != nil {
			return r, nil, err
		}
	}
	r.Commits = checker.Commits()
	r.Sent, r.Failed, r.FirstFailure = w.counts()
	r.Sent += probe.sent // the probes after each heal
	r.Acked = checker.AckedCount()
	r.Aborted = checker.AbortedCount()

	// A read cut short by a signal would report loss that is not there.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	readAll := history.ReadAll
	if v.workload == workloadTxn {
		// read_committed, once every transaction is decided; one still
		// open after its timeout and a margin is a hanging one.
		readAll = history.ReadAllCommitted
	}
	logs, err := readAll(rctx, brokers, v.topics...)
	if err != nil {
		return r, nil, fmt.Errorf("reading %s back: %w", strings.Join(v.topics, ", "), err)
	}
	res := checker.VerifyAll(logs)
	r.Read, r.Unacked, r.LiveReads = res.Summary.Read, res.Summary.Unacked, res.Summary.LiveReads
	found := res.Violations
	for _, a := range res.Allowed {
		r.Allowed++
		r.AllowedCounts[a.Kind]++
		if len(r.AllowedExamples) < maxAnomalies {
			r.AllowedExamples = append(r.AllowedExamples, a.String())
		}
	}
	if r.Acked == 0 {
		found = append(found, history.Violation{Kind: kindNoProgress, Text: "nothing was acknowledged: the cluster took no write"})
	}
	if groupBehind != nil {
		found = append(found, history.Violation{Kind: kindGroupBehind, Text: groupBehind.Error()})
	}
	if env.cluster != nil {
		n, diffs, err := compareReplicas(rctx, cl, env.cluster, v.topics)
		if err != nil {
			return r, nil, err
		}
		r.ReplicasCompared = n
		found = append(found, diffs...)
	}
	if faults != nil {
		var anomalies []history.Violation
		r.Faults, r.FaultCounts, anomalies = faults.report()
		found = append(found, anomalies...)
	}
	r.addViolations(found, func(v history.Violation) []string { return aroundLines(checker, logs, v, start, r.Faults) })
	r.Pass = r.Violations == 0
	if r.Pass && env.cluster == nil { // a local cluster goes whole
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		if _, err := adm.DeleteTopics(dctx, v.topics...); err != nil {
			fmt.Fprintf(progress, "the run passed, but deleting its topics %s failed: %v\n", strings.Join(v.topics, ", "), err)
		}
		if v.groupMembers > 0 {
			resp, err := adm.DeleteGroups(dctx, v.topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				fmt.Fprintf(progress, "the run passed, but deleting its group %s failed: %v\n", v.topic, err)
			}
		}
	}
	for _, l := range checker.Latencies() {
		tl.Ack(l.Sent, l.Acked)
	}
	for _, ev := range r.Faults {
		label := ev.Kind
		if ev.Node != 0 {
			label += " " + strconv.Itoa(ev.Node)
		}
		tl.Fault(timeline.Fault{Kind: ev.Kind, Label: label, Start: ev.At, End: ev.HealedAt})
	}
	return r, tl, nil
}
