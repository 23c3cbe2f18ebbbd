package controller

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Replica placement: which brokers hold a new partition, and which of
// them is its preferred leader (the first replica). A pure function of
// the registered brokers, the topic's name and its existing partitions,
// so the same request places the same way and a table test pins it.
//
// The rules, in order of precedence, are Kafka's (KIP-36's rack-aware
// assignment and KRaft's striped placer) with balance made exact:
//
//  1. A partition's replicas are on distinct brokers (rf <= brokers).
//  2. They are on as many distinct racks as there can be: min(rf, racks).
//     Brokers without a rack form one rack of their own, as in KRaft;
//     with no racks at all this rule says nothing.
//  3. Preferred leaders are spread over the brokers: across a topic,
//     any two brokers lead a number of partitions that differ by at
//     most one.
//  4. Replicas are spread too: any two brokers hold numbers of the
//     topic's replicas that differ by at most one, where rule 2 allows
//     it (racks of one size, or no racks). Racks of unequal sizes make
//     the brokers of a small rack hold more, as in Kafka, which calls
//     such a layout the operator's to avoid; within a rack the counts
//     still differ by at most one.
//
// Kafka's own schemes meet 1 to 3 but not 4: partition p's followers
// sit at fixed offsets from its leader, so a topic whose partition count
// is not a multiple of the broker count loads the brokers just after the
// last leaders up to rf-1 replicas more than the rest. Fjord places
// greedily instead, one partition at a time, each replica on the least
// loaded broker the rules allow, and the tie-breaks below are what make
// the greedy choice keep rules 3 and 4; TestPlacementProperties checks
// them for every topic of 1 to 9 brokers (with and without racks, of
// equal and unequal sizes), 1 to 100 partitions and rf 1 to 3, from
// every starting broker.
//
// Balance is per topic, as in Kafka: each topic starts at a broker drawn
// from a hash of its name (placementStart), so many small topics spread
// their leaders over the cluster too. CreatePartitions continues from
// the topic's existing partitions, counted the same way, so growing a
// topic places the new partitions exactly as creating it with the larger
// count would have (with the same brokers), and brokers registered
// since take the new partitions first, being the least loaded.

// placementStart is where placement of topic begins among n brokers: a
// hash of the name, so topics spread their leaders over the brokers
// rather than all starting at the lowest id, and the same request places
// the same way (testable, reproducible).
func placementStart(topic string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int(h.Sum32() % uint32(n))
}

// placeReplicas returns the replica lists of count new partitions of
// topic, each rf long, the first its preferred leader. existing are the
// replica lists of the topic's partitions so far (none for a new topic);
// the new ones are partitions len(existing) on. Replicas of existing
// partitions on brokers not in brokers are not counted.
//
// New replicas go on active brokers (Broker.Active: heard from and not
// shutting down) while there are rf of them. When there are fewer, as
// during a rolling restart of a cluster as large as the replication
// factor, the rest go on the inactive brokers as a last resort, as
// KRaft's placer uses fenced brokers: the partition starts under-
// replicated, with an ISR of its active replicas (newPartitions), and
// the others join once they are back and caught up. Refusing the topic
// instead would fail every CreateTopics of a cluster in a roll. A
// leader is always active.
// REQUIRES: 1 <= rf <= len(brokers), at least one broker active, no
// broker id twice.
func placeReplicas(brokers []metadata.Broker, topic string, existing [][]int32, count, rf int) [][]int32 {
	active := slices.DeleteFunc(slices.Clone(brokers), func(b metadata.Broker) bool { return !b.Active() })
	if rf < 1 || rf > len(brokers) || len(active) == 0 {
		panic(fmt.Sprintf("controller: placing %d replicas on %d brokers, %d of them active", rf, len(brokers), len(active)))
	}
	var pl *placer
	if rf <= len(active) {
		pl = newPlacer(active, placementStart(topic, len(active)))
	} else {
		pl = newPlacer(brokers, placementStart(topic, len(brokers)))
		pl.inactive = make([]bool, len(pl.order))
		for _, b := range brokers {
			pl.inactive[pl.index[b.NodeID]] = !b.Active()
		}
	}
	for _, reps := range existing {
		pl.count(reps)
	}
	out := make([][]int32, count)
	for i := range out {
		out[i] = pl.place(len(existing)+i, rf)
	}
	return out
}

// placer holds the counts one topic's placement decides by. Brokers are
// indexed by their position in order.
type placer struct {
	// order is the brokers, rack by rack in turn (the first broker of
	// each rack, then the second of each, ...), racks by name and brokers
	// within a rack by id: Kafka's rack-alternating list. Walking it from
	// any point meets a new rack at each step while there is one, so the
	// tie-breaks that walk it spread a partition over racks.
	order []int32
	// rack[i] is the index of order[i]'s rack; rackSize[r] its broker
	// count.
	rack     []int
	rackSize []int
	start    int
	// Per broker: the topic's replicas it holds, and the partitions it
	// is the preferred leader of. Per rack: the replicas it holds.
	// Invariant: sum(replicas) == sum(rackReplicas).
	replicas     []int
	leaders      []int
	rackReplicas []int
	index        map[int32]int // broker id -> position in order
	// inactive[i] marks order[i] a last resort: never a leader, a
	// follower only when no active broker is left (nil: all active).
	inactive []bool
}

// lastResort reports whether position b is an inactive broker.
func (pl *placer) lastResort(b int) bool { return pl.inactive != nil && pl.inactive[b] }

func newPlacer(brokers []metadata.Broker, start int) *placer {
	byRack := map[string][]int32{}
	var racks []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b.NodeID)
	}
	slices.Sort(racks) // "" (no rack) first
	pl := &placer{
		rackSize: make([]int, len(racks)), start: start,
		replicas: make([]int, len(brokers)), leaders: make([]int, len(brokers)),
		rackReplicas: make([]int, len(racks)), index: make(map[int32]int, len(brokers)),
	}
	for r, name := range racks {
		slices.Sort(byRack[name])
		pl.rackSize[r] = len(byRack[name])
	}
	for i := 0; len(pl.order) < len(brokers); i++ {
		for r, name := range racks {
			if ids := byRack[name]; i < len(ids) {
				pl.index[ids[i]] = len(pl.order)
				pl.order = append(pl.order, ids[i])
				pl.rack = append(pl.rack, r)
			}
		}
	}
	return pl
}

// count adds an existing partition's replicas to the counts.
func (pl *placer) count(reps []int32) {
	for j, id := range reps {
		b, ok := pl.index[id]
		if !ok {
			continue // a broker no longer registered holds nothing new
		}
		if j == 0 {
			pl.leaders[b]++
		}
		pl.replicas[b]++
		pl.rackReplicas[pl.rack[b]]++
	}
}

// place chooses partition p's rf replicas and counts them.
//
// The leader is the broker with the fewest leaderships, then the fewest
// replicas, then in the rack most behind its share; that keeps rule 3
// outright (the least-leading broker always leads next) and makes the
// leader, which holds a replica too, a broker that needs one. Each
// follower is, among the brokers not yet chosen, one in the rack with the
// fewest of this partition's replicas (rule 2), then the one with the
// fewest replicas (rule 4), then the most leaderships (a broker that
// will lead soon gets its replica then: giving it one now as well is
// what makes greedy placement overshoot), then in the rack most behind.
// Ties left are broken by position: leaders walking order from start+p,
// so they rotate over the brokers as in Kafka, and followers walking
// from just after the leader, shifted by one more on each pass over the
// brokers (Kafka's replica shift), so partitions led by one broker do
// not all have the same followers: when it fails, its leaderships move
// to several brokers.
func (pl *placer) place(p, rf int) []int32 {
	n := len(pl.order)
	// behind is how far rack r is below its share of the replicas
	// after partition p, the share being its size's fraction of rf per
	// partition: (p+1)*rf*size/n - held, scaled by n to stay an integer.
	// Greater is further behind.
	behind := func(r int) int {
		return (p+1)*rf*pl.rackSize[r] - n*pl.rackReplicas[r]
	}
	leader := -1
	for i := range n {
		b := (pl.start + p + i) % n
		if pl.lastResort(b) {
			continue
		}
		if leader < 0 || cmp.Or(
			cmp.Compare(pl.leaders[b], pl.leaders[leader]),
			cmp.Compare(pl.replicas[b], pl.replicas[leader]),
			cmp.Compare(behind(pl.rack[leader]), behind(pl.rack[b])),
		) < 0 {
			leader = b
		}
	}
	chosen := []int{leader}
	inRack := make([]int, len(pl.rackSize)) // this partition's replicas per rack
	add := func(b int) {
		inRack[pl.rack[b]]++
		pl.replicas[b]++
		pl.rackReplicas[pl.rack[b]]++
	}
	add(leader)
	pl.leaders[leader]++
	shift := p / n
	for len(chosen) < rf {
		f := -1
		for i := range n {
			b := (leader + 1 + shift + i) % n
			if slices.Contains(chosen, b) {
				continue
			}
			if f < 0 || cmp.Or(
				compareBool(pl.lastResort(b), pl.lastResort(f)),
				cmp.Compare(inRack[pl.rack[b]], inRack[pl.rack[f]]),
				cmp.Compare(pl.replicas[b], pl.replicas[f]),
				cmp.Compare(pl.leaders[f], pl.leaders[b]),
				cmp.Compare(behind(pl.rack[f]), behind(pl.rack[b])),
			) < 0 {
				f = b
			}
		}
		chosen = append(chosen, f)
		add(f)
	}
	out := make([]int32, rf)
	for j, b := range chosen {
		out[j] = pl.order[b]
	}
	return out
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// registeredBrokers returns img's brokers, by id: where new replicas may
// go (placeReplicas prefers the active ones).
func registeredBrokers(img *metadata.Image) []metadata.Broker {
	out := make([]metadata.Broker, 0, len(img.Brokers))
	for _, id := range img.BrokerIDs() {
		out = append(out, img.Brokers[id])
	}
	return out
}

// activeCount is how many of brokers are active.
func activeCount(brokers []metadata.Broker) int {
	n := 0
	for _, b := range brokers {
		if b.Active() {
			n++
		}
	}
	return n
}
