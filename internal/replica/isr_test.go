package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// memController commits AlterPartition requests for partition r-0 the
// way the active controller does (the epoch checks, then the new ISR at
// partition epoch + 1), and never sends the leader an image: the
// leader hears of a commit only from the answer, as a node cut off
// from the metadata log's leader but not from the controller does.
type memController struct {
	mu    sync.Mutex
	state controlplane.PartitionState
	sent  int // requests received
	// loseAnswers: commit, then answer an error, as a dropped
	// connection does after the controller committed.
	loseAnswers bool
}

func (c *memController) AlterPartition(_ context.Context, req controlplane.AlterPartition) (controlplane.PartitionState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent++
	switch {
	case req.LeaderEpoch != c.state.LeaderEpoch:
		return controlplane.PartitionState{}, fmt.Errorf("%w: leader epoch %d, the partition's is %d", controlplane.ErrFencedLeaderEpoch, req.LeaderEpoch, c.state.LeaderEpoch)
	case req.PartitionEpoch != c.state.PartitionEpoch:
		return controlplane.PartitionState{}, fmt.Errorf("%w: partition epoch %d, the partition's is %d", controlplane.ErrInvalidUpdateVersion, req.PartitionEpoch, c.state.PartitionEpoch)
	}
	c.state.ISR = slices.Clone(req.NewISR)
	c.state.PartitionEpoch++
	if c.loseAnswers {
		return controlplane.PartitionState{}, errors.New("connection reset by peer")
	}
	return c.state, nil
}

func (c *memController) committed() (controlplane.PartitionState, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state
	st.ISR = slices.Clone(st.ISR)
	return st, c.sent
}

// The maximal-ISR rule: once the controller has committed a member into
// the ISR, the leader counts it for the high watermark, although its
// image has not shown the change (and an older image arriving does not
// take it back), and also when the answer was lost. Otherwise the leader
// would acknowledge writes that member lacks while the controller may
// elect it: acknowledged writes lost in the next failover.
func TestLeaderCountsACommittedMemberBeforeItsImage(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered", true: "answer-lost"}[lose], func(t *testing.T) {
			ctrl := &memController{state: controlplane.PartitionState{Leader: 1, ISR: []int32{1, 2}}, loseAnswers: lose}
			leaders, nodes := newNodes(t, 3, func(o *Options) {
				if o.NodeID == 1 {
					o.ISR = ctrl
				}
			})
			leader := nodes[0]
			image := metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}
			for _, n := range nodes {
				n.setPartition(image)
			}
			if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksAll, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			p, _ := leader.m.Partition("r", 0)
			// Node 3 catches up and asks in; the controller commits it.
			testutil.Eventually(t, 10*time.Second, func() error {
				st, sent := ctrl.committed()
				if !slices.Contains(st.ISR, 3) {
					return fmt.Errorf("committed ISR %v after %d requests, waiting for node 3", st.ISR, sent)
				}
				if pend := p.isrPending.Load(); pend != nil && pend.inFlight.Load() {
					return errors.New("the leader's request is still in flight")
				}
				return nil
			})
			// Node 3's link goes; node 2 keeps fetching.
			leaders.setCut(3, true)
			res, err := leader.m.Append(context.Background(), "r", 0, batch(t, "b", 3, 1000), AcksLeader, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			end := res.BaseOffset + 3
			// An image from before the commit arrives (the metadata log
			// lags the controller's answer).
			leader.setPartition(image)
			testutil.Eventually(t, 10*time.Second, func() error {
				if o := p.followers.offset(2).offset; o != end {
					return fmt.Errorf("node 2 fetched at %d, waiting for %d", o, end)
				}
				return nil
			})
			p.maybeAdvanceHighWatermark()
			// Node 3 holds at most the first five (it was cut before the
			// second write), so the high watermark stays at 5.
			if hw := leader.log().HighWatermark(); hw != 5 {
				st, _ := ctrl.committed()
				t.Fatalf("high watermark %d with node 2 at %d and node 3, in the committed ISR %v, cut off at 5 at most: want 5",
					hw, end, st.ISR)
			}
			// Node 3 back: the high watermark passes the writes.
			leaders.setCut(3, false)
			testutil.Eventually(t, 10*time.Second, func() error {
				if hw := leader.log().HighWatermark(); hw != end {
					return fmt.Errorf("high watermark %d, want %d", hw, end)
				}
				return nil
			})
		})
	}
}

// leaderRefusedOnce starts two nodes whose leader's controller refuses
// every ISR change, and returns once the leader's first expansion (node
// 2 joining partition r-0) was refused and settled.
func leaderRefusedOnce(t *testing.T) (*refusingController, *memLeaders, *node, *Partition) {
	t.Helper()
	refuse := &refusingController{}
	leaders, nodes := newNodes(t, 2, func(o *Options) {
		if o.NodeID == 1 {
			o.ISR = refuse
		}
	})
	leader := nodes[0]
	for _, n := range nodes {
		n.set(1, 0, 1)
	}
	p, _ := leader.m.Partition("r", 0)
	testutil.Eventually(t, 10*time.Second, func() error {
		if refuse.calls.Load() == 0 {
			return errors.New("no expansion asked for yet")
		}
		if pend := p.isrPending.Load(); pend != nil {
			return fmt.Errorf("change to %v still pending", pend.req.NewISR)
		}
		return nil
	})
	return refuse, leaders, leader, p
}

// A refusal for what the change asks (INELIGIBLE_REPLICA) commits
// nothing: the leader drops the change, and its high watermark counts
// the ISR it has.
func TestLeaderDropsARefusedISRChange(t *testing.T) {
	_, leaders, leader, _ := leaderRefusedOnce(t)
	leaders.setCut(2, true)
	res, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 4, 1000), AcksAll, 10*time.Second)
	if err != nil || res.BaseOffset != 0 {
		t.Fatalf("acks=all write with ISR [1] (min.insync.replicas 1): %+v, %v", res, err)
	}
}

// refusingController answers every AlterPartition INELIGIBLE_REPLICA.
type refusingController struct{ calls atomic.Int32 }

func (c *refusingController) AlterPartition(context.Context, controlplane.AlterPartition) (controlplane.PartitionState, error) {
	c.calls.Add(1)
	return controlplane.PartitionState{}, fmt.Errorf("%w: member 2 is fenced", controlplane.ErrIneligibleReplica)
}

// An acks=all write is acknowledged only in the leader epoch it was
// written in: when the epoch ends before the write is committed, it is
// answered NOT_LEADER_OR_FOLLOWER even if this node leads again, for in
// the later epoch the offsets may hold another leader's records.
func TestWriteIsNotAcknowledgedInALaterEpoch(t *testing.T) {
	leaders, nodes := newPair(t)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1, 2)
	follower.set(1, 0, 1, 2)
	leaders.setCut(2, true)
	done := make(chan error, 1)
	go func() {
		_, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 3, 1000), AcksAll, 30*time.Second)
		done <- err
	}()
	// Written in epoch 0 (and waiting, or about to: node 2 cannot fetch
	// it).
	testutil.Eventually(t, 10*time.Second, func() error {
		if leo := leader.log().LogEndOffset(); leo != 3 {
			return fmt.Errorf("leader's log end %d, waiting for the write", leo)
		}
		return nil
	})
	leader.set(1, 1, 1, 2)
	follower.set(1, 1, 1, 2)
	leaders.setCut(2, false)
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("acks=all write of epoch 0 answered in epoch 1: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	// It is in the log all the same, and committed there now.
	testutil.Eventually(t, 10*time.Second, func() error {
		if hw := leader.log().HighWatermark(); hw != 3 {
			return fmt.Errorf("high watermark %d, want 3", hw)
		}
		return nil
	})
}

// A leader proposes as a new ISR member only a replica its own image
// shows eligible (KIP-841; Kafka's Partition.isReplicaIsrEligible): a
// fenced follower, caught up and fetching, is not proposed; once the
// image unfences it, its next fetch is. Pins the bug where leaders kept
// asking the controller to add a killed, fenced follower (one refused
// AlterPartition and one WARN per partition per ISR check).
func TestLeaderProposesOnlyEligibleFollowers(t *testing.T) {
	ctrl := &memController{state: controlplane.PartitionState{Leader: 1, ISR: []int32{1}}}
	_, nodes := newNodes(t, 2, func(o *Options) {
		if o.NodeID == 1 {
			o.ISR = ctrl
		}
	})
	leader := nodes[0]
	fenced := activeBrokers(2)
	b := fenced[2]
	b.Fenced = true
	fenced[2] = b
	for _, n := range nodes {
		n.brokers = fenced
		n.set(1, 0, 1)
	}
	res, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksLeader, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	end := res.BaseOffset + 5
	p, _ := leader.m.Partition("r", 0)
	// Two fetches at the log end (the high watermark: the ISR is the
	// leader): the first one's ISR decision is made by the time the
	// second is recorded.
	var first time.Time
	testutil.Eventually(t, 10*time.Second, func() error {
		p.followers.Lock()
		s := p.followers.m[2]
		var at time.Time
		var off int64 = -1
		if s != nil {
			at, off = s.lastFetch, s.fetchOffset
		}
		p.followers.Unlock()
		switch {
		case off != end:
			return fmt.Errorf("node 2 fetched at %d, waiting for %d", off, end)
		case first.IsZero():
			first = at
			return errors.New("waiting for a second fetch at the log end")
		case !at.After(first):
			return errors.New("waiting for a second fetch at the log end")
		}
		return nil
	})
	if sent, pending := proposed(ctrl, p); sent != 0 || pending != nil {
		t.Fatalf("node 2, fenced in the leader's image, was proposed: %d AlterPartition sent, pending %v", sent, pending)
	}
	// Unfenced: its next fetch asks, and the controller commits it.
	leader.brokers = activeBrokers(2)
	leader.set(1, 0, 1)
	testutil.Eventually(t, 10*time.Second, func() error {
		if st, sent := ctrl.committed(); !slices.Contains(st.ISR, 2) {
			return fmt.Errorf("committed ISR %v after %d requests, waiting for node 2", st.ISR, sent)
		}
		return nil
	})
}

// proposed returns how many AlterPartition ctrl received and the new
// ISR of p's pending change, nil when none.
func proposed(ctrl *memController, p *Partition) (sent int, pending []int32) {
	_, sent = ctrl.committed()
	if pend := p.isrPending.Load(); pend != nil {
		pending = pend.req.NewISR
	}
	return sent, pending
}

// The bug's scenario: a follower is killed, the controller fences it
// and removes it from the ISR; its last fetch keeps it caught up for the
// whole lag time. The ISR loop must not ask to add it back (it only
// shrinks), nor may another follower's fetch: it is fenced. The loop
// still shrinks.
func TestISRLoopDoesNotProposeADeadFencedFollower(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ctrl := &memController{state: controlplane.PartitionState{Leader: 1, ISR: []int32{1, 2, 3}}}
	leaders, nodes := newNodes(t, 3, func(o *Options) {
		o.Now = clk.Now
		if o.NodeID == 1 {
			o.ISR = ctrl
		}
	})
	leader := nodes[0]
	for _, n := range nodes {
		n.setPartition(metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	}
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, _ := leader.m.Partition("r", 0)
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, id := range []int32{2, 3} {
			if o := p.followers.offset(id).offset; o != 5 {
				return fmt.Errorf("node %d fetched at %d, waiting for 5", id, o)
			}
		}
		return nil
	})
	// Node 2 dies; the controller fences it and shrinks the ISR
	// (partition epoch 1), and the leader's image says so.
	leaders.setCut(2, true)
	ctrl.mu.Lock()
	ctrl.state.ISR, ctrl.state.PartitionEpoch = []int32{1, 3}, 1
	ctrl.mu.Unlock()
	brokers := activeBrokers(3)
	b := brokers[2]
	b.Fenced = true
	brokers[2] = b
	leader.brokers = brokers
	leader.setPartition(metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1, PartitionEpoch: 1})
	// Well within the lag time of node 2's last fetch.
	clk.Advance(10 * time.Second)
	p.maybeAlterISR(false) // the loop
	p.maybeAlterISR(true)  // a fetch of another replica outside the ISR
	if sent, pending := proposed(ctrl, p); sent != 0 || pending != nil {
		t.Fatalf("dead, fenced node 2 proposed: %d AlterPartition sent, pending %v", sent, pending)
	}
	// Not fenced yet in the image (the controller is slower than the
	// leader's lag check, or cut off): the loop still adds no one who
	// is out of the ISR.
	leader.brokers = activeBrokers(3)
	leader.setPartition(metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1, PartitionEpoch: 1})
	p.maybeAlterISR(false)
	if sent, pending := proposed(ctrl, p); sent != 0 || pending != nil {
		t.Fatalf("the ISR loop proposed node 2, which stopped fetching: %d AlterPartition sent, pending %v", sent, pending)
	}
	// Node 3 goes silent too: past the lag time the loop shrinks it.
	// (The clock moves on at every try: a fetch of node 3's that passed
	// the cut just before it may still be recorded once.)
	leaders.setCut(3, true)
	testutil.Eventually(t, 10*time.Second, func() error {
		clk.Advance(DefaultReplicaLagTime + time.Second)
		p.maybeAlterISR(false)
		if st, sent := ctrl.committed(); !slices.Equal(st.ISR, []int32{1}) {
			return fmt.Errorf("committed ISR %v after %d requests, waiting for [1]", st.ISR, sent)
		}
		return nil
	})
}

// An expansion the controller refused is not sent again on every fetch
// while nothing it may rest on has moved; a new image lets it be asked
// again.
func TestLeaderDoesNotRepeatARefusedExpansion(t *testing.T) {
	refuse, _, leader, p := leaderRefusedOnce(t)
	// Node 2 keeps fetching at the log end (every followerMaxWait).
	fetches := func() time.Time {
		p.followers.Lock()
		defer p.followers.Unlock()
		return p.followers.m[2].lastFetch
	}
	for range 2 {
		before := fetches()
		testutil.Eventually(t, 10*time.Second, func() error {
			if !fetches().After(before) {
				return errors.New("waiting for node 2's next fetch")
			}
			return nil
		})
	}
	if n := refuse.calls.Load(); n != 1 {
		t.Fatalf("%d AlterPartition for the same refused expansion, want 1", n)
	}
	leader.set(1, 0, 1) // a new image
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := refuse.calls.Load(); n < 2 {
			return fmt.Errorf("%d AlterPartition, waiting for the one the new image allows", n)
		}
		return nil
	})
}

// isrChange's rule, case by case: who is added, who is dropped.
func TestISRChangeRule(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	lag := 30 * time.Second
	img := &metadata.Image{}
	base := func() isrDecision {
		return isrDecision{
			self: 1, replicas: []int32{1, 2, 3}, isr: []int32{1, 3}, hw: 10, termStart: 4,
			lag: lag, now: now, expand: true, brokers: activeBrokers(3), image: img, partitionEpoch: 7,
		}
	}
	with := func(id int32, fn func(*metadata.Broker)) map[int32]metadata.Broker {
		m := activeBrokers(3)
		b := m[id]
		fn(&b)
		m[id] = b
		return m
	}
	// Node 2 out of the ISR, caught up 20 s ago at the high watermark,
	// at broker epoch 102; node 3 in it, caught up now.
	state := func() map[int32]*followerState {
		return map[int32]*followerState{
			2: {fetchOffset: 10, lastCaughtUp: now.Add(-20 * time.Second), brokerEpoch: 102},
			3: {fetchOffset: 10, lastCaughtUp: now, brokerEpoch: 103},
		}
	}
	refusedOf2 := func(fn func(*refusedExpansion)) *refusedExpansion {
		r := &refusedExpansion{members: []int32{2}, image: img, partitionEpoch: 7, at: now.Add(-time.Second)}
		if fn != nil {
			fn(r)
		}
		return r
	}
	for _, c := range []struct {
		name    string
		change  func(d *isrDecision, s map[int32]*followerState)
		refused *refusedExpansion
		want    []int32
	}{
		{"eligible and caught up: added", nil, nil, []int32{1, 2, 3}},
		{"the loop: not added", func(d *isrDecision, _ map[int32]*followerState) { d.expand = false }, nil, []int32{1, 3}},
		{"fenced", func(d *isrDecision, _ map[int32]*followerState) {
			d.brokers = with(2, func(b *metadata.Broker) { b.Fenced = true })
		}, nil, []int32{1, 3}},
		{"in controlled shutdown", func(d *isrDecision, _ map[int32]*followerState) {
			d.brokers = with(2, func(b *metadata.Broker) { b.ShuttingDown = true })
		}, nil, []int32{1, 3}},
		{"not registered", func(d *isrDecision, _ map[int32]*followerState) { delete(d.brokers, 2) }, nil, []int32{1, 3}},
		{"no image", func(d *isrDecision, _ map[int32]*followerState) { d.brokers = nil }, nil, []int32{1, 3}},
		{"fetching as an older registration", func(d *isrDecision, _ map[int32]*followerState) {
			d.brokers = with(2, func(b *metadata.Broker) { b.Epoch = 200 })
		}, nil, []int32{1, 3}},
		{"naming no broker epoch", func(_ *isrDecision, s map[int32]*followerState) { s[2].brokerEpoch = -1 }, nil, []int32{1, 2, 3}},
		{"caught up longer ago than the lag time", func(_ *isrDecision, s map[int32]*followerState) {
			s[2].lastCaughtUp = now.Add(-lag - time.Millisecond)
		}, nil, []int32{1, 3}},
		{"below the high watermark", func(_ *isrDecision, s map[int32]*followerState) { s[2].fetchOffset = 9 }, nil, []int32{1, 3}},
		{"below the term's start", func(d *isrDecision, _ map[int32]*followerState) { d.hw, d.termStart = 10, 11 }, nil, []int32{1, 3}},
		{"never fetched in this term", func(_ *isrDecision, s map[int32]*followerState) { delete(s, 2) }, nil, []int32{1, 3}},
		{"just refused", nil, refusedOf2(nil), []int32{1, 3}},
		{"refused, then a new image", nil, refusedOf2(func(r *refusedExpansion) { r.image = &metadata.Image{} }), []int32{1, 2, 3}},
		{"refused, then a new partition epoch", nil, refusedOf2(func(r *refusedExpansion) { r.partitionEpoch = 6 }), []int32{1, 2, 3}},
		{"refused long enough ago", nil, refusedOf2(func(r *refusedExpansion) { r.at = now.Add(-refusedExpansionBackoff) }), []int32{1, 2, 3}},
		{"refused another member", nil, refusedOf2(func(r *refusedExpansion) { r.members = []int32{3} }), []int32{1, 2, 3}},
		{"a member past the lag time: dropped, by the loop too", func(d *isrDecision, s map[int32]*followerState) {
			d.expand = false
			s[3].lastCaughtUp = now.Add(-lag - time.Millisecond)
		}, nil, []int32{1}},
		{"a fenced member caught up: kept (only the lag shrinks)", func(d *isrDecision, _ map[int32]*followerState) {
			d.expand = false
			d.brokers = with(3, func(b *metadata.Broker) { b.Fenced = true })
		}, nil, []int32{1, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, s := base(), state()
			if c.change != nil {
				c.change(&d, s)
			}
			var f followers
			f.resetLocked(0, now.Add(-time.Minute))
			f.m, f.refused = s, c.refused
			if got := f.isrChange(d); !sameMembers(got, c.want) {
				t.Fatalf("isrChange: %v, want %v", got, c.want)
			}
		})
	}
}
