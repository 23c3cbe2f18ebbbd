package group

import (
	"context"
	"log/slog"
	"time"
)

// Transactional offset commits (KIP-98, KIP-447): a transactional
// producer commits a group's offsets inside its transaction, and they
// count only if the transaction commits. The coordinator's side:
//
//   - CommitTxnOffsets writes them with Log.AppendTxn and keeps them in
//     the group as pending for the producer id (group.mu.txnOffsets);
//   - the transaction coordinator's marker lands on the group's
//     __consumer_offsets partition and the node calls CompleteTxn, which
//     commits them (into the group's offsets, by the later-in-the-log
//     rule below) or drops them;
//   - Load replays the same: transactional records pend per producer, a
//     marker completes them (records.go).
//
// The rule when a partition has both: a transaction's offset replaces the
// committed one only if the record that wrote it is later in the log
// (Kafka's GroupMetadata.completePendingTxnOffsetCommit and
// OffsetMetadataManager.replayEndTransactionMarker compare the records'
// log offsets; Kafka's comment there: so that compaction of
// __consumer_offsets cannot change which commit wins). So "txn commit,
// plain commit, marker" keeps the plain commit and "plain commit, txn
// commit, marker" the transaction's. Memory orders the records by
// offset.position (see there), which agrees with the log because one
// group's appends never overlap.

// txnAppend is a TxnOffsetCommit append in flight (group.mu.txnAppend).
type txnAppend struct {
	producerID int64
	parts      []TopicPartition
	// completed: a marker for producerID landed while the append was in
	// flight; commit says which. The append's records are then earlier
	// in the log than the marker (a later batch of the ended transaction
	// would have failed the partition's epoch check, since the marker of
	// a coordinator-ended transaction bumps the epoch and a client ends
	// its transaction only after its commits are answered), so its
	// outcome is completed as the marker says the moment it is applied,
	// as replay will.
	completed, commit bool
}

// txnCompletion is a marker CompleteTxn reported while the partition was
// loading (partitionState.completions).
type txnCompletion struct {
	producerID int64
	commit     bool
}

// CommitTxnOffsets: TxnOffsetCommit v0+ for one group (the server has
// checked the producer and the topics). It is CommitOffsets written inside
// the producer's transaction: the same records, appended with
// Log.AppendTxn, pending for req.ProducerID until CompleteTxn commits or
// aborts them. Pending offsets are not visible to FetchOffsets; a
// requireStable fetch answers their partitions UNSTABLE_OFFSET_COMMIT.
//
// Checks, as Kafka's GroupCoordinator.doTxnCommitOffsets: an empty group
// id is INVALID_GROUP_ID; a group this coordinator does not know is
// created (Empty) as for a simple consumer; a Dead one answers
// COORDINATOR_NOT_AVAILABLE. A request with a generation, member id or
// instance id must name a current member (else UNKNOWN_MEMBER_ID, or
// FENCED_INSTANCE_ID for a stale static instance) of the group's
// generation (else ILLEGAL_GENERATION, also for a member id with
// generation -1). One with none of them (TxnOffsetCommit v0-2, or a
// producer not fed by a group member) is accepted even while the group
// has members: those versions have no membership to show. Unlike
// OffsetCommit, a transactional commit is not refused while the group
// awaits assignments and does not restart the member's session: Kafka's
// doTxnCommitOffsets does neither, and the transaction coordinator, not
// the group, decides whether the offsets count.
//
// Each partition whose metadata is longer than MaxMetadataBytes answers
// OFFSET_METADATA_TOO_LARGE and is not written. If the append fails,
// nothing is pending and the others answer its mapped error (see Log);
// INVALID_PRODUCER_EPOCH and PRODUCER_FENCED pass through unchanged, so
// the producer learns it is fenced.
//
// err is group-wide (partErrs is nil with it); otherwise partErrs[i]
// answers req.Offsets[i].
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, req TxnCommitRequest) (err error, partErrs []error) {
	if req.Group == "" {
		return ErrInvalidGroupID, nil
	}
	// Created whatever the request names, as Kafka does; a request the
	// checks below refuse leaves it unused, and it is dropped again.
	g, err := c.lookup(req.Group, true)
	if err != nil {
		return err, nil
	}
	if err := g.acquireWrite(ctx); err != nil {
		return waitError(ctx), nil
	}
	defer g.releaseWrite()

	g.mu.Lock()
	if err := validateTxnCommitLocked(g, req); err != nil {
		c.maybeDropUnusedLocked(g, true)
		g.mu.Unlock()
		return err, nil
	}
	now := c.clock.Now()
	recs, stored, partErrs := c.offsetRecords(g.id, req.Offsets, func(OffsetCommit) time.Time { return now }, time.Time{})
	if len(recs) == 0 {
		c.maybeDropUnusedLocked(g, true)
		g.mu.Unlock()
		return nil, partErrs
	}
	a := &txnAppend{producerID: req.ProducerID}
	for _, i := range stored {
		a.parts = append(a.parts, req.Offsets[i].TopicPartition)
	}
	g.mu.txnAppend = a
	c.addProducerGroupLocked(g, req.ProducerID)
	g.mu.Unlock()

	actx, cancel := c.appendContext(ctx)
	err = c.log.AppendTxn(actx, g.partition, req.ProducerID, req.ProducerEpoch, req.Guard, recs)
	cancel()

	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.txnAppend = nil
	if err != nil {
		err = mapAppendError(err, appendOffsets)
		c.logger.Warn("group: transactional offset commit failed", slog.String("group", g.id),
			slog.Int64("producer", req.ProducerID), slog.Any("err", err))
		for _, i := range stored {
			partErrs[i] = err
		}
		c.maybeDropUnusedLocked(g, true)
		return nil, partErrs
	}
	if g.mu.state == stateDead {
		// Unloaded (or deleted) meanwhile: the records are in the log,
		// and whoever loads the partition next replays them.
		return nil, partErrs
	}
	pending := g.mu.txnOffsets[req.ProducerID]
	if pending == nil {
		pending = make(map[TopicPartition]offset)
		g.mu.txnOffsets[req.ProducerID] = pending
	}
	position := g.takePositionLocked()
	for _, i := range stored {
		o := req.Offsets[i]
		meta := ""
		if o.Metadata != nil {
			meta = *o.Metadata
		}
		pending[o.TopicPartition] = offset{offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: meta,
			commitTime: now, position: position}
	}
	if a.completed {
		g.completeTxnLocked(req.ProducerID, a.commit)
		c.maybeDropUnusedLocked(g, true)
	}
	return nil, partErrs
}

// validateTxnCommitLocked is Kafka's validateOffsetCommit with
// isTransactional set: no state rules, no session restart.
// REQUIRES: g.mu held.
func validateTxnCommitLocked(g *group, req TxnCommitRequest) error {
	switch {
	case g.mu.state == stateDead:
		return ErrCoordinatorNotAvailable
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil:
		if err := g.validateMemberLocked(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.mu.generation {
			return ErrIllegalGeneration
		}
	}
	return nil
}

// CompleteTxn applies a transaction marker of producerID that has been
// written (acks=all) to __consumer_offsets partition p: in every group of
// p, the producer's pending offsets are committed (each replacing the
// committed offset of its partition unless that was written later in the
// log) or, for an abort, dropped. A group left holding nothing (a simple
// consumer's group that only ever had this aborted transaction) is
// removed.
//
// While p is loading the completion is queued and applied once the replay
// is done, before any request reaches p's groups: the replay may have
// read the marker already, and applying it again finds nothing pending
// (no commit of a later transaction of the producer can have been written
// meanwhile: p answers COORDINATOR_LOAD_IN_PROGRESS). For a partition
// not loaded here it does nothing: whoever loads p replays the marker.
//
// The caller must let CompleteTxn return before it answers the marker's
// WriteTxnMarkers: until then the transaction coordinator does not
// complete the transaction, so the producer cannot commit offsets of its
// next transaction, which a completion running late would complete too.
//
// Threads: any goroutine. It reads p's producer index under c.mu and
// releases it before taking each group's lock in turn (the lock order
// forbids c.mu then group.mu); it never waits for a write turn, so a
// marker is not held up by a group's appends in flight.
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	c.mu.Lock()
	ps := c.mu.partitions[p]
	if c.mu.closed || ps == nil {
		c.mu.Unlock()
		return
	}
	if ps.loading {
		ps.completions = append(ps.completions, txnCompletion{producerID: producerID, commit: commit})
		c.mu.Unlock()
		return
	}
	groups := ps.producerGroups[producerID]
	delete(ps.producerGroups, producerID)
	c.mu.Unlock()

	for g := range groups {
		g.mu.Lock()
		if g.mu.state != stateDead {
			if a := g.mu.txnAppend; a != nil && a.producerID == producerID {
				a.completed, a.commit = true, commit
			}
			g.completeTxnLocked(producerID, commit)
			c.maybeDropUnusedLocked(g, false)
		}
		g.mu.Unlock()
	}
}

// addProducerGroupLocked records that g may hold producerID's pending
// offsets (partitionState.producerGroups). A group no longer in its
// partition (unloaded meanwhile) is not recorded: it is Dead, or about to
// be, and completions skip it anyway.
// REQUIRES: g.mu held (the lock order allows c.mu inside it).
func (c *Coordinator) addProducerGroupLocked(g *group, producerID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.mu.partitions[g.partition]
	if ps == nil || ps.loading || ps.groups[g.id] != g {
		return
	}
	if ps.producerGroups == nil {
		ps.producerGroups = make(map[int64]map[*group]struct{})
	}
	set := ps.producerGroups[producerID]
	if set == nil {
		set = make(map[*group]struct{})
		ps.producerGroups[producerID] = set
	}
	set[g] = struct{}{}
}

// producerGroupsOf indexes loaded groups by the producers whose offsets
// they hold pending.
func producerGroupsOf(groups map[string]*group) map[int64]map[*group]struct{} {
	index := make(map[int64]map[*group]struct{})
	for _, g := range groups {
		g.mu.Lock()
		for pid := range g.mu.txnOffsets {
			if index[pid] == nil {
				index[pid] = make(map[*group]struct{})
			}
			index[pid][g] = struct{}{}
		}
		g.mu.Unlock()
	}
	return index
}

// applyCompletions applies completions queued during a load to its
// groups, which no request can reach yet; a group left holding nothing
// is dropped from groups (and index).
func (c *Coordinator) applyCompletions(groups map[string]*group, index map[int64]map[*group]struct{}, queued []txnCompletion) {
	for _, q := range queued {
		for g := range index[q.producerID] {
			g.mu.Lock()
			g.completeTxnLocked(q.producerID, q.commit)
			if g.unusedLocked() {
				c.killGroupLocked(g, ErrNotCoordinator)
				delete(groups, g.id)
			}
			g.mu.Unlock()
		}
		delete(index, q.producerID)
	}
}

// completeTxnLocked ends producerID's pending offsets in g: on commit each
// becomes the committed offset of its partition unless the committed one
// was written later in the log; on abort they are dropped. Completing a
// producer with nothing pending does nothing.
// REQUIRES: g.mu held.
func (g *group) completeTxnLocked(producerID int64, commit bool) {
	pending, ok := g.mu.txnOffsets[producerID]
	if !ok {
		return
	}
	delete(g.mu.txnOffsets, producerID)
	if !commit {
		return
	}
	for tp, o := range pending {
		if cur, ok := g.mu.offsets[tp]; !ok || laterInLog(o, cur) {
			g.mu.offsets[tp] = o
		}
	}
}

// laterInLog: o's record is later in the log than cur's, so a committed
// transaction's o replaces cur.
func laterInLog(o, cur offset) bool { return o.position > cur.position }

// dropTxnOffsetLocked drops every producer's pending offset of tp: what
// replaying a (non-transactional) tombstone of tp does, as Kafka's
// OffsetMetadataManager.replay does.
// REQUIRES: g.mu held.
func (g *group) dropTxnOffsetLocked(tp TopicPartition) {
	for pid, pending := range g.mu.txnOffsets {
		delete(pending, tp)
		if len(pending) == 0 {
			delete(g.mu.txnOffsets, pid)
		}
	}
}

// hasTxnOffsetLocked: a transactional commit of tp is pending or being
// written, so its committed offset is not stable.
// REQUIRES: g.mu held.
func (g *group) hasTxnOffsetLocked(tp TopicPartition) bool {
	for _, pending := range g.mu.txnOffsets {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	if a := g.mu.txnAppend; a != nil {
		for _, p := range a.parts {
			if p == tp {
				return true
			}
		}
	}
	return false
}

// hasTxnOffsetsLocked: any transactional commit is pending or being
// written.
// REQUIRES: g.mu held.
func (g *group) hasTxnOffsetsLocked() bool {
	return len(g.mu.txnOffsets) > 0 || g.mu.txnAppend != nil
}

// offsetPartitionsLocked is every partition with a committed or pending
// offset: what deleting the group's offsets must tombstone.
// REQUIRES: g.mu held.
func (g *group) offsetPartitionsLocked() map[TopicPartition]struct{} {
	tps := make(map[TopicPartition]struct{}, len(g.mu.offsets))
	for tp := range g.mu.offsets {
		tps[tp] = struct{}{}
	}
	for _, pending := range g.mu.txnOffsets {
		for tp := range pending {
			tps[tp] = struct{}{}
		}
	}
	return tps
}

// takePositionLocked returns the position of the append whose outcome is
// being applied (see offset.position).
// REQUIRES: g.mu held, and g's write turn.
func (g *group) takePositionLocked() int64 {
	p := g.mu.nextPosition
	g.mu.nextPosition++
	return p
}
