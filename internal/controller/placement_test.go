package controller

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
)

// brokerSet is n brokers with racks[i] the rack of the i-th. Ids are not
// 0..n-1 (nor sorted like the racks), so nothing confuses a broker's id
// with its position.
func brokerSet(racks []string) []metadata.Broker {
	out := make([]metadata.Broker, len(racks))
	for i, r := range racks {
		out[i] = metadata.Broker{NodeID: int32(100 + 7*i), Host: "h", Port: 9092, Rack: r}
	}
	return out
}

// rackLayouts are the ways the property test puts n brokers in racks:
// none, each its own, every count of racks both interleaved and in
// blocks (equal sizes where n allows, else off by one), one big rack
// beside single ones, racks named and not mixed, and a few drawn at
// random with a fixed seed.
func rackLayouts(n int) map[string][]string {
	out := map[string][]string{}
	add := func(name string, rack func(i int) string) {
		racks := make([]string, n)
		for i := range racks {
			racks[i] = rack(i)
		}
		out[name] = racks
	}
	add("no racks", func(int) string { return "" })
	add("one rack", func(int) string { return "r" })
	for r := 2; r <= n; r++ {
		add(fmt.Sprintf("%d racks interleaved", r), func(i int) string { return fmt.Sprintf("r%d", i%r) })
		add(fmt.Sprintf("%d racks in blocks", r), func(i int) string { return fmt.Sprintf("r%d", i*r/n) })
		add(fmt.Sprintf("one big rack and %d single", r-1), func(i int) string {
			return fmt.Sprintf("r%d", max(0, i-(n-r)))
		})
	}
	if n >= 2 {
		add("half without a rack", func(i int) string { return []string{"", "a"}[i%2] })
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	for k := range 4 {
		r := 1 + rng.IntN(n)
		add(fmt.Sprintf("random %d", k), func(i int) string {
			if i < r {
				return fmt.Sprintf("r%d", i) // every rack has a broker
			}
			return fmt.Sprintf("r%d", rng.IntN(r))
		})
	}
	return out
}

// balanceable reports whether rule 2 lets p partitions of rf replicas
// on brokers in racks of these sizes give every broker floor or ceil of
// p*rf/n replicas. The brokers of a rack together hold between lo and
// hi replicas: at most one per partition when there are at least rf
// racks (each partition spans rf racks), else at least one per
// partition and at most rf-racks+1. It is balanceable if the ceil
// brokers (p*rf mod n of them) can be put in racks so that every rack's
// total is within its bounds.
func balanceable(sizes []int, p, rf int) bool {
	n := 0
	for _, s := range sizes {
		n += s
	}
	q, extra := p*rf/n, p*rf%n
	lo, hi := 0, p
	if rf > len(sizes) {
		lo, hi = p, p*(rf-len(sizes)+1)
	}
	minExtra, maxExtra := 0, 0
	for _, s := range sizes {
		least, most := max(0, lo-s*q), min(s, hi-s*q)
		if least > most {
			return false
		}
		minExtra += least
		maxExtra += most
	}
	return minExtra <= extra && extra <= maxExtra
}

func spread(counts []int) int { return slices.Max(counts) - slices.Min(counts) }

// TestPlacementProperties places up to 100 partitions for every rack
// layout of 1 to 9 brokers, every rf up to min(3, brokers) and every
// starting broker, and checks the rules of placement.go after each
// partition (placement is incremental, so the first p partitions are a
// topic of p: TestPlacementIsIncremental). Rules: distinct replicas;
// min(rf, racks) racks per partition; leader counts within one;
// replica counts within one inside each rack, and across all brokers
// where balanceable says the racks allow it.
func TestPlacementProperties(t *testing.T) {
	checked, balanced := 0, 0
	for n := 1; n <= 9; n++ {
		for layout, racks := range rackLayouts(n) {
			brokers := brokerSet(racks)
			rackOf := map[int32]string{}
			for _, b := range brokers {
				rackOf[b.NodeID] = b.Rack
			}
			rackNames := slices.Compact(slices.Sorted(slices.Values(racks)))
			sizes := make([]int, len(rackNames))
			for _, r := range racks {
				sizes[slices.Index(rackNames, r)]++
			}
			for rf := 1; rf <= min(3, n); rf++ {
				for start := range n {
					name := fmt.Sprintf("%d brokers, %s, rf %d, start %d", n, layout, rf, start)
					pl := newPlacer(brokers, start)
					for p := range 100 {
						reps := pl.place(p, rf)
						checked++
						if err := checkPlaced(pl, reps, rf, len(rackNames), rackOf); err != nil {
							t.Fatalf("%s: partition %d = %v: %v", name, p, reps, err)
						}
						if balanceable(sizes, p+1, rf) {
							balanced++
							if spread(pl.replicas) > 1 {
								t.Fatalf("%s: after %d partitions replicas per broker %v (order %v) differ by more than one",
									name, p+1, pl.replicas, pl.order)
							}
						}
					}
				}
			}
		}
	}
	// The oracle must not have excused most cases.
	if balanced < checked*3/4 {
		t.Fatalf("global balance checked for %d of %d placements only", balanced, checked)
	}
}

// checkPlaced checks one partition's replicas and the counts after it.
func checkPlaced(pl *placer, reps []int32, rf, racks int, rackOf map[int32]string) error {
	if len(reps) != rf {
		return fmt.Errorf("%d replicas, want %d", len(reps), rf)
	}
	seen := map[string]bool{}
	for i, id := range reps {
		r, ok := rackOf[id]
		if !ok {
			return fmt.Errorf("broker %d is not registered", id)
		}
		if slices.Contains(reps[:i], id) {
			return fmt.Errorf("broker %d twice", id)
		}
		seen[r] = true
	}
	if len(seen) != min(rf, racks) {
		return fmt.Errorf("on %d racks, want min(rf %d, racks %d)", len(seen), rf, racks)
	}
	if spread(pl.leaders) > 1 {
		return fmt.Errorf("leaders per broker %v (order %v) differ by more than one", pl.leaders, pl.order)
	}
	for r := range pl.rackSize {
		var in []int
		for b := range pl.order {
			if pl.rack[b] == r {
				in = append(in, pl.replicas[b])
			}
		}
		if spread(in) > 1 {
			return fmt.Errorf("replicas per broker within rack %d: %v (all: %v, order %v) differ by more than one", r, in, pl.replicas, pl.order)
		}
	}
	return nil
}

// TestPlacementIsIncremental: placing p partitions gives the first p of
// placing more (what the property test relies on), and growing a topic
// (CreatePartitions) in steps places exactly as creating it at once.
// Both also show placement is deterministic.
func TestPlacementIsIncremental(t *testing.T) {
	for _, n := range []int{1, 3, 5, 9} {
		for layout, racks := range rackLayouts(n) {
			brokers := brokerSet(racks)
			for rf := 1; rf <= min(3, n); rf++ {
				name := fmt.Sprintf("%d brokers, %s, rf %d", n, layout, rf)
				all := placeReplicas(brokers, "orders", nil, 100, rf)
				for _, p := range []int{1, 2, 7, n, 2*n + 1, 99} {
					if got := placeReplicas(brokers, "orders", nil, p, rf); !reflect.DeepEqual(got, all[:p]) {
						t.Fatalf("%s: %d partitions %v, not the first %d of 100 %v", name, p, got, p, all[:p])
					}
				}
				var grown [][]int32
				for _, step := range []int{1, 6, 30, 63} {
					grown = append(grown, placeReplicas(brokers, "orders", grown, step, rf)...)
				}
				if !reflect.DeepEqual(grown, all) {
					t.Fatalf("%s: grown in steps\n%v\ncreated at once\n%v", name, grown, all)
				}
			}
		}
	}
}

// TestPlacementIgnoresBrokerOrder: the image's broker map has no order;
// placement must not depend on the order brokers are handed in.
func TestPlacementIgnoresBrokerOrder(t *testing.T) {
	brokers := brokerSet([]string{"a", "b", "", "a", "c", "b", "", "c"})
	want := placeReplicas(brokers, "t", nil, 40, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(brokers)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := placeReplicas(shuffled, "t", nil, 40, 3); !reflect.DeepEqual(got, want) {
			t.Fatalf("brokers in order %v placed\n%v\nnot\n%v", shuffled, got, want)
		}
	}
}

// TestPlacementExamples pins a few placements whole, so a change of the
// rules shows as a diff a reader can judge.
func TestPlacementExamples(t *testing.T) {
	b := func(racks ...string) []metadata.Broker {
		out := make([]metadata.Broker, len(racks))
		for i, r := range racks {
			out[i] = metadata.Broker{NodeID: int32(i + 1), Rack: r}
		}
		return out
	}
	tests := []struct {
		name    string
		brokers []metadata.Broker
		topic   string
		count   int
		rf      int
		want    [][]int32
	}{
		{"one broker", b(""), "t", 3, 1, [][]int32{{1}, {1}, {1}}},
		{"three brokers, rf 1: leaders rotate", b("", "", ""), "t", 4, 1, [][]int32{{1}, {2}, {3}, {1}}},
		// Six brokers, rf 3: every broker leads two partitions and
		// holds six replicas, and the two partitions one broker leads
		// have different followers.
		{"six brokers, rf 3", b("", "", "", "", "", ""), "orders", 12, 3, [][]int32{
			{3, 4, 5}, {6, 1, 2}, {5, 6, 3}, {1, 2, 4}, {2, 3, 5}, {4, 6, 1},
			{3, 5, 6}, {4, 1, 2}, {5, 3, 4}, {6, 2, 1}, {1, 3, 4}, {2, 5, 6}}},
		// Three racks of two: every partition spans the three racks
		// (a: 1, 4; b: 2, 5; c: 3, 6).
		{"three racks, rf 3", b("a", "b", "c", "a", "b", "c"), "orders", 6, 3, [][]int32{
			{3, 4, 5}, {6, 1, 2}, {5, 6, 1}, {2, 3, 4}, {1, 2, 3}, {4, 5, 6}}},
		// One broker per rack beside a rack of four (rf 2): broker 5 is
		// in every partition, and leads its share only.
		{"uneven racks", b("a", "a", "a", "a", "b"), "t", 5, 2, [][]int32{
			{2, 5}, {3, 5}, {4, 5}, {1, 5}, {5, 2}}},
	}
	for _, tc := range tests {
		got := placeReplicas(tc.brokers, tc.topic, nil, tc.count, tc.rf)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlacementAfterNewBrokers: partitions added once brokers have joined
// go to the new brokers first, leaders and replicas, instead of piling
// more onto the old ones.
func TestPlacementAfterNewBrokers(t *testing.T) {
	old := brokerSet([]string{"", "", ""})
	existing := placeReplicas(old, "t", nil, 6, 3)
	all := brokerSet([]string{"", "", "", "", "", ""})
	grown := append(slices.Clone(existing), placeReplicas(all, "t", existing, 6, 3)...)
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, reps := range grown {
		leaders[reps[0]]++
		for _, id := range reps {
			replicas[id]++
		}
	}
	for _, b := range all {
		// 12 partitions over 6 brokers lead 2 each; the 6 new
		// partitions' 18 replicas fill the new brokers up to the 6
		// (one per partition) the old ones hold.
		if leaders[b.NodeID] != 2 || replicas[b.NodeID] != 6 {
			t.Errorf("broker %d leads %d and holds %d replicas, want 2 and 6: %v", b.NodeID, leaders[b.NodeID], replicas[b.NodeID], grown)
		}
	}
	// A broker that left holds nothing new, and its old replicas do not
	// count against anyone.
	gone := placeReplicas(old[:2], "t", existing, 2, 2)
	for _, reps := range gone {
		if slices.Contains(reps, old[2].NodeID) {
			t.Fatalf("placed on unregistered broker %d: %v", old[2].NodeID, gone)
		}
	}
}

func TestPlacementStart(t *testing.T) {
	// Deterministic, in range, and not the same broker for every name.
	starts := map[int]bool{}
	for i := range 50 {
		name := fmt.Sprintf("topic-%d", i)
		s := placementStart(name, 7)
		if s < 0 || s >= 7 || s != placementStart(name, 7) {
			t.Fatalf("placementStart(%q, 7) = %d", name, s)
		}
		starts[s] = true
	}
	if len(starts) < 5 {
		t.Fatalf("50 topics start at %d of 7 brokers only", len(starts))
	}
}

func TestPlaceReplicasRefusesImpossibleFactors(t *testing.T) {
	for _, rf := range []int{0, -1, 4} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), fmt.Sprintf("placing %d replicas on 3 brokers", rf)) {
					t.Errorf("rf %d: recovered %v, want a panic naming the numbers", rf, r)
				}
			}()
			placeReplicas(brokerSet([]string{"", "", ""}), "t", nil, 1, rf)
		}()
	}
}

// Fewer active brokers than the replication factor (one of three
// fenced, or in controlled shutdown, during a rolling restart): the
// missing replicas go on the inactive brokers as a last resort, one per
// partition, never as leader; the leaders spread over the active ones.
// With enough active brokers the inactive ones get nothing.
func TestPlacementUsesInactiveBrokersAsLastResort(t *testing.T) {
	for _, mark := range []struct {
		name string
		set  func(*metadata.Broker)
	}{
		{"fenced", func(b *metadata.Broker) { b.Fenced = true }},
		{"shutting down", func(b *metadata.Broker) { b.ShuttingDown = true }},
	} {
		t.Run(mark.name, func(t *testing.T) {
			brokers := brokerSet([]string{"", "", ""})
			inactive := brokers[1].NodeID
			mark.set(&brokers[1])
			const partitions = 6
			got := placeReplicas(brokers, "t", nil, partitions, 3)
			leads := map[int32]int{}
			for p, reps := range got {
				if len(reps) != 3 || !slices.Contains(reps, inactive) {
					t.Fatalf("partition %d: replicas %v, want all three brokers", p, reps)
				}
				if reps[0] == inactive {
					t.Fatalf("partition %d: replicas %v: the inactive broker %d is the preferred leader", p, reps, inactive)
				}
				leads[reps[0]]++
			}
			if leads[brokers[0].NodeID] != partitions/2 || leads[brokers[2].NodeID] != partitions/2 {
				t.Errorf("preferred leaders %v, want %d each on the active brokers", leads, partitions/2)
			}
			for p, reps := range placeReplicas(brokers, "t", nil, partitions, 2) {
				if slices.Contains(reps, inactive) {
					t.Errorf("rf 2, partition %d: replicas %v on the inactive broker, with two active ones", p, reps)
				}
			}
			// Growing the topic keeps to the same rules.
			for p, reps := range placeReplicas(brokers, "t", got, 3, 3) {
				if reps[0] == inactive || !slices.Contains(reps, inactive) {
					t.Errorf("added partition %d: replicas %v", partitions+p, reps)
				}
			}
		})
	}
	t.Run("none active", func(t *testing.T) {
		brokers := brokerSet([]string{"", ""})
		for i := range brokers {
			brokers[i].Fenced = true
		}
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "0 of them active") {
				t.Errorf("recovered %v, want a panic: no leader can be placed", r)
			}
		}()
		placeReplicas(brokers, "t", nil, 1, 1)
	})
}
