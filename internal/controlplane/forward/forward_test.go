package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The forwarding of a change to a remote controller, against a fake
// controller listener that speaks the Kafka protocol: what goes on the
// wire, how the answer maps back, the retry on NOT_CONTROLLER, and the
// wait for this node's image at the offset the answer is tagged with.
// (The local path is the controller's and the node's tests'.)

const (
	thisNode       = 1
	controllerNode = 2
	taggedOffset   = 42
)

// fakeLocal is this node's controller: it is not the active one.
type fakeLocal struct {
	Local // nil: any other method panics
	calls int
}

func (l *fakeLocal) ControllerID() int32 { return controllerNode }

func (l *fakeLocal) AlterBrokerConfigs(context.Context, int32, []controlplane.ConfigOp, bool) error {
	l.calls++
	return fmt.Errorf("%w: the fake local controller is not active", controlplane.ErrNotController)
}

func (l *fakeLocal) AlterPartitionReassignments(context.Context, []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	l.calls++
	return nil, fmt.Errorf("%w: the fake local controller is not active", controlplane.ErrNotController)
}

// fakeImages is a fixed image naming the fake controller's listener,
// and records the offsets waited for.
type fakeImages struct {
	img *metadata.Image

	mu      sync.Mutex
	awaited []uint64
}

func (f *fakeImages) Image() *metadata.Image { return f.img }

func (f *fakeImages) Subscribe(fn func(*metadata.Image)) func() { fn(f.img); return func() {} }

func (f *fakeImages) AwaitImage(_ context.Context, offset uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.awaited = append(f.awaited, offset)
	return nil
}

func (f *fakeImages) waitedFor() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.awaited)
}

// fakeController answers ApiVersions, AlterPartitionReassignments and
// ElectLeaders as a controller's listener does for a peer, tagging each
// change's answer with taggedOffset; answer decides the body.
type fakeController struct {
	t      *testing.T
	ln     net.Listener
	answer func(kmsg.Request) kmsg.Response

	mu    sync.Mutex
	asked []kmsg.Request
}

func newFakeController(t *testing.T, answer func(kmsg.Request) kmsg.Response) *fakeController {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeController{t: t, ln: ln, answer: answer}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				if err := f.serve(nc); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					t.Errorf("fake controller: %v", err)
				}
			}()
		}
	}()
	return f
}

func (f *fakeController) requests() []kmsg.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

func (f *fakeController) serve(nc net.Conn) error {
	return testutil.ServeKafka(nc, func(req kmsg.Request) (kmsg.Response, error) {
		if v, ok := req.(*kmsg.ApiVersionsRequest); ok {
			a := v.ResponseKind().(*kmsg.ApiVersionsResponse)
			for _, k := range []struct{ key, max int16 }{{18, 3}, {30, 3}, {31, 3}, {43, 2}, {44, 1}, {45, 0}, {49, 1}, {51, 0}, {fjordmsg.MarkTopicKeyedKey, 0}, {fjordmsg.ReportOfflineReplicasKey, 0}} {
				a.ApiKeys = append(a.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MaxVersion: k.max})
			}
			return a, nil
		}
		f.mu.Lock()
		f.asked = append(f.asked, req)
		f.mu.Unlock()
		resp := f.answer(req)
		TagMetadataOffset(resp, taggedOffset)
		return resp, nil
	})
}

// newForwarder is node 1's forwarding client, the active controller
// being node 2 at f's listener.
func newForwarder(t *testing.T, f *fakeController) (*Client, *fakeImages, *fakeLocal) {
	t.Helper()
	host, port, _ := net.SplitHostPort(f.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	img := &metadata.Image{Offset: 7, Brokers: map[int32]metadata.Broker{
		controllerNode: {NodeID: controllerNode, Host: host, Port: int32(p)},
	}}
	images := &fakeImages{img: img}
	pool := peers.New(images, "fjord-forward-test")
	t.Cleanup(pool.Close)
	local := &fakeLocal{}
	return New(Config{NodeID: thisNode, Local: local, Images: images, Peers: pool, MaxWait: 5 * time.Second}), images, local
}

func tp(topic string, partition int32) controlplane.TopicPartition {
	return controlplane.TopicPartition{Topic: topic, Partition: partition}
}

// A reassignment request goes to the controller as one request, each
// topic's partitions in one entry, a cancel as a null list and an empty
// target as an empty one (the controller refuses it, not the wire); a
// partition named twice is answered INVALID_REQUEST here and not sent.
// The answers map back in request order, and the call returns once this
// node's image has the offset the answer carries.
func TestAlterPartitionReassignmentsForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		for _, rt := range r.Topics {
			out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			out.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				p.Partition = rp.Partition
				switch {
				case rp.Replicas == nil:
					p.ErrorCode, p.ErrorMessage = kerr.NoReassignmentInProgress.Code, kmsg.StringPtr(fmt.Sprintf("%s-%d", rt.Topic, rp.Partition))
				case len(rp.Replicas) == 0:
					p.ErrorCode, p.ErrorMessage = kerr.InvalidReplicaAssignment.Code, kmsg.StringPtr("the target replica list is empty")
				}
				out.Partitions = append(out.Partitions, p)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	})
	c, images, local := newForwarder(t, f)
	reqs := []controlplane.Reassignment{
		{TopicPartition: tp("a", 0), Replicas: []int32{2, 3}},
		{TopicPartition: tp("b", 0), Replicas: []int32{1}},
		{TopicPartition: tp("a", 1)},
		{TopicPartition: tp("a", 2), Replicas: []int32{}},
		{TopicPartition: tp("a", 0), Replicas: []int32{3}},
	}
	results, err := c.AlterPartitionReassignments(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, kerr.NoReassignmentInProgress, kerr.InvalidReplicaAssignment, kerr.InvalidRequest}
	if len(results) != len(reqs) {
		t.Fatalf("%d results for %d partitions", len(results), len(reqs))
	}
	for i, r := range results {
		if r.TopicPartition != reqs[i].TopicPartition || !errors.Is(r.Err, want[i]) || (want[i] == nil) != (r.Err == nil) {
			t.Errorf("result %d: %+v, want %+v with %v", i, r, reqs[i].TopicPartition, want[i])
		}
	}
	if msg := results[2].Err.Error(); msg != "NO_REASSIGNMENT_IN_PROGRESS: "+kerr.NoReassignmentInProgress.Description+": a-1" {
		t.Errorf("the controller's message is not kept: %q", msg)
	}

	asked := f.requests()
	if len(asked) != 1 {
		t.Fatalf("%d requests reached the controller, want 1", len(asked))
	}
	sent := asked[0].(*kmsg.AlterPartitionAssignmentsRequest)
	var got []string
	for _, rt := range sent.Topics {
		for _, rp := range rt.Partitions {
			replicas := "null"
			if rp.Replicas != nil {
				replicas = fmt.Sprint(rp.Replicas)
			}
			got = append(got, fmt.Sprintf("%s-%d=%s", rt.Topic, rp.Partition, replicas))
		}
	}
	if wantSent := []string{"a-0=[2 3]", "a-1=null", "a-2=[]", "b-0=[1]"}; !slices.Equal(got, wantSent) {
		t.Errorf("sent %v, want %v", got, wantSent)
	}
	if len(sent.Topics) != 2 || sent.TimeoutMillis <= 0 {
		t.Errorf("sent %d topic entries with timeout %d ms, want 2 and a timeout", len(sent.Topics), sent.TimeoutMillis)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{taggedOffset}) {
		t.Errorf("waited for offsets %v, want [%d]", w, taggedOffset)
	}
	if local.calls != 0 {
		t.Errorf("the local controller, not active, was asked %d times", local.calls)
	}
}

// NOT_CONTROLLER (the controller moved) is retried, the request again
// whole; an answer that changed nothing waits for no image.
func TestAlterPartitionReassignmentsForwardRetries(t *testing.T) {
	var mu sync.Mutex
	n := 0
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			resp.ErrorCode, resp.ErrorMessage = kerr.NotController.Code, kmsg.StringPtr("moved")
			return resp
		}
		for _, rt := range r.Topics {
			out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			out.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.UnknownTopicOrPartition.Code
				out.Partitions = append(out.Partitions, p)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	results, err := c.AlterPartitionReassignments(context.Background(), []controlplane.Reassignment{{TopicPartition: tp("gone", 0), Replicas: []int32{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || !errors.Is(results[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("results %+v, want UNKNOWN_TOPIC_OR_PARTITION", results)
	}
	if got := len(f.requests()); got != 2 {
		t.Errorf("%d requests, want 2 (one NOT_CONTROLLER, one answered)", got)
	}
	if w := images.waitedFor(); len(w) != 0 {
		t.Errorf("waited for offsets %v, though nothing changed", w)
	}
}

// A forwarded ElectLeaders that elected something waits for the image at
// the answer's offset. This pins a bug: ElectLeadersResponse was not
// among the tagged responses, so the offset never arrived and a
// forwarded election that succeeded answered REQUEST_TIMED_OUT ("does
// not say which metadata offset includes the change").
func TestElectLeadersForwardedWaitsForTheImage(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.ElectLeadersRequest)
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		out := kmsg.NewElectLeadersResponseTopic()
		out.Topic = "a"
		out.Partitions = []kmsg.ElectLeadersResponseTopicPartition{{Partition: 0}}
		resp.Topics = []kmsg.ElectLeadersResponseTopic{out}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	results, err := c.ElectLeaders(context.Background(), controlplane.ElectLeaders{Type: controlplane.ElectPreferred, Partitions: []controlplane.TopicPartition{tp("a", 0)}})
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	if len(results) != 1 || results[0].Err != nil {
		t.Errorf("results %+v", results)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{taggedOffset}) {
		t.Errorf("waited for offsets %v, want [%d]", w, taggedOffset)
	}
}

// A dynamic broker config change goes to the controller as
// IncrementalAlterConfigs on a BROKER resource, named "" for the
// cluster default and by id for one broker; the controller's error
// comes back as the call's, and a success waits for the tagged offset.
func TestAlterBrokerConfigsForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.IncrementalAlterConfigsRequest)
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = r.Resources[0].ResourceType, r.Resources[0].ResourceName
		if *r.Resources[0].Configs[0].Value == "0" {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr("want at least 1")
		}
		resp.Resources = append(resp.Resources, out)
		return resp
	})
	c, images, _ := newForwarder(t, f)
	v := "1000"
	ops := []controlplane.ConfigOp{{Name: metadata.FollowerThrottleRateConfig, Op: controlplane.ConfigSet, Value: &v}}
	if err := c.AlterBrokerConfigs(t.Context(), -1, ops, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(t.Context(), 3, ops, false); err != nil {
		t.Fatal(err)
	}
	zero := "0"
	err := c.AlterBrokerConfigs(t.Context(), 3, []controlplane.ConfigOp{{Name: metadata.FollowerThrottleRateConfig, Op: controlplane.ConfigSet, Value: &zero}}, false)
	if !errors.Is(err, controlplane.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 1") {
		t.Fatalf("a refused change: %v, want INVALID_CONFIG with the controller's message", err)
	}
	var names []string
	for _, req := range f.requests() {
		r := req.(*kmsg.IncrementalAlterConfigsRequest)
		res := r.Resources[0]
		if len(r.Resources) != 1 || res.ResourceType != kmsg.ConfigResourceTypeBroker || len(res.Configs) != 1 ||
			res.Configs[0].Name != metadata.FollowerThrottleRateConfig || res.Configs[0].Op != kmsg.IncrementalAlterConfigOpSet {
			t.Fatalf("sent %+v", r)
		}
		names = append(names, res.ResourceName)
	}
	if !slices.Equal(names, []string{"", "3", "3"}) {
		t.Fatalf("resources named %q, want the default then broker 3", names)
	}
	if got := images.waitedFor(); !slices.Equal(got, []uint64{taggedOffset, taggedOffset}) {
		t.Fatalf("waited for %v, want the tagged offset after each success", got)
	}
}
