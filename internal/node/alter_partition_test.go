package node

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// isrCluster is three in-process nodes and topic "isr" of one partition
// on replicas [leader, follower], where leader and follower are the two
// nodes that are not the active controller (ctrl), so ctrl's broker is
// registered but no replica.
type isrCluster struct {
	nodes                    []*Node
	ctrl, leader, follower   *Node
	topicID                  metadata.UUID
	ctrlID, leadID, followID int32
}

func startISRCluster(t *testing.T, ctx context.Context) *isrCluster {
	t.Helper()
	nodes := startCluster(t, 3)
	c := &isrCluster{nodes: nodes, ctrlID: controllerOf(t, nodes, -1)}
	c.ctrl = nodes[c.ctrlID-1]
	for _, n := range nodes {
		switch {
		case n == c.ctrl:
		case c.leader == nil:
			c.leader = n
		default:
			c.follower = n
		}
	}
	c.leadID, c.followID = c.leader.cfg.NodeID, c.follower.cfg.NodeID
	res := c.leader.control.CreateTopics(ctx, []controlplane.CreateTopic{{Name: "isr", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{c.leadID, c.followID}}}}, false)
	if res[0].Err != nil {
		t.Fatalf("creating topic isr: %v", res[0].Err)
	}
	c.topicID = res[0].Topic.ID
	return c
}

// partition is the partition as n's image has it.
func (c *isrCluster) partition(n *Node) metadata.Partition {
	return n.ctrl.Image().TopicsByID[c.topicID].Partitions[0]
}

// alterPartitionReq is a v3 AlterPartition from broker for the topic's
// partition 0 (member broker epochs -1: not known).
func alterPartitionReq(broker int32, brokerEpoch int64, topicID metadata.UUID, partition, leaderEpoch, partitionEpoch int32, isr ...int32) *kmsg.AlterPartitionRequest {
	r := kmsg.NewPtrAlterPartitionRequest()
	r.BrokerID, r.BrokerEpoch = broker, brokerEpoch
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = partition, leaderEpoch, partitionEpoch
	for _, id := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID = id
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = []kmsg.AlterPartitionRequestTopicPartition{rp}
	r.Topics = []kmsg.AlterPartitionRequestTopic{rt}
	return r
}

// alterPartitionCode sends req to b and returns the top-level error
// code, or else the partition's.
func alterPartitionCode(t *testing.T, ctx context.Context, b *kgo.Broker, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	t.Helper()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("AlterPartition: %v", err)
	}
	r := resp.(*kmsg.AlterPartitionResponse)
	if r.ErrorCode != 0 {
		if len(r.Topics) != 0 {
			t.Errorf("a top-level %v carries %d topics", kerr.ErrorForCode(r.ErrorCode), len(r.Topics))
		}
		return r, kerr.ErrorForCode(r.ErrorCode)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("AlterPartition of one partition answered %+v", r)
	}
	return r, kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
}

// AlterPartition on the wire, against a real controller: everything no
// Fjord leader sends is refused with Kafka's code (issue 13, acceptance
// point 7: "an AlterPartition from a non-leader") and changes nothing;
// the one valid request then commits.
func TestAlterPartitionRefusesHostileInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startISRCluster(t, ctx)
	img := c.ctrl.ctrl.Image()
	leadEpoch, followEpoch := img.Brokers[c.leadID].Epoch, img.Brokers[c.followID].Epoch

	// Each sender talks to the active controller's listener directly,
	// as a forwarding node does.
	_, outside := brokerClient(t, c.ctrl)
	_, asLeader := brokerClient(t, c.ctrl, kgo.ClientID(c.leader.InternalClientID()))
	_, asFollower := brokerClient(t, c.ctrl, kgo.ClientID(c.follower.InternalClientID()))
	// A leader's client at a node that is not the controller: a forward,
	// which is served there or refused, never forwarded again.
	_, leaderAtFollower := brokerClient(t, c.follower, kgo.ClientID(c.leader.InternalClientID()))

	valid := func() *kmsg.AlterPartitionRequest {
		return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, c.leadID)
	}
	for _, tc := range []struct {
		name string
		b    *kgo.Broker
		req  func() *kmsg.AlterPartitionRequest
		want *kerr.Error
	}{
		{"from an outside client", outside, valid, kerr.ClusterAuthorizationFailed},
		{"from the leader's client naming another broker", asLeader, func() *kmsg.AlterPartitionRequest {
			r := valid()
			r.BrokerID, r.BrokerEpoch = c.followID, followEpoch
			return r
		}, kerr.ClusterAuthorizationFailed},
		{"from a follower, as itself", asFollower, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.followID, followEpoch, c.topicID, 0, 0, 0, c.followID)
		}, kerr.InvalidRequest},
		{"with a stale broker epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			r := valid()
			r.BrokerEpoch--
			return r
		}, kerr.StaleBrokerEpoch},
		{"with a future broker epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			r := valid()
			r.BrokerEpoch += 1000
			return r
		}, kerr.StaleBrokerEpoch},
		{"with a stale leader epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, -1, 0, c.leadID)
		}, kerr.FencedLeaderEpoch},
		{"with a future leader epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 1, 0, c.leadID)
		}, kerr.NotController},
		{"with a future partition epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 1, c.leadID)
		}, kerr.NotController},
		{"with an ISR without the leader", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, c.followID)
		}, kerr.InvalidRequest},
		{"with a broker that is no replica", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, c.leadID, c.ctrlID)
		}, kerr.InvalidRequest},
		{"with duplicates", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, c.leadID, c.leadID)
		}, kerr.InvalidRequest},
		{"with 100,000 ISR entries", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, slices.Repeat([]int32{c.leadID, c.followID}, 50_000)...)
		}, kerr.InvalidRequest},
		{"with a member's stale broker epoch", asLeader, func() *kmsg.AlterPartitionRequest {
			r := alterPartitionReq(c.leadID, leadEpoch, c.topicID, 0, 0, 0, c.leadID, c.followID)
			r.Topics[0].Partitions[0].NewEpochISR[1].BrokerEpoch = followEpoch - 1
			return r
		}, kerr.IneligibleReplica},
		{"for an unknown topic id", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, metadata.UUID{0xde, 0xad}, 0, 0, 0, c.leadID)
		}, kerr.UnknownTopicID},
		{"for an unknown partition", asLeader, func() *kmsg.AlterPartitionRequest {
			return alterPartitionReq(c.leadID, leadEpoch, c.topicID, 7, 0, 0, c.leadID)
		}, kerr.UnknownTopicOrPartition},
		{"to a node that is not the controller", leaderAtFollower, valid, kerr.NotController},
	} {
		before := c.ctrl.ctrl.Image()
		_, err := alterPartitionCode(t, ctx, tc.b, tc.req())
		if !errors.Is(err, tc.want) {
			t.Errorf("AlterPartition %s: %v, want %v", tc.name, err, tc.want)
		}
		after := c.ctrl.ctrl.Image()
		if after.Offset != before.Offset || !reflect.DeepEqual(c.partition(c.ctrl), before.TopicsByID[c.topicID].Partitions[0]) {
			t.Fatalf("AlterPartition %s changed the metadata: offset %d -> %d, partition %+v", tc.name, before.Offset, after.Offset, c.partition(c.ctrl))
		}
	}

	// The leader's own request commits, and a stale one after it is
	// INVALID_UPDATE_VERSION.
	resp, err := alterPartitionCode(t, ctx, asLeader, valid())
	if err != nil {
		t.Fatalf("the leader's shrink: %v", err)
	}
	if got := resp.Topics[0].Partitions[0]; got.LeaderID != c.leadID || got.LeaderEpoch != 0 || got.PartitionEpoch != 1 || !slices.Equal(got.ISR, []int32{c.leadID}) {
		t.Fatalf("the leader's shrink answered %+v", got)
	}
	if p := c.partition(c.ctrl); p.PartitionEpoch != 1 || !slices.Equal(p.ISR, []int32{c.leadID}) {
		t.Fatalf("the controller's image has %+v after the shrink", p)
	}
	before := c.ctrl.ctrl.Image().Offset
	if _, err := alterPartitionCode(t, ctx, asLeader, valid()); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("the same request again: %v, want INVALID_UPDATE_VERSION", err)
	}
	if after := c.ctrl.ctrl.Image().Offset; after != before {
		t.Fatalf("a stale partition epoch moved the metadata log from %d to %d", before, after)
	}
}

// A leader on a node that is not the controller shrinks and expands its
// ISR through the forwarding client: the change goes to the active
// controller and is answered only once the leader's own image has it,
// leader epoch unchanged and the partition epoch one further each time.
func TestClusterAltersISRThroughTheController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startISRCluster(t, ctx)
	brokerEpoch := c.leader.ctrl.Image().Brokers[c.leadID].Epoch
	alter := func(p metadata.Partition, isr ...int32) (controlplane.PartitionState, error) {
		return c.leader.control.AlterPartition(ctx, controlplane.AlterPartition{TopicID: c.topicID, Partition: 0,
			LeaderID: c.leadID, BrokerEpoch: brokerEpoch, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
			NewISR: isr, NewISRBrokerEpochs: slices.Repeat([]int64{-1}, len(isr))})
	}

	start := c.partition(c.leader)
	for i, isr := range [][]int32{{c.leadID}, {c.leadID, c.followID}} {
		from := c.partition(c.leader)
		st, err := alter(from, isr...)
		if err != nil {
			t.Fatalf("AlterPartition to %v through node %d (controller %d): %v", isr, c.leadID, c.ctrlID, err)
		}
		want := controlplane.PartitionState{Leader: c.leadID, LeaderEpoch: start.LeaderEpoch, PartitionEpoch: start.PartitionEpoch + int32(i) + 1, ISR: isr}
		if !reflect.DeepEqual(st, want) {
			t.Fatalf("answer %+v, want %+v", st, want)
		}
		// At once on the leader's node: the answer waited for its image.
		if p := c.partition(c.leader); !slices.Equal(p.ISR, isr) || p.PartitionEpoch != want.PartitionEpoch || p.LeaderEpoch != want.LeaderEpoch {
			t.Fatalf("node %d's image has %+v when AlterPartition answered %+v", c.leadID, p, st)
		}
		if p := c.partition(c.ctrl); !slices.Equal(p.ISR, isr) || p.PartitionEpoch != want.PartitionEpoch {
			t.Fatalf("the controller's image has %+v", p)
		}
	}

	// The controller's refusals reach the leader as the same codes.
	if _, err := alter(start, c.leadID); !errors.Is(err, controlplane.ErrInvalidUpdateVersion) {
		t.Fatalf("a request from the first state: %v, want INVALID_UPDATE_VERSION", err)
	}
	if _, err := alter(c.partition(c.leader), c.followID); !errors.Is(err, controlplane.ErrInvalidRequest) {
		t.Fatalf("an ISR without the leader: %v, want INVALID_REQUEST", err)
	}
	// A leader on the controller's own node is answered by it, with the
	// same codes.
	st, err := c.ctrl.control.AlterPartition(ctx, controlplane.AlterPartition{TopicID: metadata.UUID{0xde, 0xad}, LeaderID: c.ctrlID,
		BrokerEpoch: c.ctrl.ctrl.Image().Brokers[c.ctrlID].Epoch, NewISR: []int32{c.ctrlID}})
	if !errors.Is(err, controlplane.ErrUnknownTopicID) {
		t.Fatalf("AlterPartition on the controller's node for an unknown topic: %+v, %v; want UNKNOWN_TOPIC_ID", st, err)
	}
}
