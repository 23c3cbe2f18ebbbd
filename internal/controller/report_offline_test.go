package controller_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// ReportOfflineReplicas through a running controller: the marks and the
// partitions' changes commit together and are in the image when it
// returns; a repeat, an unknown topic and a partition the broker holds
// no replica of commit nothing; a stale epoch, an unregistered broker
// and malformed reports are refused, nothing committed; the count is in
// FenceStats.
func TestReportOfflineReplicas(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	epochs := map[int32]int64{}
	for id := int32(2); id <= 3; id++ {
		epochs[id] = registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092 + id, IncarnationID: metadata.UUID{byte(id)}})
	}
	tp := create(t, c, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{2, 3}, {1, 2}, {1, 3}}})[0]
	at := func(p int32) metadata.TopicIDPartition {
		return metadata.TopicIDPartition{TopicID: tp.ID, Partition: p}
	}

	if err := c.ReportOfflineReplicas(ctx, 2, epochs[2], []metadata.TopicIDPartition{at(0), at(1), at(2)}); err != nil {
		t.Fatal(err)
	}
	img := c.Image()
	p0, p1, p2 := img.Topics["t"].Partitions[0], img.Topics["t"].Partitions[1], img.Topics["t"].Partitions[2]
	if p0.Leader != 3 || p0.LeaderEpoch != 1 || !slices.Equal(p0.ISR, []int32{3}) {
		t.Errorf("partition 2 led: %+v, want leader 3, epoch 1, ISR [3]", p0)
	}
	if p1.Leader != 1 || p1.LeaderEpoch != 0 || !slices.Equal(p1.ISR, []int32{1}) {
		t.Errorf("partition 2 followed: %+v, want leader 1, epoch 0, ISR [1]", p1)
	}
	if p2.PartitionEpoch != 0 || img.ReplicaOffline(2, tp.ID, 2) {
		t.Errorf("partition 2 holds no replica of changed or marked: %+v, offline %v", p2, img.OfflineReplicas)
	}
	if !img.ReplicaOffline(2, tp.ID, 0) || !img.ReplicaOffline(2, tp.ID, 1) || img.ReplicaOffline(3, tp.ID, 0) {
		t.Fatalf("offline replicas %v, want broker 2's of t-0 and t-1", img.OfflineReplicas)
	}
	if got := c.FenceStats().OfflineReplicas; got != 2 {
		t.Errorf("FenceStats.OfflineReplicas %d, want 2", got)
	}

	for _, tc := range []struct {
		name   string
		broker int32
		epoch  int64
		parts  []metadata.TopicIDPartition
		want   error
	}{
		{"a repeat", 2, epochs[2], []metadata.TopicIDPartition{at(0), at(1)}, nil},
		{"an unknown topic", 3, epochs[3], []metadata.TopicIDPartition{{TopicID: metadata.UUID{0xde, 0xad}}}, nil},
		{"a partition past the end", 3, epochs[3], []metadata.TopicIDPartition{at(9)}, nil},
		{"nothing", 3, epochs[3], nil, nil},
		{"a stale epoch", 3, epochs[3] - 1, []metadata.TopicIDPartition{at(0)}, controlplane.ErrStaleBrokerEpoch},
		{"an unregistered broker", 7, epochs[3], []metadata.TopicIDPartition{at(0)}, controlplane.ErrBrokerNotRegistered},
		{"the zero topic id", 3, epochs[3], []metadata.TopicIDPartition{{}}, controlplane.ErrInvalidRequest},
		{"a negative partition", 3, epochs[3], []metadata.TopicIDPartition{at(-1)}, controlplane.ErrInvalidRequest},
		{"too many", 3, epochs[3], make([]metadata.TopicIDPartition, controlplane.MaxReportedOfflineReplicas+1), controlplane.ErrInvalidRequest},
	} {
		before := c.Image().Offset
		err := c.ReportOfflineReplicas(ctx, tc.broker, tc.epoch, tc.parts)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if after := c.Image().Offset; after != before {
			t.Errorf("%s committed: offset %d -> %d", tc.name, before, after)
		}
	}
}
