package group

import (
	"bytes"
	"context"
	"log/slog"
	"time"
)

// JoinGroup: v0+ (the server fills RebalanceTimeout from SessionTimeout
// for v0, RequireKnownMemberID for v4+, SupportsSkipAssignment for v9+).
//
// A join parks until the group's rebalance completes: when every member
// (and every id handed out with MEMBER_ID_REQUIRED) has joined, or at the
// rebalance timeout (the largest of the members'), which drops the dynamic
// members that did not rejoin. A group rebalancing from Empty first waits
// InitialRebalanceDelay, extended while new members keep arriving but
// never past the rebalance timeout (KIP-134). Some joins answer at once: a
// follower rejoining a Stable group with unchanged protocols gets the
// current generation back, and so does any member rejoining during
// CompletingRebalance with unchanged protocols (it lost the answer); a
// static member rejoining a Stable group with a new member id takes over
// its old id's place and assignment without a rebalance, once the group's
// metadata with the new id is written (KIP-345).
//
// If ctx ends first JoinGroup returns at once; the member stays, counted
// as joined, and is dropped by its session timeout if it does not come
// back, as in Kafka.
func (c *Coordinator) JoinGroup(ctx context.Context, req JoinRequest) JoinResult {
	if req.Group == "" {
		return joinError(req.MemberID, ErrInvalidGroupID)
	}
	if err := c.status(req.Group); err != nil {
		return joinError(req.MemberID, err)
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		return joinError(req.MemberID, ErrInvalidSessionTimeout)
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	g, err := c.lookup(req.Group, req.MemberID == "")
	if err != nil {
		return joinError(req.MemberID, err)
	}
	if g == nil {
		// A member id for a group that does not exist: it was removed,
		// or this is a stale id from another coordinator.
		return joinError(req.MemberID, ErrUnknownMemberID)
	}

	g.mu.Lock()
	wait, res := c.joinLocked(g, req)
	if g.mu.state == statePreparingRebalance {
		c.maybeCompleteJoinLocked(g)
	}
	if wait == nil && res.Err != nil {
		c.maybeDropUnusedLocked(g, false)
	}
	g.mu.Unlock()
	if wait == nil {
		return res
	}
	select {
	case res := <-wait: // the rebalance completed, or the member was removed or fenced
		return res
	case <-ctx.Done(): // the member stays joined; see above
		return joinError(req.MemberID, waitError(ctx))
	}
}

// joinLocked handles a JoinGroup under the group's lock: either an answer
// now, or a channel the answer will come on.
// REQUIRES: g.mu held.
func (c *Coordinator) joinLocked(g *group, req JoinRequest) (<-chan JoinResult, JoinResult) {
	if g.mu.state == stateDead || g.mu.deleting {
		// Removed (or being removed) while we looked it up: the client
		// finds the coordinator again and rejoins a fresh group.
		return nil, joinError(req.MemberID, ErrCoordinatorNotAvailable)
	}
	if !c.acceptJoiningMemberLocked(g, req.MemberID) {
		// Kafka drops a member it turns away, so an oversized group
		// sheds the members that have not rejoined yet.
		if m := g.mu.members[req.MemberID]; m != nil {
			c.removeMemberAndUpdateLocked(g, m, "group is full")
		} else if t, ok := g.mu.pending[req.MemberID]; ok {
			t.Stop()
			delete(g.mu.pending, req.MemberID)
		}
		return nil, joinError("", ErrGroupMaxSizeReached)
	}
	if req.MemberID == "" {
		return c.joinNewMemberLocked(g, req)
	}
	return c.joinKnownMemberLocked(g, req)
}

// acceptJoiningMemberLocked applies group.max.size as Kafka does. While
// rebalancing it counts the members that have rejoined, not all members:
// the limit may have been lowered, and counting arrivals turns away the
// last ones to rejoin.
// REQUIRES: g.mu held.
func (c *Coordinator) acceptJoiningMemberLocked(g *group, memberID string) bool {
	if c.cfg.MaxGroupSize <= 0 {
		return true
	}
	m := g.mu.members[memberID]
	switch g.mu.state {
	case statePreparingRebalance:
		return (m != nil && m.joinWaiter != nil) || g.mu.awaitingJoin < c.cfg.MaxGroupSize
	case stateCompletingRebalance, stateStable:
		return m != nil || len(g.mu.members) < c.cfg.MaxGroupSize
	}
	return true
}

// joinNewMemberLocked handles a join without a member id.
// REQUIRES: g.mu held.
func (c *Coordinator) joinNewMemberLocked(g *group, req JoinRequest) (<-chan JoinResult, JoinResult) {
	if !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols) {
		return nil, joinError("", ErrInconsistentGroupProtocol)
	}
	id := newMemberID(req.ClientID, req.InstanceID)
	if req.InstanceID != nil {
		// Static members skip the KIP-394 handshake: their instance id
		// already names them.
		if oldID, ok := g.mu.static[*req.InstanceID]; ok {
			return c.replaceStaticMemberLocked(g, oldID, id, req), JoinResult{}
		}
		return c.addMemberAndRebalanceLocked(g, id, req), JoinResult{}
	}
	if req.RequireKnownMemberID {
		// The id is reserved for one session timeout: a client that never
		// comes back with it must not hold up the rebalance for longer.
		g.mu.pending[id] = c.afterFunc(req.SessionTimeout, func() { c.expirePendingMember(g, id) })
		c.logger.Debug("group: member id required", slog.String("group", g.id), slog.String("member", id))
		return nil, joinError(id, ErrMemberIDRequired)
	}
	return c.addMemberAndRebalanceLocked(g, id, req), JoinResult{}
}

// joinKnownMemberLocked handles a join that names a member id.
// REQUIRES: g.mu held.
func (c *Coordinator) joinKnownMemberLocked(g *group, req JoinRequest) (<-chan JoinResult, JoinResult) {
	if !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols) {
		return nil, joinError(req.MemberID, ErrInconsistentGroupProtocol)
	}
	if t, ok := g.mu.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			// Ids handed out with MEMBER_ID_REQUIRED are dynamic; a static
			// member presenting one is confused. Kafka fails the request
			// on an internal assertion; UNKNOWN_MEMBER_ID makes the client
			// rejoin with no id, which takes the static path.
			return nil, joinError(req.MemberID, ErrUnknownMemberID)
		}
		t.Stop()
		delete(g.mu.pending, req.MemberID)
		return c.addMemberAndRebalanceLocked(g, req.MemberID, req), JoinResult{}
	}
	if err := g.validateMemberLocked(req.MemberID, req.InstanceID); err != nil {
		return nil, joinError(req.MemberID, err)
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case statePreparingRebalance:
		return c.updateMemberLocked(g, m, req), JoinResult{}
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// It lost the JoinGroup answer: give it again.
			return nil, c.currentJoinResultLocked(g, m, g.mu.leader == m.id)
		}
		wait := c.updateMemberLocked(g, m, req)
		c.prepareRebalanceLocked(g, "member changed its protocols while the group awaited sync")
		return wait, JoinResult{}
	case stateStable:
		if g.mu.leader == m.id || !m.matches(req.Protocols) {
			// The leader rejoins to have the group reassigned (the
			// consumer does, e.g., when a subscribed topic grows); any
			// member with new protocols needs a new assignment. Under
			// KIP-429 cooperative rebalancing this is every rebalance's
			// second round; the coordinator only keeps the new metadata.
			wait := c.updateMemberLocked(g, m, req)
			c.prepareRebalanceLocked(g, "member rejoined a stable group")
			return wait, JoinResult{}
		}
		return nil, c.currentJoinResultLocked(g, m, false)
	}
	return nil, joinError(req.MemberID, ErrUnknownMemberID)
}

// currentJoinResultLocked is the current generation as m's JoinResult,
// with every member's metadata if withMembers.
// REQUIRES: g.mu held.
func (c *Coordinator) currentJoinResultLocked(g *group, m *member, withMembers bool) JoinResult {
	res := JoinResult{
		Generation:   g.mu.generation,
		ProtocolType: g.mu.protocolType,
		Protocol:     g.mu.protocol,
		LeaderID:     g.mu.leader,
		MemberID:     m.id,
	}
	if withMembers {
		res.Members = g.leaderMembersLocked()
	}
	return res
}

// addMemberAndRebalanceLocked adds a new member with a parked join and
// starts a rebalance if none is under way.
// REQUIRES: g.mu held.
func (c *Coordinator) addMemberAndRebalanceLocked(g *group, id string, req JoinRequest) <-chan JoinResult {
	m := &member{
		id:               id,
		instanceID:       cloneString(req.InstanceID),
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		protocolType:     req.ProtocolType,
		protocols:        cloneProtocols(req.Protocols),
		sessionTimeout:   req.SessionTimeout,
		rebalanceTimeout: req.RebalanceTimeout,
		isNew:            true,
	}
	if g.mu.state == statePreparingRebalance && g.mu.generation == 0 {
		g.mu.newMemberAdded = true
	}
	g.addMemberLocked(m)
	wait := g.setJoinWaiterLocked(m)
	c.scheduleSessionLocked(g, m, newMemberJoinTimeout)
	c.logger.Info("group: member joined", slog.String("group", g.id), slog.String("member", id),
		slog.String("reason", req.Reason))
	c.maybePrepareRebalanceLocked(g, "new member joined")
	return wait
}

// updateMemberLocked records a known member's new protocols and timeouts
// and parks its join.
// REQUIRES: g.mu held.
func (c *Coordinator) updateMemberLocked(g *group, m *member, req JoinRequest) <-chan JoinResult {
	m.protocols = cloneProtocols(req.Protocols)
	m.sessionTimeout = req.SessionTimeout
	m.rebalanceTimeout = req.RebalanceTimeout
	return g.setJoinWaiterLocked(m)
}

// replaceStaticMemberLocked hands a static member's place to the new
// member id of the same instance (a restarted consumer), fencing the old
// id at once (KIP-345). In a Stable group whose protocol would not change
// there is no rebalance: the group's metadata is written with the new id
// and only then is the join answered, with the current generation; if the
// write fails the old id is restored and the join fails.
// REQUIRES: g.mu held.
func (c *Coordinator) replaceStaticMemberLocked(g *group, oldID, newID string, req JoinRequest) <-chan JoinResult {
	oldLeader := g.mu.leader
	m := g.mu.members[oldID]
	oldProtocols, oldSession, oldRebalance := m.protocols, m.sessionTimeout, m.rebalanceTimeout
	// The old id's parked requests belong to a duplicate instance (or a
	// dead one): tell it to shut down.
	g.answerJoinLocked(m, joinError(oldID, ErrFencedInstanceID))
	g.answerSyncLocked(m, SyncResult{Err: ErrFencedInstanceID})
	g.renameMemberLocked(m, newID)
	wait := c.updateMemberLocked(g, m, req)
	c.scheduleSessionLocked(g, m, m.sessionTimeout)
	c.logger.Info("group: static member replaced", slog.String("group", g.id),
		slog.String("instance", *req.InstanceID), slog.String("old", oldID), slog.String("new", newID))

	switch g.mu.state {
	case stateStable:
		if g.selectProtocolLocked() != g.mu.protocol {
			c.prepareRebalanceLocked(g, "static member rejoined with protocols that change the group's")
			return wait
		}
		gen := g.mu.generation
		waiter := m.joinWaiter
		stillPending := func() bool {
			return g.mu.state == stateStable && g.mu.generation == gen &&
				g.mu.members[newID] == m && m.joinWaiter == waiter
		}
		c.storeGroupLocked(g, stillPending, nil, func(err error) {
			if !stillPending() {
				// A rebalance began meanwhile; the member's join is
				// parked and is answered when that completes.
				return
			}
			if err != nil {
				err = mapAppendError(err, appendGroup)
				c.logger.Warn("group: writing a replaced static member failed; restoring the old member id",
					slog.String("group", g.id), slog.Any("err", err))
				m.protocols, m.sessionTimeout, m.rebalanceTimeout = oldProtocols, oldSession, oldRebalance
				g.renameMemberLocked(m, oldID)
				c.scheduleSessionLocked(g, m, m.sessionTimeout)
				g.answerJoinLocked(m, joinError("", err))
				return
			}
			res := c.currentJoinResultLocked(g, m, false)
			if req.SupportsSkipAssignment {
				// KIP-814: the leader learns it leads (so it keeps
				// watching metadata) but must not run the assignor, whose
				// result a Stable group would ignore.
				if g.mu.leader == m.id {
					res.Members = g.leaderMembersLocked()
					res.SkipAssignment = true
				}
			} else {
				// Older clients would assign if told they lead; the old
				// leader id (never theirs now) keeps them from it.
				res.LeaderID = oldLeader
			}
			// The session timer may have fired while the join was
			// parked (it spares parked members); answered, the member's
			// session starts again, or a client that then died would
			// never be expired. It starts before the answer goes out, so
			// nothing the client does after the answer can precede it.
			c.scheduleSessionLocked(g, m, m.sessionTimeout)
			g.answerJoinLocked(m, res)
		})
	case stateCompletingRebalance:
		// The leader may be assigning to the old id right now; its
		// assignment would miss the new one. Start over.
		c.prepareRebalanceLocked(g, "static member rejoined while the group awaited sync")
	case statePreparingRebalance:
		// The member's join is parked with the others.
	}
	return wait
}

// renameMemberLocked gives m a new member id, keeping its place.
// REQUIRES: g.mu held.
func (g *group) renameMemberLocked(m *member, newID string) {
	oldID := m.id
	delete(g.mu.members, oldID)
	m.id = newID
	g.mu.members[newID] = m
	if m.instanceID != nil {
		g.mu.static[*m.instanceID] = newID
	}
	if g.mu.leader == oldID {
		g.mu.leader = newID
	}
	if _, ok := g.mu.pendingSync[oldID]; ok {
		delete(g.mu.pendingSync, oldID)
		g.mu.pendingSync[newID] = struct{}{}
	}
}

// maybePrepareRebalanceLocked starts a rebalance unless one is under way.
// REQUIRES: g.mu held.
func (c *Coordinator) maybePrepareRebalanceLocked(g *group, reason string) {
	switch g.mu.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		c.prepareRebalanceLocked(g, reason)
	}
}

// prepareRebalanceLocked moves the group to PreparingRebalance: members
// waiting for an assignment are told to rejoin, and the join's completion
// is scheduled (the initial delay for a group coming from Empty, the
// rebalance timeout otherwise).
// REQUIRES: g.mu held; g in Stable, CompletingRebalance or Empty.
func (c *Coordinator) prepareRebalanceLocked(g *group, reason string) {
	if g.mu.state == stateCompletingRebalance {
		c.resetAndPropagateLocked(g, ErrRebalanceInProgress)
	}
	c.stopSyncTimerLocked(g)
	clear(g.mu.pendingSync)
	fromEmpty := g.mu.state == stateEmpty
	g.transitionLocked(statePreparingRebalance, c.clock.Now())
	c.stopJoinTimerLocked(g)
	c.logger.Info("group: preparing to rebalance", slog.String("group", g.id),
		slog.Int("generation", int(g.mu.generation)), slog.String("reason", reason))

	if fromEmpty {
		delay := c.cfg.InitialRebalanceDelay
		if delay <= 0 {
			// No initial delay: Kafka's zero-length InitialDelayedJoin
			// expires at once, so complete now.
			c.completeJoinLocked(g)
			return
		}
		remaining := max(g.rebalanceTimeoutLocked()-delay, 0)
		c.armJoinTimerLocked(g, delay, true, remaining)
		return
	}
	c.armJoinTimerLocked(g, g.rebalanceTimeoutLocked(), false, 0)
	c.maybeCompleteJoinLocked(g)
}

// armJoinTimerLocked schedules the join's completion after d.
// REQUIRES: g.mu held.
func (c *Coordinator) armJoinTimerLocked(g *group, d time.Duration, initial bool, remaining time.Duration) {
	c.stopJoinTimerLocked(g)
	token := c.nextToken()
	g.mu.join = joinTimer{
		token:     token,
		initial:   initial,
		delay:     d,
		remaining: remaining,
		timer:     c.afterFunc(d, func() { c.onJoinTimer(g, token) }),
	}
}

// REQUIRES: g.mu held.
func (c *Coordinator) stopJoinTimerLocked(g *group) {
	stopTimer(&g.mu.join.timer)
	g.mu.join = joinTimer{}
}

// onJoinTimer is the rebalance (or initial delay) timing out.
func (c *Coordinator) onJoinTimer(g *group, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.state != statePreparingRebalance || g.mu.join.token != token {
		return // completed, or superseded by a newer timer
	}
	j := g.mu.join
	if j.initial && g.mu.newMemberAdded && j.remaining > 0 {
		// KIP-134: members are still arriving; wait one more delay, but
		// not past the rebalance timeout. (Kafka's arithmetic: the next
		// timer is min(delay, remaining) long and leaves remaining minus
		// this timer's length.)
		g.mu.newMemberAdded = false
		c.armJoinTimerLocked(g, min(c.cfg.InitialRebalanceDelay, j.remaining), true, max(j.remaining-j.delay, 0))
		return
	}
	c.completeJoinLocked(g)
}

// maybeCompleteJoinLocked completes the join if everyone has joined,
// except during the initial delay, which always runs its course.
// REQUIRES: g.mu held.
func (c *Coordinator) maybeCompleteJoinLocked(g *group) {
	if g.mu.state == statePreparingRebalance && !g.mu.join.initial && g.hasAllMembersJoinedLocked() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked ends the join phase (Kafka's onCompleteJoin):
// dynamic members that did not rejoin are dropped (static ones stay until
// their session times out), the next generation starts, and every parked
// join is answered, the leader's with every member's metadata.
// REQUIRES: g.mu held; g in PreparingRebalance.
func (c *Coordinator) completeJoinLocked(g *group) {
	c.stopJoinTimerLocked(g)
	for _, m := range g.membersLocked() {
		if m.joinWaiter == nil && m.instanceID == nil {
			c.logger.Info("group: member did not rejoin in time", slog.String("group", g.id), slog.String("member", m.id))
			c.dropMemberLocked(g, m)
		}
	}
	if !g.electJoinedLeaderLocked() && len(g.mu.members) > 0 {
		// Only static members remain and none rejoined: wait another
		// rebalance timeout, by when they rejoin or their sessions end.
		c.armJoinTimerLocked(g, g.rebalanceTimeoutLocked(), false, 0)
		return
	}
	now := c.clock.Now()
	g.initNextGenerationLocked(now)
	if g.mu.state == stateEmpty {
		c.logger.Info("group: now empty", slog.String("group", g.id), slog.Int("generation", int(g.mu.generation)))
		gen := g.mu.generation
		c.storeGroupLocked(g, func() bool {
			return g.mu.state == stateEmpty && g.mu.generation == gen
		}, nil, func(err error) {
			if err != nil {
				// Harmless: if this node fails before the next write the
				// previous generation comes back, and its members' sessions
				// expire again. Kafka only warns too.
				c.logger.Warn("group: writing empty group metadata failed", slog.String("group", g.id), slog.Any("err", err))
			}
		})
		return
	}
	c.logger.Info("group: join complete", slog.String("group", g.id),
		slog.Int("generation", int(g.mu.generation)), slog.Int("members", len(g.mu.members)),
		slog.String("protocol", g.mu.protocol))
	for _, m := range g.membersLocked() {
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		g.answerJoinLocked(m, c.currentJoinResultLocked(g, m, m.id == g.mu.leader))
		m.isNew = false
		g.mu.pendingSync[m.id] = struct{}{}
	}
	token := c.nextToken()
	gen := g.mu.generation
	g.mu.syncToken = token
	g.mu.syncTimer = c.afterFunc(g.rebalanceTimeoutLocked(), func() { c.onSyncTimer(g, token, gen) })
}

// onSyncTimer is the rebalance timeout passing after a join completed:
// members that never sent SyncGroup are dropped and the group rebalances
// without them.
func (c *Coordinator) onSyncTimer(g *group, token uint64, gen int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.syncToken != token || g.mu.generation != gen || len(g.mu.pendingSync) == 0 {
		return
	}
	if g.mu.state != stateCompletingRebalance && g.mu.state != stateStable {
		return
	}
	for id := range g.mu.pendingSync {
		if m := g.mu.members[id]; m != nil {
			c.logger.Info("group: member did not sync in time", slog.String("group", g.id), slog.String("member", id))
			c.dropMemberLocked(g, m)
		}
	}
	c.prepareRebalanceLocked(g, "members did not sync before the rebalance timeout")
}

// REQUIRES: g.mu held.
func (c *Coordinator) stopSyncTimerLocked(g *group) {
	stopTimer(&g.mu.syncTimer)
	g.mu.syncToken = 0
}

// removePendingSyncLocked notes that m sent SyncGroup.
// REQUIRES: g.mu held.
func (c *Coordinator) removePendingSyncLocked(g *group, m *member) {
	delete(g.mu.pendingSync, m.id)
	if len(g.mu.pendingSync) == 0 {
		c.stopSyncTimerLocked(g)
	}
}

// dropMemberLocked removes m without touching the group's state (the
// caller decides whether that starts or completes a rebalance). A request
// m has parked is answered UNKNOWN_MEMBER_ID, so a live client rejoins
// and no caller waits for an answer that cannot come. (Kafka answers a
// parked join so; a parked sync it leaves to the client's timeout.)
// REQUIRES: g.mu held.
func (c *Coordinator) dropMemberLocked(g *group, m *member) {
	g.answerJoinLocked(m, joinError("", ErrUnknownMemberID))
	g.answerSyncLocked(m, SyncResult{Err: ErrUnknownMemberID})
	stopTimer(&m.sessionTimer)
	g.removeMemberLocked(m)
}

// removeMemberAndUpdateLocked removes m for good (it left, or its session
// ended) and moves the group on: a Stable or CompletingRebalance group
// rebalances, a rebalance in progress may now be complete.
// REQUIRES: g.mu held.
func (c *Coordinator) removeMemberAndUpdateLocked(g *group, m *member, reason string) {
	c.dropMemberLocked(g, m)
	c.logger.Info("group: member removed", slog.String("group", g.id), slog.String("member", m.id), slog.String("reason", reason))
	switch g.mu.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalanceLocked(g, reason)
	case statePreparingRebalance:
		c.maybeCompleteJoinLocked(g)
	}
}

// resetAndPropagateLocked fails the parked syncs of a group leaving
// CompletingRebalance and clears the assignments it never stored.
// REQUIRES: g.mu held.
func (c *Coordinator) resetAndPropagateLocked(g *group, err error) {
	for _, m := range g.membersLocked() {
		m.assignment = nil
	}
	c.propagateAssignmentLocked(g, err)
}

// propagateAssignmentLocked answers every parked SyncGroup, each with its
// member's assignment (or err), and restarts the session of each member
// answered: its session could not end while it waited.
// REQUIRES: g.mu held.
func (c *Coordinator) propagateAssignmentLocked(g *group, err error) {
	for _, m := range g.membersLocked() {
		res := SyncResult{Err: err}
		if err == nil {
			res = SyncResult{ProtocolType: g.mu.protocolType, Protocol: g.mu.protocol, Assignment: bytes.Clone(m.assignment)}
		}
		if m.syncWaiter == nil {
			continue
		}
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		g.answerSyncLocked(m, res)
	}
}

// expirePendingMember drops an id handed out with MEMBER_ID_REQUIRED that
// was never used to join.
func (c *Coordinator) expirePendingMember(g *group, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.mu.pending[id]; !ok || g.mu.state == stateDead {
		return
	}
	delete(g.mu.pending, id)
	c.maybeCompleteJoinLocked(g)
	c.maybeDropUnusedLocked(g, false)
}
