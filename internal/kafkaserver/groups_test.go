package kafkaserver

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The group APIs through the wire: each version's fields mapped to the
// coordinator (internal/group, the real one, over an in-memory
// __consumer_offsets) and back. The coordinator's rules have their own
// table tests in internal/group; these check what the server adds: the
// versions, the topic checks, the error placement, and the clients.

// memOffsetsLog is an in-memory __consumer_offsets.
type memOffsetsLog struct {
	mu   sync.Mutex
	recs map[int32][]group.Record
}

func (l *memOffsetsLog) Append(_ context.Context, p int32, recs []group.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recs == nil {
		l.recs = make(map[int32][]group.Record)
	}
	for _, r := range recs {
		l.recs[p] = append(l.recs[p], group.Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
	}
	return nil
}

// AppendTxn stores a transactional commit's records as Append does: the
// tests over this log commit no transactions (the real log's are in
// txn_offset_commit_test.go).
func (l *memOffsetsLog) AppendTxn(ctx context.Context, p int32, _ int64, _ int16, _ group.TxnGuard, recs []group.Record) error {
	return l.Append(ctx, p, recs)
}

func (l *memOffsetsLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, rs := range l.recs {
		n += len(rs)
	}
	return n
}

// withGroups serves a group coordinator with every __consumer_offsets
// partition loaded (empty) and no initial rebalance delay.
func withGroups(log *memOffsetsLog) harnessOpt {
	return withGroupsOn(func(*wireHarness) group.Log { return log })
}

// withGroupsOn is withGroups over the log newLog makes (after the
// harness's replicas).
func withGroupsOn(newLog func(h *wireHarness) group.Log) harnessOpt {
	return harnessOpt{groups: func(h *wireHarness) Groups {
		log := newLog(h)
		logger := testutil.Logger(h.t)
		if _, fuzz := h.t.(*testing.F); fuzz {
			// A fuzz target may not log through f, and its inputs
			// would make millions of lines.
			logger = slog.New(slog.DiscardHandler)
		}
		c := group.New(group.Config{OffsetsPartitions: offsetstopic.DefaultPartitions, Logger: logger}, log)
		for p := range int32(offsetstopic.DefaultPartitions) {
			if err := c.Load(p, func(func(group.Record) error) error { return nil }); err != nil {
				h.t.Fatal(err)
			}
		}
		h.t.Cleanup(c.Close)
		return c
	}}
}

// FindCoordinator names this node for every group key, creating
// __consumer_offsets (compacted, 50 partitions) on the first lookup.
func TestFindCoordinatorForGroups(t *testing.T) {
	h := newWireHarness(t, withGroups(&memOffsetsLog{}))
	c := h.dial()
	host, port := splitHostPort(t, h.addr)
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g1", "", "another group"}
		resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if v >= 4 {
			if len(resp.Coordinators) != 3 {
				t.Fatalf("v%d: %d coordinators for 3 keys", v, len(resp.Coordinators))
			}
			for i, co := range resp.Coordinators {
				if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != 0 || co.NodeID != 1 || co.Host != host || co.Port != port {
					t.Fatalf("v%d key %q: %+v", v, req.CoordinatorKeys[i], co)
				}
			}
			continue
		}
		if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host != host || resp.Port != port {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	tp, ok := lookupTopic(h.ctrl.Image(), offsetsTopic)
	if !ok || len(tp.Partitions) != offsetstopic.DefaultPartitions {
		t.Fatalf("%s after the lookups: %+v", offsetsTopic, tp)
	}
	if creates := h.ctrl.creates.Load(); creates != 1 {
		t.Errorf("%d CreateTopics calls; the topic is created once", creates)
	}

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorType = 1
	req.CoordinatorKey = "txn"
	if resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code ||
		resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "transaction") {
		t.Fatalf("transaction key: %+v", resp)
	}
}

// The classic protocol at v0 (kafka-go and older clients) and at v4,
// where a member without an id is first told to rejoin with one.
func TestJoinSyncHeartbeatLeaveOldAndNew(t *testing.T) {
	h := newWireHarness(t, withGroups(&memOffsetsLog{}))
	c := h.dial()

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 0
	join.Group = "old"
	join.SessionTimeoutMillis = 10_000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("sub")}}
	jr := c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.MemberID == "" || jr.LeaderID != jr.MemberID || jr.Generation != 1 || jr.Protocol == nil || *jr.Protocol != "range" || len(jr.Members) != 1 {
		t.Fatalf("JoinGroup v0: %+v", jr)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 0
	sync.Group, sync.MemberID, sync.Generation = "old", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("mine")}}
	if sr := c.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
		t.Fatalf("SyncGroup v0: %+v", sr)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 0
	hb.Group, hb.MemberID, hb.Generation = "old", jr.MemberID, jr.Generation
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("Heartbeat v0: %+v", r)
	}
	hb.Generation = 7
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("Heartbeat v0 with a wrong generation: %+v", r)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 0
	leave.Group, leave.MemberID = "old", jr.MemberID
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("LeaveGroup v0: %+v", r)
	}
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("LeaveGroup v0 again: %+v", r)
	}

	join.Version = 9
	join.Group = "new"
	join.RebalanceTimeoutMillis = 10_000
	jr = c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
		t.Fatalf("JoinGroup v9 without a member id: %+v", jr)
	}
	join.MemberID = jr.MemberID
	jr = c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.MemberID != join.MemberID || jr.ProtocolType == nil || *jr.ProtocolType != "consumer" {
		t.Fatalf("JoinGroup v9 with its id: %+v", jr)
	}
	// v3+ leaves in batches, each member answered.
	leave.Version = 3
	leave.Group = "new"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}, {MemberID: "nobody"}}
	r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse)
	if r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("LeaveGroup v3: %+v", r)
	}
}

// A commit naming a topic or partition that does not exist is refused
// for that partition, and nothing of it is stored; the rest is.
func TestOffsetCommitUnknownTopicOrPartition(t *testing.T) {
	log := &memOffsetsLog{}
	h := newWireHarness(t, withGroups(log))
	h.ctrl.addTopic("t", 2)
	c := h.dial()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 8
	commit.Group, commit.Generation = "simple", -1
	meta := "m"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1, Metadata: &meta}, {Partition: 9, Offset: 5, LeaderEpoch: -1}}},
		{Topic: "missing", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}
	r := c.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	codes := []int16{r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[1].ErrorCode, r.Topics[1].Partitions[0].ErrorCode}
	if codes[0] != 0 || codes[1] != kerr.UnknownTopicOrPartition.Code || codes[2] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v, want [0 %d %d]", codes, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code)
	}
	if n := log.count(); n != 1 {
		t.Fatalf("%d records in __consumer_offsets, want the one valid commit", n)
	}

	// Every OffsetFetch version sees just that one.
	for v := int16(1); v <= 9; v++ {
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version = v
		if v >= 8 {
			fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "simple", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}}}
		} else {
			fetch.Group = "simple"
			fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		}
		resp := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
		var offsets [2]int64
		var metas [2]string
		if v >= 8 {
			if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			for _, p := range resp.Groups[0].Topics[0].Partitions {
				offsets[p.Partition], metas[p.Partition] = p.Offset, *p.Metadata
			}
		} else {
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			for _, p := range resp.Topics[0].Partitions {
				offsets[p.Partition], metas[p.Partition] = p.Offset, *p.Metadata
			}
		}
		if offsets != [2]int64{5, -1} || metas != [2]string{"m", ""} {
			t.Fatalf("v%d: offsets %v metadata %q, want [5 -1] [m \"\"]", v, offsets, metas)
		}
	}
}

// Where the coordinator does not own a group, OffsetFetch v0-1 (no group
// error field) put the error on every partition, v2-7 on the answer, and
// v8+ on that group only.
func TestOffsetFetchCoordinatorErrorPlacement(t *testing.T) {
	h := newWireHarness(t, withGroups(&memOffsetsLog{}))
	h.ctrl.addTopic("t", 1)
	h.groups.(*group.Coordinator).Unload(group.PartitionFor("elsewhere", offsetstopic.DefaultPartitions))
	c := h.dial()
	for v := int16(1); v <= 9; v++ {
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version = v
		fetch.Group = "elsewhere"
		fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "elsewhere"}, {Group: "here"}}
		resp := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
		switch {
		case v >= 8:
			if len(resp.Groups) != 2 || resp.Groups[0].ErrorCode != kerr.NotCoordinator.Code || resp.Groups[1].ErrorCode != 0 {
				t.Fatalf("v%d: %+v", v, resp.Groups)
			}
		case v >= 2:
			if resp.ErrorCode != kerr.NotCoordinator.Code {
				t.Fatalf("v%d: %+v", v, resp)
			}
		default:
			if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotCoordinator.Code {
				t.Fatalf("v%d: %+v", v, resp)
			}
		}
	}
}

// A franz-go group consumer reads a topic and commits; the group then
// shows up in ListGroups and DescribeGroups, its offsets in OffsetFetch,
// and a second session of the group reads only what came after.
func TestKgoGroupConsumer(t *testing.T) {
	h := newWireHarness(t, withGroups(&memOffsetsLog{}))
	h.ctrl.addTopic("events", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(prefix string, n int) {
		p, err := kgo.NewClient(kgo.SeedBrokers(h.addr), kgo.DefaultProduceTopic("events"))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := range n {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte(prefix + "-" + string(rune('a'+i%26)))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(want int) []string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []string
		for len(got) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", len(got), want)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		return got
	}
	produce("first", 60)
	if got := consume(60); len(got) != 60 {
		t.Fatalf("first session: %d records", len(got))
	}

	adm := kadm.NewClient(newKgo(t, h.addr))
	listed, err := adm.ListGroups(ctx)
	if err != nil || len(listed.Groups()) != 1 || listed.Groups()[0] != "g" {
		t.Fatalf("ListGroups: %v, %v", listed, err)
	}
	offsets, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offsets.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 60 {
		t.Fatalf("committed offsets sum to %d, want the 60 records consumed", committed)
	}
	described, err := adm.DescribeGroups(ctx, "g")
	if err != nil || described["g"].State != "Empty" {
		t.Fatalf("DescribeGroups after the session: %+v, %v", described, err)
	}

	produce("second", 30)
	got := consume(30)
	for _, v := range got {
		if !strings.HasPrefix(v, "second-") {
			t.Fatalf("second session read %q, from before its group's commits", v)
		}
	}
}

// newKgo is a plain client of the harness, closed with the test.
func newKgo(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func splitHostPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, int32(n)
}

// The group APIs' ranges, chosen against the clients (KAFKA-API.md):
// JoinGroup keeps v0-1 for kafka-go and kafka_ex, and OffsetCommit and
// OffsetFetch stop before topic ids.
func TestGroupAPIVersionRanges(t *testing.T) {
	want := map[int16][2]int16{
		10: {0, 6}, // FindCoordinator
		11: {0, 9}, // JoinGroup
		14: {0, 5}, // SyncGroup
		12: {0, 4}, // Heartbeat
		13: {0, 5}, // LeaveGroup
		8:  {0, 9}, // OffsetCommit
		9:  {0, 9}, // OffsetFetch
		15: {0, 5}, // DescribeGroups
		16: {0, 5}, // ListGroups
		42: {0, 2}, // DeleteGroups
		47: {0, 0}, // OffsetDelete
	}
	if len(groupAPIs) != len(want) {
		t.Fatalf("%d group APIs registered, want %d", len(groupAPIs), len(want))
	}
	for _, a := range groupAPIs {
		w, ok := want[a.key]
		if !ok || a.minVersion != w[0] || a.maxVersion != w[1] || a.handle == nil {
			t.Errorf("%s: v%d-%d (handler %v), want v%d-%d", kmsg.NameForKey(a.key), a.minVersion, a.maxVersion, a.handle != nil, w[0], w[1])
		}
	}
}

// Bad group requests get Kafka's errors and store nothing.
func TestGroupBadInput(t *testing.T) {
	log := &memOffsetsLog{}
	h := newWireHarness(t, withGroups(log))
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	join := func(groupID, protocol string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 3 // no MEMBER_ID_REQUIRED round trip
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = groupID, 10_000, 10_000, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: protocol, Metadata: []byte{1}}}
		return c.roundTrip(req).(*kmsg.JoinGroupResponse)
	}
	if r := join("", "range"); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("JoinGroup with an empty group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A second member that shares no assignor with the first.
	if r := join("picky", "range"); r.ErrorCode != 0 {
		t.Fatalf("first member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := join("picky", "roundrobin"); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup with no protocol in common: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Kafka takes commits, fetches, describes and deletes for the empty
	// group id (for old clients); the membership APIs refuse it.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.MemberID, hb.Generation = "m", 1
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("Heartbeat with an empty group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 8
	commit.Group, commit.Generation = "simple", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	tooLong := strings.Repeat("m", 4097) // offset.metadata.max.bytes is 4096
	commit.Topics[0].Partitions[0].Metadata = &tooLong
	if r := c.roundTrip(commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.OffsetMetadataTooLarge.Code {
		t.Errorf("OffsetCommit with 4097 bytes of metadata: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	// SyncGroup v5+ must name the protocol type and protocol.
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 5
	sync.Group, sync.MemberID, sync.Generation = "picky", "m", 1
	if r := c.roundTrip(sync).(*kmsg.SyncGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("SyncGroup v5 without a protocol: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if n := log.count(); n != 0 {
		t.Errorf("%d records stored by requests that all failed", n)
	}
}

// __consumer_offsets belongs to the group coordinator, which hashes
// groups over its partition count: clients may not create it or grow it,
// and a topic of another count (made some other way) is not used.
func TestOffsetsTopicIsTheCoordinators(t *testing.T) {
	h := newWireHarness(t, withGroups(&memOffsetsLog{}))
	c := h.dial()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 5
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: offsetsTopic, NumPartitions: 3, ReplicationFactor: 1}}
	if r := c.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("CreateTopics %s: %v", offsetsTopic, kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	if _, ok := lookupTopic(h.ctrl.Image(), offsetsTopic); ok {
		t.Fatalf("%s was created by a client", offsetsTopic)
	}

	h.ctrl.addTopic(offsetsTopic, 3) // as no client can
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 3
	find.CoordinatorKey = "g"
	if r := c.roundTrip(find).(*kmsg.FindCoordinatorResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code ||
		r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "has 3 partitions") {
		t.Errorf("FindCoordinator with a 3-partition %s: %+v", offsetsTopic, r)
	}
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: offsetsTopic, Count: 50}}
	if r := c.roundTrip(grow).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("CreatePartitions %s: %v", offsetsTopic, kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}

// OffsetCommit v1's commit timestamp and v2-v4's retention time reach
// the stored records as Kafka writes them: value v1 with an expiry for a
// retention, the commit timestamp as given; -1 leaves both to the
// broker, and v5+ has neither.
func TestOffsetCommitTimestampAndRetention(t *testing.T) {
	log := &memOffsetsLog{}
	h := newWireHarness(t, withGroups(log))
	h.ctrl.addTopic("t", 4)
	c := h.dial()
	commit := func(version int16, partition int32, timestamp, retention int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = version
		req.Group, req.Generation = "old-client", -1
		req.RetentionTimeMillis = retention
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: partition, Offset: 10, LeaderEpoch: -1, Timestamp: timestamp}}}}
		r := c.roundTrip(req).(*kmsg.OffsetCommitResponse)
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("v%d commit: error %d", version, code)
		}
	}
	before := time.Now().UnixMilli()
	commit(1, 0, 12345, -1)     // the client's commit time
	commit(2, 1, -1, 60_000)    // a minute's retention
	commit(4, 2, -1, -1)        // the broker's defaults
	commit(5, 3, 12345, 60_000) // v5+ carries neither field
	after := time.Now().UnixMilli()

	stored := map[int32]kmsg.OffsetCommitValue{}
	log.mu.Lock()
	for _, recs := range log.recs {
		for _, r := range recs {
			var k kmsg.OffsetCommitKey
			var v kmsg.OffsetCommitValue
			if k.ReadFrom(r.Key) != nil || k.Version > 1 || v.ReadFrom(r.Value) != nil {
				continue
			}
			stored[k.Partition] = v
		}
	}
	log.mu.Unlock()
	if v := stored[0]; v.Version != 3 || v.CommitTimestamp != 12345 {
		t.Errorf("v1 commit with a timestamp stored as %+v", v)
	}
	if v := stored[1]; v.Version != 1 || v.CommitTimestamp < before || v.CommitTimestamp > after || v.ExpireTimestamp != v.CommitTimestamp+60_000 {
		t.Errorf("v2 commit with a retention stored as %+v", v)
	}
	for _, p := range []int32{2, 3} {
		if v := stored[p]; v.Version != 3 || v.CommitTimestamp < before || v.CommitTimestamp > after {
			t.Errorf("partition %d's commit stored as %+v", p, v)
		}
	}
}
