package kafkaserver

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataReq(version int16, allowCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = allowCreate
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func topicNames(resp *kmsg.MetadataResponse) []string {
	var names []string
	for _, t := range resp.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	slices.Sort(names)
	return names
}

// Every version from 0 to 12 answers brokers, cluster and topics with
// the header the version calls for (recv checks the header and that the
// body re-encodes to the same bytes).
func TestMetadataAllVersions(t *testing.T) {
	h := newWireHarness(t)
	tp := h.ctrl.addTopic("orders", 3)
	c := h.dial()
	for v := int16(0); v <= 12; v++ {
		resp := c.roundTrip(metadataReq(v, false, "orders")).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d brokers %+v", v, resp.Brokers)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d topics %+v", v, resp.Topics)
		}
		p := resp.Topics[0].Partitions[2]
		if p.Partition != 2 || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) || p.ErrorCode != 0 {
			t.Fatalf("v%d partition %+v", v, p)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "fjord-test-cluster") {
			t.Fatalf("v%d cluster id %v", v, resp.ClusterID)
		}
		if v >= 1 && resp.ControllerID != 1 {
			t.Fatalf("v%d controller %d", v, resp.ControllerID)
		}
		if v >= 10 && resp.Topics[0].TopicID != tp.ID {
			t.Fatalf("v%d topic id %x, want %x", v, resp.Topics[0].TopicID, tp.ID)
		}
	}
}

// Which topics: v0 empty list = all; v1+ null = all, empty = none.
func TestMetadataTopicSelection(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("a", 1)
	h.ctrl.addTopic("b", 1)
	h.ctrl.addTopic("__consumer_offsets", 1)
	c := h.dial()
	all := []string{"__consumer_offsets", "a", "b"}

	v0 := metadataReq(0, false)
	v0.Topics = []kmsg.MetadataRequestTopic{}
	if got := topicNames(c.roundTrip(v0).(*kmsg.MetadataResponse)); !slices.Equal(got, all) {
		t.Fatalf("v0 empty: %v", got)
	}
	if got := topicNames(c.roundTrip(metadataReq(1, false)).(*kmsg.MetadataResponse)); !slices.Equal(got, all) {
		t.Fatalf("v1 null: %v", got)
	}
	empty := metadataReq(9, false)
	empty.Topics = []kmsg.MetadataRequestTopic{}
	if got := topicNames(c.roundTrip(empty).(*kmsg.MetadataResponse)); len(got) != 0 {
		t.Fatalf("v9 empty: %v", got)
	}
	resp := c.roundTrip(metadataReq(12, false)).(*kmsg.MetadataResponse)
	for _, tp := range resp.Topics {
		if internal := *tp.Topic == "__consumer_offsets"; tp.IsInternal != internal {
			t.Fatalf("%s internal=%v", *tp.Topic, tp.IsInternal)
		}
	}
}

// By topic id (v10+): known ids are answered, unknown ones
// UNKNOWN_TOPIC_ID.
func TestMetadataByTopicID(t *testing.T) {
	h := newWireHarness(t)
	tp := h.ctrl.addTopic("by-id", 2)
	c := h.dial()
	req := metadataReq(12, false)
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: tp.ID}, {TopicID: [16]byte{9}}}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%+v", resp.Topics)
	}
	if resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "by-id" || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("known id: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[1].TopicID != [16]byte{9} {
		t.Fatalf("unknown id: %+v", resp.Topics[1])
	}
}

// Auto-creation: when the server and (v4+) the client allow it, an
// unknown topic is created and answered; otherwise it is
// UNKNOWN_TOPIC_OR_PARTITION. Invalid names are INVALID_TOPIC_EXCEPTION
// and internal names are never auto-created.
func TestMetadataAutoCreate(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.numPartitions = 3
	c := h.dial()

	resp := c.roundTrip(metadataReq(12, false, "no-create")).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("client disallowed: error %d", resp.Topics[0].ErrorCode)
	}
	if _, ok := h.ctrl.Image().Topic("no-create"); ok {
		t.Fatal("created although the client disallowed it")
	}

	resp = c.roundTrip(metadataReq(12, true, "fresh", "fresh", "bad name!", "__transaction_state")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 4 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	for _, i := range []int{0, 1} {
		tp := resp.Topics[i]
		if tp.ErrorCode != 0 || *tp.Topic != "fresh" || len(tp.Partitions) != 3 || tp.Partitions[0].Leader != 1 {
			t.Fatalf("created topic answer %d: %+v", i, tp)
		}
	}
	if resp.Topics[2].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: error %d", resp.Topics[2].ErrorCode)
	}
	if resp.Topics[3].ErrorCode != kerr.UnknownTopicOrPartition.Code || !resp.Topics[3].IsInternal {
		t.Fatalf("internal name: %+v", resp.Topics[3])
	}
	if n := h.ctrl.creates.Load(); n != 1 {
		t.Fatalf("%d CreateTopics calls, want 1 (one per request, duplicates merged)", n)
	}
	if _, ok := h.ctrl.Image().Topic("__transaction_state"); ok {
		t.Fatal("internal topic auto-created")
	}

	// Before v4 clients always allow it.
	resp = c.roundTrip(metadataReq(3, false, "old-client")).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("v3: %+v", resp.Topics[0])
	}
	// A second request finds the topic without creating it again.
	c.roundTrip(metadataReq(12, true, "fresh"))
	if n := h.ctrl.creates.Load(); n != 2 {
		t.Fatalf("%d CreateTopics calls, want 2", n)
	}
}

// With auto.create.topics.enable off nothing is created.
func TestMetadataAutoCreateDisabled(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
	c := h.dial()
	resp := c.roundTrip(metadataReq(12, true, "nope")).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error %d", resp.Topics[0].ErrorCode)
	}
	if h.ctrl.creates.Load() != 0 {
		t.Fatal("CreateTopics called")
	}
}

// A partition whose leader is not a registered broker (or has none) is
// LEADER_NOT_AVAILABLE with leader -1.
func TestMetadataLeaderNotAvailable(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 2)
	h.ctrl.setLeader("t", 1, 7, 3)
	c := h.dial()
	resp := c.roundTrip(metadataReq(12, false, "t")).(*kmsg.MetadataResponse)
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.ErrorCode != 0 || p0.Leader != 1 {
		t.Fatalf("p0 %+v", p0)
	}
	if p1.ErrorCode != kerr.LeaderNotAvailable.Code || p1.Leader != -1 || p1.LeaderEpoch != 3 {
		t.Fatalf("p1 %+v", p1)
	}
}

// Regression: every name starting with "__" was taken for an internal
// topic, so "__debezium-heartbeat.x" (Debezium's default heartbeat topic)
// was never auto-created and a user's "__mine" was hidden from topic
// listings. Only the coordinators' topics are internal, and clients may
// not append to them.
func TestOnlyCoordinatorTopicsAreInternal(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("__mine", 1)
	c := h.dial()
	resp := c.roundTrip(metadataReq(12, true, "__mine", "__debezium-heartbeat.x")).(*kmsg.MetadataResponse)
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 || tp.IsInternal {
			t.Fatalf("%s: error %d, internal %v; want an ordinary topic", *tp.Topic, tp.ErrorCode, tp.IsInternal)
		}
	}
	if _, ok := h.ctrl.Image().Topic("__debezium-heartbeat.x"); !ok {
		t.Fatal("__debezium-heartbeat.x was not auto-created")
	}
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		p := c.roundTrip(produceReq(9, 1, name, 0, batch(t, "x", 1))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", name, p.ErrorCode)
		}
	}
}
