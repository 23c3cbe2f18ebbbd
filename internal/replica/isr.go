package replica

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
)

// ISR changes, on the leader. The leader decides (followers.isrChange)
// and the controller commits (controlplane.ISR: AlterPartition); the
// leader's ISR changes only when the committed state reaches it in an
// image, so every node agrees on it through the metadata log. One
// request is in flight per partition (Partition.isrPending), computed
// from the leader and partition epochs the partition has at the time.
//
//   - Shrink: a loop every replica.lag.time.max.ms / 4 looks at every
//     partition this node leads.
//   - Expand: a follower's fetch that reaches the high watermark asks at
//     once, so a caught-up follower rejoins without waiting for the loop.
//
// A refused request is not retried as such: the next check computes a
// new one from the partition's state then, after the image that made
// the old one stale.

// DefaultReplicaLagTime is replica.lag.time.max.ms's default, Kafka's.
const DefaultReplicaLagTime = 30 * time.Second

// alterTimeout bounds one AlterPartition (the forwarding client retries
// NOT_CONTROLLER within it).
const alterTimeout = 10 * time.Second

// noteFollowerFetch records a follower's fetch (ff.leaderEnd is filled
// in here), which arrived at at, moves the high watermark, and asks for
// an ISR expansion when the follower qualifies.
func (p *Partition) noteFollowerFetch(ff followerFetch, at time.Time) {
	leo := p.log.LogEndOffset()
	if ff.offset > leo || ff.offset < 0 {
		return // out of range: the read answers OFFSET_OUT_OF_RANGE
	}
	ff.leaderEnd = leo
	p.followers.recordFetch(ff, at)
	p.maybeAdvanceHighWatermark()
	p.mu.RLock()
	inISR := slices.Contains(p.mu.isr, ff.id)
	p.mu.RUnlock()
	if !inISR && ff.offset >= p.log.HighWatermark() {
		p.maybeAlterISR()
	}
}

// maybeAlterISR sends an AlterPartition when this node leads p and its
// ISR should change, unless one is in flight.
func (p *Partition) maybeAlterISR() {
	m := p.m
	if m.opts.ISR == nil {
		return
	}
	p.mu.RLock()
	if p.mu.gone != nil || p.mu.leader != m.opts.NodeID {
		p.mu.RUnlock()
		return
	}
	termStart, ok := p.termStartLocked()
	if !ok {
		p.mu.RUnlock()
		return
	}
	isr := p.mu.isr
	next := p.followers.isrChange(m.opts.NodeID, p.mu.replicas, isr, p.log.HighWatermark(), termStart,
		m.opts.ReplicaLagTime, m.opts.Now())
	req := controlplane.AlterPartition{
		TopicID: p.topicID, Partition: p.partition,
		LeaderID: m.opts.NodeID, BrokerEpoch: m.brokerEpoch.Load(),
		LeaderEpoch: p.mu.leaderEpoch, PartitionEpoch: p.mu.partitionEpoch,
		NewISR: next,
	}
	req.NewISRBrokerEpochs = p.followers.brokerEpochs(m.opts.NodeID, req.BrokerEpoch, next)
	hw := p.log.HighWatermark() // what next was decided against
	p.mu.RUnlock()
	if sameMembers(next, isr) {
		return
	}
	// Publish the pending ISR under p.wait, where the high watermark
	// moves: an advance that began before this counts only the old ISR,
	// and one that has moved the high watermark since next was decided
	// may have committed records a member being added does not hold
	// (its fetch offset was checked against the older high watermark).
	// Then the expansion waits for the next fetch or check. Advances
	// after this count the new members (maybeAdvanceHighWatermarkLocked
	// gives up if the pending ISR changed under it).
	p.wait.Lock()
	if !p.isrPending.CompareAndSwap(nil, &next) {
		p.wait.Unlock()
		return
	}
	if p.log.HighWatermark() != hw && addsMembers(next, isr) {
		p.isrPending.Store(nil)
		p.wait.Unlock()
		return
	}
	p.wait.Unlock()
	if !m.goBackground(func() { p.alterISR(req, isr) }) {
		p.isrPending.Store(nil)
	}
}

// termStartLocked is the offset this node's leadership epoch began at:
// a follower joins the ISR only once it holds the records of earlier
// epochs up to there (Kafka's rule), so it cannot be elected with a
// history the current leader has since cut.
// REQUIRES: p.mu held.
func (p *Partition) termStartLocked() (int64, bool) {
	for _, e := range slices.Backward(p.log.LeaderEpochs().Entries()) {
		if e.Epoch <= p.mu.leaderEpoch {
			if e.Epoch == p.mu.leaderEpoch {
				return e.StartOffset, true
			}
			break
		}
	}
	// No record written in this epoch yet: it starts at the log end.
	return p.log.LogEndOffset(), true
}

func (p *Partition) alterISR(req controlplane.AlterPartition, from []int32) {
	defer func() {
		p.isrPending.Store(nil)
		// The committed ISR (or the pending one's end) can move the
		// high watermark either way it went.
		p.maybeAdvanceHighWatermark()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), alterTimeout)
	defer cancel()
	st, err := p.m.opts.ISR.AlterPartition(ctx, req)
	if err != nil {
		level := p.m.log.Warn
		if errors.Is(err, controlplane.ErrInvalidUpdateVersion) || errors.Is(err, controlplane.ErrFencedLeaderEpoch) {
			level = p.m.log.Info // the image moved on: the next check starts from it
		}
		level("ISR change refused", "partition", p.String(), "isr", from, "new_isr", req.NewISR,
			"leader_epoch", req.LeaderEpoch, "partition_epoch", req.PartitionEpoch, "err", err)
		return
	}
	if len(st.ISR) < len(from) {
		p.m.stats.isrShrinks.Add(1)
	} else {
		p.m.stats.isrExpands.Add(1)
	}
	p.m.log.Info("ISR changed", "partition", p.String(), "from", from, "to", st.ISR,
		"leader_epoch", st.LeaderEpoch, "partition_epoch", st.PartitionEpoch)
}

// runISRChecks is the shrink loop (every ReplicaLagTime / 4) until the
// manager closes.
func (m *Manager) runISRChecks() {
	// A quarter of the lag time (Kafka checks every half): a follower
	// is shrunk at most a quarter past its lag time, and a check of the
	// partitions this node leads reads memory only.
	interval := max(m.opts.ReplicaLagTime/4, 10*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.closing:
			return
		}
		for _, p := range m.table.Load().partitions {
			p.maybeAlterISR()
		}
	}
}

// addsMembers reports whether next holds a member isr does not.
func addsMembers(next, isr []int32) bool {
	for _, id := range next {
		if !slices.Contains(isr, id) {
			return true
		}
	}
	return false
}
