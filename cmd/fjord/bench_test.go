package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/bench"
)

// bench runs `fjord bench ...` in-process, with newBenchCommand as the
// root (main.go's command list is the lead's to wire).
func benchCLI(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := newBenchCommand()
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	code := 0
	if err := cmd.ExecuteContext(ctx); err != nil {
		stderr.WriteString("fjord: " + err.Error() + "\n")
		code = 1
	}
	return result{stdout.String(), stderr.String(), code}
}

// writeWorkload writes dir/<name>.yaml, the workload named name with
// the given fields, and returns its path.
func writeWorkload(t *testing.T, dir, name, fields string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte("name: "+name+"\n"+fields), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readBenchResult(t *testing.T, path string) *bench.Result {
	t.Helper()
	res, err := bench.ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(strings.TrimSuffix(path, ".json") + ".png"); err != nil || st.Size() == 0 {
		t.Errorf("no PNG beside %s: %v", path, err)
	}
	return res
}

// The issue's first acceptance point, shortened: `fjord bench run
// max-rate-1p-1kb --local` starts a node from this binary, runs, prints
// the table, writes JSON and PNG, and leaves no node or directory
// behind.
func TestBenchRunLocal(t *testing.T) {
	// The node is this test binary, run as fjord (see TestMain).
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	parent, out := t.TempDir(), t.TempDir()
	r := benchCLI(t, "run", "max-rate-1p-1kb", "--local", "--data-dir", parent, "--duration", "2s", "--warmup", "500ms", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"max-rate-1p-1kb on fjord", ": PASSED", "produce ack", "end-to-end", "peak RSS", "ok    consumed == produced", "acks=all", "max-rate-1p-1kb-fjord.json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "local node: pid") {
		t.Errorf("stderr does not say which node ran:\n%s", r.stderr)
	}
	res := readBenchResult(t, filepath.Join(out, "max-rate-1p-1kb-fjord.json"))
	if !res.Passed || res.Produce.Records == 0 || res.Workload.TestDurationSeconds != 2 || res.Workload.WarmupSeconds != 0.5 {
		t.Errorf("result: passed %v, produce %+v, workload %+v", res.Passed, res.Produce, res.Workload)
	}
	if len(res.Nodes) != 1 || res.Nodes[0].PeakRSSBytes == 0 || res.Nodes[0].CPUSeconds <= 0 {
		t.Errorf("node stats %+v, want one node's", res.Nodes)
	}
	// The node was stopped and its directory removed.
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("--local left %d entries in %s", len(entries), parent)
	}
	for _, n := range res.Nodes {
		if _, err := os.Stat("/proc/" + strconv.Itoa(n.PID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node pid %d still exists after the run (%v)", n.PID, err)
		}
	}
}

// --nodes 3: three nodes from this binary as one cluster, topics with
// three replicas (acks=all waits for all of them), the run's own
// exactly-once accounting, each node's figures, and nothing left
// behind. A fixed, modest rate keeps four processes on a small machine
// from measuring only its scheduler.
//
// With --producer raw the same run's records come from pre-encoded
// produce requests, to three leaders at once.
func TestBenchRunLocalCluster(t *testing.T) {
	for _, producer := range []string{"franz-go", "raw"} {
		t.Run(producer, func(t *testing.T) { testBenchRunLocalCluster(t, producer) })
	}
}

func testBenchRunLocalCluster(t *testing.T, producer string) {
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	dir := t.TempDir()
	wl := writeWorkload(t, dir, "cluster-small", `
topics: 1
partitionsPerTopic: 6
messageSize: 512
producersPerTopic: 2
consumerPerSubscription: 2
producerRate: 3000
testDurationSeconds: 2
warmupSeconds: 0.5
`)
	parent, out := filepath.Join(dir, "data"), filepath.Join(dir, "results")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	r := benchCLI(t, "run", wl, "--local", "--nodes", "3", "--data-dir", parent, "--out", out, "--producer", producer)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"starting 3 local nodes", "local node 1: pid", "local node 2: pid", "local node 3: pid"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, want := range []string{"ok    consumed == produced", "  node 1    pid", "  node 3    pid", "  nodes     CPU", "topic replication.factor=3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	res := readBenchResult(t, filepath.Join(out, "cluster-small-fjord.json"))
	if !res.Passed || res.Produce.Records == 0 || res.Consume.TotalRecords != res.Produce.TotalRecords {
		t.Errorf("result: passed %v, produced %d, consumed %d; checks %+v", res.Passed, res.Produce.TotalRecords, res.Consume.TotalRecords, res.Checks)
	}
	if rf := res.DriverSettings["topic replication.factor"]; rf != "3" {
		t.Errorf("topic replication.factor %q, want 3 from three nodes", rf)
	}
	if raw := strings.HasPrefix(res.DriverSettings["producer"], "raw:"); raw != (producer == "raw") {
		t.Errorf("--producer %s: producer setting %q", producer, res.DriverSettings["producer"])
	}
	if len(res.Nodes) != 3 {
		t.Fatalf("%d nodes' figures, want 3: %+v", len(res.Nodes), res.Nodes)
	}
	pids := map[int]bool{}
	for i, n := range res.Nodes {
		// Every node works: it leads a third of the partitions and
		// follows the rest.
		if n.ID != i+1 || n.Error != "" || n.PeakRSSBytes == 0 || n.CPUSeconds <= 0 || n.CPUWindowSeconds != 2 {
			t.Errorf("node %d's figures %+v", i+1, n)
		}
		pids[n.PID] = true
		if _, err := os.Stat("/proc/" + strconv.Itoa(n.PID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node %d (pid %d) still exists after the run (%v)", n.ID, n.PID, err)
		}
	}
	if len(pids) != 3 {
		t.Errorf("the nodes' pids %v are not three processes", pids)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("--local left %d entries in %s", len(entries), parent)
	}
}

// --cpu-profile fetches the local node's CPU profile over the measured
// window: a gzipped pprof protobuf.
func TestBenchRunLocalCPUProfile(t *testing.T) {
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	// The user's environment must not give the node a profiling
	// listener of its own choosing: --local sets every serve flag.
	t.Setenv("FJORD_PPROF_ADDR", "not-an-address")
	parent, out := t.TempDir(), t.TempDir()
	// In a directory that does not exist yet: the run makes it, as it
	// makes --out (a regression: the profile was lost at the end of a run).
	prof := filepath.Join(t.TempDir(), "profiles", "node.pprof")
	r := benchCLI(t, "run", "max-rate-1p-1kb", "--local", "--data-dir", parent, "--duration", "2s", "--warmup", "500ms", "--out", out, "--cpu-profile", prof)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "profiling the node for 2 s into "+prof) {
		t.Errorf("stderr does not say the node is profiled:\n%s", r.stderr)
	}
	// The node's samples carry its functions' names.
	checkProfile(t, prof, "github.com/fjordmq/fjord/")
	res := readBenchResult(t, filepath.Join(out, "max-rate-1p-1kb-fjord.json"))
	if res.Client == nil || res.Client.CPUSeconds <= 0 || res.Client.CPUWindowSeconds != 2 {
		t.Errorf("client stats %+v, want CPU over the 2 s window", res.Client)
	}
}

// A catch-up run's window ends with its last record, so the node's
// profile takes --cpu-profile-seconds; the client's profile stops with
// the window by itself.
func TestBenchRunLocalCatchUpProfiles(t *testing.T) {
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	dir := t.TempDir()
	wl := writeWorkload(t, dir, "catchup-small", `
topics: 1
partitionsPerTopic: 4
messageSize: 1024
payloadRandomness: 1
producersPerTopic: 2
consumerPerSubscription: 2
consumerBacklogSizeGB: 0.25
`)
	out := filepath.Join(dir, "results")
	nodeProf := filepath.Join(dir, "profiles", "node.pprof")
	clientProf := filepath.Join(dir, "profiles", "client.pprof")
	r := benchCLI(t, "run", wl, "--local", "--data-dir", dir, "--out", out,
		"--cpu-profile", nodeProf, "--cpu-profile-seconds", "1", "--client-cpu-profile", clientProf)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"profiling the node for 1 s into " + nodeProf, "profiling this process over the window into " + clientProf} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	// 256 MiB to serve keeps both processes busy for many 10 ms
	// samples, even on a fast machine.
	checkProfile(t, nodeProf, "github.com/fjordmq/fjord/")
	// The load generator's consumers are franz-go's.
	checkProfile(t, clientProf, "github.com/twmb/franz-go/")
	if res := readBenchResult(t, filepath.Join(out, "catchup-small-fjord.json")); !res.Passed || res.Consume.Records == 0 {
		t.Errorf("catch-up run: passed %v, consumed %d", res.Passed, res.Consume.Records)
	}
}

// checkProfile fails t unless path is a gzipped pprof profile whose
// symbols include want.
func checkProfile(t *testing.T, path, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("profile %s of %d bytes is not gzipped: %v", path, len(data), err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) == 0 {
		t.Fatalf("profile %s does not decompress to anything: %d bytes, %v", path, len(raw), err)
	}
	if !bytes.Contains(raw, []byte(want)) {
		t.Errorf("profile %s names nothing under %s", path, want)
	}
}

// Against an existing node: --brokers, a fixed-rate workload file, the
// topics' flush.policy, and the node's figures by --node-pid (the
// shared node runs in this process).
func TestBenchRunBrokers(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "small.yaml")
	os.WriteFile(wl, []byte(`
name: small
topics: 1
partitionsPerTopic: 2
messageSize: 256
producersPerTopic: 1
consumerPerSubscription: 2
producerRate: 1000
testDurationSeconds: 1
`), 0o644)
	out := filepath.Join(dir, "results")
	r := benchCLI(t, "run", wl, "--brokers", brokers(t), "--flush-policy", "interval", "--out", out, "--node-pid", strconv.Itoa(os.Getpid()))
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	res := readBenchResult(t, filepath.Join(out, "small-fjord.json"))
	if !res.Passed || res.DriverSettings["topic flush.policy"] != "interval" || len(res.Nodes) != 1 || res.Nodes[0].PID != os.Getpid() {
		t.Errorf("result: passed %v, settings %v, nodes %+v", res.Passed, res.DriverSettings, res.Nodes)
	}
	// The rate itself is internal/bench's to test; here, that the file's
	// workload is what ran.
	if res.Workload.Name != "small" || res.Workload.ProducerRate != 1000 || res.Produce.Seconds != 1 || res.Produce.Records == 0 {
		t.Errorf("ran %+v, produce %+v", res.Workload, res.Produce)
	}
}

func TestBenchRunRejects(t *testing.T) {
	dir := t.TempDir()
	rf3 := writeWorkload(t, dir, "rf3", "topics: 1\npartitionsPerTopic: 1\nmessageSize: 100\nproducersPerTopic: 1\nconsumerPerSubscription: 1\ntestDurationSeconds: 1\nreplicationFactor: 3\n")
	password := filepath.Join(dir, "bench.pw")
	if err := os.WriteFile(password, []byte("bench-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "bench", "--sasl-password-file", password}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "max-rate-1p-1kb", "--local", "--brokers", "127.0.0.1:9092"}, "give --local or --brokers, not both"},
		{[]string{"run", "max-rate-1p-1k"}, `unknown workload "max-rate-1p-1k": want one of catchup-2gb,`},
		{[]string{"run", "catchup-2gb", "--duration", "3s"}, "--duration: catchup-2gb is a catch-up run"},
		{[]string{"run", "max-rate-1p-1kb", "--duration", "-3s"}, "--duration -3s: want a positive duration"},
		{[]string{"run", "max-rate-1p-1kb", "--data-dir", "/tmp"}, "--data-dir is for --local"},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--node-pid", "7"}, "--node-pid is for --brokers"},
		{[]string{"run", "max-rate-1p-1kb", "--flush-policy", "sometimes"}, "allowed: ack, interval"},
		{[]string{"run", "max-rate-1p-1kb", "--cpu-profile", "x.pprof"}, "--cpu-profile is for --local"},
		{[]string{"run", "catchup-2gb", "--local", "--cpu-profile", "x.pprof"}, "--cpu-profile: catchup-2gb's measured window ends with its last record, so its length is not known when it starts; give --cpu-profile-seconds"},
		{[]string{"run", "catchup-2gb", "--local", "--cpu-profile-seconds", "3"}, "give --cpu-profile too"},
		{[]string{"run", "catchup-2gb", "--local", "--cpu-profile", "x.pprof", "--cpu-profile-seconds", "-1"}, "allowed: an integer from 0 to 3600 (0: the measured window's)"},
		{[]string{"run", "catchup-2gb", "--local", "--cpu-profile", "x.pprof", "--cpu-profile-seconds", "1e9"}, "allowed: an integer from 0 to 3600"},
		{[]string{"run", "max-rate-1p-1kb", "--brokers", "127.0.0.1:1"}, "cannot reach a broker at 127.0.0.1:1"},
		{[]string{"run"}, "accepts 1 arg(s), received 0"},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--nodes", "0"}, `invalid argument "0" for "--nodes" flag: allowed: an integer from 1 to 5`},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--nodes", "-1"}, `invalid argument "-1" for "--nodes" flag: allowed: an integer from 1 to 5`},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--nodes", "6"}, `invalid argument "6" for "--nodes" flag: allowed: an integer from 1 to 5`},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--nodes", "x"}, `invalid argument "x" for "--nodes" flag: allowed: an integer from 1 to 5`},
		{[]string{"run", "max-rate-1p-1kb", "--brokers", "127.0.0.1:9092", "--nodes", "3"}, "--nodes is for --local: how many nodes it starts (--brokers names a running cluster)"},
		{[]string{"run", "max-rate-1p-1kb", "--nodes", "3"}, "--nodes is for --local"},
		{[]string{"run", "max-rate-1p-1kb", "--producer", "sarama"}, `invalid argument "sarama" for "--producer" flag: allowed: franz-go, raw`},
		{[]string{"run", rf3, "--local"}, "rf3 has replicationFactor 3, more than the 1 node(s) --local starts: give --nodes 3 or more"},
		{[]string{"run", rf3, "--local", "--nodes", "2"}, "rf3 has replicationFactor 3, more than the 2 node(s) --local starts: give --nodes 3 or more"},
		// The connection's security: for --brokers, and read before
		// anything connects or starts.
		{[]string{"run", "max-rate-1p-1kb", "--local", "--security-protocol", "SASL_SSL"}, "--security-protocol SASL_SSL is for --brokers: the nodes --local starts listen on PLAINTEXT"},
		{[]string{"run", "max-rate-1p-1kb", "--local", "--sasl-username", "bench"}, "--sasl-username and --sasl-password-file need --security-protocol SASL_SSL or SASL_PLAINTEXT"},
		{[]string{"run", "max-rate-1p-1kb", "--brokers", "127.0.0.1:1", "--security-protocol", "SASL_PLAINTEXT"}, "--security-protocol SASL_PLAINTEXT: give --sasl-username"},
		{[]string{"run", "max-rate-1p-1kb", "--brokers", "127.0.0.1:1", "--security-protocol", "SSL", "--ssl-ca-file", "/nonexistent/ca.pem"}, "CA file /nonexistent/ca.pem: file does not exist"},
		{append([]string{"run", "max-rate-1p-1kb", "--brokers", "127.0.0.1:1", "--producer", "raw"}, sasl...), "the raw producer speaks PLAINTEXT only (no TLS, no SASL); over SASL_PLAINTEXT use franz-go's"},
	} {
		r := benchCLI(t, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("fjord bench %s: exit %d, stderr %q; want a failure saying %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

// The group takes the other engineers' subcommands.
func TestBenchCommandTakesExtraSubcommands(t *testing.T) {
	extra := newBenchCommand().Commands()[0] // any command will do
	extra.Use = "limits"
	cmd := newBenchCommand(extra)
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if strings.Join(names, " ") != "limits run" {
		t.Errorf("subcommands %v, want limits and run", names)
	}
}

// --group: each subscription's consumers are one consumer group on a
// local node, and the run's own checks (every record once) still hold,
// for a timed run and a catch-up run.
func TestBenchRunLocalGroups(t *testing.T) {
	t.Setenv("FJORD_TEST_RUN_MAIN", "1")
	dir := t.TempDir()
	for name, body := range map[string]string{
		"timed-groups":   "topics: 1\npartitionsPerTopic: 4\nmessageSize: 256\nproducersPerTopic: 2\nconsumerPerSubscription: 2\nproducerRate: 2000\ntestDurationSeconds: 2\nwarmupSeconds: 1\n",
		"catchup-groups": "topics: 1\npartitionsPerTopic: 4\nmessageSize: 1024\nproducersPerTopic: 2\nconsumerPerSubscription: 3\nconsumerBacklogSizeGB: 0.02\n",
	} {
		wl := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(wl, []byte("name: "+name+"\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "results")
		r := benchCLI(t, "run", wl, "--local", "--data-dir", dir, "--out", out, "--group")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, r.code, r.stdout, r.stderr)
		}
		res := readBenchResult(t, filepath.Join(out, name+"-fjord.json"))
		if !res.Passed || res.Consume.Records == 0 || !strings.HasPrefix(res.DriverSettings["consumer"], "consumer group per subscription") {
			t.Errorf("%s: passed %v, consumed %d, consumer setting %q", name, res.Passed, res.Consume.Records, res.DriverSettings["consumer"])
		}
	}
}

// With several nodes, --cpu-profile FILE is one profile per node, named
// after it; a lone node's is FILE itself.
func TestNodeProfilePath(t *testing.T) {
	for _, tc := range []struct {
		path      string
		id, nodes int
		want      string
	}{
		{"prof/node.pprof", 1, 1, "prof/node.pprof"},
		{"prof/node.pprof", 2, 3, "prof/node-node2.pprof"},
		{"cpu", 3, 3, "cpu-node3"},
	} {
		if got := nodeProfilePath(tc.path, tc.id, tc.nodes); got != tc.want {
			t.Errorf("nodeProfilePath(%q, %d, %d) = %q, want %q", tc.path, tc.id, tc.nodes, got, tc.want)
		}
	}
}
