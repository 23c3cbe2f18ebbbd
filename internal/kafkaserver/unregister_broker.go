package kafkaserver

// UnregisterBroker: v0
//
// Removes a broker from the cluster, the end of a decommission (`fjord
// cluster drain`): the broker must hold no replica and must not be a
// voter of the controller quorum (INVALID_REQUEST saying which, changing
// nothing); an unknown id is BROKER_ID_NOT_REGISTERED. A broker-only
// node is also taken out of the metadata log's configuration. As with
// the voter changes, only the active controller answers: another node
// says NOT_CONTROLLER and the client asks the controller Metadata names.
// (Kafka forwards it from any broker; Fjord's CLI goes to the
// controller, as for AddRaftVoter.)
//
// Authorization: ALTER on the cluster, first. Denied:
// CLUSTER_AUTHORIZATION_FAILED, and the controller is not asked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

func handleUnregisterBroker(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.UnregisterBrokerRequest)
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	resp.SetVersion(req.version)
	err := s.clusterDenied(req, acl.OperationAlter)
	if err == nil {
		err = s.controller.UnregisterBroker(ctx, r.BrokerID)
	}
	resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "UnregisterBroker", "broker", r.BrokerID)
	return resp, nil, nil
}
