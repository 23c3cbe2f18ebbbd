package rebalance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// apply returns partitions with the moves made.
func apply(partitions []Partition, moves []Move) []Partition {
	out := slices.Clone(partitions)
	for _, m := range moves {
		for i := range out {
			if out[i].Topic == m.Topic && out[i].Partition == m.Partition {
				out[i].Replicas = m.To
			}
		}
	}
	return out
}

func counts(partitions []Partition) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range partitions {
		for i, b := range p.Replicas {
			replicas[b]++
			if i == 0 {
				leaders[b]++
			}
		}
	}
	return replicas, leaders
}

// roundRobin is n partitions of rf replicas over brokers, as a cluster's
// placement leaves them: each partition starting one broker further on.
func roundRobin(topic string, n, rf int, brokers ...int32) []Partition {
	var out []Partition
	for p := range n {
		var r []int32
		for i := range rf {
			r = append(r, brokers[(p+i)%len(brokers)])
		}
		out = append(out, Partition{Topic: topic, Partition: int32(p), Replicas: r})
	}
	return out
}

func brokers(ids ...int32) []Broker {
	var out []Broker
	for _, id := range ids {
		out = append(out, Broker{ID: id})
	}
	return out
}

func TestEvenClusterNeedsNoMoves(t *testing.T) {
	moves, err := Plan(brokers(1, 2, 3), roundRobin("t", 12, 3, 1, 2, 3), Options{Even: true})
	if err != nil || len(moves) != 0 {
		t.Fatalf("an even cluster: %v moves, %v", moves, err)
	}
}

// Issue 15's grow: a fourth broker joins three holding 12 partitions of
// three replicas. It gets its share, 9 replicas and 3 leaderships, and
// no more data moves than that: 9 replicas copied.
func TestGrowGivesTheNewBrokerItsShare(t *testing.T) {
	before := roundRobin("t", 12, 3, 1, 2, 3)
	moves, err := Plan(brokers(1, 2, 3, 4), before, Options{Even: true})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(before, moves)
	replicas, leaders := counts(after)
	for b := int32(1); b <= 4; b++ {
		if replicas[b] != 9 || leaders[b] != 3 {
			t.Errorf("broker %d: %d replicas, %d leaderships; want 9 and 3", b, replicas[b], leaders[b])
		}
	}
	copies := 0
	for _, m := range moves {
		if m.Copies() {
			copies++
		}
	}
	if copies != 9 {
		t.Errorf("%d moves copy data, want 9 (one per replica the new broker gets)", copies)
	}
	checkReplicas(t, before, after)
	if again, _ := Plan(brokers(1, 2, 3, 4), after, Options{Even: true}); len(again) != 0 {
		t.Errorf("planning again after the moves: %v, want nothing", again)
	}
}

// checkReplicas: every partition keeps its replication factor, with
// distinct brokers.
func checkReplicas(t *testing.T, before, after []Partition) {
	t.Helper()
	for i, p := range after {
		if len(p.Replicas) != len(before[i].Replicas) {
			t.Errorf("%s-%d: %v from %v: replication factor changed", p.Topic, p.Partition, p.Replicas, before[i].Replicas)
		}
		seen := map[int32]bool{}
		for _, b := range p.Replicas {
			if seen[b] {
				t.Errorf("%s-%d: %v names broker %d twice", p.Topic, p.Partition, p.Replicas, b)
			}
			seen[b] = true
		}
	}
}

// Racks a, b, c hold every partition once each; a second broker in rack
// a takes replicas only from broker 1, its rack's, so every partition
// still spans three racks.
func TestMovesKeepRackSpread(t *testing.T) {
	bs := []Broker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}}
	before := roundRobin("t", 12, 3, 1, 2, 3)
	moves, err := Plan(bs, before, Options{Even: true})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(before, moves)
	rack := map[int32]string{1: "a", 2: "b", 3: "c", 4: "a"}
	for _, p := range after {
		racks := map[string]bool{}
		for _, b := range p.Replicas {
			racks[rack[b]] = true
		}
		if len(racks) != 3 {
			t.Errorf("%s-%d on %v spans racks %v, want all three", p.Topic, p.Partition, p.Replicas, racks)
		}
	}
	replicas, _ := counts(after)
	if replicas[1] != 6 || replicas[4] != 6 || replicas[2] != 12 {
		t.Errorf("replicas per broker %v: want rack a's 12 split 6 and 6, the others unchanged", replicas)
	}
	checkReplicas(t, before, after)
}

// Issue 15's drain: broker 4's replicas go to the other three, which end
// even; a partition that would lose its replication factor, and a
// broker that is not there, are refused before anything is planned.
func TestDrain(t *testing.T) {
	before := roundRobin("t", 12, 3, 1, 2, 3, 4)
	moves, err := Plan(brokers(1, 2, 3, 4), before, Options{Drain: []int32{4}, Even: true})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(before, moves)
	replicas, leaders := counts(after)
	if replicas[4] != 0 || replicas[1] != 12 || replicas[2] != 12 || replicas[3] != 12 {
		t.Errorf("after draining broker 4: replicas %v", replicas)
	}
	if leaders[1] != 4 || leaders[2] != 4 || leaders[3] != 4 {
		t.Errorf("after draining broker 4: leaderships %v, want 4 each", leaders)
	}
	checkReplicas(t, before, after)

	// A drain alone moves only broker 4's replicas: each of its 9 to
	// the one broker of the three its partition lacks.
	only, err := Plan(brokers(1, 2, 3, 4), before, Options{Drain: []int32{4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 9 {
		t.Errorf("a drain alone made %d moves, want 9 (one per replica on broker 4)", len(only))
	}
	for _, m := range only {
		if !slices.Contains(m.From, 4) || slices.Contains(m.To, 4) {
			t.Errorf("drain-only move %v", m)
		}
		for i := range m.From {
			if m.From[i] != 4 && m.To[i] != m.From[i] {
				t.Errorf("drain-only move %v moved a replica not on broker 4", m)
			}
		}
	}

	_, err = Plan(brokers(1, 2, 3), roundRobin("t", 3, 3, 1, 2, 3), Options{Drain: []int32{3}})
	if err == nil || !strings.Contains(err.Error(), "would lower its replication factor") {
		t.Errorf("draining one of three brokers under RF 3: %v", err)
	}
	_, err = Plan(brokers(1), roundRobin("t", 1, 1, 1), Options{Drain: []int32{1}})
	if err == nil || !strings.Contains(err.Error(), "only 0 brokers would be left") {
		t.Errorf("draining the last broker: %v", err)
	}
	if _, err := Plan(brokers(1, 2), nil, Options{Drain: []int32{9}}); err == nil || !strings.Contains(err.Error(), "broker 9 is not a live broker") {
		t.Errorf("draining an unknown broker: %v", err)
	}
	if _, err := Plan(brokers(1, 1), nil, Options{}); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("a broker listed twice: %v", err)
	}
}

// A replica on a broker that is not live (fenced, gone) stays where it
// is: the plan is about the brokers it was given.
func TestReplicasOnOtherBrokersStay(t *testing.T) {
	before := []Partition{{"t", 0, []int32{9, 1}}, {"t", 1, []int32{1, 9}}, {"t", 2, []int32{1, 2}}, {"t", 3, []int32{1, 2}}}
	moves, err := Plan(brokers(1, 2, 3), before, Options{Even: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range apply(before, moves) {
		if p.Partition < 2 && !slices.Contains(p.Replicas, 9) {
			t.Errorf("%s-%d: replica on broker 9 moved: %v", p.Topic, p.Partition, p.Replicas)
		}
	}
}

// Over random clusters: replication factors kept, no replica on a
// drained broker, racks spanned never fewer, replica and leader counts
// within one of each other when there are no racks, and a second plan
// finds nothing to do.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 7).Draw(t, "brokers")
		useRacks := rapid.Bool().Draw(t, "racks")
		var bs []Broker
		rack := map[int32]string{}
		for i := range n {
			b := Broker{ID: int32(i + 1)}
			if useRacks {
				b.Rack = fmt.Sprintf("r%d", rapid.IntRange(0, 2).Draw(t, "rack"))
			}
			rack[b.ID] = b.Rack
			bs = append(bs, b)
		}
		var before []Partition
		for ti := range rapid.IntRange(1, 3).Draw(t, "topics") {
			rf := rapid.IntRange(1, n).Draw(t, "rf")
			for p := range rapid.IntRange(1, 20).Draw(t, "partitions") {
				perm := rapid.Permutation(bs).Draw(t, "placement")
				var r []int32
				for _, b := range perm[:rf] {
					r = append(r, b.ID)
				}
				before = append(before, Partition{Topic: fmt.Sprintf("t%d", ti), Partition: int32(p), Replicas: r})
			}
		}
		var drain []int32
		if n > 1 && rapid.Bool().Draw(t, "drain") {
			drain = []int32{int32(rapid.IntRange(1, n).Draw(t, "drained"))}
		}
		moves, err := Plan(bs, before, Options{Drain: drain, Even: true})
		if err != nil {
			maxRF := 0
			for _, p := range before {
				if slices.Contains(p.Replicas, drain[0]) {
					maxRF = max(maxRF, len(p.Replicas))
				}
			}
			if len(drain) == 0 || maxRF <= n-1 {
				t.Fatalf("Plan refused a feasible plan: %v", err)
			}
			return
		}
		after := apply(before, moves)
		spread := func(p Partition) int {
			racks := map[string]bool{}
			for _, b := range p.Replicas {
				if rack[b] == "" {
					racks[fmt.Sprint(b)] = true
				} else {
					racks[rack[b]] = true
				}
			}
			return len(racks)
		}
		for i, p := range after {
			seen := map[int32]bool{}
			for _, b := range p.Replicas {
				if seen[b] || slices.Contains(drain, b) {
					t.Fatalf("%s-%d: %v (drained %v)", p.Topic, p.Partition, p.Replicas, drain)
				}
				seen[b] = true
			}
			if len(p.Replicas) != len(before[i].Replicas) {
				t.Fatalf("%s-%d: RF changed: %v -> %v", p.Topic, p.Partition, before[i].Replicas, p.Replicas)
			}
			if len(drain) == 0 && spread(p) < spread(before[i]) {
				t.Fatalf("%s-%d: racks spanned fell from %d to %d", p.Topic, p.Partition, spread(before[i]), spread(p))
			}
		}
		if !useRacks {
			// Replicas: even in all and within every topic.
			groups := map[string][]Partition{"": after}
			for _, p := range after {
				groups[p.Topic] = append(groups[p.Topic], p)
			}
			for name, ps := range groups {
				replicas, _ := counts(ps)
				lo, hi := 1<<30, 0
				for _, b := range bs {
					if !slices.Contains(drain, b.ID) {
						lo, hi = min(lo, replicas[b.ID]), max(hi, replicas[b.ID])
					}
				}
				if hi-lo > 1 {
					t.Fatalf("topic %q: replica counts %v spread by %d", name, replicas, hi-lo)
				}
			}
		}
		// Leaders: no partition's preferred leadership would be better
		// on another of its replicas (its topic's counts first, then
		// the totals). Leaderships are not always even: the replicas'
		// balance comes first, and a broker may hold no partition that
		// another leads.
		_, leaders := counts(after)
		topicLeaders := map[string]map[int32]int{}
		for _, p := range after {
			if topicLeaders[p.Topic] == nil {
				topicLeaders[p.Topic] = map[int32]int{}
			}
			topicLeaders[p.Topic][p.Replicas[0]]++
		}
		for _, p := range after {
			a, lt := p.Replicas[0], topicLeaders[p.Topic]
			for _, b := range p.Replicas[1:] {
				if lt[a]-lt[b] >= 2 || lt[a]-lt[b] == 1 && leaders[a]-leaders[b] >= 2 {
					t.Fatalf("%s-%d on %v: leading on %d would be more even (topic leaders %v, leaders %v)",
						p.Topic, p.Partition, p.Replicas, b, lt, leaders)
				}
			}
		}
		var live []Broker
		for _, b := range bs {
			if !slices.Contains(drain, b.ID) {
				live = append(live, b)
			}
		}
		if again, err := Plan(live, after, Options{Even: true}); err != nil || len(again) != 0 {
			t.Fatalf("a second plan: %v, %v", again, err)
		}
	})
}

// Several topics, as the grow cluster test has them (two of 12
// partitions and the offsets topic's 50): every topic ends as even over
// the four brokers as its partition count allows, in replicas and in
// preferred leaderships, not only the totals.
func TestGrowEvensEachTopic(t *testing.T) {
	var before []Partition
	before = append(before, roundRobin("a", 12, 3, 1, 2, 3)...)
	before = append(before, roundRobin("b", 12, 3, 2, 3, 1)...)
	before = append(before, roundRobin("__consumer_offsets", 50, 3, 3, 1, 2)...)
	moves, err := Plan(brokers(1, 2, 3, 4), before, Options{Even: true})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(before, moves)
	for _, topic := range []string{"a", "b", "__consumer_offsets"} {
		var mine []Partition
		for _, p := range after {
			if p.Topic == topic {
				mine = append(mine, p)
			}
		}
		replicas, leaders := counts(mine)
		lo, hi := slices.Min(mapValues(replicas)), slices.Max(mapValues(replicas))
		llo, lhi := slices.Min(mapValues(leaders)), slices.Max(mapValues(leaders))
		if len(replicas) != 4 || hi-lo > 1 || len(leaders) != 4 || lhi-llo > 1 {
			t.Errorf("%s: replicas %v, leaderships %v; want each broker within one of the others", topic, replicas, leaders)
		}
	}
	checkReplicas(t, before, after)
}

func mapValues(m map[int32]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// BenchmarkPlan: a seventh broker joins six holding partitions of three
// replicas (the plan moves a seventh of them).
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{300, 1000} {
		before := roundRobin("t", n, 3, 1, 2, 3, 4, 5, 6)
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Plan(brokers(1, 2, 3, 4, 5, 6, 7), before, Options{Even: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
