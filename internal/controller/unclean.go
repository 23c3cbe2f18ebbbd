package controller

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Unclean leader elections. A partition whose last ISR member is fenced
// has no leader (fence.go) and waits for that member: it alone is known
// to hold every committed record. A topic that sets
// unclean.leader.election.enable=true prefers availability: the active
// controller elects a live replica from outside the ISR, as its sole ISR
// member, leader epoch + 1, and says in its log and in a metric that
// records may have been lost. When the old ISR member returns it follows
// the new leader and cuts its log back to where the two histories part
// (the leader epochs, KIP-101), so the replicas agree again; what only
// it held is what was lost.
//
// Kafka's ZooKeeper and KRaft controllers elect the first live replica
// in replica order. Fjord asks every live replica first how far its log
// reaches (ReplicaLogs: the latest leader epoch and the log end offset)
// and elects the furthest, comparing the epoch first (a log that reaches
// a later epoch holds a later leader's records) and then the offset,
// replica order breaking ties, so an unclean election loses as little as
// it can. A replica that does not answer within uncleanQueryTimeout is
// not a candidate; when none answers, the partition stays offline and
// the next pass asks again.
//
// The pass runs on the sessions loop's schedule, in a goroutine of its
// own (the questions take network round trips), at most one at a time.
// Its elections are checked again under proposeMu against the image of
// the moment (the partition is still without a leader, at the same
// partition epoch, and the chosen broker is still active) and
// committed in one batch.

// UncleanLeaderElectionConfig is the topic config that allows an unclean
// leader election.
const UncleanLeaderElectionConfig = "unclean.leader.election.enable"

// TopicConfigs returns the definitions of the topic configs the
// controller acts on.
func TopicConfigs() []topicconfig.Def {
	return []topicconfig.Def{{
		Name: UncleanLeaderElectionConfig, Default: "false", Type: "boolean",
		Doc: "Whether a partition whose in-sync replicas are all fenced may elect a live replica from outside the ISR " +
			"(the most caught up): available again at once, but records only the ISR held are lost.",
		Validate: topicconfig.OneOf("true", "false"),
	}}
}

// ReplicaLogs asks brokers how far their replicas reach.
type ReplicaLogs interface {
	// LogEnd returns the latest leader epoch (-1: none) and the log end
	// offset of broker's replica of topic-partition.
	LogEnd(ctx context.Context, broker int32, topic string, partition int32) (epoch int32, end int64, err error)
}

// uncleanQueryTimeout bounds one pass's questions.
const uncleanQueryTimeout = time.Second

// uncleanCandidate is a partition that may elect uncleanly: no leader,
// no live ISR member, the topic allowing it, some replica live.
type uncleanCandidate struct {
	topic          *metadata.Topic
	partition      int32
	partitionEpoch int32
	live           []int32 // active replicas, in replica order
}

// uncleanCandidates returns img's partitions that may elect uncleanly.
func uncleanCandidates(img *metadata.Image) []uncleanCandidate {
	var out []uncleanCandidate
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		if img.TopicConfig(t, UncleanLeaderElectionConfig) != "true" {
			continue
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != -1 || slices.ContainsFunc(p.ISR, func(id int32) bool { return eligibleLeader(img, t.ID, int32(i), id) }) {
				// Led, or a clean election is coming (planUnfence). An
				// ISR member whose replica is offline (offline.go) is
				// active but brings none until its process is replaced.
				continue
			}
			var live []int32
			for _, r := range p.Replicas {
				if eligibleLeader(img, t.ID, int32(i), r) {
					live = append(live, r)
				}
			}
			if len(live) > 0 {
				out = append(out, uncleanCandidate{topic: t, partition: int32(i), partitionEpoch: p.PartitionEpoch, live: live})
			}
		}
	}
	return out
}

func activeBroker(img *metadata.Image, id int32) bool {
	b, ok := img.Brokers[id]
	return ok && b.Active()
}

// logEnd is one replica's answer.
type logEnd struct {
	broker int32
	epoch  int32
	end    int64
}

// furthest returns the replica whose log reaches furthest (epoch, then
// offset; the first in answers' order, which is replica order, on a
// tie), false when answers is empty.
func furthest(answers []logEnd) (logEnd, bool) {
	if len(answers) == 0 {
		return logEnd{}, false
	}
	best := answers[0]
	for _, a := range answers[1:] {
		if cmp.Or(cmp.Compare(a.epoch, best.epoch), cmp.Compare(a.end, best.end)) > 0 {
			best = a
		}
	}
	return best, true
}

// uncleanElection is one decided election.
type uncleanElection struct {
	candidate uncleanCandidate
	leader    logEnd
	lostISR   []int32 // the fenced ISR it replaces
}

// planUnclean returns the PartitionRecords of the elections still valid
// in img: the partition still has no leader at the same partition epoch,
// and the chosen broker is active (neither fenced nor shutting down) and
// its replica not offline.
// The new ISR is the leader alone.
func planUnclean(img *metadata.Image, elections []uncleanElection) ([]metadata.Record, []uncleanElection) {
	var recs []metadata.Record
	var kept []uncleanElection
	for _, e := range elections {
		t := img.TopicsByID[e.candidate.topic.ID]
		if t == nil || int(e.candidate.partition) >= len(t.Partitions) {
			continue // deleted meanwhile
		}
		p := &t.Partitions[e.candidate.partition]
		if p.Leader != -1 || p.PartitionEpoch != e.candidate.partitionEpoch || !eligibleLeader(img, t.ID, e.candidate.partition, e.leader.broker) ||
			!slices.Contains(p.Replicas, e.leader.broker) {
			continue
		}
		e.lostISR = slices.Clone(p.ISR)
		recs = append(recs, metadata.PartitionRecord{
			TopicID: t.ID, Partition: e.candidate.partition, Replicas: p.Replicas, ISR: []int32{e.leader.broker},
			Leader: e.leader.broker, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1,
		})
		kept = append(kept, e)
	}
	return recs, kept
}

// uncleanPass runs the passes of one active controller, one at a time.
type uncleanPass struct {
	mu      sync.Mutex
	running bool
	// none is the last image found to have no candidates: the sessions
	// loop asks about every image many times a second, and scanning
	// every topic's config each time would cost a large cluster for
	// nothing. An image with candidates is scanned again each time, so
	// a pass that could not decide is retried.
	none *metadata.Image
}

// maybeElectUnclean starts a pass over img when there are candidates and
// no pass is running.
func (c *Controller) maybeElectUnclean(a *activeController, img *metadata.Image) {
	if c.cfg.ReplicaLogs == nil {
		return
	}
	a.unclean.mu.Lock()
	unchanged := a.unclean.none == img
	a.unclean.mu.Unlock()
	if unchanged {
		return
	}
	candidates := uncleanCandidates(img)
	if len(candidates) == 0 {
		a.unclean.mu.Lock()
		a.unclean.none = img
		a.unclean.mu.Unlock()
		return
	}
	a.unclean.mu.Lock()
	if a.unclean.running {
		a.unclean.mu.Unlock()
		return
	}
	a.unclean.running = true
	a.unclean.mu.Unlock()
	go func() {
		defer func() {
			a.unclean.mu.Lock()
			a.unclean.running = false
			a.unclean.mu.Unlock()
		}()
		c.electUnclean(a, candidates)
	}()
}

// electUnclean asks every candidate's live replicas how far they reach,
// all at once, and commits the elections that still hold.
func (c *Controller) electUnclean(a *activeController, candidates []uncleanCandidate) {
	ctx, cancel := context.WithTimeout(context.Background(), uncleanQueryTimeout)
	defer cancel()
	elections := c.decideUnclean(ctx, a, candidates)
	if len(elections) == 0 {
		return
	}

	commitCtx, commitCancel := context.WithTimeout(context.Background(), c.sessionTimeout())
	defer commitCancel()
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	img, err := c.validationImageLocked(commitCtx, a)
	if err != nil {
		return // not the controller any more, or closing
	}
	recs, kept := planUnclean(img, elections)
	if len(recs) == 0 {
		return
	}
	if err := a.proposeLocked(commitCtx, c, recs); err != nil {
		c.log.Warn("could not commit unclean leader elections", "partitions", len(recs), "err", err)
		return
	}
	c.reportUnclean(kept)
}

// reportUnclean counts and logs committed unclean elections.
func (c *Controller) reportUnclean(kept []uncleanElection) {
	c.stats.uncleanElections.Add(int64(len(kept)))
	for _, e := range kept {
		c.log.Warn("unclean leader election: records only the fenced in-sync replicas held may have been lost",
			"topic", e.candidate.topic.Name, "partition", e.candidate.partition, "leader", e.leader.broker,
			"leader_log_end_offset", e.leader.end, "leader_last_epoch", e.leader.epoch, "fenced_isr", e.lostISR)
	}
}

// decideUnclean asks every candidate's live replicas how far they reach,
// all at once, and returns an election for each candidate with an
// answer: its furthest replica. A lost leadership ends the questions
// early.
func (c *Controller) decideUnclean(ctx context.Context, a *activeController, candidates []uncleanCandidate) []uncleanElection {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	answers := make([][]logEnd, len(candidates))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, cand := range candidates {
		for _, b := range cand.live {
			wg.Go(func() {
				epoch, end, err := c.cfg.ReplicaLogs.LogEnd(ctx, b, cand.topic.Name, cand.partition)
				if err != nil {
					c.log.Debug("unclean election: a replica did not say how far its log reaches",
						"topic", cand.topic.Name, "partition", cand.partition, "broker", b, "err", err)
					return
				}
				mu.Lock()
				answers[i] = append(answers[i], logEnd{broker: b, epoch: epoch, end: end})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	var elections []uncleanElection
	for i, cand := range candidates {
		// Replica order for the tie-break, whatever order they answered in.
		slices.SortFunc(answers[i], func(x, y logEnd) int {
			return cmp.Compare(slices.Index(cand.live, x.broker), slices.Index(cand.live, y.broker))
		})
		if best, ok := furthest(answers[i]); ok {
			elections = append(elections, uncleanElection{candidate: cand, leader: best})
		}
	}
	return elections
}
