package history

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// A group's history that went right: m1 owns both partitions, gives p1
// to m2 (revoked first), each commits what it processed, and the
// coordinator answers the last commits.
func TestGroupHistoryAcceptsGoodRun(t *testing.T) {
	c, logs := goodHistory()
	c.Assigned("g", "m1", 1, "t", []int32{0, 1})
	c.Processed("g", "m1", rec(0, 0, "a", "v0"))
	c.Processed("g", "m1", rec(1, 0, "b", "v1"))
	c.Committed("g", "m1", TopicPartition{"t", 0}, 1)
	c.Revoked("g", "m1", "t", []int32{1})
	c.Assigned("g", "m2", 2, "t", []int32{1})
	c.Processed("g", "m2", rec(1, 1, "b", "v3"))
	c.Committed("g", "m2", TopicPartition{"t", 1}, 2)
	c.Committed("g", "m1", TopicPartition{"t", 0}, 1) // the same again
	c.Fetched("g", TopicPartition{"t", 0}, 1)
	c.Fetched("g", TopicPartition{"t", 1}, 2)
	if _, err := c.Verify(logs); err != nil {
		t.Fatal(err)
	}
	if c.Commits() != 3 {
		t.Fatalf("%d commits recorded, want 3", c.Commits())
	}
}

// A member that dies keeps, as far as its client knows, the partitions
// it owned; the group moves on without it in a new generation. That is
// not two owners (its commits are refused, and one that got through
// would go backwards, which is checked), so long as it never joined the
// new generation.
func TestGroupHistoryADeadMemberIsNotAnOwner(t *testing.T) {
	c, logs := goodHistory()
	c.Assigned("g", "m1", 3, "t", []int32{0, 1})
	c.Joined("g", "m2", 3) // m2 joined generation 3 with nothing
	// m1 is cut off; generation 4 gives everything to m2.
	c.Assigned("g", "m2", 4, "t", []int32{0, 1})
	// m1 comes back and rejoins: generation 5 splits again.
	c.Revoked("g", "m2", "t", []int32{1})
	c.Assigned("g", "m1", 5, "t", []int32{1})
	if _, err := c.Verify(logs); err != nil {
		t.Fatal(err)
	}
}

func TestGroupHistoryFindsViolations(t *testing.T) {
	p0 := TopicPartition{"t", 0}
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
		want string
		kind string
	}{
		{"two owners in one generation", func(c *Checker) {
			c.Assigned("g", "m1", 1, "t", []int32{0})
			c.Assigned("g", "m2", 1, "t", []int32{0})
		}, "group g: t-0 assigned to m2 in generation 1 while m1, in generation 1, still owned it", KindTwoOwners},
		{"two owners, the old one in the new generation too", func(c *Checker) {
			c.Assigned("g", "m1", 1, "t", []int32{0})
			c.Joined("g", "m1", 2) // kept t-0 (sticky), not revoked
			c.Assigned("g", "m2", 2, "t", []int32{0})
		}, "group g: t-0 assigned to m2 in generation 2 while m1, in generation 2, still owned it", KindTwoOwners},
		{"commit past processing", func(c *Checker) {
			c.Processed("g", "m1", rec(0, 0, "a", "v0"))
			c.Committed("g", "m1", p0, 5)
		}, "group g: m1 committed t-0 offset 5, past what any member processed (1)", KindCommitPastProcessed},
		{"commit going back", func(c *Checker) {
			c.Processed("g", "m1", rec(0, 1, "a", "v2"))
			c.Committed("g", "m1", p0, 2)
			c.Committed("g", "m2", p0, 1)
		}, "group g: committed offset of t-0 went back from 2 to 1 (commit by m2)", KindCommitBackwards},
		{"commit lost", func(c *Checker) {
			c.Processed("g", "m1", rec(0, 1, "a", "v2"))
			c.Committed("g", "m1", p0, 2)
			c.Fetched("g", p0, 1)
		}, "group g: the coordinator answers t-0 committed at 1, below the commit it acknowledged at 2", KindCommitLost},
	} {
		c, logs := goodHistory()
		tc.run(c)
		_, err := c.Verify(logs)
		var vs *Violations
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &vs) || vs.Counts()[tc.kind] == 0 {
			t.Errorf("%s: %v, want it to say %q, of kind %s", tc.name, err, tc.want, tc.kind)
		}
	}
}

// The group skips nothing: a record below the committed offset that no
// member processed is a violation, one per run of such records.
func TestGroupHistoryFindsSkippedRecords(t *testing.T) {
	c, logs := goodHistory() // t-0 holds offsets 0, 1, 2
	p0 := TopicPartition{"t", 0}
	c.Processed("g", "m1", rec(0, 0, "a", "v0"))
	c.Processed("g", "m2", rec(0, 2, "a", "v4")) // another member, after a rebalance
	c.Committed("g", "m2", p0, 3)
	_, err := c.Verify(logs)
	var vs *Violations
	if !errors.As(err, &vs) || vs.Counts()[KindSkipped] != 1 || !strings.Contains(err.Error(), "group g: t-0 offsets 1 to 1 (1 records) are below its committed offset 3") {
		t.Fatalf("Verify: %v, want offset 1 skipped", err)
	}
	c.Processed("g", "m1", rec(0, 1, "a", "v2")) // processed late, but processed
	if _, err := c.Verify(logs); err != nil {
		t.Fatal(err)
	}
}

// offsetSet against a map, under random adds.
func TestOffsetSet(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s offsetSet
		model := map[int64]bool{}
		for range 2000 {
			off := int64(rng.IntN(300))
			if rng.IntN(3) == 0 { // mostly in order, as consumers go
				off = int64(len(model))
			}
			s.add(off)
			model[off] = true
		}
		for off := int64(-1); off < 2100; off++ {
			if s.contains(off) != model[off] {
				t.Fatalf("seed %d: contains(%d) = %v, want %v", seed, off, s.contains(off), model[off])
			}
		}
		for i, r := range s.ranges {
			if r[0] >= r[1] || (i > 0 && s.ranges[i-1][1] >= r[0]) {
				t.Fatalf("seed %d: ranges %v not sorted, disjoint and apart", seed, s.ranges)
			}
		}
	}
}
