package kafkaserver

// FjordReportOfflineReplicas (Fjord's key 10002): v0
//
// Fjord's own request (internal/fjordmsg): a node whose partition logs
// failed (an fsync or write returned EIO or ENOSPC) tells the active
// controller its replicas of them are offline, and the controller moves
// it out of their ISRs and leaderships (controller/offline.go; DESIGN.md
// section 25, Kafka's log-dir failure handling). Served only to a Fjord
// node's own client reporting for itself (controlplane.InternalClient,
// or this node's, naming its own broker id): anyone else is
// CLUSTER_AUTHORIZATION_FAILED, as AllocateProducerIds answers, since a
// replica marked offline is out of its ISR until its broker restarts.
// Then, before the controller is asked: more than
// controlplane.MaxReportedOfflineReplicas partitions is INVALID_REQUEST.
// Served only as the active controller (controlChange, never forwarded
// again): NOT_CONTROLLER otherwise. The controller refuses a zero topic
// id or a negative partition (INVALID_REQUEST) and a broker epoch that
// is not the broker's registration's (STALE_BROKER_EPOCH), and passes
// over partitions of unknown topics and partitions the broker holds no
// replica of. On success the answer carries this node's image offset,
// which includes the marks, for the sender to wait for.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleReportOfflineReplicas(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*fjordmsg.ReportOfflineReplicasRequest)
	resp := r.ResponseKind().(*fjordmsg.ReportOfflineReplicasResponse)
	n := 0
	for _, t := range r.Topics {
		n += len(t.Partitions)
	}
	err := func() error {
		if node, ok := s.internalPeer(req); !ok || node != r.BrokerID {
			return fmt.Errorf("%w: ReportOfflineReplicas is for Fjord nodes reporting their own replicas (broker %d)",
				kerr.ClusterAuthorizationFailed, r.BrokerID)
		}
		if !s.allowedCluster(req, acl.OperationClusterAction) {
			return errNodeNotAuthorized("ReportOfflineReplicas", req)
		}
		if n > controlplane.MaxReportedOfflineReplicas {
			return fmt.Errorf("%w: %d offline replicas in one report (at most %d)",
				kerr.InvalidRequest, n, controlplane.MaxReportedOfflineReplicas)
		}
		partitions := make([]metadata.TopicIDPartition, 0, n)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				partitions = append(partitions, metadata.TopicIDPartition{TopicID: t.TopicID, Partition: p})
			}
		}
		return s.controller.ReportOfflineReplicas(controlplane.LocalOnly(ctx), r.BrokerID, r.BrokerEpoch, partitions)
	}()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "FjordReportOfflineReplicas", "broker", r.BrokerID, "replicas", n)
		return resp, nil, nil
	}
	resp.MetadataOffset = int64(s.image().Offset)
	return resp, nil, nil
}
