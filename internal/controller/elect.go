package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Leader elections an operator asks for (ElectLeaders), and the
// automatic balance of leaderships over the brokers.
//
// Every partition has a preferred leader, its first replica, and
// placement (placement.go) spreads those over the brokers. Failures and
// controlled shutdowns move leaderships away, and nothing moves them
// back by itself: a broker that returns follows, rejoins the ISRs, and
// leads nothing, while the others carry its share. A preferred election
// makes the preferred replica leader again, leader epoch + 1, when it is
// in the ISR and in service (neither fenced nor shutting down): an ISR
// member holds every committed record, so nothing acknowledged is lost,
// and the old leader follows it.
//
// The automatic balance is Kafka's (auto.leader.rebalance.enable):
// every LeaderImbalanceCheckInterval the active controller counts, per
// broker, the partitions it is the preferred leader of and does not
// lead; a broker whose share of those is above
// LeaderImbalancePerBrokerPercentage gets its preferred elections, at
// most maxElectionsPerBatch in one metadata entry (the rest at the next
// pass of the sessions loop, not a whole interval later).
//
// An unclean election on request (ElectUnclean) gives a leader to a
// partition without one, from its ISR if a member is in service, else
// from outside it, as unclean.go does for a topic that allows it, but
// for the partitions named, whatever the topic says: the operator
// chose to lose what only the ISR held.

const (
	// DefaultLeaderImbalanceCheckInterval is Kafka's
	// leader.imbalance.check.interval.seconds.
	DefaultLeaderImbalanceCheckInterval = 300 * time.Second
	// DefaultLeaderImbalancePerBrokerPercentage is Kafka's
	// leader.imbalance.per.broker.percentage.
	DefaultLeaderImbalancePerBrokerPercentage = 10
	// maxElectionsPerBatch bounds the elections in one metadata entry
	// (Kafka's controller makes at most 1000 per imbalance check).
	maxElectionsPerBatch = 1000
)

// planPreferred returns the record that makes partition i of t led by
// its preferred replica, or why it cannot: ErrElectionNotNeeded, or
// ErrPreferredLeaderNotAvailable.
func planPreferred(img *metadata.Image, t *metadata.Topic, i int32) (metadata.PartitionRecord, error) {
	p := &t.Partitions[i]
	if len(p.Replicas) == 0 {
		return metadata.PartitionRecord{}, fmt.Errorf("%w: %s-%d has no replicas", controlplane.ErrPreferredLeaderNotAvailable, t.Name, i)
	}
	pref := p.Replicas[0]
	switch {
	case p.Leader == pref:
		return metadata.PartitionRecord{}, fmt.Errorf("%w: %s-%d is led by its preferred replica %d", controlplane.ErrElectionNotNeeded, t.Name, i, pref)
	case !slices.Contains(p.ISR, pref):
		return metadata.PartitionRecord{}, fmt.Errorf("%w: the preferred replica %d of %s-%d is not in its ISR %v",
			controlplane.ErrPreferredLeaderNotAvailable, pref, t.Name, i, p.ISR)
	case !activeBroker(img, pref):
		return metadata.PartitionRecord{}, fmt.Errorf("%w: the preferred replica %d of %s-%d is fenced or shutting down",
			controlplane.ErrPreferredLeaderNotAvailable, pref, t.Name, i)
	case img.ReplicaOffline(pref, t.ID, i):
		// Out of the ISR as a rule (offline.go); as the last member it
		// stays in it, and must still not lead.
		return metadata.PartitionRecord{}, fmt.Errorf("%w: the preferred replica %d of %s-%d is offline (its log failed)",
			controlplane.ErrPreferredLeaderNotAvailable, pref, t.Name, i)
	}
	return newLeader(t, i, pref, p.ISR), nil
}

// newLeader is the record that makes leader the leader of partition i
// of t with isr, leader epoch + 1.
func newLeader(t *metadata.Topic, i int32, leader int32, isr []int32) metadata.PartitionRecord {
	p := &t.Partitions[i]
	return metadata.PartitionRecord{
		TopicID: t.ID, Partition: i, Replicas: p.Replicas, ISR: isr,
		Leader: leader, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1,
	}
}

// planRebalance returns the preferred elections the automatic balance
// makes in img (see the file comment), at most limit of them, and
// whether it stopped at limit; imbalanced names the brokers it found
// above pct.
func planRebalance(img *metadata.Image, pct int, limit int) (recs []metadata.Record, imbalanced []int32, more bool) {
	preferred, notLed := map[int32]int{}, map[int32]int{}
	for _, t := range img.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) == 0 {
				continue
			}
			preferred[p.Replicas[0]]++
			if p.Leader != p.Replicas[0] {
				notLed[p.Replicas[0]]++
			}
		}
	}
	for _, id := range img.BrokerIDs() {
		// notLed/preferred > pct/100, in integers.
		if preferred[id] > 0 && notLed[id]*100 > pct*preferred[id] && activeBroker(img, id) {
			imbalanced = append(imbalanced, id)
		}
	}
	if len(imbalanced) == 0 {
		return nil, nil, false
	}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) == 0 || !slices.Contains(imbalanced, p.Replicas[0]) {
				continue
			}
			rec, err := planPreferred(img, t, int32(i))
			if err != nil {
				continue
			}
			if len(recs) == limit {
				return recs, imbalanced, true
			}
			recs = append(recs, rec)
		}
	}
	return recs, imbalanced, false
}

// plannedElection is one election ElectLeaders will commit: result is
// its index in the results, unclean set for one from outside the ISR.
type plannedElection struct {
	result  int
	rec     metadata.PartitionRecord
	unclean *uncleanElection
}

// planElections decides req against img: a result per partition (per
// partition that needs an election, when req names none) and the
// elections to commit. decided holds the unclean elections whose
// replicas were asked how far they reach (decideUnclean).
func planElections(img *metadata.Image, req controlplane.ElectLeaders, decided map[controlplane.TopicPartition]uncleanElection) ([]controlplane.ElectionResult, []plannedElection) {
	var results []controlplane.ElectionResult
	var planned []plannedElection
	decide := func(tp controlplane.TopicPartition, all bool) {
		rec, unclean, err := planElection(img, req.Type, tp, decided)
		if all && errors.Is(err, controlplane.ErrElectionNotNeeded) {
			return
		}
		results = append(results, controlplane.ElectionResult{TopicPartition: tp, Err: err})
		if err == nil {
			planned = append(planned, plannedElection{result: len(results) - 1, rec: rec, unclean: unclean})
		}
	}
	if req.Partitions == nil {
		for _, name := range img.TopicNames() {
			for i := range img.Topics[name].Partitions {
				decide(controlplane.TopicPartition{Topic: name, Partition: int32(i)}, true)
			}
		}
		return results, planned
	}
	seen := make(map[controlplane.TopicPartition]bool, len(req.Partitions))
	for _, tp := range req.Partitions {
		if !seen[tp] {
			seen[tp] = true
			decide(tp, false)
		}
	}
	return results, planned
}

// planElection decides one partition.
func planElection(img *metadata.Image, typ controlplane.ElectionType, tp controlplane.TopicPartition, decided map[controlplane.TopicPartition]uncleanElection) (metadata.PartitionRecord, *uncleanElection, error) {
	t, ok := img.Topics[tp.Topic]
	if !ok {
		return metadata.PartitionRecord{}, nil, fmt.Errorf("%w: no topic %q", controlplane.ErrUnknownTopic, tp.Topic)
	}
	if tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return metadata.PartitionRecord{}, nil, fmt.Errorf("%w: topic %q has no partition %d (it has %d)",
			controlplane.ErrUnknownTopic, tp.Topic, tp.Partition, len(t.Partitions))
	}
	switch typ {
	case controlplane.ElectPreferred:
		rec, err := planPreferred(img, t, tp.Partition)
		return rec, nil, err
	case controlplane.ElectUnclean:
	default:
		return metadata.PartitionRecord{}, nil, fmt.Errorf("%w: unknown election type %d (0 is preferred, 1 unclean)", controlplane.ErrInvalidRequest, typ)
	}
	p := &t.Partitions[tp.Partition]
	if p.Leader != -1 {
		return metadata.PartitionRecord{}, nil, fmt.Errorf("%w: %s-%d is led by %d", controlplane.ErrElectionNotNeeded, tp.Topic, tp.Partition, p.Leader)
	}
	if clean := electLeader(img, t.ID, tp.Partition, p.Replicas, p.ISR, -1); clean >= 0 {
		return newLeader(t, tp.Partition, clean, p.ISR), nil, nil
	}
	if e, ok := decided[tp]; ok {
		if recs, kept := planUnclean(img, []uncleanElection{e}); len(recs) == 1 {
			return recs[0].(metadata.PartitionRecord), &kept[0], nil
		}
	}
	return metadata.PartitionRecord{}, nil, fmt.Errorf("%w: no replica of %s-%d is in service and able to say how far its log reaches",
		controlplane.ErrEligibleLeadersNotAvailable, tp.Topic, tp.Partition)
}

// ElectLeaders implements controlplane.Client: it decides every
// partition's election against one image and commits them, in entries
// of at most maxElectionsPerBatch; a result whose entry did not commit
// carries that entry's error.
func (c *Controller) ElectLeaders(ctx context.Context, req controlplane.ElectLeaders) ([]controlplane.ElectionResult, error) {
	if req.Type != controlplane.ElectPreferred && req.Type != controlplane.ElectUnclean {
		return nil, fmt.Errorf("%w: unknown election type %d (0 is preferred, 1 unclean)", controlplane.ErrInvalidRequest, req.Type)
	}
	a := c.active.Load()
	if a == nil {
		return nil, c.notController()
	}
	// The replicas of partitions that may elect uncleanly are asked how
	// far their logs reach before the change begins: the questions take
	// round trips, which other changes must not wait on.
	var decided map[controlplane.TopicPartition]uncleanElection
	if req.Type == controlplane.ElectUnclean && c.cfg.ReplicaLogs != nil {
		cands := uncleanRequested(c.fsm.applied.Load(), req.Partitions)
		if len(cands) > 0 {
			qctx, cancel := context.WithTimeout(ctx, uncleanQueryTimeout)
			elections := c.decideUnclean(qctx, a, cands)
			cancel()
			decided = make(map[controlplane.TopicPartition]uncleanElection, len(elections))
			for _, e := range elections {
				decided[controlplane.TopicPartition{Topic: e.candidate.topic.Name, Partition: e.candidate.partition}] = e
			}
		}
	}

	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	results, planned := planElections(img, req, decided)
	var committed int
	var unclean []uncleanElection
	for chunk := range slices.Chunk(planned, maxElectionsPerBatch) {
		recs := make([]metadata.Record, len(chunk))
		for i, e := range chunk {
			recs[i] = e.rec
		}
		if err := a.proposeLocked(ctx, c, recs); err != nil {
			for _, e := range planned[committed:] {
				results[e.result].Err = err
			}
			break
		}
		committed += len(chunk)
		for _, e := range chunk {
			if e.unclean != nil {
				unclean = append(unclean, *e.unclean)
			}
		}
	}
	if req.Type == controlplane.ElectPreferred {
		c.stats.preferredElections.Add(int64(committed))
	}
	c.reportUnclean(unclean)
	c.log.Info("leader elections on request", "type", req.Type, "partitions", len(results), "elected", committed,
		"not_committed", len(planned)-committed)
	return results, nil
}

// uncleanRequested returns the unclean candidates among the partitions
// named (nil: all): no leader, no ISR member in service, some replica
// live; whatever the topic's unclean.leader.election.enable.
func uncleanRequested(img *metadata.Image, partitions []controlplane.TopicPartition) []uncleanCandidate {
	var out []uncleanCandidate
	consider := func(t *metadata.Topic, i int32) {
		p := &t.Partitions[i]
		if p.Leader != -1 || electLeader(img, t.ID, i, p.Replicas, p.ISR, -1) >= 0 {
			return
		}
		var live []int32
		for _, r := range p.Replicas {
			if eligibleLeader(img, t.ID, i, r) {
				live = append(live, r)
			}
		}
		if len(live) > 0 {
			out = append(out, uncleanCandidate{topic: t, partition: i, partitionEpoch: p.PartitionEpoch, live: live})
		}
	}
	if partitions == nil {
		for _, name := range img.TopicNames() {
			for i := range img.Topics[name].Partitions {
				consider(img.Topics[name], int32(i))
			}
		}
		return out
	}
	seen := map[controlplane.TopicPartition]bool{}
	for _, tp := range partitions {
		t, ok := img.Topics[tp.Topic]
		if seen[tp] || !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		seen[tp] = true
		consider(t, tp.Partition)
	}
	return out
}

// rebalanceLeaders is one pass of the automatic balance; it reports
// whether it committed a full batch and more are waiting.
func (c *Controller) rebalanceLeaders(a *activeController) (more bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.sessionTimeout())
	defer cancel()
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		return false // not the controller any more, or closing
	}
	recs, imbalanced, more := planRebalance(img, c.cfg.LeaderImbalancePerBrokerPercentage, maxElectionsPerBatch)
	if len(recs) == 0 {
		return false
	}
	start := c.clock.Now()
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		c.log.Warn("could not commit preferred leader elections", "partitions", len(recs), "err", err)
		return false
	}
	c.stats.preferredElections.Add(int64(len(recs)))
	c.log.Info("preferred leaders elected: leadership was out of balance", "brokers", imbalanced,
		"partitions", len(recs), "more_to_do", more, "commit_time", c.clock.Now().Sub(start))
	return more
}
