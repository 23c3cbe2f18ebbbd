package forward

import (
	"context"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

// ReportOfflineReplicas implements controlplane.Client with Fjord's own
// request (fjordmsg.ReportOfflineReplicasRequest): no Kafka API carries
// a failed replica (Kafka's heartbeat carries failed directories). The
// partitions go grouped by topic, in the order first named. The answer
// carries the metadata offset in its body, which this node then waits
// for, as for MarkTopicKeyed.
func (c *Client) ReportOfflineReplicas(ctx context.Context, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) error {
	return c.do(ctx, func(ctx context.Context) error {
		return c.cfg.Local.ReportOfflineReplicas(ctx, broker, brokerEpoch, partitions)
	}, func(ctx context.Context) error {
		resp, _, err := c.send(ctx, offlineReplicasRequest(broker, brokerEpoch, partitions))
		if err != nil {
			return err
		}
		r := resp.(*fjordmsg.ReportOfflineReplicasResponse)
		if err := codeError(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		return c.await(ctx, uint64(max(r.MetadataOffset, 0)))
	})
}

// offlineReplicasRequest groups partitions by topic, keeping the order
// in which each topic is first named.
func offlineReplicasRequest(broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) *fjordmsg.ReportOfflineReplicasRequest {
	req := &fjordmsg.ReportOfflineReplicasRequest{BrokerID: broker, BrokerEpoch: brokerEpoch}
	index := map[metadata.UUID]int{}
	for _, p := range partitions {
		i, ok := index[p.TopicID]
		if !ok {
			i = len(req.Topics)
			index[p.TopicID] = i
			req.Topics = append(req.Topics, fjordmsg.ReportOfflineReplicasTopic{TopicID: p.TopicID})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p.Partition)
	}
	return req
}
