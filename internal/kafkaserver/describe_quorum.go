package kafkaserver

// DescribeQuorum: v0-2
//
// Describes the controller quorum (KIP-595, KIP-853's v2): the metadata
// log's one partition, __cluster_metadata-0, with its leader (the active
// controller), epoch, high watermark and voters, as this node's Raft
// knows them, and its observers (broker-only nodes, which follow the
// log without a vote). Kafka serves it on a controller's listener; every
// Fjord node has one listener, so any node answers it. The Raft library
// Fjord uses reports no follower's log position: a replica's
// LogEndOffset is the answering node's own log end for itself, and on
// the active controller the offset each other node's last heartbeat
// said it had applied, with LastFetchTimestamp when that heartbeat came
// (-1 for both when not known: on other nodes, or before a heartbeat).
// LastCaughtUpTimestamp is -1. A topic or partition other than
// __cluster_metadata-0 is UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: DESCRIBE on the cluster, first. Denied, the answer is
// the top-level CLUSTER_AUTHORIZATION_FAILED and no topics (Kafka's
// error response), and the quorum is not read.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

// quorumTopic is the metadata log's name in DescribeQuorum (Kafka's).
const quorumTopic = "__cluster_metadata"

func handleDescribeQuorum(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeQuorumRequest)
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.SetVersion(req.version)
	if err := s.clusterDenied(req, acl.OperationDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "DescribeQuorum") // the message is v2+
		return resp, nil, nil
	}
	q := s.controller.QuorumState()
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != quorumTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := "the controller quorum's log is " + quorumTopic + "-0"
				rp.ErrorMessage = &msg
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = q.Leader, int32(q.Epoch), q.HighWatermark
			for _, v := range q.Voters {
				rp.CurrentVoters = append(rp.CurrentVoters, replicaState(v))
			}
			for _, v := range q.Observers {
				rp.Observers = append(rp.Observers, replicaState(v))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

func replicaState(v controlplane.VoterState) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	vs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	vs.ReplicaID, vs.LogEndOffset = v.NodeID, v.LogEndOffset
	vs.LastFetchTimestamp, vs.LastCaughtUpTimestamp = -1, -1
	if !v.LastHeard.IsZero() {
		vs.LastFetchTimestamp = v.LastHeard.UnixMilli()
	}
	return vs
}
