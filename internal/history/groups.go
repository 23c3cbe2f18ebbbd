package history

// A consumer group's history: which member owned which partition, and
// what it committed. The checks are made as the events arrive (they are
// about the order of events, which the logs read back cannot show):
//
//   - a partition is owned by one member of a group at a time, as far as
//     the clients see: assigned to one while another still holds it (not
//     yet revoked or lost) is a violation;
//   - a group's committed offset for a partition never goes backwards:
//     a commit the coordinator acknowledged below an earlier one, or an
//     offset the coordinator answers (Fetched) below the last
//     acknowledged commit;
//   - a member commits only what it processed: past the record after
//     the last one it was given is a violation.

type groupPartition struct {
	group string
	tp    TopicPartition
}

// Assigned records that member of group now owns partitions of topic.
func (c *Checker) Assigned(group, member, topic string, partitions []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	for _, p := range partitions {
		k := groupPartition{group, TopicPartition{topic, p}}
		if other, ok := c.mu.owner[k]; ok && other != member {
			c.problemLocked(KindTwoOwners, "group %s: %s assigned to %s while %s still owned it", group, k.tp, member, other)
		}
		c.mu.owner[k] = member
	}
}

// Revoked records that member gave partitions up (revoked or lost).
func (c *Checker) Revoked(group, member, topic string, partitions []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	for _, p := range partitions {
		k := groupPartition{group, TopicPartition{topic, p}}
		if c.mu.owner[k] == member {
			delete(c.mu.owner, k)
		}
	}
}

// Processed records that member of group finished with r (the offset to
// commit for it is r.Offset+1).
func (c *Checker) Processed(group, member string, r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	k := groupPartition{group, r.TopicPartition()}
	if next := r.Offset + 1; next > c.mu.processed[k] {
		c.mu.processed[k] = next
	}
}

// Committed records that the coordinator acknowledged member's commit of
// offset for tp.
func (c *Checker) Committed(group, member string, tp TopicPartition, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	k := groupPartition{group, tp}
	if offset > c.mu.processed[k] {
		c.problemLocked(KindCommitPastProcessed, "group %s: %s committed %s offset %d, past what any member processed (%d)", group, member, tp, offset, c.mu.processed[k])
	}
	if last, ok := c.mu.committed[k]; ok && offset < last {
		c.problemLocked(KindCommitBackwards, "group %s: committed offset of %s went back from %d to %d (commit by %s)", group, tp, last, offset, member)
		return
	}
	c.mu.committed[k] = offset
	c.mu.commits++
}

// Fetched records the committed offset the coordinator answers for tp
// at the end of a run (-1: none): below the last acknowledged commit, a
// commit was lost.
func (c *Checker) Fetched(group string, tp TopicPartition, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	if last, ok := c.mu.committed[groupPartition{group, tp}]; ok && offset < last {
		c.problemLocked(KindCommitLost, "group %s: the coordinator answers %s committed at %d, below the commit it acknowledged at %d", group, tp, offset, last)
	}
}

// Commits counts the acknowledged commits recorded.
func (c *Checker) Commits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.commits
}

// REQUIRES: c.mu held.
func (c *Checker) ensureGroupsLocked() {
	if c.mu.owner == nil {
		c.mu.owner = map[groupPartition]string{}
		c.mu.processed = map[groupPartition]int64{}
		c.mu.committed = map[groupPartition]int64{}
	}
}
