package kafkaserver

// DescribeCluster: v0-2
//
// The cluster id, the controller id and the registered brokers (by node
// id), from one metadata image: what Metadata returns, for admin clients
// (KIP-700). The controller id is Metadata's (advertisedControllerID: the
// active controller when it is a registered broker, else this node), so
// an admin client sees one answer whichever API it asks. v1 (KIP-919)
// asks for an endpoint type: brokers (1) are served; controllers (2) are
// not reachable over the Kafka protocol in Fjord (they speak Raft), so
// that is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it; any
// other type is UNSUPPORTED_ENDPOINT_TYPE. The endpoint type is checked
// first, so a refused type lists no brokers whatever else the request
// asks.
//
// Which brokers (KIP-1073, v2): as Kafka's broker does (KafkaApis
// handleDescribeCluster over the KRaft metadata cache's getBrokerNodes,
// apache/kafka PR #17524), every registered broker is considered and a
// fenced one is left out unless the request has IncludeFencedBrokers:
//
//	v0-1 (no such field)               unfenced brokers only
//	v2, IncludeFencedBrokers=false     unfenced brokers only, IsFenced false
//	v2, IncludeFencedBrokers=true      every registered broker, IsFenced
//	                                   from the image (Broker.Fenced)
//
// The v0-1 answer is Metadata's broker list (getAliveBrokerNodes): a
// fenced broker leads nothing and clients must not be sent to it. A v0-1
// request struct cannot carry IncludeFencedBrokers on the wire; the
// handler reads it only at v2 so an in-process caller's stray field
// cannot change a v0-1 answer either. (Kafka's client refuses to build a
// v0-1 request with the field set; a broker has nothing to refuse, the
// field is simply absent.)
//
// Authorization (AuthHelper.computeDescribeClusterResponse, a broker's):
// nothing is refused. ClusterAuthorizedOperations is Kafka's "not
// provided" (math.MinInt32) unless the request asks for it
// (IncludeClusterAuthorizedOperations); then it is the KIP-430 bit field
// of what the principal may do on the cluster if it may DESCRIBE it, else
// 0 (not an error). With authorization off that is every operation the
// cluster supports, as Kafka without an authorizer answers. A refused
// endpoint type answers before, leaving the field "not provided".

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

const (
	endpointTypeBrokers     int8 = 1
	endpointTypeControllers int8 = 2
)

// ShuttingDownTag is a tagged field Fjord adds to a DescribeCluster
// broker in controlled shutdown (one byte, 1): Kafka's answer has no
// field for the state, and a tag a client does not know is skipped, so
// every other client reads the answer as before. fjord cluster describe
// reads it. The number is far above Kafka's own tags, which start at 0.
const ShuttingDownTag = 0xF10D

func handleDescribeCluster(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.SetVersion(req.version)
	resp.ClusterAuthorizedOperations = math.MinInt32

	endpointType := endpointTypeBrokers
	if req.version >= 1 {
		endpointType = r.EndpointType
	}
	resp.EndpointType = endpointType
	var err error
	switch endpointType {
	case endpointTypeBrokers:
	case endpointTypeControllers:
		err = fmt.Errorf("%w: this is a broker endpoint; Fjord's controllers are not reachable over the Kafka protocol", kerr.MismatchedEndpointType)
	default:
		err = fmt.Errorf("%w: endpoint type %d (want 1 for brokers)", kerr.UnsupportedEndpointType, endpointType)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "DescribeCluster")
		return resp, nil, nil
	}
	if r.IncludeClusterAuthorizedOperations {
		// Quiet: a denial withholds a field, it refuses nothing.
		resp.ClusterAuthorizedOperations = 0
		if s.allowedQuiet(req, acl.OperationDescribe, acl.ResourceCluster, acl.ClusterName) {
			resp.ClusterAuthorizedOperations = s.authorizedOperations(req, acl.ResourceCluster, acl.ClusterName)
		}
	}
	includeFenced := req.version >= 2 && r.IncludeFencedBrokers

	img := s.image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = s.advertisedControllerID(img)
	for _, b := range img.Brokers {
		if b.Fenced && !includeFenced {
			continue
		}
		host, port, ok := req.endpoint(b)
		if !ok {
			continue // as Metadata: only brokers this client can reach
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.NodeID, host, port
		if b.Rack != "" {
			rb.Rack = strp(b.Rack)
		}
		rb.IsFenced = b.Fenced // v2+; not encoded below that
		if b.ShuttingDown {
			rb.UnknownTags.Set(ShuttingDownTag, []byte{1})
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return resp, nil, nil
}
