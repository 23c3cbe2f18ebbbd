package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// One cluster of three for acceptance points 2 and 5.
func TestThreeNodes(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Nodes: 3})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("ClusterDescribe", e.clusterDescribe)
	t.Run("AcknowledgedRecordsReadBackAndReplicasIdentical", e.acknowledgedRecords)
	t.Run("LoadWithoutFaults", e.loadWithoutFaults)
	t.Run("LeaderKilled", e.leaderKilled)
	t.Run("LeaderAndControllerKilled", e.leaderAndControllerKilled)
	t.Run("FollowerStopped", e.followerStopped)
	t.Run("AllKilled", e.allKilled)
	t.Run("TwoKilled", e.twoKilled)
	t.Run("AcksOneTailCut", e.acksOneTailCut)
	t.Run("CoordinatorKilled", e.coordinatorKilled)
	t.Run("ControllerKilled", e.controllerKilled)
	t.Run("LeaderOfManyKilled", e.leaderOfManyKilled)
	t.Run("ControlledShutdown", e.controlledShutdown)
	t.Run("ControllerShutdown", e.controllerShutdown)
	t.Run("Transactions", func(t *testing.T) { e.transactions(t, false) })
	t.Run("TransactionsV1", func(t *testing.T) { e.transactions(t, true) })
	t.Run("AbandonedTransaction", e.abandonedTransaction)
	t.Run("ConsumeTransformProduce", e.consumeTransformProduce)
	t.Run("ConsumeTransformProduceSarama", e.ctpSarama)
	t.Run("ConsumeTransformProduceLibrdkafka", e.ctpLibrdkafka)
	t.Run("ConsumeTransformProduceAppKilled", e.ctpAppKilled)
	t.Run("ConsumerLag", e.consumerLag)
}

// Acceptance point 2: RF=3, min.insync.replicas=2, acks=all, 200,000
// keyed records from 4 idempotent producers over 12 partitions: every
// acknowledged record is read back once, in key order, and once the
// cluster is quiet every partition's three replica logs are the same
// bytes.
func (e *env) acknowledgedRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions, producers, perProducer = "keyed", 12, 4, 50_000
	e.createTopic(t, ctx, topic, partitions, 3)

	checker := history.NewChecker()
	var mu sync.Mutex
	var failures []error
	var wg sync.WaitGroup
	begin := time.Now()
	for p := range producers {
		wg.Go(func() {
			pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
				kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
			if err != nil {
				t.Error(err)
				return
			}
			defer pr.Close()
			for i := range perProducer {
				key := fmt.Appendf(nil, "p%d-k%03d", p, i%250)
				value := fmt.Appendf(nil, "p%d-%06d", p, i)
				checker.Sent(topic, key, value)
				pr.Produce(ctx, &kgo.Record{Key: key, Value: value}, func(r *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failures = append(failures, fmt.Errorf("%s: %w", r.Value, err))
						mu.Unlock()
						return
					}
					checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
				})
			}
			if err := pr.Flush(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d produces failed, the first: %v", len(failures), failures[0])
	}
	t.Logf("%d records acknowledged in %v", checker.AckedCount(), time.Since(begin).Round(time.Millisecond))

	sum := e.verify(t, ctx, checker, topic)
	if sum.Acked != producers*perProducer || sum.Read != producers*perProducer {
		t.Fatalf("%v; want all %d acknowledged and read back once", sum, producers*perProducer)
	}

	// Quiet: every replica of every partition holds the same bytes.
	e.replicasIdentical(t, topic, partitions)
}

// verify reads topic back from the cluster and checks it against what
// checker was told was sent and acknowledged.
func (e *env) verify(t *testing.T, ctx context.Context, checker *history.Checker, topic string) history.Summary {
	t.Helper()
	logs, err := history.ReadAll(ctx, e.c.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checker.Verify(logs)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// replicasIdentical waits until every replica of topic's partitions
// holds the same log bytes, none empty; a partition's replicas are the
// nodes Metadata names.
func (e *env) replicasIdentical(t *testing.T, topic string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ps []kmsg.MetadataResponseTopicPartition
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		ps, err = e.partitions(ctx, topic, partitions)
		return err
	})
	for _, p := range ps {
		var nodes []*testcluster.Node
		for _, id := range p.Replicas {
			nodes = append(nodes, e.c.Node(id))
		}
		e.replicasIdenticalOnPartition(t, topic, int(p.Partition), nodes...)
	}
}

// replicasIdenticalOn is replicasIdentical for a topic whose replicas are
// nodes (fewer than the cluster's).
func (e *env) replicasIdenticalOn(t *testing.T, topic string, partitions int, nodes ...*testcluster.Node) {
	t.Helper()
	for p := range partitions {
		e.replicasIdenticalOnPartition(t, topic, p, nodes...)
	}
}

// replicasIdenticalOnPartition waits until partition p of topic holds
// the same log bytes on nodes, not empty.
func (e *env) replicasIdenticalOnPartition(t *testing.T, topic string, p int, nodes ...*testcluster.Node) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		var first []byte
		for _, n := range nodes {
			b, err := storage.LogBytes(filepath.Join(n.DataDir(), fmt.Sprintf("%s-%d", topic, p)))
			if err != nil {
				return err
			}
			if first == nil {
				first = b
			} else if !bytes.Equal(b, first) {
				return fmt.Errorf("partition %d: node %d's log (%d bytes) differs from node %d's (%d bytes)", p, n.ID(), len(b), nodes[0].ID(), len(first))
			}
		}
		if len(first) == 0 {
			return fmt.Errorf("partition %d is empty", p)
		}
		return nil
	})
}

// Acceptance point 5: SIGKILL of the active controller (leading no data
// partition): a new active controller within 2 s, and CreateTopics,
// AlterConfigs and InitProducerId keep working through every node left.
func (e *env) controllerKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old := e.c.ControllerID(t)
	e.c.Kill(old)
	t.Cleanup(func() { e.c.Start(old) })
	start := time.Now()
	var next int32 = -1
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range e.c.Nodes() {
			if n.ID() == old {
				continue
			}
			id, err := controllerOf(ctx, n)
			if err != nil {
				return err
			}
			if id == old || id < 0 {
				return fmt.Errorf("node %d names controller %d", n.ID(), id)
			}
			next = id
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("node %d active controller %v after SIGKILL of %d", next, took.Round(time.Millisecond), old)
	if took > 2*time.Second {
		t.Errorf("a new controller took %v, want within 2 s", took)
	}
	for _, n := range e.c.Nodes() {
		if n.ID() == old {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
		if err != nil {
			t.Fatal(err)
		}
		b := cl.Broker(int(n.ID()))
		topic := fmt.Sprintf("after-kill-%d", n.ID())
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 2
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != 0 {
			t.Errorf("CreateTopics through node %d: %v", n.ID(), kerr.ErrorForCode(r.ErrorCode))
		}
		inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("600000")
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{cfg}
		inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
		iresp, err := b.Request(ctx, inc)
		if err != nil {
			t.Fatal(err)
		}
		if code := iresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
			t.Errorf("IncrementalAlterConfigs through node %d: %v", n.ID(), kerr.ErrorForCode(code))
		}
		presp, err := b.Request(ctx, kmsg.NewPtrInitProducerIDRequest())
		if err != nil {
			t.Fatal(err)
		}
		if code := presp.(*kmsg.InitProducerIDResponse).ErrorCode; code != 0 {
			t.Errorf("InitProducerId on node %d: %v", n.ID(), kerr.ErrorForCode(code))
		}
		cl.Close()
	}
}

// controllerOf is the controller id node n's own Metadata answer names.
func controllerOf(ctx context.Context, n *testcluster.Node) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	resp, err := cl.Broker(int(n.ID())).Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return -1, err
	}
	return resp.(*kmsg.MetadataResponse).ControllerID, nil
}

// Acceptance point 1's view from the CLI: `fjord cluster describe`
// through any one node lists all three brokers, the active controller
// and the three voters; DescribeQuorum refuses any log but the
// metadata log's.
func (e *env) clusterDescribe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctrl := e.c.ControllerID(t)
	type describe struct {
		Controller *int32 `json:"controller"`
		Brokers    []struct {
			NodeID int32 `json:"node_id"`
			Fenced bool  `json:"fenced"`
		} `json:"brokers"`
		Quorum struct {
			Leader   *int32  `json:"leader"`
			Voters   []int32 `json:"voters"`
			Replicas []struct {
				NodeID int32  `json:"node_id"`
				Lag    *int64 `json:"lag"`
			} `json:"replicas"`
		} `json:"quorum"`
		Partitions *struct {
			Partitions int `json:"partitions"`
		} `json:"partitions"`
	}
	for _, n := range e.c.Nodes() {
		var out []byte
		var d describe
		// Every node is ready (unfenced in its own image), but a node's
		// image may not have the others' unfencing yet; cluster
		// describe lists fenced brokers too, marked.
		testutil.Eventually(t, 10*time.Second, func() error {
			var err error
			if out, err = exec.CommandContext(ctx, testcluster.Binary(t), "cluster", "describe", "-o", "json", "--brokers", n.KafkaAddr()).Output(); err != nil {
				return fmt.Errorf("fjord cluster describe through node %d: %v", n.ID(), err)
			}
			d = describe{}
			if err := json.Unmarshal(out, &d); err != nil {
				return fmt.Errorf("%v\n%s", err, out)
			}
			live := 0
			for _, b := range d.Brokers {
				if !b.Fenced {
					live++
				}
			}
			if live != 3 {
				return fmt.Errorf("fjord cluster describe through node %d lists %d unfenced brokers:\n%s", n.ID(), live, out)
			}
			// The lag of every voter comes from the active controller,
			// which knows it from their heartbeats.
			for _, r := range d.Quorum.Replicas {
				if r.Lag == nil {
					return fmt.Errorf("fjord cluster describe through node %d: no lag for voter %d:\n%s", n.ID(), r.NodeID, out)
				}
			}
			return nil
		})
		if d.Controller == nil || *d.Controller != ctrl || len(d.Brokers) != 3 || d.Quorum.Leader == nil ||
			*d.Quorum.Leader != ctrl || !slices.Equal(d.Quorum.Voters, []int32{1, 2, 3}) || len(d.Quorum.Replicas) != 3 || d.Partitions == nil {
			t.Errorf("cluster describe through node %d: %s; want controller %d, three brokers and voters 1, 2, 3", n.ID(), out, ctrl)
		}
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "not-the-metadata-log"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DescribeQuorum of another topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
}

// Issue 14, acceptance point 1 (a): SIGKILL of a partition's leader that
// is not the active controller, under acks=all idempotent load. Each
// trial: the controller fences the dead broker when its session lapses
// and elects the next ISR member with the leader epoch + 1; the
// producer's first acknowledgement from the new leader is timed from
// the kill; the dead node restarts and rejoins the ISR. At the end every
// acknowledged record is read back once, in order, and the three
// replicas are the same bytes.
func (e *env) leaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic = "failover"
	ctrl, others := e.controllerAndOthers(t)
	// The two that take turns leading come first: the controller, last
	// in replica order, is elected only if both are out of the ISR.
	e.createTopic(t, ctx, topic, -1, -1, others[0], others[1], ctrl)
	load := e.startLoad(t, ctx, topic, 1)
	var times []time.Duration
	for trial := range failoverTrials(t) {
		times = append(times, e.killLeader(t, ctx, load, trial, ctrl))
	}
	load.finish(t, ctx, e)
	e.logFailovers(t, "the leader, not the controller", times)

	// The controller counted what it did.
	m := testutil.Scrape(t, http.DefaultClient, "http://"+e.c.Node(ctrl).HTTPAddr()+"/metrics")
	for _, family := range []string{"fjord_controller_broker_fencings_total", "fjord_controller_broker_unfencings_total", "fjord_controller_leader_elections_total"} {
		if v, _ := m.Value(family); v < float64(len(times)) {
			t.Errorf("%s = %v after %d leader kills, want at least %d", family, v, len(times), len(times))
		}
	}
	if v, found := m.Value("fjord_controller_fenced_brokers"); !found || v != 0 {
		t.Errorf("fjord_controller_fenced_brokers = %v (found %v) with every node back, want 0", v, found)
	}
}

// Issue 14, acceptance point 1 (b): SIGKILL of a node that is both the
// active controller and a partition's leader. A new controller is
// elected by Raft; it does not give the dead broker a whole session
// (Raft cannot reach it), fences it, and elects the partition's next
// ISR member. Each trial makes a topic the controller of the moment
// leads.
func (e *env) leaderAndControllerKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var times []time.Duration
	for trial := range failoverTrials(t) {
		ctrl, others := e.controllerAndOthers(t)
		topic := fmt.Sprintf("failover-controller-%d", trial)
		e.createTopic(t, ctx, topic, -1, -1, ctrl, others[0], others[1])
		load := e.startLoad(t, ctx, topic, 1)
		times = append(times, e.killLeader(t, ctx, load, trial, others[0]))
		load.finish(t, ctx, e)
	}
	e.logFailovers(t, "the leader and the controller", times)
}

// Issue 14, acceptance point 6 (first half): SIGKILL of all three nodes
// at once under acks=all load with flush.policy=ack (the default), then
// a restart in a random order (the seed is logged): every acknowledged
// record is there, once and in order, and the producer goes on. Every
// node comes back as a new process, so each registration fences its
// predecessor; the partitions end with the ISR members that returned
// first, which hold everything acknowledged on disk.
func (e *env) allKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions = "all-killed", 3
	e.createTopic(t, ctx, topic, partitions, 3)
	load := e.startLoad(t, ctx, topic, partitions)
	load.waitAcks(t, 1000)
	seed := time.Now().UnixNano()
	order := []int32{1, 2, 3}
	mrand.New(mrand.NewPCG(uint64(seed), 0)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	before := load.acked()
	e.c.Kill()
	t.Logf("killed all three nodes with %d records acknowledged; restarting in order %v (seed %d)", before, order, seed)
	e.c.Start(order...)
	load.waitAcks(t, 1000)
	load.finish(t, ctx, e)
}

// Issue 14, acceptance point 6, second half, and unclean elections:
// two of three nodes SIGKILLed, restarted one by one. Two topics with
// replicas [3 1] and min.insync.replicas=1: "offline-clean" waits for
// its last ISR member, "offline-unclean" sets
// unclean.leader.election.enable.
//
// Node 3 (the leader) is stopped first, so the controller fences it and
// node 1 goes on alone as the ISR, acknowledging what 3 lacks; then 1
// and 2 are killed and 3 resumed. Alone, 3 is no quorum. Node 2
// restarted (a replica of neither) makes one: the new controller fences
// 1, the last ISR member, and both partitions are left without a
// leader. The clean one stays offline (LEADER_NOT_AVAILABLE, its produce
// refused by every live node) until node 1 returns and is elected,
// with every acknowledged record. The unclean one elects node 3 from
// outside its ISR, warns, counts it, and takes writes again at once;
// what only node 1 held is lost, and node 1, back, cuts it from its log
// (to where 3's epoch starts), so the replicas end the same bytes.
//
// Which of several live replicas an unclean election picks (the most
// caught up) is the controller's unit tests' (unclean_test.go): here
// only one is live.
func (e *env) twoKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const clean, unclean = "offline-clean", "offline-unclean"
	one := map[string]string{"min.insync.replicas": "1"}
	e.createTopicWith(t, ctx, clean, -1, -1, one, 3, 1)
	e.createTopicWith(t, ctx, unclean, -1, -1, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}, 3, 1)
	// Records both replicas hold (the clean topic's come from its load,
	// which checks every record it reads back).
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, 3, unclean, 10) })
	for _, topic := range []string{clean, unclean} {
		testutil.Eventually(t, 10*time.Second, func() error {
			if l, _, isr := e.state(t, ctx, 3, topic); l != 3 || len(isr) != 2 {
				return fmt.Errorf("%s: leader %d ISR %v, want 3 and both", topic, l, isr)
			}
			return nil
		})
	}

	e.stop(t, 3)
	var epoch1 int32 // node 1's leader epoch of the unclean partition
	for _, topic := range []string{clean, unclean} {
		testutil.Eventually(t, 10*time.Second, func() error {
			l, epoch, isr := e.state(t, ctx, 1, topic)
			if l != 1 || !slices.Equal(isr, []int32{1}) {
				return fmt.Errorf("%s after node 3 stopped: leader %d ISR %v", topic, l, isr)
			}
			epoch1 = epoch
			return nil
		})
	}
	// The load knows only node 1 to begin with: a producer's requests
	// to a stopped broker hang until its request timeout.
	load := e.startLoadVia(t, ctx, clean, 1, e.c.Node(1).KafkaAddr())
	load.replicas = []*testcluster.Node{e.c.Node(3), e.c.Node(1)}
	load.waitAcks(t, 500) // acknowledged by node 1 alone: node 3 lacks them
	// (A connection from before a restart may answer EOF once: asked
	// again. A retry may write twice; only offsets count here.)
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, 1, unclean, 100) })
	lost := e.highWatermark(t, ctx, 1, unclean) // node 1's log end: 3 holds 10 of it

	e.c.Kill(1, 2)
	e.resume(t, 3)
	e.c.Start(2)

	// The clean partition: no leader while its last ISR member is dead.
	testutil.Eventually(t, 20*time.Second, func() error {
		if l, _, isr := e.state(t, ctx, 2, clean); l != -1 || !slices.Equal(isr, []int32{1}) {
			return fmt.Errorf("%s with node 1 dead: leader %d ISR %v, want none and [1]", clean, l, isr)
		}
		return nil
	})
	for _, n := range []int32{2, 3} {
		if err := e.produce(ctx, n, clean, 1); err == nil {
			t.Fatalf("node %d acknowledged a produce to %s, which has no leader", n, clean)
		}
	}
	if off := e.sum(t, "fjord_partitions_offline"); off < 1 {
		t.Fatalf("fjord_partitions_offline %v with %s offline", off, clean)
	}

	// The unclean partition: the live replica leads, alone, and takes
	// writes.
	testutil.Eventually(t, 20*time.Second, func() error {
		if l, _, isr := e.state(t, ctx, 2, unclean); l != 3 || !slices.Equal(isr, []int32{3}) {
			return fmt.Errorf("%s: leader %d ISR %v, want node 3 alone", unclean, l, isr)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, 3, unclean, 10) })
	if n := e.sum(t, "fjord_controller_unclean_leader_elections_total"); n < 1 {
		t.Fatalf("fjord_controller_unclean_leader_elections_total %v after an unclean election", n)
	}
	warned := false
	for _, n := range e.c.Nodes() {
		for _, line := range strings.Split(n.LogTail(2000), "\n") {
			warned = warned || strings.Contains(line, `level=WARN msg="unclean leader election: records only the fenced in-sync replicas held may have been lost"`) &&
				strings.Contains(line, " topic="+unclean+" ")
		}
	}
	if !warned {
		t.Fatalf("no node logged the unclean election of %s", unclean)
	}
	var start int64 // where node 3's epoch starts: its log end when elected
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		start, err = epochEnd(ctx, e.cl.Broker(3), unclean, epoch1)
		return err
	})
	if start >= lost {
		t.Fatalf("node 3's epoch starts at %d, but node 1 alone held up to %d: no tail to lose", start, lost)
	}
	// Still offline: nothing elected the clean partition meanwhile.
	if l, _, _ := e.state(t, ctx, 2, clean); l != -1 {
		t.Fatalf("%s elected node %d while its last ISR member was dead", clean, l)
	}

	e.c.Start(1)
	for _, topic := range []string{clean, unclean} {
		testutil.Eventually(t, 30*time.Second, func() error {
			if _, _, isr := e.state(t, ctx, 2, topic); len(isr) != 2 {
				return fmt.Errorf("%s: ISR %v after node 1 returned", topic, isr)
			}
			return nil
		})
	}
	if l, _, _ := e.state(t, ctx, 2, clean); l != 1 {
		t.Fatalf("%s: leader %d once node 1, its last ISR member, returned", clean, l)
	}
	load.finish(t, ctx, e)
	e.replicasIdenticalOn(t, unclean, 1, e.c.Node(3), e.c.Node(1))
	cut := false
	for _, m := range truncatedRE.FindAllStringSubmatch(e.c.Node(1).LogTail(100_000), -1) {
		from, _ := strconv.ParseInt(m[2], 10, 64)
		to, _ := strconv.ParseInt(m[3], 10, 64)
		if m[1] == unclean+"-0" {
			if from != lost || to != start {
				t.Fatalf("node 1 cut %s from %d to %d; want from %d, its log end, to %d, node 3's epoch start", unclean, from, to, lost, start)
			}
			cut = true
		}
	}
	if !cut {
		t.Fatalf("node 1's log shows no cut of %s's records after the unclean election", unclean)
	}
}

// manyPartitionsFor is how many partitions LeaderOfManyKilled's node
// leads: 1,000 (point 9), or FJORD_MANY_PARTITIONS (point 10 measures a
// node holding 2,000 replicas rejoining).
func manyPartitionsFor(t *testing.T) int {
	n := 1000
	if s := os.Getenv("FJORD_MANY_PARTITIONS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || n > 10_000 {
			t.Fatalf("FJORD_MANY_PARTITIONS=%q: want a count from 1 to 10000", s)
		}
	}
	return n
}

// Issue 14, acceptance point 9: a node leading 1,000 partitions (RF=3,
// replicas [a b c] for every one, a the first) SIGKILLed under load.
// The controller fences it in one decision (one metadata batch: one
// fencing line electing every one of them), each new leader is the next
// ISR member at epoch + 1, and the producer carries on. The test logs
// the time from the kill until the observer's Metadata shows every
// partition led again, and the Metadata requests the surviving nodes
// answered per second meanwhile (less the test's own polls), the
// figures BENCHMARKS.md records; then the node restarts, its 1,000
// replicas rejoin every ISR (the time is logged too), every
// acknowledged record is read back once and in order, and the replicas
// are the same bytes.
func (e *env) leaderOfManyKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic = "many"
	manyPartitions := manyPartitionsFor(t)
	ctrl, others := e.controllerAndOthers(t)
	leader, next := others[0], others[1]
	assignments := make([][]int32, manyPartitions)
	for p := range assignments {
		assignments[p] = []int32{leader, next, ctrl}
	}
	e.createTopicAssigned(t, ctx, topic, -1, -1, nil, assignments)
	observer := e.cl.Broker(int(ctrl))
	// leadersAt is every partition's leader and epoch as node b's
	// Metadata has them; leaders asks the observer.
	var polls atomic.Int64
	leadersAt := func(observer *kgo.Broker) (map[int32][2]int32, error) {
		polls.Add(1)
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = []kmsg.MetadataRequestTopic{mt}
		r, err := observer.Request(ctx, mreq)
		if err != nil {
			return nil, err
		}
		out := map[int32][2]int32{}
		for _, mt := range r.(*kmsg.MetadataResponse).Topics {
			for _, p := range mt.Partitions {
				out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
			}
		}
		return out, nil
	}
	leaders := func() (map[int32][2]int32, error) { return leadersAt(observer) }
	// Every node has every partition (its replica manager applies an
	// image before its Metadata shows it) before the load starts: the
	// producer gives up on a partition that stays unknown.
	//
	// Under load (two busy cores) the leader may miss its session once
	// after the topic is made, be fenced and rejoin, and its partitions
	// then stay with the next replica until the leader rebalance runs.
	// The test is about killing the leader of every partition, so it
	// gives them back with a preferred-leader election meanwhile.
	var before map[int32][2]int32
	adm := kadm.NewClient(e.cl)
	every := kadm.TopicsSet{}
	for p := range int32(manyPartitions) {
		every.Add(topic, p)
	}
	for _, n := range e.c.Nodes() {
		testutil.Eventually(t, 60*time.Second, func() error {
			var err error
			if before, err = leadersAt(e.cl.Broker(int(n.ID()))); err != nil {
				return err
			}
			for p := range int32(manyPartitions) {
				if l := before[p]; l[0] != leader {
					if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, every); err != nil {
						t.Logf("preferred-leader election of %s: %v", topic, err)
					}
					return fmt.Errorf("node %d: partition %d led by %d, want %d", n.ID(), p, l[0], leader)
				}
			}
			return nil
		})
	}
	load := e.startLoad(t, ctx, topic, manyPartitions)
	load.waitAcks(t, 2*manyPartitions) // about two records in every partition
	metadataServed := func() float64 {
		var n float64
		for _, id := range []int32{next, ctrl} {
			v, ok := testutil.Scrape(t, http.DefaultClient, "http://"+e.c.Node(id).HTTPAddr()+"/metrics").Value("fjord_kafka_requests_total", "api=Metadata")
			if !ok {
				t.Fatalf("node %d reports no fjord_kafka_requests_total{api=\"Metadata\"}", id)
			}
			n += v
		}
		return n
	}
	served0, polls0 := metadataServed(), polls.Load()

	ctrlMark := e.c.Node(ctrl).LogMark()
	killed := time.Now()
	e.c.Kill(leader)
	var reled time.Duration
	testutil.Eventually(t, 30*time.Second, func() error {
		now, err := leaders()
		if err != nil {
			return err
		}
		for p := range int32(manyPartitions) {
			if l := now[p]; l[0] == leader || l[0] < 0 {
				return fmt.Errorf("partition %d: leader %d", p, l[0])
			}
		}
		reled = time.Since(killed)
		for p := range int32(manyPartitions) {
			if l := now[p]; l[0] != next || l[1] != before[p][1]+1 {
				t.Fatalf("partition %d: leader %d at epoch %d after the kill; want %d, the next ISR member, at epoch %d",
					p, l[0], l[1], next, before[p][1]+1)
			}
		}
		return nil
	})
	fences := 0
	for _, line := range strings.Split(e.c.Node(ctrl).LogSince(ctrlMark), "\n") {
		if m := fenceLineRE.FindStringSubmatch(line); m != nil && m[1] == strconv.Itoa(int(leader)) {
			fences++
			if elected, _ := strconv.Atoi(m[2]); elected < manyPartitions {
				t.Fatalf("the fence of node %d elected %d leaders in one batch, want all %d: %s", leader, elected, manyPartitions, line)
			}
		}
	}
	if fences != 1 {
		t.Fatalf("node %d was fenced %d times for one kill", leader, fences)
	}
	load.waitAcks(t, manyPartitions) // about one more record in every partition
	window := time.Since(killed)
	metadataRate := (metadataServed() - served0 - float64(polls.Load()-polls0)) / window.Seconds()
	t.Logf("killed node %d leading %d partitions: all led again, by node %d at epoch + 1, %v after the kill, in one fencing batch; "+
		"from the kill until %d more records were acknowledged (%v) the surviving nodes answered %.1f Metadata requests/s (the test's own %d polls excluded)",
		leader, manyPartitions, next, reled.Round(time.Millisecond), manyPartitions, window.Round(time.Millisecond), metadataRate, polls.Load()-polls0)

	leaderMark, ctrlMark := e.c.Node(leader).LogMark(), e.c.Node(ctrl).LogMark()
	restarted := time.Now()
	e.c.Start(leader)
	testutil.Eventually(t, 60*time.Second, func() error {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = []kmsg.MetadataRequestTopic{mt}
		r, err := observer.Request(ctx, mreq)
		if err != nil {
			return err
		}
		out := 0
		for _, mt := range r.(*kmsg.MetadataResponse).Topics {
			for _, p := range mt.Partitions {
				if !slices.Contains(p.ISR, leader) {
					out++
				}
			}
		}
		if out > 0 {
			return fmt.Errorf("%d partitions' ISRs without node %d", out, leader)
		}
		return nil
	})
	back := time.Since(restarted)
	// Where the time went: the node's start (its log's start line) and
	// the controller's ISR changes for the topic.
	started := logTime(e.c.Node(leader).LogSince(leaderMark), `msg="fjord node started"`, false)
	ctrlLog := e.c.Node(ctrl).LogSince(ctrlMark)
	firstISR := logTime(ctrlLog, `msg="altered ISR" component=controller topic=`+topic+" ", true)
	lastISR := logTime(ctrlLog, `msg="altered ISR" component=controller topic=`+topic+" ", false)
	t.Logf("node %d back in all %d ISRs %v after its restart began: started at +%v, the ISR changes committed from +%v to +%v", leader, manyPartitions,
		back.Round(time.Millisecond), started.Sub(restarted).Round(time.Millisecond), firstISR.Sub(restarted).Round(time.Millisecond), lastISR.Sub(restarted).Round(time.Millisecond))
	load.finish(t, ctx, e)
}

// logTime is the time of the first (or last) line of a node's log that
// contains s; the zero time when none does.
func logTime(log, s string, first bool) time.Time {
	var at time.Time
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		if tm := lineTime(line); !tm.IsZero() {
			at = tm
			if first {
				break
			}
		}
	}
	return at
}

// lineTime is the time a node's log line starts with; the zero time for
// a line without one (the harness's own markers).
func lineTime(line string) time.Time {
	ts, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "time="), " ")
	tm, _ := time.Parse(time.RFC3339Nano, ts)
	return tm
}

var fenceLineRE = regexp.MustCompile(`msg="broker fenced: its session lapsed" .*broker=(\d+) .*leaders_elected=(\d+)`)

// sum is a metric family's value summed over the running nodes.
func (e *env) sum(t *testing.T, family string) float64 {
	t.Helper()
	var total float64
	for _, n := range e.c.Nodes() {
		if !n.Running() {
			continue
		}
		v, _ := testutil.Scrape(t, http.DefaultClient, "http://"+n.HTTPAddr()+"/metrics").Value(family)
		total += v
	}
	return total
}

// failoverTrials is how many kills each failover test runs: a few in
// the default suite, more with FJORD_FAILOVER_TRIALS (issue 14's
// benchmark asks for 20 per population).
func failoverTrials(t *testing.T) int {
	n := 3
	if s := os.Getenv("FJORD_FAILOVER_TRIALS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			t.Fatalf("FJORD_FAILOVER_TRIALS=%q: want a count >= 1", s)
		}
	}
	return n
}

func (e *env) logFailovers(t *testing.T, what string, times []time.Duration) {
	slices.Sort(times)
	t.Logf("failover of %s (kill to first acknowledgement by the new leader) over %d trials: min %v, median %v, max %v",
		what, len(times), times[0].Round(time.Millisecond), times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
}

// failoverLoad is one idempotent acks=all producer writing one record a
// millisecond to a single-partition topic, with what it was told.
//
// Client settings (pinned, for the figures): franz-go's defaults
// (idempotent, acks=all, 5 in flight, no linger) but Kafka's Java
// client's pace of retries: a metadata refresh allowed every 100 ms
// (MetadataMinAge; franz-go's default, 5 s, holds a producer on a dead
// leader for up to 5 s against any Kafka-compatible broker) and 100 ms
// between produce retries (retry.backoff.ms; franz-go's starts at 250 ms
// and doubles).
type failoverLoad struct {
	topic      string
	partitions int
	// replicas holds every partition's replicas (nil: every node).
	replicas []*testcluster.Node
	pr       *kgo.Client
	checker  *history.Checker
	stop     context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	acks     []failoverAck
	failures []error
}

type failoverAck struct {
	at     time.Time
	offset int64
}

func (e *env) startLoad(t *testing.T, ctx context.Context, topic string, partitions int) *failoverLoad {
	t.Helper()
	return e.startLoadVia(t, ctx, topic, partitions, strings.Split(e.c.Brokers(), ",")...)
}

// manualAbove is the partition count above which a load writes to every
// partition in turn (one key each) instead of hashing ten keys.
const manualAbove = 10

// startLoadVia is startLoad with a producer that first knows only seeds.
func (e *env) startLoadVia(t *testing.T, ctx context.Context, topic string, partitions int, seeds ...string) *failoverLoad {
	t.Helper()
	partitioner := kgo.StickyKeyPartitioner(nil) // franz-go's default
	if partitions > manualAbove {
		partitioner = kgo.ManualPartitioner()
	}
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(partitioner),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Close)
	l := &failoverLoad{topic: topic, partitions: partitions, pr: pr, checker: history.NewChecker()}
	produceCtx, stop := context.WithCancel(ctx)
	l.stop = stop
	l.wg.Go(func() {
		pace := time.NewTicker(time.Millisecond) // a record a millisecond, not as fast as it goes
		defer pace.Stop()
		for i := 0; produceCtx.Err() == nil; i++ {
			key, value := fmt.Appendf(nil, "k%d", i%10), fmt.Appendf(nil, "%08d", i)
			rec := &kgo.Record{Key: key, Value: value}
			if partitions > manualAbove {
				// Every partition in turn, one key each.
				rec.Key, rec.Partition = fmt.Appendf(nil, "k%d", i%partitions), int32(i%partitions)
			}
			l.checker.Sent(topic, rec.Key, value)
			pr.Produce(ctx, rec, func(r *kgo.Record, err error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.failures = append(l.failures, fmt.Errorf("%s: %w", r.Value, err))
					return
				}
				l.acks = append(l.acks, failoverAck{time.Now(), r.Offset})
				l.checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			})
			select {
			case <-pace.C:
			case <-produceCtx.Done():
			}
		}
	})
	return l
}

func (l *failoverLoad) acked() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.acks) }

// waitAcks waits until n more records are acknowledged.
func (l *failoverLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	want := l.acked() + n
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := l.acked(); got < want {
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.failures) > 0 {
				return fmt.Errorf("%d records acknowledged, waiting for %d; %d failed, the last: %v", got, want, len(l.failures), l.failures[len(l.failures)-1])
			}
			return fmt.Errorf("%d records acknowledged, waiting for %d", got, want)
		}
		return nil
	})
}

// finish stops the load, checks no produce failed and every
// acknowledged record is read back once and in order, and waits for the
// replicas to be the same bytes.
func (l *failoverLoad) finish(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	l.waitAcks(t, 100)
	l.stop()
	l.wg.Wait()
	if err := l.pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.failures) > 0 {
		t.Fatalf("%d produces failed, the first: %v", len(l.failures), l.failures[0])
	}
	if sum := e.verify(t, ctx, l.checker, l.topic); sum.Acked == 0 || sum.Read < sum.Acked {
		t.Fatalf("%v: every acknowledged record must be read back", sum)
	}
	if l.replicas != nil {
		e.replicasIdenticalOn(t, l.topic, l.partitions, l.replicas...)
	} else {
		e.replicasIdentical(t, l.topic, l.partitions)
	}
}

// killLeader is one trial: SIGKILL of load's partition's leader once
// the load runs, the new leader checked (from the old ISR, epoch + 1)
// as node observer sees it, the time from the kill to the first record
// the new leader acknowledged, and the killed node restarted and back
// in the ISR.
func (e *env) killLeader(t *testing.T, ctx context.Context, load *failoverLoad, trial int, observer int32) time.Duration {
	t.Helper()
	topic := load.topic
	load.waitAcks(t, 300)
	leader, epoch, isr := e.state(t, ctx, observer, topic)
	if leader == observer || len(isr) != 3 {
		t.Fatalf("trial %d: leader %d, ISR %v; want a leader other than node %d and a full ISR", trial, leader, isr, observer)
	}
	killed := time.Now()
	e.c.Kill(leader)
	t.Cleanup(func() { // for the tests after a failed trial
		if !e.c.Node(leader).Running() {
			e.c.Start(leader)
		}
	})

	var next, nextEpoch int32
	testutil.Eventually(t, 10*time.Second, func() error {
		l, ep, _ := e.state(t, ctx, observer, topic)
		if l == leader || l < 0 {
			return fmt.Errorf("leader %d", l)
		}
		next, nextEpoch = l, ep
		return nil
	})
	elected := time.Since(killed)
	if !slices.Contains(isr, next) || nextEpoch != epoch+1 {
		t.Fatalf("trial %d: new leader %d at epoch %d; want one of the ISR %v at epoch %d", trial, next, nextEpoch, isr, epoch+1)
	}
	// The new epoch starts where the old one ends on the new leader:
	// every record at or past it was acknowledged by it.
	var start int64
	testutil.Eventually(t, 10*time.Second, func() error { // once the new leader's image has it
		var err error
		start, err = epochEnd(ctx, e.cl.Broker(int(next)), topic, epoch)
		return err
	})
	var took time.Duration
	testutil.Eventually(t, 30*time.Second, func() error {
		load.mu.Lock()
		defer load.mu.Unlock()
		for _, a := range load.acks {
			if a.offset >= start && a.at.After(killed) {
				took = a.at.Sub(killed)
				return nil
			}
		}
		return fmt.Errorf("no record at or past offset %d acknowledged yet", start)
	})
	t.Logf("trial %d: killed leader %d (epoch %d); node %d leads at epoch %d from offset %d, seen %v after the kill; first acknowledgement from it %v after the kill; leader leases lapsed on the survivors since they started: %v",
		trial, leader, epoch, next, nextEpoch, start, elected.Round(time.Millisecond), took.Round(time.Millisecond), e.sum(t, "fjord_leader_lease_lapses_total"))

	e.c.Start(leader)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, next, topic); len(isr) != 3 {
			return fmt.Errorf("ISR %v after node %d restarted", isr, leader)
		}
		return nil
	})
	return took
}

// epochEnd is the end offset of leader epoch epoch in topic-0's log on
// broker b (OffsetForLeaderEpoch): where the next epoch starts.
func epochEnd(ctx context.Context, b *kgo.Broker, topic string, epoch int32) (int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, epoch
	rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	p := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, fmt.Errorf("OffsetForLeaderEpoch %s-0 epoch %d: %w", topic, epoch, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.EndOffset, nil
}

// Issue 14, acceptance point 2: a follower stopped with SIGSTOP stops
// heartbeating; the controller fences it and takes it out of the ISR, so
// acks=all writes stall for about a session and then go on; after
// SIGCONT it is unfenced, catches up and rejoins the ISR.
func (e *env) followerStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "stopped-follower"
	ctrl, others := e.controllerAndOthers(t)
	leader, stopped := others[0], others[1]
	e.createTopic(t, ctx, topic, -1, -1, leader, stopped, ctrl)
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, leader, topic, 10) })
	if _, _, isr := e.state(t, ctx, leader, topic); len(isr) != 3 {
		t.Fatalf("ISR %v before the stop, want all three", isr)
	}

	e.stop(t, stopped)
	begin := time.Now()
	// One acks=all write at a time, straight to the leader, until one is
	// acknowledged: the first waits for the fence.
	testutil.Eventually(t, 30*time.Second, func() error { return e.produce(ctx, leader, topic, 1) })
	stall := time.Since(begin)
	// The acknowledgement may come before the leader's Metadata answer
	// shows the ISR that allowed it: the replica manager applies each
	// image before the node publishes it to request handlers. So the
	// stopped node's absence is awaited, briefly: it cannot rejoin
	// while stopped, so an ISR that still holds it means the write was
	// acknowledged without it.
	var l int32
	var isr []int32
	err := testutil.Wait(5*time.Second, func() error {
		if l, _, isr = e.state(t, ctx, leader, topic); l != leader || slices.Contains(isr, stopped) {
			return fmt.Errorf("leader %d ISR %v", l, isr)
		}
		return nil
	})
	if err != nil {
		for _, n := range e.c.Nodes() {
			for _, line := range strings.Split(n.LogTail(400), "\n") {
				if strings.Contains(line, topic+" ") || strings.Contains(line, topic+"-0 ") || strings.Contains(line, "fenc") {
					t.Log(n.ID(), line)
				}
			}
		}
		t.Fatalf("after a stall of %v: leader %d ISR %v, high watermark %d; want leader %d, without the stopped %d",
			stall, l, isr, e.highWatermark(t, ctx, leader, topic), leader, stopped)
	}
	t.Logf("acks=all stalled %v after SIGSTOP of follower %d (session timeout %v)", stall.Round(time.Millisecond), stopped, 750*time.Millisecond)

	e.resume(t, stopped)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); !slices.Contains(isr, stopped) {
			return fmt.Errorf("ISR %v has not taken node %d back", isr, stopped)
		}
		return nil
	})
	if err := e.produce(ctx, leader, topic, 10); err != nil {
		t.Fatalf("acks=all after the follower rejoined: %v", err)
	}
}

// controllerAndOthers is the active controller's id and the other
// nodes', ascending.
func (e *env) controllerAndOthers(t *testing.T) (ctrl int32, others []int32) {
	ctrl = e.c.ControllerID(t)
	for _, n := range e.c.Nodes() {
		if n.ID() != ctrl {
			others = append(others, n.ID())
		}
	}
	return ctrl, others
}

var truncatedRE = regexp.MustCompile(`msg="truncating a follower's log to the leader's history" partition=(\S+) leader=\d+ from=(\d+) to=(\d+)`)

// Issue 14, acceptance point 5: flush.policy=interval and acks=1, the
// leader SIGKILLed with records its followers had not copied yet (a
// tail). The new leader starts its epoch at its own log end; the old
// leader, restarted, cuts its tail back to there (DivergingEpoch) and
// copies the new leader's records, so the replicas end the same bytes.
// Meanwhile the earliest and latest offsets clients are told never go
// backwards: a new leader whose high watermark is still below the
// start of its epoch answers OFFSET_NOT_AVAILABLE (KIP-207), not a
// smaller offset (here the new leader's follower usually catches its
// high watermark up before the watching client finds it, so the replica
// package's TestNewLeaderHidesItsHighWatermarkUntilItCatchesUp is what
// pins that rule down). The tail is made certain: the follower to be
// elected is SIGSTOPped, well within its session, while the leader
// acknowledges records at offsets the follower cannot have fetched (see
// tailBound).
func (e *env) acksOneTailCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctrl, others := e.controllerAndOthers(t)
	const topic = "acks1-tail"
	leader, follower := others[0], others[1]
	e.createTopicWith(t, ctx, topic, -1, -1, map[string]string{"flush.policy": "interval"}, leader, follower, ctrl)
	from, to := e.acksOneTrial(t, ctx, topic, leader, follower)
	t.Logf("node %d's tail was cut from %d back to %d, the new leader's epoch start", leader, from, to)
}

// tailBuffered bounds the records the acks=1 producer holds unacknowledged
// (franz-go's MaxBufferedRecords), and so how far past the last
// acknowledged offset the leader's log can reach at any moment.
const tailBuffered = 1000

// acksOneTrial runs acks=1 load on topic, kills its leader with a tail
// follower lacks, restarts it, and checks what acksOneTailCut says: the
// restarted node's log shows the cut, from past the last offset it
// acknowledged to the new leader's epoch start.
//
// The tail is proven by offsets, not by a count of acknowledgements (one
// produce response can acknowledge a thousand records appended before the
// stop, which the follower already holds). When the follower stops, the
// leader's log ends at most tailBuffered past the last acknowledged
// offset; a fetch the follower had in flight is answered by the first
// append after the stop, which reaches at most tailBuffered further. An
// acknowledged offset beyond both (tailBound) is one the follower cannot
// have.
func (e *env) acksOneTrial(t *testing.T, ctx context.Context, topic string, leader, follower int32) (from, to int64) {
	pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.MaxBufferedRecords(tailBuffered),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	watcher, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	adm := kadm.NewClient(watcher)

	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var acked atomic.Int64
	// highest is the largest offset acknowledged; oldLeaderHighest the
	// largest acknowledged before the kill, by the old leader alone.
	var highest, oldLeaderHighest atomic.Int64
	var killing atomic.Bool
	highest.Store(-1)
	oldLeaderHighest.Store(-1)
	raise := func(v *atomic.Int64, o int64) {
		for cur := v.Load(); o > cur && !v.CompareAndSwap(cur, o); cur = v.Load() {
		}
	}
	wg.Go(func() { // as fast as the leader takes them
		for i := 0; loadCtx.Err() == nil; i++ {
			pr.Produce(loadCtx, &kgo.Record{Value: fmt.Appendf(nil, "%08d", i)}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				acked.Add(1)
				raise(&highest, r.Offset)
				if !killing.Load() { // set before the kill: undercounts, never overcounts
					raise(&oldLeaderHighest, r.Offset)
				}
			})
		}
	})
	var mu sync.Mutex
	var violations []string
	// never records a violation when list answers an offset below the
	// largest answered before.
	never := func(what string, highest *int64, list kadm.ListedOffsets, err error) {
		if err != nil {
			return
		}
		o, ok := list.Lookup(topic, 0)
		if !ok || o.Err != nil {
			return // OFFSET_NOT_AVAILABLE, a moved leader: asked again
		}
		if o.Offset < *highest {
			mu.Lock()
			violations = append(violations, fmt.Sprintf("%s offset %d after %d", what, o.Offset, *highest))
			mu.Unlock()
		}
		*highest = max(*highest, o.Offset)
	}
	wg.Go(func() { // the offsets clients are told, which must never go back
		var maxStart, maxEnd int64
		pace := time.NewTicker(2 * time.Millisecond) // a question every 2 ms, not a busy loop
		defer pace.Stop()
		for loadCtx.Err() == nil {
			starts, err := adm.ListStartOffsets(loadCtx, topic)
			never("earliest", &maxStart, starts, err)
			ends, err := adm.ListEndOffsets(loadCtx, topic)
			never("latest", &maxEnd, ends, err)
			select {
			case <-pace.C:
			case <-loadCtx.Done():
			}
		}
	})
	defer func() {
		stop()
		wg.Wait()
	}()

	waitAcked := func(n int64) {
		t.Helper()
		want := acked.Load() + n
		testutil.Eventually(t, 30*time.Second, func() error {
			if got := acked.Load(); got < want {
				return fmt.Errorf("%d records acknowledged, waiting for %d", got, want)
			}
			return nil
		})
	}
	waitAcked(20_000)
	_, epoch, _ := e.state(t, ctx, leader, topic)
	// The tail: the follower next in replica order (the one the
	// controller will elect) is stopped, well within its session, while
	// the leader acknowledges more; then the leader dies and the
	// follower goes on.
	e.stop(t, follower)
	tailBound := highest.Load() + 2*tailBuffered
	testutil.Eventually(t, 30*time.Second, func() error {
		if h := highest.Load(); h < tailBound+2_000 {
			return fmt.Errorf("highest acknowledged offset %d, waiting for %d", h, tailBound+2_000)
		}
		return nil
	})
	killing.Store(true)
	e.c.Kill(leader)
	e.resume(t, follower)
	t.Cleanup(func() {
		if !e.c.Node(leader).Running() {
			e.c.Start(leader)
		}
	})
	var next int32
	observer := e.c.ControllerID(t)
	testutil.Eventually(t, 10*time.Second, func() error {
		l, _, _ := e.state(t, ctx, observer, topic)
		if l == leader || l < 0 {
			return fmt.Errorf("leader %d", l)
		}
		next = l
		return nil
	})
	if next != follower {
		t.Fatalf("node %d leads after the kill; want %d, the next in-sync replica in replica order", next, follower)
	}
	var start int64
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		start, err = epochEnd(ctx, e.cl.Broker(int(next)), topic, epoch)
		return err
	})
	before := acked.Load()
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := acked.Load(); n < before+5_000 {
			return fmt.Errorf("%d records acknowledged by the new leader, waiting for 5000", n-before)
		}
		return nil
	})
	e.c.Start(leader)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, next, topic); len(isr) != 3 {
			return fmt.Errorf("ISR %v after node %d restarted", isr, leader)
		}
		return nil
	})
	stop()
	wg.Wait()
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(violations) > 0 {
		t.Fatalf("offsets went backwards across the failover (%d times), the first: %s", len(violations), violations[0])
	}
	mu.Unlock()
	e.replicasIdentical(t, topic, 1)

	tail := oldLeaderHighest.Load()
	if tail < start {
		t.Fatalf("node %d acknowledged up to offset %d before the kill, below the new leader's epoch start %d: no tail (the follower was stopped at offset %d at most)",
			leader, tail, start, tailBound)
	}
	for _, m := range truncatedRE.FindAllStringSubmatch(e.c.Node(leader).LogTail(100_000), -1) {
		if m[1] != topic+"-0" {
			continue
		}
		from, _ := strconv.ParseInt(m[2], 10, 64)
		to, _ := strconv.ParseInt(m[3], 10, 64)
		if to != start || from <= tail {
			t.Fatalf("node %d cut %s from %d to %d; it acknowledged up to %d and the new leader's epoch starts at %d", leader, topic, from, to, tail, start)
		}
		return from, to
	}
	t.Fatalf("node %d acknowledged offsets %d..%d the new leader never had, yet its log shows no cut of them after its restart", leader, start, tail)
	return 0, 0
}

// stabilityCounters are the counters that must not move while a healthy
// cluster is under load: fencings and elections (the active controller
// counts them), ISR changes (each leader counts its own), and Raft
// elections (each node counts its terms as controller).
var stabilityCounters = []string{
	"fjord_controller_broker_fencings_total",
	"fjord_controller_leader_elections_total",
	"fjord_isr_shrinks_total",
	"fjord_isr_expands_total",
	"fjord_controller_activations_total",
}

// counters sums each stability counter over the nodes.
func (e *env) counters(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, n := range e.c.Nodes() {
		m := testutil.Scrape(t, http.DefaultClient, "http://"+n.HTTPAddr()+"/metrics")
		for _, family := range stabilityCounters {
			v, _ := m.Value(family)
			out[family] += v
		}
	}
	return out
}

// Issue 14, acceptance point 7 (the short version, 10 s;
// FJORD_SOAK_DURATION=10m for the 10-minute one): max-rate acks=all
// produce of 100-byte records and a consumer reading along, on a healthy
// cluster, fence no broker, change no ISR and elect neither a partition
// leader nor a controller.
func (e *env) loadWithoutFaults(t *testing.T) {
	duration := 10 * time.Second
	if s := os.Getenv("FJORD_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("FJORD_SOAK_DURATION=%q: want a duration such as 10m", s)
		}
		duration = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+2*time.Minute)
	defer cancel()
	const topic, partitions = "soak", 12
	// Small segments and a byte retention, so a long run does not fill
	// the disk; the topic is deleted at the end.
	e.createTopicWith(t, ctx, topic, partitions, 3, map[string]string{"segment.bytes": "16777216", "retention.bytes": "67108864"})
	defer func() {
		if _, err := kadm.NewClient(e.cl).DeleteTopics(context.Background(), topic); err != nil {
			t.Errorf("deleting %s: %v", topic, err)
		}
	}()
	before := e.counters(t)

	pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	co, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	loadCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	var produced, failed, consumed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		value := make([]byte, 100)
		for loadCtx.Err() == nil {
			pr.Produce(loadCtx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err == nil {
					produced.Add(1)
				} else if loadCtx.Err() == nil {
					failed.Add(1)
				}
			})
		}
	})
	wg.Go(func() {
		for loadCtx.Err() == nil {
			fs := co.PollFetches(loadCtx)
			consumed.Add(int64(fs.NumRecords()))
		}
	})
	wg.Wait()
	after := e.counters(t)
	t.Logf("%v of max-rate load: %d records acknowledged (%.0f/s), %d consumed, %d failed",
		duration, produced.Load(), float64(produced.Load())/duration.Seconds(), consumed.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d produces failed under load without faults", failed.Load())
	}
	if produced.Load() == 0 || consumed.Load() == 0 {
		t.Fatalf("no load: %d produced, %d consumed", produced.Load(), consumed.Load())
	}
	for _, family := range stabilityCounters {
		if d := after[family] - before[family]; d != 0 {
			t.Errorf("%s moved by %v under load without faults, want 0", family, d)
		}
	}
}

// Issue 14, acceptance point 8: a consumer group on three nodes, its
// coordinator's node SIGKILLed. The new leader of the group's
// __consumer_offsets partition loads the group; the members rejoin it
// within the session timeout and 2 s, consume everything, and no
// committed offset is lost or goes backwards.
func (e *env) coordinatorKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, group, partitions, sessionTimeout = "grouped-failover", "failover-group", 6, 6 * time.Second
	e.createTopic(t, ctx, topic, partitions, 3)
	seeds := strings.Split(e.c.Brokers(), ",")
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var next atomic.Int64 // the next value to produce
	produce := func(n int) {
		t.Helper()
		for range n {
			v := next.Add(1) - 1
			value := fmt.Appendf(nil, "%d", v)
			if err := pr.ProduceSync(ctx, &kgo.Record{Key: value, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(600)

	// Two members that commit what they have processed after each poll.
	var mu sync.Mutex
	seen := map[string]time.Time{} // when each value was first consumed
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
			kgo.DisableAutoCommit(), kgo.SessionTimeout(sessionTimeout), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Go(func() {
			for consumeCtx.Err() == nil {
				fs := cl.PollFetches(consumeCtx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					if _, ok := seen[string(r.Value)]; !ok {
						seen[string(r.Value)] = time.Now()
					}
					mu.Unlock()
				})
				if fs.NumRecords() > 0 {
					// Errors (NOT_COORDINATOR while it moves) are retried
					// by the next commit.
					_ = cl.CommitUncommittedOffsets(consumeCtx)
				}
			}
		})
	}
	consumedAll := func(n int64) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			for v := range n {
				if _, ok := seen[strconv.FormatInt(v, 10)]; !ok {
					return fmt.Errorf("record %d not consumed yet (%d of %d seen)", v, len(seen), n)
				}
			}
			return nil
		}
	}
	testutil.Eventually(t, 60*time.Second, consumedAll(next.Load()))

	adm := kadm.NewClient(e.cl)
	committed := func() map[int32]int64 {
		t.Helper()
		out := map[int32]int64{}
		testutil.Eventually(t, 30*time.Second, func() error {
			// A client of its own each time: franz-go keeps a group's
			// coordinator cached through dial errors, and the one it
			// knows may be the node just killed.
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			if err != nil {
				return err
			}
			defer cl.Close()
			offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			for p := range partitions {
				o, ok := offs.Lookup(topic, int32(p))
				switch {
				case !ok:
					out[int32(p)] = 0 // nothing committed (yet) for it
				case o.Err != nil:
					return fmt.Errorf("partition %d: committed offset: %w", p, o.Err)
				default:
					out[int32(p)] = o.At
				}
			}
			return nil
		})
		return out
	}
	// allCommitted waits until the group's commits cover every record
	// produced, and returns them.
	allCommitted := func(when string) map[int32]int64 {
		t.Helper()
		var at map[int32]int64
		testutil.Eventually(t, 30*time.Second, func() error {
			at = committed()
			var sum int64
			for _, o := range at {
				sum += o
			}
			if sum != next.Load() {
				return fmt.Errorf("%d of %d records committed %s", sum, next.Load(), when)
			}
			return nil
		})
		return at
	}
	// Every record is consumed and committed before the kill.
	before := allCommitted("before the kill")

	var coordinator int32 = -1
	testutil.Eventually(t, 10*time.Second, func() error {
		r := adm.FindGroupCoordinators(ctx, group)
		if err := r.Error(); err != nil {
			return err
		}
		coordinator = r[group].NodeID
		return nil
	})
	killed := time.Now()
	e.c.Kill(coordinator)
	t.Cleanup(func() {
		if !e.c.Node(coordinator).Running() {
			e.c.Start(coordinator)
		}
	})
	firstAfter := next.Load()
	produce(600)
	testutil.Eventually(t, sessionTimeout+30*time.Second, consumedAll(next.Load()))
	mu.Lock()
	resumed := seen[strconv.FormatInt(firstAfter, 10)].Sub(killed)
	mu.Unlock()
	if resumed > sessionTimeout+2*time.Second {
		t.Errorf("the group consumed again %v after its coordinator was killed, want within the session timeout %v and 2 s", resumed, sessionTimeout)
	}
	after := allCommitted("after the failover")
	for p, at := range before {
		if after[p] < at {
			t.Errorf("partition %d: committed offset went back from %d to %d across the failover", p, at, after[p])
		}
	}
	r := adm.FindGroupCoordinators(ctx, group)
	t.Logf("coordinator %d killed; coordinator %d serves the group; the first record produced after the kill consumed %v after it; all %d consumed and committed",
		coordinator, r[group].NodeID, resumed.Round(time.Millisecond), next.Load())
	stopConsuming()
	wg.Wait()
	e.c.Start(coordinator)
}
