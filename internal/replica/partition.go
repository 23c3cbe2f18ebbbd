package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// Partition is one partition this node is a replica of: its log and its
// replication state as the latest metadata image gives it, plus the high
// watermark rule and the requests waiting on it.
//
// A Partition lives as long as its topic id: a topic deleted and
// re-created under the same name gets a new Partition (and a new log).
type Partition struct {
	m         *Manager
	topic     string
	partition int32
	topicID   metadata.UUID
	log       *storage.Log
	// internal: the topic is one of Fjord's or Kafka's own
	// (metadata.IsInternalTopic), whose writes disk pressure never
	// refuses (diskpressure.go).
	internal bool

	// mu is Kafka's leaderIsrUpdateLock. Appenders hold it shared across
	// Log.Append, so a batch is never stamped with a leader epoch that
	// ApplyImage has already replaced; ApplyImage holds it exclusively to
	// change leadership, ISR and configs, and to retire the partition.
	mu struct {
		sync.RWMutex
		leader      int32
		leaderEpoch int32 // Invariant: only grows.
		// partitionEpoch moves on with every change of replicas, ISR or
		// leader: AlterPartition names it so the controller refuses a
		// change computed from a state it has since replaced.
		partitionEpoch int32
		replicas       []int32
		isr            []int32
		// throttled: a reassignment is adding this node's replica, so
		// its follower fetches draw on the reassignment throttle.
		throttled bool
		minInsync int
		// migratedTo is the topic's fjord.migrated.to: non-empty once a
		// migration has cut over, and then client produces are refused
		// (ErrTopicMigrated). It changes under the write lock and
		// appends check it under the read lock, so once it is set no
		// client append is left in flight: the log end is final.
		migratedTo string
		// epochStart is this node's log end when it became leader in
		// leaderEpoch (recorded in the log's epoch history then, as
		// Kafka does); -1 while it does not lead.
		epochStart int64
		// gone is nil while the partition is live; once its topic is
		// deleted (or the manager closed) it is the error every request
		// gets, and it never goes back to nil.
		gone error
	}

	// wait holds the requests parked on this partition (delayed fetches
	// and acks=all produces) and serializes high-watermark advances, so
	// that a waiter registered before it re-checks its condition cannot
	// miss the advance that satisfies it.
	wait struct {
		sync.Mutex
		waiters map[*waiter]struct{}
	}
	// logEndWaiters counts registered waiters that want every append,
	// not only high-watermark moves (IsolationLogEnd fetches), so an
	// append takes wait's lock only when one exists.
	logEndWaiters atomic.Int32
	// keyedSeen: a leader append to this partition wrote a keyed record
	// and Options.KeyedAppend was told (noteKeyed). Never reset.
	keyedSeen atomic.Bool
	// offlineNoted: the log failed and takeOffline has run (offline.go).
	// Never reset: the log stays failed for the process's life.
	offlineNoted atomic.Bool

	// followers is the leader's view of its followers in its current
	// term (followers.go).
	followers followers
	// isrPending is the ISR change decided and not yet settled (isr.go),
	// nil when none: one per partition at a time. The high watermark
	// counts its added members at once (KIP-497's maximal ISR: a write
	// is not committed before a member that may have joined has it) and
	// its dropped ones until the shrink is committed.
	isrPending atomic.Pointer[pendingISR]

	// asyncFlush drives the fsync of acks=0 appends under
	// flush.policy=ack: nobody waits for them, but the high watermark
	// only passes flushed offsets, so something must flush them.
	asyncFlush struct {
		target  atomic.Int64 // flush every offset below this
		running atomic.Bool  // a flusher goroutine owns the work
	}
}

// waiter is one parked request. A notification means "something this
// request may be waiting for changed; look again", never "done".
type waiter struct {
	ch     chan struct{} // capacity 1: notifications while one is pending merge into it
	logEnd bool          // wake on appends too, not only high-watermark moves
}

func newWaiter(logEnd bool) *waiter {
	return &waiter{ch: make(chan struct{}, 1), logEnd: logEnd}
}

func (w *waiter) notify() {
	select {
	case w.ch <- struct{}{}:
	default: // one is pending already
	}
}

func newPartition(m *Manager, tp storage.TopicPartition, topicID metadata.UUID, log *storage.Log) *Partition {
	p := &Partition{m: m, topic: tp.Topic, partition: tp.Partition, topicID: topicID, log: log,
		internal: metadata.IsInternalTopic(tp.Topic)}
	p.mu.leader = -1
	p.mu.leaderEpoch = -1
	p.mu.epochStart = -1
	p.mu.minInsync = defaultMinInsync
	p.wait.waiters = map[*waiter]struct{}{}
	p.followers.resetLocked(-1, time.Time{})
	return p
}

func (p *Partition) String() string { return fmt.Sprintf("%s-%d", p.topic, p.partition) }

// Log returns the partition's log.
func (p *Partition) Log() *storage.Log { return p.log }

// checkLeaderEpoch is the leader epoch fence (KIP-320): a request that
// names an epoch older than the partition's comes from a client with
// stale metadata (FENCED_LEADER_EPOCH), one that names a newer epoch
// reached this node before its metadata did (UNKNOWN_LEADER_EPOCH); both
// refresh metadata and retry. -1 (any negative) means the client did not
// say, and passes.
func checkLeaderEpoch(current, requested int32) error {
	switch {
	case requested < 0 || requested == current:
		return nil
	case requested < current:
		return fmt.Errorf("%w: request has epoch %d, partition is at %d", ErrFencedLeaderEpoch, requested, current)
	default:
		return fmt.Errorf("%w: request has epoch %d, partition is at %d", ErrUnknownLeaderEpoch, requested, current)
	}
}

// replicaOffset is what the leader knows of one replica for the high
// watermark: the offset below which it holds the leader's log and, under
// flush.policy=ack, has fsynced it. known is false for a follower the
// leader has not heard from in its current term.
type replicaOffset struct {
	nodeID int32
	offset int64
	known  bool
}

// highWatermark returns the offset every in-sync replica has reached: the
// smallest offset among the leader and the ISR followers, or current if
// that is larger (the high watermark never moves back; a policy switch
// from interval to ack leaves it above the flushed offset until the flush
// catches up) or if some ISR follower's offset is unknown.
//
// Invariant: result >= current, and result <= leader.offset whenever
// result > current.
func highWatermark(current int64, leader replicaOffset, followers []replicaOffset) int64 {
	hw := leader.offset
	for _, f := range followers {
		if !f.known {
			return current
		}
		hw = min(hw, f.offset)
	}
	return max(hw, current)
}

// leaderOffset is this node's own entry in the high-watermark rule: only
// fsynced offsets count under flush.policy=ack, every appended one under
// interval (whose durability comes from replication).
func (p *Partition) leaderOffset() replicaOffset {
	off := p.log.LogEndOffset()
	if p.log.Config().FlushPolicy == storage.FlushAck {
		off = p.log.RecoveryPoint()
	}
	return replicaOffset{nodeID: p.m.opts.NodeID, offset: off, known: true}
}

// followerOffsetsLocked returns the high-watermark entries of the ISR
// members other than this node, with the members an AlterPartition in
// flight adds (maximal ISR). A member that has not fetched in this term
// is unknown, which holds the high watermark where it is: its copy is
// unconfirmed.
// pending is the unsettled change to count (p.isrPending, read once by
// the caller).
// REQUIRES: p.mu held (shared is enough).
func (p *Partition) followerOffsetsLocked(pending *pendingISR) []replicaOffset {
	var out []replicaOffset
	add := func(id int32) {
		if id != p.m.opts.NodeID && !slices.ContainsFunc(out, func(o replicaOffset) bool { return o.nodeID == id }) {
			out = append(out, p.followers.offset(id))
		}
	}
	for _, id := range p.mu.isr {
		add(id)
	}
	if pending != nil {
		for _, id := range pending.req.NewISR {
			add(id)
		}
	}
	return out
}

// maybeAdvanceHighWatermarkLocked applies the high-watermark rule and,
// if the high watermark moved, wakes every waiter. A follower never
// advances it here: it takes the leader's.
// REQUIRES: p.mu held (shared is enough).
func (p *Partition) maybeAdvanceHighWatermarkLocked() {
	if p.mu.gone != nil || p.mu.leader != p.m.opts.NodeID {
		return
	}
	if len(p.mu.isr) < p.mu.minInsync {
		// KIP-966's strict rule: with fewer in-sync replicas than
		// min.insync.replicas nothing more is committed, so no write
		// is ever visible that fewer replicas than promised hold.
		return
	}
	pending := p.isrPending.Load()
	followers := p.followerOffsetsLocked(pending)
	p.wait.Lock()
	defer p.wait.Unlock()
	if p.isrPending.Load() != pending {
		// An AlterPartition began meanwhile: its new members count, and
		// this computation did not see them. The next advance (that
		// request's end, the next fetch) will.
		return
	}
	cur := p.log.HighWatermark()
	hw := highWatermark(cur, p.leaderOffset(), followers)
	if hw <= cur {
		return
	}
	p.log.SetHighWatermark(hw)
	for w := range p.wait.waiters {
		w.notify()
	}
}

// maybeAdvanceHighWatermark is maybeAdvanceHighWatermarkLocked for
// callers that do not hold p.mu.
func (p *Partition) maybeAdvanceHighWatermark() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.maybeAdvanceHighWatermarkLocked()
}

// notifyAppend wakes the waiters that want appends, not only
// high-watermark moves.
func (p *Partition) notifyAppend() {
	if p.logEndWaiters.Load() == 0 {
		return
	}
	p.wait.Lock()
	defer p.wait.Unlock()
	for w := range p.wait.waiters {
		if w.logEnd {
			w.notify()
		}
	}
}

// notifyAllLocked wakes every waiter: leadership changed or the
// partition is gone, and each must look again.
// REQUIRES: p.mu held exclusively.
func (p *Partition) notifyAllLocked() { p.notifyAll() }

// notifyAll wakes every waiter. The fetcher calls it when it moves a
// follower's high watermark, for the consumers parked on this replica
// (follower fetching): a leader's advance notifies under wait itself.
func (p *Partition) notifyAll() {
	p.wait.Lock()
	defer p.wait.Unlock()
	for w := range p.wait.waiters {
		w.notify()
	}
}

func (p *Partition) addWaiter(w *waiter) {
	p.wait.Lock()
	defer p.wait.Unlock()
	if _, ok := p.wait.waiters[w]; ok {
		return
	}
	p.wait.waiters[w] = struct{}{}
	if w.logEnd {
		p.logEndWaiters.Add(1)
	}
}

func (p *Partition) removeWaiter(w *waiter) {
	p.wait.Lock()
	defer p.wait.Unlock()
	if _, ok := p.wait.waiters[w]; !ok {
		return
	}
	delete(p.wait.waiters, w)
	if w.logEnd {
		p.logEndWaiters.Add(-1)
	}
}

// checkLeaderLocked is the validation every leader-side request does, in
// STYLE.md's order after the topic and partition were found: leadership,
// then the epoch fence.
// REQUIRES: p.mu held (shared is enough).
func (p *Partition) checkLeaderLocked(currentLeaderEpoch int32) error {
	if p.mu.gone != nil {
		return p.mu.gone
	}
	if p.mu.leader != p.m.opts.NodeID {
		return fmt.Errorf("%w: %s: leader is node %d", ErrNotLeader, p, p.mu.leader)
	}
	// After leadership: once the image has moved it, clients are sent
	// to the new leader rather than told of this node's disk.
	if err := p.offlineError(); err != nil {
		return err
	}
	return checkLeaderEpoch(p.mu.leaderEpoch, currentLeaderEpoch)
}

// checkConsumerRead is checkLeader for a consumer's fetch that may be
// answered by any in-sync replica (KIP-392; selector.go): this node
// leads (asFollower false, checked as checkLeaderLocked does), or it
// follows, the leader epoch passes the fence (checked first, as Kafka's
// follower does) and its image has it in the ISR.
func (p *Partition) checkConsumerRead(currentLeaderEpoch int32) (asFollower bool, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.gone != nil || p.mu.leader == p.m.opts.NodeID {
		return false, p.checkLeaderLocked(currentLeaderEpoch)
	}
	if err := checkLeaderEpoch(p.mu.leaderEpoch, currentLeaderEpoch); err != nil {
		return true, err
	}
	if !slices.Contains(p.mu.isr, p.m.opts.NodeID) {
		// A replica out of the ISR may lag without bound: the client
		// is sent back to the leader, which names someone else.
		return true, fmt.Errorf("%w: %s: this replica is not in the ISR %v (leader is node %d)",
			ErrNotLeader, p, p.mu.isr, p.mu.leader)
	}
	return true, p.offlineError()
}

// checkLeader is checkLeaderLocked for callers that do not hold p.mu. It
// returns the partition's leader epoch.
func (p *Partition) checkLeader(currentLeaderEpoch int32) (int32, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.leaderEpoch, p.checkLeaderLocked(currentLeaderEpoch)
}

// epochStart is the offset this node's leader epoch started at (-1 when
// it does not lead).
func (p *Partition) epochStart() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.epochStart
}

// checkFollower refuses a fetch that claims to come from replica id (and
// so reads past the high watermark) unless id is one of this partition's
// other replicas: a client that merely sets a replica id must not see
// records that are not yet committed.
func (p *Partition) checkFollower(id int32) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if id == p.m.opts.NodeID || !slices.Contains(p.mu.replicas, id) {
		return fmt.Errorf("%w: %s: node %d is not a follower of this partition (replicas %v)",
			ErrNotLeader, p, id, p.mu.replicas)
	}
	return nil
}

// logError is fromLog for an error from p's log, except that
// storage.ErrLogClosed, met by a request that passed its checks just
// before the partition was retired and its log deleted, becomes the
// error the partition now answers (its topic was deleted, or the manager
// closed), which tells the client more. ListOffset and DeleteRecords use
// fromLog alone, and answer NOT_LEADER_OR_FOLLOWER then, as they always
// have.
func (p *Partition) logError(err error) error {
	if errors.Is(err, storage.ErrLogClosed) {
		p.mu.RLock()
		gone := p.mu.gone
		p.mu.RUnlock()
		if gone != nil {
			return gone
		}
	}
	return fromLog(err)
}

// leadershipChange is what update did, for the caller to log.
type leadershipChange struct {
	becameLeader, becameFollower, otherISRMembers bool
}

// update applies the partition's state from a metadata image: leader,
// epoch, replicas, ISR, min.insync.replicas and the log's config. An
// image never lowers a leader epoch (metadata.Image rejects it); should
// one arrive, its leadership part is ignored rather than let a stale
// leader back in.
func (p *Partition) update(part *metadata.Partition, cfg storage.Config, ts topicSettings) (leadershipChange, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ch leadershipChange
	if p.mu.gone != nil {
		return ch, p.mu.gone
	}
	wasLeader := p.mu.leader == p.m.opts.NodeID
	// The partition state from an AlterPartition answer (isr.go) may be
	// ahead of the image: an image of the same leader epoch with an
	// older partition epoch says nothing new, and its ISR must not
	// take back a member the controller has committed.
	stale := part.LeaderEpoch == p.mu.leaderEpoch && part.PartitionEpoch < p.mu.partitionEpoch
	if part.LeaderEpoch >= p.mu.leaderEpoch && !stale {
		p.settlePendingISRLocked(part)
		moved := part.LeaderEpoch != p.mu.leaderEpoch || part.Leader != p.mu.leader
		isrChanged := !slices.Equal(part.ISR, p.mu.isr)
		p.mu.leader = part.Leader
		p.mu.leaderEpoch = part.LeaderEpoch
		p.mu.partitionEpoch = part.PartitionEpoch
		p.mu.replicas = slices.Clone(part.Replicas)
		p.mu.isr = slices.Clone(part.ISR)
		isLeader := p.mu.leader == p.m.opts.NodeID
		ch.becameLeader = isLeader && !wasLeader
		ch.becameFollower = !isLeader && (wasLeader || moved)
		ch.otherISRMembers = isLeader && len(p.mu.isr) > 1
		if moved {
			p.mu.epochStart = -1
			if isLeader {
				// Before any write in the epoch: a follower's
				// LastFetchedEpoch is then answered from here on, and
				// ListOffsets knows when the high watermark has caught
				// up with the previous leader's (KIP-207). The fetcher
				// cannot append meanwhile: it writes under p.mu shared.
				p.mu.epochStart = p.log.LogEndOffset()
				if err := p.log.AssignLeaderEpoch(p.mu.leaderEpoch, p.mu.epochStart); err != nil {
					p.m.log.Error("recording a new leader epoch's start", "partition", p.String(),
						"leader_epoch", p.mu.leaderEpoch, "start_offset", p.mu.epochStart, "err", err)
				}
			}
			p.followers.Lock()
			if isLeader {
				p.followers.resetLocked(p.mu.leaderEpoch, p.m.opts.Now())
			} else {
				p.followers.resetLocked(-1, time.Time{})
			}
			p.followers.Unlock()
		}
		if moved || isrChanged {
			// Parked produces must learn they lost leadership or that
			// the ISR fell below min.insync.replicas; parked fetches
			// must re-check the epoch fence.
			p.notifyAllLocked()
		}
	}
	p.mu.minInsync = ts.minInsync
	p.mu.migratedTo = ts.migratedTo
	p.mu.throttled = slices.Contains(part.Adding, p.m.opts.NodeID)
	err := p.log.SetConfig(cfg)
	// A new leader, a shrunk ISR or a policy change can each move the
	// high watermark: a single-node leader's is its flushed log end.
	p.maybeAdvanceHighWatermarkLocked()
	return ch, err
}

// retire marks the partition gone with err (its topic was deleted, it
// moved off this node, or the manager closed) and wakes every waiter so
// each answers with err. It does not touch the log.
func (p *Partition) retire(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.gone == nil {
		p.mu.gone = err
	}
	p.notifyAllLocked()
}

// flushAsync makes sure the log gets flushed up to upTo, and the high
// watermark advanced, without the caller waiting. Under flush.policy=ack
// an acks=0 append is never flushed by its producer; without this its
// records would stay invisible to consumers until the next acks>=1
// append. One goroutine per partition at most does the work; callers
// that arrive while it runs raise its target and it loops.
func (p *Partition) flushAsync(upTo int64) {
	for {
		cur := p.asyncFlush.target.Load()
		if upTo <= cur || p.asyncFlush.target.CompareAndSwap(cur, upTo) {
			break
		}
	}
	if !p.asyncFlush.running.CompareAndSwap(false, true) {
		return // the running flusher will see the new target
	}
	if !p.m.goBackground(p.runAsyncFlush) {
		p.asyncFlush.running.Store(false)
	}
}

func (p *Partition) runAsyncFlush() {
	for {
		target := p.asyncFlush.target.Load()
		if err := p.log.Flush(target); err != nil {
			p.m.log.Error("flushing acks=0 appends", "partition", p.String(), "err", err)
		}
		p.maybeAdvanceHighWatermark()
		p.asyncFlush.running.Store(false)
		// A caller that raised the target after the Load above saw
		// running=true and left the work to us: take it back, unless a
		// new flusher already has.
		if p.asyncFlush.target.Load() <= target || !p.asyncFlush.running.CompareAndSwap(false, true) {
			return
		}
	}
}
