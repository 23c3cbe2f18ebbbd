package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// longRun reports whether FJORD_E2E_LONG=1 asks for the long variants.
func longRun() bool { return os.Getenv("FJORD_E2E_LONG") == "1" }

// scale returns normal, or long under FJORD_E2E_LONG=1.
func scale(normal, long int) int {
	if longRun() {
		return long
	}
	return normal
}

// testContext is a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	if longRun() {
		d *= 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startNode(t *testing.T) *testcluster.Node {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{})
}

// brokers is what the client helpers need of a node or a cluster: its
// Kafka listeners, comma-separated, as a testcluster.Node's or
// testcluster.Cluster's Brokers gives them.
type brokers interface{ Brokers() string }

// seedBrokers is b's addresses one by one, for clients that take a list
// (kgo.SeedBrokers, Sarama).
func seedBrokers(b brokers) []string { return strings.Split(b.Brokers(), ",") }

// target is what a client test runs against: one node, or the package's
// cluster of three. nodes are its nodes, by id.
type target struct {
	brokers string
	nodes   []*testcluster.Node
	// topicSuffix ends the names of this run's topics (topic).
	topicSuffix string
}

func (g target) Brokers() string { return g.brokers }

// topic is what a test's topic called name is called on g: name itself
// on a node of the test's own; on the shared cluster, name and a number
// of this run, since under -count=N the test runs again on the same
// cluster, where its earlier runs' topics still exist.
func (g target) topic(name string) string { return name + g.topicSuffix }

// createTopic creates a topic on g (the package's createTopic), checks
// that it got a replica on every node (one on a single node, three on
// the cluster, so the cluster's subtests do run over replication), and
// waits until every node's own metadata has a leader for each partition.
// CreateTopics answers once the active controller has committed the
// topic (and, through a forwarding node, once that node's image has it);
// the other nodes apply the metadata log moments later, as Kafka's
// brokers do. Clients that retry an unknown topic do not care, but kcat
// -L asks one node once.
func (g target) createTopic(ctx context.Context, t *testing.T, name string, partitions int32) {
	t.Helper()
	resp := createTopic(ctx, t, newAdmin(t, g), name, partitions)
	if int(resp.ReplicationFactor) != len(g.nodes) {
		t.Fatalf("topic %s has replication factor %d on %d nodes, want one replica per node", name, resp.ReplicationFactor, len(g.nodes))
	}
	eventually(t, 10*time.Second, func() error {
		for _, n := range g.nodes {
			md, err := n.Metadata(ctx, name)
			if err != nil {
				return err
			}
			if err := hasLeaders(md, name, partitions); err != nil {
				return fmt.Errorf("node %d: %w", n.ID(), err)
			}
		}
		return nil
	})
}

// hasLeaders checks that a Metadata answer has the topic with its
// partitions, each with a leader.
func hasLeaders(md *kmsg.MetadataResponse, topic string, partitions int32) error {
	for _, mt := range md.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", topic, err)
		}
		if len(mt.Partitions) != int(partitions) {
			return fmt.Errorf("topic %s has %d partitions, want %d", topic, len(mt.Partitions), partitions)
		}
		for _, p := range mt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil || p.Leader < 0 {
				return fmt.Errorf("%s-%d: leader %d, error %v", topic, p.Partition, p.Leader, err)
			}
		}
		return nil
	}
	return fmt.Errorf("no topic %s in the answer", topic)
}

// forEachTarget runs test as two parallel subtests: one-node, against a
// node of its own, and three-nodes, against the cluster of three every
// such subtest shares (threeNodes). createTopic's topics have one
// replica on the first and three on the second, so the second runs the
// client over replication: acks=all waits for both followers, and reads
// see only what all three hold.
func forEachTarget(t *testing.T, test func(t *testing.T, g target)) {
	t.Run("one-node", func(t *testing.T) {
		t.Parallel()
		n := startNode(t)
		test(t, target{brokers: n.Brokers(), nodes: []*testcluster.Node{n}})
	})
	t.Run("three-nodes", func(t *testing.T) {
		t.Parallel()
		c := threeNodes(t)
		suffix := fmt.Sprintf("-run%d", sharedRuns.Add(1))
		test(t, target{brokers: c.Brokers(), nodes: c.Nodes(), topicSuffix: suffix})
	})
}

// threeNodes is the package's cluster of three nodes, started by the
// first test that asks and stopped by testcluster.Main after the last.
// One cluster, not one per test: the tests using it only create topics
// of their own and produce and read them, never stop a node, so a start
// per test (three processes and an election) would only add time.
func threeNodes(t *testing.T) *testcluster.Cluster {
	t.Helper()
	shared3.Do(func() {
		shared3.c, shared3.err = testcluster.StartSharedCluster(testcluster.ClusterOptions{Nodes: 3})
	})
	if shared3.err != nil {
		t.Fatalf("starting the shared cluster of three: %v", shared3.err)
	}
	shared3.c.LogTailsOnFailure(t)
	return shared3.c
}

var shared3 struct {
	sync.Once
	c   *testcluster.Cluster
	err error
}

// sharedRuns counts the subtests run on the shared cluster, for their
// topics' names (target.topic).
var sharedRuns atomic.Int64

// newClient returns a franz-go client of b, closed at the end of the test.
func newClient(t *testing.T, b brokers, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seedBrokers(b)...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t *testing.T, b brokers) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, b))
}

// createTopic creates a topic with kadm and fails the test if the node
// refuses. configs are name=value pairs. The replication factor is -1,
// the node's default: 3 capped at the registered brokers, so one replica
// on a single node and three on the cluster of three.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, name string, partitions int32, configs ...string) kadm.CreateTopicResponse {
	t.Helper()
	cfg := make(map[string]*string)
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("config %q is not name=value", kv)
		}
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, partitions, -1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s (%d partitions, %v): %v %s", name, partitions, configs, err, resp.ErrMessage)
	}
	return resp
}

// readAll reads the topics from log start to high watermark with franz-go.
func readAll(ctx context.Context, t *testing.T, b brokers, topics ...string) map[history.TopicPartition][]history.Record {
	t.Helper()
	logs, err := history.ReadAll(ctx, b.Brokers(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// eventually is testutil.Eventually with the deadline stretched tenfold
// under FJORD_E2E_LONG=1, as every wait in the long variants is.
func eventually(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	if longRun() {
		d *= 10
	}
	testutil.Eventually(t, d, cond)
}

// errorList collects errors from client callbacks on other goroutines.
type errorList struct {
	mu   sync.Mutex
	errs []error
	n    int
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.errs) < 10 {
		l.errs = append(l.errs, err)
	}
}

func (l *errorList) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	return fmt.Errorf("%d errors, the first %d: %w", l.n, len(l.errs), errors.Join(l.errs...))
}

// kcatPath returns kcat's path, installing it first if need be
// (testutil.KcatPath).
func kcatPath(t *testing.T) string { return testutil.KcatPath(t) }

// runKcat runs kcat with args and stdin, failing the test on a non-zero
// exit or an error line. It returns stdout. kcat keeps retrying after a
// protocol error (a consumer refetches forever), so the first such line
// ends it at once rather than at the deadline.
func runKcat(ctx context.Context, t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	stderr := &watchWriter{match: [][]byte{[]byte("PROTOERR"), []byte("ERROR")}, onMatch: cancel}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	if stderr.matched() {
		t.Fatalf("kcat %s reported errors:\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// watchWriter keeps what a child writes and calls onMatch once when a
// line contains one of match. exec.Cmd writes to it from one goroutine;
// the mutex is for the test reading it.
type watchWriter struct {
	match   [][]byte
	onMatch func()

	mu  sync.Mutex
	buf bytes.Buffer
	hit bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.hit {
		for _, m := range w.match {
			if bytes.Contains(w.buf.Bytes(), m) {
				w.hit = true
				w.onMatch()
				break
			}
		}
	}
	return len(p), nil
}

func (w *watchWriter) matched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
