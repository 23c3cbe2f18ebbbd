package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 15, acceptance points 4 (grow) and 5 (shrink), and point 9's
// drain refusals, on one cluster of three voters to which node 4, a
// broker-only node, is added once they are loaded.
func TestGrowAndDrain(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Nodes: 3, BrokerOnly: 1, Later: []int32{newBroker}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("Grow", e.growOntoNewBroker)
	t.Run("Drain", e.drainNewBroker)
}

// newBroker is TestGrowAndDrain's broker-only node, started late.
const newBroker = 4

// growThrottle is the copy rate the grow sets, in bytes per second: low
// enough that any machine copies that fast, so what the test measures
// is the throttle, and high enough that the copy takes seconds, not
// minutes.
const growThrottle = 1 << 20

// Acceptance point 4. Two topics of 12 partitions on nodes 1 to 3: one
// filled first with 7.5 MiB to copy, one under an idempotent acks=all
// producer and a consumer group. Node 4 then joins, and `fjord cluster
// rebalance --execute --throttle 1MiB` moves its share to it. Checked:
// no produce or consume error; node 4's throttled copy rate (its
// fjord_replica_throttled_fetched_bytes_total, sampled as the moves run)
// within 20% of the setting, and the throttle gone after; every broker
// with the same number of replicas of each topic, and node 4 leading
// its share of each; everything acknowledged read back, the replicas
// identical.
func (e *env) growOntoNewBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const bulk, topic, partitions = "grow-bulk", "grow", 12
	e.createTopic(t, ctx, bulk, partitions, 3)
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fill(t, ctx, bulk, partitions, 160, 4<<10)
	e.fullISRs(t, ctx, bulk, partitions)
	e.fullISRs(t, ctx, topic, partitions)
	load := e.startLoad(t, ctx, topic, partitions)
	group := e.startGroupReader(t, ctx, topic, "grow-group")
	load.waitAcks(t, 300)

	e.c.Start(newBroker)
	testutil.Eventually(t, 20*time.Second, func() error {
		return e.brokersAre(ctx, []int32{1, 2, 3, newBroker})
	})

	// The plan first, printed: node 4 gets its share of every topic.
	var plan struct {
		Brokers []struct {
			ID            int32 `json:"id"`
			Replicas      int   `json:"replicas"`
			ReplicasAfter int   `json:"replicas_after"`
		} `json:"brokers"`
		Moves []json.RawMessage `json:"moves"`
	}
	e.cliJSON(t, ctx, &plan, "cluster", "rebalance", "-o", "json")
	if len(plan.Brokers) != 4 || len(plan.Moves) == 0 {
		t.Fatalf("rebalance plan: %d brokers, %d moves; want 4 and some", len(plan.Brokers), len(plan.Moves))
	}
	for _, b := range plan.Brokers {
		if b.ID == newBroker && (b.Replicas != 0 || b.ReplicasAfter == 0) {
			t.Fatalf("the plan gives node 4 %d replicas from %d", b.ReplicasAfter, b.Replicas)
		}
	}

	// The moves, with the throttle, sampling node 4's copy meanwhile.
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), "cluster", "rebalance", "--execute",
		"--throttle", strconv.Itoa(growThrottle), "-o", "json", "--brokers", e.c.Brokers())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var samples []copySample
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("fjord cluster rebalance --execute: %v\n%s", err, out.String())
			}
			running = false
		case <-time.After(100 * time.Millisecond):
		}
		samples = append(samples, copySample{time.Now(), e.metric(t, newBroker, "fjord_replica_throttled_fetched_bytes_total")})
	}
	t.Logf("rebalance --execute:\n%s", out.String())
	rate, span := copyRate(samples)
	t.Logf("node 4 copied its new replicas at %.0f B/s over %v (throttle %d B/s)", rate, span, growThrottle)
	if span < 2*time.Second {
		t.Fatalf("the throttled copy took %v: too short to measure a rate (samples %v)", span, samples)
	}
	if rate < 0.8*growThrottle || rate > 1.2*growThrottle {
		t.Fatalf("node 4 copied at %.0f B/s, not within 20%% of the throttle, %d B/s", rate, growThrottle)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if v := e.metric(t, newBroker, "fjord_replica_throttle_rate_bytes"); v != 0 {
			return fmt.Errorf("node 4's throttle is still %v after the moves", v)
		}
		return nil
	})

	// Even: each broker holds 9 replicas of each topic and leads 3.
	for _, name := range []string{bulk, topic} {
		ps, err := e.partitions(ctx, name, partitions)
		if err != nil {
			t.Fatal(err)
		}
		per := map[int32]int{}
		for _, p := range ps {
			for _, r := range p.Replicas {
				per[r]++
			}
		}
		for b := int32(1); b <= newBroker; b++ {
			if per[b] != 9 {
				t.Errorf("%s: broker %d holds %d replicas, want 9 (replicas per broker %v)", name, b, per[b], per)
			}
		}
		if led := e.ledBy(t, ctx, name, newBroker); led != partitions/4 {
			t.Errorf("%s: node 4 leads %d partitions, want its share, %d", name, led, partitions/4)
		}
		e.fullISRs(t, ctx, name, partitions)
	}
	load.waitAcks(t, 300)
	group.check(t, 100)
	load.finish(t, ctx, e)
	e.replicasIdentical(t, bulk, partitions)
}

// Acceptance point 5, and point 9's drain refusals. A topic placed over
// the four brokers, under an acks=all producer and a consumer group;
// drains that must be refused are, changing nothing (an unknown broker,
// a broker id that is not one); `fjord cluster drain 4` moves node 4's replicas to
// the others and unregisters it; node 4 is stopped. Checked: no produce
// or consume error; no partition names node 4 and every one keeps
// three in-sync replicas; node 4 is gone from Metadata and from the
// quorum's observers; a drain of a broker whose replicas no other could
// take (RF 3 on the three left) is refused; everything acknowledged
// read back, the replicas identical.
func (e *env) drainNewBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions = "drain", 12
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)
	if n := e.replicasOn(t, ctx, newBroker); n == 0 {
		t.Fatalf("node 4 holds no replica before the drain")
	}
	load := e.startLoad(t, ctx, topic, partitions)
	group := e.startGroupReader(t, ctx, topic, "drain-group")
	load.waitAcks(t, 300)

	for _, tc := range []struct{ broker, want string }{
		{"9", "broker 9 is not registered"},
		{"x", `broker "x": want a broker id`},
	} {
		e.cliFails(t, ctx, tc.want, "cluster", "drain", tc.broker)
	}
	e.fjordCLI(t, "TARGET", "cluster", "drain", "--dry-run", strconv.Itoa(newBroker))
	if n := e.replicasOn(t, ctx, newBroker); n == 0 {
		t.Fatalf("a refused drain or a dry run moved node 4's replicas")
	}

	var report struct {
		Unregistered *int32 `json:"unregistered"`
		Done         bool   `json:"done"`
	}
	mark := e.c.Node(newBroker).LogMark()
	e.cliJSON(t, ctx, &report, "cluster", "drain", strconv.Itoa(newBroker), "-o", "json")
	if report.Unregistered == nil || *report.Unregistered != newBroker || !report.Done {
		t.Fatalf("drain report: %+v", report)
	}
	if n := e.replicasOn(t, ctx, newBroker); n != 0 {
		t.Fatalf("node 4 still holds %d replicas after its drain", n)
	}
	// Every other node's Metadata drops it. Node 4's own image may never:
	// the drain takes it out of the metadata log's configuration right
	// after the unregistration commits, and the leader stops sending it
	// entries then, whether or not it had that one. What node 4 is told
	// is its heartbeat's refusal, which it logs.
	testutil.Eventually(t, 20*time.Second, func() error { return e.brokersAre(ctx, []int32{1, 2, 3}, newBroker) })
	testutil.Eventually(t, 20*time.Second, func() error {
		if log := e.c.Node(newBroker).LogSince(mark); !strings.Contains(log, "this broker was unregistered from the cluster") {
			return fmt.Errorf("node %d has not logged that it was unregistered", newBroker)
		}
		return nil
	})
	e.quorumIs(t, ctx, []int32{1, 2, 3}, nil)
	e.c.Node(newBroker).Stop()
	for _, name := range []string{topic, "grow", "grow-bulk"} {
		e.fullISRs(t, ctx, name, partitions)
	}

	// With three brokers left and RF 3 everywhere, any drain would lower
	// a replication factor: the last brokers holding those replicas.
	for _, id := range []string{"1", "3"} {
		e.cliFails(t, ctx, "would lower its replication factor; nothing was moved", "cluster", "drain", id)
	}
	if n, err := e.reassignmentsListed(ctx); err != nil || n != 0 {
		t.Fatalf("after the refused drain: %d reassignments (%v), want none", n, err)
	}
	load.waitAcks(t, 300)
	group.check(t, 100)
	load.finish(t, ctx, e)
}

// fill writes n records of size bytes to each of topic's partitions,
// acks=all, in batches of at most 64 KiB (a throttled fetch returns at
// least one batch per partition, so its overshoot is small).
func (e *env) fill(t *testing.T, ctx context.Context, topic string, partitions, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(64<<10), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Random bytes, uncompressed: the bytes copied are the bytes
	// written.
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []*kgo.Record
	for p := range partitions {
		for range n {
			value := make([]byte, size)
			for i := range value {
				value[i] = byte(rng.Uint32())
			}
			recs = append(recs, &kgo.Record{Partition: int32(p), Value: value})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("filling %s: %v", topic, err)
	}
}

type copySample struct {
	at    time.Time
	bytes float64
}

// copyRate is the rate between the first sample with bytes copied and
// the last one that added any: the copy's own span, without the wait
// for the moves' completion after it.
func copyRate(samples []copySample) (float64, time.Duration) {
	first, last := -1, -1
	for i, s := range samples {
		if s.bytes > 0 && first < 0 {
			first = i
		}
		if i > 0 && s.bytes > samples[i-1].bytes {
			last = i
		}
	}
	if first < 0 || last <= first {
		return 0, 0
	}
	span := samples[last].at.Sub(samples[first].at)
	return (samples[last].bytes - samples[first].bytes) / span.Seconds(), span
}

// brokersAre waits for every running node's Metadata, but those of
// except, to list exactly these brokers.
func (e *env) brokersAre(ctx context.Context, want []int32, except ...int32) error {
	for _, n := range e.c.Nodes() {
		if !n.Running() || slices.Contains(except, n.ID()) {
			continue
		}
		resp, err := allTopicsMetadata(ctx, n.KafkaAddr())
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID(), err)
		}
		var got []int32
		for _, b := range resp.Brokers {
			got = append(got, b.NodeID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("node %d lists brokers %v, want %v", n.ID(), got, want)
		}
	}
	return nil
}

// replicasOn counts the partitions, of every topic, naming broker among
// their replicas, as node 1 answers Metadata.
func (e *env) replicasOn(t *testing.T, ctx context.Context, broker int32) int {
	t.Helper()
	resp, err := allTopicsMetadata(ctx, e.c.Node(1).KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if slices.Contains(p.Replicas, broker) {
				n++
			}
		}
	}
	return n
}

// cliJSON runs the fjord binary against the cluster and decodes its
// JSON output into v.
func (e *env) cliJSON(t *testing.T, ctx context.Context, v any, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append(args, "--brokers", e.c.Brokers())...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fjord %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("fjord %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("fjord %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
}

// cliFails runs the fjord binary against the cluster and wants it to
// exit 1 saying want.
func (e *env) cliFails(t *testing.T, ctx context.Context, want string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append(args, "--brokers", e.c.Brokers())...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
		t.Fatalf("fjord %s: %v\n%s\nwant exit 1 saying %q", strings.Join(args, " "), err, out, want)
	}
}

// groupReader is a franz-go consumer group member reading a topic from
// the start, counting what it reads and keeping every error a poll
// returns (franz-go retries what it can itself: what reaches the
// application is a failure).
type groupReader struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}

	mu   sync.Mutex
	read int
	errs []error
}

func (e *env) startGroupReader(t *testing.T, ctx context.Context, topic, group string) *groupReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	g := &groupReader{cl: cl, stop: stop, done: make(chan struct{})}
	t.Cleanup(func() { stop(); <-g.done; cl.Close() })
	go func() {
		defer close(g.done)
		for pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			g.mu.Lock()
			fs.EachError(func(topic string, p int32, err error) {
				if pctx.Err() == nil {
					g.errs = append(g.errs, fmt.Errorf("%s-%d: %w", topic, p, err))
				}
			})
			g.read += fs.NumRecords()
			g.mu.Unlock()
		}
	}()
	return g
}

// check waits until the group has read n more records and fails the
// test on any error it saw.
func (g *groupReader) check(t *testing.T, n int) {
	t.Helper()
	g.mu.Lock()
	want := g.read + n
	g.mu.Unlock()
	testutil.Eventually(t, 30*time.Second, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.errs) > 0 {
			return nil
		}
		if g.read < want {
			return fmt.Errorf("the group read %d records, waiting for %d", g.read, want)
		}
		return nil
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) > 0 {
		t.Fatalf("the consumer group saw %d errors, the first: %v", len(g.errs), g.errs[0])
	}
}
