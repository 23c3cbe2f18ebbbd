package kafkaserver

// Authorization of the consumer-group APIs (issue 20, slice 3), one
// test per API or pair, each against internal/acl/APIS.md's row: the
// resource and operation checked, how a denial is answered (whole
// request, per item, or filtered), authorization before existence, one
// decision per distinct name, and that a denied request never reaches
// the group coordinator. The coordinator is the real one over an
// in-memory __consumer_offsets, behind a spy that records every call
// the handlers make, so "nothing happened" is a list compared, not a
// hope.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/testutil"
)

const (
	gaAlice = "User:alice"
	gaAdmin = "User:admin" // testACLConfig's super user
)

// groupAuthzSpy is the group coordinator with every call the handlers
// make written down, in order, as "Method args".
type groupAuthzSpy struct {
	Groups
	mu    sync.Mutex
	calls []string
}

func (s *groupAuthzSpy) record(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// take returns the calls recorded since the last take.
func (s *groupAuthzSpy) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

func gaParts(parts []group.TopicPartition) string {
	if parts == nil {
		return "all"
	}
	var b strings.Builder
	b.WriteString("[")
	for i, p := range parts {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s/%d", p.Topic, p.Partition)
	}
	b.WriteString("]")
	return b.String()
}

func (s *groupAuthzSpy) JoinGroup(ctx context.Context, req group.JoinRequest) group.JoinResult {
	s.record("JoinGroup %s", req.Group)
	return s.Groups.JoinGroup(ctx, req)
}

func (s *groupAuthzSpy) SyncGroup(ctx context.Context, req group.SyncRequest) group.SyncResult {
	s.record("SyncGroup %s", req.Group)
	return s.Groups.SyncGroup(ctx, req)
}

func (s *groupAuthzSpy) Heartbeat(req group.HeartbeatRequest) error {
	s.record("Heartbeat %s", req.Group)
	return s.Groups.Heartbeat(req)
}

func (s *groupAuthzSpy) LeaveGroup(ctx context.Context, groupID string, members []group.LeaveMember) (error, []error) {
	s.record("LeaveGroup %s", groupID)
	return s.Groups.LeaveGroup(ctx, groupID, members)
}

func (s *groupAuthzSpy) CommitOffsets(ctx context.Context, req group.CommitRequest) (error, []error) {
	parts := make([]group.TopicPartition, 0, len(req.Offsets))
	for _, o := range req.Offsets {
		parts = append(parts, o.TopicPartition)
	}
	s.record("CommitOffsets %s %s", req.Group, gaParts(parts))
	return s.Groups.CommitOffsets(ctx, req)
}

func (s *groupAuthzSpy) FetchOffsets(groupID string, parts []group.TopicPartition, requireStable bool) ([]group.CommittedOffset, error) {
	s.record("FetchOffsets %s %s", groupID, gaParts(parts))
	return s.Groups.FetchOffsets(groupID, parts, requireStable)
}

func (s *groupAuthzSpy) DescribeGroup(groupID string) (group.GroupDescription, error) {
	s.record("DescribeGroup %s", groupID)
	return s.Groups.DescribeGroup(groupID)
}

func (s *groupAuthzSpy) ListGroups(states []string) ([]group.GroupListing, error) {
	s.record("ListGroups")
	return s.Groups.ListGroups(states)
}

func (s *groupAuthzSpy) DeleteGroups(ctx context.Context, groups []string) []error {
	s.record("DeleteGroups %v", groups)
	return s.Groups.DeleteGroups(ctx, groups)
}

func (s *groupAuthzSpy) DeleteOffsets(ctx context.Context, groupID string, parts []group.TopicPartition) (error, []error) {
	s.record("DeleteOffsets %s %s", groupID, gaParts(parts))
	return s.Groups.DeleteOffsets(ctx, groupID, parts)
}

// groupAuthzFixture is a Server with a real coordinator (every
// __consumer_offsets partition loaded) behind a spy, topics "t" (2
// partitions) and "secret" (1), and no "ghost".
type groupAuthzFixture struct {
	s     *Server
	ctrl  *memController
	coord *group.Coordinator
	spy   *groupAuthzSpy
	log   *memOffsetsLog
}

// newGroupAuthzFixture serves with aclCfg (nil: authorization off).
func newGroupAuthzFixture(t *testing.T, aclCfg *ACLConfig) *groupAuthzFixture {
	t.Helper()
	f := &groupAuthzFixture{ctrl: newMemController(1, "127.0.0.1", 9092), log: &memOffsetsLog{}}
	f.ctrl.addTopic("t", 2)
	f.ctrl.addTopic("secret", 1)
	f.coord = group.New(group.Config{OffsetsPartitions: offsetstopic.DefaultPartitions, Logger: testutil.Logger(t)}, f.log)
	for p := range int32(offsetstopic.DefaultPartitions) {
		if err := f.coord.Load(p, func(func(group.Record) error) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.coord.Close)
	f.spy = &groupAuthzSpy{Groups: f.coord}
	f.s = New(Config{NodeID: 1, TopicConfigs: testConfigs, Logger: testutil.Logger(t), ACL: aclCfg}, f.ctrl, newMemReplicas(f.ctrl), &memPIDs{}, f.spy)
	t.Cleanup(func() { f.s.Close() })
	return f
}

// setBindings replaces the image's ACLs with bindings, as a metadata
// image carrying them would.
func (f *groupAuthzFixture) setBindings(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	f.ctrl.img = withBindings(t, f.ctrl.img, bindings...)
}

// denials is the server's count of authorization denials.
func (f *groupAuthzFixture) denials(t *testing.T) int {
	t.Helper()
	var m dto.Metric
	if err := f.s.metrics.authzDenied.Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetCounter().GetValue())
}

// commit stores offset for group on tp directly with the coordinator (a
// simple consumer's commit), for tests that need offsets to exist.
func (f *groupAuthzFixture) commit(t *testing.T, groupID string, topic string, partition int32, offset int64) {
	t.Helper()
	err, partErrs := f.coord.CommitOffsets(context.Background(), group.CommitRequest{
		Group: groupID, Generation: -1,
		Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: topic, Partition: partition}, Offset: offset, LeaderEpoch: -1}},
	})
	if err != nil || partErrs[0] != nil {
		t.Fatalf("commit %s %s/%d: %v %v", groupID, topic, partition, err, partErrs)
	}
}

// committed is group's committed offset on tp (-1: none).
func (f *groupAuthzFixture) committed(t *testing.T, groupID string, topic string, partition int32) int64 {
	t.Helper()
	offsets, err := f.coord.FetchOffsets(groupID, []group.TopicPartition{{Topic: topic, Partition: partition}}, false)
	if err != nil {
		t.Fatal(err)
	}
	return offsets[0].Offset
}

// groupAuthzCall runs body's group API handler at version for principal
// connected from 10.0.0.1. The request is encoded and decoded at version
// first, and so is the response, so both carry only what the version
// does on the wire.
func groupAuthzCall[R kmsg.Response](t *testing.T, f *groupAuthzFixture, principal string, body kmsg.Request, version int16) R {
	t.Helper()
	return callAs[R](t, f.s, principal, "10.0.0.1", body, version)
}

func groupBinding(pt acl.PatternType, name, principal string, op acl.Operation) acl.Binding {
	return allowBinding(acl.ResourceGroup, pt, name, principal, op)
}

func topicBinding(pt acl.PatternType, name, principal string, op acl.Operation) acl.Binding {
	return allowBinding(acl.ResourceTopic, pt, name, principal, op)
}

func wantCalls(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: coordinator calls %q, want %q", what, got, want)
	}
}

// FindCoordinator: DESCRIBE on the key's group or transactional id, per
// key from v4, the one key before; a denied key creates no
// __consumer_offsets and names no node.
func TestGroupAuthzFindCoordinator(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	creates := f.ctrl.creates.Load()
	find := func(principal string, version int16, keyType int8, keys ...string) *kmsg.FindCoordinatorResponse {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = keyType
		req.CoordinatorKey = keys[0]
		req.CoordinatorKeys = keys
		return groupAuthzCall[*kmsg.FindCoordinatorResponse](t, f, principal, req, version)
	}

	// No bindings: every key of alice's is denied, in every version, and
	// nothing is created.
	for v := int16(0); v <= 3; v++ {
		r := find(gaAlice, v, 0, "app-1")
		if r.ErrorCode != kerr.GroupAuthorizationFailed.Code || r.NodeID != -1 || (v >= 1) != (r.ErrorMessage != nil) {
			t.Fatalf("v%d denied: %+v", v, r)
		}
	}
	if n := f.ctrl.creates.Load(); n != creates {
		t.Fatalf("denied lookups made %d CreateTopics calls", n-creates)
	}
	if _, ok := lookupTopic(f.ctrl.Image(), offsetsTopic); ok {
		t.Fatalf("a denied lookup created %s", offsetsTopic)
	}
	if d := f.denials(t); d != 4 {
		t.Fatalf("%d denials counted for 4 denied requests", d)
	}

	// A PREFIXED binding: "app-1" is found, "other" is not, each key on
	// its own, and "other" twice is decided once. READ implies DESCRIBE.
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationRead))
	r := find(gaAlice, 4, 0, "app-1", "other", "app-2", "other", "app")
	want := []int16{0, kerr.GroupAuthorizationFailed.Code, 0, kerr.GroupAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code}
	for i, c := range r.Coordinators {
		if c.ErrorCode != want[i] || (want[i] == 0) != (c.NodeID == 1) {
			t.Fatalf("v4 key %q: %+v, want code %d", c.Key, c, want[i])
		}
	}
	if len(r.Coordinators) != len(want) {
		t.Fatalf("v4: %d answers for %d keys", len(r.Coordinators), len(want))
	}
	if d := f.denials(t); d != 6 {
		t.Fatalf("%d denials after the v4 request, want 6 (4 + other + app)", d)
	}

	// Deny beats allow, and the super user passes whatever is bound.
	f.setBindings(t,
		groupBinding(acl.PatternLiteral, acl.WildcardResource, gaAlice, acl.OperationDescribe),
		denyBinding(acl.ResourceGroup, acl.PatternLiteral, "secret", gaAlice, acl.OperationAll),
		denyBinding(acl.ResourceGroup, acl.PatternLiteral, "secret", gaAdmin, acl.OperationAll))
	if r := find(gaAlice, 3, 0, "secret"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("a denied group under an allowed wildcard: %+v", r)
	}
	if r := find(gaAlice, 3, 0, "anything"); r.ErrorCode != 0 || r.NodeID != 1 {
		t.Fatalf("the wildcard: %+v", r)
	}
	if r := find(gaAdmin, 3, 0, "secret"); r.ErrorCode != 0 || r.NodeID != 1 {
		t.Fatalf("the super user: %+v", r)
	}

	// Transactional ids: TRANSACTIONAL_ID DESCRIBE, its own error. This
	// node runs no transaction coordinator, so an allowed key gets as
	// far as COORDINATOR_NOT_AVAILABLE.
	if r := find(gaAlice, 3, 1, "txn-1"); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("denied transactional id: %+v", r)
	}
	f.setBindings(t, allowBinding(acl.ResourceTransactionalID, acl.PatternLiteral, "txn-1", gaAlice, acl.OperationDescribe))
	r = find(gaAlice, 4, 1, "txn-1", "txn-2")
	if r.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code || r.Coordinators[1].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("v4 transactional ids: %+v", r.Coordinators)
	}
	// A group binding does not cover a transactional id of that name.
	f.setBindings(t, groupBinding(acl.PatternLiteral, "txn-1", gaAlice, acl.OperationAll))
	if r := find(gaAlice, 3, 1, "txn-1"); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional id under a group binding: %+v", r)
	}

	// An unknown key type is refused as invalid, with no decision made.
	before := f.denials(t)
	if r := find(gaAlice, 3, 7, "g"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("key type 7: %+v", r)
	}
	if d := f.denials(t); d != before {
		t.Fatalf("key type 7 counted %d denials", d-before)
	}
}

// JoinGroup, SyncGroup, Heartbeat and LeaveGroup: READ on the group,
// whole request. A denied join creates no group and adds no member; a
// member whose READ is revoked keeps neither its session nor the power
// to leave.
func TestGroupAuthzMembership(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	join := func(principal string, version int16, groupID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = groupID, 10_000, 10_000, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
		return groupAuthzCall[*kmsg.JoinGroupResponse](t, f, principal, req, version)
	}
	syncGroup := func(principal string, version int16, groupID, member string, generation int32) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.MemberID, req.Generation = groupID, member, generation
		pt, p := "consumer", "range"
		req.ProtocolType, req.Protocol = &pt, &p
		req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("mine")}}
		return groupAuthzCall[*kmsg.SyncGroupResponse](t, f, principal, req, version)
	}
	heartbeat := func(principal string, groupID, member string, generation int32) *kmsg.HeartbeatResponse {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = groupID, member, generation
		return groupAuthzCall[*kmsg.HeartbeatResponse](t, f, principal, req, 4)
	}
	leave := func(principal string, version int16, groupID, member string) *kmsg.LeaveGroupResponse {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group, req.MemberID = groupID, member
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
		return groupAuthzCall[*kmsg.LeaveGroupResponse](t, f, principal, req, version)
	}
	state := func(groupID string) (string, int) {
		d, err := f.coord.DescribeGroup(groupID)
		if err != nil {
			t.Fatal(err)
		}
		return d.State, len(d.Members)
	}

	// No binding, and DESCRIBE only: both denied, at every version.
	for _, bindings := range [][]acl.Binding{nil, {groupBinding(acl.PatternLiteral, "g", gaAlice, acl.OperationDescribe)}} {
		f.setBindings(t, bindings...)
		for v := int16(0); v <= 9; v++ {
			r := join(gaAlice, v, "g")
			if r.ErrorCode != kerr.GroupAuthorizationFailed.Code || r.Generation != -1 || r.MemberID != "" {
				t.Fatalf("JoinGroup v%d denied: %+v", v, r)
			}
			// Kafka's error answer: a null protocol from v7, "" before.
			if (v >= 7) != (r.Protocol == nil) {
				t.Fatalf("JoinGroup v%d denied: protocol %v", v, r.Protocol)
			}
		}
		for v := int16(0); v <= 5; v++ {
			if r := syncGroup(gaAlice, v, "g", "m", 1); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.MemberAssignment) != 0 || r.Protocol != nil {
				t.Fatalf("SyncGroup v%d denied: %+v", v, r)
			}
			if r := leave(gaAlice, v, "g", "m"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.Members) != 0 {
				t.Fatalf("LeaveGroup v%d denied: %+v", v, r)
			}
		}
		if r := heartbeat(gaAlice, "g", "m", 1); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("Heartbeat denied: %+v", r)
		}
		wantCalls(t, "denied membership requests", f.spy.take())
		if st, n := state("g"); st != "Dead" || n != 0 {
			t.Fatalf("after denied joins the group is %s with %d members, want no group", st, n)
		}
	}

	// SyncGroup v5 without its protocol fields is malformed before it is
	// anyone's: INCONSISTENT_GROUP_PROTOCOL, as Kafka orders the checks.
	bare := kmsg.NewPtrSyncGroupRequest()
	bare.Group = "g"
	if r := groupAuthzCall[*kmsg.SyncGroupResponse](t, f, gaAlice, bare, 5); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("SyncGroup v5 without a protocol: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A PREFIXED READ on "g": the whole protocol works.
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "g", gaAlice, acl.OperationRead))
	jr := join(gaAlice, 3, "g1")
	if jr.ErrorCode != 0 || jr.MemberID == "" {
		t.Fatalf("JoinGroup allowed: %+v", jr)
	}
	if r := syncGroup(gaAlice, 5, "g1", jr.MemberID, jr.Generation); r.ErrorCode != 0 || string(r.MemberAssignment) != "mine" {
		t.Fatalf("SyncGroup allowed: %+v", r)
	}
	if r := heartbeat(gaAlice, "g1", jr.MemberID, jr.Generation); r.ErrorCode != 0 {
		t.Fatalf("Heartbeat allowed: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wantCalls(t, "allowed membership requests", f.spy.take(), "JoinGroup g1", "SyncGroup g1", "Heartbeat g1")

	// Deny beats allow: the member is cut off, and cannot leave either.
	f.setBindings(t,
		groupBinding(acl.PatternPrefixed, "g", gaAlice, acl.OperationRead),
		denyBinding(acl.ResourceGroup, acl.PatternLiteral, "g1", gaAlice, acl.OperationRead))
	if r := heartbeat(gaAlice, "g1", jr.MemberID, jr.Generation); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("Heartbeat after the deny: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := leave(gaAlice, 3, "g1", jr.MemberID); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("LeaveGroup after the deny: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wantCalls(t, "requests after the deny", f.spy.take())
	if st, n := state("g1"); st != "Stable" || n != 1 {
		t.Fatalf("after a denied leave the group is %s with %d members, want Stable with 1", st, n)
	}

	// The super user is not bound by the deny.
	if r := leave(gaAdmin, 0, "g1", jr.MemberID); r.ErrorCode != 0 {
		t.Fatalf("LeaveGroup by the super user: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if jr := join(gaAdmin, 3, "g1"); jr.ErrorCode != 0 {
		t.Fatalf("JoinGroup by the super user: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	wantCalls(t, "super user", f.spy.take(), "LeaveGroup g1", "JoinGroup g1")
}

func commitRequest(groupID string, topics map[string][]int32, order ...string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = groupID, -1
	for _, name := range order {
		rt := kmsg.OffsetCommitRequestTopic{Topic: name}
		for _, p := range topics[name] {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 7, LeaderEpoch: -1})
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func commitCodes(r *kmsg.OffsetCommitResponse) map[string][]int16 {
	out := map[string][]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[t.Topic] = append(out[t.Topic], p.ErrorCode)
		}
	}
	return out
}

// OffsetCommit: READ on the group for the whole request, then READ per
// topic, before existence; the allowed topics are committed.
func TestGroupAuthzOffsetCommit(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	topics := map[string][]int32{"t": {0, 1}, "secret": {0}, "ghost": {0}}
	order := []string{"t", "secret", "ghost"}
	gaf, taf := kerr.GroupAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code

	// The group denied (READ on every topic does not help): every
	// partition GROUP_AUTHORIZATION_FAILED, the coordinator never asked.
	f.setBindings(t, topicBinding(acl.PatternLiteral, acl.WildcardResource, gaAlice, acl.OperationRead),
		groupBinding(acl.PatternLiteral, "g", gaAlice, acl.OperationDescribe))
	for v := int16(0); v <= 9; v++ {
		r := groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, commitRequest("g", topics, order...), v)
		got := commitCodes(r)
		if !slices.Equal(got["t"], []int16{gaf, gaf}) || !slices.Equal(got["secret"], []int16{gaf}) || !slices.Equal(got["ghost"], []int16{gaf}) {
			t.Fatalf("v%d with the group denied: %v", v, got)
		}
	}
	wantCalls(t, "group denied", f.spy.take())
	if n := f.log.count(); n != 0 {
		t.Fatalf("%d records written by denied commits", n)
	}

	// The group allowed by prefix, READ on "t" only: "t" is committed,
	// "secret" and "ghost" are TOPIC_AUTHORIZATION_FAILED (the missing
	// topic is not told apart from the forbidden one).
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "g", gaAlice, acl.OperationRead),
		topicBinding(acl.PatternLiteral, "t", gaAlice, acl.OperationRead),
		topicBinding(acl.PatternLiteral, "secret", gaAlice, acl.OperationDescribe))
	before := f.denials(t)
	r := groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, commitRequest("g", topics, order...), 9)
	got := commitCodes(r)
	if !slices.Equal(got["t"], []int16{0, 0}) || !slices.Equal(got["secret"], []int16{taf}) || !slices.Equal(got["ghost"], []int16{taf}) {
		t.Fatalf("READ on t only: %v", got)
	}
	wantCalls(t, "READ on t only", f.spy.take(), "CommitOffsets g [t/0 t/1]")
	if f.committed(t, "g", "t", 1) != 7 || f.committed(t, "g", "secret", 0) != -1 {
		t.Fatal("the allowed topic's offsets not committed, or the denied one's were")
	}
	if d := f.denials(t) - before; d != 2 {
		t.Fatalf("%d denials, want 2 (secret, ghost)", d)
	}

	// A topic named twice, partitions many: decided once.
	before = f.denials(t)
	many := map[string][]int32{"secret": make([]int32, 500)}
	req := commitRequest("g", many, "secret", "secret")
	r = groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, req, 8)
	for _, c := range commitCodes(r)["secret"] {
		if c != taf {
			t.Fatalf("secret listed twice: code %d", c)
		}
	}
	if d := f.denials(t) - before; d != 1 {
		t.Fatalf("%d denials for one topic listed twice, want 1", d)
	}
	wantCalls(t, "all denied", f.spy.take())

	// With READ on "ghost", it is an unknown topic again.
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "g", gaAlice, acl.OperationRead),
		topicBinding(acl.PatternLiteral, "ghost", gaAlice, acl.OperationRead))
	r = groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, commitRequest("g", topics, "ghost"), 9)
	if got := commitCodes(r)["ghost"]; !slices.Equal(got, []int16{kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("an allowed unknown topic: %v", got)
	}

	// The super user commits anywhere; a DENY for admin changes nothing.
	f.setBindings(t, denyBinding(acl.ResourceTopic, acl.PatternLiteral, "secret", gaAdmin, acl.OperationAll))
	r = groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAdmin, commitRequest("h", topics, "secret"), 9)
	if got := commitCodes(r)["secret"]; !slices.Equal(got, []int16{0}) || f.committed(t, "h", "secret", 0) != 7 {
		t.Fatalf("the super user's commit: %v", got)
	}
}

// OffsetFetch: DESCRIBE per group (each its own error), DESCRIBE per
// listed topic (TOPIC_AUTHORIZATION_FAILED, after the others), and a
// quiet filter when every topic is asked.
func TestGroupAuthzOffsetFetch(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	f.commit(t, "g", "t", 0, 11)
	f.commit(t, "g", "secret", 0, 22)
	f.commit(t, "other", "t", 0, 33)
	f.setBindings(t, groupBinding(acl.PatternLiteral, "g", gaAlice, acl.OperationDescribe),
		topicBinding(acl.PatternLiteral, "t", gaAlice, acl.OperationDescribe))

	// v8+: several groups, each answered on its own.
	req := kmsg.NewPtrOffsetFetchRequest()
	listed := []kmsg.OffsetFetchRequestGroupTopic{{Topic: "secret", Partitions: []int32{0}}, {Topic: "t", Partitions: []int32{0}}, {Topic: "ghost", Partitions: []int32{0}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: listed},
		{Group: "g"}, // every topic
		{Group: "other", Topics: listed},
		{Group: "other"},
	}
	before := f.denials(t)
	r := groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, req, 9)
	if len(r.Groups) != 4 {
		t.Fatalf("%d groups answered", len(r.Groups))
	}
	type answer struct {
		topic  string
		offset int64
		code   int16
	}
	answers := func(topics []kmsg.OffsetFetchResponseGroupTopic) []answer {
		var out []answer
		for _, t := range topics {
			for _, p := range t.Partitions {
				out = append(out, answer{t.Topic, p.Offset, p.ErrorCode})
			}
		}
		return out
	}
	taf := kerr.TopicAuthorizationFailed.Code
	if got, want := answers(r.Groups[0].Topics), []answer{{"t", 11, 0}, {"secret", -1, taf}, {"ghost", -1, taf}}; r.Groups[0].ErrorCode != 0 || !slices.Equal(got, want) {
		t.Fatalf("g with topics listed: %d %v, want %v", r.Groups[0].ErrorCode, got, want)
	}
	if got, want := answers(r.Groups[1].Topics), []answer{{"t", 11, 0}}; r.Groups[1].ErrorCode != 0 || !slices.Equal(got, want) {
		t.Fatalf("g with every topic: %d %v, want %v (secret left out)", r.Groups[1].ErrorCode, got, want)
	}
	for _, g := range r.Groups[2:] {
		if g.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(g.Topics) != 0 {
			t.Fatalf("other: %+v", g)
		}
	}
	wantCalls(t, "v9", f.spy.take(), "FetchOffsets g [t/0]", "FetchOffsets g all")
	// other (once, though asked twice), secret and ghost; not the
	// filtered secret of the every-topic answer.
	if d := f.denials(t) - before; d != 3 {
		t.Fatalf("%d denials counted, want 3", d)
	}

	// Every listed topic denied: the coordinator is asked for none, not
	// for all.
	one := kmsg.NewPtrOffsetFetchRequest()
	one.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "secret", Partitions: []int32{0}}}}}
	r = groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, one, 8)
	if got := answers(r.Groups[0].Topics); !slices.Equal(got, []answer{{"secret", -1, taf}}) {
		t.Fatalf("only secret: %v", got)
	}
	wantCalls(t, "only secret", f.spy.take(), "FetchOffsets g []")

	// v2-7: one group, the group's error at the top.
	for v := int16(2); v <= 7; v++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "other"
		if r := groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, req, v); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.Topics) != 0 {
			t.Fatalf("v%d other: %+v", v, r)
		}
		req.Group = "g" // topics null: every topic the caller may see
		r := groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, req, v)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Topic != "t" || r.Topics[0].Partitions[0].Offset != 11 {
			t.Fatalf("v%d g, every topic: %+v", v, r)
		}
	}
	// v0-1 have no group error: it is on every partition asked.
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "other"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		r := groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, req, v)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d other: %+v", v, r)
		}
		for _, p := range r.Topics[0].Partitions {
			if p.ErrorCode != kerr.GroupAuthorizationFailed.Code || p.Offset != -1 {
				t.Fatalf("v%d other: partition %+v", v, p)
			}
		}
	}
	wantCalls(t, "v0-7", f.spy.take(), "FetchOffsets g all", "FetchOffsets g all", "FetchOffsets g all", "FetchOffsets g all", "FetchOffsets g all", "FetchOffsets g all")

	// Deny beats allow, by prefix: DESCRIBE on every topic but "sec*".
	f.setBindings(t, groupBinding(acl.PatternLiteral, "g", gaAlice, acl.OperationRead),
		topicBinding(acl.PatternLiteral, acl.WildcardResource, gaAlice, acl.OperationDescribe),
		denyBinding(acl.ResourceTopic, acl.PatternPrefixed, "sec", gaAlice, acl.OperationDescribe))
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	if got := answers(groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, all, 9).Groups[0].Topics); !slices.Equal(got, []answer{{"t", 11, 0}}) {
		t.Fatalf("under a prefixed deny: %v", got)
	}
	// The super user sees both.
	if got := answers(groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAdmin, all, 9).Groups[0].Topics); len(got) != 2 {
		t.Fatalf("the super user: %v", got)
	}
}

// DescribeGroups: DESCRIBE per group, a denied group answered with the
// error alone; authorized operations when asked, "not provided" when
// not.
func TestGroupAuthzDescribeGroups(t *testing.T) {
	bit := func(ops ...acl.Operation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << uint(op)
		}
		return b
	}
	describe := func(f *groupAuthzFixture, principal string, version int16, include bool, groups ...string) []kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups, req.IncludeAuthorizedOperations = groups, include
		r := groupAuthzCall[*kmsg.DescribeGroupsResponse](t, f, principal, req, version)
		if len(r.Groups) != len(groups) {
			t.Fatalf("%d groups answered for %d", len(r.Groups), len(groups))
		}
		for i, g := range r.Groups {
			if g.Group != groups[i] {
				t.Fatalf("answer %d is %q, want %q (the request's order)", i, g.Group, groups[i])
			}
		}
		return r.Groups
	}

	f := newGroupAuthzFixture(t, testACLConfig())
	f.commit(t, "app-1", "t", 0, 1)
	f.commit(t, "secret", "t", 0, 1)
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationRead))

	got := describe(f, gaAlice, 5, true, "secret", "app-1", "app-none")
	if g := got[0]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code || g.State != "" || g.ProtocolType != "" || len(g.Members) != 0 || g.AuthorizedOperations != math.MinInt32 {
		t.Fatalf("secret: %+v", g)
	}
	// READ implies DESCRIBE; nothing else is allowed.
	if g := got[1]; g.ErrorCode != 0 || g.State != "Empty" || g.AuthorizedOperations != bit(acl.OperationRead, acl.OperationDescribe) {
		t.Fatalf("app-1: %+v", g)
	}
	if g := got[2]; g.ErrorCode != 0 || g.State != "Dead" || g.AuthorizedOperations != bit(acl.OperationRead, acl.OperationDescribe) {
		t.Fatalf("app-none, allowed and unknown: %+v", g)
	}
	wantCalls(t, "describe", f.spy.take(), "DescribeGroup app-1", "DescribeGroup app-none")

	// Not asked for: Kafka's "not provided".
	for _, v := range []int16{3, 5} {
		if g := describe(f, gaAlice, v, false, "app-1")[0]; g.ErrorCode != 0 || g.AuthorizedOperations != math.MinInt32 {
			t.Fatalf("v%d without include: %+v", v, g)
		}
	}
	// Deny beats allow, on one operation: DELETE denied, READ kept.
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationAll),
		denyBinding(acl.ResourceGroup, acl.PatternLiteral, "app-1", gaAlice, acl.OperationDelete))
	if g := describe(f, gaAlice, 5, true, "app-1")[0]; g.AuthorizedOperations != bit(acl.OperationRead, acl.OperationDescribe, acl.OperationDescribeConfigs, acl.OperationAlterConfigs) {
		t.Fatalf("app-1 with DELETE denied: %b", g.AuthorizedOperations)
	}
	// The super user: every group operation.
	allGroupOps := bit(acl.SupportedOperations(acl.ResourceGroup)...)
	if g := describe(f, gaAdmin, 5, true, "secret")[0]; g.ErrorCode != 0 || g.AuthorizedOperations != allGroupOps {
		t.Fatalf("secret for the super user: %+v", g)
	}

	// Authorization off: every group operation when asked, "not
	// provided" when not, every group described.
	off := newGroupAuthzFixture(t, nil)
	off.commit(t, "secret", "t", 0, 1)
	if g := describe(off, gaAlice, 5, true, "secret")[0]; g.ErrorCode != 0 || g.State != "Empty" || g.AuthorizedOperations != allGroupOps {
		t.Fatalf("authorization off, included: %+v", g)
	}
	if g := describe(off, gaAlice, 4, false, "secret")[0]; g.AuthorizedOperations != math.MinInt32 {
		t.Fatalf("authorization off, not included: %+v", g)
	}
	if d := off.denials(t); d != 0 {
		t.Fatalf("%d denials with authorization off", d)
	}
}

// ListGroups: CLUSTER DESCRIBE lists every group; otherwise only the
// groups the caller may DESCRIBE, the others left out without an error
// or a counted denial.
func TestGroupAuthzListGroups(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	for _, g := range []string{"app-1", "app-2", "secret"} {
		f.commit(t, g, "t", 0, 1)
	}
	list := func(principal string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		r := groupAuthzCall[*kmsg.ListGroupsResponse](t, f, principal, req, 5)
		if r.ErrorCode != 0 {
			t.Fatalf("ListGroups: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		var out []string
		for _, g := range r.Groups {
			out = append(out, g.Group)
		}
		return out
	}
	cases := []struct {
		name     string
		bindings []acl.Binding
		who      string
		want     []string
	}{
		{"no bindings", nil, gaAlice, nil},
		{"prefixed", []acl.Binding{groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationDescribe)}, gaAlice, []string{"app-1", "app-2"}},
		{"deny beats allow", []acl.Binding{
			groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationRead),
			denyBinding(acl.ResourceGroup, acl.PatternLiteral, "app-2", gaAlice, acl.OperationDescribe),
		}, gaAlice, []string{"app-1"}},
		{"cluster describe", []acl.Binding{allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, gaAlice, acl.OperationDescribe)}, gaAlice, []string{"app-1", "app-2", "secret"}},
		// CLUSTER DESCRIBE lists everything, whatever a group's denial.
		{"cluster describe over a group deny", []acl.Binding{
			allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, gaAlice, acl.OperationDescribe),
			denyBinding(acl.ResourceGroup, acl.PatternLiteral, "secret", gaAlice, acl.OperationAll),
		}, gaAlice, []string{"app-1", "app-2", "secret"}},
		{"another principal's binding", []acl.Binding{groupBinding(acl.PatternLiteral, acl.WildcardResource, "User:bob", acl.OperationDescribe)}, gaAlice, nil},
		{"super user", nil, gaAdmin, []string{"app-1", "app-2", "secret"}},
	}
	for _, c := range cases {
		f.setBindings(t, c.bindings...)
		before := f.denials(t)
		if got := list(c.who); !slices.Equal(got, c.want) {
			t.Errorf("%s: listed %q, want %q", c.name, got, c.want)
		}
		if d := f.denials(t) - before; d != 0 {
			t.Errorf("%s: %d denials counted for a filtered listing", c.name, d)
		}
	}
}

// DeleteGroups: DELETE per group; a denied group is never handed to the
// coordinator and stays.
func TestGroupAuthzDeleteGroups(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	for _, g := range []string{"app-1", "app-2", "secret"} {
		f.commit(t, g, "t", 0, 1)
	}
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationDelete),
		denyBinding(acl.ResourceGroup, acl.PatternLiteral, "app-2", gaAlice, acl.OperationDelete),
		groupBinding(acl.PatternLiteral, "secret", gaAlice, acl.OperationRead)) // READ is not DELETE
	before := f.denials(t)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"secret", "app-1", "app-2", "secret", "app-missing"}
	r := groupAuthzCall[*kmsg.DeleteGroupsResponse](t, f, gaAlice, req, 2)
	gaf := kerr.GroupAuthorizationFailed.Code
	want := []int16{gaf, 0, gaf, gaf, kerr.GroupIDNotFound.Code}
	for i, g := range r.Groups {
		if g.Group != req.Groups[i] || g.ErrorCode != want[i] {
			t.Fatalf("answer %d: %s %v, want %s %v", i, g.Group, kerr.ErrorForCode(g.ErrorCode), req.Groups[i], kerr.ErrorForCode(want[i]))
		}
	}
	if len(r.Groups) != len(want) {
		t.Fatalf("%d answers for %d groups", len(r.Groups), len(want))
	}
	wantCalls(t, "delete", f.spy.take(), "DeleteGroups [app-1 app-missing]")
	if d := f.denials(t) - before; d != 2 {
		t.Fatalf("%d denials, want 2 (secret once, app-2)", d)
	}
	for g, want := range map[string]int64{"app-1": -1, "app-2": 1, "secret": 1} {
		if got := f.committed(t, g, "t", 0); got != want {
			t.Errorf("%s's offset after the delete: %d, want %d", g, got, want)
		}
	}
	// The super user deletes what alice could not.
	req.Groups = []string{"secret"}
	if r := groupAuthzCall[*kmsg.DeleteGroupsResponse](t, f, gaAdmin, req, 0); r.Groups[0].ErrorCode != 0 || f.committed(t, "secret", "t", 0) != -1 {
		t.Fatalf("the super user's delete: %+v", r.Groups)
	}
}

// OffsetDelete: DELETE on the group for the whole request, then READ per
// topic before existence.
func TestGroupAuthzOffsetDelete(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	f.commit(t, "g", "t", 0, 1)
	f.commit(t, "g", "secret", 0, 2)
	offsetDelete := func(principal string) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		for _, name := range []string{"t", "secret", "ghost"} {
			req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: name, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
		}
		return groupAuthzCall[*kmsg.OffsetDeleteResponse](t, f, principal, req, 0)
	}

	// READ on the group is not DELETE.
	f.setBindings(t, groupBinding(acl.PatternLiteral, "g", gaAlice, acl.OperationRead),
		topicBinding(acl.PatternLiteral, acl.WildcardResource, gaAlice, acl.OperationRead))
	if r := offsetDelete(gaAlice); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.Topics) != 0 {
		t.Fatalf("group denied: %+v", r)
	}
	wantCalls(t, "group denied", f.spy.take())

	// DELETE by prefix, READ on "t" only.
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "g", gaAlice, acl.OperationDelete),
		topicBinding(acl.PatternLiteral, "t", gaAlice, acl.OperationRead))
	r := offsetDelete(gaAlice)
	taf := kerr.TopicAuthorizationFailed.Code
	if r.ErrorCode != 0 || len(r.Topics) != 3 {
		t.Fatalf("READ on t: %+v", r)
	}
	for i, want := range []int16{0, taf, taf} {
		if c := r.Topics[i].Partitions[0].ErrorCode; c != want {
			t.Fatalf("%s: %v, want %v", r.Topics[i].Topic, kerr.ErrorForCode(c), kerr.ErrorForCode(want))
		}
	}
	wantCalls(t, "READ on t", f.spy.take(), "DeleteOffsets g [t/0]")
	if f.committed(t, "g", "t", 0) != -1 || f.committed(t, "g", "secret", 0) != 2 {
		t.Fatal("the allowed topic's offset kept, or the denied one's deleted")
	}
	// The super user.
	if r := offsetDelete(gaAdmin); r.ErrorCode != 0 || r.Topics[1].Partitions[0].ErrorCode != 0 || r.Topics[2].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("the super user: %+v", r)
	}
}

// Hostile names and sizes: the checks hold for names no binding should
// match by accident, and a request repeating or multiplying names costs
// one decision per distinct name and answers every entry.
func TestGroupAuthzHostileNames(t *testing.T) {
	f := newGroupAuthzFixture(t, testACLConfig())
	f.setBindings(t, groupBinding(acl.PatternPrefixed, "app-", gaAlice, acl.OperationAll),
		groupBinding(acl.PatternPrefixed, "*", gaAlice, acl.OperationDescribe))

	huge := "app-" + strings.Repeat("x", 32_000) // within the wire's string limit
	names := []string{"", "app", "APP-1", "ap", "*", "*x", "app-\x00", "\xff\xfe", huge, "g" + strings.Repeat("\u00e9", 1000)}
	// A PREFIXED "*" is an ordinary prefix: "*" and "*x" start with it;
	// nothing else does. "app-" covers "app-\x00" and the huge name.
	allowed := map[string]bool{"*": true, "*x": true, "app-\x00": true, huge: true}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = names
	r := groupAuthzCall[*kmsg.DescribeGroupsResponse](t, f, gaAlice, req, 5)
	var wantDescribed []string
	for i, g := range r.Groups {
		want := int16(0)
		if !allowed[names[i]] {
			want = kerr.GroupAuthorizationFailed.Code
		} else {
			wantDescribed = append(wantDescribed, "DescribeGroup "+names[i])
		}
		if g.ErrorCode != want {
			t.Errorf("group %.20q: %v, want %v", names[i], kerr.ErrorForCode(g.ErrorCode), kerr.ErrorForCode(want))
		}
	}
	wantCalls(t, "hostile names", f.spy.take(), wantDescribed...)

	// 10,000 copies of one denied name: 10,000 answers, one decision,
	// no coordinator call.
	before := f.denials(t)
	del := kmsg.NewPtrDeleteGroupsRequest()
	for range 10_000 {
		del.Groups = append(del.Groups, "secret")
	}
	dr := groupAuthzCall[*kmsg.DeleteGroupsResponse](t, f, gaAlice, del, 2)
	if len(dr.Groups) != 10_000 {
		t.Fatalf("%d answers for 10,000 groups", len(dr.Groups))
	}
	for _, g := range dr.Groups {
		if g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("a copy answered %v", kerr.ErrorForCode(g.ErrorCode))
		}
	}
	if d := f.denials(t) - before; d != 1 {
		t.Fatalf("%d denials for one name repeated, want 1", d)
	}
	wantCalls(t, "repeated name", f.spy.take())

	// A group id the size of the wire's limit, denied, in the
	// whole-request APIs: refused without a coordinator call.
	long := strings.Repeat("s", 32_767)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = long
	if r := groupAuthzCall[*kmsg.HeartbeatResponse](t, f, gaAlice, hb, 4); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("a 32 KiB group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit := commitRequest(long, map[string][]int32{long: {0}}, long)
	if got := commitCodes(groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, commit, 9))[long]; !slices.Equal(got, []int16{kerr.GroupAuthorizationFailed.Code}) {
		t.Fatalf("a commit for a 32 KiB group and topic: %v", got)
	}
	wantCalls(t, "long names", f.spy.take())
}

// With authorization off (Config.ACL nil) every group API serves every
// principal as before: nothing is denied or filtered.
func TestGroupAuthzOff(t *testing.T) {
	f := newGroupAuthzFixture(t, nil)
	f.commit(t, "g", "secret", 0, 5)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	if r := groupAuthzCall[*kmsg.OffsetFetchResponse](t, f, gaAlice, fetch, 9); len(r.Groups[0].Topics) != 1 || r.Groups[0].Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch: %+v", r.Groups)
	}
	list := kmsg.NewPtrListGroupsRequest()
	if r := groupAuthzCall[*kmsg.ListGroupsResponse](t, f, gaAlice, list, 5); len(r.Groups) != 1 {
		t.Fatalf("ListGroups: %+v", r.Groups)
	}
	commit := commitRequest("g", map[string][]int32{"t": {0}}, "t")
	if got := commitCodes(groupAuthzCall[*kmsg.OffsetCommitResponse](t, f, gaAlice, commit, 9))["t"]; !slices.Equal(got, []int16{0}) {
		t.Fatalf("OffsetCommit: %v", got)
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKeys = []string{"g"}
	if r := groupAuthzCall[*kmsg.FindCoordinatorResponse](t, f, gaAlice, find, 4); r.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %+v", r.Coordinators)
	}
	if d := f.denials(t); d != 0 {
		t.Fatalf("%d denials with authorization off", d)
	}
}

// Over the wire with a real client: a franz-go consumer in a group its
// principal may read (by prefix) consumes and commits; kadm then sees
// only the groups it may describe, and a group it may not is refused.
func TestGroupAuthzKgoConsumer(t *testing.T) {
	h := newWireHarness(t, withACLs(), withGroups(&memOffsetsLog{}))
	h.ctrl.addTopic("events", 1)
	const anonymous = "User:ANONYMOUS" // a PLAINTEXT connection's principal
	h.ctrl.mu.Lock()
	h.ctrl.img = withBindings(t, h.ctrl.img,
		topicBinding(acl.PatternLiteral, "events", anonymous, acl.OperationAll),
		groupBinding(acl.PatternPrefixed, "app-", anonymous, acl.OperationRead))
	h.ctrl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p := newKgo(t, h.addr)
	for i := range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr), kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < 5 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 5", got)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	adm := kadm.NewClient(newKgo(t, h.addr))
	offsets, err := adm.FetchOffsets(ctx, "app-1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup("events", 0); !ok || o.At != 5 {
		t.Fatalf("app-1's offset: %+v", o)
	}
	if _, err := adm.FetchOffsets(ctx, "other"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("OffsetFetch of a group not allowed: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || !slices.Equal(listed.Groups(), []string{"app-1"}) {
		t.Fatalf("ListGroups: %v, %v", listed.Groups(), err)
	}
}
