package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// offlineImage is fencingImage raised to OfflineReplicasMetadataVersion,
// with a second topic "u" whose one partition broker 2 holds no replica
// of (replicas [1 3]).
func offlineImage(t *testing.T) (*metadata.Image, metadata.UUID, metadata.UUID) {
	t.Helper()
	img, id := fencingImage(t)
	u := metadata.UUID{8}
	img = apply(t, img, []metadata.Record{
		metadata.MetadataVersionRecord{Version: metadata.OfflineReplicasMetadataVersion},
		metadata.TopicRecord{Name: "u", ID: u},
		metadata.PartitionRecord{TopicID: u, Partition: 0, Replicas: []int32{1, 3}, ISR: []int32{1, 3}, Leader: 1},
	})
	return img, id, u
}

func tp(id metadata.UUID, p int32) metadata.TopicIDPartition {
	return metadata.TopicIDPartition{TopicID: id, Partition: p}
}

// An offline replica leaves its ISR and its leadership as a fence would
// for that partition alone: a follower leaves the ISR (same leader, same
// epoch), a leader hands over to the next ISR member in replica order
// (epoch + 1), the last ISR member stays with no leader. The records
// come first in the batch. What the request names that cannot be acted
// on is passed over: a partition named twice, of an unknown topic, past
// the topic's end, or on other brokers; a repeat commits nothing.
func TestPlanOfflineReplicas(t *testing.T) {
	img, id, u := offlineImage(t)
	epoch := img.Brokers[2].Epoch
	recs, err := planOfflineReplicas(img, 2, epoch, []metadata.TopicIDPartition{
		tp(id, 0), tp(id, 1), tp(id, 3), tp(id, 1), // 1 twice
		tp(metadata.UUID{9}, 0), tp(id, 7), tp(u, 0), // unknown topic, no such partition, not a replica
	})
	if err != nil {
		t.Fatal(err)
	}
	var marked []int32
	for i, r := range recs {
		if o, ok := r.(metadata.OfflineReplicaRecord); ok {
			if i != len(marked) || o.NodeID != 2 || o.Epoch != epoch || o.TopicID != id {
				t.Fatalf("record %d: %+v, want the marks of broker 2 at epoch %d first", i, o, epoch)
			}
			marked = append(marked, o.Partition)
		}
	}
	if !slices.Equal(marked, []int32{0, 1, 3}) || len(recs) != 6 {
		t.Fatalf("marked %v in %d records, want partitions [0 1 3] and their 3 changes", marked, len(recs))
	}
	img = apply(t, img, recs)
	wantPartition(t, img, 0, []int32{1, 3}, 1, 0, 1) // a follower left
	wantPartition(t, img, 1, []int32{3, 1}, 3, 1, 1) // a leader: 3 is next in replica order
	wantPartition(t, img, 3, []int32{2}, -1, 1, 1)   // the last member stays, no leader
	wantPartition(t, img, 2, []int32{2, 1}, 2, 0, 0) // not named: untouched
	for _, p := range []int32{0, 1, 3} {
		if !img.ReplicaOffline(2, id, p) {
			t.Errorf("partition %d: broker 2's replica not offline", p)
		}
	}
	if img.ReplicaOffline(2, id, 2) || img.ReplicaOffline(2, u, 0) || img.ReplicaOffline(1, id, 0) {
		t.Fatalf("offline replicas %v, want broker 2's of t-0, t-1, t-3 only", img.OfflineReplicas)
	}
	if again, err := planOfflineReplicas(img, 2, epoch, []metadata.TopicIDPartition{tp(id, 0), tp(id, 3)}); err != nil || len(again) != 0 {
		t.Fatalf("a repeat: %v, %v; want nothing", again, err)
	}

	for _, tc := range []struct {
		name   string
		broker int32
		epoch  int64
		want   error
	}{
		{"a stale broker epoch (a process since replaced)", 2, epoch - 1, controlplane.ErrStaleBrokerEpoch},
		{"an unregistered broker", 9, epoch, controlplane.ErrBrokerNotRegistered},
	} {
		if recs, err := planOfflineReplicas(img, tc.broker, tc.epoch, []metadata.TopicIDPartition{tp(id, 2)}); !errors.Is(err, tc.want) || recs != nil {
			t.Errorf("%s: %v, %v; want %v", tc.name, recs, err, tc.want)
		}
	}
	old, _ := fencingImage(t)
	if _, err := planOfflineReplicas(old, 2, old.Brokers[2].Epoch, []metadata.TopicIDPartition{tp(id, 2)}); !errors.Is(err, controlplane.ErrInvalidRequest) ||
		!strings.Contains(err.Error(), "metadata version 7") {
		t.Errorf("a log below version 7: %v, want INVALID_REQUEST naming version 7", err)
	}
	for _, bad := range [][]metadata.TopicIDPartition{
		{tp(metadata.UUID{}, 0)},
		{tp(id, -1)},
		make([]metadata.TopicIDPartition, controlplane.MaxReportedOfflineReplicas+1),
	} {
		if err := checkOfflineReport(bad); !errors.Is(err, controlplane.ErrInvalidRequest) {
			t.Errorf("report of %d replicas (first %+v): %v, want INVALID_REQUEST", len(bad), bad[0], err)
		}
	}
	full := make([]metadata.TopicIDPartition, controlplane.MaxReportedOfflineReplicas)
	for i := range full {
		full[i] = tp(id, int32(i))
	}
	if err := checkOfflineReport(full); err != nil {
		t.Errorf("a full report: %v", err)
	}
}

// While its replica is offline a broker is elected nowhere for that
// partition and let into no ISR of it, by any path: a fence of another
// member, an unfence of itself, a preferred election, an unclean one
// (asked for, or by the topic's config), a reassignment's completion, an
// AlterPartition expansion. A new process of the broker (its
// registration) clears the mark, and its unfence then elects it where it
// was the last ISR member.
func TestOfflineReplicaNeverElected(t *testing.T) {
	img, id, _ := offlineImage(t)
	v := "true"
	img = apply(t, img, []metadata.Record{metadata.ConfigRecord{TopicID: id, Name: UncleanLeaderElectionConfig, Value: &v}})
	// Partition 2 (replicas [2 4 1], ISR [2 1], leader 2): 1 is fenced,
	// so 2 is its last ISR member, and then 2's replica goes offline.
	img = apply(t, img, planFence(img, 1))
	wantPartition(t, img, 2, []int32{2}, 2, 0, 1)
	img = apply(t, img, mustPlanOffline(t, img, 2, tp(id, 0), tp(id, 1), tp(id, 2), tp(id, 3)))
	wantPartition(t, img, 2, []int32{2}, -1, 1, 2)
	wantPartition(t, img, 3, []int32{2}, -1, 1, 1)
	wantPartition(t, img, 1, []int32{3}, 3, 1, 2) // 1 was fenced already

	// Preferred: 2 is partition 3's preferred replica and its ISR.
	t3 := img.Topics["t"]
	if _, err := planPreferred(img, t3, 3); !errors.Is(err, controlplane.ErrPreferredLeaderNotAvailable) || !strings.Contains(err.Error(), "offline") {
		t.Errorf("preferred election of an offline replica: %v, want PREFERRED_LEADER_NOT_AVAILABLE saying offline", err)
	}
	if recs, _, _ := planRebalance(img, 0, 10); slices.ContainsFunc(recs, func(r metadata.Record) bool { return r.(metadata.PartitionRecord).Leader == 2 }) {
		t.Errorf("the leadership balance elects broker 2: %v", recs)
	}

	// Fenced and unfenced (the same registration): not elected where it
	// is the last ISR member.
	img = apply(t, img, planFence(img, 2))
	unfence := planUnfence(img, 2)
	if len(unfence) != 1 {
		t.Fatalf("unfencing broker 2: %v, want the unfence record alone", unfence)
	}
	img = apply(t, img, unfence)
	wantPartition(t, img, 3, []int32{2}, -1, 1, 1)

	// Unclean: partition 2's live replicas without 2 are [4] (1 is
	// fenced); partition 3 has none.
	var cand []uncleanCandidate
	for _, c := range uncleanCandidates(img) {
		if c.topic.ID == id {
			cand = append(cand, c)
		}
	}
	if len(cand) != 1 || cand[0].partition != 2 || !slices.Equal(cand[0].live, []int32{4}) {
		t.Fatalf("unclean candidates %+v, want partition 2 with live replicas [4]", cand)
	}
	if recs, _ := planUnclean(img, []uncleanElection{{candidate: cand[0], leader: logEnd{broker: 2, epoch: 1, end: 10}}}); len(recs) != 0 {
		t.Errorf("an unclean election of the offline replica: %v, want none", recs)
	}
	if got := uncleanRequested(img, []controlplane.TopicPartition{{Topic: "t", Partition: 3}}); len(got) != 0 {
		t.Errorf("an unclean election asked for where only the offline replica lives: %+v, want no candidate", got)
	}
	if _, _, err := planElection(img, controlplane.ElectUnclean, controlplane.TopicPartition{Topic: "t", Partition: 3}, nil); !errors.Is(err, controlplane.ErrEligibleLeadersNotAvailable) {
		t.Errorf("an unclean election of partition 3: %v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", err)
	}

	// Back into the ISR through its leader: refused.
	p0 := img.Topics["t"].Partitions[0]
	req := controlplane.AlterPartition{TopicID: id, Partition: 0, LeaderID: p0.Leader, BrokerEpoch: img.Brokers[p0.Leader].Epoch,
		LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: append(slices.Clone(p0.ISR), 2)}
	if _, _, err := planAlterPartition(img, req); !errors.Is(err, controlplane.ErrIneligibleReplica) || !strings.Contains(err.Error(), "offline") {
		t.Errorf("ISR join of an offline replica: %v, want INELIGIBLE_REPLICA saying offline", err)
	}

	// A reassignment of partition 3 onto [4 2] copies to 4; once 4 is in
	// the ISR the completion elects 4, never 2.
	img = apply(t, img, start(img, img.Topics["t"], 3, img.Topics["t"].Partitions[3], []int32{4, 2}))
	p3 := img.Topics["t"].Partitions[3]
	img = apply(t, img, []metadata.Record{metadata.PartitionRecord{TopicID: id, Partition: 3, Replicas: p3.Replicas, ISR: []int32{2, 4},
		Leader: -1, LeaderEpoch: p3.LeaderEpoch, PartitionEpoch: p3.PartitionEpoch + 1}})
	done, ok := completion(img, img.Topics["t"], 3, img.Topics["t"].Partitions[3])
	if !ok || done[1].(metadata.PartitionRecord).Leader != 4 {
		t.Fatalf("completion: %v %v, want 4 elected", done, ok)
	}

	// A new process of broker 2: the mark goes with the old one's
	// registration, and its unfence elects it where it is the last ISR
	// member again.
	img = apply(t, img, planRegistration(img, metadata.BrokerRecord{NodeID: 2, Host: "h", Port: 9092, IncarnationID: metadata.UUID{5}}))
	if img.ReplicaOffline(2, id, 2) || img.OfflineReplicas != nil {
		t.Fatalf("offline replicas after broker 2's new registration: %v", img.OfflineReplicas)
	}
	img = apply(t, img, planUnfence(img, 2))
	if p := img.Topics["t"].Partitions[2]; p.Leader != 2 {
		t.Fatalf("partition 2 after broker 2's new process was unfenced: %+v, want it elected", p)
	}
}

func mustPlanOffline(t *testing.T, img *metadata.Image, broker int32, parts ...metadata.TopicIDPartition) []metadata.Record {
	t.Helper()
	recs, err := planOfflineReplicas(img, broker, img.Brokers[broker].Epoch, parts)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
