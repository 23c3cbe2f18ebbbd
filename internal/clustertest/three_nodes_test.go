package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	t.Run("ControllerKilled", e.controllerKilled)
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

	checker := testcluster.NewChecker()
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
					checker.Acked(testcluster.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
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

	logs, err := testcluster.ReadAll(ctx, e.c.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checker.Verify(logs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked != producers*perProducer || sum.Read != producers*perProducer {
		t.Fatalf("%v; want all %d acknowledged and read back once", sum, producers*perProducer)
	}

	// Quiet: every replica of every partition holds the same bytes.
	testutil.Eventually(t, 30*time.Second, func() error {
		for p := range partitions {
			var first []byte
			for _, n := range e.c.Nodes() {
				b, err := logFiles(filepath.Join(n.DataDir(), fmt.Sprintf("%s-%d", topic, p)))
				if err != nil {
					return err
				}
				if first == nil {
					first = b
				} else if !bytes.Equal(b, first) {
					return fmt.Errorf("partition %d: node %d's log (%d bytes) differs from node 1's (%d bytes)", p, n.ID(), len(b), len(first))
				}
			}
			if len(first) == 0 {
				return fmt.Errorf("partition %d is empty", p)
			}
		}
		return nil
	})
}

// logFiles is a partition log's segments, concatenated in offset order:
// the same bytes on every replica of a quiet partition, wherever each
// rolled its segments.
func logFiles(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // zero-padded base offsets
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
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
	for _, n := range e.c.Nodes() {
		out, err := exec.CommandContext(ctx, testcluster.Binary(t), "cluster", "describe", "-o", "json", "--brokers", n.KafkaAddr()).Output()
		if err != nil {
			t.Fatalf("fjord cluster describe through node %d: %v", n.ID(), err)
		}
		var d struct {
			Controller *int32 `json:"controller"`
			Brokers    []struct {
				NodeID int32 `json:"node_id"`
			} `json:"brokers"`
			Quorum struct {
				Leader *int32  `json:"leader"`
				Voters []int32 `json:"voters"`
			} `json:"quorum"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if d.Controller == nil || *d.Controller != ctrl || len(d.Brokers) != 3 || d.Quorum.Leader == nil ||
			*d.Quorum.Leader != ctrl || !slices.Equal(d.Quorum.Voters, []int32{1, 2, 3}) {
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
