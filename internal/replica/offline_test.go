package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Offline replicas (offline.go): a partition whose log failed on this
// node refuses everything as KAFKA_STORAGE_ERROR, wakes what waits on
// it, copies nothing more, asks for no ISR change, and tells the node.

// faultyNode is a node of faultyNodes: its fsyncs fail with EIO while
// failing is set, and told collects what Options.LogFailed heard.
type faultyNode struct {
	*node
	failing *atomic.Bool
	mu      sync.Mutex
	told    []string
}

func (n *faultyNode) toldOf() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.told)
}

// faultyNodes is newNodes over file systems whose syncs can be made to
// fail (vfs.SyncFaults), one switch per node.
func faultyNodes(t *testing.T, n int32, configure ...func(*Options)) (*memLeaders, []*faultyNode) {
	leaders := &memLeaders{managers: map[int32]*Manager{}}
	var nodes []*faultyNode
	for id := int32(1); id <= n; id++ {
		fn := &faultyNode{failing: new(atomic.Bool)}
		fs := vfs.SyncFaults(vfs.OS(), func(name string) error {
			if fn.failing.Load() {
				return syscall.EIO
			}
			return nil
		})
		dir := t.TempDir()
		sm, err := storage.OpenManager(fs, dir, storage.DefaultConfig(), storage.ManagerOptions{NoBackground: true, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{NodeID: id, Storage: sm, Defaults: storage.DefaultConfig(), Logger: quietLogger, DataDir: dir, FS: fs, Leaders: leaders,
			LogFailed: func(topic string, topicID metadata.UUID, partition int32) {
				fn.mu.Lock()
				defer fn.mu.Unlock()
				fn.told = append(fn.told, fmt.Sprintf("%s-%d %s", topic, partition, topicID))
			}}
		for _, f := range configure {
			f(&opts)
		}
		m := NewManager(opts)
		t.Cleanup(func() {
			m.Close()
			sm.Close() // ErrStorage for a failed log: expected
		})
		leaders.managers[id] = m
		fn.node = &node{t: t, id: id, m: m, brokers: activeBrokers(n)}
		nodes = append(nodes, fn)
	}
	return leaders, nodes
}

// awaitOffline waits until n has taken r-0 offline and told the node.
func awaitOffline(t *testing.T, n *faultyNode) {
	t.Helper()
	want := []string{"r-0 " + topicID(9).String()}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := n.toldOf(); !slices.Equal(got, want) {
			return fmt.Errorf("node %d told %v, want %v", n.id, got, want)
		}
		if got := n.m.OfflineReplicas(); !slices.Equal(got, []metadata.TopicIDPartition{{TopicID: topicID(9), Partition: 0}}) {
			return fmt.Errorf("node %d offline replicas %v", n.id, got)
		}
		return nil
	})
}

// A leader whose fsync fails: the write that met it is refused
// KAFKA_STORAGE_ERROR, and from then on so is every request on the
// partition (produce, consumer and follower fetches, ListOffsets), with
// what the log holds left as it is; the node is told once; the metrics
// count the replica offline, neither led nor followed. Once the image
// names another leader, clients are told NOT_LEADER_OR_FOLLOWER, so they
// go there.
func TestLeaderLogFailure(t *testing.T) {
	_, nodes := faultyNodes(t, 1)
	n := nodes[0]
	n.setPartition(metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	ctx := context.Background()
	if _, err := n.m.Append(ctx, "r", 0, batch(t, "a", 5, 1000), AcksAll, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	n.failing.Store(true)
	_, err := n.m.Append(ctx, "r", 0, batch(t, "b", 5, 1000), AcksAll, 5*time.Second)
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), syscall.EIO.Error()) {
		t.Fatalf("acks=all append whose fsync fails: %v, want KAFKA_STORAGE_ERROR naming EIO", err)
	}
	awaitOffline(t, n)

	if _, err := n.m.Append(ctx, "r", 0, batch(t, "c", 1, 1000), AcksLeader, time.Second); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "offline") {
		t.Errorf("append to the offline replica: %v, want KAFKA_STORAGE_ERROR saying offline", err)
	}
	for _, params := range []FetchParams{consumerFetch(0, 1), {ReplicaID: 2, MaxBytes: 1 << 20, Isolation: IsolationLogEnd}} {
		res := n.m.Fetch(ctx, params, []FetchPartition{part("r", 0, 0)})
		if err := res.Partitions[0].Err; !errors.Is(err, ErrStorage) {
			t.Errorf("fetch by replica %d: %v, want KAFKA_STORAGE_ERROR", params.ReplicaID, err)
		}
		res.Release()
	}
	if _, err := n.m.ListOffset("r", 0, -1, -1, IsolationHighWatermark); !errors.Is(err, ErrStorage) {
		t.Errorf("ListOffsets: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if s := n.m.ReplicationStats(nil); s.Offline != 1 || s.Led != 0 || s.Following != 0 {
		t.Errorf("stats %+v, want one offline replica, none led or followed", s)
	}
	if leo := n.log().LogEndOffset(); leo != 10 {
		t.Errorf("log end %d, want 10: the write whose fsync failed stays in the log, unacknowledged", leo)
	}

	n.setPartition(metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1})
	if _, err := n.m.Append(ctx, "r", 0, batch(t, "d", 1, 1000), AcksLeader, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Errorf("append once the leadership moved: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if got := n.toldOf(); len(got) != 1 {
		t.Errorf("told %v, want once", got)
	}
}

// An acks=all produce parked for a follower is answered
// KAFKA_STORAGE_ERROR as soon as the leader's log fails under another
// write: it is not left to its timeout, and it is not acknowledged.
func TestParkedProduceAnsweredWhenTheLogFails(t *testing.T) {
	leaders, nodes := faultyNodes(t, 2)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1, 2)
	follower.set(1, 0, 1, 2)
	leaders.setCut(2, true)
	parked := make(chan error, 1)
	go func() {
		_, err := leader.m.Append(context.Background(), "r", 0, batch(t, "parked", 3, 1000), AcksAll, time.Minute)
		parked <- err
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		p, _ := leader.m.Partition("r", 0)
		if p.log.RecoveryPoint() < 3 || leader.waitersOn() == 0 {
			return errors.New("the acks=all write is not parked yet")
		}
		return nil
	})
	leader.failing.Store(true)
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "fails", 1, 1000), AcksLeader, time.Second); !errors.Is(err, ErrStorage) {
		t.Fatalf("the write whose fsync fails: %v", err)
	}
	if err := testutil.Receive(t, 10*time.Second, "the parked produce's answer", parked); !errors.Is(err, ErrStorage) {
		t.Fatalf("parked acks=all produce: %v, want KAFKA_STORAGE_ERROR", err)
	}
	awaitOffline(t, leader)
}

// waitersOn is how many requests are parked on r-0.
func (n *node) waitersOn() int {
	p, ok := n.m.Partition("r", 0)
	if !ok {
		return 0
	}
	p.wait.Lock()
	defer p.wait.Unlock()
	return len(p.wait.waiters)
}

// A follower whose fsync fails stops copying into the log: the node is
// told, and the next image leaves the partition out of its fetchers
// (here the only one it followed, so the fetcher stops); the records it
// had appended stay as they were; the leader's log goes on.
func TestFollowerStopsCopyingIntoAFailedLog(t *testing.T) {
	_, nodes := faultyNodes(t, 2)
	leader, follower := nodes[0], nodes[1]
	leader.set(1, 0, 1, 2)
	follower.set(1, 0, 1, 2)
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	follower.failing.Store(true)
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "b", 5, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	awaitOffline(t, follower)
	end := follower.log().LogEndOffset()
	follower.set(1, 0, 1, 2) // the next image, as ApplyImage sees it
	follower.m.fetchers.mu.Lock()
	following := len(follower.m.fetchers.byLeader)
	follower.m.fetchers.mu.Unlock()
	if following != 0 {
		t.Fatalf("%d fetchers still run for a follower whose only replica is offline", following)
	}
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "c", 5, 1000), AcksLeader, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := follower.log().LogEndOffset(); got != end {
		t.Fatalf("the failed log's end moved from %d to %d", end, got)
	}
	if s := follower.m.ReplicationStats(nil); s.Offline != 1 || s.Following != 0 {
		t.Errorf("follower stats %+v, want one offline replica, none followed", s)
	}
}

// A leader whose log failed asks for no ISR shrink: its followers cannot
// fetch from it, so all would look stalled, and a shrink to itself would
// leave the partition leaderless once the controller hears of the
// failure. The same leader with a healthy log shrinks the stalled
// follower out, the control.
func TestFailedLeaderAsksNoISRChange(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", fail), func(t *testing.T) {
			ctrl := &memController{state: controlplane.PartitionState{Leader: 1, ISR: []int32{1, 2}}}
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			leaders, nodes := faultyNodes(t, 2, func(o *Options) {
				o.Now = clk.Now
				if o.NodeID == 1 {
					o.ISR = ctrl
				}
			})
			leader := nodes[0]
			leaders.setCut(2, true)
			leader.set(1, 0, 1, 2)
			if fail {
				leader.failing.Store(true)
				if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 1, 1000), AcksLeader, time.Second); !errors.Is(err, ErrStorage) {
					t.Fatalf("the write whose fsync fails: %v", err)
				}
				awaitOffline(t, leader)
			}
			clk.Advance(time.Hour) // far past replica.lag.time.max.ms
			p, _ := leader.m.Partition("r", 0)
			p.maybeAlterISR(false)
			testutil.Eventually(t, 10*time.Second, func() error {
				if pend := p.isrPending.Load(); pend != nil && pend.inFlight.Load() {
					return errors.New("a change is in flight")
				}
				return nil
			})
			st, sent := ctrl.committed()
			if fail && sent != 0 {
				t.Fatalf("the failed leader asked for ISR %v", st.ISR)
			}
			if !fail && (sent == 0 || !slices.Equal(st.ISR, []int32{1})) {
				t.Fatalf("the healthy leader: %d requests, ISR %v; want the stalled follower shrunk out", sent, st.ISR)
			}
		})
	}
}
