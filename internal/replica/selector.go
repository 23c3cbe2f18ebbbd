package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Follower fetching (KIP-392). A consumer's Fetch from v11 on carries
// client metadata (its rack, client.rack, possibly empty), and with it:
//
//   - The leader may name a preferred read replica instead of answering
//     with records: with SelectRack, an ISR member on a broker in the
//     client's rack that is in service and holds the fetch offset, as
//     far as the leader knows from that follower's last fetch (its log
//     end at least the fetch offset, its log start at most). None such,
//     or the leader itself in the client's rack: -1, and the leader
//     answers with records. Kafka answers a named replica with no
//     records and at once (no long poll); so does Fjord.
//   - Any replica answers a consumer from its own copy, below its own
//     high watermark, with the leader epoch fenced as on the leader
//     (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). A fetch offset
//     between its high watermark and its log end is answered with no
//     records (a long poll until its high watermark moves), one past
//     its log end or below its log start OFFSET_OUT_OF_RANGE: Kafka's
//     ReplicaManager does the same (KIP-392 proposed OFFSET_NOT_AVAILABLE
//     for some of these cases; Kafka never built it). The client goes
//     back to the leader on that error.
//   - One rule Kafka has not: a replica that is not in the partition's
//     ISR, as its own image has it, answers consumers
//     NOT_LEADER_OR_FOLLOWER. Kafka's follower serves whatever its high
//     watermark allows, in the ISR or not, and a consumer stays on a
//     replica that has fallen behind until its next recheck of the
//     leader (franz-go's RecheckPreferredReplicaInterval, 30 minutes by
//     default). Refusing sends Kafka's Java client back to the leader at
//     once, which then names someone else.
//
// Fetches older than v11, and those of followers, read from the leader
// only, as Kafka's (fetchOnlyFromLeader). ListOffsets stays leader-only
// too (KIP-392 describes ListOffsets on followers; Kafka never built it).

// ReplicaSelector is replica.selector.class: how a leader picks the
// replica a consumer reads a partition from.
type ReplicaSelector int8

const (
	// SelectLeader: every consumer reads from the leader (Kafka with no
	// replica.selector.class; its LeaderSelector).
	SelectLeader ReplicaSelector = iota
	// SelectRack is Kafka's RackAwareReplicaSelector: a consumer reads
	// from an in-sync replica in its own rack when the leader is not
	// there.
	SelectRack
)

// ParseReplicaSelector reads the --replica-selector setting: leader (or
// empty) or rack.
func ParseReplicaSelector(s string) (ReplicaSelector, error) {
	switch s {
	case "", "leader":
		return SelectLeader, nil
	case "rack":
		return SelectRack, nil
	}
	return SelectLeader, fmt.Errorf("replica-selector %q: allowed: leader, rack", s)
}

func (s ReplicaSelector) String() string {
	if s == SelectRack {
		return "rack"
	}
	return "leader"
}

// ClientMetadata is what a consumer's fetch says of where it runs
// (Kafka's ClientMetadata). Fetch v11+ has it, even with no rack.
type ClientMetadata struct {
	// RackID is the client's client.rack, as sent: any bytes, never
	// logged or echoed, only compared with the brokers' racks. Empty:
	// the client did not say.
	RackID string
}

// replicaView is one follower as its leader knows it from that
// follower's fetches in the leader's current term.
type replicaView struct {
	id int32
	// logEnd is the follower's last fetch offset, -1 before its first
	// fetch of the term; logStart is the log start offset that fetch
	// named, -1 when it named none (Fetch v4, or an older Fjord).
	logEnd, logStart int64
	lastCaughtUp     time.Time
}

// readReplicaChoice is what the leader's choice of a consumer's read
// replica depends on: pure data, for chooseReadReplica.
type readReplicaChoice struct {
	selector   ReplicaSelector
	clientRack string
	leader     int32
	isr        []int32
	brokers    map[int32]metadata.Broker // the image's
	followers  []replicaView
	// fetchOffset is the consumer's, already known to be inside the
	// leader's log.
	fetchOffset int64
}

// chooseReadReplica returns the replica a consumer should read from
// instead of the leader, or -1 for the leader (Kafka's
// RackAwareReplicaSelector, then ReplicaManager's rule that the leader is
// never named). A candidate is an ISR member other than the leader, on
// a broker in the client's rack that is Active (neither fenced nor in
// controlled shutdown: it may stop answering any moment), whose copy
// holds the fetch offset. Among several, as Kafka: the one whose log
// reaches furthest, then the one caught up most recently; then, where
// Kafka's choice is the hash set's order, the lowest id, so the answer
// depends on nothing but the state.
func chooseReadReplica(c readReplicaChoice) int32 {
	if c.selector != SelectRack || c.clientRack == "" {
		return -1
	}
	if b, ok := c.brokers[c.leader]; ok && b.Rack == c.clientRack {
		return -1 // read here: the leader is as close as any replica
	}
	best := -1
	for i, v := range c.followers {
		if !c.candidate(v) {
			continue
		}
		if best < 0 || moreCaughtUp(v, c.followers[best]) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return c.followers[best].id
}

func (c readReplicaChoice) candidate(v replicaView) bool {
	if v.id == c.leader || !slices.Contains(c.isr, v.id) {
		return false
	}
	b, ok := c.brokers[v.id]
	if !ok || !b.Active() || b.Rack != c.clientRack {
		return false
	}
	return v.logEnd >= c.fetchOffset && v.logStart <= c.fetchOffset
}

// moreCaughtUp orders candidates as Kafka's ReplicaView comparator
// does (log end, then the most recent catch-up), with the id last.
func moreCaughtUp(a, b replicaView) bool {
	switch {
	case a.logEnd != b.logEnd:
		return a.logEnd > b.logEnd
	case !a.lastCaughtUp.Equal(b.lastCaughtUp):
		return a.lastCaughtUp.After(b.lastCaughtUp)
	}
	return a.id < b.id
}

// preferredReadReplica is chooseReadReplica for a consumer's fetch of p,
// which this node leads, at fetchOffset: -1 to read here.
func (p *Partition) preferredReadReplica(client *ClientMetadata, fetchOffset int64) int32 {
	if client == nil || client.RackID == "" || p.m.opts.ReplicaSelector != SelectRack {
		return -1 // the common case costs no lock
	}
	if fetchOffset < p.log.LogStartOffset() || fetchOffset > p.log.LogEndOffset() {
		// Out of range here: the leader answers the error, and the
		// client resets from what the leader says.
		return -1
	}
	img := p.m.image.Load()
	if img == nil {
		return -1
	}
	p.mu.RLock()
	// ApplyImage replaces these slices, never writes into them.
	isr, replicas := p.mu.isr, p.mu.replicas
	p.mu.RUnlock()
	return chooseReadReplica(readReplicaChoice{
		selector:    p.m.opts.ReplicaSelector,
		clientRack:  client.RackID,
		leader:      p.m.opts.NodeID,
		isr:         isr,
		brokers:     img.Brokers,
		followers:   p.followers.views(replicas, p.m.opts.NodeID),
		fetchOffset: fetchOffset,
	})
}
