package group

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// CommitOffsets: OffsetCommit v0+ for one group.
//
// A member commits with its member id and the current generation: any
// other generation is ILLEGAL_GENERATION, an unknown member
// UNKNOWN_MEMBER_ID, a stale static member FENCED_INSTANCE_ID, and while
// the group awaits assignments REBALANCE_IN_PROGRESS (commits are allowed
// during PreparingRebalance, for the generation that is ending). A simple
// consumer commits with generation -1 and no member id, allowed only
// while the group has no members (else UNKNOWN_MEMBER_ID); a commit for a
// group this coordinator does not know creates it, unless it names a
// generation (ILLEGAL_GENERATION). A member's commit also restarts its
// session.
//
// Each partition whose metadata is longer than MaxMetadataBytes answers
// OFFSET_METADATA_TOO_LARGE and is not stored. The others are written as
// one batch and are visible to FetchOffsets only once it is committed; if
// the write fails they all answer the mapped error (see Log) and the
// committed offsets are unchanged.
//
// err is group-wide (partErrs is nil with it); otherwise partErrs[i]
// answers req.Offsets[i].
func (c *Coordinator) CommitOffsets(ctx context.Context, req CommitRequest) (err error, partErrs []error) {
	g, err := c.lookup(req.Group, false)
	if err != nil {
		return err, nil
	}
	if g == nil {
		if req.Generation >= 0 {
			// A member of a generation this coordinator never saw: the
			// group is gone (or moved); the member must rejoin.
			return ErrIllegalGeneration, nil
		}
		if g, err = c.lookup(req.Group, true); err != nil {
			return err, nil
		}
	}
	if err := g.acquireWrite(ctx); err != nil {
		return waitError(ctx), nil
	}
	defer g.releaseWrite()

	g.mu.Lock()
	if err := c.validateCommitLocked(g, req); err != nil {
		c.maybeDropUnusedLocked(g, true)
		g.mu.Unlock()
		return err, nil
	}
	now := c.clock.Now()
	recs, stored, partErrs := c.offsetRecords(g.id, req.Offsets, func(o OffsetCommit) time.Time { return commitTime(o, now) }, expireTime(req, now))
	if len(recs) == 0 {
		c.maybeDropUnusedLocked(g, true)
		g.mu.Unlock()
		return nil, partErrs
	}
	g.mu.Unlock()

	actx, cancel := c.appendContext(ctx)
	err = c.log.Append(actx, g.partition, recs)
	cancel()

	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		err = mapAppendError(err, appendOffsets)
		c.logger.Warn("group: offset commit failed", slog.String("group", g.id), slog.Any("err", err))
		for _, i := range stored {
			partErrs[i] = err
		}
		c.maybeDropUnusedLocked(g, true)
		return nil, partErrs
	}
	if g.mu.state == stateDead {
		// Unloaded meanwhile: the commit is in the log, and the new
		// coordinator reads it from there.
		return nil, partErrs
	}
	// The batch is later in the log than every record this group has
	// applied, so its offsets replace whatever is committed; a pending
	// transaction's offsets of the same partitions, if it commits, will
	// not replace them (see CompleteTxn).
	position := g.takePositionLocked()
	for _, i := range stored {
		o := req.Offsets[i]
		meta := ""
		if o.Metadata != nil {
			meta = *o.Metadata
		}
		g.mu.offsets[o.TopicPartition] = offset{offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: meta,
			commitTime: commitTime(o, now), expireTime: expireTime(req, now), position: position}
	}
	return nil, partErrs
}

// offsetRecords are the records of a commit of offsets: each partition
// whose metadata is longer than MaxMetadataBytes answers
// OFFSET_METADATA_TOO_LARGE in partErrs and is left out; stored are the
// indexes into offsets of the partitions written.
func (c *Coordinator) offsetRecords(group string, offsets []OffsetCommit, commitTime func(OffsetCommit) time.Time, expire time.Time) (recs []Record, stored []int, partErrs []error) {
	partErrs = make([]error, len(offsets))
	for i, o := range offsets {
		if o.Metadata != nil && len(*o.Metadata) > c.cfg.MaxMetadataBytes {
			partErrs[i] = ErrOffsetMetadataTooLarge
			continue
		}
		recs = append(recs, offsetCommitRecord(group, o, commitTime(o), expire))
		stored = append(stored, i)
	}
	return recs, stored, partErrs
}

// commitTime is when o counts as committed: its own commit timestamp
// (OffsetCommit v1) or now.
func commitTime(o OffsetCommit, now time.Time) time.Time {
	if o.CommitTime.IsZero() {
		return now
	}
	return o.CommitTime
}

// expireTime is when offsets committed by req at now expire on their
// own (OffsetCommit v2-v4's retention), or zero: by the group's rules.
func expireTime(req CommitRequest, now time.Time) time.Time {
	if req.Retention <= 0 {
		return time.Time{}
	}
	return now.Add(req.Retention)
}

// validateCommitLocked is Kafka's validateOffsetCommit, followed by the
// state rules; a member's commit restarts its session.
// REQUIRES: g.mu held.
func (c *Coordinator) validateCommitLocked(g *group, req CommitRequest) error {
	switch {
	case g.mu.state == stateDead:
		return ErrCoordinatorNotAvailable
	case req.Generation < 0 && g.mu.state == stateEmpty:
		return nil // a simple consumer, or an admin resetting offsets
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil:
		if err := g.validateMemberLocked(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.mu.generation {
			return ErrIllegalGeneration
		}
	default:
		// No member id and no generation while the group has members:
		// only members may commit to it.
		return ErrUnknownMemberID
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case stateStable, statePreparingRebalance:
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		return nil
	case stateCompletingRebalance:
		// The member has the new generation from its JoinGroup but no
		// assignment yet: it should not be committing.
		return ErrRebalanceInProgress
	}
	return ErrUnknownMemberID
}

// FetchOffsets: OffsetFetch v0+ for one group. It answers the committed
// offset of each partition in parts (all the group's partitions with a
// committed offset, sorted, when parts is nil), -1 with "" metadata for a
// partition with none, and whatever the group's state: simple consumers
// have no membership to check. Offsets pending in a transaction are not
// committed yet and never answered. With requireStable (OffsetFetch v7+,
// KIP-447) a partition with a transactional commit pending or being
// written answers -1 with ErrUnstableOffsetCommit in its Err instead, as
// Kafka's GroupMetadataManager.getOffsets does: a consumer taking over
// the partition waits for the transaction to end rather than start from
// an offset the transaction may be about to replace.
func (c *Coordinator) FetchOffsets(group string, parts []TopicPartition, requireStable bool) ([]CommittedOffset, error) {
	g, err := c.lookup(group, false)
	if err != nil {
		return nil, err
	}
	none := func(tp TopicPartition) CommittedOffset {
		empty := ""
		return CommittedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1, Metadata: &empty}
	}
	if g == nil {
		out := make([]CommittedOffset, 0, len(parts))
		for _, tp := range parts {
			out = append(out, none(tp))
		}
		return out, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if parts == nil {
		for tp := range g.mu.offsets {
			parts = append(parts, tp)
		}
		sortPartitions(parts)
	}
	out := make([]CommittedOffset, 0, len(parts))
	for _, tp := range parts {
		if requireStable && g.hasTxnOffsetLocked(tp) {
			unstable := none(tp)
			unstable.Err = ErrUnstableOffsetCommit
			out = append(out, unstable)
			continue
		}
		o, ok := g.mu.offsets[tp]
		if !ok {
			out = append(out, none(tp))
			continue
		}
		meta := o.metadata
		out = append(out, CommittedOffset{TopicPartition: tp, Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: &meta})
	}
	return out, nil
}

// DeleteOffsets: OffsetDelete v0 (KIP-496). An Empty group's offsets are
// deleted outright. A "consumer" group with members keeps the offsets of
// topics a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for those
// partitions) and deletes the rest; a group of another protocol type with
// members answers NON_EMPTY_GROUP. Deleting writes a tombstone per
// partition with an offset committed or pending in a transaction, and
// the tombstone ends both: pending offsets of the partition are dropped,
// and their transaction's commit no longer brings them back (Kafka's
// OffsetMetadataManager.deleteOffsets and its replay of tombstones). A
// partition with neither answers nil. err is group-wide (partErrs is nil
// with it); otherwise partErrs[i] answers parts[i].
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, parts []TopicPartition) (err error, partErrs []error) {
	if group == "" {
		return ErrInvalidGroupID, nil
	}
	g, err := c.lookup(group, false)
	if err != nil {
		return err, nil
	}
	if g == nil {
		return ErrGroupIDNotFound, nil
	}
	if err := g.acquireWrite(ctx); err != nil {
		return waitError(ctx), nil
	}
	defer g.releaseWrite()

	g.mu.Lock()
	partErrs = make([]error, len(parts))
	var eligible []int
	switch {
	case g.mu.state == stateDead:
		g.mu.Unlock()
		return ErrGroupIDNotFound, nil
	case g.mu.state == stateEmpty:
		for i := range parts {
			eligible = append(eligible, i)
		}
	case g.mu.protocolType == consumerProtocolType:
		for i, tp := range parts {
			if g.isSubscribedLocked(tp.Topic) {
				partErrs[i] = ErrGroupSubscribedToTopic
				continue
			}
			eligible = append(eligible, i)
		}
	default:
		g.mu.Unlock()
		return ErrNonEmptyGroup, nil
	}
	var recs []Record
	var deleted []TopicPartition
	held := g.offsetPartitionsLocked()
	for _, i := range eligible {
		if _, ok := held[parts[i]]; ok && !slices.Contains(deleted, parts[i]) {
			recs = append(recs, offsetTombstone(g.id, parts[i]))
			deleted = append(deleted, parts[i])
		}
	}
	// An Empty group left with no offsets (committed or pending) is gone,
	// as Kafka removes it (and tombstones its metadata) at once rather
	// than at the next retention check.
	dies := len(recs) > 0 && g.mu.state == stateEmpty && len(g.mu.pending) == 0 && len(deleted) == len(held)
	if dies && g.mu.generation > 0 {
		recs = append(recs, groupTombstone(g.id))
	}
	g.mu.Unlock()
	if len(recs) == 0 {
		return nil, partErrs
	}

	actx, cancel := c.appendContext(ctx)
	err = c.log.Append(actx, g.partition, recs)
	cancel()

	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		err = mapAppendError(err, appendDelete)
		for _, i := range eligible {
			partErrs[i] = err
		}
		return nil, partErrs
	}
	// A transaction's marker that landed meanwhile (CompleteTxn) may have
	// committed pending offsets of these partitions: before the
	// tombstones in the log, they are gone now; after them, the
	// tombstones had dropped them. Gone either way.
	for _, tp := range deleted {
		delete(g.mu.offsets, tp)
		g.dropTxnOffsetLocked(tp)
	}
	if dies && g.mu.state == stateEmpty && len(g.mu.offsets) == 0 && !g.hasTxnOffsetsLocked() {
		c.logger.Info("group: removed after its last offsets were deleted", slog.String("group", g.id))
		c.killGroupLocked(g, ErrCoordinatorNotAvailable)
		c.removeGroupLocked(g)
	}
	return nil, partErrs
}

// runRetention is the periodic offset expiry (offsets.retention.check.
// interval.ms): every loaded group's expired offsets are tombstoned and
// removed, and an Empty group left with no offsets dies (its metadata
// tombstoned too).
func (c *Coordinator) runRetention() {
	groups, _ := c.loadedGroups()
	for _, g := range groups {
		c.expireGroup(g)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed {
		c.mu.retention = c.afterFunc(c.cfg.RetentionCheckInterval, c.runRetention)
	}
}

// expireGroup applies retention to one group. The tombstones are written
// before anything is removed; if the write fails nothing is, and the next
// check tries again.
func (c *Coordinator) expireGroup(g *group) {
	if err := g.acquireWrite(c.ctx); err != nil {
		return
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if g.mu.state == stateDead || g.mu.deleting {
		g.mu.Unlock()
		return
	}
	expired := g.expiredOffsetsLocked(c.clock.Now(), c.cfg.OffsetsRetention)
	// Pending transactional offsets keep the group: its transaction may
	// still commit them (Kafka's cleanupExpiredOffsets keeps a group with
	// open transactions).
	dies := g.mu.state == stateEmpty && len(g.mu.pending) == 0 && len(expired) == len(g.mu.offsets) &&
		!g.hasTxnOffsetsLocked()
	if len(expired) == 0 && !dies {
		g.mu.Unlock()
		return
	}
	recs := make([]Record, 0, len(expired)+1)
	for _, tp := range expired {
		recs = append(recs, offsetTombstone(g.id, tp))
	}
	if dies && g.mu.generation > 0 {
		// Generation 0 never completed a rebalance, so never wrote
		// metadata to tombstone.
		recs = append(recs, groupTombstone(g.id))
	}
	if dies {
		g.mu.deleting = true
	}
	g.mu.Unlock()

	var err error
	if len(recs) > 0 {
		ctx, cancel := c.appendContext(c.ctx)
		err = c.log.Append(ctx, g.partition, recs)
		cancel()
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.deleting = false
	if g.mu.state == stateDead {
		return
	}
	if err != nil {
		c.logger.Warn("group: writing expired offsets failed; retrying at the next check",
			slog.String("group", g.id), slog.Any("err", err))
		return
	}
	for _, tp := range expired {
		delete(g.mu.offsets, tp)
	}
	if len(expired) > 0 {
		c.logger.Info("group: offsets expired", slog.String("group", g.id), slog.Int("count", len(expired)))
	}
	if dies {
		c.logger.Info("group: removed after its offsets expired", slog.String("group", g.id))
		c.killGroupLocked(g, ErrCoordinatorNotAvailable)
		c.removeGroupLocked(g)
	}
}
