package kafkaserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
)

// setPartition changes a partition of the fake controller's image with
// fn, adds broker 2 (so answers can name it) and hands the image on.
func (c *memController) setPartition(topic string, p int32, fn func(*metadata.Partition)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneLocked()
	next.Brokers[2] = metadata.Broker{NodeID: 2, Host: "127.0.0.2", Port: 9092, Rack: "b"}
	old := next.Topics[topic]
	t := *old
	t.Partitions = slices.Clone(old.Partitions)
	fn(&t.Partitions[p])
	next.Topics[topic], next.TopicsByID[t.ID] = &t, &t
	next.Offset++
	c.img = next
	if c.onImage != nil {
		c.onImage(next)
	}
}

// hostileRacks are client racks a consumer of Fetch version v may send:
// Kafka's field is any string, so only ever compared. A v11 string has
// an int16 length; the flexible versions' (v12+) hold 64 KiB and more.
func hostileRacks(v int16) map[string]string {
	long, longName := strings.Repeat("r", 64<<10), "64 KiB"
	if v < 12 {
		long, longName = strings.Repeat("r", 32767), "32767 bytes"
	}
	return map[string]string{
		"empty":    "",
		longName:   long,
		"not UTF8": "\xff\xfe\x00\x80b",
		"a rack":   "b",
	}
}

// consumerFetch is a consumer's fetch of partition 0 of topic t at
// offset, named as version wants, in leader epoch epoch.
func followerFetchReq(v int16, t *metadata.Topic, offset int64, epoch int32, rack string) (*kmsg.FetchRequest, fetchPart) {
	part := fetchPart{topic: t.Name, partition: 0, offset: offset}
	if v >= 13 {
		part = fetchPart{id: t.ID, partition: 0, offset: offset}
	}
	req := fetchReq(v, 0, 1, part)
	req.Rack = rack
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
	part.offset = 0 // fetched's keys carry no offset
	return req, part
}

// Follower fetching over the wire (KIP-392): node 1 holds ten records it
// wrote as leader, then follows node 2 in epoch 1 with its high
// watermark at 5. Consumers' fetches of v11+ read its copy below that
// high watermark, whatever rack they send; older ones, fenced epochs and
// a replica out of the ISR are refused as Kafka refuses them; and the
// node's metrics count the bytes as served by a follower.
func TestFetchFromAFollower(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newRealReplicasHarness(t, withConfig(func(c *Config) { c.Metrics = reg }))
	topic := h.ctrl.addTopic("f", 1)
	for i := range 10 {
		h.produce(t, "f", 0, fmt.Sprint("v", i), 1)
	}
	follow := func(isr ...int32) {
		h.ctrl.setPartition("f", 0, func(p *metadata.Partition) {
			p.Replicas, p.ISR, p.Leader, p.LeaderEpoch = []int32{1, 2}, isr, 2, 1
		})
	}
	follow(1, 2)
	p, ok := h.manager.Partition("f", 0)
	if !ok {
		t.Fatal("node 1 has no f-0")
	}
	p.Log().SetHighWatermark(5)
	leaderBytes, followerBytes := servedBytes(t, reg)

	c := h.dial()
	for v := int16(11); v <= 16; v++ {
		for name, rack := range hostileRacks(v) {
			req, key := followerFetchReq(v, topic, 0, 1, rack)
			got, ok := fetched(c.roundTrip(req).(*kmsg.FetchResponse))[key]
			if !ok || got.ErrorCode != 0 || got.HighWatermark != 5 || got.PreferredReadReplica != -1 {
				t.Fatalf("v%d, rack %s: %+v", v, name, got)
			}
			if vals := values(t, got.RecordBatches); !slices.Equal(vals, []string{"v0-0", "v1-0", "v2-0", "v3-0", "v4-0"}) {
				t.Fatalf("v%d, rack %s: values %v, want the five below the follower's high watermark", v, name, vals)
			}
		}
	}
	if l, f := servedBytes(t, reg); l != leaderBytes || f <= followerBytes {
		t.Fatalf("bytes served as leader %v -> %v, as follower %v -> %v; want only the follower's to grow", leaderBytes, l, followerBytes, f)
	}

	for _, tc := range []struct {
		name    string
		version int16
		offset  int64
		epoch   int32
		want    int16
	}{
		{"Fetch v10: the leader only", 10, 0, 1, kerr.NotLeaderForPartition.Code},
		{"Fetch v4: the leader only", 4, 0, -1, kerr.NotLeaderForPartition.Code},
		{"above its high watermark, in its log", 12, 7, 1, 0},
		{"at its log end", 12, 10, 1, 0},
		{"past its log end", 12, 11, 1, kerr.OffsetOutOfRange.Code},
		{"an older leader epoch", 12, 0, 0, kerr.FencedLeaderEpoch.Code},
		{"a newer leader epoch", 16, 0, 2, kerr.UnknownLeaderEpoch.Code},
	} {
		req, key := followerFetchReq(tc.version, topic, tc.offset, tc.epoch, "b")
		got := fetched(c.roundTrip(req).(*kmsg.FetchResponse))[key]
		if got.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, got.ErrorCode, tc.want)
		}
		if tc.want == 0 && (len(got.RecordBatches) != 0 || got.HighWatermark != 5) {
			t.Errorf("%s: %d bytes, high watermark %d; want none yet, and 5", tc.name, len(got.RecordBatches), got.HighWatermark)
		}
		if tc.want == kerr.FencedLeaderEpoch.Code && (got.CurrentLeader.LeaderID != 2 || got.CurrentLeader.LeaderEpoch != 1) {
			t.Errorf("%s: current leader %+v, want node 2 in epoch 1", tc.name, got.CurrentLeader)
		}
	}

	// Out of the ISR: back to the leader, whose endpoint v16 carries.
	follow(2)
	req, key := followerFetchReq(16, topic, 0, 1, "b")
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	got := fetched(resp)[key]
	if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != 2 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 {
		t.Fatalf("out of the ISR: error %d, current leader %+v, brokers %+v; want NOT_LEADER_OR_FOLLOWER naming node 2",
			got.ErrorCode, got.CurrentLeader, resp.Brokers)
	}
}

// servedBytes reads fjord_consumer_fetch_bytes_total's two series.
func servedBytes(t *testing.T, reg *prometheus.Registry) (leader, follower float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range families {
		if f.GetName() != "fjord_consumer_fetch_bytes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "served_as" && l.GetValue() == "leader":
					leader, found = m.GetCounter().GetValue(), found+1
				case l.GetName() == "served_as" && l.GetValue() == "follower":
					follower, found = m.GetCounter().GetValue(), found+1
				}
			}
		}
	}
	if found != 2 {
		t.Fatalf("fjord_consumer_fetch_bytes_total has %d of its two series", found)
	}
	return leader, follower
}

// redirectingReplicas answers every fetch as a leader that names node 0
// (a real id, not "none") as the preferred read replica, and keeps the
// client metadata each fetch carried.
type redirectingReplicas struct {
	*memReplicas
	mu      sync.Mutex
	clients []*replica.ClientMetadata
}

func (r *redirectingReplicas) Fetch(_ context.Context, params replica.FetchParams, parts []replica.FetchPartition) *replica.FetchResult {
	r.mu.Lock()
	r.clients = append(r.clients, params.Client)
	r.mu.Unlock()
	res := &replica.FetchResult{Partitions: make([]replica.FetchPartitionResult, len(parts))}
	for i := range parts {
		res.Partitions[i] = replica.FetchPartitionResult{
			HighWatermark: 3, LastStableOffset: 3, LastOffset: -1,
			DivergingEpoch: replica.EpochEndOffset{Epoch: -1, EndOffset: -1}, Redirect: true, PreferredReadReplica: 0,
		}
	}
	return res
}

func (r *redirectingReplicas) lastClient() *replica.ClientMetadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients[len(r.clients)-1]
}

// A leader's answer naming a preferred read replica: the id on the wire
// (v11+), no records, and in an incremental fetch session the partition
// answered every time, as Kafka's session does, though nothing else in
// it changed. The consumer's rack reaches the replica manager as sent,
// from v11; before v11 the fetch carries no client metadata.
func TestFetchNamesAPreferredReadReplica(t *testing.T) {
	var reps *redirectingReplicas
	h := newWireHarness(t, withReplicas(func(h *wireHarness) Replicas {
		reps = &redirectingReplicas{memReplicas: h.reps}
		return reps
	}))
	topic := h.ctrl.addTopic("t", 1)
	c := h.dial()
	for v := int16(11); v <= 16; v++ {
		for name, rack := range hostileRacks(v) {
			req, key := followerFetchReq(v, topic, 0, -1, rack)
			got := fetched(c.roundTrip(req).(*kmsg.FetchResponse))[key]
			if got.ErrorCode != 0 || got.PreferredReadReplica != 0 || len(got.RecordBatches) != 0 || got.HighWatermark != 3 {
				t.Fatalf("v%d, rack %s: %+v; want node 0 named and no records", v, name, got)
			}
			if cl := reps.lastClient(); cl == nil || cl.RackID != rack {
				t.Fatalf("v%d, rack %s: the replica manager was given %v", v, name, cl)
			}
		}
	}
	req, _ := followerFetchReq(10, topic, 0, -1, "")
	c.roundTrip(req)
	if cl := reps.lastClient(); cl != nil {
		t.Fatalf("v10 carried client metadata %+v", cl)
	}

	all := fetchPart{topic: "t", partition: 0}
	resp := c.roundTrip(sessionFetch(12, 0, 0, all)).(*kmsg.FetchResponse)
	id := resp.SessionID
	for epoch := int32(1); epoch <= 3; epoch++ {
		resp = c.roundTrip(sessionFetch(12, id, epoch)).(*kmsg.FetchResponse)
		got, ok := fetched(resp)[all]
		if resp.ErrorCode != 0 || !ok || got.PreferredReadReplica != 0 {
			t.Fatalf("incremental epoch %d: error %d, partition answered %v (%+v); want it named again", epoch, resp.ErrorCode, ok, got)
		}
	}
}
