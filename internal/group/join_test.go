package group

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestJoinAloneCompletesAtOnce(t *testing.T) {
	h := newHarness(t)
	res := h.join(memberReq("g", "c1"))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Generation != 1 || res.LeaderID != res.MemberID || res.Protocol != "range" || res.ProtocolType != "consumer" {
		t.Fatalf("join result %+v", res)
	}
	if !strings.HasPrefix(res.MemberID, "c1-") {
		t.Fatalf("member id %q does not start with the client id", res.MemberID)
	}
	if len(res.Members) != 1 || res.Members[0].MemberID != res.MemberID || !bytes.Equal(res.Members[0].Metadata, consumerMeta("t")) {
		t.Fatalf("leader's members %+v", res.Members)
	}
	h.wantState("g", "CompletingRebalance")
}

// Bad JoinGroups get Kafka's error and leave nothing behind.
func TestJoinValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*JoinRequest)
		want   error
	}{
		{"empty group id", func(r *JoinRequest) { r.Group = "" }, ErrInvalidGroupID},
		{"session timeout below min", func(r *JoinRequest) { r.SessionTimeout = 999 * time.Millisecond }, ErrInvalidSessionTimeout},
		{"session timeout above max", func(r *JoinRequest) { r.SessionTimeout = time.Hour + time.Millisecond }, ErrInvalidSessionTimeout},
		{"member id for an unknown group", func(r *JoinRequest) { r.MemberID = "c1-stale" }, ErrUnknownMemberID},
		{"first member without protocol type", func(r *JoinRequest) { r.ProtocolType = "" }, ErrInconsistentGroupProtocol},
		{"first member without protocols", func(r *JoinRequest) { r.Protocols = nil }, ErrInconsistentGroupProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			req := memberReq("g", "c1")
			tc.mutate(&req)
			res := h.join(req)
			wantErr(t, "join", res.Err, tc.want)
			if res.Generation != -1 {
				t.Fatalf("generation %d on error, want -1", res.Generation)
			}
			if groups := h.list(nil); len(groups) != 0 {
				t.Fatalf("a failed join left groups %+v", groups)
			}
			if n := h.log.appendCount(); n != 0 {
				t.Fatalf("%d appends for a failed join", n)
			}
		})
	}
}

func TestJoinCoordinatorStatus(t *testing.T) {
	h := newHarness(t)
	h.c.Unload(PartitionFor("g", testPartitions))
	wantErr(t, "join after unload", h.join(memberReq("g", "c1")).Err, ErrNotCoordinator)
	h.c.Close()
	wantErr(t, "join after close", h.join(memberReq("g", "c1")).Err, ErrCoordinatorNotAvailable)
}

// Reference: Kafka's GroupMetadata.supportsProtocols: a joining member
// needs the group's protocol type and a protocol every member supports.
func TestJoinProtocolAgreement(t *testing.T) {
	for _, tc := range []struct {
		name         string
		protocolType string
		protocols    []string
		want         error
	}{
		{"other protocol type", "connect", []string{"range"}, ErrInconsistentGroupProtocol},
		{"no common protocol", "consumer", []string{"roundrobin", "sticky"}, ErrInconsistentGroupProtocol},
		{"empty protocol list", "consumer", nil, ErrInconsistentGroupProtocol},
		{"one common protocol among others", "consumer", []string{"sticky", "range"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.formGroup(memberReq("g", "c1"), memberReq("g", "c2"))
			req := memberReq("g", "c3")
			req.ProtocolType = tc.protocolType
			req.Protocols = nil
			for _, p := range tc.protocols {
				req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: consumerMeta("t")})
			}
			if tc.want != nil {
				wantErr(t, "join", h.join(req).Err, tc.want)
				h.wantState("g", "Stable") // refused before it could start a rebalance
				return
			}
			c := h.startJoin(req)
			h.waitAwaitingJoin("g", 1)
			c.parked()
			h.wantState("g", "PreparingRebalance")
		})
	}
}

// Reference: Kafka's GroupMetadata.selectProtocol: candidates are the
// protocols all members support; each member votes for its first
// candidate; most votes wins.
func TestSelectProtocolByVote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string // each member's protocols, in preference order
		want    string
	}{
		{"single member's first choice", [][]string{{"sticky", "range"}}, "sticky"},
		{"majority of first choices", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}, {"range", "roundrobin", "sticky"}}, "range"},
		{"a choice not common to all is skipped", [][]string{{"sticky", "range"}, {"range"}, {"sticky", "range"}}, "range"},
		{"tie goes to the smallest name", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}}, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup("g", 0, t0)
			for i, names := range tc.members {
				m := &member{id: string(rune('a' + i)), protocolType: "consumer"}
				for _, n := range names {
					m.protocols = append(m.protocols, Protocol{Name: n})
				}
				g.addMemberLocked(m)
			}
			if got := g.selectProtocolLocked(); got != tc.want {
				t.Fatalf("selected %q, want %q", got, tc.want)
			}
		})
	}
}

// Reference: KIP-394. A new dynamic member first gets an id with
// MEMBER_ID_REQUIRED; joining with it adds the member. Until it does, or
// its session timeout passes, a rebalance waits for it.
func TestMemberIDRequired(t *testing.T) {
	h := newHarness(t)
	a := h.formGroup(memberReq("g", "a"))[0]

	req := memberReq("g", "b")
	req.RequireKnownMemberID = true
	first := h.join(req)
	wantErr(t, "first join", first.Err, ErrMemberIDRequired)
	if !strings.HasPrefix(first.MemberID, "b-") {
		t.Fatalf("MEMBER_ID_REQUIRED carried id %q", first.MemberID)
	}
	h.wantState("g", "Stable") // an outstanding id is not a member yet

	// The leader rejoins; the rebalance waits for the outstanding id.
	ra := h.startJoin(a.rejoinReq())
	h.waitAwaitingJoin("g", 1)
	ra.parked()
	req.MemberID = first.MemberID
	rb := h.startJoin(req)
	resA, resB := ra.result(), rb.result()
	if resA.Err != nil || resB.Err != nil || resB.MemberID != first.MemberID || len(resA.Members) != 2 {
		t.Fatalf("joins after MEMBER_ID_REQUIRED: %+v / %+v", resA, resB)
	}

	ms := []joined{{a.req, resA}, {req, resB}}
	h.syncAll(ms)

	// An id that is never used expires after the session timeout, and
	// the rebalance it held up completes.
	req2 := memberReq("g", "c")
	req2.RequireKnownMemberID = true
	wantErr(t, "c's first join", h.join(req2).Err, ErrMemberIDRequired)
	ra = h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	rb = h.startJoin(ms[1].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	ra.parked()
	h.clock.Advance(req2.SessionTimeout - time.Millisecond)
	ra.parked()
	h.clock.Advance(time.Millisecond)
	if res := ra.result(); res.Err != nil || len(res.Members) != 2 {
		t.Fatalf("join after the unused id expired: %+v", res)
	}
	if res := rb.result(); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// Reference: KIP-134, Kafka's InitialDelayedJoin. A group rebalancing from
// Empty waits InitialRebalanceDelay; each delay in which a new member
// arrived is followed by another, never past the rebalance timeout.
func TestInitialRebalanceDelay(t *testing.T) {
	const delay = 3 * time.Second
	newDelayed := func(t *testing.T) *harness {
		return newHarness(t, func(c *Config) { c.InitialRebalanceDelay = delay })
	}

	t.Run("extended once for a late member", func(t *testing.T) {
		h := newDelayed(t)
		a := h.startJoin(memberReq("g", "a"))
		h.waitAwaitingJoin("g", 1)
		h.clock.Advance(2 * time.Second)
		a.parked()
		b := h.startJoin(memberReq("g", "b"))
		h.waitAwaitingJoin("g", 2)
		h.clock.Advance(time.Second) // t=3s: b arrived during the delay
		a.parked()
		h.clock.Advance(delay - time.Millisecond)
		a.parked()
		h.clock.Advance(time.Millisecond) // t=6s: a quiet delay
		ra, rb := a.result(), b.result()
		if ra.Err != nil || rb.Err != nil || ra.Generation != 1 || len(ra.Members) != 2 {
			t.Fatalf("results %+v / %+v", ra, rb)
		}
	})

	t.Run("capped by the rebalance timeout", func(t *testing.T) {
		h := newDelayed(t)
		first := memberReq("g", "m0")
		first.RebalanceTimeout = 10 * time.Second
		calls := []*call[JoinResult]{h.startJoin(first)}
		h.waitAwaitingJoin("g", 1)
		// A new member every second: every delay sees one arrive.
		for i := 1; i < 10; i++ {
			h.clock.Advance(time.Second)
			calls[0].parked()
			calls = append(calls, h.startJoin(memberReq("g", "m"+string(rune('0'+i)))))
			h.waitAwaitingJoin("g", i+1)
		}
		h.clock.Advance(time.Second) // t=10s: the rebalance timeout
		for i, c := range calls {
			if res := c.result(); res.Err != nil || res.Generation != 1 {
				t.Fatalf("member %d: %+v", i, res)
			}
		}
	})

	t.Run("not applied to a group that was stable", func(t *testing.T) {
		h := newDelayed(t)
		a := h.startJoin(memberReq("g", "a"))
		h.waitAwaitingJoin("g", 1)
		h.clock.Advance(delay)
		ra := a.result()
		// A rebalance of a non-empty group completes as soon as everyone
		// has joined.
		b := h.startJoin(memberReq("g", "b"))
		h.waitAwaitingJoin("g", 1)
		if res := h.join(joined{memberReq("g", "a"), ra}.rejoinReq()); res.Err != nil || res.Generation != 2 {
			t.Fatalf("rejoin: %+v", res)
		}
		if res := b.result(); res.Err != nil || res.Generation != 2 {
			t.Fatalf("new member: %+v", res)
		}
	})
}

// A member joining a Stable group starts a rebalance: heartbeats say so,
// and it completes once every member has rejoined, the leader getting
// everyone's metadata.
func TestJoinDuringRebalance(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	c := h.startJoin(memberReq("g", "c", "t", "u"))
	h.waitAwaitingJoin("g", 1)
	h.wantState("g", "PreparingRebalance")
	wantErr(t, "heartbeat during rebalance", ms[1].heartbeat(h), ErrRebalanceInProgress)
	ra := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	c.parked()
	ra.parked()
	rb := h.startJoin(ms[1].rejoinReq())
	resA, resB, resC := ra.result(), rb.result(), c.result()
	for _, r := range []JoinResult{resA, resB, resC} {
		if r.Err != nil || r.Generation != 3 || r.LeaderID != ms[0].MemberID {
			t.Fatalf("join result %+v", r)
		}
	}
	if len(resB.Members) != 0 || len(resC.Members) != 0 {
		t.Fatal("a follower got the members' metadata")
	}
	if len(resA.Members) != 3 || !bytes.Equal(resA.Members[2].Metadata, consumerMeta("t", "u")) {
		t.Fatalf("leader's members %+v", resA.Members)
	}
	h.wantState("g", "CompletingRebalance")
	wantErr(t, "heartbeat between join and sync", joined{ms[1].req, resB}.heartbeat(h), nil)
	wantErr(t, "heartbeat of the old generation", ms[1].heartbeat(h), ErrIllegalGeneration)
}

// Reference: KIP-62. A member that keeps heartbeating but does not rejoin
// within the rebalance timeout is removed; if it led, a rejoined member
// leads.
func TestRebalanceTimeoutRemovesMembersThatDidNotRejoin(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"), memberReq("g", "c"))
	leader := ms[0]
	// c subscribes to another topic, which starts a rebalance; b rejoins.
	creq := ms[2].rejoinReq()
	creq.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t", "u")}}
	rc := h.startJoin(creq)
	h.waitAwaitingJoin("g", 1)
	rb := h.startJoin(ms[1].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	// The leader is busy: its heartbeats keep its session alive, but the
	// rebalance timeout (30s) does not wait for it.
	for elapsed := time.Duration(0); elapsed < 30*time.Second; elapsed += 5 * time.Second {
		wantErr(t, "leader heartbeat", leader.heartbeat(h), ErrRebalanceInProgress)
		rb.parked()
		h.clock.Advance(5 * time.Second)
	}
	resB, resC := rb.result(), rc.result()
	if resB.Err != nil || resC.Err != nil || resB.Generation != 3 {
		t.Fatalf("results %+v / %+v", resB, resC)
	}
	if resB.LeaderID != ms[1].MemberID || len(resB.Members) != 2 {
		t.Fatalf("new leader %s with %d members, want %s with 2", resB.LeaderID, len(resB.Members), ms[1].MemberID)
	}
	wantErr(t, "removed leader's heartbeat", leader.heartbeat(h), ErrUnknownMemberID)
	if ids := h.memberIDs("g"); len(ids) != 2 {
		t.Fatalf("members %v", ids)
	}
}

// Reference: Kafka's doCurrentMemberJoinGroup. A known member rejoining
// gets the current generation back when that is all it needs; otherwise
// a rebalance.
func TestRejoinKnownMember(t *testing.T) {
	for _, tc := range []struct {
		name      string
		state     string // "Stable" or "CompletingRebalance"
		leader    bool
		newTopics bool
		rebalance bool
	}{
		{"stable follower, same metadata", "Stable", false, false, false},
		{"stable follower, new metadata", "Stable", false, true, true},
		{"stable leader, same metadata", "Stable", true, false, true},
		{"awaiting sync, follower same metadata", "CompletingRebalance", false, false, false},
		{"awaiting sync, leader same metadata", "CompletingRebalance", true, false, false},
		{"awaiting sync, new metadata", "CompletingRebalance", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
			if tc.state == "CompletingRebalance" {
				ms = h.rebalance(ms) // generation 3, awaiting sync
			}
			h.wantState("g", tc.state)
			gen := ms[0].Generation
			m := ms[1]
			if tc.leader {
				m = ms[0]
			}
			req := m.rejoinReq()
			if tc.newTopics {
				req.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t", "new")}}
			}
			c := h.startJoin(req)
			if !tc.rebalance {
				res := c.result()
				if res.Err != nil || res.Generation != gen || res.MemberID != m.MemberID || res.LeaderID != ms[0].MemberID {
					t.Fatalf("rejoin answered %+v", res)
				}
				if tc.leader != (len(res.Members) == 2) {
					t.Fatalf("leader=%v got %d members", tc.leader, len(res.Members))
				}
				h.wantState("g", tc.state)
				return
			}
			h.waitAwaitingJoin("g", 1)
			c.parked()
			h.wantState("g", "PreparingRebalance")
			other := ms[0]
			if m.MemberID == other.MemberID {
				other = ms[1]
			}
			ores := h.join(other.rejoinReq())
			res := c.result()
			if res.Err != nil || ores.Err != nil || res.Generation != gen+1 {
				t.Fatalf("rebalance results %+v / %+v", res, ores)
			}
			if tc.newTopics {
				lead := res
				if lead.LeaderID != lead.MemberID {
					lead = ores
				}
				for _, mm := range lead.Members {
					if mm.MemberID == m.MemberID && !bytes.Equal(mm.Metadata, consumerMeta("t", "new")) {
						t.Fatal("the leader did not get the member's new metadata")
					}
				}
			}
		})
	}
}

// A rebalance started while the group awaits sync answers the parked
// syncs REBALANCE_IN_PROGRESS.
func TestRebalanceDuringSyncFailsParkedSyncs(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	ms = h.rebalance(ms)
	s := h.startSync(ms[1].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	c := h.startJoin(memberReq("g", "c"))
	wantErr(t, "parked sync", s.result().Err, ErrRebalanceInProgress)
	c.parked()
	h.wantState("g", "PreparingRebalance")
}

func TestGroupMaxSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxGroupSize = 2 })
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	res := h.join(memberReq("g", "c"))
	wantErr(t, "third member", res.Err, ErrGroupMaxSizeReached)
	if res.MemberID != "" {
		t.Fatalf("refused member got id %q", res.MemberID)
	}
	h.wantState("g", "Stable")
	// Existing members still rejoin.
	h.rebalance(ms)
}

func TestJoinContextEndReturnsPromptly(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "c1"), memberReq("g", "c2"))
	ctx, cancel := context.WithCancel(context.Background())
	c := start(t, func() JoinResult { return h.c.JoinGroup(ctx, memberReq("g", "c3")) })
	h.waitAwaitingJoin("g", 1)
	c.parked()
	cancel()
	if res := c.result(); res.Err == nil {
		t.Fatalf("join with ended context answered %+v", res)
	}
	// The member stays, counted as joined: the others' rejoins complete
	// the rebalance with it.
	r0 := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	r1 := h.startJoin(ms[1].rejoinReq())
	a, b := r0.result(), r1.result()
	if a.Err != nil || b.Err != nil || len(a.Members) != 3 {
		t.Fatalf("rejoins: %+v %+v", a, b)
	}
	ms[0].JoinResult, ms[1].JoinResult = a, b
	// It never syncs or heartbeats: its session ends and it is removed,
	// while the others' heartbeats keep them.
	h.clock.Advance(5 * time.Second)
	for _, m := range ms {
		wantErr(t, "heartbeat", m.heartbeat(h), nil)
	}
	h.clock.Advance(5 * time.Second)
	if ids := h.memberIDs("g"); len(ids) != 2 || ids[0] != a.MemberID || ids[1] != b.MemberID {
		t.Fatalf("members after the absent member's session: %v", ids)
	}
	h.wantState("g", "PreparingRebalance")
}

// A second JoinGroup of a parked member supersedes the first, which is
// answered rather than left hanging.
func TestSupersededJoinIsAnswered(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"), memberReq("g", "c"))
	leader := h.startJoin(ms[0].rejoinReq())
	h.waitAwaitingJoin("g", 1)
	first := h.startJoin(ms[1].rejoinReq())
	h.waitAwaitingJoin("g", 2)
	second := h.startJoin(ms[1].rejoinReq())
	wantErr(t, "superseded join", first.result().Err, ErrRebalanceInProgress)
	h.waitAwaitingJoin("g", 2)
	second.parked()
	h.join(ms[2].rejoinReq())
	if res := second.result(); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := leader.result(); res.Err != nil || len(res.Members) != 3 {
		t.Fatalf("leader: %+v", res)
	}
}
