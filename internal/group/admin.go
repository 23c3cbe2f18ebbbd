package group

import (
	"bytes"
	"context"
	"log/slog"
	"sort"
	"strings"
)

// DescribeGroup: DescribeGroups v0+ for one group. Members are listed in
// join order; protocol, member metadata and assignments only while the
// group is Stable, as in Kafka. A group this coordinator does not have is
// described as Dead with no members and a nil error (Kafka's answer
// through DescribeGroups v5; v6 answers GROUP_ID_NOT_FOUND for it, which
// the server derives from the Dead state: a group held here is never
// Dead).
func (c *Coordinator) DescribeGroup(group string) (GroupDescription, error) {
	g, err := c.lookup(group, false)
	if err != nil {
		return GroupDescription{Group: group}, err
	}
	if g == nil {
		return GroupDescription{Group: group, State: stateDead.String()}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := GroupDescription{Group: group, State: g.mu.state.String(), ProtocolType: g.mu.protocolType}
	stable := g.mu.state == stateStable
	if stable {
		d.Protocol = g.mu.protocol
	}
	for _, m := range g.membersLocked() {
		md := MemberDescription{
			MemberID:   m.id,
			InstanceID: cloneString(m.instanceID),
			ClientID:   m.clientID,
			ClientHost: m.clientHost,
		}
		if stable {
			md.Metadata = bytes.Clone(m.metadataFor(g.mu.protocol))
			md.Assignment = bytes.Clone(m.assignment)
		}
		d.Members = append(d.Members, md)
	}
	return d, nil
}

// ListGroups: ListGroups v0+. It lists the groups of every loaded
// partition, sorted by id, keeping those whose state is in states
// (compared without case, as Kafka does) unless states is nil or empty.
// While a partition is still loading its groups are missing, and err is
// ErrCoordinatorLoadInProgress beside what is listed, as Kafka answers,
// so an admin client retries.
func (c *Coordinator) ListGroups(states []string) (listed []GroupListing, err error) {
	var out []GroupListing
	groups, loading := c.loadedGroups()
	if loading {
		err = ErrCoordinatorLoadInProgress
	}
	for _, g := range groups {
		g.mu.Lock()
		l := GroupListing{Group: g.id, ProtocolType: g.mu.protocolType, State: g.mu.state.String()}
		dead := g.mu.state == stateDead
		g.mu.Unlock()
		if dead || !stateIn(l.State, states) {
			continue
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, err
}

func stateIn(state string, states []string) bool {
	if len(states) == 0 {
		return true
	}
	for _, s := range states {
		if strings.EqualFold(s, state) {
			return true
		}
	}
	return false
}

// DeleteGroups: DeleteGroups v0+. errs[i] answers groups[i]: an Empty
// group is deleted (tombstones for its offsets and metadata are written
// first; if that fails the group stays and the error is answered), a
// group with members answers NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND. Offsets pending in a transaction do not keep an
// Empty group: their partitions are tombstoned too, which drops them in
// the log as in memory, so the transaction's commit later brings nothing
// back (Kafka's OffsetMetadataManager.deleteAllOffsets).
func (c *Coordinator) DeleteGroups(ctx context.Context, groups []string) []error {
	errs := make([]error, len(groups))
	for i, id := range groups {
		errs[i] = c.deleteGroup(ctx, id)
	}
	return errs
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) error {
	g, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrGroupIDNotFound
	}
	if err := g.acquireWrite(ctx); err != nil {
		return waitError(ctx)
	}
	defer g.releaseWrite()

	g.mu.Lock()
	switch g.mu.state {
	case stateEmpty:
	case stateDead:
		g.mu.Unlock()
		return ErrGroupIDNotFound
	default:
		g.mu.Unlock()
		return ErrNonEmptyGroup
	}
	held := g.offsetPartitionsLocked()
	tps := make([]TopicPartition, 0, len(held))
	for tp := range held {
		tps = append(tps, tp)
	}
	sortPartitions(tps)
	recs := make([]Record, 0, len(tps)+1)
	for _, tp := range tps {
		recs = append(recs, offsetTombstone(g.id, tp))
	}
	if g.mu.generation > 0 {
		recs = append(recs, groupTombstone(g.id))
	}
	g.mu.deleting = true
	g.mu.Unlock()

	if len(recs) > 0 {
		actx, cancel := c.appendContext(ctx)
		err = c.log.Append(actx, g.partition, recs)
		cancel()
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.deleting = false
	if err != nil {
		return mapAppendError(err, appendDelete)
	}
	if g.mu.state != stateDead {
		c.killGroupLocked(g, ErrCoordinatorNotAvailable)
		c.removeGroupLocked(g)
	}
	c.logger.Info("group: deleted", slog.String("group", g.id), slog.Int("offsets", len(tps)))
	return nil
}

// CommittedOffsets calls visit with the committed offsets of each group
// of every loaded partition, one group at a time, until visit returns
// false. The map is visit's own. It is for metrics (lag): each group's
// lock is held only while its offsets are copied, so a scrape never
// stalls a group for longer than that.
func (c *Coordinator) CommittedOffsets(visit func(group string, offsets map[TopicPartition]int64) bool) {
	groups, _ := c.loadedGroups()
	for _, g := range groups {
		g.mu.Lock()
		if g.mu.state == stateDead || len(g.mu.offsets) == 0 {
			g.mu.Unlock()
			continue
		}
		offsets := make(map[TopicPartition]int64, len(g.mu.offsets))
		for tp, o := range g.mu.offsets {
			offsets[tp] = o.offset
		}
		g.mu.Unlock()
		if !visit(g.id, offsets) {
			return
		}
	}
}
