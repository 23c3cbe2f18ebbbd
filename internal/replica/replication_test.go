package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// memLeaders carries follower fetches between managers in one process:
// the transport below the replica manager, faked so that two real
// managers on real logs can replicate without a listener.
type memLeaders struct {
	mu       sync.Mutex
	managers map[int32]*Manager
	cut      map[int32]bool // followers whose fetches fail, as if their link were down
}

// setCut cuts follower id's fetches off (or restores them).
func (l *memLeaders) setCut(id int32, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == nil {
		l.cut = map[int32]bool{}
	}
	l.cut[id] = cut
}

func (l *memLeaders) Fetch(ctx context.Context, leader int32, req LeaderFetch) ([]LeaderFetchResult, error) {
	l.mu.Lock()
	m, cut := l.managers[leader], l.cut[req.ReplicaID]
	l.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("node %d cannot reach node %d", req.ReplicaID, leader)
	}
	if m == nil {
		return nil, fmt.Errorf("no node %d", leader)
	}
	parts := make([]FetchPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		parts[i] = FetchPartition{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Partition, FetchOffset: p.FetchOffset,
			CurrentLeaderEpoch: p.CurrentLeaderEpoch, MaxBytes: p.MaxBytes, LastFetchedEpoch: p.LastFetchedEpoch,
			LogStartOffset: p.LogStartOffset}
	}
	res := m.Fetch(ctx, FetchParams{ReplicaID: req.ReplicaID, ReplicaEpoch: req.BrokerEpoch, MaxWait: req.MaxWait,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Isolation: IsolationLogEnd}, parts)
	defer res.Release()
	out := make([]LeaderFetchResult, len(parts))
	for i, r := range res.Partitions {
		out[i] = LeaderFetchResult{Err: r.Err, HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset,
			DivergingEpoch: r.DivergingEpoch, Records: bytes.Clone(r.Records)}
	}
	return out, nil
}

// node is one replica manager of a pair, with its own image.
type node struct {
	t   testing.TB
	id  int32
	m   *Manager
	img *metadata.Image
	// brokers are the images' registered brokers (newNodes:
	// activeBrokers).
	brokers map[int32]metadata.Broker
}

// newPair starts nodes 1 and 2; configure, when given, changes both
// managers' options.
func newPair(t *testing.T, configure ...func(*Options)) (leaders *memLeaders, nodes []*node) {
	return newNodes(t, 2, configure...)
}

// newNodes starts nodes 1 to n; configure, when given, changes every
// manager's options (Options.NodeID says whose).
func newNodes(t *testing.T, n int32, configure ...func(*Options)) (leaders *memLeaders, nodes []*node) {
	leaders = &memLeaders{managers: map[int32]*Manager{}}
	for id := int32(1); id <= n; id++ {
		dir := t.TempDir()
		sm, err := storage.OpenManager(vfs.OS(), dir, storage.DefaultConfig(), storage.ManagerOptions{NoBackground: true, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{NodeID: id, Storage: sm, Defaults: storage.DefaultConfig(), Logger: quietLogger, DataDir: dir, Leaders: leaders}
		for _, fn := range configure {
			fn(&opts)
		}
		m := NewManager(opts)
		t.Cleanup(func() {
			m.Close()
			sm.Close()
		})
		leaders.managers[id] = m
		nodes = append(nodes, &node{t: t, id: id, m: m, brokers: activeBrokers(n)})
	}
	return leaders, nodes
}

// activeBrokers is nodes 1 to n registered and active, node i at broker
// epoch 100+i: a leader adds to the ISR only a follower its image shows
// so (isrEligible).
func activeBrokers(n int32) map[int32]metadata.Broker {
	out := map[int32]metadata.Broker{}
	for id := int32(1); id <= n; id++ {
		out[id] = metadata.Broker{NodeID: id, Epoch: 100 + int64(id)}
	}
	return out
}

// set applies an image where topic "r" has one partition, replicas
// [1, 2], with the given leader, epoch and ISR.
func (n *node) set(leader, epoch int32, isr ...int32) {
	n.setPartition(metadata.Partition{Replicas: []int32{1, 2}, ISR: isr, Leader: leader, LeaderEpoch: epoch})
}

// setPartition applies an image where topic "r" has one partition, part.
func (n *node) setPartition(part metadata.Partition) {
	t := &metadata.Topic{Name: "r", ID: topicID(9), Partitions: []metadata.Partition{part}}
	img := &metadata.Image{ClusterID: "c", Offset: 1, Topics: map[string]*metadata.Topic{"r": t}, TopicsByID: map[metadata.UUID]*metadata.Topic{t.ID: t},
		Brokers: n.brokers}
	if n.img != nil {
		img.Offset = n.img.Offset + 1
	}
	n.img = img
	n.m.ApplyImage(img)
}

func (n *node) log() *storage.Log {
	p, ok := n.m.Partition("r", 0)
	if !ok {
		n.t.Fatalf("node %d has no r-0", n.id)
	}
	return p.Log()
}

func readLog(t testing.TB, l *storage.Log) []byte {
	rr, err := l.Read(0, 64<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return rr.Records
}

// An acks=all write on the leader is answered once the follower has
// fetched it; the follower's copy is the leader's byte for byte, and its
// high watermark follows the leader's.
func TestFollowerCopiesTheLeadersLog(t *testing.T) {
	_, nodes := newPair(t)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1, 2)
	follower.set(1, 0, 1, 2)
	for i := range 5 {
		res, err := leader.m.Append(context.Background(), "r", 0, batch(t, fmt.Sprint("b", i), 10, 1000), AcksAll, 10*time.Second)
		if err != nil {
			t.Fatalf("acks=all append %d: %v", i, err)
		}
		if res.BaseOffset != int64(i*10) {
			t.Fatalf("append %d at %d", i, res.BaseOffset)
		}
		// Answered only once the follower holds it.
		if leo := follower.log().LogEndOffset(); leo < int64(i*10+10) {
			t.Fatalf("acks=all append %d answered with the follower at %d", i, leo)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if hw := follower.log().HighWatermark(); hw != 50 {
			return fmt.Errorf("follower high watermark %d, want 50", hw)
		}
		return nil
	})
	if !bytes.Equal(readLog(t, leader.log()), readLog(t, follower.log())) {
		t.Fatal("the follower's log differs from the leader's")
	}
}

// A follower that led for a while and wrote what no one else saw has its
// log cut back to where its history and its new leader's agree, then
// copies the leader's records from there (KIP-101/KIP-279 through
// KIP-595's DivergingEpoch).
func TestFollowerTruncatesADivergedHistory(t *testing.T) {
	_, nodes := newPair(t)
	one, two := nodes[0], nodes[1]
	one.set(1, 0, 1, 2)
	two.set(1, 0, 1, 2)
	if _, err := one.m.Append(context.Background(), "r", 0, batch(t, "common", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Node 2 leads epoch 1 alone (node 1 sees no leader) and writes 3
	// records nobody copies.
	one.set(-1, 1, 2)
	two.set(2, 1, 2)
	if _, err := two.m.Append(context.Background(), "r", 0, batch(t, "lost", 3, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	if leo := two.log().LogEndOffset(); leo != 8 {
		t.Fatalf("node 2's log end %d, want 8", leo)
	}
	// Node 1 leads epoch 2 and writes 2 records at offsets 5 and 6.
	one.set(1, 2, 1)
	if _, err := one.m.Append(context.Background(), "r", 0, batch(t, "kept", 2, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	two.set(1, 2, 1)
	testutil.Eventually(t, 10*time.Second, func() error {
		if a, b := readLog(t, one.log()), readLog(t, two.log()); !bytes.Equal(a, b) {
			return fmt.Errorf("node 2's log (end %d) differs from node 1's (end %d)", two.log().LogEndOffset(), one.log().LogEndOffset())
		}
		return nil
	})
	got := values(t, readLog(t, two.log()))
	want := []string{"common-0", "common-1", "common-2", "common-3", "common-4", "kept-0", "kept-1"}
	if !slices.Equal(got, want) {
		t.Fatalf("node 2 holds %v, want %v", got, want)
	}
}

// A node elected leader and replaced at once (a preferred election),
// before it wrote anything in its epoch, holds an epoch its new leader
// never had, beginning at its log end. Its fetches name that epoch; the
// leader answers a divergence at the follower's log end, where no record
// is to be cut: the follower must still drop the epoch, and then copy
// the leader's records. (It used to ask the same way forever and never
// catch up.)
func TestFollowerDropsAnEmptyEpochItLed(t *testing.T) {
	_, nodes := newPair(t)
	one, two := nodes[0], nodes[1]
	one.set(1, 0, 1, 2)
	two.set(1, 0, 1, 2)
	if _, err := one.m.Append(context.Background(), "r", 0, batch(t, "common", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Node 2 leads epoch 1 and writes nothing.
	one.set(2, 1, 1, 2)
	two.set(2, 1, 1, 2)
	if e, _ := two.log().LeaderEpochs().LatestEpoch(); e != 1 {
		t.Fatalf("node 2's latest epoch %d, want 1 (recorded when it became leader)", e)
	}
	// A preferred election gives node 1 epoch 2, and it writes.
	two.set(1, 2, 1, 2)
	one.set(1, 2, 1, 2)
	if _, err := one.m.Append(context.Background(), "r", 0, batch(t, "after", 3, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if a, b := readLog(t, one.log()), readLog(t, two.log()); !bytes.Equal(a, b) {
			return fmt.Errorf("node 2's log (end %d) differs from node 1's (end %d)", two.log().LogEndOffset(), one.log().LogEndOffset())
		}
		return nil
	})
	if e, _ := two.log().LeaderEpochs().LatestEpoch(); e != 2 {
		t.Fatalf("node 2's latest epoch %d, want 2 (the leader's)", e)
	}
}

// A follower that comes to a partition after the leader's log start
// has moved past its offset (retention, DeleteRecords) starts again at
// the leader's log start; afterwards its log start follows the
// leader's.
func TestFollowerFollowsTheLeadersLogStart(t *testing.T) {
	_, nodes := newPair(t)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1)
	for i := range 3 {
		if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, fmt.Sprint("b", i), 5, 1000), AcksLeader, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := leader.m.DeleteRecords(ctx, "r", 0, 10, time.Second); err != nil {
		t.Fatal(err)
	}
	follower.set(1, 0, 1)
	testutil.Eventually(t, 10*time.Second, func() error {
		l := follower.log()
		if l.LogStartOffset() != 10 || l.LogEndOffset() != 15 {
			return fmt.Errorf("follower's log is [%d, %d), want [10, 15)", l.LogStartOffset(), l.LogEndOffset())
		}
		return nil
	})
	if got, want := readFrom(t, follower.log(), 10), readFrom(t, leader.log(), 10); !bytes.Equal(got, want) {
		t.Fatal("the follower's records from 10 differ from the leader's")
	}
	if _, err := leader.m.DeleteRecords(ctx, "r", 0, 12, time.Second); err != nil {
		t.Fatal(err)
	}
	// Another append makes the follower fetch again and hear the new start.
	if _, err := leader.m.Append(ctx, "r", 0, batch(t, "after", 1, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := follower.log().LogStartOffset(); s != 12 {
			return fmt.Errorf("follower's log start %d, want the leader's 12", s)
		}
		return nil
	})
}

func readFrom(t testing.TB, l *storage.Log, offset int64) []byte {
	rr, err := l.Read(offset, 64<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return rr.Records
}

// A new leader records its epoch's start at its log end before it
// writes, and until its high watermark reaches that start (the previous
// leader's may have been higher) ListOffsets answers OFFSET_NOT_AVAILABLE
// for the latest offset and lookups by time, never a smaller offset
// (KIP-207); the earliest offset is answered throughout.
func TestNewLeaderHidesItsHighWatermarkUntilItCatchesUp(t *testing.T) {
	_, nodes := newPair(t)
	one, two := nodes[0], nodes[1]
	one.set(1, 0, 1, 2)
	two.set(1, 0, 1, 2)
	if _, err := one.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Node 2 holds all five; its high watermark, learned a round later,
	// may be below. Make it so: it stops following (no leader) first.
	testutil.Eventually(t, 10*time.Second, func() error {
		if leo := two.log().LogEndOffset(); leo != 5 {
			return fmt.Errorf("node 2's log end %d", leo)
		}
		return nil
	})
	two.set(-1, 1, 2)
	two.log().SetHighWatermark(2) // as a follower can: it learns the leader's a round late
	// Node 2 leads epoch 2, with node 1 in its ISR that has not fetched
	// in this term: the high watermark stays at 2, below the epoch's
	// start, 5.
	two.set(2, 2, 1, 2)
	if e, _ := two.log().LeaderEpochs().LatestEpoch(); e != 2 {
		t.Fatalf("latest epoch in node 2's history: %d, want 2 (recorded on becoming leader)", e)
	}
	if e, end := two.log().LeaderEpochs().EndOffsetFor(0, two.log().LogEndOffset()); e != 0 || end != 5 {
		t.Fatalf("epoch 0 ends at %d (epoch %d) on the new leader, want 5", end, e)
	}
	for _, ts := range []int64{TimestampLatest, TimestampMaxTimestamp, 0} {
		if _, err := two.m.ListOffset("r", 0, -1, ts, IsolationHighWatermark); !errors.Is(err, ErrOffsetNotAvailable) {
			t.Errorf("ListOffsets %d on a new leader behind its epoch start: %v, want OFFSET_NOT_AVAILABLE", ts, err)
		}
	}
	if o, err := two.m.ListOffset("r", 0, -1, TimestampEarliest, IsolationHighWatermark); err != nil || o.Offset != 0 {
		t.Errorf("earliest offset: %+v, %v; want 0", o, err)
	}
	// Node 1 follows and fetches: the high watermark reaches 5.
	one.set(2, 2, 1, 2)
	testutil.Eventually(t, 10*time.Second, func() error {
		o, err := two.m.ListOffset("r", 0, -1, TimestampLatest, IsolationHighWatermark)
		if err != nil {
			return err
		}
		if o.Offset != 5 || o.LeaderEpoch != 2 {
			return fmt.Errorf("latest %+v, want offset 5 in epoch 2", o)
		}
		return nil
	})
}

// Producer state travels with the log: an idempotent producer's retry,
// sent to the new leader after a failover, of a batch the old leader
// wrote and the follower copied, is answered with the batch's original
// offset and writes nothing; the next sequence goes on after it.
func TestNewLeaderAnswersARetryWithTheOriginalOffset(t *testing.T) {
	_, nodes := newPair(t)
	old, next := nodes[0], nodes[1]
	old.set(1, 0, 1, 2)
	next.set(1, 0, 1, 2)
	idem := func(seq int32, n int) []byte { return idempotentBatch(t, 42, seq, n) }
	if _, err := old.m.Append(context.Background(), "r", 0, batch(t, "plain", 4, 0), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	first, err := old.m.Append(context.Background(), "r", 0, idem(0, 3), AcksAll, 10*time.Second)
	if err != nil || first.BaseOffset != 4 {
		t.Fatalf("idempotent append on the old leader at %d (%v), want 4", first.BaseOffset, err)
	}

	// The failover: node 2 leads at epoch 1, node 1 is gone.
	old.m.Close()
	next.set(2, 1, 2)
	retry, err := next.m.Append(context.Background(), "r", 0, idem(0, 3), AcksAll, 10*time.Second)
	if err != nil || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("retry to the new leader answered %d (%v), want the original offset %d", retry.BaseOffset, err, first.BaseOffset)
	}
	if end := next.log().LogEndOffset(); end != 7 {
		t.Fatalf("the retry was written again: log end %d, want 7", end)
	}
	if n, err := next.m.Append(context.Background(), "r", 0, idem(3, 1), AcksAll, 10*time.Second); err != nil || n.BaseOffset != 7 {
		t.Fatalf("next in sequence on the new leader at %d (%v), want 7", n.BaseOffset, err)
	}
}
