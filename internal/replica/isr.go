package replica

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// ISR changes, on the leader. The leader decides (followers.isrChange)
// and the controller commits (controlplane.ISR: AlterPartition). One
// change is pending per partition (Partition.isrPending), computed from
// the leader and partition epochs the partition has at the time.
//
//   - Shrink: a loop every replica.lag.time.max.ms / 4 looks at every
//     partition this node leads. It only shrinks.
//   - Expand: only a follower's fetch that reaches the high watermark
//     asks (Kafka's maybeExpandIsr), at once, so a caught-up follower
//     rejoins without waiting for the loop. A new member must be
//     eligible in this leader's image (KIP-841, isrEligible):
//     registered, not fenced, not in controlled shutdown, fetching as
//     the registration the image knows. The loop never adds: a replica
//     that stopped fetching is not proposed on the strength of its last
//     fetch, which keeps it caught up for the whole lag time after it
//     died, long after the controller fenced it.
//   - An expansion the controller refused is not proposed again until
//     the image or the partition epoch moves, or a few seconds pass
//     (refusedExpansion): the fetch path would otherwise ask on every
//     fetch of a follower the leader's lagging image shows eligible.
//
// The safety rule (KIP-497's maximal ISR, as Kafka's Partition keeps
// it): the set the high watermark counts always holds every member of
// the committed ISR, because the controller may elect any of them. So
// from the moment an expansion is decided until its outcome is known,
// the new member counts:
//
//   - Committed (the answer is the new state): the leader takes the
//     state from the answer at once, not from its image, which may come
//     seconds later when this node is cut off from the metadata log's
//     leader but not from the controller. An image older than that state
//     (same leader epoch, lower partition epoch) does not take it back.
//   - Refused for what it asks (INELIGIBLE_REPLICA, INVALID_REQUEST,
//     checked after the epochs): nothing was committed; the change is
//     dropped.
//   - Unknown (a timeout, a lost connection, NOT_CONTROLLER, a stale
//     epoch: an earlier send may have committed it): the change stays
//     pending, counted, and is sent again as it was, at most every
//     isrResendBackoff, until an answer or an image (a new leader epoch,
//     or a partition epoch past the request's) settles it.
//
// Counting a member too many only holds the high watermark back; one
// too few lets a write be acknowledged that a replica the controller
// may elect does not hold.

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
		p.maybeAlterISR(true)
	}
}

// maybeAlterISR sends an AlterPartition when this node leads p and its
// ISR should change (expand: replicas may be added, as a follower's
// fetch asks; else it only shrinks, as the loop asks), unless one is
// pending: that one is sent again if its outcome is unknown and no send
// is in flight.
func (p *Partition) maybeAlterISR(expand bool) {
	m := p.m
	if m.opts.ISR == nil {
		return
	}
	if pend := p.isrPending.Load(); pend != nil {
		p.resendISR(pend)
		return
	}
	p.mu.RLock()
	if p.mu.gone != nil || p.mu.leader != m.opts.NodeID || p.log.Failed() {
		// A failed log (offline.go) serves its followers no fetch, so
		// they would all look stalled: a shrink to itself, should the
		// controller be slow to hear of the failure, would leave the
		// partition leaderless when the controller does.
		p.mu.RUnlock()
		return
	}
	termStart, ok := p.termStartLocked()
	if !ok {
		p.mu.RUnlock()
		return
	}
	isr := p.mu.isr
	// ApplyImage publishes the image before it updates the partitions,
	// so the brokers read here are at least as new as p's state.
	img := m.image.Load()
	var brokers map[int32]metadata.Broker
	if img != nil {
		brokers = img.Brokers
	}
	next := p.followers.isrChange(isrDecision{
		self: m.opts.NodeID, replicas: p.mu.replicas, isr: isr,
		hw: p.log.HighWatermark(), termStart: termStart,
		lag: m.opts.ReplicaLagTime, now: m.opts.Now(), expand: expand,
		brokers: brokers, image: img, partitionEpoch: p.mu.partitionEpoch,
	})
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
	pend := &pendingISR{req: req, from: isr, image: img}
	pend.inFlight.Store(true)
	// Publish the pending ISR under p.wait, where the high watermark
	// moves: an advance that began before this counts only the old ISR,
	// and one that has moved the high watermark since next was decided
	// may have committed records a member being added does not hold
	// (its fetch offset was checked against the older high watermark).
	// Then the expansion waits for the next fetch or check. Advances
	// after this count the new members (maybeAdvanceHighWatermarkLocked
	// gives up if the pending ISR changed under it).
	p.wait.Lock()
	if !p.isrPending.CompareAndSwap(nil, pend) {
		p.wait.Unlock()
		return
	}
	if p.log.HighWatermark() != hw && addsMembers(next, isr) {
		p.isrPending.Store(nil) // nothing sent: nothing to settle
		p.wait.Unlock()
		return
	}
	p.wait.Unlock()
	p.sendISR(pend)
}

// pendingISR is an ISR change this leader decided whose outcome it does
// not know yet (see the file comment).
type pendingISR struct {
	req  controlplane.AlterPartition
	from []int32 // the ISR it was decided against, for the log
	// image is the leader's image it was decided against, for
	// refusedExpansion.
	image *metadata.Image
	// inFlight: a goroutine is sending req.
	inFlight atomic.Bool
	// lastSent is when the last send ended (UnixNano), for the resend
	// backoff.
	lastSent atomic.Int64
}

// isrResendBackoff spaces the sends of a change whose outcome is
// unknown: the fetch path asks on every fetch of a follower outside the
// ISR.
const isrResendBackoff = 100 * time.Millisecond

// resendISR sends pend again unless a send is in flight or the last one
// ended less than isrResendBackoff ago.
func (p *Partition) resendISR(pend *pendingISR) {
	if p.m.opts.Now().UnixNano()-pend.lastSent.Load() < int64(isrResendBackoff) {
		return
	}
	if !pend.inFlight.CompareAndSwap(false, true) {
		return
	}
	if p.isrPending.Load() != pend { // settled meanwhile
		pend.inFlight.Store(false)
		return
	}
	p.sendISR(pend)
}

// sendISR sends pend on a goroutine of its own. REQUIRES: pend.inFlight
// set by the caller.
func (p *Partition) sendISR(pend *pendingISR) {
	if !p.m.goBackground(func() { p.alterISR(pend) }) {
		// The manager is closing: nothing was sent, and nothing will be.
		p.isrPending.CompareAndSwap(pend, nil)
		pend.inFlight.Store(false)
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

func (p *Partition) alterISR(pend *pendingISR) {
	req := pend.req
	defer func() {
		pend.lastSent.Store(p.m.opts.Now().UnixNano())
		pend.inFlight.Store(false)
		// The committed ISR (or the pending one's end) can move the
		// high watermark either way it went.
		p.maybeAdvanceHighWatermark()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), alterTimeout)
	defer cancel()
	st, err := p.m.opts.ISR.AlterPartition(ctx, req)
	switch {
	case err == nil:
		p.applyCommittedISR(pend, st)
	case errors.Is(err, controlplane.ErrIneligibleReplica) || errors.Is(err, controlplane.ErrInvalidRequest):
		// Refused for what it asks, at the partition's current epochs:
		// nothing was committed. Its new members wait for a change
		// before they are proposed again.
		if added := addedMembers(req.NewISR, pend.from); len(added) > 0 {
			p.followers.noteRefused(req.LeaderEpoch, added, pend.image, req.PartitionEpoch, p.m.opts.Now())
		}
		p.isrPending.CompareAndSwap(pend, nil)
		p.m.log.Warn("ISR change refused", "partition", p.String(), "isr", pend.from, "new_isr", req.NewISR,
			"leader_epoch", req.LeaderEpoch, "partition_epoch", req.PartitionEpoch, "err", err)
	default:
		level := p.m.log.Warn
		if errors.Is(err, controlplane.ErrInvalidUpdateVersion) || errors.Is(err, controlplane.ErrFencedLeaderEpoch) {
			level = p.m.log.Info // the image moved on: it settles the change
		}
		level("ISR change not confirmed; counting its members until it is settled", "partition", p.String(),
			"isr", pend.from, "new_isr", req.NewISR,
			"leader_epoch", req.LeaderEpoch, "partition_epoch", req.PartitionEpoch, "err", err)
	}
}

// applyCommittedISR takes the state the controller answered for pend as
// the partition's, unless leadership moved or the image got there first,
// and settles pend.
func (p *Partition) applyCommittedISR(pend *pendingISR, st controlplane.PartitionState) {
	if len(st.ISR) < len(pend.from) {
		p.m.stats.isrShrinks.Add(1)
	} else {
		p.m.stats.isrExpands.Add(1)
	}
	p.m.log.Info("ISR changed", "partition", p.String(), "from", pend.from, "to", st.ISR,
		"leader_epoch", st.LeaderEpoch, "partition_epoch", st.PartitionEpoch)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.gone == nil && p.mu.leader == p.m.opts.NodeID && p.mu.leaderEpoch == st.LeaderEpoch &&
		st.PartitionEpoch > p.mu.partitionEpoch {
		p.mu.isr = slices.Clone(st.ISR)
		p.mu.partitionEpoch = st.PartitionEpoch
		// Parked produces must see the ISR against min.insync.replicas.
		p.notifyAllLocked()
	}
	// Under p.mu held exclusively, so no high-watermark advance sees the
	// pending members gone before the ISR that holds them.
	p.isrPending.CompareAndSwap(pend, nil)
}

// settlePendingISRLocked drops the pending change once part (from an
// image) shows its outcome: a new leader epoch, or a partition epoch
// past the one it was decided at.
// REQUIRES: p.mu held exclusively.
func (p *Partition) settlePendingISRLocked(part *metadata.Partition) {
	pend := p.isrPending.Load()
	if pend != nil && (part.LeaderEpoch != pend.req.LeaderEpoch || part.PartitionEpoch > pend.req.PartitionEpoch) {
		p.isrPending.CompareAndSwap(pend, nil)
	}
}

// runISRChecks is the shrink loop (every ReplicaLagTime / 4) until the
// manager closes. It also sends again the pending changes whose outcome
// is unknown. It adds no member: only fetches do.
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
			p.maybeAlterISR(false)
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

// addedMembers returns the members of next that isr does not hold.
func addedMembers(next, isr []int32) []int32 {
	var out []int32
	for _, id := range next {
		if !slices.Contains(isr, id) {
			out = append(out, id)
		}
	}
	return out
}
