package group

import (
	"testing"
	"time"
)

// Reference: Kafka's handleHeartbeat and validateHeartbeat.
func TestHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(h *harness, ms []joined) []joined
		req    func(ms []joined) HeartbeatRequest
		want   error
	}{
		{"stable", nil, func(ms []joined) HeartbeatRequest { return ms[1].heartbeatReq() }, nil},
		{"empty group id", nil, func(ms []joined) HeartbeatRequest {
			r := ms[1].heartbeatReq()
			r.Group = ""
			return r
		}, ErrInvalidGroupID},
		{"unknown member", nil, func(ms []joined) HeartbeatRequest {
			r := ms[1].heartbeatReq()
			r.MemberID = "stranger"
			return r
		}, ErrUnknownMemberID},
		{"unknown group", nil, func(ms []joined) HeartbeatRequest {
			r := ms[1].heartbeatReq()
			r.Group = "nope"
			return r
		}, ErrUnknownMemberID},
		{"wrong generation", nil, func(ms []joined) HeartbeatRequest {
			r := ms[1].heartbeatReq()
			r.Generation = 1
			return r
		}, ErrIllegalGeneration},
		{"preparing rebalance", func(h *harness, ms []joined) []joined {
			h.startJoin(memberReq("g", "late"))
			h.waitAwaitingJoin("g", 1)
			return ms
		}, func(ms []joined) HeartbeatRequest { return ms[1].heartbeatReq() }, ErrRebalanceInProgress},
		{"completing rebalance", func(h *harness, ms []joined) []joined {
			return h.rebalance(ms)
		}, func(ms []joined) HeartbeatRequest { return ms[1].heartbeatReq() }, nil},
		{"after leaving", func(h *harness, ms []joined) []joined {
			h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: ms[1].MemberID}})
			return ms
		}, func(ms []joined) HeartbeatRequest { return ms[1].heartbeatReq() }, ErrUnknownMemberID},
		{"partition not loaded", func(h *harness, ms []joined) []joined {
			h.c.Unload(PartitionFor("g", testPartitions))
			return ms
		}, func(ms []joined) HeartbeatRequest { return ms[1].heartbeatReq() }, ErrNotCoordinator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
			if tc.before != nil {
				ms = tc.before(h, ms)
			}
			wantErr(t, "heartbeat", h.c.Heartbeat(tc.req(ms)), tc.want)
		})
	}
}

// A member that stops heartbeating is removed when its session times out
// and the group rebalances without it; heartbeats keep the others.
func TestSessionExpiry(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"), memberReq("g", "c"))
	for range 3 {
		h.clock.Advance(3 * time.Second)
		wantErr(t, "a", ms[0].heartbeat(h), nil)
		wantErr(t, "b", ms[1].heartbeat(h), nil)
	}
	h.wantState("g", "Stable") // t=9s: c's session (10s) has not ended
	h.clock.Advance(time.Second)
	h.wantState("g", "PreparingRebalance")
	wantErr(t, "c", ms[2].heartbeat(h), ErrUnknownMemberID)
	ms = h.rebalance(ms[:2])
	if ms[0].Generation != 3 || len(ms[0].Members) != 2 {
		t.Fatalf("after c's expiry: %+v", ms[0].JoinResult)
	}
}

// The last member's session ending empties the group, and the Empty group
// is written to the log with the next generation and no members.
func TestLastMemberExpiryEmptiesGroup(t *testing.T) {
	h := newHarness(t)
	h.formGroup(memberReq("g", "a"))
	h.clock.Advance(10 * time.Second)
	h.wantState("g", "Empty")
	h.eventually(func() error {
		recs := h.groupRecords("g")
		last := recs[len(recs)-1]
		if last.metadata == nil || last.metadata.Generation != 2 || len(last.metadata.Members) != 0 {
			return errEmptyNotWritten
		}
		if last.metadata.Protocol != nil || last.metadata.Leader != nil || last.metadata.ProtocolType != "consumer" {
			t.Fatalf("empty group record %+v", last.metadata)
		}
		if last.metadata.CurrentStateTimestamp != t0.Add(10*time.Second).UnixMilli() {
			t.Fatalf("state timestamp %d, want when it became empty", last.metadata.CurrentStateTimestamp)
		}
		return nil
	})
}

// Reference: KIP-62. A member parked in JoinGroup (or SyncGroup) is alive
// however long the rebalance takes: the rebalance timeout bounds it, not
// the session.
func TestParkedMemberOutlivesItsSession(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	ra := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	// b heartbeats but does not rejoin; a waits in JoinGroup past its own
	// 10s session, up to the 30s rebalance timeout.
	for range 5 {
		wantErr(t, "b's heartbeat", ms[1].heartbeat(h), ErrRebalanceInProgress)
		h.clock.Advance(5 * time.Second)
	}
	ra.parked()
	h.wantState("g", "PreparingRebalance")
	if ids := h.memberIDs("g"); len(ids) != 2 {
		t.Fatalf("members at 25s: %v", ids)
	}
	h.clock.Advance(5 * time.Second) // the rebalance timeout: the join completes with a alone
	res := ra.result()
	if res.Err != nil || len(res.Members) != 1 || res.Members[0].MemberID != ms[0].MemberID {
		t.Fatalf("a's join: %+v", res)
	}
	// Parked in SyncGroup past the session timeout too (the leader never
	// syncs here: it is a itself, so park a follower in a bigger group).
	h2 := newHarness(t)
	ms2 := h2.rebalance(h2.formGroup(memberReq("g", "a"), memberReq("g", "b")))
	s := h2.startSync(ms2[1].syncReq(nil))
	h2.waitAwaitingSync("g", ms2[1].MemberID)
	wantErr(t, "leader heartbeat", ms2[0].heartbeat(h2), nil)
	h2.clock.Advance(8 * time.Second)
	wantErr(t, "leader heartbeat", ms2[0].heartbeat(h2), nil)
	h2.clock.Advance(8 * time.Second) // 16s: b parked, a heartbeating
	s.parked()
	if ids := h2.memberIDs("g"); len(ids) != 2 {
		t.Fatalf("members %v", ids)
	}
}

var errEmptyNotWritten = errorString("the empty group has not been written yet")

type errorString string

func (e errorString) Error() string { return string(e) }
