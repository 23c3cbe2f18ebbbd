package group

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
)

// groupState is a classic group's state; String gives Kafka's names.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return fmt.Sprintf("groupState(%d)", int8(s))
}

// validPrevious lists, for each state, the states it may be entered from
// (Kafka's GroupState.validPreviousStates). A transition outside it is a
// coordinator bug, and panics.
var validPrevious = map[groupState][]groupState{
	statePreparingRebalance:  {stateStable, stateCompletingRebalance, stateEmpty},
	stateCompletingRebalance: {statePreparingRebalance},
	stateStable:              {stateCompletingRebalance},
	stateEmpty:               {statePreparingRebalance},
	stateDead:                {stateStable, statePreparingRebalance, stateCompletingRebalance, stateEmpty, stateDead},
}

// group is one classic group: membership, the rebalance in progress, and
// committed offsets.
//
// Two locks, in this order: writeTurn, then mu. mu guards every field
// below it and is never held across a Log.Append, so heartbeats and
// timers keep running while a write waits for replicas. writeTurn (a
// one-slot semaphore, so waiting for it honours a context) is held from
// before a write's records are built until its outcome is applied: the
// group's records reach the log in the order its in-memory state changed,
// and nothing changes the offsets a write is about to change. The
// coordinator's own lock (Coordinator.mu) may be taken with mu held,
// never the reverse.
type group struct {
	id        string
	partition int32
	writeTurn chan struct{}

	mu struct {
		sync.Mutex
		state groupState
		// stateTimestamp is when state was entered (Kafka's
		// currentStateTimestamp); zero when loaded from a record that
		// predates it, and retention then counts from commit times.
		stateTimestamp time.Time
		// deleting: DeleteGroups or retention is writing this group's
		// tombstones. JoinGroup answers COORDINATOR_NOT_AVAILABLE
		// meanwhile, as Kafka answers a group it has marked Dead.
		deleting bool

		protocolType string // "": none yet (a group only committed to)
		protocol     string // chosen protocol; set in CompletingRebalance and Stable
		generation   int32
		leader       string // "" iff no members

		members map[string]*member
		static  map[string]string // instance id -> member id
		// pending are member ids handed out with MEMBER_ID_REQUIRED
		// (KIP-394) and not yet joined, each with its expiry timer. A
		// rebalance waits for them as for members.
		pending map[string]clock.Timer
		// pendingSync are members of the current generation that have
		// not sent SyncGroup; syncTimer removes them at the rebalance
		// timeout.
		pendingSync map[string]struct{}
		// awaitingJoin counts members with a joinWaiter.
		// Invariant: awaitingJoin == |{m in members : m.joinWaiter != nil}|.
		awaitingJoin int
		nextSeq      uint64
		// newMemberAdded: a member joined during the initial delay of a
		// new group, so the delay is extended (KIP-134).
		newMemberAdded bool

		join      joinTimer
		syncTimer clock.Timer
		syncToken uint64

		// subscribed is the union of the members' subscribed topics, for
		// a "consumer" group whose subscriptions parsed; nil otherwise
		// (then every topic counts as subscribed, to be safe).
		subscribed map[string]struct{}

		offsets map[TopicPartition]offset
		// txnOffsets are TxnOffsetCommit's offsets by producer id: in
		// the log, but not visible to FetchOffsets until the producer's
		// transaction marker lands on the group's partition (CompleteTxn
		// moves them into offsets, or drops them). They never expire,
		// and keep the group alive. Invariant: no inner map is empty.
		txnOffsets map[int64]map[TopicPartition]offset
		// txnAppend is the TxnOffsetCommit whose append is in flight, if
		// any (the write turn allows one): its partitions already answer
		// requireStable fetches UNSTABLE_OFFSET_COMMIT, and a marker that
		// lands meanwhile is remembered in it (see CommitTxnOffsets).
		txnAppend *txnAppend
		// nextPosition is the position the group's next applied append
		// gives its offsets (offset.position). Invariant: greater than
		// the position of every offset in offsets and txnOffsets.
		nextPosition int64
	}
}

// joinTimer is the rebalance's pending completion: Kafka's DelayedJoin,
// or InitialDelayedJoin when initial is set.
type joinTimer struct {
	timer   clock.Timer
	token   uint64 // 0: none pending
	initial bool
	// delay is this timer's length, remaining what the rebalance timeout
	// leaves after it (InitialDelayedJoin's arithmetic).
	delay, remaining time.Duration
}

// member is one group member.
type member struct {
	id                   string
	instanceID           *string
	clientID, clientHost string
	protocolType         string
	protocols            []Protocol // preference order
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	assignment           []byte
	seq                  uint64 // join order: leader succession and listings follow it
	// isNew: joined and not yet through a completed join. A new member
	// has no id to heartbeat with, so its session is newMemberJoinTimeout.
	isNew bool

	// joinWaiter and syncWaiter are the parked JoinGroup and SyncGroup of
	// this member, buffered so answering never blocks. A request whose
	// context ends stops reading, but the waiter stays: the member counts
	// as joined (or synced) as in Kafka, where the parked response would
	// just never reach a dead connection.
	joinWaiter chan JoinResult
	syncWaiter chan SyncResult

	sessionTimer clock.Timer
	sessionToken uint64
}

// offset is one committed offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	// expireTime is set only for offsets committed with a retention time
	// (OffsetCommit v2-v4) or loaded from v1 records, which carry that
	// per-commit expiry; it then overrides the group's retention rules.
	expireTime time.Time
	// position orders the records that wrote the group's offsets as the
	// log does: a committed transaction's offset replaces the committed
	// one only if its record is later in the log (see CompleteTxn).
	// Loaded offsets carry their record's log offset; offsets written
	// since carry the group's nextPosition, which starts past the end of
	// the replay and grows with each append's outcome, applied in the
	// order the write turn gave the appends.
	position int64
}

func newGroup(id string, partition int32, now time.Time) *group {
	g := &group{id: id, partition: partition, writeTurn: make(chan struct{}, 1)}
	g.mu.state = stateEmpty
	g.mu.stateTimestamp = now
	g.mu.members = make(map[string]*member)
	g.mu.static = make(map[string]string)
	g.mu.pending = make(map[string]clock.Timer)
	g.mu.pendingSync = make(map[string]struct{})
	g.mu.offsets = make(map[TopicPartition]offset)
	g.mu.txnOffsets = make(map[int64]map[TopicPartition]offset)
	return g
}

// acquireWrite waits for the group's write turn or for ctx to end.
func (g *group) acquireWrite(ctx context.Context) error {
	select {
	case g.writeTurn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryAcquireWrite takes the write turn only if nobody holds it; unlike
// acquireWrite it may be called with mu held, since it never waits.
func (g *group) tryAcquireWrite() bool {
	select {
	case g.writeTurn <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *group) releaseWrite() { <-g.writeTurn }

// transitionLocked moves the group to state to at now.
// REQUIRES: g.mu held.
func (g *group) transitionLocked(to groupState, now time.Time) {
	if !slices.Contains(validPrevious[to], g.mu.state) {
		panic(fmt.Sprintf("group %q: invalid transition %v -> %v", g.id, g.mu.state, to))
	}
	g.mu.state = to
	g.mu.stateTimestamp = now
}

// membersLocked returns the members in join order.
// REQUIRES: g.mu held.
func (g *group) membersLocked() []*member {
	ms := make([]*member, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// addMemberLocked adds m; the group's protocol type is its first
// member's. REQUIRES: g.mu held.
func (g *group) addMemberLocked(m *member) {
	if len(g.mu.members) == 0 {
		g.mu.protocolType = m.protocolType
	}
	g.mu.nextSeq++
	m.seq = g.mu.nextSeq
	g.mu.members[m.id] = m
	if m.instanceID != nil {
		g.mu.static[*m.instanceID] = m.id
	}
	if g.mu.leader == "" {
		g.mu.leader = m.id
	}
	delete(g.mu.pending, m.id)
}

// removeMemberLocked forgets m: membership, static mapping, pending sync,
// leadership (passed to the longest-standing remaining member). It does
// not answer m's waiters or stop its timer.
// REQUIRES: g.mu held.
func (g *group) removeMemberLocked(m *member) {
	if g.mu.members[m.id] != m {
		return
	}
	delete(g.mu.members, m.id)
	if m.joinWaiter != nil {
		m.joinWaiter = nil
		g.mu.awaitingJoin--
	}
	if m.instanceID != nil && g.mu.static[*m.instanceID] == m.id {
		delete(g.mu.static, *m.instanceID)
	}
	delete(g.mu.pendingSync, m.id)
	if g.mu.leader == m.id {
		g.mu.leader = ""
		if ms := g.membersLocked(); len(ms) > 0 {
			g.mu.leader = ms[0].id
		}
	}
}

// validateMemberLocked is Kafka's validateCurrentMember: a static
// instance id must be registered and mapped to memberID (else the caller
// is fenced), a dynamic member must be in the group.
// REQUIRES: g.mu held.
func (g *group) validateMemberLocked(memberID string, instanceID *string) error {
	if instanceID != nil {
		current, ok := g.mu.static[*instanceID]
		if !ok {
			return ErrUnknownMemberID
		}
		if current != memberID {
			return ErrFencedInstanceID
		}
		return nil
	}
	if _, ok := g.mu.members[memberID]; !ok {
		return ErrUnknownMemberID
	}
	return nil
}

// candidateProtocolsLocked returns the protocols every member supports.
// REQUIRES: g.mu held.
func (g *group) candidateProtocolsLocked() map[string]bool {
	counts := make(map[string]int)
	for _, m := range g.mu.members {
		for _, name := range protocolNames(m.protocols) {
			counts[name]++
		}
	}
	candidates := make(map[string]bool)
	for name, n := range counts {
		if n == len(g.mu.members) {
			candidates[name] = true
		}
	}
	return candidates
}

// supportsProtocolsLocked says whether a member with this protocol type
// and protocols may join: an Empty group takes any non-empty type and
// list; otherwise the type must be the group's and one protocol must be
// supported by every current member.
// REQUIRES: g.mu held.
func (g *group) supportsProtocolsLocked(protocolType string, protocols []Protocol) bool {
	if g.mu.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.mu.protocolType {
		return false
	}
	candidates := g.candidateProtocolsLocked()
	for _, p := range protocols {
		if candidates[p.Name] {
			return true
		}
	}
	return false
}

// selectProtocolLocked chooses the group's protocol as Kafka does: each
// member votes for its most preferred protocol among those every member
// supports, and the most votes win. Kafka breaks a tie by hash-map order;
// the lexically smallest name wins here, so the choice is deterministic.
// REQUIRES: g.mu held; at least one member; a common protocol (joins that
// would leave none are refused).
func (g *group) selectProtocolLocked() string {
	candidates := g.candidateProtocolsLocked()
	votes := make(map[string]int)
	for _, m := range g.mu.members {
		for _, p := range m.protocols {
			if candidates[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, n := range votes {
		if n > bestVotes || (n == bestVotes && name < best) {
			best, bestVotes = name, n
		}
	}
	if bestVotes < 0 {
		panic(fmt.Sprintf("group %q: no protocol common to its %d members", g.id, len(g.mu.members)))
	}
	return best
}

// hasAllMembersJoinedLocked: every member has a parked JoinGroup and no
// MEMBER_ID_REQUIRED id is outstanding.
// REQUIRES: g.mu held.
func (g *group) hasAllMembersJoinedLocked() bool {
	return len(g.mu.members) == g.mu.awaitingJoin && len(g.mu.pending) == 0
}

// electJoinedLeaderLocked keeps the leader if it rejoined, else makes the
// longest-standing rejoined member leader. It reports false when there is
// no leader or nobody rejoined.
// REQUIRES: g.mu held.
func (g *group) electJoinedLeaderLocked() bool {
	leader := g.mu.members[g.mu.leader]
	if leader == nil {
		return false
	}
	if leader.joinWaiter != nil {
		return true
	}
	for _, m := range g.membersLocked() {
		if m.joinWaiter != nil {
			g.mu.leader = m.id
			return true
		}
	}
	return false
}

// rebalanceTimeoutLocked is the largest of the members' rebalance
// timeouts: the rebalance waits as long as its slowest member may need.
// REQUIRES: g.mu held.
func (g *group) rebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.mu.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// leaderMembersLocked is what the leader's JoinResult lists: every member
// with its metadata for the chosen protocol.
// REQUIRES: g.mu held.
func (g *group) leaderMembersLocked() []Member {
	ms := g.membersLocked()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{
			MemberID:   m.id,
			InstanceID: cloneString(m.instanceID),
			Metadata:   bytes.Clone(m.metadataFor(g.mu.protocol)),
		})
	}
	return out
}

// initNextGenerationLocked starts the next generation once a join
// completes: CompletingRebalance with a chosen protocol, or Empty.
// REQUIRES: g.mu held.
func (g *group) initNextGenerationLocked(now time.Time) {
	g.mu.generation++
	if len(g.mu.members) > 0 {
		g.mu.protocol = g.selectProtocolLocked()
		g.transitionLocked(stateCompletingRebalance, now)
	} else {
		g.mu.protocol = ""
		g.transitionLocked(stateEmpty, now)
	}
	g.computeSubscribedLocked()
	clear(g.mu.pendingSync)
}

// computeSubscribedLocked recomputes the topics a "consumer" group's
// members subscribe to, from each member's metadata for the chosen
// protocol. Any subscription that does not parse leaves the set unknown.
// REQUIRES: g.mu held.
func (g *group) computeSubscribedLocked() {
	g.mu.subscribed = nil
	if g.mu.protocolType != consumerProtocolType {
		return
	}
	topics := make(map[string]struct{})
	if len(g.mu.members) > 0 && g.mu.state != stateCompletingRebalance && g.mu.state != stateStable {
		// Members but no chosen protocol: subscriptions unknown.
		return
	}
	for _, m := range g.mu.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.mu.protocol)); err != nil {
			return
		}
		for _, t := range meta.Topics {
			topics[t] = struct{}{}
		}
	}
	g.mu.subscribed = topics
}

// isSubscribedLocked: a current member subscribes to topic, or the group
// cannot tell (then deleting or expiring the topic's offsets is refused).
// REQUIRES: g.mu held.
func (g *group) isSubscribedLocked(topic string) bool {
	if g.mu.subscribed == nil {
		return true
	}
	_, ok := g.mu.subscribed[topic]
	return ok
}

// expiredOffsetsLocked returns the offsets due for removal at now
// (Kafka's removeExpiredOffsets, KIP-211), in a stable order:
//   - a group that had members and is Empty: every offset, once retention
//     has passed since the group became Empty (since its commit when the
//     group was loaded from a record too old to say);
//   - a Stable "consumer" group that knows its subscriptions: offsets of
//     topics nobody subscribes to, retention after their commit;
//   - a group that never had members (simple consumers): each offset
//     retention after its commit.
//
// An offset with an expiry of its own (OffsetCommit v2-v4's retention, a
// v1 record) expires then instead. An offset whose partition has a
// transactional commit pending does not expire until the transaction
// ends, as in Kafka's OffsetMetadataManager.cleanupExpiredOffsets: its
// tombstone would also drop the pending offset (see records.go), which
// the transaction may still commit.
// REQUIRES: g.mu held.
func (g *group) expiredOffsetsLocked(now time.Time, retention time.Duration) []TopicPartition {
	var base func(o offset) time.Time
	subscribed := map[string]struct{}{}
	switch {
	case g.mu.protocolType != "" && g.mu.state == stateEmpty:
		base = func(o offset) time.Time {
			if g.mu.stateTimestamp.IsZero() {
				return o.commitTime
			}
			return g.mu.stateTimestamp
		}
	case g.mu.protocolType == consumerProtocolType && g.mu.subscribed != nil && g.mu.state == stateStable:
		subscribed = g.mu.subscribed
		base = func(o offset) time.Time { return o.commitTime }
	case g.mu.protocolType == "":
		base = func(o offset) time.Time { return o.commitTime }
	default:
		return nil
	}
	var expired []TopicPartition
	for tp, o := range g.mu.offsets {
		if _, ok := subscribed[tp.Topic]; ok || g.hasTxnOffsetLocked(tp) {
			continue
		}
		if !o.expireTime.IsZero() {
			if !now.Before(o.expireTime) {
				expired = append(expired, tp)
			}
			continue
		}
		if now.Sub(base(o)) >= retention {
			expired = append(expired, tp)
		}
	}
	sortPartitions(expired)
	return expired
}

// unusedLocked: the group holds nothing worth keeping: no members, no
// outstanding member ids, no offsets (committed, pending in a
// transaction or being written), and no metadata record was ever written
// for it (it never completed a rebalance). Such a group exists only
// because a request created it and then failed, or its only transaction
// aborted; dropping it keeps ListGroups from showing a group no client
// was told about.
// REQUIRES: g.mu held.
func (g *group) unusedLocked() bool {
	return g.mu.state == stateEmpty && !g.mu.deleting && g.mu.generation == 0 &&
		len(g.mu.members) == 0 && len(g.mu.pending) == 0 && len(g.mu.offsets) == 0 &&
		!g.hasTxnOffsetsLocked()
}

// setJoinWaiterLocked parks a JoinGroup for m and returns its channel. A
// JoinGroup already parked for m is superseded: it is answered
// REBALANCE_IN_PROGRESS (a client that still reads it just rejoins), so
// its goroutine does not wait until its context ends.
// REQUIRES: g.mu held.
func (g *group) setJoinWaiterLocked(m *member) chan JoinResult {
	if m.joinWaiter != nil {
		g.answerJoinLocked(m, joinError(m.id, ErrRebalanceInProgress))
	}
	m.joinWaiter = make(chan JoinResult, 1)
	g.mu.awaitingJoin++
	return m.joinWaiter
}

// answerJoinLocked answers m's parked JoinGroup, if any.
// REQUIRES: g.mu held.
func (g *group) answerJoinLocked(m *member, res JoinResult) {
	if m.joinWaiter == nil {
		return
	}
	m.joinWaiter <- res
	m.joinWaiter = nil
	g.mu.awaitingJoin--
}

// setSyncWaiterLocked parks a SyncGroup for m, superseding any parked one
// as setJoinWaiterLocked does.
// REQUIRES: g.mu held.
func (g *group) setSyncWaiterLocked(m *member) chan SyncResult {
	if m.syncWaiter != nil {
		g.answerSyncLocked(m, SyncResult{Err: ErrRebalanceInProgress})
	}
	m.syncWaiter = make(chan SyncResult, 1)
	return m.syncWaiter
}

// answerSyncLocked answers m's parked SyncGroup, if any.
// REQUIRES: g.mu held.
func (g *group) answerSyncLocked(m *member, res SyncResult) {
	if m.syncWaiter == nil {
		return
	}
	m.syncWaiter <- res
	m.syncWaiter = nil
}

// metadataFor returns m's metadata for protocol.
func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches: protocols are exactly m's, in the same order with the same
// metadata. A follower rejoining a Stable group with matching protocols
// gets the current generation back without a rebalance.
func (m *member) matches(protocols []Protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// consumerProtocolType is the protocol type of Kafka's consumer protocol,
// whose member metadata lists subscribed topics.
const consumerProtocolType = "consumer"

func protocolNames(ps []Protocol) []string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		if !slices.Contains(names, p.Name) {
			names = append(names, p.Name)
		}
	}
	return names
}

func cloneProtocols(ps []Protocol) []Protocol {
	out := make([]Protocol, len(ps))
	for i, p := range ps {
		out[i] = Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func sortPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// newMemberID is Kafka's member id: the instance id (static members) or
// the client id, a dash, and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func joinError(memberID string, err error) JoinResult {
	return JoinResult{Err: err, MemberID: memberID, Generation: -1}
}
