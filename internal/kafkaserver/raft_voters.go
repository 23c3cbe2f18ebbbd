package kafkaserver

// AddRaftVoter: v0-1, RemoveRaftVoter: v0 (KIP-853)
//
// Change the controller quorum's voters. AddRaftVoter promotes node
// VoterID, which must already follow the metadata log as an observer (a
// broker-only node), to a voter; its first listener, when given, must be
// the controller address it follows from. RemoveRaftVoter takes VoterID
// out. Only the active controller changes the quorum, so these are not
// forwarded: another node answers NOT_CONTROLLER and the client asks the
// controller Metadata names (as Kafka's clients send them to a
// controller). A ClusterID that is not this cluster's is
// INCONSISTENT_CLUSTER_ID; a voter already, DUPLICATE_VOTER; not a
// voter, VOTER_NOT_FOUND; the last voter, or a node that is not an
// observer, INVALID_REQUEST. VoterDirectoryID is not checked: Fjord has
// one metadata directory per node, named by the node id. TimeoutMillis
// (AddRaftVoter) bounds the wait for the commit.
//
// Authorization: ALTER on the cluster, before anything else (the cluster
// id included). Denied: CLUSTER_AUTHORIZATION_FAILED, and the quorum is
// not touched.

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

func handleAddRaftVoter(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AddRaftVoterRequest)
	resp := kmsg.NewPtrAddRaftVoterResponse()
	resp.SetVersion(req.version)
	err := s.clusterDenied(req, acl.OperationAlter)
	if err == nil {
		err = s.checkQuorumCluster(r.ClusterID)
	}
	if err == nil {
		addr := ""
		if len(r.Listeners) > 0 {
			addr = net.JoinHostPort(r.Listeners[0].Host, strconv.Itoa(int(r.Listeners[0].Port)))
		}
		cctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
		err = s.controller.AddVoter(cctx, r.VoterID, addr)
		cancel()
	}
	resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "AddRaftVoter", "voter", r.VoterID)
	return resp, nil, nil
}

func handleRemoveRaftVoter(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.RemoveRaftVoterRequest)
	resp := kmsg.NewPtrRemoveRaftVoterResponse()
	resp.SetVersion(req.version)
	err := s.clusterDenied(req, acl.OperationAlter)
	if err == nil {
		err = s.checkQuorumCluster(r.ClusterID)
	}
	if err == nil {
		err = s.controller.RemoveVoter(ctx, r.VoterID)
	}
	resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "RemoveRaftVoter", "voter", r.VoterID)
	return resp, nil, nil
}

// checkQuorumCluster refuses a quorum change for another cluster.
func (s *Server) checkQuorumCluster(clusterID *string) error {
	if clusterID != nil && *clusterID != s.image().ClusterID {
		return fmt.Errorf("%w: the request names cluster %q; this is cluster %q", kerr.InconsistentClusterID, *clusterID, s.image().ClusterID)
	}
	return nil
}
