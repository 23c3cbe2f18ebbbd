package replica

import (
	"slices"
	"sync"
	"time"
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
}

// resetLocked starts a new term's state (or clears it, term -1).
// REQUIRES: f held.
func (f *followers) resetLocked(term int32, now time.Time) {
	f.term, f.since = term, now
	f.m = map[int32]*followerState{}
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

// isrChange computes the ISR the leader should ask for: members that
// have not caught up within lag are dropped, replicas outside the ISR
// that hold everything up to hw and up to the start of this term
// (termStart) are added. It returns isr itself when nothing changes.
func (f *followers) isrChange(self int32, replicas, isr []int32, hw, termStart int64, lag time.Duration, now time.Time) []int32 {
	f.Lock()
	defer f.Unlock()
	next := make([]int32, 0, len(replicas))
	for _, id := range replicas {
		in := slices.Contains(isr, id)
		switch {
		case id == self:
			next = append(next, id)
		case in:
			if now.Sub(f.stateLocked(id).lastCaughtUp) <= lag {
				next = append(next, id)
			}
		default:
			s := f.m[id]
			if s != nil && s.fetchOffset >= hw && s.fetchOffset >= termStart && now.Sub(s.lastCaughtUp) <= lag {
				next = append(next, id)
			}
		}
	}
	// Keep the replica order, as Kafka does; only membership matters.
	if sameMembers(next, isr) {
		return isr
	}
	return next
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
