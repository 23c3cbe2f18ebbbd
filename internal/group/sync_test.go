package group

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reference: Kafka's validateSyncGroup and doSyncGroup.
func TestSyncValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*SyncRequest)
		before func(h *harness, ms []joined) // puts the group in the state under test
		want   error
	}{
		{"empty group id", func(r *SyncRequest) { r.Group = "" }, nil, ErrInvalidGroupID},
		{"unknown group", func(r *SyncRequest) { r.Group = "other" }, nil, ErrUnknownMemberID},
		{"unknown member", func(r *SyncRequest) { r.MemberID = "stranger" }, nil, ErrUnknownMemberID},
		{"older generation", func(r *SyncRequest) { r.Generation-- }, nil, ErrIllegalGeneration},
		{"newer generation", func(r *SyncRequest) { r.Generation++ }, nil, ErrIllegalGeneration},
		{"other protocol type", func(r *SyncRequest) { r.ProtocolType = ptr("connect") }, nil, ErrInconsistentGroupProtocol},
		{"other protocol", func(r *SyncRequest) { r.Protocol = ptr("roundrobin") }, nil, ErrInconsistentGroupProtocol},
		{"while preparing a rebalance", func(*SyncRequest) {}, func(h *harness, ms []joined) {
			h.startJoin(memberReq("g", "late"))
			h.waitAwaitingJoin("g", 1)
		}, ErrRebalanceInProgress},
		{"partition not loaded", func(*SyncRequest) {}, func(h *harness, ms []joined) {
			h.c.Unload(PartitionFor("g", testPartitions))
		}, ErrNotCoordinator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
			if tc.before != nil {
				tc.before(h, ms)
			}
			req := ms[1].syncReq(nil)
			req.ProtocolType, req.Protocol = ptr("consumer"), ptr("range")
			tc.mutate(&req)
			wantErr(t, "sync", h.sync(req).Err, tc.want)
		})
	}
}

// Followers that sync first wait for the leader; the leader's assignments
// are committed to the log before anyone is answered, then each member
// gets its own.
func TestSyncStoresAssignmentBeforeAnswering(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b", "t", "u"), memberReq("g", "c")))
	before := len(h.groupRecords("g"))

	follower := h.startSync(ms[1].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	release := h.log.hold()
	defer release()
	// The leader leaves c out: c gets an empty assignment.
	leader := h.startSync(ms[0].syncReq(map[string][]byte{
		ms[0].MemberID: []byte("A"),
		ms[1].MemberID: []byte("B"),
		"not-a-member": []byte("X"),
	}))
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("the assignment is not being written")
		}
		return nil
	})
	follower.parked()
	leader.parked()
	h.wantState("g", "CompletingRebalance")
	release()

	if res := leader.result(); res.Err != nil || string(res.Assignment) != "A" || res.Protocol != "range" || res.ProtocolType != "consumer" {
		t.Fatalf("leader's sync: %+v", res)
	}
	if res := follower.result(); res.Err != nil || string(res.Assignment) != "B" {
		t.Fatalf("follower's sync: %+v", res)
	}
	if res := h.sync(ms[2].syncReq(nil)); res.Err != nil || len(res.Assignment) != 0 {
		t.Fatalf("left-out member's sync: %+v", res)
	}
	h.wantState("g", "Stable")

	recs := h.groupRecords("g")
	if len(recs) != before+1 {
		t.Fatalf("%d group records written, want 1", len(recs)-before)
	}
	v := recs[len(recs)-1].metadata
	if v == nil || v.Version != 3 || v.Generation != 3 || v.ProtocolType != "consumer" || *v.Protocol != "range" || *v.Leader != ms[0].MemberID {
		t.Fatalf("group record %+v", v)
	}
	if len(v.Members) != 3 {
		t.Fatalf("record has %d members", len(v.Members))
	}
	for i, want := range []string{"A", "B", ""} {
		mv := v.Members[i]
		if mv.MemberID != ms[i].MemberID || string(mv.Assignment) != want ||
			!bytes.Equal(mv.Subscription, ms[i].req.Protocols[0].Metadata) ||
			mv.SessionTimeoutMillis != 10000 || mv.RebalanceTimeoutMillis != 30000 || mv.ClientHost != "/127.0.0.1" {
			t.Fatalf("record member %d: %+v", i, mv)
		}
	}
	// A Stable group answers syncs at once with the stored assignment.
	if res := h.sync(ms[1].syncReq(nil)); res.Err != nil || string(res.Assignment) != "B" {
		t.Fatalf("sync in Stable: %+v", res)
	}
}

// A leader leaving while followers wait for its assignment: they are told
// to rejoin, and the group rebalances without it.
func TestLeaderLeavesMidSync(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b"), memberReq("g", "c")))
	s1, s2 := h.startSync(ms[1].syncReq(nil)), h.startSync(ms[2].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	h.waitAwaitingSync("g", ms[2].MemberID)

	err, errs := h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: ms[0].MemberID}})
	if err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", err, errs)
	}
	wantErr(t, "b's parked sync", s1.result().Err, ErrRebalanceInProgress)
	wantErr(t, "c's parked sync", s2.result().Err, ErrRebalanceInProgress)
	h.wantState("g", "PreparingRebalance")

	r1 := h.startJoin(ms[1].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	res2 := h.join(ms[2].rejoinReq())
	res1 := r1.result()
	if res1.Err != nil || res2.Err != nil || res1.Generation != 4 || res1.LeaderID != ms[1].MemberID || len(res1.Members) != 2 {
		t.Fatalf("rejoins: %+v / %+v", res1, res2)
	}
}

// Reference: Kafka's GroupMetadataManager.storeGroup error mapping. A
// failed write of the assignment fails every parked sync and rebalances;
// no assignment is applied and nothing is written.
func TestSyncStoreFailure(t *testing.T) {
	for _, tc := range []struct {
		appendErr error
		want      error
	}{
		{kerr.NotLeaderForPartition, ErrNotCoordinator},
		{kerr.KafkaStorageError, ErrNotCoordinator},
		{kerr.NotEnoughReplicas, ErrCoordinatorNotAvailable},
		{kerr.NotEnoughReplicasAfterAppend, ErrCoordinatorNotAvailable},
		{kerr.RequestTimedOut, ErrRebalanceInProgress},
		{kerr.MessageTooLarge, ErrUnknownServerError},
		{errors.New("disk on fire"), ErrCoordinatorNotAvailable},
	} {
		t.Run(tc.appendErr.Error(), func(t *testing.T) {
			h := newHarness(t)
			ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b")))
			before := len(h.groupRecords("g"))
			follower := h.startSync(ms[1].syncReq(nil))
			h.waitAwaitingSync("g", ms[1].MemberID)
			h.log.setFail(tc.appendErr)
			leader := h.sync(ms[0].syncReq(map[string][]byte{ms[0].MemberID: []byte("A"), ms[1].MemberID: []byte("B")}))
			wantErr(t, "leader's sync", leader.Err, tc.want)
			wantErr(t, "follower's sync", follower.result().Err, tc.want)
			h.wantState("g", "PreparingRebalance")
			if n := len(h.groupRecords("g")); n != before {
				t.Fatalf("%d records written by a failed sync", n-before)
			}
			h.peek("g", func(g *group) {
				for _, m := range g.mu.members {
					if m.assignment != nil {
						t.Fatalf("member %s kept assignment %q", m.id, m.assignment)
					}
				}
			})
		})
	}
}

// Members that never send SyncGroup are removed at the rebalance timeout
// and the group rebalances without them.
func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b")))
	if res := h.sync(ms[0].syncReq(map[string][]byte{ms[0].MemberID: []byte("A")})); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.wantState("g", "Stable")
	// b heartbeats (it is alive) but never syncs.
	for range 5 {
		h.clock.Advance(5 * time.Second)
		wantErr(t, "heartbeat", ms[0].heartbeat(h), nil)
		wantErr(t, "heartbeat", ms[1].heartbeat(h), nil)
	}
	h.wantState("g", "Stable")
	h.clock.Advance(5 * time.Second) // 30s: the rebalance timeout
	h.wantState("g", "PreparingRebalance")
	if ids := h.memberIDs("g"); len(ids) != 1 || ids[0] != ms[0].MemberID {
		t.Fatalf("members %v", ids)
	}
	wantErr(t, "b's heartbeat", ms[1].heartbeat(h), ErrUnknownMemberID)
}

// The leader's SyncGroup completes the rebalance even if its own request
// goes away: the write runs independently of it.
func TestLeaderSyncOutlivesItsRequest(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b")))
	follower := h.startSync(ms[1].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	release := h.log.hold()
	defer release()
	ctx, cancel := contextWithCancel()
	leader := start(t, func() SyncResult {
		return h.c.SyncGroup(ctx, ms[0].syncReq(map[string][]byte{ms[1].MemberID: []byte("B")}))
	})
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("no append waiting")
		}
		return nil
	})
	cancel()
	if res := leader.result(); res.Err == nil {
		t.Fatalf("leader with an ended context answered %+v", res)
	}
	release()
	if res := follower.result(); res.Err != nil || string(res.Assignment) != "B" {
		t.Fatalf("follower: %+v", res)
	}
	h.wantState("g", "Stable")
}
