package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is every test's start time on the fake clock.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// waitBound bounds waits for conditions that hold within milliseconds
// (a goroutine reaching a lock, a channel being answered). Tests never
// wait on time: the fake clock moves only when a test advances it.
const waitBound = 5 * time.Second

const testPartitions = 4

// memLog is the in-memory Log the tests run against: per partition, every
// record appended, in order, each with its offset (its index) and, for
// AppendTxn's records and markers, the marks Load's read gives them. Tests
// can make appends fail or hold them. Its partitions check producer
// epochs as Kafka's do for transactional batches: an AppendTxn whose
// epoch is older than the producer's latest on the partition (its last
// batch or marker) fails with INVALID_PRODUCER_EPOCH.
type memLog struct {
	mu struct {
		sync.Mutex
		parts   map[int32][]Record
		epochs  map[int32]map[int64]int16 // partition -> producer id -> latest epoch
		fail    error                     // while set, every Append fails with it
		gate    chan struct{}             // while set, Append waits for it to close
		waiting int                       // appends waiting at the gate
		// landedGate: while set, appends wait for it to close after
		// writing their records (holdAnswers); landed counts them.
		landedGate chan struct{}
		landed     int
		appends    int // successful appends
		// inFlight and overlaps check Log's contract that one group's
		// appends never overlap.
		inFlight map[string]bool
		overlaps int
	}
}

func newMemLog() *memLog {
	l := &memLog{}
	l.mu.parts = make(map[int32][]Record)
	l.mu.epochs = make(map[int32]map[int64]int16)
	l.mu.inFlight = make(map[string]bool)
	return l
}

func (l *memLog) Append(ctx context.Context, p int32, recs []Record) error {
	return l.append(ctx, p, recs, nil)
}

// txnBatch is the producer of a transactional batch.
type txnBatch struct {
	producerID int64
	epoch      int16
}

func (l *memLog) AppendTxn(ctx context.Context, p int32, producerID int64, epoch int16, _ TxnGuard, recs []Record) error {
	return l.append(ctx, p, recs, &txnBatch{producerID, epoch})
}

// marker appends producerID's transaction marker to partition p, as the
// transaction coordinator's WriteTxnMarkers would, with the producer's
// epoch (bumped for a coordinator-ended transaction). It does not tell
// the coordinator: tests call CompleteTxn (or not) themselves.
func (l *memLog) marker(p int32, producerID int64, epoch int16, commit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bumpEpochLocked(p, producerID, epoch)
	l.mu.parts[p] = append(l.mu.parts[p], Record{Offset: int64(len(l.mu.parts[p])),
		ProducerID: producerID, Control: true, Commit: commit})
}

func (l *memLog) bumpEpochLocked(p int32, producerID int64, epoch int16) {
	if l.mu.epochs[p] == nil {
		l.mu.epochs[p] = make(map[int64]int16)
	}
	if cur, ok := l.mu.epochs[p][producerID]; !ok || epoch > cur {
		l.mu.epochs[p][producerID] = epoch
	}
}

func (l *memLog) append(ctx context.Context, p int32, recs []Record, txn *txnBatch) error {
	group := recordGroup(recs[0])
	l.mu.Lock()
	if l.mu.inFlight[group] {
		l.mu.overlaps++
	}
	l.mu.inFlight[group] = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.mu.inFlight, group)
		l.mu.Unlock()
	}()

	l.mu.Lock()
	gate := l.mu.gate
	if gate != nil {
		l.mu.waiting++
	}
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		l.mu.Lock()
		l.mu.waiting--
		l.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	l.mu.Lock()
	if err := l.mu.fail; err != nil {
		l.mu.Unlock()
		return err
	}
	if txn != nil {
		if cur, ok := l.mu.epochs[p][txn.producerID]; ok && txn.epoch < cur {
			l.mu.Unlock()
			return kerr.InvalidProducerEpoch
		}
		l.bumpEpochLocked(p, txn.producerID, txn.epoch)
	}
	for _, r := range recs {
		stored := Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value), Offset: int64(len(l.mu.parts[p]))}
		if txn != nil {
			stored.Transactional, stored.ProducerID = true, txn.producerID
		}
		l.mu.parts[p] = append(l.mu.parts[p], stored)
	}
	l.mu.appends++
	landed := l.mu.landedGate
	if landed != nil {
		l.mu.landed++
	}
	l.mu.Unlock()
	if landed != nil {
		<-landed // the records are in the log; the answer waits
		l.mu.Lock()
		l.mu.landed--
		l.mu.Unlock()
	}
	return nil
}

// holdAnswers makes appends write their records and then wait, until the
// returned release is called, before answering: a write that has landed
// but whose outcome the coordinator has not applied yet.
func (l *memLog) holdAnswers() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gate := make(chan struct{})
	l.mu.landedGate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.mu.landedGate = nil
			l.mu.Unlock()
			close(gate)
		})
	}
}

// landedAppends counts appends held by holdAnswers.
func (l *memLog) landedAppends() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.landed
}

// recordGroup is the group a record belongs to.
func recordGroup(r Record) string {
	if len(r.Key) >= 2 && r.Key[1] == 2 {
		var k kmsg.GroupMetadataKey
		_ = k.ReadFrom(r.Key)
		return k.Group
	}
	var k kmsg.OffsetCommitKey
	_ = k.ReadFrom(r.Key)
	return k.Group
}

func (l *memLog) overlapCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.overlaps
}

func (l *memLog) setFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.fail = err
}

// hold makes appends wait until the returned release is called.
func (l *memLog) hold() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gate := make(chan struct{})
	l.mu.gate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.mu.gate = nil
			l.mu.Unlock()
			close(gate)
		})
	}
}

func (l *memLog) waitingAppends() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.waiting
}

func (l *memLog) appendCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.appends
}

func (l *memLog) records(p int32) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.parts[p])
}

// reader is Load's read function over partition p as it is now.
func (l *memLog) reader(p int32) func(fn func(Record) error) error {
	recs := l.records(p)
	return func(fn func(Record) error) error {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// decoded is a record in readable form, for assertions on what was
// written.
type decoded struct {
	kind      string // "offset" or "group"
	group     string
	tp        TopicPartition
	tombstone bool
	offset    *kmsg.OffsetCommitValue
	metadata  *kmsg.GroupMetadataValue
}

func decodeRecord(t testing.TB, r Record) decoded {
	t.Helper()
	d := decoded{tombstone: r.Value == nil}
	switch r.Key[1] {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		d.kind, d.group, d.tp = "offset", k.Group, TopicPartition{k.Topic, k.Partition}
		if !d.tombstone {
			d.offset = new(kmsg.OffsetCommitValue)
			if err := d.offset.ReadFrom(r.Value); err != nil {
				t.Fatal(err)
			}
		}
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		d.kind, d.group = "group", k.Group
		if !d.tombstone {
			d.metadata = new(kmsg.GroupMetadataValue)
			if err := d.metadata.ReadFrom(r.Value); err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatalf("unexpected key version %d", r.Key[1])
	}
	return d
}

// harness is a coordinator with a fake clock and an in-memory log, every
// partition loaded (empty).
type harness struct {
	t     *testing.T
	clock *clock.Fake
	log   *memLog
	cfg   Config
	c     *Coordinator
	ctx   context.Context // ends at cleanup, so no parked call outlives a failed test
}

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock.NewFake(t0), log: newMemLog()}
	h.cfg = Config{
		OffsetsPartitions:      testPartitions,
		MinSessionTimeout:      time.Second,
		MaxSessionTimeout:      time.Hour,
		MaxMetadataBytes:       64,
		OffsetsRetention:       24 * time.Hour,
		RetentionCheckInterval: 10 * time.Minute,
		CommitTimeout:          5 * time.Second,
		Clock:                  h.clock,
		Logger:                 slog.New(slog.DiscardHandler),
	}
	for _, f := range mutate {
		f(&h.cfg)
	}
	var cancel context.CancelFunc
	h.ctx, cancel = context.WithCancel(context.Background())
	h.c = New(h.cfg, h.log)
	t.Cleanup(func() {
		cancel()
		h.c.Close()
	})
	for p := range int32(testPartitions) {
		if err := h.c.Load(p, h.log.reader(p)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// call is a request running on its own goroutine.
type call[T any] struct {
	t    *testing.T
	done chan T
}

func start[T any](t *testing.T, f func() T) *call[T] {
	c := &call[T]{t: t, done: make(chan T, 1)}
	go func() { c.done <- f() }()
	return c
}

// result waits (bounded) for the call's answer.
func (c *call[T]) result() T {
	c.t.Helper()
	select {
	case r := <-c.done:
		return r
	case <-time.After(waitBound):
		c.t.Fatalf("call still parked after %v", waitBound)
		panic("unreachable")
	}
}

// parked fails the test if the call has already answered.
func (c *call[T]) parked() {
	c.t.Helper()
	select {
	case r := <-c.done:
		c.t.Fatalf("call answered %+v, want it parked", r)
	default:
	}
}

func (h *harness) startJoin(req JoinRequest) *call[JoinResult] {
	return start(h.t, func() JoinResult { return h.c.JoinGroup(h.ctx, req) })
}

func (h *harness) join(req JoinRequest) JoinResult {
	h.t.Helper()
	return h.startJoin(req).result()
}

func (h *harness) startSync(req SyncRequest) *call[SyncResult] {
	return start(h.t, func() SyncResult { return h.c.SyncGroup(h.ctx, req) })
}

func (h *harness) sync(req SyncRequest) SyncResult {
	h.t.Helper()
	return h.startSync(req).result()
}

// eventually waits for cond (bounded); see testutil.Eventually.
func (h *harness) eventually(cond func() error) {
	h.t.Helper()
	testutil.Eventually(h.t, waitBound, cond)
}

// peek runs f on the group's state under its lock (nil group: absent).
func (h *harness) peek(id string, f func(g *group)) {
	h.t.Helper()
	g, err := h.c.lookup(id, false)
	if err != nil {
		h.t.Fatal(err)
	}
	if g == nil {
		f(nil)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// waitAwaitingJoin waits until n members of the group are parked in
// JoinGroup.
func (h *harness) waitAwaitingJoin(id string, n int) {
	h.t.Helper()
	h.eventually(func() error {
		var got int
		h.peek(id, func(g *group) {
			if g != nil {
				got = g.mu.awaitingJoin
			}
		})
		if got != n {
			return fmt.Errorf("%d members awaiting join, want %d", got, n)
		}
		return nil
	})
}

// waitAwaitingSync waits until member is parked in SyncGroup.
func (h *harness) waitAwaitingSync(id, memberID string) {
	h.t.Helper()
	h.eventually(func() error {
		var ok bool
		h.peek(id, func(g *group) {
			if g != nil {
				m := g.mu.members[memberID]
				ok = m != nil && m.syncWaiter != nil
			}
		})
		if !ok {
			return fmt.Errorf("member %s not parked in SyncGroup", memberID)
		}
		return nil
	})
}

func (h *harness) state(id string) string {
	h.t.Helper()
	d, err := h.c.DescribeGroup(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return d.State
}

func (h *harness) wantState(id, want string) {
	h.t.Helper()
	if got := h.state(id); got != want {
		h.t.Fatalf("group %s is %s, want %s", id, got, want)
	}
}

func (h *harness) memberIDs(id string) []string {
	h.t.Helper()
	d, err := h.c.DescribeGroup(id)
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// leaveAll has every member of ms leave their group, and waits for the
// coordinator's write of the now Empty group, which runs in the
// background: a test that counts appends after this must not count it.
func (h *harness) leaveAll(ms []joined) {
	h.t.Helper()
	for _, m := range ms {
		h.c.LeaveGroup(h.ctx, m.req.Group, []LeaveMember{{MemberID: m.MemberID}})
	}
	group := ms[0].req.Group
	h.eventually(func() error {
		recs := h.groupRecords(group)
		if n := len(recs); n > 0 && recs[n-1].metadata != nil && len(recs[n-1].metadata.Members) == 0 {
			return nil
		}
		return fmt.Errorf("the empty group %s is not written yet", group)
	})
}

// groupRecords decodes the records written for a group, in order.
func (h *harness) groupRecords(id string) []decoded {
	h.t.Helper()
	var out []decoded
	for _, r := range h.log.records(PartitionFor(id, testPartitions)) {
		if r.Control {
			continue // a transaction marker: no group of its own
		}
		if d := decodeRecord(h.t, r); d.group == id {
			out = append(out, d)
		}
	}
	return out
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

// memberReq is a dynamic consumer's JoinGroup with one "range" protocol.
func memberReq(groupID, clientID string, topics ...string) JoinRequest {
	if len(topics) == 0 {
		topics = []string{"t"}
	}
	return JoinRequest{
		Group:            groupID,
		ClientID:         clientID,
		ClientHost:       "/127.0.0.1",
		ProtocolType:     "consumer",
		Protocols:        []Protocol{{Name: "range", Metadata: consumerMeta(topics...)}},
		SessionTimeout:   10 * time.Second,
		RebalanceTimeout: 30 * time.Second,
	}
}

func staticReq(groupID, instance string, topics ...string) JoinRequest {
	r := memberReq(groupID, "client-"+instance, topics...)
	r.InstanceID = &instance
	return r
}

// joined is a member of a formed group.
type joined struct {
	req JoinRequest
	JoinResult
}

func (m joined) heartbeatReq() HeartbeatRequest {
	return HeartbeatRequest{Group: m.req.Group, MemberID: m.MemberID, InstanceID: m.req.InstanceID, Generation: m.Generation}
}

func (m joined) heartbeat(h *harness) error { return h.c.Heartbeat(m.heartbeatReq()) }

func (m joined) syncReq(assignments map[string][]byte) SyncRequest {
	return SyncRequest{Group: m.req.Group, MemberID: m.MemberID, InstanceID: m.req.InstanceID, Generation: m.Generation, Assignments: assignments}
}

func (m joined) commitReq(offsets ...OffsetCommit) CommitRequest {
	return CommitRequest{Group: m.req.Group, MemberID: m.MemberID, InstanceID: m.req.InstanceID, Generation: m.Generation, Offsets: offsets}
}

// rejoinReq is m's JoinGroup with its member id.
func (m joined) rejoinReq() JoinRequest {
	r := m.req
	r.MemberID = m.MemberID
	return r
}

func assignmentFor(memberID string) []byte { return []byte("assignment-of-" + memberID) }

// formGroup brings reqs into one Stable group (InitialRebalanceDelay 0):
// the first member forms generation 1; the others join, parking while it
// is missing; its rejoin completes generation 2 with everyone, it leading.
// Every member then syncs and gets assignmentFor(its id). The result is
// in reqs' order.
func (h *harness) formGroup(reqs ...JoinRequest) []joined {
	h.t.Helper()
	if h.cfg.InitialRebalanceDelay != 0 {
		h.t.Fatal("formGroup needs InitialRebalanceDelay 0")
	}
	first := h.join(reqs[0])
	if first.Err != nil {
		h.t.Fatalf("first join: %v", first.Err)
	}
	members := []joined{{reqs[0], first}}
	if len(reqs) > 1 {
		calls := make([]*call[JoinResult], len(reqs))
		for i, r := range reqs[1:] {
			calls[i+1] = h.startJoin(r)
			h.waitAwaitingJoin(r.Group, i+1)
		}
		calls[0] = h.startJoin(members[0].rejoinReq())
		members = members[:0]
		for i, c := range calls {
			res := c.result()
			if res.Err != nil {
				h.t.Fatalf("join %d: %v", i, res.Err)
			}
			members = append(members, joined{reqs[i], res})
		}
	}
	leader := members[0]
	if leader.LeaderID != leader.MemberID {
		h.t.Fatalf("leader is %s, want the first member %s", leader.LeaderID, leader.MemberID)
	}
	assignments := make(map[string][]byte)
	for _, m := range members {
		assignments[m.MemberID] = assignmentFor(m.MemberID)
	}
	syncs := make([]*call[SyncResult], len(members))
	for i := len(members) - 1; i >= 0; i-- { // followers first: they park until the leader's
		m := members[i]
		if i == 0 {
			syncs[i] = h.startSync(m.syncReq(assignments))
		} else {
			syncs[i] = h.startSync(m.syncReq(nil))
			h.waitAwaitingSync(m.req.Group, m.MemberID)
		}
	}
	for i, s := range syncs {
		res := s.result()
		if res.Err != nil {
			h.t.Fatalf("sync %d: %v", i, res.Err)
		}
		if string(res.Assignment) != string(assignmentFor(members[i].MemberID)) {
			h.t.Fatalf("member %d got assignment %q", i, res.Assignment)
		}
	}
	h.wantState(reqs[0].Group, "Stable")
	return members
}

// rebalance moves a formed group to its next generation: the leader (ms[0])
// rejoins first, which starts the rebalance, then the others; it returns
// the members with their new join results (the group then awaits sync).
func (h *harness) rebalance(ms []joined) []joined {
	h.t.Helper()
	out := slices.Clone(ms)
	calls := []*call[JoinResult]{h.startJoin(ms[0].rejoinReq())}
	h.waitAwaitingJoin(ms[0].req.Group, 1)
	for _, m := range ms[1:] {
		calls = append(calls, h.startJoin(m.rejoinReq()))
	}
	for i, c := range calls {
		out[i].JoinResult = c.result()
		if out[i].Err != nil {
			h.t.Fatalf("rejoin of member %d: %v", i, out[i].Err)
		}
	}
	return out
}

// syncAll syncs every member (leader ms[0] assigning assignmentFor each)
// and fails the test unless all get their assignment.
func (h *harness) syncAll(ms []joined) {
	h.t.Helper()
	assignments := make(map[string][]byte)
	for _, m := range ms {
		assignments[m.MemberID] = assignmentFor(m.MemberID)
	}
	var calls []*call[SyncResult]
	for i, m := range ms {
		a := assignments
		if i > 0 {
			a = nil
		}
		calls = append(calls, h.startSync(m.syncReq(a)))
	}
	for i, c := range calls {
		if res := c.result(); res.Err != nil || string(res.Assignment) != string(assignmentFor(ms[i].MemberID)) {
			h.t.Fatalf("sync of member %d: %+v", i, res)
		}
	}
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) || (want == nil) != (got == nil) {
		t.Fatalf("%s: got error %v, want %v", what, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func testEventually(t *testing.T, cond func() error) {
	t.Helper()
	testutil.Eventually(t, waitBound, cond)
}

// list is ListGroups on a coordinator with every partition loaded.
func (h *harness) list(states []string) []GroupListing {
	h.t.Helper()
	listed, err := h.c.ListGroups(states)
	if err != nil {
		h.t.Fatalf("ListGroups: %v", err)
	}
	return listed
}
