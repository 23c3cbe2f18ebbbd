package controller

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Broker sessions, on the active controller: each broker heartbeats
// (BrokerHeartbeat) every DefaultBrokerHeartbeatInterval, and a broker
// heard from within the session timeout is live. Heartbeats stay in
// memory; the metadata log gets a record only when a broker's state
// changes (fence.go):
//
//   - A broker whose session lapses is fenced, with its ISR places and
//     leaderships moved in the same batch. One broker per check: when
//     several lapse together, the first fence's batch commits before the
//     next is decided, from the image that has it.
//   - A fenced broker that heartbeats and has applied the metadata log up
//     to its registration is unfenced (a registration starts fenced), and
//     elected where it is the last ISR member of a partition without a
//     leader.
//   - A controller that was itself slow does not fence for it: a check
//     that comes more than half a session after the previous one renews
//     every session instead (the heartbeats may be waiting in its own
//     queues), and a heartbeat counts when it is handled, however late.
//   - A new active controller counts every broker as heard at the moment
//     it took over (a fresh session each), since it cannot know what the
//     last one heard. But the broker of the previous active controller,
//     when this one has not heard from it in its term and Raft cannot
//     reach it either (a failed Raft heartbeat to that voter: the old
//     controller, killed with its broker, say), gets only a fifth of a
//     session from then, so failing over from a dead controller does
//     not cost a whole second session on top of the election. Only
//     that broker: a leader's lease (node/lease.go) may run for most of
//     a session after its last answered heartbeat, which, for any other
//     broker, the previous controller may have answered just before
//     this one took over; the previous controller's own broker ended
//     its lease when that controller stepped down, which Raft's leader
//     lease (125 ms) makes happen before a successor can win an
//     election (no sooner than 250 ms of silence).
//
// A heartbeat that asks to shut down (Kafka's WantShutDown) starts a
// controlled shutdown: the next check commits planControlledShutdown
// (fence.go), and the answers say ShouldShutDown once the broker leads
// nothing in the image and every other active broker has said, in a
// heartbeat, that it has applied that image too (or a second has
// passed: othersAppliedWait). A client that asks any
// live broker for metadata then learns the new leaders, before the
// stopped broker's connections break: without that wait a broker whose
// image lagged by a few hundred ms (one just restarted, on a loaded
// machine) kept naming the stopped one as leader, and Sarama spent its
// three default retries dialing it. Brokers heartbeat every 100 ms, so
// the wait costs about that; a broker that stops heartbeating is fenced
// after a session and then not waited for, and one that heartbeats from
// a stuck image is waited for a second at most, then named in a log
// line. The broker keeps
// heartbeating meanwhile, so its session, and its leases on what it
// still leads, run as before.
//
// A registration of a node id that is live under another incarnation is
// refused, DUPLICATE_BROKER_REGISTRATION, since two processes would then
// claim one broker (a second node started with a copy of the first's
// configuration, say).
//
// The defaults aim at failover within a second: a dead broker is fenced
// 0.75 s after its last heartbeat (give or take one check), which is
// seven heartbeats missed in a row, so a broker must stall for most of a
// second to be fenced while alive. (Kafka's are 2 s and 9 s.)
//
// Threads: heartbeat handlers update sessions under sessions.mu; one
// goroutine per active controller (runSessions) checks them and proposes
// the fences and unfences, under the active controller's proposeMu like
// every change.
const (
	DefaultBrokerHeartbeatInterval = 100 * time.Millisecond
	DefaultBrokerSessionTimeout    = 750 * time.Millisecond
)

// sessions is one active controller's view of broker liveness.
type sessions struct {
	mu    sync.Mutex
	since time.Time           // when this term's controller started
	heard map[int32]time.Time // last heartbeat (or registration) per broker
	// offsets is the metadata offset each broker's last heartbeat said
	// it had applied, epochs the broker epoch it named, and beats when
	// it came (heard also moves for registrations, takeovers and a
	// stalled controller; only a heartbeat unfences).
	offsets map[int32]uint64
	epochs  map[int32]int64
	beats   map[int32]time.Time
	// shutdowns holds, per broker that asked for a controlled shutdown,
	// the broker epoch it asked at (a later registration is a new
	// process, which has not).
	shutdowns map[int32]int64
	// ledNothing holds, per broker in controlled shutdown, the first
	// image offset in which it led nothing (at its broker epoch): what
	// the other brokers must have applied before it is told to stop.
	ledNothing map[int32]ledNothingAt
	// lastCheck is when the last check ran (the stall guard).
	lastCheck time.Time
	// kick asks runSessions to check now (a fenced broker caught up).
	kick chan struct{}
	// fencedAt is, per broker this term fenced (or found fenced at its
	// start), a metadata offset at or past the fence: a fenced broker is
	// unfenced only from an image that far along, which shows what the
	// fence moved away from it. Unfenced from an older one, a broker
	// cut off during its fence would take its lease again while its
	// image still made it the leader of partitions it had lost.
	fencedAt map[int32]uint64
	// predecessor is the node that was the active controller before
	// this term as far as this node saw (-1: none), the one broker
	// unreachable may shorten the session of.
	predecessor int32
}

func newSessions(now time.Time, predecessor int32) *sessions {
	return &sessions{since: now, lastCheck: now, predecessor: predecessor, heard: map[int32]time.Time{}, fencedAt: map[int32]uint64{},
		offsets: map[int32]uint64{}, epochs: map[int32]int64{}, beats: map[int32]time.Time{}, shutdowns: map[int32]int64{},
		ledNothing: map[int32]ledNothingAt{}, kick: make(chan struct{}, 1)}
}

// applied is the metadata offset broker id's last heartbeat of this
// term said it had applied, and when it came; ok is false before one.
func (s *sessions) applied(id int32) (offset uint64, at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok = s.beats[id]
	return s.offsets[id], at, ok
}

func (s *sessions) touch(id int32, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heard[id] = now
}

// heartbeat records a heartbeat, at now. It reports whether the
// heartbeat asks for a controlled shutdown this term has not heard asked
// for yet at its epoch (the caller kicks the check).
func (s *sessions) heartbeat(hb controlplane.Heartbeat, now time.Time) (newShutdown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := hb.NodeID
	s.heard[id], s.beats[id] = now, now
	s.offsets[id], s.epochs[id] = hb.MetadataOffset, hb.BrokerEpoch
	if hb.WantShutDown {
		if e, ok := s.shutdowns[id]; !ok || e != hb.BrokerEpoch {
			s.shutdowns[id] = hb.BrokerEpoch
			return true
		}
	}
	return false
}

type ledNothingAt struct {
	epoch  int64
	offset uint64
	since  time.Time
	// gaveUp: the wait ended at othersAppliedWait (logged once).
	gaveUp bool
}

// othersAppliedWait bounds how long a broker in controlled shutdown
// waits for the others to apply the image in which it leads nothing: a
// broker that heartbeats but whose image is stuck must not hold every
// shutdown up until the node's own bound (3 s) gives up on all of it.
const othersAppliedWait = time.Second

// othersApplied reports whether every active broker other than id, as
// its latest heartbeat at its current epoch says, has applied the first
// image in which broker id (in controlled shutdown, leading nothing in
// img) led nothing; or whether othersAppliedWait has passed since, in
// which case behind names the brokers still behind, the first time.
func (s *sessions) othersApplied(img *metadata.Image, id int32, now time.Time) (ok bool, behind []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.ledNothing[id]
	if epoch := img.Brokers[id].Epoch; !ok || at.epoch != epoch {
		at = ledNothingAt{epoch: epoch, offset: img.Offset, since: now}
		s.ledNothing[id] = at
	}
	for _, other := range img.BrokerIDs() {
		b := img.Brokers[other]
		if other == id || !b.Active() {
			continue // fenced, or on its way out too
		}
		switch {
		case s.epochs[other] != b.Epoch:
			behind = append(behind, fmt.Sprintf("%d (no heartbeat at epoch %d in this term)", other, b.Epoch))
		case s.offsets[other] < at.offset:
			behind = append(behind, fmt.Sprintf("%d (at offset %d of %d)", other, s.offsets[other], at.offset))
		}
	}
	switch {
	case len(behind) == 0:
		return true, nil
	case now.Sub(at.since) < othersAppliedWait:
		return false, nil
	case at.gaveUp:
		return true, nil
	}
	at.gaveUp = true
	s.ledNothing[id] = at
	return true, behind
}

// unreachable shortens the session of broker id, which Raft could not
// reach just now, to grace from now, when id is the previous active
// controller's node and has not been heard from in this term (then its
// own heartbeats decide). Any other broker keeps its whole session.
func (s *sessions) unreachable(id int32, now time.Time, timeout, grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, heard := s.heard[id]; heard || id != s.predecessor {
		return
	}
	s.heard[id] = now.Add(grace - timeout)
}

// watchPeers registers an observer of Raft's failed heartbeats to other
// voters and tells the active controller's sessions (unreachable), for
// as long as the controller is open.
func (c *Controller) watchPeers() {
	ch := make(chan raft.Observation, 16)
	c.peerObserver = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	c.raft.RegisterObserver(c.peerObserver)
	go func() {
		for {
			select {
			case o := <-ch:
				switch d := o.Data.(type) {
				case raft.LeaderObservation:
					id, err := strconv.ParseInt(string(d.LeaderID), 10, 32)
					if err != nil {
						id = -1 // no leader
					}
					c.sawLeader(int32(id))
				case raft.FailedHeartbeatObservation:
					id, err := strconv.ParseInt(string(d.PeerID), 10, 32)
					if a := c.active.Load(); a != nil && err == nil {
						a.sessions.unreachable(int32(id), c.clock.Now(), c.sessionTimeout(), c.sessionTimeout()/5)
					}
				}
			case <-c.closing:
				return
			}
		}
	}()
}

// unfenceOffset is the metadata offset a fenced broker's image must have
// reached to be unfenced: its registration, and any fence this term
// knows of (fencedAt).
func (s *sessions) unfenceOffset(id int32, b metadata.Broker) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unfenceOffsetLocked(id, b)
}

func (s *sessions) unfenceOffsetLocked(id int32, b metadata.Broker) uint64 {
	return max(uint64(b.Epoch), s.fencedAt[id])
}

// fenced records that broker id is fenced as of metadata offset.
func (s *sessions) fenced(id int32, offset uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fencedAt[id] = max(s.fencedAt[id], offset)
}

// lastBeat is when broker id last heartbeat in this term, or the term's
// start (what the failover histogram times from: unlike heard, not moved
// by a stalled controller's renewals or an unreachable shortening).
func (s *sessions) lastBeat(id int32) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.beats[id]; ok {
		return at
	}
	return s.since
}

// sawLeader records that Raft reports id as the leader (-1: none).
func (c *Controller) sawLeader(id int32) {
	c.leaders.Lock()
	defer c.leaders.Unlock()
	switch {
	case id < 0:
		c.leaders.lost = true
	case id != c.leaders.current || c.leaders.lost:
		c.leaders.previous, c.leaders.current, c.leaders.lost = c.leaders.current, id, false
	}
}

// predecessor is the active controller before this node's current term
// as far as this node saw: the leader before itself, or -1 when that was
// itself (it led the term before too, so no other broker's lease ended
// with a term of its own) or unknown.
func (c *Controller) predecessor() int32 {
	c.leaders.Lock()
	defer c.leaders.Unlock()
	prev := c.leaders.previous
	if c.leaders.current != c.cfg.NodeID {
		prev = c.leaders.current // its own election not observed yet
	}
	if prev == c.cfg.NodeID {
		return -1
	}
	return prev
}

// live reports whether broker id was heard from within timeout.
func (s *sessions) live(id int32, now time.Time, timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(id, now, timeout)
}

func (s *sessions) liveLocked(id int32, now time.Time, timeout time.Duration) bool {
	return now.Sub(s.lastHeardLocked(id)) < timeout
}

// lastHeardLocked is when broker id was last heard from in this term,
// or the term's start.
func (s *sessions) lastHeardLocked(id int32) time.Time {
	if last, ok := s.heard[id]; ok {
		return last
	}
	return s.since
}

// check returns the broker to fence (the one silent longest among the
// unfenced brokers whose session lapsed; -1 if none), the fenced
// brokers to unfence (live, heartbeating at their current epoch, caught
// up with the metadata log to their registration, not shutting down)
// and the brokers that asked for a controlled shutdown at their current
// epoch and are not in one (nor fenced), as of now. A check more than
// half a session after the previous one renews every session instead of
// fencing (see the file comment).
func (s *sessions) check(img *metadata.Image, now time.Time, timeout time.Duration) (fence int32, unfence, shutdown []int32, stalled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fence = -1
	if now.Sub(s.lastCheck) > timeout/2 {
		// Renewed, not heard: a fenced broker stays fenced until it
		// heartbeats itself.
		for _, id := range img.BrokerIDs() {
			if !img.Brokers[id].Fenced {
				s.heard[id] = now
			}
		}
		stalled = true
	}
	s.lastCheck = now
	var oldest time.Time
	for _, id := range img.BrokerIDs() {
		b := img.Brokers[id]
		live := s.liveLocked(id, now, timeout)
		switch {
		case !b.Fenced && !live:
			if last := s.lastHeardLocked(id); fence == -1 || last.Before(oldest) {
				fence, oldest = id, last
			}
		case b.Fenced && !b.ShuttingDown && now.Sub(s.beats[id]) < timeout && s.epochs[id] == b.Epoch && s.offsets[id] >= s.unfenceOffsetLocked(id, b):
			unfence = append(unfence, id)
		}
		if e, ok := s.shutdowns[id]; ok && e == b.Epoch && !b.Fenced && !b.ShuttingDown {
			shutdown = append(shutdown, id)
		}
	}
	return fence, unfence, shutdown, stalled
}

// runSessions checks the sessions every twentieth of a session (and when kicked)
// for as long as a is the active controller, and commits what check
// decides.
func (c *Controller) runSessions(a *activeController) {
	interval := max(c.sessionTimeout()/20, 10*time.Millisecond)
	rebalanceEvery := c.cfg.LeaderImbalanceCheckInterval
	rebalanceAt := c.clock.Now().Add(rebalanceEvery)
	for {
		t := c.clock.AfterFunc(interval, func() {
			select {
			case a.sessions.kick <- struct{}{}:
			default:
			}
		})
		select {
		case <-a.sessions.kick:
		case <-a.lost:
			t.Stop()
			return
		case <-c.closing:
			t.Stop()
			return
		}
		t.Stop()
		if c.fsm.applied.Load().MetadataVersion < metadata.FencingMetadataVersion {
			continue // the log cannot say fenced yet (commitClusterID raises it)
		}
		fence, unfence, shutdown, stalled := a.sessions.check(c.fsm.applied.Load(), c.clock.Now(), c.sessionTimeout())
		if stalled {
			c.log.Warn("the active controller was not scheduled for over half a broker session; counting every session as renewed",
				"session_timeout", c.sessionTimeout())
		}
		for _, id := range unfence {
			c.changeBroker(a, id, planUnfence, "broker unfenced")
		}
		for _, id := range shutdown {
			c.changeBroker(a, id, planControlledShutdown, "broker in controlled shutdown: its leaderships and ISR places moved")
		}
		if fence >= 0 {
			lastHeard := a.sessions.lastBeat(fence)
			if c.changeBroker(a, fence, planFence, "broker fenced: its session lapsed") {
				c.failovers.observe(c.clock.Now().Sub(lastHeard))
				a.sessions.fenced(fence, c.fsm.applied.Load().Offset)
			}
		}
		c.maybeElectUnclean(a, c.fsm.applied.Load())
		if c.fsm.applied.Load().Reassignments > 0 {
			c.completeReassignments(a)
		}
		if now := c.clock.Now(); rebalanceEvery > 0 && !now.Before(rebalanceAt) {
			rebalanceAt = now.Add(rebalanceEvery)
			if c.rebalanceLeaders(a) {
				rebalanceAt = now // a full batch: the rest at the next check
			}
		}
	}
}

// changeBroker commits plan(image, id), planned against the image of
// the moment under proposeMu; nothing when the plan is empty (the state
// changed meanwhile). It reports whether it committed a change.
func (c *Controller) changeBroker(a *activeController, id int32, plan func(*metadata.Image, int32) []metadata.Record, what string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.sessionTimeout())
	defer cancel()
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		return false // not the controller any more, or closing
	}
	recs := plan(img, id)
	if len(recs) == 0 {
		return false
	}
	start := c.clock.Now()
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		c.log.Warn("could not commit a broker's new state", "broker", id, "change", what, "err", err)
		return false
	}
	switch recs[0].(type) {
	case metadata.FenceBrokerRecord:
		c.stats.fencings.Add(1)
	case metadata.UnfenceBrokerRecord:
		c.stats.unfencings.Add(1)
	case metadata.ControlledShutdownRecord:
		c.stats.controlledShutdowns.Add(1)
	}
	elected, offline := c.countElections(img, recs)
	logAt := c.log.Info
	if _, fence := recs[0].(metadata.FenceBrokerRecord); fence {
		logAt = c.log.Warn // a broker went silent: an operator wants to see it
	}
	logAt(what, "broker", id, "broker_epoch", img.Brokers[id].Epoch, "partitions_changed", len(recs)-1,
		"leaders_elected", elected, "partitions_without_leader", offline, "commit_time", c.clock.Now().Sub(start))
	return true
}

// BrokerHeartbeat renews a broker's session. Its broker epoch must be
// its current registration's (STALE_BROKER_EPOCH: a process since
// replaced); an unregistered broker is BROKER_ID_NOT_REGISTERED.
//
// hb.MetadataOffset is the metadata offset the broker has applied: a
// fenced broker is unfenced once it has reached its own registration.
// hb.WantShutDown starts a controlled shutdown; the answer says
// ShouldShutDown once the broker leads nothing and the other brokers
// know it (or once it is fenced).
func (c *Controller) BrokerHeartbeat(ctx context.Context, hb controlplane.Heartbeat) (controlplane.HeartbeatAnswer, error) {
	a := c.active.Load()
	if a == nil {
		return controlplane.HeartbeatAnswer{}, c.notController()
	}
	img := c.fsm.applied.Load()
	b, ok := img.Brokers[hb.NodeID]
	switch {
	case !ok:
		return controlplane.HeartbeatAnswer{}, fmt.Errorf("%w: broker %d", controlplane.ErrBrokerNotRegistered, hb.NodeID)
	case b.Epoch != hb.BrokerEpoch:
		return controlplane.HeartbeatAnswer{}, fmt.Errorf("%w: broker %d heartbeats with epoch %d, its registration's is %d",
			controlplane.ErrStaleBrokerEpoch, hb.NodeID, hb.BrokerEpoch, b.Epoch)
	}
	kick := a.sessions.heartbeat(hb, c.clock.Now())
	var ans controlplane.HeartbeatAnswer
	if hb.WantShutDown {
		ans.ShouldShutDown = b.Fenced
		if !b.Fenced && b.ShuttingDown && !leadsAny(img, hb.NodeID) {
			ok, behind := a.sessions.othersApplied(img, hb.NodeID, c.clock.Now())
			if behind != nil {
				c.log.Warn("controlled shutdown: letting the broker stop before every other broker has applied the image in which it leads nothing",
					"broker", hb.NodeID, "waited", othersAppliedWait, "behind", behind)
			}
			ans.ShouldShutDown = ok
		}
	}
	var err error
	if b.Fenced {
		// Unfence it now rather than at the next check.
		kick = kick || hb.MetadataOffset >= a.sessions.unfenceOffset(hb.NodeID, b)
		err = controlplane.ErrBrokerFenced
	}
	if kick {
		select {
		case a.sessions.kick <- struct{}{}:
		default:
		}
	}
	return ans, err
}

// checkDuplicateLocked refuses b when its node id is registered by
// another incarnation that is still live.
// REQUIRES: a.proposeMu held.
func (c *Controller) checkDuplicateLocked(a *activeController, img *metadata.Image, b metadata.BrokerRecord) error {
	old, ok := img.Brokers[b.NodeID]
	if !ok || old.IncarnationID.IsZero() || old.IncarnationID == b.IncarnationID {
		return nil
	}
	if a.sessions.live(b.NodeID, c.clock.Now(), c.sessionTimeout()) {
		return fmt.Errorf("%w: broker %d is registered by a live process (incarnation %s); "+
			"a second process with the same node id is refused until that one has been silent for %v",
			controlplane.ErrDuplicateBrokerRegistration, b.NodeID, old.IncarnationID, c.sessionTimeout())
	}
	return nil
}

func (c *Controller) sessionTimeout() time.Duration {
	return orDefault(c.cfg.BrokerSessionTimeout, DefaultBrokerSessionTimeout)
}
