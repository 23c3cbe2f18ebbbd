package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/replica"
)

// replicaLogs answers the active controller's question before an unclean
// leader election (controller.ReplicaLogs): how far a broker's replica
// of a partition reaches. This node's own replica is read directly;
// another node's is asked with OffsetForLeaderEpoch from this node's
// internal client with replica id -2, which Fjord answers from the
// replica's own log whether or not it leads (kafkaserver's
// offset_for_leader_epoch.go).
//
// The controller opens before the peer pool and the replica manager
// exist, and may become active at once, so the two are set later
// (bind); until then every question fails and the partition waits for
// the next pass.
type replicaLogs struct {
	self    int32
	sources atomic.Pointer[replicaLogSources]
}

type replicaLogSources struct {
	peers    *peers.Pool
	replicas *replica.Manager
}

var errReplicaLogsNotReady = errors.New("this node's peers and replicas are not open yet")

func (r *replicaLogs) bind(p *peers.Pool, m *replica.Manager) {
	r.sources.Store(&replicaLogSources{peers: p, replicas: m})
}

func (r *replicaLogs) LogEnd(ctx context.Context, broker int32, topic string, partition int32) (int32, int64, error) {
	src := r.sources.Load()
	if src == nil {
		return -1, -1, errReplicaLogsNotReady
	}
	if broker == r.self {
		return src.replicas.LogEnd(topic, partition)
	}
	b, err := src.peers.Broker(broker)
	if err != nil {
		return -1, -1, err
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -2 // the replica's own log (see above)
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, -1, math.MaxInt32
	rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return -1, -1, fmt.Errorf("asking broker %d for %s-%d's log end: %w", broker, topic, partition, err)
	}
	r2 := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if resp.GetVersion() < 3 {
		return -1, -1, fmt.Errorf("broker %d answered OffsetForLeaderEpoch v%d, which has no replica id", broker, resp.GetVersion())
	}
	if len(r2.Topics) != 1 || len(r2.Topics[0].Partitions) != 1 {
		return -1, -1, fmt.Errorf("broker %d answered %d topics for one", broker, len(r2.Topics))
	}
	p := r2.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return -1, -1, fmt.Errorf("broker %d's %s-%d: %w", broker, topic, partition, err)
	}
	return p.LeaderEpoch, p.EndOffset, nil
}
