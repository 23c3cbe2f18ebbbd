package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// lagTime is the nodes' replica.lag.time.max.ms: short, so a stopped
// follower leaves the ISR within the test's patience.
const lagTime = time.Second

// One cluster of five for every test here (a quorum of five survives
// two stopped followers, which acceptance point 4 needs: with three, two
// stopped nodes would stop the controller quorum and no ISR could
// change). Each subtest makes its own topic and gives back every node it
// stopped.
func TestReplication(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{
		Nodes: 5,
		// Sessions longer than any test here: a stopped follower is
		// then shrunk out of the ISR by its leader for its lag (a
		// follower that heartbeats but cannot fetch), not fenced by the
		// controller (TestThreeNodes/FollowerStopped).
		Node: testcluster.Options{Args: []string{"--replica-lag-time-max-ms", strconv.Itoa(int(lagTime / time.Millisecond)),
			"--broker-session-timeout-ms", "600000"}},
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("StoppedFollowerLeavesAndRejoinsTheISR", e.stoppedFollower)
	t.Run("MinISRRefusesWritesWithBothFollowersOut", e.minISR)
}

type env struct {
	t  *testing.T
	c  *testcluster.Cluster
	cl *kgo.Client
}

// placement picks a leader and two followers none of which is the active
// controller, so stopping followers never stops the quorum's leader.
func (e *env) placement(t *testing.T) (leader int32, followers []int32) {
	ctrl := e.c.ControllerID(t)
	var others []int32
	for id := int32(1); id <= 5; id++ {
		if id != ctrl {
			others = append(others, id)
		}
	}
	return others[0], others[1:3]
}

// createTopic creates topic with min.insync.replicas=2 through the
// controller: one partition on replicas, or, without them, partitions
// partitions of rf replicas placed by the controller.
func (e *env) createTopic(t *testing.T, ctx context.Context, topic string, partitions int32, rf int16, replicas ...int32) {
	t.Helper()
	e.createTopicWith(t, ctx, topic, partitions, rf, nil, replicas...)
}

// createTopicWith is createTopic with more topic configs.
func (e *env) createTopicWith(t *testing.T, ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string, replicas ...int32) {
	t.Helper()
	var assignments [][]int32
	if len(replicas) > 0 {
		assignments = [][]int32{replicas}
	}
	e.createTopicAssigned(t, ctx, topic, partitions, rf, configs, assignments)
}

// createTopicAssigned is createTopicWith with every partition's replicas
// given (assignments[p] for partition p; nil: the controller places
// them).
func (e *env) createTopicAssigned(t *testing.T, ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string, assignments [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	for p, replicas := range assignments {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
	}
	if _, ok := configs["min.insync.replicas"]; !ok {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
		rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{cfg}
	}
	for name, value := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreateTopics %s: %v %v", topic, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
}

// state is a partition's leader, leader epoch and ISR as the leader's
// own Metadata answer has them (asked again on a lost connection: a node
// restarted by an earlier test leaves the client's old one dead).
func (e *env) state(t *testing.T, ctx context.Context, leader int32, topic string) (l, epoch int32, isr []int32) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		resp, err := e.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return err
		}
		for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
			if mt.Topic != nil && *mt.Topic == topic && len(mt.Partitions) == 1 {
				p := mt.Partitions[0]
				isr = slices.Clone(p.ISR)
				slices.Sort(isr)
				l, epoch = p.Leader, p.LeaderEpoch
				return nil
			}
		}
		return fmt.Errorf("node %d's metadata has no %s-0", leader, topic)
	})
	return l, epoch, isr
}

// produce sends one acks=all Produce of n records straight to the leader
// and returns its answer's error, not retried.
func (e *env) produce(ctx context.Context, leader int32, topic string, n int) error {
	return testutil.ProduceOnce(ctx, e.cl.Broker(int(leader)), topic, n)
}

// highWatermark is the leader's answer to ListOffsets latest
// (read_uncommitted): its high watermark.
func (e *env) highWatermark(t *testing.T, ctx context.Context, leader int32, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp, err := e.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// stop SIGSTOPs a node and SIGCONTs it at the end of the test whatever
// happens, so the harness can stop it.
func (e *env) stop(t *testing.T, id int32) {
	t.Helper()
	n := e.c.Node(id)
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Signal(syscall.SIGCONT) })
	// The signal is asynchronous: wait until every thread has stopped,
	// so what the test does next happens to a stopped node.
	testutil.Eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.Pid()))
		if err != nil {
			return err
		}
		// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return fmt.Errorf("node %d (pid %d) not stopped yet: %.40s", id, n.Pid(), b)
		}
		return nil
	})
}

func (e *env) resume(t *testing.T, id int32) {
	t.Helper()
	if err := e.c.Node(id).Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

var partitionEpochRE = regexp.MustCompile(`msg="ISR changed" partition=(\S+) .*partition_epoch=(\d+)`)

// partitionEpoch is the partition epoch of the leader's last committed
// ISR change of topic-0, from its log (-1: none yet).
func (e *env) partitionEpoch(leader int32, topic string) int {
	epoch := -1
	for _, m := range partitionEpochRE.FindAllStringSubmatch(e.c.Node(leader).LogTail(10000), -1) {
		if m[1] == topic+"-0" {
			epoch, _ = strconv.Atoi(m[2])
		}
	}
	return epoch
}

// Acceptance point 3: a follower stopped with SIGSTOP leaves the ISR
// through AlterPartition within the lag time and a second, acks=all
// writes go on, the leader epoch stays and the partition epoch moves;
// after SIGCONT it catches up and rejoins.
func (e *env) stoppedFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "stopped-follower"
	leader, followers := e.placement(t)
	e.createTopic(t, ctx, topic, -1, -1, leader, followers[0], followers[1])
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, leader, topic, 10) })
	_, epoch, isr := e.state(t, ctx, leader, topic)
	if len(isr) != 3 {
		t.Fatalf("ISR %v before the stop, want all three", isr)
	}

	stopped := followers[1]
	e.stop(t, stopped)
	start := time.Now()
	var shrunk time.Duration
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); slices.Contains(isr, stopped) {
			return fmt.Errorf("ISR %v still has the stopped node %d", isr, stopped)
		}
		shrunk = time.Since(start)
		return nil
	})
	t.Logf("ISR shrank %v after the SIGSTOP at %s (lag time %v)", shrunk.Round(time.Millisecond), start.UTC().Format("15:04:05.000"), lagTime)
	if testing.Verbose() {
		for _, l := range strings.Split(e.c.Node(leader).LogTail(200), "\n") {
			if strings.Contains(l, "ISR") {
				t.Log(l)
			}
		}
	}
	if shrunk > lagTime+time.Second {
		t.Errorf("the ISR shrank %v after the stop, more than the lag time %v and a second", shrunk, lagTime)
	}
	if err := e.produce(ctx, leader, topic, 10); err != nil {
		t.Fatalf("acks=all with the follower out of the ISR: %v", err)
	}
	l, epochAfter, _ := e.state(t, ctx, leader, topic)
	if l != leader || epochAfter != epoch {
		t.Errorf("leader %d epoch %d after the shrink, want %d and %d unchanged", l, epochAfter, leader, epoch)
	}
	shrinkEpoch := e.partitionEpoch(leader, topic)
	if shrinkEpoch < 1 {
		t.Errorf("partition epoch after the shrink: %d, want it moved past 0", shrinkEpoch)
	}

	e.resume(t, stopped)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); !slices.Contains(isr, stopped) {
			return fmt.Errorf("ISR %v has not taken node %d back", isr, stopped)
		}
		return nil
	})
	if got := e.partitionEpoch(leader, topic); got <= shrinkEpoch {
		t.Errorf("partition epoch after the expansion: %d, want past %d", got, shrinkEpoch)
	}
	if err := e.produce(ctx, leader, topic, 10); err != nil {
		t.Fatalf("acks=all after the follower rejoined: %v", err)
	}
}

// Acceptance point 4: with min.insync.replicas=2 and both followers out
// of the ISR, acks=all is refused NOT_ENOUGH_REPLICAS and the log does
// not change; what is below the high watermark can still be read; one
// follower back and writes go on.
func (e *env) minISR(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "min-isr"
	leader, followers := e.placement(t)
	e.createTopic(t, ctx, topic, -1, -1, leader, followers[0], followers[1])
	testutil.Eventually(t, 10*time.Second, func() error { return e.produce(ctx, leader, topic, 20) })
	before := e.highWatermark(t, ctx, leader, topic)

	e.stop(t, followers[0])
	e.stop(t, followers[1])
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); len(isr) != 1 {
			return fmt.Errorf("ISR %v, want the leader alone", isr)
		}
		return nil
	})
	for range 3 {
		if err := e.produce(ctx, leader, topic, 5); !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("acks=all with the ISR below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", err)
		}
	}
	if hw := e.highWatermark(t, ctx, leader, topic); hw != before {
		t.Errorf("high watermark %d after refused writes, was %d", hw, before)
	}
	// Below the high watermark reads go on.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(e.c.Node(leader).KafkaAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var read int64
	for read < before {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading below the high watermark: %v", err)
		}
		read += int64(fs.NumRecords())
	}
	if read != before {
		t.Errorf("read %d records, the high watermark is %d", read, before)
	}

	e.resume(t, followers[0])
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); len(isr) < 2 {
			return fmt.Errorf("ISR %v, want a follower back", isr)
		}
		return e.produce(ctx, leader, topic, 5)
	})
}
