package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checks of TestGroupCooperativeSticky, on the members' logs alone.
//
// A stretch is one member's ownership of one partition: from the
// assignment callback that gave it the partition to the revoke (or loss)
// that took it away, or to the member's death. The rules, each a sentence
// of issue 5 or of the consumer-group contract behind it:
//
//   - A member consumes a partition only within a stretch, and stretches
//     of one partition never overlap in time: one owner at a time.
//   - Within a stretch the member reads offsets in order with no gap and
//     no repeat, and so per-key order holds.
//   - A stretch starts at the group's committed offset: the last commit
//     the node acknowledged before the stretch began, or one still in
//     flight from a member that was killed (the node may have applied it
//     without answering); offset 0 when nothing was committed.
//   - Every acknowledged record is consumed at least once, with the
//     value it was produced with.
//   - A record consumed again was consumed the first time in an earlier
//     stretch whose member had not committed it.
//   - Cooperative rebalancing: a revoked partition is next owned by
//     another member (a rebalance never takes a partition away from a
//     member that keeps it), and no live member loses partitions.

// coopWindow is a rebalance as the test caused it: from the event that
// starts it to the moment every partition was owned again.
type coopWindow struct {
	name       string
	start, end time.Time
}

// coopStretch is one member's ownership of one partition.
type coopStretch struct {
	member     string
	partition  int32
	start, end time.Time
	endedBy    string // evRevoked, evLost, "killed", or "end" (the log ended)
	records    []coopEvent
	lastAcked  int64 // the last offset the node acknowledged a commit of; -1 none
}

// coopCommit is one commit of one partition.
type coopCommit struct {
	member string
	at     time.Time
	offset int64
	acked  bool
}

// coopMemberLog is what the checker needs of one member.
type coopMemberLog struct {
	name   string
	events []coopEvent
	// killedAt is when the member was SIGKILLed; zero for a member that
	// ran until the test closed it.
	killedAt time.Time
}

// coopGap is the longest stretch without consumption of a partition the
// rebalance did not move.
type coopGap struct {
	window    string
	duration  time.Duration // of the window
	unmoved   int           // partitions owned by the same member across it
	consumed  int           // records of those partitions consumed during it
	maxGap    time.Duration
	member    string
	partition int32
}

func (g coopGap) String() string {
	if g.unmoved == 0 {
		return fmt.Sprintf("%s (%v): no partition kept its owner", g.window, g.duration.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s (%v): %d unmoved partitions, %d of their records consumed during it, longest gap %v (%s, partition %d)",
		g.window, g.duration.Round(time.Millisecond), g.unmoved, g.consumed, g.maxGap.Round(time.Millisecond), g.member, g.partition)
}

// coopSummary is what the checker measured.
type coopSummary struct {
	consumed   int // consumption events
	distinct   int // distinct records consumed
	duplicates int // consumptions beyond the first
	stretches  int
	gaps       []coopGap
	// steadyMaxGap is the longest gap between two consumptions of a
	// partition by one member outside every window and before the
	// producer stopped: what a gap looks like with no rebalance.
	steadyMaxGap time.Duration
}

// violations collects rule breaks, keeping the first few in full.
type violations struct {
	n     int
	first []string
}

func (v *violations) addf(format string, args ...any) {
	v.n++
	if len(v.first) < 20 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

func (v *violations) err() error {
	if v.n == 0 {
		return nil
	}
	return fmt.Errorf("%d violations, the first %d:\n  %s", v.n, len(v.first), strings.Join(v.first, "\n  "))
}

// keySeq parses a value "key/seq" into its key and per-key sequence.
func keySeq(value string) (string, int, bool) {
	k, s, ok := strings.Cut(value, "/")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(s)
	return k, n, err == nil
}

// checkCoop checks the members' logs against the records the producer
// was told it wrote (acked: partition -> offset -> value, offsets from 0
// without gaps) and measures the gaps across windows. producedUntil is
// when the last record was acknowledged.
func checkCoop(members []coopMemberLog, acked map[int32][]string, windows []coopWindow, producedUntil time.Time) (coopSummary, error) {
	var v violations
	var sum coopSummary
	var stretches []*coopStretch
	commits := make(map[int32][]coopCommit)

	for _, m := range members {
		open := make(map[int32]*coopStretch)
		closeStretch := func(p int32, at time.Time, by string) *coopStretch {
			s := open[p]
			delete(open, p)
			s.end, s.endedBy = at, by
			return s
		}
		for _, ev := range m.events {
			switch ev.Kind {
			case evAssigned:
				for _, p := range ev.Partitions {
					if open[p] != nil {
						v.addf("%s: assigned partition %d at %s while it already owned it", m.name, p, ev.At.Format(timeFmt))
						continue
					}
					s := &coopStretch{member: m.name, partition: p, start: ev.At, lastAcked: -1}
					open[p] = s
					stretches = append(stretches, s)
				}
			case evRevoked, evLost:
				for _, p := range ev.Partitions {
					if open[p] == nil {
						v.addf("%s: %s partition %d at %s that it did not own", m.name, ev.Kind, p, ev.At.Format(timeFmt))
						continue
					}
					closeStretch(p, ev.At, ev.Kind)
				}
			case evConsumed:
				s := open[ev.Partition]
				if s == nil {
					v.addf("%s: consumed partition %d offset %d at %s without owning the partition", m.name, ev.Partition, ev.Offset, ev.At.Format(timeFmt))
					continue
				}
				s.records = append(s.records, ev)
			case evCommitSent, evCommitAcked:
				for p, o := range ev.Offsets {
					commits[p] = append(commits[p], coopCommit{member: m.name, at: ev.At, offset: o, acked: ev.Kind == evCommitAcked})
					s := open[p]
					if s == nil {
						v.addf("%s: committed partition %d offset %d at %s without owning the partition", m.name, p, o, ev.At.Format(timeFmt))
						continue
					}
					if ev.Kind == evCommitAcked {
						s.lastAcked = o
					}
				}
			}
		}
		for p := range open {
			if m.killedAt.IsZero() {
				var last time.Time
				if len(m.events) > 0 {
					last = m.events[len(m.events)-1].At
				}
				closeStretch(p, last, "end")
			} else {
				closeStretch(p, m.killedAt, "killed")
			}
		}
	}
	sum.stretches = len(stretches)

	// Per partition: stretches in time order, no overlap, each starting
	// at the committed offset, consecutive offsets, per-key order, the
	// acknowledged values, and what a revocation led to.
	byPartition := make(map[int32][]*coopStretch)
	for _, s := range stretches {
		byPartition[s.partition] = append(byPartition[s.partition], s)
	}
	killedAt := make(map[string]time.Time)
	for _, m := range members {
		if !m.killedAt.IsZero() {
			killedAt[m.name] = m.killedAt
		}
	}
	type consumption struct {
		s  *coopStretch
		at time.Time
	}
	consumed := make(map[int32]map[int64][]consumption)
	for p, ss := range byPartition {
		slices.SortFunc(ss, func(a, b *coopStretch) int { return a.start.Compare(b.start) })
		slices.SortFunc(commits[p], func(a, b coopCommit) int { return a.at.Compare(b.at) })
		consumed[p] = make(map[int64][]consumption)
		for i, s := range ss {
			if i > 0 {
				prev := ss[i-1]
				if s.start.Before(prev.end) {
					v.addf("partition %d: %s owned it from %s while %s still did (until %s)", p, s.member, s.start.Format(timeFmt), prev.member, prev.end.Format(timeFmt))
				}
				// A member's close revokes everything too, but a
				// closed member owns nothing afterwards.
				if prev.endedBy == evRevoked && prev.member == s.member {
					v.addf("partition %d: revoked from %s at %s and given back to it at %s: a cooperative rebalance revoked a partition it did not move",
						p, s.member, prev.end.Format(timeFmt), s.start.Format(timeFmt))
				}
			}
			if s.endedBy == evLost {
				v.addf("partition %d: %s lost it at %s (the node fenced a live member)", p, s.member, s.end.Format(timeFmt))
			}
			if len(s.records) == 0 {
				continue
			}
			// The committed offset when the stretch began.
			var lastAcked int64
			maybe := make(map[int64]bool)
			for _, c := range commits[p] {
				if !c.at.Before(s.start) {
					break
				}
				if c.acked {
					lastAcked = c.offset
					clear(maybe)
				} else if _, killed := killedAt[c.member]; killed {
					maybe[c.offset] = true
				}
			}
			first := s.records[0].Offset
			if first != lastAcked && !(maybe[first] && first > lastAcked) {
				v.addf("partition %d: %s started at offset %d at %s; the group's committed offset was %d (commits in flight from killed members: %v)",
					p, s.member, first, s.start.Format(timeFmt), lastAcked, sortedKeysInt64(maybe))
			}
			lastSeq := make(map[string]int)
			for j, r := range s.records {
				if j > 0 && r.Offset != s.records[j-1].Offset+1 {
					v.addf("partition %d: %s consumed offset %d after %d", p, s.member, r.Offset, s.records[j-1].Offset)
				}
				if r.Offset < 0 || r.Offset >= int64(len(acked[p])) {
					v.addf("partition %d: %s consumed offset %d (%q), beyond the %d records produced there", p, s.member, r.Offset, r.Value, len(acked[p]))
				} else if want := acked[p][r.Offset]; r.Value != want {
					v.addf("partition %d offset %d: %s consumed %q, the producer wrote %q", p, r.Offset, s.member, r.Value, want)
				}
				k, seq, ok := keySeq(r.Value)
				if !ok || k != r.Key {
					v.addf("partition %d offset %d: %s consumed key %q value %q: not a value this test writes", p, r.Offset, s.member, r.Key, r.Value)
					continue
				}
				if last, ok := lastSeq[k]; ok && seq <= last {
					v.addf("partition %d offset %d: %s consumed %s after %s/%d: per-key order broken", p, r.Offset, s.member, r.Value, k, last)
				}
				lastSeq[k] = seq
				consumed[p][r.Offset] = append(consumed[p][r.Offset], consumption{s: s, at: r.At})
				sum.consumed++
			}
		}
	}

	// Coverage and duplicates.
	for p, values := range acked {
		missing := 0
		firstMissing := int64(-1)
		for o := range values {
			cs := consumed[p][int64(o)]
			if len(cs) == 0 {
				if missing == 0 {
					firstMissing = int64(o)
				}
				missing++
				continue
			}
			sum.distinct++
			slices.SortFunc(cs, func(a, b consumption) int { return a.at.Compare(b.at) })
			for i := 1; i < len(cs); i++ {
				sum.duplicates++
				before, again := cs[i-1].s, cs[i].s
				switch {
				case before == again:
					v.addf("partition %d offset %d: %s consumed it twice in one stretch", p, o, again.member)
				case before.lastAcked > int64(o):
					v.addf("partition %d offset %d: consumed again by %s at %s although %s had committed through %d before losing the partition",
						p, o, again.member, cs[i].at.Format(timeFmt), before.member, before.lastAcked)
				case again.start.Before(before.end):
					v.addf("partition %d offset %d: consumed again by %s at %s before %s's ownership ended at %s",
						p, o, again.member, cs[i].at.Format(timeFmt), before.member, before.end.Format(timeFmt))
				}
			}
		}
		if missing > 0 {
			v.addf("partition %d: %d of %d acknowledged records never consumed, the first at offset %d", p, missing, len(values), firstMissing)
		}
	}

	// Gaps in the consumption of unmoved partitions across each window.
	inWindow := func(a, b time.Time) bool {
		for _, w := range windows {
			if a.Before(w.end) && b.After(w.start) {
				return true
			}
		}
		return false
	}
	for _, s := range stretches {
		for j := 1; j < len(s.records); j++ {
			a, b := s.records[j-1].At, s.records[j].At
			if b.After(producedUntil) || inWindow(a, b) {
				continue
			}
			sum.steadyMaxGap = max(sum.steadyMaxGap, b.Sub(a))
		}
	}
	for _, w := range windows {
		g := coopGap{window: w.name, duration: w.end.Sub(w.start), partition: -1}
		for _, s := range stretches {
			if s.start.After(w.start) || s.end.Before(w.end) {
				continue // moved, or not owned across the whole window
			}
			g.unmoved++
			// The instants the partition was consumed around and in the
			// window; the gaps between them are how long it waited.
			var points []time.Time
			for _, r := range s.records {
				switch {
				case !r.At.After(w.start):
					points = append(points[:0], r.At) // keep only the last one before
				case !r.At.After(w.end):
					points = append(points, r.At)
					g.consumed++
				default:
					points = append(points, r.At)
				}
				if r.At.After(w.end) {
					break
				}
			}
			if len(points) == 0 || points[0].After(w.start) {
				points = append([]time.Time{w.start}, points...)
			}
			if last := points[len(points)-1]; last.Before(w.end) {
				// Nothing consumed after the window (the producer had
				// stopped): the gap runs to the window's end.
				points = append(points, w.end)
			}
			for j := 1; j < len(points); j++ {
				if d := points[j].Sub(points[j-1]); d > g.maxGap {
					g.maxGap, g.member, g.partition = d, s.member, s.partition
				}
			}
		}
		sum.gaps = append(sum.gaps, g)
	}
	return sum, v.err()
}

// timeFmt shows event times to the millisecond.
const timeFmt = "15:04:05.000"

func sortedKeysInt64(m map[int64]bool) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestCoopCheckerRules runs checkCoop on small made-up histories of one
// partition: a good one passes, and each broken rule is reported.
func TestCoopCheckerRules(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	values := []string{"k/0", "k/1", "k/2", "k/3", "k/4", "k/5"}
	acked := map[int32][]string{0: values}
	assigned := func(ms int) coopEvent { return coopEvent{Kind: evAssigned, At: at(ms), Partitions: []int32{0}} }
	revoked := func(ms int) coopEvent { return coopEvent{Kind: evRevoked, At: at(ms), Partitions: []int32{0}} }
	lost := func(ms int) coopEvent { return coopEvent{Kind: evLost, At: at(ms), Partitions: []int32{0}} }
	consumed := func(ms int, offsets ...int64) []coopEvent {
		var evs []coopEvent
		for _, o := range offsets {
			evs = append(evs, coopEvent{Kind: evConsumed, At: at(ms), Partition: 0, Offset: o, Key: "k", Value: values[o]})
		}
		return evs
	}
	commit := func(kind string, ms int, offset int64) coopEvent {
		return coopEvent{Kind: kind, At: at(ms), Offsets: map[int32]int64{0: offset}}
	}
	seq := func(parts ...any) []coopEvent {
		var evs []coopEvent
		for _, p := range parts {
			switch p := p.(type) {
			case coopEvent:
				evs = append(evs, p)
			case []coopEvent:
				evs = append(evs, p...)
			}
		}
		return evs
	}
	// X owns the partition, consumes 0-2, commits 3 and is revoked; Y
	// takes over at 3.
	goodX := seq(assigned(1), consumed(2, 0, 1, 2), commit(evCommitSent, 3, 3), commit(evCommitAcked, 4, 3), revoked(5))
	goodY := seq(assigned(6), consumed(7, 3, 4, 5), commit(evCommitSent, 8, 6), commit(evCommitAcked, 9, 6), revoked(10))

	for _, tc := range []struct {
		name    string
		members []coopMemberLog
		want    string // in the error; empty: no error
	}{
		{"good", []coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: goodY}}, ""},
		{"killed member, next owner takes its acknowledged commit",
			[]coopMemberLog{
				{name: "X", events: seq(assigned(1), consumed(2, 0, 1, 2, 3, 4), commit(evCommitSent, 3, 3), commit(evCommitAcked, 4, 3), commit(evCommitSent, 5, 5)), killedAt: at(6)},
				{name: "Y", events: seq(assigned(7), consumed(8, 3, 4, 5))},
			}, ""},
		{"killed member, next owner takes its commit in flight",
			[]coopMemberLog{
				{name: "X", events: seq(assigned(1), consumed(2, 0, 1, 2, 3, 4), commit(evCommitSent, 3, 3), commit(evCommitAcked, 4, 3), commit(evCommitSent, 5, 5)), killedAt: at(6)},
				{name: "Y", events: seq(assigned(7), consumed(8, 5))},
			}, ""},
		{"killed member, next owner starts at neither",
			[]coopMemberLog{
				{name: "X", events: seq(assigned(1), consumed(2, 0, 1, 2, 3, 4), commit(evCommitSent, 3, 3), commit(evCommitAcked, 4, 3), commit(evCommitSent, 5, 5)), killedAt: at(6)},
				{name: "Y", events: seq(assigned(7), consumed(8, 4, 5))},
			}, "started at offset 4"},
		{"re-consumed a committed record",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(assigned(6), consumed(7, 2, 3, 4, 5))}},
			"had committed through 3"},
		{"revoked and given back",
			[]coopMemberLog{{name: "X", events: seq(goodX, assigned(11), consumed(12, 3, 4, 5))}},
			"given back to it"},
		{"consumed without owning",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(consumed(6, 3), assigned(6), consumed(7, 3, 4, 5))}},
			"without owning"},
		{"two owners at once",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(assigned(4), consumed(7, 3, 4, 5))}},
			"while X still did"},
		{"offset skipped",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(assigned(6), consumed(7, 3, 5))}},
			"consumed offset 5 after 3"},
		{"record never consumed",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(assigned(6), consumed(7, 3, 4))}},
			"never consumed"},
		{"per-key order",
			[]coopMemberLog{{name: "X", events: goodX}, {name: "Y", events: seq(assigned(6), consumed(7, 3),
				coopEvent{Kind: evConsumed, At: at(7), Offset: 4, Key: "k", Value: "k/1"}, consumed(7, 5))}},
			"per-key order broken"},
		{"lost by a live member",
			[]coopMemberLog{{name: "X", events: seq(assigned(1), consumed(2, 0, 1, 2), commit(evCommitAcked, 4, 3), lost(5))}, {name: "Y", events: goodY}},
			"lost it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkCoop(tc.members, acked, nil, at(100))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want no violation, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want a violation containing %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want a violation containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestCoopCheckerGaps checks the gap measurement on a made-up history: a
// partition consumed every 10 ms except for a 300 ms pause inside the
// window, and one that moved during it.
func TestCoopCheckerGaps(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var values []string
	var evs []coopEvent
	evs = append(evs, coopEvent{Kind: evAssigned, At: at(0), Partitions: []int32{0, 1}})
	next := map[int32]int64{}
	consume := func(p int32, ms int) {
		o := next[p]
		next[p]++
		evs = append(evs, coopEvent{Kind: evConsumed, At: at(ms), Partition: p, Offset: o, Key: "k", Value: fmt.Sprintf("k/%d", o)})
	}
	for ms := 10; ms <= 1000; ms += 10 {
		if ms > 400 && ms < 700 {
			continue // the pause: from 400 to 700
		}
		consume(0, ms)
		if ms <= 500 {
			consume(1, ms)
		}
	}
	evs = append(evs, coopEvent{Kind: evRevoked, At: at(1001), Partitions: []int32{0}})
	// Partition 1 stopped at 500: it is revoked in the window.
	idx := slices.IndexFunc(evs, func(ev coopEvent) bool { return ev.At.After(at(500)) })
	evs = slices.Insert(evs, idx, coopEvent{Kind: evRevoked, At: at(501), Partitions: []int32{1}})
	for o := range next[0] {
		values = append(values, fmt.Sprintf("k/%d", o))
	}
	acked := map[int32][]string{0: values, 1: values[:next[1]]}
	sum, err := checkCoop([]coopMemberLog{{name: "X", events: evs}}, acked, []coopWindow{{"w", at(300), at(800)}}, at(2000))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.gaps) != 1 {
		t.Fatalf("gaps: %v", sum.gaps)
	}
	g := sum.gaps[0]
	if g.unmoved != 1 || g.partition != 0 || g.maxGap != 300*time.Millisecond || g.consumed != 21 {
		t.Fatalf("gap %v; want 1 unmoved partition (0), longest gap 300ms, 21 records consumed in the window", g)
	}
	if sum.steadyMaxGap != 10*time.Millisecond {
		t.Fatalf("steady gap %v, want 10ms", sum.steadyMaxGap)
	}
}
