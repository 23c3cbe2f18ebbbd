package kafkaserver

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
)

func TestDescribeCluster(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	img.Brokers[3] = metadata.Broker{NodeID: 3, Host: "b3", Port: 9095, Rack: "r1"}
	img.Brokers[2] = metadata.Broker{NodeID: 2, Host: "b2", Port: 9094}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()

	// A controller id that is not a registered broker is not given out
	// (clients would send admin requests nowhere): this node is.
	f.ctrl.controllerID = 9
	resp := adminCall[*kmsg.DescribeClusterResponse](t, f, kmsg.NewPtrDescribeClusterRequest(), 0)
	if resp.ControllerID != adminTestNodeID {
		t.Fatalf("unregistered controller 9 answered as %d, want this node", resp.ControllerID)
	}

	f.ctrl.controllerID = 2
	for _, version := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp := adminCall[*kmsg.DescribeClusterResponse](t, f, req, version)
		adminWantCode(t, "describe", resp.ErrorCode, nil)
		if resp.ClusterID != "fjord-test-cluster" || resp.ControllerID != 2 {
			t.Fatalf("v%d: cluster %q controller %d", version, resp.ClusterID, resp.ControllerID)
		}
		if resp.ClusterAuthorizedOperations != math.MinInt32 {
			t.Fatalf("v%d: authorized operations %d, want Kafka's 'not provided'", version, resp.ClusterAuthorizedOperations)
		}
		if len(resp.Brokers) != 3 {
			t.Fatalf("v%d: %d brokers", version, len(resp.Brokers))
		}
		for i, want := range []struct {
			id   int32
			host string
			port int32
			rack *string
		}{{1, "127.0.0.1", 9092, nil}, {2, "b2", 9094, nil}, {3, "b3", 9095, strp("r1")}} {
			b := resp.Brokers[i]
			if b.NodeID != want.id || b.Host != want.host || b.Port != want.port ||
				(b.Rack == nil) != (want.rack == nil) || (b.Rack != nil && *b.Rack != *want.rack) {
				t.Fatalf("v%d broker %d: %+v, want %+v", version, i, b, want)
			}
		}
	}
}

func TestDescribeClusterEndpointTypes(t *testing.T) {
	f := newAdminFixture(t)
	for _, tc := range []struct {
		endpoint int8
		want     *kerr.Error
	}{{1, nil}, {2, kerr.MismatchedEndpointType}, {7, kerr.UnsupportedEndpointType}} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = tc.endpoint
		resp := adminCall[*kmsg.DescribeClusterResponse](t, f, req, 1)
		adminWantCode(t, "endpoint type", resp.ErrorCode, tc.want)
		if resp.EndpointType != tc.endpoint {
			t.Fatalf("endpoint type echoed %d, want %d", resp.EndpointType, tc.endpoint)
		}
		if tc.want != nil && (resp.ErrorMessage == nil || len(resp.Brokers) != 0) {
			t.Fatalf("endpoint %d: message %s, %d brokers", tc.endpoint, adminMsg(resp.ErrorMessage), len(resp.Brokers))
		}
	}
	// v0 has no endpoint type: whatever the struct holds, brokers it is.
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp := adminCall[*kmsg.DescribeClusterResponse](t, f, req, 0)
	adminWantCode(t, "v0", resp.ErrorCode, nil)
}
