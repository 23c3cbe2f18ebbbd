package group

import (
	"bytes"
	"context"
	"log/slog"
)

// SyncGroup: v0+ (ProtocolType and Protocol are v5+).
//
// In CompletingRebalance a follower's sync parks until the leader's
// arrives; the leader's assignments are written to the log as the group's
// metadata record, and only once that write is committed is every parked
// sync answered with its member's assignment and the group Stable. Members
// the leader left out get an empty assignment. If the write fails every
// parked sync gets the failure and the group rebalances. In Stable a sync
// answers the member's current assignment at once.
//
// If ctx ends first SyncGroup returns at once; the member stays, counted
// as synced, as in Kafka.
func (c *Coordinator) SyncGroup(ctx context.Context, req SyncRequest) SyncResult {
	if req.Group == "" {
		return SyncResult{Err: ErrInvalidGroupID}
	}
	g, err := c.lookup(req.Group, false)
	switch {
	case err == ErrCoordinatorLoadInProgress:
		// The rebalance in progress was lost with the old coordinator;
		// REBALANCE_IN_PROGRESS makes the member rejoin without looking
		// for the coordinator again (and older clients do not expect
		// COORDINATOR_LOAD_IN_PROGRESS here).
		return SyncResult{Err: ErrRebalanceInProgress}
	case err != nil:
		return SyncResult{Err: err}
	case g == nil:
		return SyncResult{Err: ErrUnknownMemberID}
	}
	g.mu.Lock()
	wait, res := c.syncLocked(g, req)
	g.mu.Unlock()
	if wait == nil {
		return res
	}
	select {
	case res := <-wait: // assignments stored (or failed), or a rebalance, fence or unload
		return res
	case <-ctx.Done(): // the member stays, counted as synced
		return SyncResult{Err: waitError(ctx)}
	}
}

// syncLocked handles a SyncGroup under the group's lock.
// REQUIRES: g.mu held.
func (c *Coordinator) syncLocked(g *group, req SyncRequest) (<-chan SyncResult, SyncResult) {
	if g.mu.state == stateDead {
		return nil, SyncResult{Err: ErrCoordinatorNotAvailable}
	}
	if err := g.validateMemberLocked(req.MemberID, req.InstanceID); err != nil {
		return nil, SyncResult{Err: err}
	}
	switch {
	case req.Generation != g.mu.generation:
		return nil, SyncResult{Err: ErrIllegalGeneration}
	case req.ProtocolType != nil && *req.ProtocolType != g.mu.protocolType,
		req.Protocol != nil && *req.Protocol != g.mu.protocol:
		return nil, SyncResult{Err: ErrInconsistentGroupProtocol}
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case statePreparingRebalance:
		return nil, SyncResult{Err: ErrRebalanceInProgress}
	case stateCompletingRebalance:
		wait := g.setSyncWaiterLocked(m)
		c.removePendingSyncLocked(g, m)
		if m.id != g.mu.leader {
			return wait, SyncResult{}
		}
		assignment := make(map[string][]byte, len(g.mu.members))
		for id := range g.mu.members {
			assignment[id] = bytes.Clone(req.Assignments[id]) // nil: the leader left it out
		}
		gen := g.mu.generation
		stillAwaiting := func() bool {
			return g.mu.state == stateCompletingRebalance && g.mu.generation == gen
		}
		c.logger.Info("group: assignment received from the leader", slog.String("group", g.id),
			slog.Int("generation", int(gen)), slog.Int("members", len(g.mu.members)))
		c.storeGroupLocked(g, stillAwaiting, assignment, func(err error) {
			if !stillAwaiting() {
				// The group moved on while the write was in flight; the
				// parked syncs were answered by whatever moved it.
				return
			}
			if err != nil {
				err = mapAppendError(err, appendGroup)
				c.logger.Warn("group: storing the assignment failed", slog.String("group", g.id), slog.Any("err", err))
				c.resetAndPropagateLocked(g, err)
				c.maybePrepareRebalanceLocked(g, "storing the assignment failed")
				return
			}
			for _, m := range g.mu.members {
				m.assignment = assignment[m.id]
			}
			c.propagateAssignmentLocked(g, nil)
			g.transitionLocked(stateStable, c.clock.Now())
		})
		return wait, SyncResult{}
	case stateStable:
		c.removePendingSyncLocked(g, m)
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		return nil, SyncResult{ProtocolType: g.mu.protocolType, Protocol: g.mu.protocol, Assignment: bytes.Clone(m.assignment)}
	}
	// Empty: the member was valid, so this cannot happen; answer as Kafka.
	return nil, SyncResult{Err: ErrUnknownMemberID}
}

// storeGroupLocked writes the group's metadata record in the background,
// in turn with the group's other writes. The record is built when the
// turn comes, from the group as it is then (with assignment, when given,
// in place of the members' current assignments), and only if still()
// says the write is still wanted; done (if the write was made) then runs
// under the group's lock with Append's error, unmapped.
//
// Background because the outcome must be applied even if the request that
// caused the write goes away: a leader's SyncGroup whose client
// disconnects must still complete the rebalance for the followers.
// REQUIRES: g.mu held.
func (c *Coordinator) storeGroupLocked(g *group, still func() bool, assignment map[string][]byte, done func(error)) {
	c.goBackground(func() {
		if err := g.acquireWrite(c.ctx); err != nil {
			return // closed; Close answered every parked request
		}
		defer g.releaseWrite()
		g.mu.Lock()
		if g.mu.state == stateDead || !still() {
			g.mu.Unlock()
			return
		}
		rec := groupMetadataRecordLocked(g, assignment)
		g.mu.Unlock()

		ctx, cancel := c.appendContext(c.ctx)
		err := c.log.Append(ctx, g.partition, []Record{rec})
		cancel()

		g.mu.Lock()
		defer g.mu.Unlock()
		if g.mu.state == stateDead {
			return // unloaded or closed meanwhile; its requests were answered
		}
		done(err)
	})
}
