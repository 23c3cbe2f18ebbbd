package controller_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

func reassign(t *testing.T, ic *isrCluster, replicas ...int32) error {
	t.Helper()
	res, err := ic.c.AlterPartitionReassignments(ctxT(t), []controlplane.Reassignment{
		{TopicPartition: controlplane.TopicPartition{Topic: "t", Partition: 0}, Replicas: replicas}})
	if err != nil {
		t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	return res[0].Err
}

func wantPartition(t *testing.T, what string, p metadata.Partition, replicas, isr []int32, leader int32, adding, removing []int32) {
	t.Helper()
	if !slices.Equal(p.Replicas, replicas) || !slices.Equal(p.ISR, isr) || p.Leader != leader ||
		!slices.Equal(p.Adding, adding) || !slices.Equal(p.Removing, removing) {
		t.Fatalf("%s: replicas %v ISR %v leader %d adding %v removing %v; want %v %v %d %v %v",
			what, p.Replicas, p.ISR, p.Leader, p.Adding, p.Removing, replicas, isr, leader, adding, removing)
	}
}

// A reassignment moves t-0 from [1 2 3] to [4 2 3] without going below
// three replicas: widened to [4 2 3 1] until 4 is in the ISR, then
// narrowed, the leader (1, removed) replaced by the first target
// replica in the ISR, leader epoch + 1.
func TestReassignmentCompletesOnceTheAddedReplicaIsInTheISR(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	before := ic.partition()
	if err := reassign(t, ic, 4, 2, 3); err != nil {
		t.Fatal(err)
	}
	p := ic.partition()
	wantPartition(t, "started", p, []int32{4, 2, 3, 1}, []int32{1, 2, 3}, 1, []int32{4}, []int32{1})
	if p.LeaderEpoch != before.LeaderEpoch {
		t.Errorf("the start changed the leader epoch: %d -> %d", before.LeaderEpoch, p.LeaderEpoch)
	}
	// The same target again changes nothing.
	off := ic.c.Image().Offset
	if err := reassign(t, ic, 4, 2, 3); err != nil || ic.c.Image().Offset != off {
		t.Fatalf("the same target again: %v, offset %d -> %d", err, off, ic.c.Image().Offset)
	}
	// The leader adds the caught-up replica; the controller completes.
	if _, err := ic.c.AlterPartition(ctxT(t), ic.request(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if ic.partition().Reassigning() {
			return errors.New("not completed yet")
		}
		return nil
	})
	p = ic.partition()
	wantPartition(t, "completed", p, []int32{4, 2, 3}, []int32{2, 3, 4}, 4, nil, nil)
	if p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Errorf("leader epoch %d after the leader was moved off, want %d", p.LeaderEpoch, before.LeaderEpoch+1)
	}
	if n := ic.c.Image().Reassignments; n != 0 {
		t.Errorf("Reassignments = %d after the completion", n)
	}

	// Only a removal: nothing to copy, so it completes at once.
	if err := reassign(t, ic, 4, 2); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "a removal", ic.partition(), []int32{4, 2}, []int32{2, 4}, 4, nil, nil)
	// Only a new order: one change, no reassignment.
	if err := reassign(t, ic, 2, 4); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "a reorder", ic.partition(), []int32{2, 4}, []int32{2, 4}, 4, nil, nil)
}

// A cancel goes back to the original replicas; a new target replaces
// the one in progress; neither loses the ISR's members of what stays.
func TestReassignmentCancelAndReplace(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	if err := reassign(t, ic, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "started", ic.partition(), []int32{2, 3, 4, 1}, []int32{1, 2, 3}, 1, []int32{4}, []int32{1})
	if err := reassign(t, ic); err != nil { // nil replicas: cancel
		t.Fatal(err)
	}
	wantPartition(t, "cancelled", ic.partition(), []int32{2, 3, 1}, []int32{1, 2, 3}, 1, nil, nil)
	if err := reassign(t, ic); !errors.Is(err, controlplane.ErrNoReassignmentInProgress) {
		t.Fatalf("a second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}

	// 4 joins the ISR as an added replica, then the target changes to
	// one without it: it leaves the replicas and the ISR.
	if err := reassign(t, ic, 4, 2, 3, 1); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "a fourth replica", ic.partition(), []int32{4, 2, 3, 1}, []int32{1, 2, 3}, 1, []int32{4}, nil)
	if err := reassign(t, ic, 2, 3); err != nil {
		t.Fatal(err)
	}
	// Reverted to [2 3 1], then [2 3] with 1 removed: nothing to copy,
	// so completed, and 1 (removed) no longer leads.
	p := ic.partition()
	wantPartition(t, "replaced", p, []int32{2, 3}, []int32{2, 3}, 2, nil, nil)
}

// Bad requests: each partition's error is its Kafka code, and nothing
// is committed.
func TestReassignmentRefusals(t *testing.T) {
	t.Parallel()
	ic := openISRCluster(t)
	tp := func(topic string, p int32) controlplane.TopicPartition {
		return controlplane.TopicPartition{Topic: topic, Partition: p}
	}
	off := ic.c.Image().Offset
	for _, tc := range []struct {
		name string
		reqs []controlplane.Reassignment
		want []error
	}{
		{"unknown topic", []controlplane.Reassignment{{TopicPartition: tp("nope", 0), Replicas: []int32{1}}}, []error{controlplane.ErrUnknownTopic}},
		{"negative partition", []controlplane.Reassignment{{TopicPartition: tp("t", -1), Replicas: []int32{1}}}, []error{controlplane.ErrUnknownTopic}},
		{"partition past the end", []controlplane.Reassignment{{TopicPartition: tp("t", 1), Replicas: []int32{1}}}, []error{controlplane.ErrUnknownTopic}},
		{"RF 0", []controlplane.Reassignment{{TopicPartition: tp("t", 0), Replicas: []int32{}}}, []error{controlplane.ErrInvalidReplicaAssignment}},
		{"a broker twice", []controlplane.Reassignment{{TopicPartition: tp("t", 0), Replicas: []int32{2, 2, 3}}}, []error{controlplane.ErrInvalidReplicaAssignment}},
		{"an unregistered broker", []controlplane.Reassignment{{TopicPartition: tp("t", 0), Replicas: []int32{1, 2, 9}}}, []error{controlplane.ErrInvalidReplicaAssignment}},
		{"a negative broker id", []controlplane.Reassignment{{TopicPartition: tp("t", 0), Replicas: []int32{1, -1}}}, []error{controlplane.ErrInvalidReplicaAssignment}},
		{"cancel with none", []controlplane.Reassignment{{TopicPartition: tp("t", 0)}}, []error{controlplane.ErrNoReassignmentInProgress}},
		{"named twice", []controlplane.Reassignment{{TopicPartition: tp("t", 0), Replicas: []int32{1, 2, 9}}, {TopicPartition: tp("t", 0), Replicas: []int32{1, 2, 3}}},
			[]error{controlplane.ErrInvalidReplicaAssignment, controlplane.ErrInvalidRequest}},
	} {
		res, err := ic.c.AlterPartitionReassignments(ctxT(t), tc.reqs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, w := range tc.want {
			if !errors.Is(res[i].Err, w) {
				t.Errorf("%s: partition %d: %v, want %v", tc.name, i, res[i].Err, w)
			}
		}
	}
	if got := ic.c.Image().Offset; got != off {
		t.Errorf("refused requests committed something: offset %d -> %d", off, got)
	}
	wantPartition(t, "after the refusals", ic.partition(), []int32{1, 2, 3}, []int32{1, 2, 3}, 1, nil, nil)
}
