package group

import (
	"fmt"
	"log/slog"
)

// Load makes this node the coordinator of partition p's groups: read
// calls fn with every record of the partition from its start to its end,
// in order (transaction markers included, each Record saying where it
// stands in the log), and replaying them rebuilds committed offsets,
// offsets pending in open transactions, and group metadata (the last
// record per key wins; tombstones delete; see replay). Until Load
// returns, requests for p's groups answer COORDINATOR_LOAD_IN_PROGRESS;
// if it fails, NOT_COORDINATOR. A Stable group comes back with its members
// and assignments, each member's session starting now: members that kept
// running heartbeat the new coordinator and carry on without a rebalance.
// A transaction marker CompleteTxn reports while p is loading is applied
// after the replay, before any request can reach p's groups. Loading a
// partition already loaded drops its groups first (parked requests
// answer NOT_COORDINATOR) and waits for their writes under way to end:
// the log is the truth.
//
// Threads: read runs on the caller's goroutine with no lock held; fn must
// be called from that goroutine. fn does not keep the record's slices.
func (c *Coordinator) Load(p int32, read func(fn func(Record) error) error) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	var dropped map[string]*group
	if old := c.mu.partitions[p]; old != nil {
		dropped = old.groups
	}
	token := c.nextToken()
	c.mu.partitions[p] = &partitionState{token: token, loading: true}
	c.mu.Unlock()
	c.killGroups(dropped, ErrNotCoordinator)
	// A reload while this node stays the leader (a new leader epoch):
	// a write still in flight on a dropped group may land after the
	// replay below has read past its place, and the reloaded group would
	// never learn of it. Every write holds its group's write turn and
	// starts none once the group is Dead, so taking each turn once waits
	// out the writes under way. Writes are bounded by CommitTimeout.
	for _, g := range dropped {
		if err := g.acquireWrite(c.ctx); err != nil {
			return ErrClosed
		}
		g.releaseWrite()
	}

	r := newReplay()
	err := read(r.apply)
	var groups map[string]*group
	var producerGroups map[int64]map[*group]struct{}
	if err == nil {
		groups = r.build(p, c.clock.Now())
		// Start the members' sessions before anyone can reach the groups,
		// so a member that is gone is noticed even if nothing else
		// touches its group.
		for _, g := range groups {
			g.mu.Lock()
			c.onGroupLoadedLocked(g)
			g.mu.Unlock()
		}
		producerGroups = producerGroupsOf(groups)
	}

	// Publish the groups once no transaction marker reported while
	// loading (CompleteTxn) is left to apply: applying one takes group
	// locks, which c.mu must not be held across, so each batch is taken
	// under c.mu, applied without it, and the check repeated.
	var loaded int
	for {
		c.mu.Lock()
		ps := c.mu.partitions[p]
		if c.mu.closed || ps == nil || ps.token != token {
			c.mu.Unlock()
			c.killGroups(groups, ErrNotCoordinator)
			return ErrLoadSuperseded
		}
		if err != nil {
			delete(c.mu.partitions, p)
			c.mu.Unlock()
			return fmt.Errorf("group: loading __consumer_offsets partition %d: %w", p, err)
		}
		if queued := ps.completions; len(queued) > 0 {
			ps.completions = nil
			c.mu.Unlock()
			c.applyCompletions(groups, producerGroups, queued)
			continue
		}
		ps.loading = false
		ps.groups = groups
		ps.producerGroups = producerGroups
		loaded = len(groups) // read under the lock: JoinGroup adds to the map once it is published
		c.mu.Unlock()
		break
	}
	c.logger.Debug("group: partition loaded", slog.Int("partition", int(p)), slog.Int("groups", loaded))
	return nil
}

// onGroupLoadedLocked starts a loaded group: its members' sessions, and a
// rebalance if it has more members than group.max.size now allows (giving
// them a chance to commit before the extra ones are turned away).
// REQUIRES: g.mu held.
func (c *Coordinator) onGroupLoadedLocked(g *group) {
	for _, m := range g.membersLocked() {
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
	}
	if c.cfg.MaxGroupSize > 0 && len(g.mu.members) > c.cfg.MaxGroupSize {
		c.prepareRebalanceLocked(g, "loaded group is over group.max.size")
	}
}

// Unload stops this node coordinating partition p's groups (it no longer
// leads p): they are dropped, parked requests answer NOT_COORDINATOR, and
// later requests for them too. A Load in progress for p fails with
// ErrLoadSuperseded.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	ps := c.mu.partitions[p]
	delete(c.mu.partitions, p)
	c.mu.Unlock()
	if ps != nil {
		c.killGroups(ps.groups, ErrNotCoordinator)
		c.logger.Info("group: partition unloaded", slog.Int("partition", int(p)), slog.Int("groups", len(ps.groups)))
	}
}

func (c *Coordinator) killGroups(groups map[string]*group, err error) {
	for _, g := range groups {
		g.mu.Lock()
		c.killGroupLocked(g, err)
		g.mu.Unlock()
	}
}
