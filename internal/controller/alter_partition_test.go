package controller_test

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// isrCluster is a one-voter controller (node 1) that has registered
// brokers 2, 3 and 4 as well, and topic "t" with one partition on
// replicas [1 2 3], led by 1.
type isrCluster struct {
	c      *controller.Controller
	cfg    controller.Config
	id     metadata.UUID
	epochs map[int32]int64 // broker epochs
}

func openISRCluster(t *testing.T) *isrCluster {
	t.Helper()
	cfg := baseConfig(t, t.TempDir())
	c := open(t, cfg)
	ic := &isrCluster{c: c, cfg: cfg, epochs: map[int32]int64{1: c.Image().Brokers[1].Epoch}}
	for id := int32(2); id <= 4; id++ {
		ic.epochs[id] = registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	tp := create(t, c, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2, 3}}})[0]
	ic.id = tp.ID
	return ic
}

// request is the leader's AlterPartition for newISR, computed from the
// partition as the image has it.
func (ic *isrCluster) request(newISR ...int32) controlplane.AlterPartition {
	p := ic.partition()
	return controlplane.AlterPartition{TopicID: ic.id, Partition: 0, LeaderID: p.Leader, BrokerEpoch: ic.epochs[p.Leader],
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: newISR}
}

func (ic *isrCluster) partition() metadata.Partition {
	return ic.c.Image().Topics["t"].Partitions[0]
}

// TestAlterPartitionRefusals: each refusal is its Kafka code and commits
// nothing (the metadata log's offset stays where it was).
func TestAlterPartitionRefusals(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	// One change first, so that a stale partition epoch exists.
	if _, err := ic.c.AlterPartition(ctxT(t), ic.request(1, 2)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(r *controlplane.AlterPartition)
		err  error
	}{
		{"stale broker epoch", func(r *controlplane.AlterPartition) { r.BrokerEpoch-- }, controlplane.ErrStaleBrokerEpoch},
		{"sender not registered", func(r *controlplane.AlterPartition) { r.LeaderID = 7 }, controlplane.ErrStaleBrokerEpoch},
		{"unknown topic id", func(r *controlplane.AlterPartition) { r.TopicID = metadata.UUID{0xee} }, controlplane.ErrUnknownTopicID},
		{"unknown partition", func(r *controlplane.AlterPartition) { r.Partition = 1 }, controlplane.ErrUnknownTopic},
		{"future leader epoch", func(r *controlplane.AlterPartition) { r.LeaderEpoch++ }, controlplane.ErrNotController},
		{"future partition epoch", func(r *controlplane.AlterPartition) { r.PartitionEpoch++ }, controlplane.ErrNotController},
		{"stale leader epoch", func(r *controlplane.AlterPartition) { r.LeaderEpoch-- }, controlplane.ErrFencedLeaderEpoch},
		{"sender is a follower", func(r *controlplane.AlterPartition) { r.LeaderID, r.BrokerEpoch = 2, ic.epochs[2] }, controlplane.ErrInvalidRequest},
		{"stale partition epoch", func(r *controlplane.AlterPartition) { r.PartitionEpoch-- }, controlplane.ErrInvalidUpdateVersion},
		{"new ISR without the leader", func(r *controlplane.AlterPartition) { r.NewISR = []int32{2, 3} }, controlplane.ErrInvalidRequest},
		{"new ISR with a broker that is no replica", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 4} }, controlplane.ErrInvalidRequest},
		{"new ISR with duplicates", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 3, 3} }, controlplane.ErrInvalidRequest},
		{"new ISR of 100,000 members", func(r *controlplane.AlterPartition) { r.NewISR = slices.Repeat([]int32{1, 2, 3}, 100_000/3+1) }, controlplane.ErrInvalidRequest},
		{"member registered again since", func(r *controlplane.AlterPartition) {
			r.NewISR, r.NewISRBrokerEpochs = []int32{1, 3}, []int64{ic.epochs[1], ic.epochs[3] - 1}
		}, controlplane.ErrIneligibleReplica},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := ic.c.Image()
			req := ic.request(1)
			tc.mod(&req)
			st, err := ic.c.AlterPartition(ctxT(t), req)
			if !errors.Is(err, tc.err) {
				t.Fatalf("AlterPartition = %+v, %v; want %v", st, err, tc.err)
			}
			after := ic.c.Image()
			if after.Offset != before.Offset {
				t.Fatalf("a refused AlterPartition moved the metadata log from %d to %d", before.Offset, after.Offset)
			}
			if p := after.Topics["t"].Partitions[0]; !reflect.DeepEqual(p, before.Topics["t"].Partitions[0]) {
				t.Fatalf("partition changed to %+v", p)
			}
		})
	}
}

// TestAlterPartitionCommits: a shrink and an expansion each commit one
// record moving the partition epoch on, leader and leader epoch as they
// were; asking for the ISR there is commits nothing; the partition epoch
// survives CreatePartitions and a restart.
func TestAlterPartitionCommits(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	ctx := ctxT(t)
	if p := ic.partition(); p.PartitionEpoch != 0 || p.LeaderEpoch != 0 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("new partition %+v", p)
	}

	step := func(isr []int32, wantEpoch int32, commits bool) {
		t.Helper()
		before := ic.c.Image().Offset
		st, err := ic.c.AlterPartition(ctx, ic.request(isr...))
		if err != nil {
			t.Fatalf("AlterPartition to %v: %v", isr, err)
		}
		want := controlplane.PartitionState{Leader: 1, LeaderEpoch: 0, PartitionEpoch: wantEpoch, ISR: isr}
		if !reflect.DeepEqual(st, want) {
			t.Fatalf("answer %+v, want %+v", st, want)
		}
		// Answered only once this node's image has it.
		img := ic.c.Image()
		p := img.Topics["t"].Partitions[0]
		if p.PartitionEpoch != wantEpoch || !slices.Equal(p.ISR, isr) || p.Leader != 1 || p.LeaderEpoch != 0 || !slices.Equal(p.Replicas, []int32{1, 2, 3}) {
			t.Fatalf("image has %+v after the answer %+v", p, st)
		}
		if moved := img.Offset != before; moved != commits {
			t.Fatalf("metadata offset %d -> %d; want a commit: %v", before, img.Offset, commits)
		}
	}
	step([]int32{1, 2}, 1, true)    // shrink
	step([]int32{1, 2}, 1, false)   // the same ISR: nothing committed
	step([]int32{1, 2, 3}, 2, true) // expand
	step([]int32{1}, 3, true)       // shrink to the leader alone

	if err := ic.c.CreatePartitions(ctx, "t", 2, [][]int32{{2, 3, 1}}, false); err != nil {
		t.Fatal(err)
	}
	tp := ic.c.Image().Topics["t"]
	if tp.Partitions[0].PartitionEpoch != 3 || tp.Partitions[1].PartitionEpoch != 0 {
		t.Fatalf("after CreatePartitions: partition epochs %d and %d, want 3 and 0", tp.Partitions[0].PartitionEpoch, tp.Partitions[1].PartitionEpoch)
	}

	before := ic.c.Image()
	if err := ic.c.SnapshotNow(); err != nil {
		t.Fatal(err)
	}
	if err := ic.c.Close(); err != nil {
		t.Fatal(err)
	}
	c := open(t, ic.cfg)
	sameState(t, c.Image(), before)
}

// Two leaders' requests computed from the same state (a retry racing
// the original, or a deposed leader's): the controller serializes them,
// one commits and the other hears INVALID_UPDATE_VERSION.
func TestAlterPartitionConcurrentRequestsFromOneState(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	reqs := []controlplane.AlterPartition{ic.request(1, 2), ic.request(1, 3)}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			_, errs[i] = ic.c.AlterPartition(ctxT(t), reqs[i])
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won == -1:
			won = i
		case !errors.Is(err, controlplane.ErrInvalidUpdateVersion):
			t.Fatalf("request %d: %v (errors %v); want one success and one INVALID_UPDATE_VERSION", i, err, errs)
		}
	}
	if won == -1 {
		t.Fatalf("neither committed: %v", errs)
	}
	if p := ic.partition(); p.PartitionEpoch != 1 || !slices.Equal(p.ISR, reqs[won].NewISR) {
		t.Fatalf("partition %+v; want request %d's ISR at partition epoch 1", p, won)
	}
}

func TestAlterPartitionOnlyOnTheActiveController(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	req := ic.request(1, 2)
	if err := ic.c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.c.AlterPartition(ctxT(t), req); !errors.Is(err, controlplane.ErrNotController) {
		t.Fatalf("AlterPartition on a closed controller: %v, want NOT_CONTROLLER", err)
	}
	if p := ic.partition(); p.PartitionEpoch != 0 {
		t.Fatalf("partition changed: %+v", p)
	}
}

// TestAlterPartitionsCommittedTogether: shrinks of 200 partitions asked
// at once all commit, in fewer metadata entries than requests (group
// commit), and two requests for one partition in the same burst are
// validated one after the other: the second, made against the state
// before the first, is INVALID_UPDATE_VERSION, never a lost change.
func TestAlterPartitionsCommittedTogether(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	const n = 200
	assign := make([][]int32, n)
	for i := range assign {
		assign[i] = []int32{1, 2, 3}
	}
	tp := create(t, ic.c, controlplane.CreateTopic{Name: "many", NumPartitions: -1, ReplicationFactor: -1, Assignments: assign})[0]
	before := ic.c.Image().Offset
	reqFor := func(p int32, isr ...int32) controlplane.AlterPartition {
		st := ic.c.Image().Topics["many"].Partitions[p]
		return controlplane.AlterPartition{TopicID: tp.ID, Partition: p, LeaderID: st.Leader, BrokerEpoch: ic.epochs[st.Leader],
			LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, NewISR: isr}
	}
	reqs := make([]controlplane.AlterPartition, 0, n+1)
	for p := range int32(n) {
		reqs = append(reqs, reqFor(p, 1, 2))
	}
	reqs = append(reqs, reqFor(0, 1, 3)) // partition 0 again, from the same state
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { _, errs[i] = ic.c.AlterPartition(ctxT(t), r) })
	}
	wg.Wait()
	for p := 1; p < n; p++ {
		if errs[p] != nil {
			t.Fatalf("partition %d: %v", p, errs[p])
		}
	}
	if (errs[0] == nil) == (errs[n] == nil) || !errors.Is(errors.Join(errs[0], errs[n]), controlplane.ErrInvalidUpdateVersion) {
		t.Fatalf("two requests for partition 0 from one state: %v and %v; want one committed, the other INVALID_UPDATE_VERSION", errs[0], errs[n])
	}
	img := ic.c.Image()
	for p := range n {
		if got := img.Topics["many"].Partitions[p]; len(got.ISR) != 2 || got.PartitionEpoch != 1 {
			t.Fatalf("partition %d: ISR %v partition epoch %d after one shrink", p, got.ISR, got.PartitionEpoch)
		}
	}
	if entries := img.Offset - before; entries >= n {
		t.Fatalf("%d requests took %d metadata entries: not committed together", n, entries)
	} else {
		t.Logf("%d AlterPartition requests committed in %d metadata entries", n+1, entries)
	}
}
