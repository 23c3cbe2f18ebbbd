package group

import "context"

// LeaveGroup: v0+ (v3+ batches members, KIP-345).
//
// Each member named by id leaves (a parked join of it is answered
// UNKNOWN_MEMBER_ID) and the group rebalances, or completes the rebalance
// under way without it. A member named only by instance id is removed
// administratively, whichever member id holds the instance now. An id
// handed out with MEMBER_ID_REQUIRED and not used yet is simply dropped.
// memberErrs[i] answers members[i]: UNKNOWN_MEMBER_ID for a member not in
// the group, FENCED_INSTANCE_ID for a stale static member id. err is
// group-wide (memberErrs is nil with it).
func (c *Coordinator) LeaveGroup(_ context.Context, group string, members []LeaveMember) (err error, memberErrs []error) {
	if group == "" {
		return ErrInvalidGroupID, nil
	}
	g, err := c.lookup(group, false)
	if err != nil {
		return err, nil
	}
	memberErrs = make([]error, len(members))
	if g == nil {
		for i := range memberErrs {
			memberErrs[i] = ErrUnknownMemberID
		}
		return nil, memberErrs
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.state == stateDead {
		return ErrCoordinatorNotAvailable, nil
	}
	for i, lm := range members {
		memberErrs[i] = c.leaveLocked(g, lm)
	}
	c.maybeDropUnusedLocked(g, false) // only outstanding MEMBER_ID_REQUIRED ids held it
	return nil, memberErrs
}

// leaveLocked removes one leaving member.
// REQUIRES: g.mu held.
func (c *Coordinator) leaveLocked(g *group, lm LeaveMember) error {
	reason := "left the group"
	if lm.Reason != "" {
		reason += ": " + lm.Reason
	}
	if lm.MemberID == "" {
		if lm.InstanceID == nil {
			return ErrUnknownMemberID
		}
		id, ok := g.mu.static[*lm.InstanceID]
		if !ok {
			return ErrUnknownMemberID
		}
		c.removeMemberAndUpdateLocked(g, g.mu.members[id], reason)
		return nil
	}
	if t, ok := g.mu.pending[lm.MemberID]; ok {
		t.Stop()
		delete(g.mu.pending, lm.MemberID)
		c.maybeCompleteJoinLocked(g)
		return nil
	}
	if err := g.validateMemberLocked(lm.MemberID, lm.InstanceID); err != nil {
		return err
	}
	c.removeMemberAndUpdateLocked(g, g.mu.members[lm.MemberID], reason)
	return nil
}
