package group

import (
	"log/slog"
	"time"
)

// Heartbeat: v0+.
//
// A member's session is a timer restarted by every heartbeat (and by its
// joins, syncs and commits); when it fires the member is removed and the
// group rebalances, or becomes Empty. A member parked in a JoinGroup or
// SyncGroup is alive by definition (KIP-62: the rebalance timeout, not the
// session, bounds a rebalance), so its session cannot end while it waits;
// it restarts when the answer goes out. A member that joined but has
// never been through a completed join has no id to heartbeat with and
// expires only after newMemberJoinTimeout.
//
// Answers: nil in Stable and CompletingRebalance (members may heartbeat
// between JoinGroup and SyncGroup), REBALANCE_IN_PROGRESS in
// PreparingRebalance (the member must rejoin), nil while the partition
// loads (Kafka answers blindly: the group is not known yet).
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	g, err := c.lookup(req.Group, false)
	switch {
	case err == ErrCoordinatorLoadInProgress:
		return nil
	case err != nil:
		return err
	case g == nil:
		return ErrUnknownMemberID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.state == stateDead {
		return ErrCoordinatorNotAvailable
	}
	if err := g.validateMemberLocked(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.mu.generation {
		return ErrIllegalGeneration
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case stateCompletingRebalance, stateStable:
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		return nil
	case statePreparingRebalance:
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
		return ErrRebalanceInProgress
	}
	return ErrUnknownMemberID
}

// scheduleSessionLocked (re)starts m's session: m is removed if d passes
// without another call.
// REQUIRES: g.mu held.
func (c *Coordinator) scheduleSessionLocked(g *group, m *member, d time.Duration) {
	stopTimer(&m.sessionTimer)
	token := c.nextToken()
	m.sessionToken = token
	id := m.id
	m.sessionTimer = c.afterFunc(d, func() { c.onSessionTimeout(g, id, token) })
}

// onSessionTimeout is a member's session ending.
func (c *Coordinator) onSessionTimeout(g *group, id string, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.mu.members[id]
	if g.mu.state == stateDead || m == nil || m.sessionToken != token {
		return // removed, renamed, or the session was restarted
	}
	if !m.isNew && (m.joinWaiter != nil || m.syncWaiter != nil) {
		return // parked, hence alive; the session restarts with the answer
	}
	c.logger.Info("group: member session expired", slog.String("group", g.id), slog.String("member", id))
	c.removeMemberAndUpdateLocked(g, m, "session timeout")
}
