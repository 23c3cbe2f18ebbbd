package kafkaserver

// DescribeCluster: v0-1
//
// The cluster id, the controller id and every registered broker (by node
// id), from one metadata image: what Metadata returns, for admin clients
// (KIP-700). The controller id is Metadata's (advertisedControllerID: the
// active controller when it is a registered broker, else this node), so
// an admin client sees one answer whichever API it asks. Fjord has no authorizer, so
// ClusterAuthorizedOperations is always Kafka's "not provided"
// (math.MinInt32) even when asked for. v1 (KIP-919) asks for an endpoint
// type: brokers (1) are served; controllers (2) are not reachable over
// the Kafka protocol in Fjord (they speak Raft), so that is
// MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it; any other type
// is UNSUPPORTED_ENDPOINT_TYPE.

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	endpointTypeBrokers     int8 = 1
	endpointTypeControllers int8 = 2
)

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

	img := s.image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = s.advertisedControllerID(img)
	for _, b := range img.Brokers {
		if b.Fenced {
			continue // v0-1 list live brokers only, as Kafka's
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.NodeID, b.Host, b.Port
		if b.Rack != "" {
			rb.Rack = strp(b.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return resp, nil, nil
}
