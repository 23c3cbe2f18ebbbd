package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
)

// startCluster starts n nodes in this process with one voter list, all at
// once (a quorum needs a majority of its voters before any node can
// register), and returns them by node id - 1.
func startCluster(t *testing.T, n int) []*Node {
	t.Helper()
	voters := make([]Voter, n)
	for i := range voters {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		voters[i] = Voter{NodeID: int32(i + 1), Addr: ln.Addr().String()}
		ln.Close()
	}
	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID, cfg.ControllerAddr, cfg.Voters = int32(i+1), voters[i].Addr, voters
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			nodes[i], errs[i] = Start(ctx, cfg)
		})
	}
	wg.Wait()
	for i, n := range nodes {
		if n != nil {
			t.Cleanup(func() { n.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i+1, errs[i])
		}
	}
	return nodes
}

// brokerClient is a client that sends requests to node n itself
// (through Broker(n's id)), not where franz-go would route them: an
// admin request to a node that is not the controller.
func brokerClient(t *testing.T, n *Node, opts ...kgo.Opt) (*kgo.Client, *kgo.Broker) {
	cl := newClient(t, n, opts...)
	return cl, cl.Broker(int(n.cfg.NodeID))
}

// controllerOf waits until every node of nodes names one active
// controller, other than gone (a node closed), and returns it.
func controllerOf(t *testing.T, nodes []*Node, gone int32) int32 {
	t.Helper()
	var id int32 = -1
	testutil.Eventually(t, 10*time.Second, func() error {
		id = nodes[0].control.ControllerID()
		if id == gone {
			return fmt.Errorf("node %d still names node %d, which is closed, the controller", nodes[0].cfg.NodeID, gone)
		}
		for _, n := range nodes {
			if n == nil {
				continue
			}
			if got := n.control.ControllerID(); got != id || got < 0 {
				return fmt.Errorf("node %d sees controller %d, node 1 sees %d", n.cfg.NodeID, got, id)
			}
		}
		return nil
	})
	return id
}

// Every node forwards control-plane changes to the active controller and
// answers once its own image has them: a topic created through a node
// that is not the controller can be produced to on that node at once, a
// hundred times in a row; producer ids from every node never overlap;
// and when the controller goes away, changes keep working through the
// nodes that are left.
func TestClusterForwardsChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := startCluster(t, 3)
	ctrl := controllerOf(t, nodes, -1)
	for _, n := range nodes {
		if img := n.ctrl.Image(); len(img.Brokers) < 3 && n.cfg.NodeID == ctrl {
			// The last node to register may not be in every image yet;
			// the controller's has every registration it committed.
			t.Fatalf("controller %d's image has %d brokers, want 3", ctrl, len(img.Brokers))
		}
	}
	var other *Node
	for _, n := range nodes {
		if n.cfg.NodeID != ctrl {
			other = n
			break
		}
	}
	_, b := brokerClient(t, other)
	for i := range 100 {
		topic := fmt.Sprintf("forwarded-%d", i)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, []int32{other.cfg.NodeID}
		rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatalf("CreateTopics %s to node %d: %v", topic, other.cfg.NodeID, err)
		}
		if r := resp.(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != 0 {
			t.Fatalf("CreateTopics %s to node %d (controller %d): %v %v", topic, other.cfg.NodeID, ctrl, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
		}
		if _, ok := other.ctrl.Image().Topics[topic]; !ok {
			t.Fatalf("CreateTopics %s answered before node %d's image had the topic", topic, other.cfg.NodeID)
		}
		if err := produceTo(ctx, b, topic); err != nil {
			t.Fatalf("produce to %s on node %d right after CreateTopics: %v", topic, other.cfg.NodeID, err)
		}
	}

	// Config changes and partition growth through the other node too.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "forwarded-0"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("123456")
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{c}
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	resp, err := b.Request(ctx, inc)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Fatalf("IncrementalAlterConfigs through node %d: %v", other.cfg.NodeID, kerr.ErrorForCode(code))
	}
	if got := other.ctrl.Image().Topics["forwarded-0"].Configs["retention.ms"]; got != "123456" {
		t.Fatalf("after IncrementalAlterConfigs through node %d its image has retention.ms=%q", other.cfg.NodeID, got)
	}

	// Producer ids from every node, in blocks the controller hands out,
	// never overlap.
	seen := map[int64]int32{}
	initIDs := func(live []*Node) {
		for _, n := range live {
			cl, b := brokerClient(t, n)
			for range 3 {
				resp, err := b.Request(ctx, kmsg.NewPtrInitProducerIDRequest())
				if err != nil {
					t.Fatal(err)
				}
				r := resp.(*kmsg.InitProducerIDResponse)
				if r.ErrorCode != 0 {
					t.Fatalf("InitProducerId on node %d: %v", n.cfg.NodeID, kerr.ErrorForCode(r.ErrorCode))
				}
				if by, dup := seen[r.ProducerID]; dup {
					t.Fatalf("producer id %d from node %d was handed out by node %d too", r.ProducerID, n.cfg.NodeID, by)
				}
				seen[r.ProducerID] = n.cfg.NodeID
			}
			cl.Close()
		}
	}
	initIDs(nodes)

	// The controller goes away: another takes over and every change
	// keeps working through the nodes left.
	start := time.Now()
	nodes[ctrl-1].Close()
	live := make([]*Node, 0, 2)
	for _, n := range nodes {
		if n.cfg.NodeID != ctrl {
			live = append(live, n)
		}
	}
	next := controllerOf(t, live, ctrl)
	t.Logf("new active controller %d %v after closing %d", next, time.Since(start).Round(time.Millisecond), ctrl)
	for _, n := range live {
		_, b := brokerClient(t, n)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("after-failover-%d", n.cfg.NodeID), 1, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != 0 {
			t.Fatalf("CreateTopics on node %d after the controller closed: %v %v", n.cfg.NodeID, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
		}
	}
	initIDs(live)
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// produceTo sends one Produce of one record (acks=all) to b, partition
// 0, and returns its error: the node's own answer, not retried.
func produceTo(ctx context.Context, b *kgo.Broker, topic string) error {
	bb := record.NewBuilder(record.DefaultBatchOptions())
	bb.Add([]byte("k"), []byte("v"), nil, time.Now().UnixMilli())
	batch, err := bb.Build()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return err
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("%w: %s", err, deref(p.ErrorMessage))
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
