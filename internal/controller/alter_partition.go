package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterPartition: a partition's leader asks for a new ISR (KIP-497). The
// controller is the one place the ISR changes, so a leader never acts
// on an ISR the metadata log does not have: it computes a shrink or an
// expansion from the state in its image (leader epoch, partition
// epoch), and the controller commits it only if that state is still the
// partition's, moving the partition epoch on by one. A leader whose
// request raced another change hears INVALID_UPDATE_VERSION and tries
// again from its newer image.

var _ controlplane.ISR = (*Controller)(nil)

// AlterPartition implements controlplane.ISR on the active controller
// (NOT_CONTROLLER elsewhere). A new ISR equal to the current one, in
// order, commits nothing and answers the current state; otherwise one
// PartitionRecord with the new ISR and the partition epoch + 1 (leader,
// leader epoch and replicas as they are), answered once it is in this
// node's image. The refusals, in the order checked, are planAlterPartition's.
//
// Requests that arrive while a batch commits are committed together, in
// one metadata entry (group commit): each entry is a Raft commit and an
// image publish, about 20 ms here, and a restarted broker's followers
// rejoin a thousand ISRs at once, which one commit each made take half
// a minute. Each request is still validated on its own, against the
// image with the batch's earlier changes not yet in it; so a second
// request for a partition already changed in the batch waits for the
// next one, where it is validated against that change.
func (c *Controller) AlterPartition(ctx context.Context, req controlplane.AlterPartition) (controlplane.PartitionState, error) {
	a := c.active.Load()
	if a == nil {
		return controlplane.PartitionState{}, c.notController()
	}
	call := &alterCall{ctx: ctx, req: req, done: make(chan struct{})}
	a.alters.mu.Lock()
	a.alters.queued = append(a.alters.queued, call)
	start := !a.alters.running
	a.alters.running = true
	a.alters.mu.Unlock()
	if start {
		go c.runAlterBatches(a)
	}
	select {
	case <-call.done:
		return call.state, call.err
	case <-ctx.Done():
		return controlplane.PartitionState{}, fmt.Errorf("%w: AlterPartition not committed yet: %w", controlplane.ErrTimedOut, context.Cause(ctx))
	}
}

// alterQueue is one active controller's AlterPartition requests waiting
// for their batch; running says a goroutine commits them.
type alterQueue struct {
	mu      sync.Mutex
	queued  []*alterCall
	running bool
}

// alterCall is one request and, once done is closed, its answer.
type alterCall struct {
	ctx   context.Context
	req   controlplane.AlterPartition
	done  chan struct{}
	state controlplane.PartitionState
	err   error
}

func (call *alterCall) finish(state controlplane.PartitionState, err error) {
	call.state, call.err = state, err
	close(call.done)
}

// maxAlterBatch bounds one metadata entry's partition changes.
const maxAlterBatch = 1000

// runAlterBatches commits the queued requests, a batch at a time, until
// none is left.
func (c *Controller) runAlterBatches(a *activeController) {
	for {
		a.alters.mu.Lock()
		n := min(len(a.alters.queued), maxAlterBatch)
		batch := a.alters.queued[:n:n]
		a.alters.queued = a.alters.queued[n:]
		if n == 0 {
			a.alters.running = false
			a.alters.mu.Unlock()
			return
		}
		a.alters.mu.Unlock()
		later := c.commitAlters(a, batch)
		if len(later) > 0 {
			a.alters.mu.Lock()
			a.alters.queued = append(later, a.alters.queued...)
			a.alters.mu.Unlock()
		}
	}
}

// commitAlters validates each call of batch against the image of the
// moment and commits the changes in one entry; it returns the calls for
// a partition an earlier call of the batch changes, for the next batch.
func (c *Controller) commitAlters(a *activeController, batch []*alterCall) (later []*alterCall) {
	ctx, cancel := context.WithTimeout(context.Background(), alterCommitTimeout)
	defer cancel()
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		for _, call := range batch {
			call.finish(controlplane.PartitionState{}, err)
		}
		return nil
	}
	type key struct {
		topic     metadata.UUID
		partition int32
	}
	changing := map[key]bool{}
	var recs []metadata.Record
	var changed []*alterCall
	for _, call := range batch {
		if err := call.ctx.Err(); err != nil {
			call.finish(controlplane.PartitionState{}, fmt.Errorf("%w: %w", controlplane.ErrTimedOut, context.Cause(call.ctx)))
			continue
		}
		k := key{call.req.TopicID, call.req.Partition}
		if changing[k] {
			later = append(later, call)
			continue
		}
		rec, isChange, err := planAlterPartition(img, call.req)
		if err != nil {
			call.finish(controlplane.PartitionState{}, err)
			continue
		}
		if !isChange {
			call.finish(stateOf(rec), nil) // under proposeMu: nothing came between
			continue
		}
		changing[k] = true
		recs = append(recs, rec)
		changed = append(changed, call)
	}
	if len(recs) == 0 {
		return later
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		for _, call := range changed {
			call.finish(controlplane.PartitionState{}, err)
		}
		return later
	}
	for i, call := range changed {
		rec := recs[i].(metadata.PartitionRecord)
		t := img.TopicsByID[rec.TopicID]
		c.log.Info("altered ISR", "topic", t.Name, "partition", rec.Partition,
			"leader", rec.Leader, "leader_epoch", rec.LeaderEpoch, "isr_from", t.Partitions[rec.Partition].ISR, "isr_to", rec.ISR,
			"partition_epoch", rec.PartitionEpoch, "batch", len(recs))
		// rec is what the partition now is: under proposeMu no other
		// change has come between.
		call.finish(stateOf(rec), nil)
	}
	// An added replica that joined the ISR may complete its
	// partition's reassignment (reassign.go).
	c.completeReassignmentsLocked(ctx, a)
	return later
}

// alterCommitTimeout bounds one batch's commit (a leader's own request
// gives up sooner, by its context).
const alterCommitTimeout = 10 * time.Second

func stateOf(rec metadata.PartitionRecord) controlplane.PartitionState {
	return controlplane.PartitionState{
		Leader:         rec.Leader,
		LeaderEpoch:    rec.LeaderEpoch,
		PartitionEpoch: rec.PartitionEpoch,
		ISR:            slices.Clone(rec.ISR),
	}
}

// planAlterPartition checks req against img in Kafka's order (the list
// at controlplane's refusals; ReplicationControlManager.alterPartition
// and validateAlterPartitionData) and returns the partition's record
// with the new ISR, and whether it differs from the partition's state.
// The first failed check is the answer, so a request wrong in two ways
// hears what Kafka's controller would say.
func planAlterPartition(img *metadata.Image, req controlplane.AlterPartition) (rec metadata.PartitionRecord, changed bool, err error) {
	// The sender first, for the whole request, as Kafka checks it
	// before any topic: a replaced process's view of any partition is
	// stale.
	if b, ok := img.Brokers[req.LeaderID]; !ok || b.Epoch != req.BrokerEpoch {
		current := "no registration"
		if ok {
			current = fmt.Sprintf("broker epoch %d", b.Epoch)
		}
		return rec, false, fmt.Errorf("%w: broker %d sent broker epoch %d; it has %s",
			controlplane.ErrStaleBrokerEpoch, req.LeaderID, req.BrokerEpoch, current)
	}
	t, ok := img.TopicsByID[req.TopicID]
	if !ok || req.TopicID.IsZero() {
		return rec, false, fmt.Errorf("%w: no topic with id %s", controlplane.ErrUnknownTopicID, req.TopicID)
	}
	p, ok := t.Partition(req.Partition)
	if !ok {
		return rec, false, fmt.Errorf("%w: topic %q has no partition %d", controlplane.ErrUnknownTopic, t.Name, req.Partition)
	}
	at := func(format string, args ...any) string {
		return fmt.Sprintf("%s-%d: ", t.Name, req.Partition) + fmt.Sprintf(format, args...)
	}

	// Epochs ahead of the controller's: Kafka takes this controller to
	// be behind a newer one and answers NOT_CONTROLLER, which the
	// sender retries against whichever node it finds leading. A Fjord
	// active controller validates against an image that has every
	// earlier term's entries (its Barrier), so it is behind only when it
	// has lost leadership without hearing it yet.
	if req.LeaderEpoch > p.LeaderEpoch {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrNotController,
			at("leader epoch %d is ahead of this controller's %d", req.LeaderEpoch, p.LeaderEpoch))
	}
	if req.PartitionEpoch > p.PartitionEpoch {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrNotController,
			at("partition epoch %d is ahead of this controller's %d", req.PartitionEpoch, p.PartitionEpoch))
	}
	if req.LeaderEpoch < p.LeaderEpoch {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrFencedLeaderEpoch,
			at("leader epoch %d; the partition's is %d", req.LeaderEpoch, p.LeaderEpoch))
	}
	// Only after the leader epoch: a deposed leader whose image is
	// behind hears FENCED_LEADER_EPOCH, the answer that tells it to
	// wait for its image, rather than this one, which only a broken
	// leader can get.
	if req.LeaderID != p.Leader {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrInvalidRequest,
			at("broker %d is not the leader (%d)", req.LeaderID, p.Leader))
	}
	if req.PartitionEpoch < p.PartitionEpoch {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrInvalidUpdateVersion,
			at("partition epoch %d; the partition's is %d (the ISR changed since)", req.PartitionEpoch, p.PartitionEpoch))
	}
	if err := checkNewISR(p, req.NewISR); err != nil {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrInvalidRequest, at("new ISR %s", err))
	}
	if req.NewISRBrokerEpochs != nil && len(req.NewISRBrokerEpochs) != len(req.NewISR) {
		return rec, false, fmt.Errorf("%w: %s", controlplane.ErrInvalidRequest,
			at("%d broker epochs for %d new ISR members", len(req.NewISRBrokerEpochs), len(req.NewISR)))
	}
	for i, id := range req.NewISR {
		// A fenced member is ineligible, as in Kafka: it is not heard
		// from, so it could not be elected if the leader failed. So is
		// one in controlled shutdown: it is about to stop.
		b, ok := img.Brokers[id]
		if !ok {
			return rec, false, fmt.Errorf("%w: %s", controlplane.ErrIneligibleReplica, at("member %d is not a registered broker", id))
		}
		if b.Fenced && !slices.Contains(p.ISR, id) {
			return rec, false, fmt.Errorf("%w: %s", controlplane.ErrIneligibleReplica, at("member %d is fenced", id))
		}
		if b.ShuttingDown && !slices.Contains(p.ISR, id) {
			return rec, false, fmt.Errorf("%w: %s", controlplane.ErrIneligibleReplica, at("member %d is in controlled shutdown", id))
		}
		// Its log failed (offline.go): it holds nothing reliable until
		// a new process of it has recovered the log and registered.
		if img.ReplicaOffline(id, req.TopicID, req.Partition) && !slices.Contains(p.ISR, id) {
			return rec, false, fmt.Errorf("%w: %s", controlplane.ErrIneligibleReplica, at("member %d's replica is offline (its log failed)", id))
		}
		if req.NewISRBrokerEpochs != nil {
			if e := req.NewISRBrokerEpochs[i]; e != -1 && e != b.Epoch {
				return rec, false, fmt.Errorf("%w: %s", controlplane.ErrIneligibleReplica,
					at("member %d was seen at broker epoch %d; it has registered again since (broker epoch %d)", id, e, b.Epoch))
			}
		}
	}

	rec = metadata.PartitionRecord{
		TopicID: req.TopicID, Partition: req.Partition,
		Replicas: p.Replicas, ISR: slices.Clone(req.NewISR),
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
	}
	if slices.Equal(p.ISR, req.NewISR) {
		// Kafka builds no record for an unchanged ISR and answers the
		// state as it is. A record would move the partition epoch for
		// nothing, and refuse the leader's next request, computed from
		// the epoch it just heard confirmed.
		return rec, false, nil
	}
	rec.PartitionEpoch++
	return rec, true, nil
}

// checkNewISR: isr is distinct replicas of p (no negative ids) and
// holds p's leader (Kafka's Replicas.validateIsr, then its leader check,
// both INVALID_REQUEST). It costs O(len(isr) * len(replicas)): a longer
// ISR than the replicas is refused first, so a request of 100,000
// members costs no more than one of three.
func checkNewISR(p *metadata.Partition, isr []int32) error {
	if len(isr) > len(p.Replicas) {
		return fmt.Errorf("has %d members; the partition has %d replicas %v", len(isr), len(p.Replicas), p.Replicas)
	}
	for i, id := range isr {
		if !slices.Contains(p.Replicas, id) {
			return fmt.Errorf("%v: %d is not a replica %v", isr, id, p.Replicas)
		}
		if slices.Contains(isr[:i], id) {
			return fmt.Errorf("%v lists %d twice", isr, id)
		}
	}
	if !slices.Contains(isr, p.Leader) {
		return fmt.Errorf("%v does not hold the leader %d", isr, p.Leader)
	}
	return nil
}
