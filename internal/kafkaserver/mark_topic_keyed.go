package kafkaserver

// FjordMarkTopicKeyed (Fjord's key 10001): v0
//
// Fjord's own request (internal/fjordmsg): the node leading a partition
// that appended its first record with a key asks the active controller
// to mark the topic as having keyed records (metadata.TopicKeyedRecord),
// which CreatePartitions reads to refuse `fjord topic alter
// --partitions` (create_partitions.go). Served only to Fjord nodes' own
// clients (controlplane.InternalClient, or this node's), as
// AllocateProducerIds is, with the same CLUSTER_AUTHORIZATION_FAILED
// otherwise: an outside client marking topics would make every Fjord
// CLI's grow of them refuse. Served only as the active controller
// (controlChange, never forwarded again): NOT_CONTROLLER otherwise, and
// the sender finds the controller again. Then: the zero id is
// INVALID_REQUEST, an id no live topic has UNKNOWN_TOPIC_ID; a topic
// marked already is answered at once, nothing committed. On success the
// answer carries this node's image offset, which includes the mark, for
// the sender to wait for.

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

func handleMarkTopicKeyed(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*fjordmsg.MarkTopicKeyedRequest)
	resp := r.ResponseKind().(*fjordmsg.MarkTopicKeyedResponse)
	id := metadata.UUID(r.TopicID)
	err := func() error {
		if _, ok := s.internalPeer(req); !ok {
			return fmt.Errorf("%w: MarkTopicKeyed is for Fjord nodes leading a topic's partitions", kerr.ClusterAuthorizationFailed)
		}
		if !s.allowedCluster(req, acl.OperationClusterAction) {
			return errNodeNotAuthorized("MarkTopicKeyed", req)
		}
		return s.controller.MarkTopicKeyed(controlplane.LocalOnly(ctx), id)
	}()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "FjordMarkTopicKeyed", "topic_id", id.String())
		return resp, nil, nil
	}
	resp.MetadataOffset = int64(s.image().Offset)
	return resp, nil, nil
}
