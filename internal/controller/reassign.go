package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Partition reassignment (KIP-455): an operator gives a partition a new
// replica list, and the controller moves it there without a moment
// below its replication factor.
//
// A start widens the replicas to the target's followed by the ones
// being removed (Kafka's order), and records which are being added and
// which removed (metadata.ReassignmentRecord), in one entry. The new
// replicas then open the partition's log and follow the leader like any
// follower (the replica manager needs nothing new), and the leader adds
// each to the ISR once it has caught up (AlterPartition). Once every
// added replica is in the ISR, the controller completes: it ends the
// reassignment and narrows the replicas to the target, the ISR to its
// members in the target, and, if the leader is being removed, elects
// the first target replica in the ISR and in service, leader epoch + 1,
// all in one entry. The removed replicas then delete their logs. No
// record is lost on the way: every replica kept or elected is an ISR
// member, which holds everything committed.
//
// A cancel (nil replicas) reverts to the replicas the partition had,
// dropping the added ones from the ISR (and electing from the original
// ones if an added one led); their order is the one the reassignment
// kept (the target's order, then the removed ones), as Kafka's revert
// gives. A new target for a partition being reassigned reverts and
// starts again, in one entry: an added replica that stays added keeps
// what it has copied, since the replica manager only sees the result.
//
// Completion is checked after every committed ISR change of a
// partition being reassigned (the alter batches) and at every sessions
// check while any is in progress (a leader that became eligible again,
// say); both cost nothing when none is.

// AlterPartitionReassignments implements controlplane.Client: it decides
// every partition against one image and commits them all in one entry.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	if img.MetadataVersion < metadata.ReassignmentMetadataVersion {
		return nil, fmt.Errorf("%w: partition reassignment needs metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.ReassignmentMetadataVersion, img.MetadataVersion)
	}
	results := make([]controlplane.ReassignmentResult, len(reqs))
	var recs []metadata.Record
	var changed []int
	seen := make(map[controlplane.TopicPartition]bool, len(reqs))
	for i, r := range reqs {
		results[i].TopicPartition = r.TopicPartition
		if seen[r.TopicPartition] {
			results[i].Err = fmt.Errorf("%w: %s-%d is named twice", controlplane.ErrInvalidRequest, r.Topic, r.Partition)
			continue
		}
		seen[r.TopicPartition] = true
		prs, err := planReassignment(img, r)
		if err != nil {
			results[i].Err = err
			continue
		}
		if len(prs) > 0 {
			recs = append(recs, prs...)
			changed = append(changed, i)
		}
	}
	if len(recs) == 0 {
		return results, nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		for _, i := range changed {
			results[i].Err = err
		}
		return results, nil
	}
	c.log.Info("partition reassignments on request", "partitions", len(reqs), "changed", len(changed))
	return results, nil
}

// planReassignment decides one partition of a request against img: the
// records that start, replace, complete or cancel its reassignment
// (none when the target is what it has), or why not.
func planReassignment(img *metadata.Image, r controlplane.Reassignment) ([]metadata.Record, error) {
	t, ok := img.Topics[r.Topic]
	if !ok {
		return nil, fmt.Errorf("%w: no topic %q", controlplane.ErrUnknownTopic, r.Topic)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: topic %q has no partition %d (it has %d)", controlplane.ErrUnknownTopic, r.Topic, r.Partition, len(t.Partitions))
	}
	p := t.Partitions[r.Partition]
	if r.Replicas == nil {
		if !p.Reassigning() {
			return nil, fmt.Errorf("%w: %s-%d", controlplane.ErrNoReassignmentInProgress, r.Topic, r.Partition)
		}
		_, recs, err := revert(img, t, r.Partition, p)
		return recs, err
	}
	if err := checkTarget(img, r); err != nil {
		return nil, err
	}
	var recs []metadata.Record
	if p.Reassigning() {
		if slices.Equal(p.Target(), r.Replicas) {
			return nil, nil // the reassignment in progress already goes there
		}
		base, rev, err := revert(img, t, r.Partition, p)
		if err != nil {
			return nil, err
		}
		p, recs = base, rev
	}
	return append(recs, start(img, t, r.Partition, p, r.Replicas)...), nil
}

// checkTarget refuses a target replica list that is empty, names a
// broker twice, or names one that is not registered.
func checkTarget(img *metadata.Image, r controlplane.Reassignment) error {
	if len(r.Replicas) == 0 {
		return fmt.Errorf("%w: %s-%d: the target replica list is empty", controlplane.ErrInvalidReplicaAssignment, r.Topic, r.Partition)
	}
	for i, b := range r.Replicas {
		if slices.Contains(r.Replicas[:i], b) {
			return fmt.Errorf("%w: %s-%d: broker %d is named twice in %v", controlplane.ErrInvalidReplicaAssignment, r.Topic, r.Partition, b, r.Replicas)
		}
		if _, ok := img.Brokers[b]; !ok {
			return fmt.Errorf("%w: %s-%d: broker %d is not registered", controlplane.ErrInvalidReplicaAssignment, r.Topic, r.Partition, b)
		}
	}
	return nil
}

// start returns the records that move partition i of t, in state p
// (no reassignment in progress), to target: a reorder alone is one
// PartitionRecord; otherwise the widened replicas and the reassignment,
// followed by its completion when nothing has to be copied (only
// removals) and a leader is at hand.
func start(img *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition, target []int32) []metadata.Record {
	if slices.Equal(p.Replicas, target) {
		return nil
	}
	var adding, removing []int32
	for _, b := range target {
		if !slices.Contains(p.Replicas, b) {
			adding = append(adding, b)
		}
	}
	merged := slices.Clone(target)
	for _, b := range p.Replicas {
		if !slices.Contains(target, b) {
			removing = append(removing, b)
			merged = append(merged, b)
		}
	}
	widen := metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: merged, ISR: p.ISR,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
	if len(adding) == 0 && len(removing) == 0 {
		return []metadata.Record{widen} // the same brokers in another order
	}
	var recs []metadata.Record
	if !slices.Equal(merged, p.Replicas) {
		// (Equal when only removing, with the target in front already.)
		recs = append(recs, widen)
		p.Replicas, p.PartitionEpoch = merged, widen.PartitionEpoch
	}
	recs = append(recs, metadata.ReassignmentRecord{TopicID: t.ID, Partition: i, Adding: adding, Removing: removing})
	p.Adding, p.Removing = adding, removing
	if done, ok := completion(img, t, i, p); ok {
		recs = append(recs, done...)
	}
	return recs
}

// completion returns the records that complete the reassignment of
// partition i of t, in state p: ok is false when it is not ready (an
// added replica is not in the ISR yet, or no target replica in the ISR
// can lead).
func completion(img *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition) ([]metadata.Record, bool) {
	if !p.Reassigning() {
		return nil, false
	}
	for _, b := range p.Adding {
		if !slices.Contains(p.ISR, b) {
			return nil, false
		}
	}
	target := p.Target()
	isr := keepOnly(p.ISR, target)
	leader, epoch := p.Leader, p.LeaderEpoch
	if leader < 0 || !slices.Contains(target, leader) {
		if leader = electLeader(img, t.ID, i, target, isr, -1); leader < 0 {
			return nil, false
		}
		epoch++
	}
	return []metadata.Record{
		metadata.ReassignmentRecord{TopicID: t.ID, Partition: i},
		metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: target, ISR: isr,
			Leader: leader, LeaderEpoch: epoch, PartitionEpoch: p.PartitionEpoch + 1},
	}, true
}

// revert returns the records that cancel the reassignment of partition
// i of t, in state p, and the state they leave it in.
func revert(img *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition) (metadata.Partition, []metadata.Record, error) {
	orig := p.Original()
	isr := keepOnly(p.ISR, orig)
	leader, epoch := p.Leader, p.LeaderEpoch
	if leader >= 0 && !slices.Contains(orig, leader) {
		if leader = electLeader(img, t.ID, i, orig, isr, -1); leader < 0 {
			return metadata.Partition{}, nil, fmt.Errorf("%w: %s-%d: cannot cancel: an added replica leads and no original replica in the ISR %v is in service to take over",
				controlplane.ErrInvalidReplicaAssignment, t.Name, i, p.ISR)
		}
		epoch++
	}
	if len(isr) == 0 {
		// Only added replicas were in the ISR (the originals lapsed):
		// going back would leave the partition with none that holds
		// its records.
		return metadata.Partition{}, nil, fmt.Errorf("%w: %s-%d: cannot cancel: no original replica %v is in the ISR %v",
			controlplane.ErrInvalidReplicaAssignment, t.Name, i, orig, p.ISR)
	}
	recs := []metadata.Record{metadata.ReassignmentRecord{TopicID: t.ID, Partition: i}}
	next := metadata.Partition{Replicas: orig, ISR: isr, Leader: leader, LeaderEpoch: epoch, PartitionEpoch: p.PartitionEpoch}
	if !slices.Equal(orig, p.Replicas) || !slices.Equal(isr, p.ISR) || leader != p.Leader {
		// (All equal for a reassignment that only removed.)
		next.PartitionEpoch++
		recs = append(recs, metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: orig, ISR: isr,
			Leader: leader, LeaderEpoch: epoch, PartitionEpoch: next.PartitionEpoch})
	}
	return next, recs, nil
}

// keepOnly returns the members of list that are in keep, in list's
// order.
func keepOnly(list, keep []int32) []int32 {
	out := make([]int32, 0, len(list))
	for _, b := range list {
		if slices.Contains(keep, b) {
			out = append(out, b)
		}
	}
	return out
}

// planCompletions returns the records completing every reassignment in
// img that is ready, of at most limit partitions.
func planCompletions(img *metadata.Image, limit int) []metadata.Record {
	if img.Reassignments == 0 {
		return nil
	}
	var recs []metadata.Record
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for i := range t.Partitions {
			if len(recs) >= 2*limit {
				return recs
			}
			if done, ok := completion(img, t, int32(i), t.Partitions[i]); ok {
				recs = append(recs, done...)
			}
		}
	}
	return recs
}

// completeReassignmentsLocked commits the completion of every
// reassignment that is ready, when any is in progress.
// REQUIRES: a.proposeMu held.
func (c *Controller) completeReassignmentsLocked(ctx context.Context, a *activeController) {
	if c.fsm.applied.Load().Reassignments == 0 {
		return
	}
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		return
	}
	recs := planCompletions(img, maxElectionsPerBatch)
	if len(recs) == 0 {
		return
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		c.log.Warn("could not commit completed reassignments", "partitions", len(recs)/2, "err", err)
		return
	}
	c.log.Info("partition reassignments completed", "partitions", len(recs)/2)
}

// completeReassignments is completeReassignmentsLocked for the sessions
// loop.
func (c *Controller) completeReassignments(a *activeController) {
	ctx, cancel := context.WithTimeout(context.Background(), c.sessionTimeout())
	defer cancel()
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	c.completeReassignmentsLocked(ctx, a)
}
