package replica

import (
	"slices"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// The leader's view of its followers (Kafka's Replica state on the
// leader), for the high watermark and the ISR:
//
//   - A follower's fetch offset is what it holds: everything below it is
//     in its log and, under flush.policy=ack, fsynced (the follower
//     flushes before it sends its next fetch; see fetcher.go). So the
//     offset counts for the high watermark as it is, with no
//     acknowledgement of its own.
//   - Caught up (Kafka's rule, which keeps a follower in the ISR under a
//     producer that never pauses): a fetch at the leader's log end
//     catches the follower up now; a fetch at or past the log end the
//     leader had at the follower's previous fetch catches it up as of
//     that previous fetch. A follower not caught up within
//     replica.lag.time.max.ms is shrunk out of the ISR.
//   - The state belongs to one leadership term: it starts empty when
//     this node becomes leader, with every follower counted as caught up
//     at that moment (so none is shrunk before it could fetch), and
//     unknown for the high watermark until it fetches.
//
// Threads: fetch handlers update a follower's state under
// Partition.followers (lock order: Partition.mu, then
// Partition.followers, then Partition.wait); the ISR loop reads it
// under the same lock.

type followerState struct {
	// fetchOffset is the offset of the follower's last fetch, -1 before
	// its first in this term.
	fetchOffset int64
	// logStartOffset is the follower's log start offset as its last
	// fetch named it (-1: not named), for the choice of a consumer's
	// read replica (selector.go): its copy holds only what lies between
	// the two.
	logStartOffset int64
	lastFetch      time.Time
	// leaderEndAtLastFetch is the leader's log end offset at the last
	// fetch.
	leaderEndAtLastFetch int64
	lastCaughtUp         time.Time
	// brokerEpoch is the follower's broker epoch its last fetch named
	// (-1: none), which an ISR expansion sends the controller (KIP-903)
	// so a member that has since restarted is not let in on the
	// strength of what its previous process fetched.
	brokerEpoch int64
}

// followers is a Partition's per-follower state.
type followers struct {
	sync.Mutex
	// term is the leader epoch the state belongs to; -1 when this node
	// does not lead.
	term  int32
	since time.Time // when this node became leader in term
	m     map[int32]*followerState
	// refused is the latest expansion the controller refused in term,
	// nil when none.
	refused *refusedExpansion
}

// resetLocked starts a new term's state (or clears it, term -1).
// REQUIRES: f held.
func (f *followers) resetLocked(term int32, now time.Time) {
	f.term, f.since = term, now
	f.m = map[int32]*followerState{}
	f.refused = nil
}

// stateLocked returns id's state, creating it caught up as of the term's
// start.
// REQUIRES: f held.
func (f *followers) stateLocked(id int32) *followerState {
	s := f.m[id]
	if s == nil {
		s = &followerState{fetchOffset: -1, logStartOffset: -1, leaderEndAtLastFetch: -1, lastCaughtUp: f.since, brokerEpoch: -1}
		f.m[id] = s
	}
	return s
}

// followerFetch is one follower fetch of a partition as the leader
// records it.
type followerFetch struct {
	term        int32 // the leader epoch the fetch was checked against
	id          int32
	brokerEpoch int64
	offset      int64 // the fetch offset
	logStart    int64 // the follower's log start offset, -1: not named
	leaderEnd   int64 // the leader's log end offset at the fetch
}

// recordFetch notes a follower's fetch.
func (f *followers) recordFetch(ff followerFetch, now time.Time) {
	f.Lock()
	defer f.Unlock()
	if ff.term != f.term {
		return // leadership moved since the fetch was checked
	}
	s := f.stateLocked(ff.id)
	switch {
	case ff.offset >= ff.leaderEnd:
		s.lastCaughtUp = now
	case s.leaderEndAtLastFetch >= 0 && ff.offset >= s.leaderEndAtLastFetch:
		s.lastCaughtUp = s.lastFetch
	}
	s.fetchOffset, s.lastFetch, s.leaderEndAtLastFetch = ff.offset, now, ff.leaderEnd
	s.logStartOffset, s.brokerEpoch = ff.logStart, ff.brokerEpoch
}

// views returns what the leader knows of each of ids but self, for the
// choice of a consumer's read replica; a follower not heard from in this
// term has log end -1.
func (f *followers) views(ids []int32, self int32) []replicaView {
	f.Lock()
	defer f.Unlock()
	out := make([]replicaView, 0, len(ids))
	for _, id := range ids {
		if id == self {
			continue
		}
		v := replicaView{id: id, logEnd: -1, logStart: -1}
		if s := f.m[id]; s != nil {
			v.logEnd, v.logStart, v.lastCaughtUp = s.fetchOffset, s.logStartOffset, s.lastCaughtUp
		}
		out = append(out, v)
	}
	return out
}

// brokerEpochs returns the broker epoch each of ids last fetched with
// (-1 for this node and for one not heard from).
func (f *followers) brokerEpochs(self int32, selfEpoch int64, ids []int32) []int64 {
	f.Lock()
	defer f.Unlock()
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = -1
		if id == self {
			out[i] = selfEpoch
		} else if s := f.m[id]; s != nil {
			out[i] = s.brokerEpoch
		}
	}
	return out
}

// offset returns what the leader knows of id for the high watermark.
func (f *followers) offset(id int32) replicaOffset {
	f.Lock()
	defer f.Unlock()
	if s := f.m[id]; s != nil && s.fetchOffset >= 0 {
		return replicaOffset{nodeID: id, offset: s.fetchOffset, known: true}
	}
	return replicaOffset{nodeID: id}
}

// isrDecision is what the leader's ISR decision (isrChange) reads
// besides the followers' state.
type isrDecision struct {
	self      int32
	replicas  []int32
	isr       []int32
	hw        int64
	termStart int64 // the offset this leader's epoch began at
	lag       time.Duration
	now       time.Time
	// expand: a follower's fetch asks, and replicas outside the ISR may
	// be added; false for the ISR loop, which only shrinks (Kafka's
	// maybeShrinkIsr: only a fetch expands). A replica that stopped
	// fetching is never proposed on the strength of its last fetch.
	expand bool
	// brokers are the registered brokers of this node's latest image,
	// for isrEligible.
	brokers map[int32]metadata.Broker
	// image and partitionEpoch are what a refused expansion is matched
	// against (refusedExpansion).
	image          *metadata.Image
	partitionEpoch int32
}

// isrChange computes the ISR the leader should ask for: members that
// have not caught up within lag are dropped and, when d.expand,
// replicas outside the ISR are added that hold everything up to hw and
// up to the start of this term, have caught up within lag, are eligible
// in this leader's image (isrEligible) and were not just refused
// (refusedExpansion). It returns d.isr itself when nothing changes.
func (f *followers) isrChange(d isrDecision) []int32 {
	f.Lock()
	defer f.Unlock()
	next := make([]int32, 0, len(d.replicas))
	for _, id := range d.replicas {
		in := slices.Contains(d.isr, id)
		switch {
		case id == d.self:
			next = append(next, id)
		case in:
			if d.now.Sub(f.stateLocked(id).lastCaughtUp) <= d.lag {
				next = append(next, id)
			}
		case !d.expand:
		default:
			s := f.m[id]
			if s != nil && s.fetchOffset >= d.hw && s.fetchOffset >= d.termStart && d.now.Sub(s.lastCaughtUp) <= d.lag &&
				isrEligible(d.brokers, id, s.brokerEpoch) && !f.refused.holds(id, d) {
				next = append(next, id)
			}
		}
	}
	// Keep the replica order, as Kafka does; only membership matters.
	if sameMembers(next, d.isr) {
		return d.isr
	}
	return next
}

// isrEligible reports whether replica id may join the ISR in this
// leader's metadata view (KIP-841; Kafka's Partition.isReplicaIsrEligible):
// registered, not fenced, not in controlled shutdown, and fetching as
// the registration the image knows, or naming no broker epoch (KIP-903).
// The controller refuses any other with INELIGIBLE_REPLICA
// (controller/alter_partition.go), so proposing it only costs a request
// and a refusal; a follower that was killed is fenced within a session
// timeout, while its last fetch keeps it caught up for the whole lag
// time.
func isrEligible(brokers map[int32]metadata.Broker, id int32, fetchBrokerEpoch int64) bool {
	b, ok := brokers[id]
	return ok && b.Active() && (fetchBrokerEpoch == -1 || fetchBrokerEpoch == b.Epoch)
}

// refusedExpansion is an expansion the controller refused for what it
// asked (INELIGIBLE_REPLICA, INVALID_REQUEST). Its new members are not
// proposed again while nothing the refusal may rest on has moved: the
// leader's image (broker registrations, fencing), the partition epoch,
// the term (the followers' state is reset with it), and for at most
// refusedExpansionBackoff, in case the controller refused from a view
// older than the leader's and caught up without writing a record.
// Without it a live follower that the leader's image wrongly shows
// eligible (the image lags the controller's) would cost a refused
// AlterPartition on every one of its fetches, partition by partition.
type refusedExpansion struct {
	members        []int32 // the members the refused change added
	image          *metadata.Image
	partitionEpoch int32
	at             time.Time
}

// refusedExpansionBackoff bounds how long a refused expansion holds its
// members back while the leader's image and the partition stay as
// they were.
const refusedExpansionBackoff = 5 * time.Second

// holds reports whether r keeps id out of the expansion d decides.
// A nil r holds nothing.
func (r *refusedExpansion) holds(id int32, d isrDecision) bool {
	return r != nil && slices.Contains(r.members, id) && r.image == d.image &&
		r.partitionEpoch == d.partitionEpoch && d.now.Sub(r.at) < refusedExpansionBackoff
}

// noteRefused records that the expansion to members, decided in term
// against image and partitionEpoch, was refused at now.
func (f *followers) noteRefused(term int32, members []int32, image *metadata.Image, partitionEpoch int32, now time.Time) {
	f.Lock()
	defer f.Unlock()
	if term != f.term {
		return // leadership moved since: the new term starts afresh
	}
	f.refused = &refusedExpansion{members: members, image: image, partitionEpoch: partitionEpoch, at: now}
}

func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}
