package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

var alterTopicID = metadata.UUID{0x4a, 1}

// alterImage: brokers 1..4 registered at offset 1 (their broker epoch),
// broker 2 registered again at offset 13; topic "t" with one partition,
// replicas [1 2 3], leader 1, leader epoch 3, ISR [1 2 3] at partition
// epoch 2 (a shrink and an expansion after its creation).
func alterImage(t *testing.T) *metadata.Image {
	t.Helper()
	img := imageWithBrokers(t, 1, 2, 3, 4)
	part := func(isr []int32, leaderEpoch, partitionEpoch int32) metadata.PartitionRecord {
		return metadata.PartitionRecord{TopicID: alterTopicID, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: isr,
			Leader: 1, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}
	}
	steps := [][]metadata.Record{
		{metadata.TopicRecord{Name: "t", ID: alterTopicID}, part([]int32{1, 2, 3}, 0, 0)},
		{part([]int32{1, 2}, 3, 1)},
		{part([]int32{1, 2, 3}, 3, 2)},
		{metadata.BrokerRecord{NodeID: 2, Host: "h", Port: 9092}},
	}
	for i, recs := range steps {
		var err error
		if img, err = img.Apply(uint64(10+i), recs...); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if img.Brokers[2].Epoch != 13 || img.Brokers[1].Epoch != 1 {
		t.Fatalf("broker epochs %+v", img.Brokers)
	}
	return img
}

// TestPlanAlterPartition has a case per check, in the order of
// controlplane's list of refusals, and cases wrong in two ways whose
// answer is the earlier check's, as Kafka's controller answers them
// (ReplicationControlManager.validateAlterPartitionData).
func TestPlanAlterPartition(t *testing.T) {
	valid := controlplane.AlterPartition{TopicID: alterTopicID, Partition: 0, LeaderID: 1, BrokerEpoch: 1,
		LeaderEpoch: 3, PartitionEpoch: 2, NewISR: []int32{1, 2}}
	tests := []struct {
		name    string
		mod     func(r *controlplane.AlterPartition)
		err     error  // nil: accepted
		msg     string // in the error
		isr     []int32
		changed bool
	}{
		{"shrink", func(r *controlplane.AlterPartition) {}, nil, "", []int32{1, 2}, true},
		{"shrink to the leader alone", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1} }, nil, "", []int32{1}, true},
		{"reorder is a change, as in Kafka", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 3, 2} }, nil, "", []int32{1, 3, 2}, true},
		{"unchanged ISR", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 2, 3} }, nil, "", []int32{1, 2, 3}, false},
		{"member epochs match or are unknown", func(r *controlplane.AlterPartition) { r.NewISRBrokerEpochs = []int64{1, 13} }, nil, "", []int32{1, 2}, true},
		{"member epoch -1 skips the check", func(r *controlplane.AlterPartition) { r.NewISRBrokerEpochs = []int64{-1, -1} }, nil, "", []int32{1, 2}, true},

		{"stale broker epoch", func(r *controlplane.AlterPartition) { r.BrokerEpoch = 0 }, controlplane.ErrStaleBrokerEpoch, "broker 1 sent broker epoch 0; it has broker epoch 1", nil, false},
		{"future broker epoch", func(r *controlplane.AlterPartition) { r.BrokerEpoch = 99 }, controlplane.ErrStaleBrokerEpoch, "broker epoch 99", nil, false},
		{"unregistered sender", func(r *controlplane.AlterPartition) { r.LeaderID = 9 }, controlplane.ErrStaleBrokerEpoch, "no registration", nil, false},
		{"unknown topic id", func(r *controlplane.AlterPartition) { r.TopicID = metadata.UUID{9} }, controlplane.ErrUnknownTopicID, "no topic with id", nil, false},
		{"zero topic id", func(r *controlplane.AlterPartition) { r.TopicID = metadata.UUID{} }, controlplane.ErrUnknownTopicID, "no topic with id", nil, false},
		{"unknown partition", func(r *controlplane.AlterPartition) { r.Partition = 1 }, controlplane.ErrUnknownTopic, `"t" has no partition 1`, nil, false},
		{"negative partition", func(r *controlplane.AlterPartition) { r.Partition = -1 }, controlplane.ErrUnknownTopic, "no partition -1", nil, false},
		{"future leader epoch", func(r *controlplane.AlterPartition) { r.LeaderEpoch = 4 }, controlplane.ErrNotController, "leader epoch 4 is ahead of this controller's 3", nil, false},
		{"future partition epoch", func(r *controlplane.AlterPartition) { r.PartitionEpoch = 3 }, controlplane.ErrNotController, "partition epoch 3 is ahead of this controller's 2", nil, false},
		{"stale leader epoch", func(r *controlplane.AlterPartition) { r.LeaderEpoch = 2 }, controlplane.ErrFencedLeaderEpoch, "leader epoch 2; the partition's is 3", nil, false},
		{"sender is not the leader", func(r *controlplane.AlterPartition) { r.LeaderID, r.BrokerEpoch = 2, 13 }, controlplane.ErrInvalidRequest, "broker 2 is not the leader (1)", nil, false},
		{"stale partition epoch", func(r *controlplane.AlterPartition) { r.PartitionEpoch = 1 }, controlplane.ErrInvalidUpdateVersion, "partition epoch 1; the partition's is 2", nil, false},
		{"new ISR without the leader", func(r *controlplane.AlterPartition) { r.NewISR = []int32{2, 3} }, controlplane.ErrInvalidRequest, "does not hold the leader 1", nil, false},
		{"empty new ISR", func(r *controlplane.AlterPartition) { r.NewISR = nil }, controlplane.ErrInvalidRequest, "does not hold the leader 1", nil, false},
		{"new ISR with a broker that is no replica", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 4} }, controlplane.ErrInvalidRequest, "4 is not a replica", nil, false},
		{"new ISR with a negative id", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, -1} }, controlplane.ErrInvalidRequest, "-1 is not a replica", nil, false},
		{"new ISR with a duplicate", func(r *controlplane.AlterPartition) { r.NewISR = []int32{1, 2, 1} }, controlplane.ErrInvalidRequest, "lists 1 twice", nil, false},
		{"new ISR of 100,000 members", func(r *controlplane.AlterPartition) { r.NewISR = slices.Repeat([]int32{1}, 100_000) }, controlplane.ErrInvalidRequest, "100000 members; the partition has 3 replicas", nil, false},
		{"broker epochs not one per member", func(r *controlplane.AlterPartition) { r.NewISRBrokerEpochs = []int64{1} }, controlplane.ErrInvalidRequest, "1 broker epochs for 2 new ISR members", nil, false},
		{"member registered again since", func(r *controlplane.AlterPartition) { r.NewISRBrokerEpochs = []int64{1, 12} }, controlplane.ErrIneligibleReplica, "member 2 was seen at broker epoch 12", nil, false},

		// Wrong in two ways: the earlier check answers.
		{"stale broker epoch and unknown topic", func(r *controlplane.AlterPartition) { r.BrokerEpoch, r.TopicID = 0, metadata.UUID{9} }, controlplane.ErrStaleBrokerEpoch, "", nil, false},
		{"future leader epoch from a non-leader", func(r *controlplane.AlterPartition) { r.LeaderID, r.BrokerEpoch, r.LeaderEpoch = 2, 13, 4 }, controlplane.ErrNotController, "", nil, false},
		{"stale leader epoch from a non-leader (a deposed leader)", func(r *controlplane.AlterPartition) { r.LeaderID, r.BrokerEpoch, r.LeaderEpoch = 2, 13, 2 }, controlplane.ErrFencedLeaderEpoch, "", nil, false},
		{"stale partition epoch from a non-leader", func(r *controlplane.AlterPartition) { r.LeaderID, r.BrokerEpoch, r.PartitionEpoch = 2, 13, 1 }, controlplane.ErrInvalidRequest, "not the leader", nil, false},
		{"stale partition epoch and an ISR without the leader", func(r *controlplane.AlterPartition) { r.PartitionEpoch, r.NewISR = 1, []int32{2} }, controlplane.ErrInvalidUpdateVersion, "", nil, false},
		{"bad ISR and a stale member epoch", func(r *controlplane.AlterPartition) { r.NewISR, r.NewISRBrokerEpochs = []int32{2, 3}, []int64{0, 0} }, controlplane.ErrInvalidRequest, "does not hold the leader", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := alterImage(t)
			req := valid
			req.NewISR = slices.Clone(valid.NewISR)
			tc.mod(&req)
			rec, changed, err := planAlterPartition(img, req)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %v; want %v containing %q", err, tc.err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want := metadata.PartitionRecord{TopicID: alterTopicID, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: tc.isr,
				Leader: 1, LeaderEpoch: 3, PartitionEpoch: 2}
			if tc.changed {
				want.PartitionEpoch = 3
			}
			if changed != tc.changed || !slices.Equal(rec.ISR, want.ISR) || !slices.Equal(rec.Replicas, want.Replicas) ||
				rec.TopicID != want.TopicID || rec.Partition != want.Partition || rec.Leader != want.Leader ||
				rec.LeaderEpoch != want.LeaderEpoch || rec.PartitionEpoch != want.PartitionEpoch {
				t.Fatalf("plan = %+v changed %v; want %+v changed %v", rec, changed, want, tc.changed)
			}
			// What the planner proposes, the metadata log accepts: the
			// two agree on the partition epoch's rule.
			if changed {
				if _, err := img.Apply(img.Offset+1, rec); err != nil {
					t.Fatalf("Apply refuses the planned record: %v", err)
				}
			}
		})
	}
}

// The planned record never aliases the request's ISR: the caller may
// reuse its slice, and the record goes into a Raft entry after
// planAlterPartition returns.
func TestPlanAlterPartitionCopiesTheISR(t *testing.T) {
	img := alterImage(t)
	isr := []int32{1, 2}
	rec, _, err := planAlterPartition(img, controlplane.AlterPartition{TopicID: alterTopicID, LeaderID: 1, BrokerEpoch: 1,
		LeaderEpoch: 3, PartitionEpoch: 2, NewISR: isr})
	if err != nil {
		t.Fatal(err)
	}
	isr[1] = 3
	if rec.ISR[1] != 2 {
		t.Fatalf("planned ISR %v follows the request's slice", rec.ISR)
	}
}
