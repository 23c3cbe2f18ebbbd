// Package rebalance computes partition moves that even out a cluster:
// every replica off the brokers being drained, then the same number of
// replicas on every broker, then the same number of preferred
// leaderships (first replicas), each as even within every topic as the
// cluster allows, without lowering the number of racks any partition
// spans. It is pure: the caller reads the cluster, and applies the plan
// with partition reassignments (KIP-455) and a preferred election.
//
// The moves are greedy, one replica at a time from the broker with the
// most to the one with the fewest, so the plan moves no more data than
// evening out needs: a cluster that is even already gets an empty plan.
package rebalance

import (
	"fmt"
	"slices"
)

// Broker is one broker that may hold replicas.
type Broker struct {
	ID   int32
	Rack string // "" for none
}

// Partition is one partition and its replicas, the first its preferred
// leader.
type Partition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Move is one partition's new replica list.
type Move struct {
	Topic     string
	Partition int32
	From, To  []int32
}

// Copies reports whether the move adds a replica (copies data), rather
// than only changing the order of the ones there.
func (m Move) Copies() bool {
	for _, b := range m.To {
		if !slices.Contains(m.From, b) {
			return true
		}
	}
	return false
}

// Options say what a plan does.
type Options struct {
	// Drain are brokers (each one of the plan's brokers) to move every
	// replica off, each to the broker holding fewest of its topic.
	Drain []int32
	// Even evens out replicas, then preferred leaderships, over the
	// brokers that are not drained. A drain alone moves only what it
	// must.
	Even bool
}

// Plan computes the moves for partitions over brokers. Replicas on
// brokers not listed (fenced or gone) stay where they are and count for
// no one. It fails, before planning anything, if a drained broker's
// replica has nowhere to go: fewer brokers remain than the partition's
// replication factor.
func Plan(brokers []Broker, partitions []Partition, opts Options) ([]Move, error) {
	s, err := newState(brokers, partitions, opts.Drain)
	if err != nil {
		return nil, err
	}
	if err := s.drain(); err != nil {
		return nil, err
	}
	if opts.Even {
		s.even()
	}
	var moves []Move
	for i, p := range partitions {
		if !slices.Equal(p.Replicas, s.parts[i].replicas) {
			moves = append(moves, Move{Topic: p.Topic, Partition: p.Partition, From: p.Replicas, To: s.parts[i].replicas})
		}
	}
	return moves, nil
}

type part struct {
	topic    string
	replicas []int32
}

type state struct {
	racks    map[int32]string // eligible brokers: not drained
	rackKeys map[int32]string // every plan broker's rackOf
	drained  map[int32]bool
	eligible []int32 // sorted
	parts    []part
	// replicas and leaders count per eligible broker; byTopic the same
	// per topic.
	replicas, leaders map[int32]int
	byTopic           map[string]map[int32]int
	leadersByTopic    map[string]map[int32]int
}

func newState(brokers []Broker, partitions []Partition, drain []int32) (*state, error) {
	s := &state{racks: map[int32]string{}, rackKeys: map[int32]string{}, drained: map[int32]bool{}, replicas: map[int32]int{}, leaders: map[int32]int{},
		byTopic: map[string]map[int32]int{}, leadersByTopic: map[string]map[int32]int{}}
	known := map[int32]bool{}
	for _, b := range brokers {
		if known[b.ID] {
			return nil, fmt.Errorf("broker %d is listed twice", b.ID)
		}
		known[b.ID] = true
		s.racks[b.ID] = b.Rack
		s.rackKeys[b.ID] = "rack:" + b.Rack
		if b.Rack == "" {
			s.rackKeys[b.ID] = fmt.Sprintf("broker:%d", b.ID)
		}
	}
	for _, id := range drain {
		if !known[id] {
			return nil, fmt.Errorf("broker %d is not a live broker of the cluster", id)
		}
		s.drained[id] = true
		delete(s.racks, id)
	}
	for id := range s.racks {
		s.eligible = append(s.eligible, id)
	}
	slices.Sort(s.eligible)
	for _, p := range partitions {
		s.parts = append(s.parts, part{topic: p.Topic, replicas: slices.Clone(p.Replicas)})
		if s.byTopic[p.Topic] == nil {
			s.byTopic[p.Topic], s.leadersByTopic[p.Topic] = map[int32]int{}, map[int32]int{}
		}
		for i, b := range p.Replicas {
			if _, ok := s.racks[b]; ok {
				s.replicas[b]++
				s.byTopic[p.Topic][b]++
				if i == 0 {
					s.leaders[b]++
					s.leadersByTopic[p.Topic][b]++
				}
			}
		}
		for _, b := range p.Replicas {
			if s.drained[b] && len(p.Replicas) > len(s.eligible) {
				return nil, fmt.Errorf("%s-%d has %d replicas and only %d brokers would be left to hold them: draining broker %d would lower its replication factor",
					p.Topic, p.Partition, len(p.Replicas), len(s.eligible), b)
			}
		}
	}
	return s, nil
}

// rackOf is b's rack for spreading: a broker without one counts as a
// rack of its own.
func (s *state) rackOf(b int32) string {
	if r, ok := s.rackKeys[b]; ok {
		return r
	}
	return fmt.Sprintf("broker:%d", b) // not a plan broker: only compared
}

// canMove reports whether p's replica on from may go to to: to holds
// none of p yet, and p spans no fewer racks after (to's rack is from's,
// or one p does not use).
func (s *state) canMove(p *part, from, to int32) bool {
	if _, ok := s.racks[to]; !ok || slices.Contains(p.replicas, to) {
		return false
	}
	if _, known := s.rackKeys[from]; known && s.rackOf(from) == s.rackOf(to) {
		return true
	}
	for _, b := range p.replicas {
		if b != from && s.rackOf(b) == s.rackOf(to) {
			return false
		}
	}
	return true
}

func (s *state) move(p *part, from, to int32) {
	i := slices.Index(p.replicas, from)
	p.replicas[i] = to
	if _, ok := s.racks[from]; ok {
		s.replicas[from]--
		s.byTopic[p.topic][from]--
		if i == 0 {
			s.leaders[from]--
			s.leadersByTopic[p.topic][from]--
		}
	}
	s.replicas[to]++
	s.byTopic[p.topic][to]++
	if i == 0 {
		s.leaders[to]++
		s.leadersByTopic[p.topic][to]++
	}
}

// drain moves every replica on a drained broker to the eligible broker
// with the fewest of that topic, then the fewest in all, that may take
// it (rack spread kept where it can be; where it cannot, to any broker
// without one, since a partition must keep its replication factor).
func (s *state) drain() error {
	for i := range s.parts {
		p := &s.parts[i]
		for _, from := range slices.Clone(p.replicas) {
			if !s.drained[from] {
				continue
			}
			to, ok := s.least(p, from, true)
			if !ok {
				to, ok = s.least(p, from, false)
			}
			if !ok {
				return fmt.Errorf("%s: no broker can take its replica on broker %d", p.topic, from)
			}
			s.move(p, from, to)
		}
	}
	return nil
}

// least is the eligible broker that may take p's replica on from with
// the fewest of p's topic, then the fewest replicas, then the lowest id;
// racks: keep p's rack spread.
func (s *state) least(p *part, from int32, racks bool) (int32, bool) {
	best, found := int32(0), false
	for _, b := range s.eligible {
		if racks && !s.canMove(p, from, b) || slices.Contains(p.replicas, b) {
			continue
		}
		if !found || s.byTopic[p.topic][b] < s.byTopic[p.topic][best] ||
			s.byTopic[p.topic][b] == s.byTopic[p.topic][best] && s.replicas[b] < s.replicas[best] {
			best, found = b, true
		}
	}
	return best, found
}

// even moves replicas and changes preferred leaders until no single
// change improves the balance, judged lexicographically: first the
// replicas, then the preferred leaderships. Each is measured as
//
//	K * (sum over topics and brokers of the topic's count squared)
//	  + (sum over brokers of the total count squared)
//
// so evening out a topic outweighs evening out the totals (K exceeds
// anything the second sum can gain in one move), and the totals are
// evened by moves that keep every topic as even. Without racks both
// reach a spread of one: a broker with two more replicas than another
// has more of some topic, and a partition of it the other lacks.
//
// Every change lowers the measure, so the loop ends; and it ends where
// no change lowers it, so planning again from the result plans nothing.
// Each round takes the change that lowers it most, so data moves only
// where the balance needs it. A round looks at every replica and every
// broker: O(partitions x replicas x brokers), and the rounds are about
// the number of moves.
func (s *state) even() {
	if len(s.eligible) < 2 {
		return
	}
	k := int64(2*s.total() + 3)
	for range s.total()*len(s.eligible) + len(s.parts) + 1 {
		best := change{}
		for i := range s.parts {
			p := &s.parts[i]
			for j, from := range p.replicas {
				if _, ok := s.racks[from]; !ok {
					continue // drained or not live: not the plan's to move
				}
				for _, to := range s.eligible {
					if slices.Contains(p.replicas, to) {
						if j == 0 {
							best = best.better(change{part: i, from: from, to: to, reorder: true, dLeaders: s.leaderDelta(k, p.topic, from, to)})
						}
						continue
					}
					c := change{part: i, from: from, to: to, dReplicas: delta(k, s.byTopic[p.topic], s.replicas, from, to)}
					if j == 0 {
						c.dLeaders = s.leaderDelta(k, p.topic, from, to)
					}
					// The rack check last: most candidates lose on the
					// measure already.
					if next := best.better(c); next != best && s.canMove(p, from, to) {
						best = next
					}
				}
			}
		}
		if !best.improves() {
			return
		}
		p := &s.parts[best.part]
		if best.reorder {
			i := slices.Index(p.replicas, best.to)
			p.replicas[0], p.replicas[i] = best.to, best.from
			s.leaders[best.from]--
			s.leaders[best.to]++
			s.leadersByTopic[p.topic][best.from]--
			s.leadersByTopic[p.topic][best.to]++
		} else {
			s.move(p, best.from, best.to)
		}
	}
}

// change is one candidate: part's replica on from goes to to (reorder:
// to, a replica already, becomes the first instead of from), changing
// the replica and leader measures by dReplicas and dLeaders.
type change struct {
	part                int
	from, to            int32
	reorder             bool
	dReplicas, dLeaders int64
	valid               bool
}

func (c change) improves() bool {
	return c.valid && (c.dReplicas < 0 || c.dReplicas == 0 && c.dLeaders < 0)
}

// better is the better of b and c: the larger fall in the replica
// measure, then in the leader one; the first found on a tie.
func (b change) better(c change) change {
	c.valid = true
	switch {
	case !c.improves():
		return b
	case !b.valid, c.dReplicas < b.dReplicas, c.dReplicas == b.dReplicas && c.dLeaders < b.dLeaders:
		return c
	}
	return b
}

// delta is how a measure changes when one count moves from from to to:
// the topic's counts weighted by k, then the totals.
func delta(k int64, topic, total map[int32]int, from, to int32) int64 {
	return k*2*int64(topic[to]-topic[from]+1) + 2*int64(total[to]-total[from]+1)
}

func (s *state) leaderDelta(k int64, topic string, from, to int32) int64 {
	return delta(k, s.leadersByTopic[topic], s.leaders, from, to)
}

// total is how many replicas the plan's partitions have.
func (s *state) total() int {
	n := 0
	for _, p := range s.parts {
		n += len(p.replicas)
	}
	return n
}
