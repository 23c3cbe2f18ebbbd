package kafkaserver

// AlterPartition: v2-3
//
// A partition's leader, on any Fjord node, asks the active controller
// for a new ISR (KIP-497); the controller commits it with the partition
// epoch moved on and answers the committed state. Served only as the
// active controller (controlChange: never forwarded again), and only to
// another Fjord node's internal client (controlplane.InternalClient)
// sending its own node id as BrokerID: CLUSTER_AUTHORIZATION_FAILED
// otherwise, as Kafka answers a client without CLUSTER_ACTION, so an
// outside client cannot shrink an ISR and with it what acks=all waits
// for.
//
// Versions: v2 carries topic ids (KIP-841) and v3 the new ISR's broker
// epochs (NewEpochISR, KIP-903), which is what Kafka 3.7+ brokers send
// (metadata version 3.5 and later). v0-1 name topics and answer
// OPERATION_NOT_ATTEMPTED where later versions say INELIGIBLE_REPLICA;
// only Fjord nodes send AlterPartition, and they send v3, so the older
// versions are not served.
//
// Checks, in Kafka's order: the sender (CLUSTER_AUTHORIZATION_FAILED)
// and its broker epoch (STALE_BROKER_EPOCH), both for the whole
// request, in the top-level error code; then per partition what the
// controller checks (controller.AlterPartition: UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER for epochs ahead of the
// controller's, FENCED_LEADER_EPOCH, INVALID_REQUEST for a sender that
// does not lead, INVALID_UPDATE_VERSION, INVALID_REQUEST for a bad ISR,
// INELIGIBLE_REPLICA). A LeaderRecoveryState other than RECOVERED is
// INVALID_REQUEST before the controller's checks: Fjord elects no
// unclean leaders, so no partition is ever recovering. Kafka answers
// NOT_CONTROLLER from a node that is not the active controller in the
// top-level code; Fjord answers it per partition, and the sender
// retries either way.
//
// Each partition is its own change, committed (or not) in the order
// given; Fjord's leaders send one partition per request.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleAlterPartition(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AlterPartitionRequest)
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.SetVersion(req.version)

	fail := func(err error) (kmsg.Response, func(), error) {
		resp.ErrorCode = s.errorCodeLogged(err, "AlterPartition", "node", r.BrokerID)
		resp.Topics = nil
		s.log.Info("kafkaserver: AlterPartition refused", "node", r.BrokerID, "err", err)
		return resp, nil, nil
	}
	node, ok := s.internalPeer(req)
	if !ok || node != r.BrokerID {
		return fail(fmt.Errorf("%w: AlterPartition is for Fjord nodes leading partitions, each as itself (broker %d)",
			kerr.ClusterAuthorizationFailed, r.BrokerID))
	}
	if !s.allowedCluster(req, acl.OperationClusterAction) {
		return fail(errNodeNotAuthorized("AlterPartition", req))
	}
	// Checked here too, before any partition, as Kafka does: the
	// controller checks again, but a request from a replaced process
	// must hear STALE_BROKER_EPOCH whatever else is wrong with it. This
	// node's image has the sender's registration: it learned its epoch
	// only after the controller (this node) published it.
	if b, registered := s.image().Brokers[r.BrokerID]; !registered || b.Epoch != r.BrokerEpoch {
		return fail(fmt.Errorf("%w: broker %d epoch %d is not its current one", kerr.StaleBrokerEpoch, r.BrokerID, r.BrokerEpoch))
	}

	ctx = controlplane.LocalOnly(ctx)
	for _, rt := range r.Topics {
		out := kmsg.NewAlterPartitionResponseTopic()
		out.TopidID = rt.TopicID
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			op := kmsg.NewAlterPartitionResponseTopicPartition()
			op.Partition = rp.Partition
			st, err := s.alterPartition(ctx, req.version, r, rt.TopicID, rp)
			if errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
				// Registered again since the check above.
				return fail(err)
			}
			if err != nil {
				op.ErrorCode = s.errorCodeLogged(err, "AlterPartition", "node", r.BrokerID, "partition", rp.Partition)
				s.log.Info("kafkaserver: AlterPartition refused", "node", r.BrokerID, "topic_id", metadata.UUID(rt.TopicID).String(),
					"partition", rp.Partition, "err", err)
			} else {
				op.LeaderID, op.LeaderEpoch, op.PartitionEpoch, op.ISR = st.Leader, st.LeaderEpoch, st.PartitionEpoch, st.ISR
			}
			out.Partitions = append(out.Partitions, op)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp, nil, nil
}

// alterPartition turns one partition of the request into the
// controller's AlterPartition and calls it.
func (s *Server) alterPartition(ctx context.Context, version int16, r *kmsg.AlterPartitionRequest, topicID [16]byte, rp *kmsg.AlterPartitionRequestTopicPartition) (controlplane.PartitionState, error) {
	if rp.LeaderRecoveryState != 0 {
		return controlplane.PartitionState{}, fmt.Errorf("%w: leader recovery state %d: no partition is recovering from an unclean election",
			controlplane.ErrInvalidRequest, rp.LeaderRecoveryState)
	}
	ap := controlplane.AlterPartition{TopicID: topicID, Partition: rp.Partition, LeaderID: r.BrokerID, BrokerEpoch: r.BrokerEpoch,
		LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch}
	if version >= 3 {
		ap.NewISR = make([]int32, len(rp.NewEpochISR))
		ap.NewISRBrokerEpochs = make([]int64, len(rp.NewEpochISR))
		for i, m := range rp.NewEpochISR {
			ap.NewISR[i], ap.NewISRBrokerEpochs[i] = m.BrokerID, m.BrokerEpoch
		}
	} else {
		ap.NewISR = rp.NewISR
	}
	return s.controller.AlterPartition(ctx, ap)
}
