package txnstatetopic

// MarkerSender: the node's side of Kafka's TransactionMarkerChannelManager
//
// For one transaction's marker, the partitions are grouped by their
// leader in this node's latest metadata image, and each leader is sent
// one WriteTxnMarkersRequest of one marker carrying its partitions, all
// leaders at once, through the node's peer clients (internal/peers): the
// same franz-go handles that carry follower fetches and forwarded
// control-plane changes. A partition this node leads goes the same way,
// to this node's own listener: one path, so a marker is checked the same
// way (kafkaserver's write_txn_markers.go: the marker's fields, the
// topic, leadership, then the log's producer epoch and coordinator epoch
// checks) wherever it lands, at the cost of a loopback round trip.
//
// Version: the highest both sides serve, which franz-go negotiates from
// the leader's ApiVersions; Fjord serves v0-2, so v2, carrying the
// marker's TransactionVersion (0 or 1 there means what v1 means: the
// lenient epoch check). Kafka 4's coordinator sends the same. A peer
// serving only v1 would get v1 and the lenient check even for a
// Transactions V2 marker; every Fjord node serves v2.
//
// Results, per partition of the marker, in its order:
//
//   - not in the image (its topic deleted, or an index it never had):
//     txn.ErrPartitionDeleted, not sent (Kafka: "likely deleted");
//   - no leader: NOT_LEADER_OR_FOLLOWER, not sent (the coordinator
//     retries once the image names one);
//   - sent: the leader's error code for it (nil for none), or, when the
//     request failed as a whole (the leader not registered, the
//     connection, ctx), a NETWORK_EXCEPTION wrapping why, for every
//     partition the request carried; an answer missing a partition is an
//     error for that partition. The coordinator retries all of these.
//
// Timeouts: a leader answers once its ISR has the marker, or after
// kafkaserver's writeTxnMarkersTimeout (30s); the peer clients stop
// reading an answer after franz-go's RequestTimeoutOverhead (10s), and
// drop the connection. A marker whose replicas take longer than that is
// a NETWORK_EXCEPTION here and is sent again, which is safe (a partition
// accepts a duplicate marker), at the cost of the peer connection,
// which the peer pool's other users share.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/txn"
)

// Images is where the MarkerSender finds each partition's leader: the
// node's latest metadata image (controlplane.Images has it).
type Images interface {
	Image() *metadata.Image
}

// MarkerSender is txn.MarkerSender over the node's peer clients.
//
// Threads: WriteTxnMarkers is called from many goroutines at once (one
// per transaction being completed); it keeps nothing between calls, and
// each call's per-leader requests run on goroutines of their own that
// end before it returns.
type MarkerSender struct {
	images Images
	peers  *peers.Pool
}

var _ txn.MarkerSender = (*MarkerSender)(nil)

// NewMarkerSender returns the sender of markers to the leaders images
// names, through pool.
func NewMarkerSender(images Images, pool *peers.Pool) *MarkerSender {
	return &MarkerSender{images: images, peers: pool}
}

// WriteTxnMarkers implements txn.MarkerSender (see the file comment).
func (s *MarkerSender) WriteTxnMarkers(ctx context.Context, m txn.Marker) []error {
	results, routes := routeMarker(s.images.Image(), m.Partitions)
	if len(routes) == 1 {
		s.sendRoute(ctx, m, routes[0], results)
		return results
	}
	var wg sync.WaitGroup
	for _, r := range routes {
		// Each route writes only its own partitions' results.
		wg.Go(func() { s.sendRoute(ctx, m, r, results) })
	}
	wg.Wait()
	return results
}

// route is the partitions of a marker one leader is sent: indexes into
// the marker's partitions.
type route struct {
	leader  int32
	indexes []int
}

// routeMarker groups parts by their leader in img, in order of leader
// id, each route's indexes ascending. results has one entry per part,
// set for the parts no leader is sent (ErrPartitionDeleted, or
// NOT_LEADER_OR_FOLLOWER) and nil for the rest, which the routes cover
// exactly once each. A nil img (no image yet) has no leader for any.
func routeMarker(img *metadata.Image, parts []txn.TopicPartition) (results []error, routes []route) {
	results = make([]error, len(parts))
	if img == nil {
		for i := range parts {
			results[i] = fmt.Errorf("%w: no metadata image yet", kerr.NotLeaderForPartition)
		}
		return results, nil
	}
	byLeader := map[int32][]int{}
	for i, tp := range parts {
		t, ok := img.Topics[tp.Topic]
		if !ok || t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			results[i] = txn.ErrPartitionDeleted
			continue
		}
		leader := t.Partitions[tp.Partition].Leader
		if leader < 0 {
			results[i] = fmt.Errorf("%w: %s-%d has no leader", kerr.NotLeaderForPartition, tp.Topic, tp.Partition)
			continue
		}
		byLeader[leader] = append(byLeader[leader], i)
	}
	for leader, indexes := range byLeader {
		routes = append(routes, route{leader: leader, indexes: indexes})
	}
	slices.SortFunc(routes, func(a, b route) int { return cmp.Compare(a.leader, b.leader) })
	return results, routes
}

// sendRoute sends r's partitions of m to r's leader and sets their
// results.
func (s *MarkerSender) sendRoute(ctx context.Context, m txn.Marker, r route, results []error) {
	resp, err := s.request(ctx, r.leader, markerRequest(m, r.indexes))
	if err != nil {
		err = fmt.Errorf("%w: WriteTxnMarkers to node %d: %w", kerr.NetworkException, r.leader, err)
		for _, i := range r.indexes {
			results[i] = err
		}
		return
	}
	mapMarkerResponse(resp.(*kmsg.WriteTxnMarkersResponse), r.leader, m.ProducerID, m.Partitions, r.indexes, results)
}

// request sends req to node's listener: the leader not registered in
// the image, the pool closed, the connection failing and ctx ending are
// all its error.
func (s *MarkerSender) request(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
	b, err := s.peers.Broker(node)
	if err != nil {
		return nil, err
	}
	return b.Request(ctx, req)
}

// markerRequest is a WriteTxnMarkersRequest of m carrying parts[i] for
// each i of indexes, once each, grouped by topic in order of first
// appearance. The version is the transport's to set.
func markerRequest(m txn.Marker, indexes []int) *kmsg.WriteTxnMarkersRequest {
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID = m.ProducerID
	rm.ProducerEpoch = m.ProducerEpoch
	rm.Committed = m.Commit
	rm.CoordinatorEpoch = m.CoordinatorEpoch
	rm.TransactionVersion = m.TransactionVersion
	var parts []txn.TopicPartition
	seen := map[txn.TopicPartition]bool{}
	for _, i := range indexes {
		if tp := m.Partitions[i]; !seen[tp] {
			seen[tp] = true
			parts = append(parts, tp)
		}
	}
	for _, t := range byTopic(parts) {
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = t.topic, t.partitions
		rm.Topics = append(rm.Topics, rt)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{rm}
	return req
}

// topicPartitions is one topic of a request and its partitions.
type topicPartitions struct {
	topic      string
	partitions []int32
}

// byTopic groups parts by topic, as a request's topics array carries
// them (markers' and the verifier's alike): topics in order of first
// appearance, each one's partitions in parts' order, duplicates kept.
func byTopic(parts []txn.TopicPartition) []topicPartitions {
	var out []topicPartitions
	topicAt := map[string]int{}
	for _, tp := range parts {
		at, ok := topicAt[tp.Topic]
		if !ok {
			out = append(out, topicPartitions{topic: tp.Topic})
			at = len(out) - 1
			topicAt[tp.Topic] = at
		}
		out[at].partitions = append(out[at].partitions, tp.Partition)
	}
	return out
}

// mapMarkerResponse sets results[i], for each i of indexes, from
// leader's answer to the request of markerRequest: the partition's error
// code as a kerr error (nil for 0), or an error saying the answer lacks
// it. Only the answer's marker of producerID counts.
func mapMarkerResponse(resp *kmsg.WriteTxnMarkersResponse, leader int32, producerID int64, parts []txn.TopicPartition, indexes []int, results []error) {
	codes := map[txn.TopicPartition]int16{}
	for _, rm := range resp.Markers {
		if rm.ProducerID != producerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				codes[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	for _, i := range indexes {
		tp := parts[i]
		code, ok := codes[tp]
		if !ok {
			results[i] = fmt.Errorf("node %d's WriteTxnMarkers answer has no result for %s-%d", leader, tp.Topic, tp.Partition)
			continue
		}
		results[i] = kerr.ErrorForCode(code)
	}
}
