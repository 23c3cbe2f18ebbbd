package node

import (
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
)

// lease is this broker's right to answer clients as a partition leader:
// to append produced records and to serve consumers' fetches, offset
// lookups and record deletions. It bounds how long a leader cut off from
// the active controller keeps doing so after the controller may have
// fenced it and elected a successor (issue 14's fencing bound).
//
// The rule: the lease runs for duration (four fifths of a session) from
// the send time of the last heartbeat the active controller answered.
// The controller fences a broker no sooner than a whole session after it
// last heard it, and that heartbeat arrived after it was sent, so with
// clocks that run at close rates the lease ends before any successor can
// be elected; the fifth left over absorbs rate differences and the
// check's granularity. A new active controller gives every broker a
// fresh session from its takeover, which comes after any heartbeat the
// old one answered (the old one steps down within Raft's 125 ms leader
// lease of losing its quorum, before a successor can win an election
// after 250 ms of silence). The one broker a new controller fences
// sooner, a fifth of a session after Raft reports it unreachable, is the
// previous controller's own (controller/sessions.go): so a lease granted
// by this node's own active controller ends the moment that controller
// stops being active.
//
// Follower fetches are served without a lease: a follower only copies,
// and it checks the leader epoch itself. Acks=all writes would be safe
// without one (the high watermark needs every ISR member), but an
// isolated leader refuses them too rather than append records it will
// cut.
//
// A cluster of one voter has no one who could replace its leaders, so
// the lease is not enforced there (always held), and a stalled single
// node does not refuse its clients.
type lease struct {
	clock    clock.Clock
	base     time.Time // Durations are since base, on the clock's monotonic reading.
	duration time.Duration
	// activeTerm is the local controller's active term (0: not active).
	activeTerm func() uint64
	enforced   bool
	grant      atomic.Pointer[leaseGrant]
}

// leaseGrant is one answered heartbeat.
type leaseGrant struct {
	sent time.Duration // since lease.base
	// term is nonzero when this node's own active controller may have
	// answered, in that term: the grant ends with the term.
	term uint64
}

func newLease(clk clock.Clock, duration time.Duration, activeTerm func() uint64, enforced bool) *lease {
	return &lease{clock: clk, base: clk.Now(), duration: duration, activeTerm: activeTerm, enforced: enforced}
}

// now is the lease clock's reading.
func (l *lease) now() time.Duration { return l.clock.Now().Sub(l.base) }

// renew records that a heartbeat sent at sent was answered by the active
// controller. termBefore and termAfter are the local controller's active
// term read just before the heartbeat was sent and just after its answer:
// when either is nonzero the answer may have come from this node, and the
// grant ends when that term does (the later one if both).
func (l *lease) renew(sent time.Duration, termBefore, termAfter uint64) {
	g := &leaseGrant{sent: sent, term: termAfter}
	if g.term == 0 {
		g.term = termBefore
	}
	l.grant.Store(g)
}

// Held reports whether this node may answer clients as a leader now.
func (l *lease) Held() bool {
	if !l.enforced {
		return true
	}
	g := l.grant.Load()
	if g == nil || l.now()-g.sent >= l.duration {
		return false
	}
	return g.term == 0 || l.activeTerm() == g.term
}

// Remaining is how long the lease still runs (0 when lapsed), for logs.
func (l *lease) Remaining() time.Duration {
	if !l.Held() {
		return 0
	}
	g := l.grant.Load() // may be a newer grant than Held saw: a log line's worth
	if g == nil {
		return 0 // not enforced
	}
	return max(0, g.sent+l.duration-l.now())
}
