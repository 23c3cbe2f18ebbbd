package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/netfault"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Bad settings fail before anything connects (the brokers named are a
// closed port), one line each; what is not built is refused, not
// ignored.
func TestVerifyBadInput(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`--workload "files": want queue, groups, http or txn`, []string{"--workload", "files"}},
		{"--group-members goes without --workload txn", []string{"--workload", "txn", "--group-members", "2"}},
		{`--workload "` + strings.Repeat("x", 64) + `...": want queue, groups, http or txn`, []string{"--workload", strings.Repeat("x", 100000)}},
		{"--workload http needs --http host:port,...", []string{"--workload", "http"}},
		{"--http goes with --workload http", []string{"--http", "127.0.0.1:8082"}},
		{"--group-members 1: the groups workload needs 2 or more", []string{"--workload", "groups", "--group-members", "1"}},
		{"--churn-interval goes with --workload groups", []string{"--churn-interval", "1s"}},
		{"--churn-interval 10ms: want 100ms to 1h", []string{"--workload", "groups", "--churn-interval", "10ms"}},
		{"--local starts its own cluster: --brokers goes without it", []string{"--local"}},
		{"--fault-cmd: exec: \"./no-such-faults.sh\"", []string{"--fault-cmd", "./no-such-faults.sh"}},
		{"--nodes goes with --local", []string{"--nodes", "3"}},
		{"--data-dir goes with --local", []string{"--data-dir", "/tmp"}},
		{"--faults and --fault-interval go with --local or --fault-cmd", []string{"--faults", "kill"}},
		{"--faults and --fault-interval go with --local or --fault-cmd", []string{"--fault-interval", "5s"}},
		{"--fault-interval 0s: want 1s to 1h", []string{"--fault-cmd", "/bin/true", "--fault-interval", "0"}},
		{"--live-within 2h0m0s: want 1s to 1h", []string{"--live-within", "2h"}},
		{"--faults: restart is not part of the --fault-cmd protocol", []string{"--fault-cmd", "/bin/true", "--faults", "kill,restart"}},
		{"--faults: torn-write is not part of the --fault-cmd protocol (kill, pause, isolate, heal); --local does it", []string{"--fault-cmd", "/bin/true", "--faults", "torn-write"}},
		{`--faults "kill,,": "" is not a fault`, []string{"--fault-cmd", "/bin/true", "--faults", "kill,,"}},
		{`"` + strings.Repeat("z", 32) + `..." is not a fault`, []string{"--fault-cmd", "/bin/true", "--faults", strings.Repeat("z", 100000)}},
		{"--duration 0s: want more than 0 and at most 24h", []string{"--duration", "0"}},
		{"--duration 48h0m0s: want more than 0 and at most 24h", []string{"--duration", "48h"}},
		{`invalid argument "soon" for "--duration" flag`, []string{"--duration", "soon"}},
		{"--rate 0: want 1 to 1000000", []string{"--rate", "0"}},
		{"--rate 2000000: want 1 to 1000000", []string{"--rate", "2000000"}},
		{"--producers 0: want 1 to 64", []string{"--producers", "0"}},
		{"--topics 0: want 1 to 100", []string{"--topics", "0"}},
		{"--topics 101: want 1 to 100", []string{"--topics", "101"}},
		{"--producers 65: want 1 to 64", []string{"--producers", "65"}},
		{"--group-members -1: want 0 to 64", []string{"--group-members", "-1"}},
		{"--group-members 65: want 0 to 64", []string{"--group-members", "65"}},
		{"--value-size 8: want 32 to 1048576", []string{"--value-size", "8"}},
		{"--value-size 2097152: want 32 to 1048576", []string{"--value-size", "2097152"}},
		{`invalid argument "0" for "--partitions" flag`, []string{"--partitions", "0"}},
		{`invalid argument "-1" for "--seed" flag`, []string{"--seed", "-1"}},
		{`--flush-policy "sometimes": want ack or interval`, []string{"--flush-policy", "sometimes"}},
		{`--flush-policy "` + strings.Repeat("y", 64) + `...": want ack or interval`, []string{"--flush-policy", strings.Repeat("y", 100000)}},
		{"--flush-ms goes with --flush-policy interval", []string{"--flush-ms", "100"}},
		{"--flush-ms goes with --flush-policy interval", []string{"--flush-policy", "ack", "--flush-ms", "100"}},
		{"--flush-ms 0: want 1 to 86400000", []string{"--flush-policy", "interval", "--flush-ms", "0"}},
		{"--flush-ms 86400001: want 1 to 86400000", []string{"--flush-policy", "interval", "--flush-ms", "86400001"}},
		{`invalid argument "1s" for "--flush-ms" flag`, []string{"--flush-ms", "1s"}},
		{"unknown command \"now\"", []string{"now"}},
	} {
		r := fjord(t, "", append([]string{"verify", "--brokers", addr}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("fjord verify %s: exit %d, stderr %q; want exit 1 before connecting, saying %q", short(tc.args), r.code, r.stderr, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
			t.Errorf("fjord verify %s: error is %d lines, want one", short(tc.args), n+1)
		}
	}
}

// On the shared node: a short queue run passes, its counts agree, its
// topic is deleted, and a second run into an existing topic is refused
// before it writes.
func TestVerifyPassesOnANode(t *testing.T) {
	// Long enough for the group to form (a new group waits 3 s for its
	// members) and commit.
	r := ok(t, "", "verify", "--duration", "8s", "--rate", "300", "--seed", "42", "--partitions", "3", "--report-dir", "", "-o", "json")
	doc := decodeJSON(t, r.stdout)
	m := wantKeys(t, "verify", doc, "pass", "workload", "topic", "seed", "sent", "acknowledged", "failed_writes", "read_back",
		"unacknowledged_read_back", "read_live", "reader_errors", "group_commits", "group_errors", "violations", "violation_counts", "anomalies", "command",
		"mode", "faults", "fault_counts", "replicas_compared", "flush", "anomaly_details", "allowed_losses", "allowed_loss_counts", "allowed_loss_examples", "group_churn", "report_files", "topics")
	// The shared node describes the topic's flush policy: Fjord's default.
	if flush, _ := m["flush"].(map[string]any); flush["flush_policy"] != "ack" {
		t.Errorf("flush %v, want the default policy, ack", m["flush"])
	}
	if m["pass"] != true || number(t, m["acknowledged"]) < 500 || number(t, m["read_back"]) != number(t, m["acknowledged"])+number(t, m["unacknowledged_read_back"]) ||
		number(t, m["violations"]) != 0 || number(t, m["read_live"]) == 0 || number(t, m["group_commits"]) == 0 || m["topic"] != "fjord-verify-42" || !strings.Contains(fmt.Sprint(m["command"]), "--seed 42") {
		t.Fatalf("fjord verify: %v", m)
	}
	if out := ok(t, "", "topic", "list").stdout; strings.Contains(out, "fjord-verify-42") {
		t.Errorf("the passed run's topic is still there:\n%s", out)
	}
	if out := ok(t, "", "group", "list").stdout; strings.Contains(out, "fjord-verify-42") {
		t.Errorf("the passed run's group is still there:\n%s", out)
	}
	// A group of the topic's name with offsets from before is another
	// history: refused before anything is written.
	stale := topicName("verify-stale")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ok(t, "", "topic", "create", "other-"+stale)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "other-" + stale, Partition: 0, At: 0})
	if resp, err := kadm.NewClient(cl).CommitOffsets(t.Context(), stale, offsets); err != nil || resp.Error() != nil {
		t.Fatalf("committing for the stale group: %v %v", err, resp.Error())
	}
	fails(t, "the group "+stale+" has committed offsets from an earlier run", "verify", "--topic", stale, "--duration", "1s", "--brokers", brokers(t))
	topic := topicName("verify-existing")
	ok(t, "", "topic", "create", topic)
	fails(t, "creating the topic "+topic+" (it must not exist", "verify", "--topic", topic, "--duration", "1s", "--brokers", brokers(t))
}

// The http workload on the shared node: producers with idempotency keys,
// the stateless reader and a group consuming, committing and now and
// then seeking back, all over the HTTP API; checked like the others.
func TestVerifyHTTPWorkload(t *testing.T) {
	r := ok(t, "", "verify", "--workload", "http", "--http", sharedNode(t).HTTPAddr().String(), "--duration", "8s", "--rate", "300",
		"--partitions", "3", "--seed", "78", "--report-dir", t.TempDir(), "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	// --rate is a ceiling, not a promise: on a loaded machine fewer go
	// out in 8 s. What is checked is a run that did produce (at least a
	// second's worth), read and commit; rates are for benchmarks.
	if !rep.Pass || rep.Workload != "http" || rep.Acked < 300 || rep.Commits == 0 || rep.LiveReads == 0 || rep.Read != rep.Acked+rep.Unacked {
		t.Fatalf("report %+v\n%s", rep, r.stderr)
	}
	if !strings.Contains(rep.Command, "--workload http") || !strings.Contains(rep.Command, "--http "+sharedNode(t).HTTPAddr().String()) {
		t.Errorf("command %q does not repeat the run", rep.Command)
	}
}

// The txn workload on the shared node: transactional producers
// committing four transactions in five; the reader and the read-back
// read read_committed, and no record of an aborted transaction may be
// read (the checker's aborted-read, TestCheckerAbortedTransactions).
func TestVerifyTxnWorkload(t *testing.T) {
	r := ok(t, "", "verify", "--workload", "txn", "--topic", topicName("verify-txn"), "--duration", "8s", "--rate", "300",
		"--partitions", "3", "--seed", "80", "--report-dir", "", "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if !rep.Pass || rep.Workload != "txn" || rep.Acked < 500 || rep.Aborted == 0 || rep.LiveReads == 0 || rep.Read != rep.Acked+rep.Unacked {
		t.Fatalf("report %+v\n%s", rep, r.stderr)
	}
	if !strings.Contains(rep.Command, "--workload txn") {
		t.Errorf("command %q does not repeat the run", rep.Command)
	}
}

// A run over several topics: each key belongs to one, the reader, the
// group and the check cover them all, and all are deleted after the pass.
func TestVerifyManyTopics(t *testing.T) {
	r := ok(t, "", "verify", "--topic", topicName("verify-many"), "--topics", "3", "--partitions", "2", "--duration", "5s", "--rate", "300",
		"--seed", "79", "--report-dir", "", "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if !rep.Pass || len(rep.Topics) != 3 || rep.Read != rep.Acked+rep.Unacked || rep.Acked < 1000 || !strings.Contains(rep.Command, "--topics 3") {
		t.Fatalf("report %+v\n%s", rep, r.stderr)
	}
	out := ok(t, "", "topic", "list").stdout
	for _, topic := range rep.Topics {
		if !strings.HasPrefix(topic, rep.Topic+"-") {
			t.Errorf("topic %s is not named after %s", topic, rep.Topic)
		}
		if strings.Contains(out, topic) {
			t.Errorf("the passed run's topic %s is still there", topic)
		}
	}
}

// A report directory that cannot be made is said, and the run's verdict
// stands: the check ran whatever became of its files.
func TestVerifyReportDirUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := ok(t, "", "verify", "--duration", "2s", "--rate", "100", "--partitions", "1", "--group-members", "0", "--report-dir", filepath.Join(file, "reports"), "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.Pass || len(rep.ReportFiles) != 0 || !strings.Contains(r.stderr, "writing the report to "+filepath.Join(file, "reports")) {
		t.Fatalf("%v: %+v\nstderr:\n%s", err, rep, r.stderr)
	}
}

// The groups workload on the shared node: members join, leave and die
// (connections cut, never leaving) while the producers write, and the
// group still owns each partition once a generation, commits only what
// it processed, skips nothing, and catches up once the writes stop.
func TestVerifyGroupsWorkload(t *testing.T) {
	r := ok(t, "", "verify", "--brokers", brokers(t), "--workload", "groups", "--duration", "14s", "--rate", "300", "--partitions", "4",
		"--churn-interval", "1s", "--seed", "77", "--report-dir", t.TempDir(), "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if !rep.Pass || rep.Workload != "groups" || rep.Commits == 0 || rep.Read != rep.Acked+rep.Unacked {
		t.Fatalf("report %+v\n%s", rep, r.stderr)
	}
	for _, k := range []string{churnJoin, churnLeave, churnDie} {
		if rep.GroupChurn[k] == 0 {
			t.Errorf("no member did %s: %v", k, rep.GroupChurn)
		}
	}
	if !strings.Contains(rep.Command, "--workload groups") || !strings.Contains(rep.Command, "--churn-interval 1s") || !strings.Contains(rep.Command, "--group-members 4") {
		t.Errorf("command %q does not repeat the run", rep.Command)
	}
}

// The checker in the command can fail: a record written into the run's
// topic by someone else is one the run never sent, and the run says
// FAIL, exits 1 and keeps the topic.
func TestVerifyFailsOnARecordItNeverSent(t *testing.T) {
	topic := topicName("verify-intruder")
	done := make(chan result, 1)
	go func() {
		done <- fjord(t, "", "verify", "--topic", topic, "--duration", "4s", "--rate", "200", "--partitions", "1", "--group-members", "0", "--report-dir", t.TempDir(), "--brokers", brokers(t))
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.Eventually(t, 10*time.Second, func() error {
		select {
		case r := <-done:
			t.Fatalf("fjord verify ended before its topic was seen: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		// A Metadata request of its own (kadm's may answer from the
		// client's cache), asking not to create the topic.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return fmt.Errorf("%s not created yet", topic)
		}
		return nil
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("intruder")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL: queue workload on "+topic) || !strings.Contains(r.stdout, `phantom: `+topic+`-0 offset`) ||
		!strings.Contains(r.stdout, `value "intruder" was never sent`) || !strings.Contains(r.stdout, "violations (1 phantom)") ||
		!strings.Contains(r.stderr, "the topics "+topic+" and the group "+topic+" are kept") {
		t.Fatalf("fjord verify with an intruder: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, "", "topic", "list").stdout; !strings.Contains(out, topic) {
		t.Errorf("the failed run's topic was deleted:\n%s", out)
	}
}

// --local's own settings are refused before any node starts.
func TestVerifyLocalBadInput(t *testing.T) {
	parent := t.TempDir()
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--nodes 0: want 1 to 5", []string{"--nodes", "0"}},
		{"--nodes 9: want 1 to 5", []string{"--nodes", "9"}},
		{"--fault-cmd goes with --brokers", []string{"--fault-cmd", "/bin/true"}},
		{"--http goes without --local", []string{"--workload", "http", "--http", "127.0.0.1:8082"}},
		{"--faults: cut needs --nodes 2 or more: a lone node has no links to fault", []string{"--nodes", "1", "--faults", "kill,cut"}},
		{"--faults: bridge needs --nodes 3 or more", []string{"--nodes", "2", "--faults", "bridge"}},
		{`--faults "explode": "explode" is not a fault; want some of kill,pause,restart,kill-all,torn-write,bit-flip,isolate,split,bridge,cut,delay, or none`, []string{"--faults", "explode"}},
	} {
		r := fjord(t, "", append([]string{"verify", "--local", "--data-dir", parent}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "starting") {
			t.Errorf("fjord verify --local %s: exit %d, stderr %q; want exit 1 before starting nodes, saying %q", short(tc.args), r.code, r.stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("refused runs left %d entries in %s", len(entries), parent)
	}
}

// Acceptance point 1 and the CI run: a cluster of three of its own, every
// local fault kind injected (the default mix is every kind the machine
// can do, dealt in rounds, so the first faults are one of each; CI runs
// as root, so the network's kinds are among them), on the groups
// workload (the queue workload's producers and reader, and a group whose
// members join, leave and die), for two minutes: the cluster live again
// after each heal, nothing acknowledged lost, the group caught up, the
// replicas identical, the report written, and everything removed after
// the pass, the network namespaces too.
//
// The long run (FJORD_VERIFY_LONG=1, or a duration: FJORD_VERIFY_LONG=2h)
// is the same for each of the three workloads in turn, 30 minutes each by
// default, with the default 10 s between faults:
//
//	FJORD_VERIFY_LONG=1 go test ./cmd/fjord -run TestVerifyLocalWithEveryFault -timeout 0 -v
func TestVerifyLocalWithEveryFault(t *testing.T) {
	// The nodes are this test binary, run as fjord (see TestMain).
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	// The network faults need ip and tc: installed if missing, never
	// skipped.
	if err := netfault.Install(); err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		workload string
		duration time.Duration
		interval string
	}{{workloadGroups, 2 * time.Minute, "3s"}}
	if long := os.Getenv("FJORD_VERIFY_LONG"); long != "" {
		d, err := time.ParseDuration(long)
		if err != nil {
			d = 30 * time.Minute
		}
		runs = runs[:0]
		for _, w := range []string{workloadQueue, workloadGroups, workloadHTTP, workloadTxn} {
			runs = append(runs, struct {
				workload string
				duration time.Duration
				interval string
			}{w, d, "10s"})
		}
	}
	for i, tc := range runs {
		t.Run(tc.workload, func(t *testing.T) {
			seed := fmt.Sprint(16 + i)
			parent, reports := t.TempDir(), t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), tc.duration+4*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"verify", "--local", "--nodes", "3", "--data-dir", parent, "--workload", tc.workload,
				"--duration", tc.duration.String(), "--rate", "400", "--topics", "2", "--partitions", "3", "--fault-interval", tc.interval,
				"--seed", seed, "--report-dir", reports, "-o", "json"}, strings.NewReader(""), &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			var r verifyReport
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("%v:\n%s", err, stdout.String())
			}
			if !r.Pass || r.Mode != "local" || r.Nodes != 3 || r.Violations != 0 || r.ReplicasCompared != 6 || len(r.Topics) != 2 || r.Acked < 10000 || r.Commits == 0 {
				t.Fatalf("report: %+v", r)
			}
			for _, k := range allFaultKinds {
				if r.FaultCounts[k] == 0 {
					t.Errorf("no %s fault injected: %v\n%s", k, r.FaultCounts, stderr.String())
				}
			}
			for _, ev := range r.Faults {
				if ev.Error != "" || ev.LiveAfter < 0 || ev.HealedAt <= ev.At {
					t.Errorf("fault %s", ev)
				}
				if slices.Contains(networkFaultKinds, ev.Kind) && ev.Detail == "" {
					t.Errorf("network fault %s does not say which links it cut", ev)
				}
				// The damage was done, and found: a node whose recovery
				// missed it would have failed the run (damage-unnoticed).
				if (ev.Kind == faultTornWrite || ev.Kind == faultBitFlip) && (ev.Detail == "" || !strings.Contains(ev.Effect, "recovery cut damage from")) {
					t.Errorf("disk fault %s: no damage done or none found", ev)
				}
			}
			if tc.workload == workloadGroups && (r.GroupChurn[churnJoin] == 0 || r.GroupChurn[churnLeave]+r.GroupChurn[churnDie] == 0) {
				t.Errorf("the group did not churn: %v", r.GroupChurn)
			}
			if !strings.Contains(r.Command, "--local --nodes 3") || !strings.Contains(r.Command, "--seed "+seed) {
				t.Errorf("command %q does not repeat the run", r.Command)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("the passed run left %d entries in %s", len(entries), parent)
			}
			// The report's files: the JSON is what was printed, the PNG a
			// picture of the run.
			base := filepath.Join(reports, "verify-"+seed)
			if want := []string{base + ".json", base + ".png"}; !slices.Equal(r.ReportFiles, want) {
				t.Errorf("report files %q, want %q", r.ReportFiles, want)
			}
			if saved, err := os.ReadFile(base + ".json"); err != nil || !bytes.Equal(bytes.TrimSpace(saved), bytes.TrimSpace(stdout.Bytes())) {
				t.Errorf("%s.json (%v) is not the report printed", base, err)
			}
			if f, err := os.Open(base + ".png"); err != nil {
				t.Error(err)
			} else {
				img, err := png.Decode(f)
				f.Close()
				if err != nil || img.Bounds().Dx() < 1000 {
					t.Errorf("%s.png: %v", base, err)
				}
			}
			if strings.Contains(stderr.String(), "left out of the faults") {
				t.Errorf("the default mix left kinds out:\n%s", stderr.String())
			}
			if out, err := exec.Command("ip", "netns", "list").Output(); err != nil || strings.Contains(string(out), fmt.Sprintf("fjordt-%d-", os.Getpid())) {
				t.Errorf("ip netns list: %v, %s: the run's namespaces are left", err, out)
			}
		})
	}
}

// Acceptance point 4: every node killed at once, under each flush
// policy, on nodes whose unsynced writes die with them. Under interval,
// with flush.ms a minute (nothing is fsynced before the first
// kill-all), the records acknowledged before it are lost, and the report
// counts them as what the policy allows, not as violations: the run
// passes. Under ack nothing is lost at all.
func TestVerifyFlushPolicyUnderKillAll(t *testing.T) {
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	for i, tc := range []struct {
		policy string
		args   []string
	}{
		{"interval", []string{"--flush-policy", "interval", "--flush-ms", "60000"}},
		{"ack", []string{"--flush-policy", "ack"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			parent := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"verify", "--local", "--nodes", "3", "--data-dir", parent, "--duration", "20s", "--rate", "300",
				"--partitions", "3", "--faults", "kill-all", "--fault-interval", "4s", "--seed", fmt.Sprint(40 + i), "--report-dir", t.TempDir(), "-o", "json"}, tc.args...)
			if code := run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			var r verifyReport
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("%v:\n%s", err, stdout.String())
			}
			if !r.Pass || r.Violations != 0 || r.FaultCounts[faultKillAll] == 0 || r.Flush.Policy != tc.policy {
				t.Fatalf("report: %+v\n%s", r, stderr.String())
			}
			if tc.policy == "ack" {
				if r.Allowed != 0 || r.Read < r.Acked {
					t.Fatalf("flush.policy=ack: %d losses allowed, %d read back of %d acknowledged; want nothing lost", r.Allowed, r.Read, r.Acked)
				}
				return
			}
			if r.Flush.Ms != 60000 || r.AllowedCounts[history.KindLost] == 0 || r.Read >= r.Acked || len(r.AllowedExamples) == 0 {
				t.Fatalf("flush.policy=interval: flush %+v, allowed %v, %d read back of %d acknowledged; want acknowledged records lost, as allowed",
					r.Flush, r.AllowedCounts, r.Read, r.Acked)
			}
			for _, ev := range r.Faults {
				if ev.MayLoseFrom == nil || ev.MayLoseWhy == "" {
					t.Errorf("kill-all %s: no window of what it may lose", ev)
				}
			}
		})
	}
}

// --fault-cmd's protocol: the script is called with kill NODE, pause
// NODE (the shared node's id) and heal, in the schedule's order, the
// faults are counted, and a script that fails is a failed run naming
// its output.
func TestVerifyFaultCmdProtocol(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "faults.sh")
	body := "#!/bin/sh\necho \"$@\" >> " + calls + "\n[ \"$1\" = heal ] && [ -e " + filepath.Join(dir, "broken") + " ] && { echo the heal broke; exit 3; }\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "--fault-cmd", script, "--faults", "kill,pause", "--fault-interval", "1s", "--duration", "8s",
		"--rate", "200", "--partitions", "2", "--group-members", "0", "--report-dir", dir, "-o", "json"}
	r := ok(t, "", append(args, "--seed", "161")...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if !rep.Pass || len(rep.Faults) < 2 || len(lines) != 2*len(rep.Faults) {
		t.Fatalf("report %+v; the script was called %q", rep, lines)
	}
	for i, ev := range rep.Faults {
		if want := fmt.Sprintf("%s %d", ev.Kind, ev.Node); lines[2*i] != want || lines[2*i+1] != "heal" {
			t.Errorf("fault %d: calls %q, %q; want %q, heal", i, lines[2*i], lines[2*i+1], want)
		}
	}
	if rep.FaultCounts[faultKill] == 0 || rep.FaultCounts[faultPause] == 0 {
		t.Errorf("fault counts %v, want kill and pause", rep.FaultCounts)
	}

	if err := os.WriteFile(filepath.Join(dir, "broken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := fjord(t, "", append(args, "--seed", "162", "--brokers", sharedNode(t).KafkaAddr().String())...)
	if f.code != 1 || !strings.Contains(f.stdout, "the heal broke") || !strings.Contains(f.stderr, "FAIL") {
		t.Fatalf("a failing heal: exit %d\nstdout:\n%s\nstderr:\n%s", f.code, f.stdout, f.stderr)
	}
	// The failed run's topic is kept; remove it so other tests' listings
	// stay small.
	ok(t, "", "topic", "delete", "fjord-verify-162")
}

// Acceptance point 3: against a cluster of three started with fjord
// dev, faulted by README's dev-faults script through --fault-cmd
// (SIGKILL and SIGSTOP by the pids dev keeps; dev starts a killed node
// again), the run passes and counts every kind of fault it drew.
func TestVerifyAgainstADevCluster(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "fjord-dev")
	d := startDev(t, dir, "--nodes", "3", "--data-dir", cluster, "--restart-killed-after", "1s")
	script := filepath.Join(dir, "dev-faults")
	if err := os.WriteFile(script, []byte(strings.Join(readmeBlock(t, "dev-faults"), "\n")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FJORD_DEV_DIR", cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"verify", "--brokers", d.brokers, "--fault-cmd", script, "--faults", "kill,pause,kill-all",
		"--fault-interval", "3s", "--duration", "40s", "--rate", "300", "--partitions", "3", "--seed", "163", "--report-dir", dir, "-o", "json"},
		strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\ndev:\n%s", code, stdout.String(), stderr.String(), d.stderr)
	}
	var r verifyReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if !r.Pass || r.Violations != 0 || r.Acked < 5000 {
		t.Fatalf("report: %+v", r)
	}
	for _, k := range []string{faultKill, faultPause, faultKillAll} {
		if r.FaultCounts[k] == 0 {
			t.Errorf("no %s fault injected: %v\n%s", k, r.FaultCounts, stderr.String())
		}
	}
	for _, ev := range r.Faults {
		if ev.Error != "" || ev.LiveAfter < 0 {
			t.Errorf("fault %s", ev)
		}
	}
	// dev started every killed node again: its log says so, and every
	// node runs under the pid its file names.
	if n := strings.Count(d.stderr.String(), "started again, pid"); n < r.FaultCounts[faultKill]+3*r.FaultCounts[faultKillAll] {
		t.Errorf("dev started %d nodes again after %v:\n%s", n, r.FaultCounts, d.stderr)
	}
	for id := 1; id <= 3; id++ {
		b, err := os.ReadFile(filepath.Join(cluster, fmt.Sprintf("node-%d.pid", id)))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !processAlive(pid) {
			t.Errorf("node %d's pid file says %q, not a running process", id, b)
		}
	}
	d.interrupt()
}
