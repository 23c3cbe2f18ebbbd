package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// fencingImage is a version-2 log with brokers 1-4 unfenced and topic
// "t" of five partitions:
//
//	0: replicas [1 2 3], ISR [1 2 3], leader 1
//	1: replicas [2 3 1], ISR [2 3 1], leader 2
//	2: replicas [2 4 1], ISR [2 1],   leader 2 (4 is out of the ISR)
//	3: replicas [2],     ISR [2],     leader 2 (the last member)
//	4: replicas [2 4 3], ISR [2 4],   leader 2, 4 fenced (set by the test)
func fencingImage(t *testing.T) (*metadata.Image, metadata.UUID) {
	t.Helper()
	id := metadata.UUID{7}
	recs := []metadata.Record{metadata.MetadataVersionRecord{Version: metadata.FencingMetadataVersion}}
	for b := int32(1); b <= 4; b++ {
		recs = append(recs, metadata.BrokerRecord{NodeID: b, Host: "h", Port: 9092})
	}
	img, err := metadata.Empty(testConfigs).Apply(1, recs...)
	if err != nil {
		t.Fatal(err)
	}
	recs = nil
	for b := int32(1); b <= 4; b++ {
		recs = append(recs, metadata.UnfenceBrokerRecord{NodeID: b, Epoch: 1})
	}
	recs = append(recs, metadata.TopicRecord{Name: "t", ID: id})
	for i, p := range []metadata.Partition{
		{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		{Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		{Replicas: []int32{2, 4, 1}, ISR: []int32{2, 1}, Leader: 2},
		{Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
		{Replicas: []int32{2, 4, 3}, ISR: []int32{2, 4}, Leader: 2},
	} {
		recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: int32(i), Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader})
	}
	if img, err = img.Apply(2, recs...); err != nil {
		t.Fatal(err)
	}
	return img, id
}

func apply(t *testing.T, img *metadata.Image, recs []metadata.Record) *metadata.Image {
	t.Helper()
	next, err := img.Apply(img.Offset+1, recs...)
	if err != nil {
		t.Fatalf("the plan does not apply: %v", err)
	}
	return next
}

func wantPartition(t *testing.T, img *metadata.Image, p int, isr []int32, leader, leaderEpoch, partitionEpoch int32) {
	t.Helper()
	got := img.Topics["t"].Partitions[p]
	if !slices.Equal(got.ISR, isr) || got.Leader != leader || got.LeaderEpoch != leaderEpoch || got.PartitionEpoch != partitionEpoch {
		t.Errorf("partition %d: ISR %v leader %d leader epoch %d partition epoch %d; want %v, %d, %d, %d",
			p, got.ISR, got.Leader, got.LeaderEpoch, got.PartitionEpoch, isr, leader, leaderEpoch, partitionEpoch)
	}
}

// Fencing a broker takes it out of every ISR, elects the next ISR member
// in replica order that is not fenced where it led (epoch + 1), and
// leaves it alone in an ISR it is the last member of, with no leader.
// Unfencing it elects it there again.
func TestPlanFenceAndUnfence(t *testing.T) {
	img, _ := fencingImage(t)
	img = apply(t, img, planFence(img, 4)) // 4 first: partition 4's ISR loses it
	wantPartition(t, img, 4, []int32{2}, 2, 0, 1)
	wantPartition(t, img, 2, []int32{2, 1}, 2, 0, 0) // 4 was not in the ISR: unchanged

	img = apply(t, img, planFence(img, 2))
	if !img.Brokers[2].Fenced {
		t.Fatal("broker 2 not fenced")
	}
	wantPartition(t, img, 0, []int32{1, 3}, 1, 0, 1) // a follower left: same leader, same epoch
	wantPartition(t, img, 1, []int32{3, 1}, 3, 1, 1) // 3 is next in replica order
	wantPartition(t, img, 2, []int32{1}, 1, 1, 1)    // 4 is next but not in the ISR
	wantPartition(t, img, 3, []int32{2}, -1, 1, 1)   // the last member stays, no leader
	wantPartition(t, img, 4, []int32{2}, -1, 1, 2)   // 4 is fenced and out: no leader
	if recs := planFence(img, 2); recs != nil {
		t.Errorf("fencing a fenced broker again: %v, want nothing", recs)
	}

	img = apply(t, img, planUnfence(img, 2))
	wantPartition(t, img, 3, []int32{2}, 2, 2, 2) // back as leader
	wantPartition(t, img, 4, []int32{2}, 2, 2, 3)
	wantPartition(t, img, 1, []int32{3, 1}, 3, 1, 1) // it rejoins this ISR through its leader
	if recs := planUnfence(img, 2); recs != nil {
		t.Errorf("unfencing an unfenced broker: %v, want nothing", recs)
	}
}

// A controlled shutdown moves a broker's leaderships and ISR places as a
// fence does but leaves it unfenced; while it lasts the broker is never
// elected, never rejoins an ISR and is not unfenced by heartbeats; its
// next registration (a new process) ends it.
func TestPlanControlledShutdown(t *testing.T) {
	img, id := fencingImage(t)
	if recs := planControlledShutdown(img, 2); recs != nil {
		t.Fatalf("a version-%d log cannot say controlled shutdown, yet the plan is %v", img.MetadataVersion, recs)
	}
	img = apply(t, img, []metadata.Record{metadata.MetadataVersionRecord{Version: metadata.ControlledShutdownMetadataVersion}})
	img = apply(t, img, planControlledShutdown(img, 2))
	if b := img.Brokers[2]; b.Fenced || !b.ShuttingDown || b.Active() {
		t.Fatalf("broker 2 after its controlled shutdown: %+v, want shutting down, not fenced", b)
	}
	wantPartition(t, img, 0, []int32{1, 3}, 1, 0, 1)
	wantPartition(t, img, 1, []int32{3, 1}, 3, 1, 1)
	wantPartition(t, img, 2, []int32{1}, 1, 1, 1)
	wantPartition(t, img, 3, []int32{2}, -1, 1, 1) // the last member: offline, as for a fence
	wantPartition(t, img, 4, []int32{4}, 4, 1, 1)
	if leadsAny(img, 2) {
		t.Error("leadsAny: broker 2 still leads a partition")
	}
	if recs := planControlledShutdown(img, 2); recs != nil {
		t.Errorf("a second controlled shutdown: %v, want nothing", recs)
	}
	if recs := planUnfence(img, 2); recs != nil {
		t.Errorf("unfencing a broker in controlled shutdown: %v, want nothing", recs)
	}

	// Its leader still takes it for a caught-up follower: refused.
	p := img.Topics["t"].Partitions[0]
	req := controlplane.AlterPartition{TopicID: id, Partition: 0, LeaderID: 1, BrokerEpoch: 1,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1, 3, 2}}
	if _, _, err := planAlterPartition(img, req); !errors.Is(err, controlplane.ErrIneligibleReplica) {
		t.Errorf("ISR join of a broker in controlled shutdown: %v, want ErrIneligibleReplica", err)
	}
	// Its session lapses (the process exited): fenced, and still not
	// elected where it is the last ISR member.
	img = apply(t, img, planFence(img, 2))
	if recs := planUnfence(img, 2); recs != nil {
		t.Errorf("unfencing a fenced broker in controlled shutdown: %v, want nothing", recs)
	}
	if _, err := img.Apply(img.Offset+1, metadata.PartitionRecord{TopicID: id, Partition: 3, Replicas: []int32{2}, ISR: []int32{2},
		Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2}); err == nil || !strings.Contains(err.Error(), "leader 2 is fenced") {
		t.Errorf("broker 2 made leader while fenced and in controlled shutdown: %v, want refused as fenced", err)
	}

	// It starts again: a new registration, fenced and not shutting down,
	// unfenced by its heartbeats, elected where it is the last member.
	img = apply(t, img, planRegistration(img, metadata.BrokerRecord{NodeID: 2, Host: "h", Port: 9092, IncarnationID: metadata.UUID{3}}))
	if b := img.Brokers[2]; !b.Fenced || b.ShuttingDown {
		t.Fatalf("broker 2 registered again: %+v, want fenced and not shutting down", b)
	}
	img = apply(t, img, planUnfence(img, 2))
	wantPartition(t, img, 3, []int32{2}, 2, 2, 2)
}

// A registration by a new process of a broker that is not fenced yet
// fences the old one in the same batch; a retry by the same process
// keeps what it holds.
func TestPlanRegistration(t *testing.T) {
	img, _ := fencingImage(t)
	old := img.Brokers[2]
	same := metadata.BrokerRecord{NodeID: 2, Host: "h", Port: 9092, IncarnationID: old.IncarnationID}
	if recs := planRegistration(img, same); len(recs) != 6 {
		t.Fatalf("a registration of a broker without an incarnation is a new process, which fences the old in all five partitions: %d records", len(recs))
	}

	// Give broker 2 an incarnation, then register it again under it
	// (a retry) and under another (a new process).
	b := metadata.BrokerRecord{NodeID: 2, Host: "h", Port: 9092, IncarnationID: metadata.UUID{1}}
	img = apply(t, img, planRegistration(img, b))
	img = apply(t, img, planUnfence(img, 2))
	wantPartition(t, img, 3, []int32{2}, 2, 2, 2)
	if recs := planRegistration(img, b); len(recs) != 1 {
		t.Fatalf("a retry of the same process's registration: %v, want the registration alone", recs)
	}
	b.IncarnationID = metadata.UUID{2}
	img = apply(t, img, planRegistration(img, b))
	if got := img.Brokers[2]; !got.Fenced || got.IncarnationID != b.IncarnationID {
		t.Fatalf("new process registered as %+v, want fenced with the new incarnation", got)
	}
	wantPartition(t, img, 3, []int32{2}, -1, 3, 3)
	wantPartition(t, img, 0, []int32{1, 3}, 1, 0, 1) // out since the first new process
}

// A log at version 1 has no fencing: registrations are unfenced and a
// fence record is refused.
func TestVersionOneHasNoFencing(t *testing.T) {
	img := imageWithBrokers(t, 1)
	if img.Brokers[1].Fenced {
		t.Fatal("a version-less log fenced a registration")
	}
	if _, err := img.Apply(2, planFence(img, 1)...); err == nil {
		t.Fatal("a fence record applied to a log without fencing")
	}
}

// A manual assignment may name a fenced broker, as in KRaft: the new
// partition's ISR is its live replicas and its leader the first of them;
// one with no live replica is refused.
func TestAssignmentsWithAFencedBroker(t *testing.T) {
	img, _ := fencingImage(t)
	img = apply(t, img, planFence(img, 2))
	if _, err := checkAssignments(img, [][]int32{{2, 3, 1}}, -1); err != nil {
		t.Fatalf("an assignment naming a fenced broker among live ones: %v", err)
	}
	p := newPartitions(img, [][]int32{{2, 3, 1}})[0]
	if !slices.Equal(p.Replicas, []int32{2, 3, 1}) || !slices.Equal(p.ISR, []int32{3, 1}) || p.Leader != 3 {
		t.Fatalf("new partition %+v, want replicas [2 3 1], ISR [3 1], leader 3", p)
	}
	if _, err := checkAssignments(img, [][]int32{{1}, {2}}, -1); !errors.Is(err, controlplane.ErrInvalidReplicationFactor) {
		t.Fatalf("a partition whose only replica is fenced: %v, want INVALID_REPLICATION_FACTOR", err)
	}
}
