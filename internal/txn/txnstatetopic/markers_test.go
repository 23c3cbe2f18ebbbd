package txnstatetopic

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

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/txn"
)

type tp = txn.TopicPartition

func tpOf(topic string, p int32) tp { return tp{Topic: topic, Partition: p} }

// markerImage has "orders" with partitions led by 1, 2 and nobody, and
// "audit" with one led by 1.
func markerImage() *metadata.Image {
	return &metadata.Image{
		Brokers: map[int32]metadata.Broker{},
		Topics: map[string]*metadata.Topic{
			"orders": {Name: "orders", Partitions: []metadata.Partition{{Leader: 1}, {Leader: 2}, {Leader: -1}}},
			"audit":  {Name: "audit", Partitions: []metadata.Partition{{Leader: 1}}},
		},
	}
}

// Routing, per partition of the marker: deleted topics and partition
// indexes the topic does not have are ErrPartitionDeleted, a partition
// without a leader NOT_LEADER_OR_FOLLOWER, and the rest go to their
// leader, each leader once, in order of its id.
func TestRouteMarker(t *testing.T) {
	parts := []tp{
		tpOf("orders", 1), tpOf("audit", 0), tpOf("orders", 0), tpOf("orders", 2),
		tpOf("gone", 0), tpOf("orders", 9), tpOf("orders", -1), tpOf("orders", 0),
	}
	results, routes := routeMarker(markerImage(), parts)
	wantRoutes := []route{{leader: 1, indexes: []int{1, 2, 7}}, {leader: 2, indexes: []int{0}}}
	if !slices.EqualFunc(routes, wantRoutes, func(a, b route) bool { return a.leader == b.leader && slices.Equal(a.indexes, b.indexes) }) {
		t.Errorf("routes %+v, want %+v", routes, wantRoutes)
	}
	for i, want := range []error{nil, nil, nil, kerr.NotLeaderForPartition, txn.ErrPartitionDeleted, txn.ErrPartitionDeleted, txn.ErrPartitionDeleted, nil} {
		if got := results[i]; (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%v: %v, want %v", parts[i], got, want)
		}
	}

	// No image yet: nobody is known to lead anything, and nothing is
	// known deleted.
	results, routes = routeMarker(nil, parts[:2])
	if len(routes) != 0 || !errors.Is(results[0], kerr.NotLeaderForPartition) || !errors.Is(results[1], kerr.NotLeaderForPartition) {
		t.Errorf("no image: %v, %+v", results, routes)
	}
}

// A leader's request carries the marker's fields and its partitions,
// grouped by topic, each once; its answer maps back by topic and
// partition, a missing partition being an error of its own.
func TestMarkerRequestAndResponse(t *testing.T) {
	m := txn.Marker{ProducerID: 42, ProducerEpoch: 3, CoordinatorEpoch: 7, Commit: true, TransactionVersion: 2,
		Partitions: []tp{tpOf("a", 1), tpOf("b", 0), tpOf("a", 0), tpOf("a", 1), tpOf("c", 5)}}
	indexes := []int{0, 1, 2, 3}
	req := markerRequest(m, indexes)
	if len(req.Markers) != 1 {
		t.Fatalf("%d markers, want 1", len(req.Markers))
	}
	rm := req.Markers[0]
	if rm.ProducerID != 42 || rm.ProducerEpoch != 3 || rm.CoordinatorEpoch != 7 || !rm.Committed || rm.TransactionVersion != 2 {
		t.Errorf("marker %+v", rm)
	}
	if got := topicsOf(rm.Topics); got != "a:[1 0] b:[0]" {
		t.Errorf("topics %s, want a:[1 0] b:[0]", got)
	}

	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	answer := kmsg.NewWriteTxnMarkersResponseMarker()
	answer.ProducerID = 42
	answer.Topics = []kmsg.WriteTxnMarkersResponseMarkerTopic{
		{Topic: "a", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 1, ErrorCode: kerr.NotEnoughReplicas.Code}}},
		{Topic: "b", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 0, ErrorCode: 0}}},
	}
	other := kmsg.NewWriteTxnMarkersResponseMarker() // another producer's: not ours
	other.ProducerID = 43
	other.Topics = []kmsg.WriteTxnMarkersResponseMarkerTopic{{Topic: "a", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 0}}}}
	resp.Markers = []kmsg.WriteTxnMarkersResponseMarker{answer, other}
	results := make([]error, len(m.Partitions))
	mapMarkerResponse(resp, 1, 42, m.Partitions, indexes, results)
	if !errors.Is(results[0], kerr.NotEnoughReplicas) || results[1] != nil || results[2] == nil || !errors.Is(results[3], kerr.NotEnoughReplicas) || results[4] != nil {
		t.Errorf("results %v: want NOT_ENOUGH_REPLICAS, nil, missing, NOT_ENOUGH_REPLICAS, untouched", results)
	}
}

// topicsOf is a request's topics and partitions, in its order.
func topicsOf(ts []kmsg.WriteTxnMarkersRequestMarkerTopic) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s:%v", t.Topic, t.Partitions))
	}
	return strings.Join(parts, " ")
}

// fakeImages is the node's images, for the peer pool and the sender.
type fakeImages struct {
	mu  sync.Mutex
	img *metadata.Image
}

func (f *fakeImages) Image() *metadata.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img
}
func (f *fakeImages) Subscribe(fn func(*metadata.Image)) func() { fn(f.Image()); return func() {} }
func (f *fakeImages) AwaitImage(context.Context, uint64) error  { return nil }

// register puts node id's listener at addr in the image.
func (f *fakeImages) register(t *testing.T, id int32, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.img.Brokers[id] = metadata.Broker{NodeID: id, Host: host, Port: int32(p)}
}

// fakeLeader is a node's Kafka listener as far as WriteTxnMarkers goes:
// it advertises WriteTxnMarkers up to maxVersion, keeps every request,
// and answers it as its config says.
type fakeLeader struct {
	ln net.Listener
	fakeLeaderConfig

	mu      sync.Mutex
	got     []*kmsg.WriteTxnMarkersRequest
	arrived chan struct{} // gets a value per request, if there is room
}

type fakeLeaderConfig struct {
	maxVersion int16
	codes      map[tp]int16 // each partition's error code (0 if absent)
	omit       map[tp]bool  // partitions left out of the answer
	hold       func()       // when set, runs before each answer
}

// newFakeLeader starts node id's listener and registers it in images.
func newFakeLeader(t *testing.T, images *fakeImages, id int32, cfg fakeLeaderConfig) *fakeLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLeader{ln: ln, fakeLeaderConfig: cfg, arrived: make(chan struct{}, 16)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				if err := f.serve(nc); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					t.Errorf("fake leader %d: %v", id, err)
				}
			})
		}
	})
	images.register(t, id, ln.Addr().String())
	return f
}

func (f *fakeLeader) serve(nc net.Conn) error {
	return testutil.ServeKafka(nc, func(req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			a := r.ResponseKind().(*kmsg.ApiVersionsResponse)
			a.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 3}, {ApiKey: 27, MaxVersion: f.maxVersion}}
			return a, nil
		case *kmsg.WriteTxnMarkersRequest:
			f.mu.Lock()
			f.got = append(f.got, r)
			f.mu.Unlock()
			select {
			case f.arrived <- struct{}{}:
			default:
			}
			if f.hold != nil {
				f.hold()
			}
			resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
			for _, m := range r.Markers {
				rm := kmsg.NewWriteTxnMarkersResponseMarker()
				rm.ProducerID = m.ProducerID
				for _, t := range m.Topics {
					rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						if f.omit[tpOf(t.Topic, p)] {
							continue
						}
						rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
						rp.Partition, rp.ErrorCode = p, f.codes[tpOf(t.Topic, p)]
						rt.Partitions = append(rt.Partitions, rp)
					}
					rm.Topics = append(rm.Topics, rt)
				}
				resp.Markers = append(resp.Markers, rm)
			}
			return resp, nil
		}
		return nil, fmt.Errorf("unexpected %s", kmsg.NameForKey(req.Key()))
	})
}

func (f *fakeLeader) requests() []*kmsg.WriteTxnMarkersRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func newSender(t *testing.T, images *fakeImages) *MarkerSender {
	pool := peers.New(images, "fjord-markers-test")
	t.Cleanup(pool.Close)
	return NewMarkerSender(images, pool)
}

func checkResults(t *testing.T, parts []tp, got, want []error) {
	t.Helper()
	if len(got) != len(parts) {
		t.Fatalf("%d results for %d partitions", len(got), len(parts))
	}
	for i := range parts {
		if (want[i] == nil) != (got[i] == nil) || !errors.Is(got[i], want[i]) {
			t.Errorf("%v: %v, want %v", parts[i], got[i], want[i])
		}
	}
}

// Through the peer clients: one request per leader, sent to all leaders
// at once (leader 1 answers only once leader 2 has its request), at the
// highest version both serve, carrying the marker and that leader's
// partitions; each partition's result in the marker's order.
func TestMarkerSenderWritesToEachLeader(t *testing.T) {
	images := &fakeImages{img: markerImage()}
	l2 := newFakeLeader(t, images, 2, fakeLeaderConfig{maxVersion: 2, codes: map[tp]int16{tpOf("orders", 1): kerr.NotEnoughReplicas.Code}})
	l1 := newFakeLeader(t, images, 1, fakeLeaderConfig{maxVersion: 2, codes: map[tp]int16{tpOf("audit", 0): kerr.InvalidProducerEpoch.Code},
		hold: func() {
			select {
			case <-l2.arrived:
			case <-time.After(10 * time.Second):
				t.Error("leader 2's request did not arrive while leader 1's was waiting: the leaders were not sent to at once")
			}
		}})
	s := newSender(t, images)

	m := txn.Marker{ProducerID: 42, ProducerEpoch: 3, CoordinatorEpoch: 7, Commit: true, TransactionVersion: 2,
		Partitions: []tp{tpOf("orders", 0), tpOf("audit", 0), tpOf("orders", 1), tpOf("orders", 2), tpOf("gone", 0)}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := s.WriteTxnMarkers(ctx, m)
	checkResults(t, m.Partitions, got, []error{nil, kerr.InvalidProducerEpoch, kerr.NotEnoughReplicas, kerr.NotLeaderForPartition, txn.ErrPartitionDeleted})

	for _, c := range []struct {
		leader *fakeLeader
		topics string
	}{{l1, "orders:[0] audit:[0]"}, {l2, "orders:[1]"}} {
		reqs := c.leader.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests to a leader, want 1", len(reqs))
		}
		r := reqs[0]
		if r.Version != 2 || len(r.Markers) != 1 {
			t.Fatalf("v%d with %d markers, want v2 with 1", r.Version, len(r.Markers))
		}
		rm := r.Markers[0]
		if rm.ProducerID != 42 || rm.ProducerEpoch != 3 || rm.CoordinatorEpoch != 7 || !rm.Committed || rm.TransactionVersion != 2 {
			t.Errorf("marker %+v", rm)
		}
		if got := topicsOf(rm.Topics); got != c.topics {
			t.Errorf("partitions %s, want %s", got, c.topics)
		}
	}
}

// A leader that serves WriteTxnMarkers only to v1 gets v1, which has no
// transaction version (the lenient epoch check); the marker is still
// written.
func TestMarkerSenderNegotiatesTheVersion(t *testing.T) {
	images := &fakeImages{img: markerImage()}
	l1 := newFakeLeader(t, images, 1, fakeLeaderConfig{maxVersion: 1})
	s := newSender(t, images)
	m := txn.Marker{ProducerID: 5, ProducerEpoch: 0, TransactionVersion: 1, Partitions: []tp{tpOf("orders", 0)}}
	checkResults(t, m.Partitions, s.WriteTxnMarkers(context.Background(), m), []error{nil})
	if reqs := l1.requests(); len(reqs) != 1 || reqs[0].Version != 1 {
		t.Fatalf("requests %+v, want one v1", reqs)
	}
}

// A request that fails as a whole fails every partition it carried, as
// a NETWORK_EXCEPTION (the coordinator retries it): a leader whose
// listener is gone, or that is not registered in the image. A leader
// whose answer lacks a partition fails that partition alone. Other
// leaders' partitions are not affected.
func TestMarkerSenderTransportErrors(t *testing.T) {
	img := markerImage()
	img.Topics["orders"].Partitions = append(img.Topics["orders"].Partitions, metadata.Partition{Leader: 3}, metadata.Partition{Leader: 4})
	images := &fakeImages{img: img}
	newFakeLeader(t, images, 1, fakeLeaderConfig{maxVersion: 2, omit: map[tp]bool{tpOf("audit", 0): true}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	images.register(t, 3, ln.Addr().String()) // registered, but nobody listens
	ln.Close()
	// Node 4 never registered.
	s := newSender(t, images)

	m := txn.Marker{ProducerID: 42, ProducerEpoch: 3, Partitions: []tp{tpOf("orders", 3), tpOf("orders", 0), tpOf("orders", 4), tpOf("audit", 0)}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := s.WriteTxnMarkers(ctx, m)
	if !errors.Is(got[0], kerr.NetworkException) {
		t.Errorf("leader not listening: %v, want NETWORK_EXCEPTION", got[0])
	}
	if got[1] != nil {
		t.Errorf("a partition the working leader answered: %v, want nil", got[1])
	}
	if !errors.Is(got[2], kerr.NetworkException) || !errors.Is(got[2], peers.ErrNotRegistered) {
		t.Errorf("unregistered leader: %v, want NETWORK_EXCEPTION saying so", got[2])
	}
	if got[3] == nil {
		t.Errorf("a partition the leader did not answer: nil, want an error")
	}
}

// The sender returns promptly once ctx ends (the partition was unloaded,
// or the coordinator closed), even with a leader that never answers.
func TestMarkerSenderRespectsContext(t *testing.T) {
	images := &fakeImages{img: markerImage()}
	release := make(chan struct{})
	l1 := newFakeLeader(t, images, 1, fakeLeaderConfig{maxVersion: 2, hold: func() { <-release }})
	t.Cleanup(func() { close(release) }) // runs before the leader's cleanup
	s := newSender(t, images)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []error, 1)
	m := txn.Marker{ProducerID: 42, Partitions: []tp{tpOf("orders", 0), tpOf("audit", 0)}}
	go func() { done <- s.WriteTxnMarkers(ctx, m) }()
	testutil.Receive(t, 10*time.Second, "the leader's request", l1.arrived)
	cancel()
	got := testutil.Receive(t, 5*time.Second, "WriteTxnMarkers' return after ctx ended", done)
	for i, err := range got {
		if err == nil {
			t.Errorf("%v: nil after ctx ended, want an error", m.Partitions[i])
		}
	}
}
