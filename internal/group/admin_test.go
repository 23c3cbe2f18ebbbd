package group

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestDescribeGroup(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), staticReq("g", "s"))
	d, err := h.c.DescribeGroup("g")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 2 {
		t.Fatalf("stable description %+v", d)
	}
	m := d.Members[1]
	if m.MemberID != ms[1].MemberID || *m.InstanceID != "s" || m.ClientID != "client-s" || m.ClientHost != "/127.0.0.1" ||
		!bytes.Equal(m.Metadata, consumerMeta("t")) || !bytes.Equal(m.Assignment, assignmentFor(ms[1].MemberID)) {
		t.Fatalf("member %+v", m)
	}

	// While rebalancing: no protocol, no metadata or assignments.
	h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	d, _ = h.c.DescribeGroup("g")
	if d.State != "PreparingRebalance" || d.Protocol != "" || len(d.Members) != 2 || d.Members[0].Metadata != nil || d.Members[0].Assignment != nil {
		t.Fatalf("rebalancing description %+v", d)
	}

	if d, err := h.c.DescribeGroup("nobody"); err != nil || d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("unknown group: %+v %v", d, err)
	}
	h.c.Unload(PartitionFor("g", testPartitions))
	_, err = h.c.DescribeGroup("g")
	wantErr(t, "unloaded", err, ErrNotCoordinator)
}

func TestListGroupsStateFilter(t *testing.T) {
	h := newHarness(t)
	h.formGroup(memberReq("stable", "a"))
	h.formGroup(memberReq("rebalancing", "a"))
	h.startJoin(memberReq("rebalancing", "b"))
	h.waitAwaitingJoin("rebalancing", 1)
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})

	all := h.list(nil)
	want := []GroupListing{
		{"rebalancing", "consumer", "PreparingRebalance"},
		{"simple", "", "Empty"},
		{"stable", "consumer", "Stable"},
	}
	if len(all) != len(want) {
		t.Fatalf("groups %+v", all)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Fatalf("group %d: %+v, want %+v", i, all[i], want[i])
		}
	}
	if got := h.list([]string{"stable", "EMPTY"}); len(got) != 2 || got[0].Group != "simple" || got[1].Group != "stable" {
		t.Fatalf("filtered: %+v", got)
	}
	if got := h.list([]string{"Dead"}); len(got) != 0 {
		t.Fatalf("dead filter: %+v", got)
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	h.formGroup(memberReq("busy", "a"))
	gone := h.formGroup(memberReq("gone", "a"))[0]
	h.c.CommitOffsets(h.ctx, gone.commitReq(oc("t", 0, 1), oc("t", 1, 2)))
	h.c.LeaveGroup(h.ctx, "gone", []LeaveMember{{MemberID: gone.MemberID}})
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})

	errs := h.c.DeleteGroups(h.ctx, []string{"busy", "gone", "nobody", "simple"})
	for i, want := range []error{ErrNonEmptyGroup, nil, ErrGroupIDNotFound, nil} {
		wantErr(t, "group "+string(rune('0'+i)), errs[i], want)
	}
	if got := h.list(nil); len(got) != 1 || got[0].Group != "busy" {
		t.Fatalf("groups after delete: %+v", got)
	}
	if h.committed("gone", tp("t", 0)) != -1 || h.committed("simple", tp("t", 0)) != -1 {
		t.Fatal("a deleted group's offsets are still served")
	}
	// Tombstones: the offsets and the metadata of a group that had some.
	var tombstones []string
	for _, d := range h.groupRecords("gone") {
		if d.tombstone {
			tombstones = append(tombstones, d.kind)
		}
	}
	if len(tombstones) != 3 || tombstones[2] != "group" {
		t.Fatalf("gone's tombstones %v", tombstones)
	}
	for _, d := range h.groupRecords("simple") {
		if d.kind == "group" {
			t.Fatal("a group that never had metadata got a metadata tombstone")
		}
	}
	// Deleted is deleted: a second delete finds nothing.
	wantErr(t, "delete again", h.c.DeleteGroups(h.ctx, []string{"gone"})[0], ErrGroupIDNotFound)
}

// A failed tombstone write leaves the group as it was.
func TestDeleteGroupWriteFailure(t *testing.T) {
	h := newHarness(t)
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})
	h.log.setFail(kerr.NotLeaderForPartition)
	wantErr(t, "delete", h.c.DeleteGroups(h.ctx, []string{"simple"})[0], ErrNotCoordinator)
	h.log.setFail(nil)
	if h.committed("simple", tp("t", 0)) != 1 {
		t.Fatal("a failed delete removed the offsets")
	}
	if got := h.list(nil); len(got) != 1 {
		t.Fatalf("groups %+v", got)
	}
	// And the group is usable: a member may join.
	if res := h.join(memberReq("simple", "a")); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// Reference: KIP-496. A consumer group with members keeps the offsets of
// topics its members subscribe to; others go.
func TestDeleteOffsets(t *testing.T) {
	h := newHarness(t)
	m := h.formGroup(memberReq("g", "a", "t"), memberReq("g", "b", "t", "u"))[0]
	h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 1), oc("u", 0, 2), oc("old", 0, 3)))

	err, errs := h.c.DeleteOffsets(h.ctx, "g", []TopicPartition{tp("t", 0), tp("u", 0), tp("old", 0), tp("never", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{ErrGroupSubscribedToTopic, ErrGroupSubscribedToTopic, nil, nil} {
		wantErr(t, "partition "+string(rune('0'+i)), errs[i], want)
	}
	if h.committed("g", tp("t", 0)) != 1 || h.committed("g", tp("u", 0)) != 2 || h.committed("g", tp("old", 0)) != -1 {
		t.Fatal("wrong offsets deleted")
	}
	var tombstones int
	for _, d := range h.groupRecords("g") {
		if d.tombstone {
			tombstones++
			if d.tp != tp("old", 0) {
				t.Fatalf("tombstone for %v", d.tp)
			}
		}
	}
	if tombstones != 1 {
		t.Fatalf("%d tombstones, want 1 (only old-0 had an offset)", tombstones)
	}

	// Empty: everything goes.
	for _, id := range h.memberIDs("g") {
		h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: id}})
	}
	if err, errs := h.c.DeleteOffsets(h.ctx, "g", []TopicPartition{tp("t", 0)}); err != nil || errs[0] != nil {
		t.Fatalf("delete from empty group: %v %v", err, errs)
	}
	if h.committed("g", tp("t", 0)) != -1 {
		t.Fatal("offset survived")
	}
	h.wantState("g", "Empty") // u-0 is left

	// Its last offset deleted, the Empty group is gone at once, its
	// metadata tombstoned with the offset, as Kafka does.
	if err, errs := h.c.DeleteOffsets(h.ctx, "g", []TopicPartition{tp("u", 0), tp("u", 0)}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("delete of the last offset: %v %v", err, errs)
	}
	h.wantState("g", "Dead")
	if listed := h.list(nil); len(listed) != 0 {
		t.Fatalf("listed after its last offset was deleted: %+v", listed)
	}
	recs := h.groupRecords("g")
	last := recs[len(recs)-1]
	if last.kind != "group" || !last.tombstone || recs[len(recs)-2].tp != tp("u", 0) || !recs[len(recs)-2].tombstone {
		t.Fatalf("last records %+v, %+v; want u-0's tombstone, then the group's", recs[len(recs)-2], last)
	}
	if got := h.reload(); len(got.list(nil)) != 0 {
		t.Fatal("the group came back on reload")
	}
}

func TestDeleteOffsetsGroupErrors(t *testing.T) {
	h := newHarness(t)
	other := memberReq("connect-group", "a")
	other.ProtocolType = "connect"
	h.formGroup(other)
	err, _ := h.c.DeleteOffsets(h.ctx, "connect-group", []TopicPartition{tp("t", 0)})
	wantErr(t, "non-consumer group with members", err, ErrNonEmptyGroup)
	err, _ = h.c.DeleteOffsets(h.ctx, "nobody", []TopicPartition{tp("t", 0)})
	wantErr(t, "unknown group", err, ErrGroupIDNotFound)
	err, _ = h.c.DeleteOffsets(h.ctx, "", []TopicPartition{tp("t", 0)})
	wantErr(t, "empty group id", err, ErrInvalidGroupID)

	// A subscription that does not parse: every topic counts as
	// subscribed, to be safe.
	bad := memberReq("bad", "a")
	bad.Protocols = []Protocol{{Name: "range", Metadata: []byte{0xff}}}
	m := h.formGroup(bad)[0]
	h.c.CommitOffsets(h.ctx, m.commitReq(oc("x", 0, 1)))
	_, errs := h.c.DeleteOffsets(h.ctx, "bad", []TopicPartition{tp("x", 0)})
	wantErr(t, "unparsable subscription", errs[0], ErrGroupSubscribedToTopic)

	// A failed write deletes nothing.
	h.c.LeaveGroup(h.ctx, "bad", []LeaveMember{{MemberID: m.MemberID}})
	h.log.setFail(errors.New("io"))
	_, errs = h.c.DeleteOffsets(h.ctx, "bad", []TopicPartition{tp("x", 0)})
	wantErr(t, "failed write", errs[0], ErrCoordinatorNotAvailable)
	h.log.setFail(nil)
	if h.committed("bad", tp("x", 0)) != 1 {
		t.Fatal("a failed delete removed the offset")
	}
}
