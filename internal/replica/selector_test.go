package replica

import (
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// The leader's choice of a consumer's read replica, one rule of Kafka's
// RackAwareReplicaSelector and ReplicaManager.findPreferredReadReplica a
// case. Reference: KIP-392.
func TestChooseReadReplica(t *testing.T) {
	t0 := time.Unix(1000, 0)
	racks := map[int32]metadata.Broker{
		1: {NodeID: 1, Rack: "a"},
		2: {NodeID: 2, Rack: "b"},
		3: {NodeID: 3, Rack: "c"},
		4: {NodeID: 4, Rack: "b"},
	}
	with := func(id int32, change func(*metadata.Broker)) map[int32]metadata.Broker {
		out := map[int32]metadata.Broker{}
		for k, v := range racks {
			out[k] = v
		}
		b := out[id]
		change(&b)
		out[id] = b
		return out
	}
	caughtUp := func(id int32) replicaView {
		return replicaView{id: id, logEnd: 100, logStart: 0, lastCaughtUp: t0}
	}
	base := readReplicaChoice{
		selector: SelectRack, clientRack: "b", leader: 1, isr: []int32{1, 2, 3},
		brokers: racks, followers: []replicaView{caughtUp(2), caughtUp(3)}, fetchOffset: 50,
	}
	for _, tc := range []struct {
		name   string
		change func(*readReplicaChoice)
		want   int32
	}{
		{"the in-sync replica in the client's rack", nil, 2},
		{"another rack", func(c *readReplicaChoice) { c.clientRack = "c" }, 3},
		{"selector leader", func(c *readReplicaChoice) { c.selector = SelectLeader }, -1},
		{"no client rack", func(c *readReplicaChoice) { c.clientRack = "" }, -1},
		{"a rack no broker is in", func(c *readReplicaChoice) { c.clientRack = "z" }, -1},
		{"rack names are not folded", func(c *readReplicaChoice) { c.clientRack = "B" }, -1},
		{"the leader is in the client's rack", func(c *readReplicaChoice) { c.clientRack = "a" }, -1},
		{"the leader in the client's rack beats an in-sync follower there", func(c *readReplicaChoice) {
			c.brokers = with(1, func(b *metadata.Broker) { b.Rack = "b" })
		}, -1},
		{"not in the ISR", func(c *readReplicaChoice) { c.isr = []int32{1, 3} }, -1},
		{"fenced", func(c *readReplicaChoice) { c.brokers = with(2, func(b *metadata.Broker) { b.Fenced = true }) }, -1},
		{"in controlled shutdown", func(c *readReplicaChoice) {
			c.brokers = with(2, func(b *metadata.Broker) { b.ShuttingDown = true })
		}, -1},
		{"not registered", func(c *readReplicaChoice) { c.brokers = map[int32]metadata.Broker{1: racks[1], 3: racks[3]} }, -1},
		{"its copy ends before the fetch offset", func(c *readReplicaChoice) {
			c.followers = []replicaView{{id: 2, logEnd: 49, lastCaughtUp: t0}, caughtUp(3)}
		}, -1},
		{"its copy ends at the fetch offset", func(c *readReplicaChoice) {
			c.followers = []replicaView{{id: 2, logEnd: 50, lastCaughtUp: t0}, caughtUp(3)}
		}, 2},
		{"not fetched in this term", func(c *readReplicaChoice) {
			c.followers = []replicaView{{id: 2, logEnd: -1, logStart: -1}, caughtUp(3)}
		}, -1},
		{"not fetched in this term, at offset 0", func(c *readReplicaChoice) {
			c.fetchOffset = 0
			c.followers = []replicaView{{id: 2, logEnd: -1, logStart: -1}, caughtUp(3)}
		}, -1},
		{"its copy starts after the fetch offset", func(c *readReplicaChoice) {
			c.followers = []replicaView{{id: 2, logEnd: 100, logStart: 51, lastCaughtUp: t0}, caughtUp(3)}
		}, -1},
		{"its log start unknown", func(c *readReplicaChoice) {
			c.followers = []replicaView{{id: 2, logEnd: 100, logStart: -1, lastCaughtUp: t0}, caughtUp(3)}
		}, 2},
		{"the leader is never named, whatever the follower list says", func(c *readReplicaChoice) {
			c.brokers = with(1, func(b *metadata.Broker) { b.Rack = "x" })
			c.clientRack = "x"
			c.followers = []replicaView{caughtUp(1), caughtUp(2)}
		}, -1},
		{"of two in the rack, the one whose log reaches furthest", func(c *readReplicaChoice) {
			c.isr = []int32{1, 2, 3, 4}
			c.followers = []replicaView{{id: 2, logEnd: 90, lastCaughtUp: t0}, {id: 4, logEnd: 95, lastCaughtUp: t0}}
		}, 4},
		{"of two as far, the one caught up last", func(c *readReplicaChoice) {
			c.isr = []int32{1, 2, 3, 4}
			c.followers = []replicaView{{id: 2, logEnd: 95, lastCaughtUp: t0.Add(time.Second)}, {id: 4, logEnd: 95, lastCaughtUp: t0}}
		}, 2},
		{"of two alike, the lower id, in either order", func(c *readReplicaChoice) {
			c.isr = []int32{1, 2, 3, 4}
			c.followers = []replicaView{caughtUp(4), caughtUp(2)}
		}, 2},
		{"the one in the rack that qualifies", func(c *readReplicaChoice) {
			c.isr = []int32{1, 3, 4}
			c.followers = []replicaView{caughtUp(2), caughtUp(4)}
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			if tc.change != nil {
				tc.change(&c)
			}
			if got := chooseReadReplica(c); got != tc.want {
				t.Fatalf("chose %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseReplicaSelector(t *testing.T) {
	for in, want := range map[string]ReplicaSelector{"": SelectLeader, "leader": SelectLeader, "rack": SelectRack} {
		if got, err := ParseReplicaSelector(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"Rack", " rack", "closest", "org.apache.kafka.common.replica.RackAwareReplicaSelector"} {
		if _, err := ParseReplicaSelector(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
