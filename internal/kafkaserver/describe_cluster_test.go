package kafkaserver

import (
	"math"
	"net"
	"slices"
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
		// Asked, with authorization off: every operation the cluster
		// supports, as Kafka without an authorizer (authz_admin_test.go
		// pins the rest).
		if resp.ClusterAuthorizedOperations == math.MinInt32 || resp.ClusterAuthorizedOperations == 0 {
			t.Fatalf("v%d: authorized operations %d, want the cluster's operations", version, resp.ClusterAuthorizedOperations)
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

// describeClusterFixture is an admin fixture whose image has this node
// (1), broker 2 unfenced and broker 3 fenced (its session lapsed).
func describeClusterFixture(t *testing.T) *adminFixture {
	t.Helper()
	f := newAdminFixture(t)
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	img.Brokers[2] = metadata.Broker{NodeID: 2, Host: "b2", Port: 9094}
	img.Brokers[3] = metadata.Broker{NodeID: 3, Host: "b3", Port: 9095, Rack: "r1", Fenced: true}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	return f
}

// describedBroker is what a test checks of one listed broker.
type describedBroker struct {
	id     int32
	fenced bool
}

func describedBrokers(resp *kmsg.DescribeClusterResponse) []describedBroker {
	var out []describedBroker
	for _, b := range resp.Brokers {
		out = append(out, describedBroker{b.NodeID, b.IsFenced})
	}
	return out
}

// Reference: KIP-1073. Fenced brokers are listed only at v2 and only when
// asked for, with IsFenced set; every other combination lists the
// unfenced brokers, as Metadata does (Kafka's KafkaApis over
// getBrokerNodes, apache/kafka PR #17524).
func TestDescribeClusterFencedBrokers(t *testing.T) {
	unfenced := []describedBroker{{1, false}, {2, false}}
	all := []describedBroker{{1, false}, {2, false}, {3, true}}
	for _, tc := range []struct {
		name          string
		version       int16
		includeFenced bool
		want          []describedBroker
	}{
		{"v0", 0, false, unfenced},
		{"v1", 1, false, unfenced},
		// The field does not exist below v2: a struct that carries it
		// (an in-process caller; the wire cannot) changes nothing.
		{"v0 with the v2 field set", 0, true, unfenced},
		{"v1 with the v2 field set", 1, true, unfenced},
		{"v2 without IncludeFencedBrokers", 2, false, unfenced},
		{"v2 with IncludeFencedBrokers", 2, true, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := describeClusterFixture(t)
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeFencedBrokers = tc.includeFenced
			resp := adminCall[*kmsg.DescribeClusterResponse](t, f, req, tc.version)
			adminWantCode(t, "describe", resp.ErrorCode, nil)
			if got := describedBrokers(resp); !slices.Equal(got, tc.want) {
				t.Fatalf("brokers %+v, want %+v", got, tc.want)
			}
			if tc.version >= 2 && tc.includeFenced {
				b := resp.Brokers[2]
				if b.Host != "b3" || b.Port != 9095 || b.Rack == nil || *b.Rack != "r1" {
					t.Fatalf("fenced broker listed as %+v, want its registration", b)
				}
			}
		})
	}

	// A refused endpoint type lists nobody, fenced brokers asked for or
	// not (the endpoint type is checked first, as in Kafka's
	// computeDescribeClusterResponse).
	f := describeClusterFixture(t)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType, req.IncludeFencedBrokers = endpointTypeControllers, true
	resp := adminCall[*kmsg.DescribeClusterResponse](t, f, req, 2)
	adminWantCode(t, "controllers endpoint", resp.ErrorCode, kerr.MismatchedEndpointType)
	if len(resp.Brokers) != 0 {
		t.Fatalf("refused request lists %d brokers", len(resp.Brokers))
	}
}

// DescribeCluster v2 over a connection: IncludeFencedBrokers and IsFenced
// survive kmsg's encoding both ways, and a v2 body cut short (before
// IncludeFencedBrokers, or before its tagged fields) closes the
// connection as any undecodable body does, while the server goes on
// answering others.
func TestDescribeClusterV2OnTheWire(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.mu.Lock()
	img := h.ctrl.cloneLocked()
	img.Brokers[3] = metadata.Broker{NodeID: 3, Host: "b3", Port: 9095, Fenced: true}
	h.ctrl.img = img
	h.ctrl.mu.Unlock()

	c := h.dial()
	for _, include := range []bool{false, true} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.IncludeFencedBrokers = 2, include
		resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
		want := []describedBroker{{h.ctrl.nodeID, false}}
		if include {
			want = append(want, describedBroker{3, true})
		}
		if resp.ErrorCode != 0 || !slices.Equal(describedBrokers(resp), want) {
			t.Fatalf("IncludeFencedBrokers=%v: error %d, brokers %+v, want %+v", include, resp.ErrorCode, describedBrokers(resp), want)
		}
	}

	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.IncludeFencedBrokers = 2, true
	body := req.AppendTo(nil) // operations, endpoint type, include fenced, tags
	for _, cut := range []int{0, 2, 3} {
		c := h.dial()
		c.write(frameOf(append(header(60, 2, 1, true), body[:cut]...)))
		if tcp, ok := c.nc.(*net.TCPConn); ok {
			tcp.CloseWrite()
		}
		c.expectClosed()
	}
	h.dial().roundTrip(apiVersionsReq(3))
}

// A broker in controlled shutdown carries Fjord's tagged field, through
// the encoding (a tag a client does not know is skipped); the others
// carry none.
func TestDescribeClusterShuttingDownTag(t *testing.T) {
	f := describeClusterFixture(t)
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	b := img.Brokers[2]
	b.ShuttingDown = true
	img.Brokers[2] = b
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	resp := adminCall[*kmsg.DescribeClusterResponse](t, f, kmsg.NewPtrDescribeClusterRequest(), 2)
	// Through the wire format and back, as a client reads it.
	decoded := kmsg.NewPtrDescribeClusterResponse()
	decoded.SetVersion(2)
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	for _, b := range decoded.Brokers {
		var tags []uint32
		var value []byte
		b.UnknownTags.Each(func(tag uint32, v []byte) { tags, value = append(tags, tag), v })
		want := b.NodeID == 2
		if got := len(tags) == 1 && tags[0] == ShuttingDownTag && len(value) == 1 && value[0] == 1; got != want || (!want && len(tags) != 0) {
			t.Errorf("broker %d: tags %v value %v; want the shutting-down tag %v", b.NodeID, tags, value, want)
		}
	}
}
