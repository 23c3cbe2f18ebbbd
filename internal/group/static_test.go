package group

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reference: KIP-345. A static member that restarts (rejoins with no
// member id, same instance id) takes its old place without a rebalance:
// same generation, same assignment, the other members undisturbed; the
// old member id is fenced.
func TestStaticMemberRestartWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"), memberReq("g", "d"))
	old := ms[1]
	before := len(h.groupRecords("g"))

	res := h.join(staticReq("g", "s2"))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.MemberID == old.MemberID || !strings.HasPrefix(res.MemberID, "s2-") {
		t.Fatalf("new member id %q (old %q)", res.MemberID, old.MemberID)
	}
	if res.Generation != old.Generation || res.LeaderID != ms[0].MemberID || len(res.Members) != 0 || res.SkipAssignment {
		t.Fatalf("restart join: %+v", res)
	}
	h.wantState("g", "Stable")

	// The group's metadata with the new id was written before the answer.
	recs := h.groupRecords("g")
	if len(recs) != before+1 || recs[len(recs)-1].metadata.Members[1].MemberID != res.MemberID {
		t.Fatalf("the replacement was not written first")
	}

	restarted := joined{staticReq("g", "s2"), res}
	if sr := h.sync(restarted.syncReq(nil)); sr.Err != nil || string(sr.Assignment) != string(assignmentFor(old.MemberID)) {
		t.Fatalf("restarted member's sync: %+v", sr)
	}
	wantErr(t, "restarted member's heartbeat", restarted.heartbeat(h), nil)
	for _, m := range []joined{ms[0], ms[2]} {
		wantErr(t, "other member's heartbeat", m.heartbeat(h), nil)
	}

	// The old id is a fenced duplicate for every API.
	wantErr(t, "old id heartbeat", old.heartbeat(h), ErrFencedInstanceID)
	wantErr(t, "old id sync", h.sync(old.syncReq(nil)).Err, ErrFencedInstanceID)
	wantErr(t, "old id join", h.join(old.rejoinReq()).Err, ErrFencedInstanceID)
	err, _ := h.c.CommitOffsets(h.ctx, old.commitReq(OffsetCommit{TopicPartition: TopicPartition{"t", 0}, Offset: 1}))
	wantErr(t, "old id commit", err, ErrFencedInstanceID)
	_, errs := h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: old.MemberID, InstanceID: ptr("s2")}})
	wantErr(t, "old id leave", errs[0], ErrFencedInstanceID)
	h.wantState("g", "Stable")
}

// Reference: KIP-814. A static leader restarting learns it leads, with
// every member's metadata, and SkipAssignment; clients before JoinGroup v9
// are instead told the old leader id, so they do not assign.
func TestStaticLeaderRestart(t *testing.T) {
	for _, skip := range []bool{true, false} {
		t.Run(map[bool]string{true: "v9+", false: "before v9"}[skip], func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"))
			req := staticReq("g", "s1")
			req.SupportsSkipAssignment = skip
			res := h.join(req)
			if res.Err != nil || res.Generation != ms[0].Generation {
				t.Fatalf("restart: %+v", res)
			}
			if skip {
				if !res.SkipAssignment || res.LeaderID != res.MemberID || len(res.Members) != 2 || res.Members[0].MemberID != res.MemberID {
					t.Fatalf("v9+ static leader restart: %+v", res)
				}
			} else if res.SkipAssignment || res.LeaderID != ms[0].MemberID || len(res.Members) != 0 {
				t.Fatalf("pre-v9 static leader restart: %+v", res)
			}
			h.wantState("g", "Stable")
			// Leadership moved to the new id all the same.
			h.peek("g", func(g *group) {
				if g.mu.leader != res.MemberID {
					t.Fatalf("leader %s, want %s", g.mu.leader, res.MemberID)
				}
			})
		})
	}
}

// A restarted static member whose metadata cannot be written gets the
// error and the old id is restored: nothing a client was not told about
// changes.
func TestStaticReplaceWriteFailureRestoresOldID(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"))
	h.log.setFail(kerr.NotEnoughReplicas)
	res := h.join(staticReq("g", "s2"))
	wantErr(t, "restart", res.Err, ErrCoordinatorNotAvailable)
	h.log.setFail(nil)
	wantErr(t, "old id heartbeat", ms[1].heartbeat(h), nil)
	if ids := h.memberIDs("g"); ids[1] != ms[1].MemberID {
		t.Fatalf("members %v", ids)
	}
	h.wantState("g", "Stable")
}

// A duplicate instance parked in JoinGroup is fenced the moment another
// process joins with the same instance id.
func TestStaticReplacementFencesParkedDuplicate(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"), staticReq("g", "s3"))
	leader := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	dup := h.startJoin(ms[1].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	restarted := h.startJoin(staticReq("g", "s2")) // PreparingRebalance: joins the rebalance under a new id
	wantErr(t, "parked duplicate", dup.result().Err, ErrFencedInstanceID)
	h.waitAwaitingJoin("g", 2)
	h.join(ms[2].rejoinReq())
	res := restarted.result()
	if res.Err != nil || res.Generation != ms[0].Generation+1 || res.MemberID == ms[1].MemberID {
		t.Fatalf("restarted: %+v", res)
	}
	if lr := leader.result(); lr.Err != nil || len(lr.Members) != 3 {
		t.Fatalf("leader: %+v", lr)
	}
}

// Static members that do not rejoin in time are kept (their session, not
// the rebalance timeout, decides), unlike dynamic ones.
func TestStaticMemberSurvivesRebalanceTimeout(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"), memberReq("g", "d"))
	leader := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	for range 6 { // s2 and d heartbeat but do not rejoin
		wantErr(t, "s2", ms[1].heartbeat(h), ErrRebalanceInProgress)
		wantErr(t, "d", ms[2].heartbeat(h), ErrRebalanceInProgress)
		h.clock.Advance(5 * time.Second)
	}
	res := leader.result()
	if res.Err != nil || len(res.Members) != 2 || res.Members[1].MemberID != ms[1].MemberID {
		t.Fatalf("leader after the rebalance timeout: %+v", res)
	}
}

// A restarted static member whose protocols would change the group's
// protocol cannot simply take its place: the group rebalances.
func TestStaticRestartWithNewProtocolRebalances(t *testing.T) {
	h := newHarness(t)
	a := staticReq("g", "s1")
	a.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t")}, {Name: "sticky", Metadata: consumerMeta("t")}}
	b := staticReq("g", "s2")
	b.Protocols = a.Protocols
	ms := h.formGroup(a, b)
	if ms[0].Protocol != "range" {
		t.Fatalf("protocol %q, want range (both members' first choice)", ms[0].Protocol)
	}
	// s2 comes back supporting only sticky: it may join (a supports
	// sticky too), but then sticky is the only common protocol.
	b.Protocols = []Protocol{{Name: "sticky", Metadata: consumerMeta("t")}}
	c := h.startJoin(b)
	h.waitAwaitingJoin("g", 1)
	c.parked()
	h.wantState("g", "PreparingRebalance")
}

// A static member joining for the first time is added like any member
// (no MEMBER_ID_REQUIRED round trip), and leaving by instance id empties
// its slot so a later join is new again.
func TestStaticFirstJoinAndLeaveByInstance(t *testing.T) {
	h := newHarness(t)
	req := staticReq("g", "s1")
	req.RequireKnownMemberID = true
	res := h.join(req)
	if res.Err != nil || res.Generation != 1 {
		t.Fatalf("first static join: %+v", res)
	}
	if err, errs := h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{InstanceID: ptr("s1")}}); err != nil || errs[0] != nil {
		t.Fatalf("leave by instance: %v %v", err, errs)
	}
	h.wantState("g", "Empty")
	if res := h.join(staticReq("g", "s1")); res.Err != nil || res.Generation != 3 {
		t.Fatalf("rejoin after leaving: %+v", res)
	}
}

// Regression: a restarted static member whose metadata write is in flight
// when the rebalance timeout drops it (its old id never synced) is
// answered, not left parked until its context ends.
func TestStaticReplacementDroppedWhileWriting(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(staticReq("g", "s1"), staticReq("g", "s2")))
	// Only the leader syncs: the group is Stable with s2 never synced.
	if res := h.sync(ms[0].syncReq(map[string][]byte{ms[0].MemberID: []byte("A")})); res.Err != nil {
		t.Fatal(res.Err)
	}
	release := h.log.hold()
	defer release()
	restart := h.startJoin(staticReq("g", "s2"))
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errEmptyNotWritten
		}
		return nil
	})
	for range 6 { // to the rebalance timeout (30s): s2, now the new id, never synced
		restart.parked()
		wantErr(t, "leader heartbeat", ms[0].heartbeat(h), nil)
		h.clock.Advance(5 * time.Second)
	}
	wantErr(t, "restarted member's join", restart.result().Err, ErrUnknownMemberID)
	release()
	h.wantState("g", "PreparingRebalance")
}

// When only static members remain and none rejoined by the rebalance
// timeout, the join waits another timeout (their sessions decide) rather
// than completing with nobody.
func TestRebalanceWaitsForStaticMembers(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(staticReq("g", "s1"), staticReq("g", "s2"))
	d := h.startJoin(memberReq("g", "d"))
	h.waitAwaitingJoin("g", 1)
	var did string
	h.peek("g", func(g *group) {
		for _, m := range g.mu.members {
			if m.instanceID == nil {
				did = m.id
			}
		}
	})
	h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: did}})
	wantErr(t, "d's join", d.result().Err, ErrUnknownMemberID)
	for range 9 { // 45s: past one rebalance timeout; the static members heartbeat
		for _, m := range ms {
			wantErr(t, "heartbeat", m.heartbeat(h), ErrRebalanceInProgress)
		}
		h.clock.Advance(5 * time.Second)
	}
	h.wantState("g", "PreparingRebalance")
	if ids := h.memberIDs("g"); len(ids) != 2 {
		t.Fatalf("static members dropped: %v", ids)
	}
	// s1 rejoins; s2 still has not, so the join completes only when the
	// re-armed timeout (at 60s) passes, with both (s2 kept: it is static).
	s1 := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	for range 3 {
		s1.parked()
		wantErr(t, "s2 heartbeat", ms[1].heartbeat(h), ErrRebalanceInProgress)
		h.clock.Advance(5 * time.Second)
	}
	res := s1.result()
	if res.Err != nil || res.LeaderID != ms[0].MemberID || len(res.Members) != 2 {
		t.Fatalf("s1's join: %+v", res)
	}
}

// A static member whose replacement write outlasts its session timeout
// still has a session once answered: if its client then dies, the
// member expires like any other.
func TestStaticReplacementRestartsSessionWhenAnswered(t *testing.T) {
	h := newHarness(t)
	// One member: nobody else's session runs out and rebalances the
	// group while the clock jumps.
	h.formGroup(staticReq("g", "s2"))
	session := staticReq("g", "s2").SessionTimeout
	release := h.log.hold()
	restart := h.startJoin(staticReq("g", "s2"))
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("the replacement's write is not waiting yet")
		}
		return nil
	})
	h.clock.Advance(session + time.Second) // the session timer fires while the join is parked
	restart.parked()
	release()
	res := restart.result()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	// Nobody heartbeats for s2 from here on.
	h.clock.Advance(session + time.Second)
	h.eventually(func() error {
		for _, id := range h.memberIDs("g") {
			if id == res.MemberID {
				return fmt.Errorf("member %s still in the group a session timeout after its last word", id)
			}
		}
		return nil
	})
}
