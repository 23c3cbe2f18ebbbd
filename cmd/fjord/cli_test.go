package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The client commands run in-process (run, as main calls it) against one
// real node, started in-process on free ports and shared by the tests of
// this file; each test uses its own topics.

var shared struct {
	once sync.Once
	node *node.Node
	dir  string
	err  error
}

func sharedNode(t *testing.T) *node.Node {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "fjord-cli-test-")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared.node, shared.err = node.Start(ctx, node.Config{
			NodeID:           1,
			DataDir:          shared.dir,
			KafkaAddr:        "127.0.0.1:0",
			ControllerAddr:   "127.0.0.1:0",
			HTTPAddr:         "127.0.0.1:0",
			AutoCreateTopics: true,
			// Authorization on (fjord acl needs it), every client a
			// super user: the node authenticates nobody.
			Authz:  node.AuthzConfig{SuperUsers: []string{"User:ANONYMOUS"}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if shared.err != nil {
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for shared.node.Ready() != nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		shared.err = shared.node.Ready()
	})
	if shared.err != nil {
		t.Fatalf("starting the shared node: %v", shared.err)
	}
	return shared.node
}

func closeSharedNode() {
	if shared.node != nil {
		shared.node.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

type result struct {
	stdout, stderr string
	code           int
}

// fjord runs one command line in-process with stdin.
func fjord(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// ok runs a command that must succeed, against the shared node.
func ok(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := fjord(t, stdin, append(args, "--brokers", sharedNode(t).KafkaAddr().String())...)
	if r.code != 0 {
		t.Fatalf("fjord %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs a command that must fail with one line on stderr saying
// want.
func fails(t *testing.T, want string, args ...string) result {
	t.Helper()
	r := fjord(t, "", args...)
	if r.code == 0 {
		t.Fatalf("fjord %s succeeded:\n%s", strings.Join(args, " "), r.stdout)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("fjord %s: stderr does not say %q:\n%s", strings.Join(args, " "), want, r.stderr)
	}
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
		t.Errorf("fjord %s: error is %d lines, want one:\n%s", strings.Join(args, " "), n+1, r.stderr)
	}
	return r
}

// topicName makes each test's topics unique on the shared node, also
// under -count=N.
func topicName(base string) string {
	return fmt.Sprintf("%s-%d", base, topicSeq.Add(1))
}

var topicSeq atomic.Int64

func brokers(t *testing.T) string { return sharedNode(t).KafkaAddr().String() }

// describeRows parses the partition table of `topic describe`:
// partition -> columns.
func describeRows(t *testing.T, out string) map[int][]string {
	t.Helper()
	rows := map[int][]string{}
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "PARTITION" {
			inTable = true
			continue
		}
		if !inTable || len(f) == 0 {
			continue
		}
		p, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("bad describe row %q in:\n%s", line, out)
		}
		rows[p] = f
	}
	return rows
}

func TestTopicLifecycle(t *testing.T) {
	topic := topicName("lifecycle")
	r := ok(t, "", "topic", "create", topic, "--partitions", "3", "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
	if !strings.Contains(r.stdout, "created topic "+topic+" (3 partitions, replication factor 1)") {
		t.Errorf("create output:\n%s", r.stdout)
	}
	r = ok(t, "", "topic", "list")
	if !regexp.MustCompile(`(?m)^` + topic + `\s+3\s+1\s*$`).MatchString(r.stdout) {
		t.Errorf("list does not show %s with 3 partitions, RF 1:\n%s", topic, r.stdout)
	}

	r = ok(t, "", "topic", "describe", topic)
	for _, want := range []string{"Topic: " + topic + "\n", "Partitions: 3", "Replication factor: 1",
		"Configs: cleanup.policy=compact retention.ms=3600000\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe does not say %q:\n%s", want, r.stdout)
		}
	}
	// The topic id as Kafka's tools print it: 22 characters of base64url.
	if !regexp.MustCompile(`(?m)^Topic ID: [A-Za-z0-9_-]{22}$`).MatchString(r.stdout) {
		t.Errorf("describe does not show a base64url topic id:\n%s", r.stdout)
	}
	rows := describeRows(t, r.stdout)
	if len(rows) != 3 {
		t.Fatalf("describe shows %d partitions, want 3:\n%s", len(rows), r.stdout)
	}
	for p, f := range rows {
		// PARTITION LEADER EPOCH REPLICAS ISR LOG-START LOG-END STATUS
		if len(f) != 8 || f[1] != "1" || f[3] != "1" || f[4] != "1" || f[5] != "0" || f[6] != "0" || f[7] != "ok" {
			t.Errorf("partition %d row %v, want leader 1, replicas 1, ISR 1, offsets 0 0, status ok", p, f)
		}
	}
	// One replica: min.insync.replicas' default is 1.
	if !strings.Contains(r.stdout, "Min in-sync replicas: 1 (default)\n") {
		t.Errorf("describe does not show min.insync.replicas 1 as the default:\n%s", r.stdout)
	}

	fails(t, "TOPIC_ALREADY_EXISTS", "topic", "create", topic, "--brokers", brokers(t))
	fails(t, "no.such.config", "topic", "create", topic+"-bad-config", "--config", "no.such.config=1", "--brokers", brokers(t))

	// Growing a topic without keyed records (it has no records at all)
	// needs no flag and moves no key, so it warns of nothing; with
	// --allow-key-remap the node is not asked, so the CLI warns that key
	// order breaks (keyed_topics_test.go has the keyed topics).
	r = ok(t, "", "topic", "alter", topic, "--partitions", "4")
	if strings.Contains(r.stderr, "warning") || !strings.Contains(r.stdout, "topic "+topic+" now has 4 partitions") {
		t.Errorf("growing a topic without keys:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	r = ok(t, "", "topic", "alter", topic, "--partitions", "5", "--allow-key-remap")
	if !strings.Contains(r.stderr, "warning: growing "+topic+" from 4 to 5 partitions") || !strings.Contains(r.stderr, "per-key order") {
		t.Errorf("no key-order warning on growth with --allow-key-remap:\n%s", r.stderr)
	}
	fails(t, "partitions cannot be removed", "topic", "alter", topic, "--partitions", "2", "--brokers", brokers(t))

	r = ok(t, "", "topic", "alter", topic, "--config", "retention.ms=1000", "--delete-config", "cleanup.policy")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("config change warned:\n%s", r.stderr)
	}
	r = ok(t, "", "topic", "describe", topic)
	if !strings.Contains(r.stdout, "Partitions: 5") || !strings.Contains(r.stdout, "Configs: retention.ms=1000\n") {
		t.Errorf("describe after alter:\n%s", r.stdout)
	}
	if n := len(describeRows(t, r.stdout)); n != 5 {
		t.Errorf("describe after growth shows %d partitions, want 5", n)
	}
	fails(t, "nothing to change", "topic", "alter", topic, "--brokers", brokers(t))

	r = ok(t, "", "topic", "delete", topic)
	if !strings.Contains(r.stdout, "deleted topic "+topic) {
		t.Errorf("delete output:\n%s", r.stdout)
	}
	r = ok(t, "", "topic", "list")
	if regexp.MustCompile(`(?m)^` + topic + `\s`).MatchString(r.stdout) {
		t.Errorf("deleted topic still listed:\n%s", r.stdout)
	}
	gone := fmt.Sprintf("topic %q does not exist", topic)
	fails(t, gone, "topic", "describe", topic, "--brokers", brokers(t))
	fails(t, gone, "topic", "delete", topic, "--brokers", brokers(t))
	fails(t, gone, "topic", "alter", topic, "--partitions", "9", "--brokers", brokers(t))
}

func TestProduceAndConsume(t *testing.T) {
	topic := topicName("lines")
	ok(t, "", "topic", "create", topic, "--partitions", "1")
	r := ok(t, "a:1\nb:2:two\nno-separator\nc:3", "produce", topic, "--key-separator", ":")
	if !strings.Contains(r.stderr, "produced 4 records to "+topic) {
		t.Errorf("produce summary:\n%s", r.stderr)
	}

	r = ok(t, "", "consume", topic, "--from-beginning", "--max-messages", "4", "--format", `%p/%o %k=%v\n`)
	want := "0/0 a=1\n0/1 b=2:two\n0/2 =no-separator\n0/3 c=3\n"
	if r.stdout != want {
		t.Errorf("consume output\n got %q\nwant %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "consumed 4 records") {
		t.Errorf("consume summary:\n%s", r.stderr)
	}

	// --offset starts there; --max-messages stops exactly; the default
	// format is the value and a newline.
	r = ok(t, "", "consume", topic, "--offset", "1", "--max-messages", "2")
	if r.stdout != "2:two\nno-separator\n" {
		t.Errorf("--offset 1 --max-messages 2: %q", r.stdout)
	}

	// --key sets every record's key; %t is the record's timestamp in ms.
	before := time.Now().Add(-time.Minute).UnixMilli()
	ok(t, "x\n", "produce", topic, "--key", "k")
	after := time.Now().Add(time.Minute).UnixMilli()
	r = ok(t, "", "consume", topic, "--offset", "4", "--max-messages", "1", "--format", `%k %t %% \t|\\`)
	var key string
	var ts int64
	var rest string
	if _, err := fmt.Sscanf(r.stdout, "%s %d %s", &key, &ts, &rest); err != nil || key != "k" || ts < before || ts > after || !strings.HasSuffix(r.stdout, "% \t|\\") {
		t.Errorf("--format with %%k %%t %%%% \\t \\\\: %q (key %q ts %d, want within [%d, %d])", r.stdout, key, ts, before, after)
	}
}

func TestProduceToPartitionAndConsumeOne(t *testing.T) {
	topic := topicName("manual")
	ok(t, "", "topic", "create", topic, "--partitions", "3")
	ok(t, "p1-a\np1-b\n", "produce", topic, "--partition", "1")
	ok(t, "p2-a\n", "produce", topic, "--partition", "2", "--key", "same")
	r := ok(t, "", "consume", topic, "--partition", "1", "--from-beginning", "--max-messages", "2", "--format", `%p %v\n`)
	if r.stdout != "1 p1-a\n1 p1-b\n" {
		t.Errorf("consume --partition 1: %q", r.stdout)
	}
	r = ok(t, "", "topic", "describe", topic)
	rows := describeRows(t, r.stdout)
	for p, wantEnd := range map[int]string{0: "0", 1: "2", 2: "1"} {
		if f := rows[p]; len(f) != 8 || f[6] != wantEnd {
			t.Errorf("partition %d row %v, want log end %s", p, f, wantEnd)
		}
	}
	fails(t, "--partition 3: topic "+topic+" has 3 partitions (0 to 2)", "produce", topic, "--partition", "3", "--brokers", brokers(t))
	fails(t, "--partition 7: topic "+topic+" has 3 partitions (0 to 2)", "consume", topic, "--partition", "7", "--brokers", brokers(t))
	fails(t, `topic "nope-not-here" does not exist`, "consume", "nope-not-here", "--brokers", brokers(t))
}

func TestConsumeAllPartitionsKeepsKeysTogether(t *testing.T) {
	topic := topicName("keyed")
	ok(t, "", "topic", "create", topic, "--partitions", "4")
	var in strings.Builder
	for i := range 40 {
		fmt.Fprintf(&in, "key-%d=%d\n", i%5, i)
	}
	ok(t, in.String(), "produce", topic, "--key-separator", "=")
	r := ok(t, "", "consume", topic, "--from-beginning", "--max-messages", "40", "--format", `%p %k %v\n`)
	partOf := map[string]string{}
	last := map[string]int{}
	var values []int
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var p, k string
		var v int
		if _, err := fmt.Sscanf(line, "%s %s %d", &p, &k, &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if q, seen := partOf[k]; seen && q != p {
			t.Errorf("key %s in partitions %s and %s", k, q, p)
		}
		if prev, seen := last[k]; seen && v <= prev {
			t.Errorf("key %s: value %d after %d (per-key order broken)", k, v, prev)
		}
		partOf[k], last[k] = p, v
		values = append(values, v)
	}
	sort.Ints(values)
	if len(values) != 40 || values[0] != 0 || values[39] != 39 {
		t.Fatalf("consumed values %v, want 0..39", values)
	}
}

func TestProduceAcksAndCompression(t *testing.T) {
	for _, acks := range []string{"all", "1", "0"} {
		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			topic := topicName("codec-" + codec + "-acks-" + acks)
			ok(t, "", "topic", "create", topic, "--partitions", "1")
			in := strings.Repeat("compressible "+codec+" line\n", 20)
			ok(t, in, "produce", topic, "--acks", acks, "--compression", codec)
			r := ok(t, "", "consume", topic, "--from-beginning", "--max-messages", "20")
			if r.stdout != in {
				t.Errorf("acks=%s compression=%s: read back %q", acks, codec, r.stdout)
			}
		}
	}
}

func TestProduceAutoCreatesTopic(t *testing.T) {
	topic := topicName("auto-created")
	ok(t, "hello\n", "produce", topic)
	r := ok(t, "", "topic", "describe", topic)
	if !strings.Contains(r.stdout, "Partitions: 1") {
		t.Errorf("auto-created topic:\n%s", r.stdout)
	}
}

func TestClusterDescribe(t *testing.T) {
	n := sharedNode(t)
	r := ok(t, "", "cluster", "describe")
	host, port, _ := net.SplitHostPort(n.KafkaAddr().String())
	for _, want := range []string{"Cluster ID: " + n.ClusterID() + "\n", "Controller: 1\n", "Controller quorum: voters 1, epoch ", "Brokers: 1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cluster describe does not say %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^1\s+` + regexp.QuoteMeta(host) + `\s+` + port + `\s+-\s+unfenced\s*$`).MatchString(r.stdout) {
		t.Errorf("cluster describe has no row for broker 1 at %s:%s:\n%s", host, port, r.stdout)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableNode(t *testing.T) {
	addr := closedPort(t)
	want := fmt.Sprintf(`fjord: cannot reach a Fjord node at %s (connection refused); is "fjord serve" running?`+"\n", addr)
	for _, args := range [][]string{
		{"topic", "list"},
		{"topic", "create", "t"},
		{"topic", "describe", "t"},
		{"topic", "delete", "t"},
		{"topic", "alter", "t", "--partitions", "2"},
		{"topic", "reassign", "--list"},
		{"produce", "t"},
		{"consume", "t"},
		{"cluster", "describe"},
	} {
		start := time.Now()
		r := fjord(t, "line\n", append(args, "--brokers", addr)...)
		if r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Errorf("fjord %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
		}
		if d := time.Since(start); d > 2*reachTimeout {
			t.Errorf("fjord %s took %v to give up", strings.Join(args, " "), d)
		}
	}
	// The default is 127.0.0.1:9092, also named in the message.
	t.Setenv("FJORD_BROKERS", addr)
	if r := fjord(t, "", "cluster", "describe"); !strings.Contains(r.stderr, "at "+addr+" ") {
		t.Errorf("FJORD_BROKERS not used: %q", r.stderr)
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	t.Setenv("FJORD_BROKERS", brokers(t))
	r := fjord(t, "", "cluster", "describe")
	if r.code != 0 || !strings.Contains(r.stdout, "Controller: 1") {
		t.Fatalf("with FJORD_BROKERS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The flag beats the environment.
	t.Setenv("FJORD_BROKERS", closedPort(t))
	r = fjord(t, "", "cluster", "describe", "--brokers", brokers(t))
	if r.code != 0 {
		t.Fatalf("--brokers did not beat FJORD_BROKERS: %s", r.stderr)
	}
}

func TestClientRejectsBadFlags(t *testing.T) {
	// None of these needs a node: they fail before connecting.
	addr := closedPort(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`invalid argument "-1" for "--partitions" flag: allowed: an integer from 1 to 2147483647`, []string{"topic", "create", "t", "--partitions", "-1"}},
		{`"--replication-factor" flag: allowed: an integer from 1 to 32767`, []string{"topic", "create", "t", "--replication-factor", "x"}},
		{`"--partitions" flag: allowed: an integer from 1`, []string{"topic", "alter", "t", "--partitions", "0"}},
		{`--config "retention.ms": want key=value`, []string{"topic", "create", "t", "--config", "retention.ms"}},
		{`invalid argument "2" for "--acks" flag: allowed: all, -1, 1, 0`, []string{"produce", "t", "--acks", "2"}},
		{`"--compression" flag: allowed: none, gzip, snappy, lz4, zstd`, []string{"produce", "t", "--compression", "brotli"}},
		{`"--partition" flag: allowed: an integer from 0`, []string{"produce", "t", "--partition", "-3"}},
		{`invalid argument "0" for "--max-message-bytes" flag: allowed: an integer from 512 to 104856576`, []string{"produce", "t", "--max-message-bytes", "0"}},
		{`"--max-message-bytes" flag: allowed: an integer from 512`, []string{"produce", "t", "--max-message-bytes", "-1"}},
		{`"--max-message-bytes" flag: allowed: an integer from 512`, []string{"produce", "t", "--max-message-bytes", "1MB"}},
		{`"--max-message-bytes" flag: allowed: an integer from 512`, []string{"produce", "t", "--max-message-bytes", "104856577"}},
		{`"--max-message-bytes" flag: allowed: an integer from 512`, []string{"produce", "t", "--max-message-bytes", "99999999999999999999"}},
		{"--key and --key-separator exclude each other", []string{"produce", "t", "--key", "k", "--key-separator", ":"}},
		{"--key-separator is empty", []string{"produce", "t", "--key-separator", ""}},
		{`--format "%x\\n": unknown verb %x; allowed: %k key, %v value, %h headers (k=v,k2=v2;`, []string{"consume", "t", "--format", `%x\n`}},
		{`--format "%": ends with a lone %`, []string{"consume", "t", "--format", "%"}},
		{`unknown escape \q`, []string{"consume", "t", "--format", `\q`}},
		{"--from-beginning and --offset exclude each other", []string{"consume", "t", "--from-beginning", "--offset", "3"}},
		{`"--offset" flag: allowed: an integer from -9223372036854775807`, []string{"consume", "t", "--offset", "1.5"}},
		{`"--max-messages" flag: allowed: an integer from 0 to 9223372036854775807 (0: no limit)`, []string{"consume", "t", "--max-messages", "lots"}},
		{`--brokers "localhost": want host:port`, []string{"cluster", "describe", "--brokers", "localhost"}},
		{"accepts 1 arg(s), received 0", []string{"produce"}},
		{`invalid argument "KERBEROS" for "--security-protocol" flag: allowed: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`, []string{"topic", "list", "--security-protocol", "KERBEROS"}},
		{"--ssl-ca-file, --ssl-cert-file and --ssl-key-file need --security-protocol SSL or SASL_SSL", []string{"topic", "list", "--ssl-ca-file", "ca.pem"}},
		{"--sasl-username and --sasl-password-file need --security-protocol SASL_SSL or SASL_PLAINTEXT", []string{"topic", "list", "--sasl-username", "alice"}},
		{"--security-protocol SASL_PLAINTEXT: give --sasl-username", []string{"topic", "list", "--security-protocol", "SASL_PLAINTEXT"}},
		{"--security-protocol SASL_PLAINTEXT: give --sasl-password-file", []string{"topic", "list", "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice"}},
		{"--sasl-password-file: open /nonexistent/pw", []string{"topic", "list", "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice", "--sasl-password-file", "/nonexistent/pw"}},
		{`"--sasl-mechanism" flag: allowed: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN`, []string{"topic", "list", "--sasl-mechanism", "GSSAPI"}},
		{"--ssl-cert-file and --ssl-key-file go together", []string{"topic", "list", "--security-protocol", "SSL", "--ssl-cert-file", "c.pem"}},
		{"CA file /nonexistent/ca.pem: file does not exist", []string{"topic", "list", "--security-protocol", "SSL", "--ssl-ca-file", "/nonexistent/ca.pem"}},
	} {
		args := tc.args
		if !strings.Contains(strings.Join(args, " "), "--brokers") {
			args = append(args, "--brokers", addr)
		}
		fails(t, tc.want, args...)
	}
	t.Setenv("FJORD_BROKERS", "no-port")
	fails(t, `--brokers "no-port": want host:port`, "topic", "list")
}

// TestConsumeRunsUntilInterrupted runs `fjord consume` without
// --max-messages as a child process: it prints what arrives and exits 0
// with a summary on SIGINT.
func TestConsumeRunsUntilInterrupted(t *testing.T) {
	topic := topicName("until-interrupted")
	ok(t, "", "topic", "create", topic)
	ok(t, "first\n", "produce", topic)
	cmd := fjordCommand(t, "consume", topic, "--from-beginning", "--brokers", brokers(t))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { stderr.WriteString(string(p)); return len(p), nil })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines: // the consumer printed a record
			if got != want {
				t.Fatalf("consumer printed %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second): // records arrive in milliseconds
			t.Fatalf("consumer did not print %q; stderr:\n%s", want, stderr.String())
		}
	}
	expect("first")
	// Records produced while it runs arrive too (long-poll, no restart).
	ok(t, "second\n", "produce", topic)
	expect("second")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "consumed 2 records") {
		t.Errorf("no summary after SIGINT:\n%s", stderr.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestProduceReportsFailedRecords(t *testing.T) {
	topic := topicName("small-records")
	ok(t, "", "topic", "create", topic, "--config", "max.message.bytes=200")
	r := fjord(t, strings.Repeat("x", 1000)+"\n", "produce", topic, "--brokers", brokers(t))
	if r.code != 1 {
		t.Fatalf("produce of a too-large record: exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"produced 0 records to " + topic + "; 1 failed\n", "fjord: record from line 1 (1000 bytes): MESSAGE_TOO_LARGE: over the limit of 200 bytes per record batch, topic " + topic + "'s max.message.bytes; raise it with fjord topic alter " + topic + " --config max.message.bytes=N\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

// Regression: --offset past the end silently read from offset 0 (the
// client's reset policy), printing records the user did not ask for.
func TestConsumeOffsetOutOfRange(t *testing.T) {
	topic := topicName("offset-range")
	ok(t, "", "topic", "create", topic, "--partitions", "1")
	ok(t, "a\nb\nc\n", "produce", topic)
	r := ok(t, "", "consume", topic, "--offset", "2", "--max-messages", "1")
	if r.stdout != "c\n" {
		t.Fatalf("--offset 2 printed %q, want c", r.stdout)
	}
	fails(t, "--offset 100 is outside partition "+topic+"-0 (allowed: 0, its log start, to 3, its log end; -N: N records before the end)",
		"consume", topic, "--offset", "100", "--max-messages", "1", "--brokers", sharedNode(t).KafkaAddr().String())
}

// Regression: a consumer whose topic was deleted and re-created printed an
// UNKNOWN_TOPIC_ID warning on every poll (thousands a second) and never
// read again. It now exits with one line saying what happened.
func TestConsumeStopsWhenTopicRecreated(t *testing.T) {
	topic := topicName("recreated")
	ok(t, "", "topic", "create", topic)
	ok(t, "first\n", "produce", topic)
	cmd := fjordCommand(t, "consume", topic, "--from-beginning", "--brokers", brokers(t))
	var stdout, stderr syncBuffer
	cmd.Stdout = writerFunc(func(p []byte) (int, error) { stdout.WriteString(string(p)); return len(p), nil })
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { stderr.WriteString(string(p)); return len(p), nil })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	testutil.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(stdout.String(), "first") {
			return fmt.Errorf("consumer printed nothing; stderr:\n%s", stderr.String())
		}
		return nil
	})
	ok(t, "", "topic", "delete", topic)
	ok(t, "", "topic", "create", topic)
	ok(t, "second\n", "produce", topic)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done: // the consumer noticed and exited
		if err == nil {
			t.Fatalf("consume exited 0 after its topic was re-created; stderr:\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second): // it notices within a metadata refresh
		t.Fatalf("consume still running after its topic was re-created; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "was deleted or re-created") {
		t.Fatalf("stderr does not say why:\n%s", stderr.String())
	}
	if n := strings.Count(stderr.String(), "warning"); n > 5 {
		t.Fatalf("%d warnings printed:\n%.2000s", n, stderr.String())
	}
}
