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

// A refusal for what the change asks (INELIGIBLE_REPLICA) commits
// nothing: the leader drops the change, and its high watermark counts
// the ISR it has.
func TestLeaderDropsARefusedISRChange(t *testing.T) {
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
