package group

import (
	"testing"
)

// Reference: KIP-345's batch LeaveGroup: each member answers for itself.
func TestLeaveGroupBatch(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), staticReq("g", "s1"), staticReq("g", "s2"), memberReq("g", "d"))
	pending := memberReq("g", "p")
	pending.RequireKnownMemberID = true
	pid := h.join(pending).MemberID

	err, errs := h.c.LeaveGroup(h.ctx, "g", []LeaveMember{
		{MemberID: ms[0].MemberID, Reason: "shutting down"}, // a dynamic member
		{MemberID: "stranger"},                              // unknown
		{InstanceID: ptr("s1")},                             // admin removal by instance id
		{MemberID: "stale-id", InstanceID: ptr("s2")},       // s2's instance, another member id
		{InstanceID: ptr("nobody")},                         // unknown instance
		{},                                                  // neither
		{MemberID: pid},                                     // an unused MEMBER_ID_REQUIRED id
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, ErrUnknownMemberID, nil, ErrFencedInstanceID, ErrUnknownMemberID, ErrUnknownMemberID, nil}
	for i := range want {
		wantErr(t, "member "+string(rune('0'+i)), errs[i], want[i])
	}
	ids := h.memberIDs("g")
	if len(ids) != 2 || ids[0] != ms[2].MemberID || ids[1] != ms[3].MemberID {
		t.Fatalf("members left %v", ids)
	}
	h.peek("g", func(g *group) {
		if len(g.mu.pending) != 0 {
			t.Fatal("the unused id is still outstanding")
		}
		if g.mu.leader != ms[2].MemberID {
			t.Fatalf("leader %s, want the longest-standing remaining member %s", g.mu.leader, ms[2].MemberID)
		}
	})
	h.wantState("g", "PreparingRebalance")
}

func TestLeaveGroupErrors(t *testing.T) {
	h := newHarness(t)
	err, _ := h.c.LeaveGroup(h.ctx, "", []LeaveMember{{MemberID: "x"}})
	wantErr(t, "empty group id", err, ErrInvalidGroupID)
	err, errs := h.c.LeaveGroup(h.ctx, "unknown", []LeaveMember{{MemberID: "x"}, {MemberID: "y"}})
	if err != nil || len(errs) != 2 {
		t.Fatalf("unknown group: %v %v", err, errs)
	}
	for _, e := range errs {
		wantErr(t, "unknown group's member", e, ErrUnknownMemberID)
	}
	h.c.Unload(PartitionFor("g", testPartitions))
	err, _ = h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: "x"}})
	wantErr(t, "not loaded", err, ErrNotCoordinator)
}

// The last member leaving empties the group at once (no rebalance to wait
// for) and a new member starts a new generation.
func TestLastMemberLeaves(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"))
	if err, errs := h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: ms[0].MemberID}}); err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", err, errs)
	}
	h.wantState("g", "Empty")
	if res := h.join(memberReq("g", "b")); res.Err != nil || res.Generation != 3 {
		t.Fatalf("join after empty: %+v", res)
	}
}

// A new member parked in its first JoinGroup that leaves is answered
// UNKNOWN_MEMBER_ID and the rebalance goes on without it.
func TestParkedNewMemberLeaves(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	c := h.startJoin(memberReq("g", "c"))
	h.waitAwaitingJoin("g", 1)
	var cid string
	h.peek("g", func(g *group) {
		for _, m := range g.membersLocked() {
			if m.joinWaiter != nil {
				cid = m.id
			}
		}
	})
	h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: cid}})
	wantErr(t, "c's parked join", c.result().Err, ErrUnknownMemberID)
	after := h.rebalance(ms)
	if len(after[0].Members) != 2 {
		t.Fatalf("leader got %d members, want 2", len(after[0].Members))
	}
}
