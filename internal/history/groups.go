package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// A consumer group's history: which member owned which partition, and
// what it committed. The checks are made as the events arrive (they are
// about the order of events, which the logs read back cannot show):
//
//   - a partition is owned by one member of a group per generation, as
//     far as the clients see: assigned to one member in a generation
//     while another, which joined that generation or a later one, still
//     holds it (not yet revoked or lost) is a violation. A holder that
//     never joined the new generation is a member that died or was cut
//     off: the coordinator moved on without it, and what keeps it
//     harmless is that its commits are refused (a commit it got through
//     would go backwards, which is checked below);
//   - a group's committed offset for a partition never goes backwards:
//     a commit the coordinator acknowledged below an earlier one, or an
//     offset the coordinator answers (Fetched) below the last
//     acknowledged commit;
//   - a member commits only what it processed: past the record after
//     the last one it was given is a violation;
//   - the group skips nothing: every record in the log below a
//     partition's last acknowledged commit was processed by some member
//     (at least once; twice is allowed, after a member died before it
//     committed). Held against the log in VerifyAll.

type groupPartition struct {
	group string
	tp    TopicPartition
}

type groupMember struct{ group, member string }

// commit is an acknowledged commit's offset and when it was acknowledged.
type commit struct {
	offset int64
	at     time.Time
}

// Joined records that member of group is in generation (a client learns
// it at the end of every join, whatever it was assigned).
func (c *Checker) Joined(group, member string, generation int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joinedLocked(group, member, generation)
}

// REQUIRES: c.mu held.
func (c *Checker) joinedLocked(group, member string, generation int32) {
	c.ensureGroupsLocked()
	m := groupMember{group, member}
	if generation > c.mu.generation[m] {
		c.mu.generation[m] = generation
	}
}

// Assigned records that member of group now owns partitions of topic,
// given to it in generation.
func (c *Checker) Assigned(group, member string, generation int32, topic string, partitions []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joinedLocked(group, member, generation)
	for _, p := range partitions {
		k := groupPartition{group, TopicPartition{topic, p}}
		if other, ok := c.mu.owner[k]; ok && other != member {
			if g := c.mu.generation[groupMember{group, other}]; g >= generation {
				c.problemLocked(event{}, KindTwoOwners, "group %s: %s assigned to %s in generation %d while %s, in generation %d, still owned it",
					group, k.tp, member, generation, other, g)
			}
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
	set := c.mu.processedOffsets[k]
	if set == nil {
		set = &offsetSet{}
		c.mu.processedOffsets[k] = set
	}
	set.add(r.Offset)
}

// Committed records that the coordinator acknowledged member's commit of
// offset for tp.
func (c *Checker) Committed(group, member string, tp TopicPartition, offset int64) {
	at := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	k := groupPartition{group, tp}
	if offset > c.mu.processed[k] {
		c.problemLocked(event{}, KindCommitPastProcessed, "group %s: %s committed %s offset %d, past what any member processed (%d)", group, member, tp, offset, c.mu.processed[k])
	}
	if last, ok := c.mu.committed[k]; ok && offset < last.offset {
		// Located at the earlier commit: a log that lost the records
		// that commit covered (MayLose) sends its consumers back, which
		// is no fault of the group's.
		v := violationAbout(event{}, KindCommitBackwards, "group %s: committed offset of %s went back from %d to %d (commit by %s)", group, tp, last.offset, offset, member)
		v.TopicPartition, v.At = tp, last.at
		c.mu.problems = append(c.mu.problems, v)
	}
	// The coordinator acknowledged it, so it is the committed offset now,
	// backwards or not: later commits and the final answer are held
	// against it.
	c.mu.committed[k] = commit{offset, at}
	c.mu.commits++
}

// Fetched records the committed offset the coordinator answers for tp
// at the end of a run (-1: none): below the last acknowledged commit, a
// commit was lost.
func (c *Checker) Fetched(group string, tp TopicPartition, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureGroupsLocked()
	if last, ok := c.mu.committed[groupPartition{group, tp}]; ok && offset < last.offset {
		c.problemLocked(event{}, KindCommitLost, "group %s: the coordinator answers %s committed at %d, below the commit it acknowledged at %d", group, tp, offset, last.offset)
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
		c.mu.generation = map[groupMember]int32{}
		c.mu.processed = map[groupPartition]int64{}
		c.mu.committed = map[groupPartition]commit{}
		c.mu.processedOffsets = map[groupPartition]*offsetSet{}
	}
}

// skippedLocked reports, for each partition a group committed, every run
// of records in logs below its last acknowledged commit that no member
// processed. REQUIRES: c.mu held.
func (c *Checker) skippedLocked(logs map[TopicPartition][]Record, report func(Violation)) {
	keys := slices.SortedFunc(maps.Keys(c.mu.committed), func(a, b groupPartition) int {
		return cmp.Or(cmp.Compare(a.group, b.group), compareTopicPartitions(a.tp, b.tp))
	})
	for _, k := range keys {
		last, set := c.mu.committed[k], c.mu.processedOffsets[k]
		recs, ok := logs[k.tp]
		if !ok {
			continue // a partition the caller did not read back
		}
		var first, prev int64 = -1, -1
		count := 0
		flush := func() {
			if count == 0 {
				return
			}
			v := Violation{Kind: KindSkipped, TopicPartition: k.tp, Offset: first, At: last.at,
				Text: fmt.Sprintf("group %s: %s offsets %d to %d (%d records) are below its committed offset %d, and no member processed them", k.group, k.tp, first, prev, count, last.offset)}
			report(v)
			count = 0
		}
		for _, r := range recs {
			if r.Offset >= last.offset {
				break
			}
			if set != nil && set.contains(r.Offset) {
				flush()
				continue
			}
			if count == 0 {
				first = r.Offset
			}
			prev = r.Offset
			count++
		}
		flush()
	}
}

// offsetSet is a set of offsets as sorted, disjoint, non-adjacent
// half-open ranges: a consumer processes offsets mostly in order, so a
// partition's whole history is a few ranges however many records it has.
type offsetSet struct {
	ranges [][2]int64 // [from, to)
}

func (s *offsetSet) add(off int64) {
	n := len(s.ranges)
	if n > 0 && s.ranges[n-1][1] == off { // the usual case: the next one
		s.ranges[n-1][1]++
		return
	}
	// i is the first range that ends at or after off.
	i := sort.Search(n, func(i int) bool { return s.ranges[i][1] >= off })
	if i < n && s.ranges[i][0] <= off && off < s.ranges[i][1] {
		return // already in
	}
	switch {
	case i < n && s.ranges[i][1] == off: // extends range i up
		s.ranges[i][1]++
		if i+1 < n && s.ranges[i+1][0] == off+1 {
			s.ranges[i][1] = s.ranges[i+1][1]
			s.ranges = slices.Delete(s.ranges, i+1, i+2)
		}
	case i < n && s.ranges[i][0] == off+1: // extends range i down
		s.ranges[i][0]--
	default:
		s.ranges = slices.Insert(s.ranges, i, [2]int64{off, off + 1})
	}
}

func (s *offsetSet) contains(off int64) bool {
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i][1] > off })
	return i < len(s.ranges) && s.ranges[i][0] <= off
}
