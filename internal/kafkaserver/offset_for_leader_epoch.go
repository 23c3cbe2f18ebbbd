package kafkaserver

// OffsetForLeaderEpoch: v0-4
//
// Returns, for each requested epoch, the end offset of that epoch in this
// leader's log, so a consumer (KIP-320) or a follower can find where its
// history diverged from the leader's and truncate there. The answer is
// the leader-epoch cache's, as Kafka's: the largest epoch <= the one
// asked for that the log has, and the start offset of the epoch after it
// (the log end offset for the latest epoch); an epoch older than the
// log's history gets itself and the history's first start offset; an
// epoch newer than any the log has gets epoch -1 and offset -1, with no
// error (the follower then falls back to its high watermark).
//
// Validation in the common order: topic and partition exist
// (UNKNOWN_TOPIC_OR_PARTITION), this node leads the partition
// (NOT_LEADER_FOR_PARTITION), and (v2+) the client's current leader epoch
// is the partition's (FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH
// when newer). v1+ answers carry the leader epoch found; v3+ requests
// carry the replica id (-1 consumer, -2 absent, >= 0 a follower), which
// changes nothing while every answer comes from the leader. v2 must stay
// served: it is librdkafka's highest.
//
// One Fjord extension: a Fjord node (its internal client id) asking with
// replica id -2 (Kafka's "debugging" replica) gets this node's own
// replica's latest leader epoch and log end offset, whether or not it
// leads, for every partition it hosts, whatever epoch is asked for. It is
// how the active controller finds the most caught-up live replica for an
// unclean leader election, when no replica leads. Any other client, or
// replica id, gets Kafka's leader-only answer.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// replicaLogEndQuery is the replica id of the controller's question (see
// the file comment): Kafka's debugging replica id.
const replicaLogEndQuery = -2

func handleOffsetForLeaderEpoch(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.SetVersion(req.version)

	img := s.image()
	// CLUSTER_ACTION (a node's) allows every topic; anyone else needs
	// DESCRIBE on each.
	describable := s.authzByName(req, acl.OperationDescribe, acl.ResourceTopic).orCluster(acl.OperationClusterAction)
	_, fromPeer := s.internalPeer(req)
	ownLog := fromPeer && describable.all && req.version >= 3 && r.ReplicaID == replicaLogEndQuery
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		allowed := describable.allowed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			currentEpoch := int32(-1)
			if req.version >= 2 {
				currentEpoch = p.CurrentLeaderEpoch
			}
			err := func() error {
				if !allowed {
					return kerr.TopicAuthorizationFailed
				}
				if ownLog {
					epoch, end, err := s.replicas.LogEnd(t.Topic, p.Partition)
					rp.LeaderEpoch, rp.EndOffset = epoch, end
					return err
				}
				if _, err := s.leaderPartition(img, t.Topic, p.Partition, currentEpoch); err != nil {
					return err
				}
				epoch, end, err := s.replicas.EndOffsetForEpoch(t.Topic, p.Partition, currentEpoch, p.LeaderEpoch)
				if err != nil {
					return err
				}
				rp.LeaderEpoch, rp.EndOffset = epoch, end
				return nil
			}()
			if err != nil {
				rp.ErrorCode, _ = s.errorAndMessage(err, "OffsetForLeaderEpoch",
					"partition", fmt.Sprintf("%s-%d", t.Topic, p.Partition))
				rp.LeaderEpoch, rp.EndOffset = -1, -1
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}
