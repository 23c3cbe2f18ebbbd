package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// The leader lease runs for its duration from the send time of the last
// answered heartbeat; a grant that this node's own active controller may
// have answered ends when that controller's term does; a cluster of one
// never enforces it.
func TestLease(t *testing.T) {
	const d = 600 * time.Millisecond
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var term uint64
	l := newLease(clk, d, func() uint64 { return term }, true)
	if l.Held() {
		t.Fatal("held before any heartbeat was answered")
	}

	// Remote answer: runs d from the send time, not the answer's.
	sent := l.now()
	clk.Advance(90 * time.Millisecond) // the answer took 90 ms
	l.renew(sent, 0, 0)
	clk.Advance(d - 90*time.Millisecond - time.Millisecond)
	if !l.Held() || l.Remaining() != time.Millisecond {
		t.Fatalf("held %v, remaining %v, 1 ms before the end; want held, 1ms", l.Held(), l.Remaining())
	}
	clk.Advance(time.Millisecond)
	if l.Held() || l.Remaining() != 0 {
		t.Fatal("still held a whole lease after the send")
	}

	// A renewal takes it back.
	l.renew(l.now(), 0, 0)
	if !l.Held() {
		t.Fatal("not held after a renewal")
	}

	// Local answer in term 4: ends the moment term 4 does, long before d.
	term = 4
	l.renew(l.now(), 4, 4)
	clk.Advance(10 * time.Millisecond)
	if !l.Held() {
		t.Fatal("a grant of this node's active controller is not held within its term")
	}
	term = 0
	if l.Held() {
		t.Fatal("still held after this node's active controller stepped down")
	}
	term = 5 // active again, a new term: that grant is not this one's
	if l.Held() {
		t.Fatal("a grant of term 4 is held in term 5")
	}

	// Active before the heartbeat, not after: it may have answered, and
	// has stepped down since.
	term = 0
	l.renew(l.now(), 5, 0)
	if l.Held() {
		t.Fatal("held on a grant of a term that ended during the heartbeat")
	}

	// A cluster of one: always held.
	one := newLease(clk, d, func() uint64 { return 0 }, false)
	if !one.Held() {
		t.Fatal("a cluster of one's lease is not held")
	}
}

// The heartbeat goroutine's view of a lapse reaches the replica manager:
// an acks=all produce parked for a follower that never fetches is
// answered NOT_LEADER_OR_FOLLOWER when noteLease sees the lease lapse,
// long before its timeout (an hour).
func TestLeaseLapseAnswersParkedProduces(t *testing.T) {
	dir := t.TempDir()
	sm, err := storage.OpenManager(vfs.OS(), dir, storage.DefaultConfig(), storage.ManagerOptions{NoBackground: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	l := newLease(clk, 600*time.Millisecond, func() uint64 { return 0 }, true)
	l.renew(l.now(), 0, 0)
	n := &Node{log: testLogger(t), lease: l}
	n.replicas = replica.NewManager(replica.Options{NodeID: 1, Storage: sm, Defaults: storage.DefaultConfig(),
		Logger: testLogger(t), DataDir: dir, Lease: l})
	t.Cleanup(func() {
		n.replicas.Close()
		sm.Close()
	})
	topic := &metadata.Topic{Name: "t", ID: metadata.UUID{1}, Partitions: []metadata.Partition{
		{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	}}
	n.replicas.ApplyImage(&metadata.Image{ClusterID: "c", Offset: 1,
		Topics: map[string]*metadata.Topic{"t": topic}, TopicsByID: map[metadata.UUID]*metadata.Topic{topic.ID: topic}})

	b := record.NewBuilder(record.DefaultBatchOptions())
	b.Add(nil, []byte("v"), nil, 0)
	records, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := n.replicas.Append(context.Background(), "t", 0, records, replica.AcksAll, time.Hour)
		done <- err
	}()
	// In the log, so waiting or about to: a lapse noted from now on
	// answers it either way.
	testutil.Eventually(t, 10*time.Second, func() error {
		p, _ := n.replicas.Partition("t", 0)
		if end := p.Log().LogEndOffset(); end != 1 {
			return fmt.Errorf("log end %d, waiting for the write", end)
		}
		return nil
	})
	if !n.noteLease(false, nil) {
		t.Fatal("lease not held before it lapsed")
	}
	clk.Advance(600 * time.Millisecond)
	if n.noteLease(true, errors.New("heartbeat timed out")) {
		t.Fatal("lease held a whole lease after the last answered heartbeat")
	}
	if answer := testutil.Receive(t, 10*time.Second, "the parked produce's answer", done); !errors.Is(answer, replica.ErrNotLeader) {
		t.Fatalf("parked acks=all produce after the lapse: %v, want NOT_LEADER_OR_FOLLOWER", answer)
	}
	if got := n.leaseLapses.Load(); got != 1 {
		t.Fatalf("%d lapses counted, want 1", got)
	}
}
