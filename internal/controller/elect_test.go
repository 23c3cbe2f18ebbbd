package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// movedImage is fencingImage after broker 2 was fenced and came back:
// it leads nothing, and it is back in the ISR of partition 1 only.
func movedImage(t *testing.T) (*metadata.Image, metadata.UUID) {
	t.Helper()
	img, id := fencingImage(t)
	img = apply(t, img, planFence(img, 2))
	img = apply(t, img, planUnfence(img, 2))
	p := img.Topics["t"].Partitions[1]
	img = apply(t, img, []metadata.Record{metadata.PartitionRecord{TopicID: id, Partition: 1, Replicas: p.Replicas,
		ISR: append(slices.Clone(p.ISR), 2), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}})
	return img, id
}

func TestPlanPreferred(t *testing.T) {
	img, _ := movedImage(t)
	tp := img.Topics["t"]
	if _, err := planPreferred(img, tp, 0); !errors.Is(err, controlplane.ErrElectionNotNeeded) {
		t.Errorf("partition 0, led by its preferred replica: %v, want ELECTION_NOT_NEEDED", err)
	}
	if _, err := planPreferred(img, tp, 2); !errors.Is(err, controlplane.ErrPreferredLeaderNotAvailable) {
		t.Errorf("partition 2, preferred replica out of the ISR: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
	before := tp.Partitions[1]
	rec, err := planPreferred(img, tp, 1)
	if err != nil {
		t.Fatalf("partition 1: %v", err)
	}
	after := apply(t, img, []metadata.Record{rec}).Topics["t"].Partitions[1]
	if after.Leader != 2 || after.LeaderEpoch != before.LeaderEpoch+1 || after.PartitionEpoch != before.PartitionEpoch+1 ||
		!slices.Equal(after.ISR, before.ISR) {
		t.Errorf("partition 1 after its preferred election: %+v (before %+v); want leader 2, epochs + 1, the same ISR", after, before)
	}

	// Neither a fenced nor a shutting-down preferred replica is elected.
	fenced := apply(t, img, planFence(img, 2))
	if _, err := planPreferred(fenced, fenced.Topics["t"], 1); !errors.Is(err, controlplane.ErrPreferredLeaderNotAvailable) {
		t.Errorf("fenced preferred replica: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
	leaving := apply(t, img, []metadata.Record{metadata.MetadataVersionRecord{Version: metadata.ControlledShutdownMetadataVersion},
		metadata.ControlledShutdownRecord{NodeID: 2, Epoch: img.Brokers[2].Epoch}})
	if _, err := planPreferred(leaving, leaving.Topics["t"], 1); !errors.Is(err, controlplane.ErrPreferredLeaderNotAvailable) {
		t.Errorf("shutting-down preferred replica: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
}

// Broker 2 prefers partitions 1-4 and leads only what unfencing gave it
// back (partition 3, whose ISR it alone is): above the threshold.
// Partition 1 can be elected (2 is back in its ISR), 2 and 4 cannot (2
// is out of their ISRs).
func TestPlanRebalance(t *testing.T) {
	img, _ := movedImage(t)
	recs, imbalanced, more := planRebalance(img, DefaultLeaderImbalancePerBrokerPercentage, maxElectionsPerBatch)
	if !slices.Equal(imbalanced, []int32{2}) || more {
		t.Fatalf("imbalanced %v (more %v), want [2]", imbalanced, more)
	}
	var elected []int32
	for _, r := range recs {
		p := r.(metadata.PartitionRecord)
		if p.Leader != 2 {
			t.Errorf("an election of %d, not of the preferred replica 2", p.Leader)
		}
		elected = append(elected, p.Partition)
	}
	after := apply(t, img, recs)
	for _, i := range elected {
		if after.Topics["t"].Partitions[i].Leader != 2 {
			t.Errorf("partition %d not led by 2 after the rebalance", i)
		}
	}
	if !slices.Contains(elected, 1) || slices.Contains(elected, 2) || slices.Contains(elected, 4) {
		t.Errorf("elected partitions %v: want 1, never 2 or 4 (2 is out of their ISR)", elected)
	}
	if again, _, _ := planRebalance(after, 0, maxElectionsPerBatch); len(again) != 0 {
		t.Errorf("a second pass elects %d more", len(again))
	}

	// The limit stops a batch and says there is more.
	if recs, _, more := planRebalance(img, 0, 0); len(recs) != 0 || !more {
		t.Errorf("limit 0: %d records, more %v; want none and more", len(recs), more)
	}
	// A threshold at the share itself is not above it: broker 1 prefers
	// partition 0 alone and leads it; 3 prefers none.
	if _, imbalanced, _ := planRebalance(img, 100, maxElectionsPerBatch); len(imbalanced) != 0 {
		t.Errorf("threshold 100%%: imbalanced %v, want none", imbalanced)
	}
}

func TestPlanElections(t *testing.T) {
	img, _ := movedImage(t)
	tp := func(topic string, p int32) controlplane.TopicPartition {
		return controlplane.TopicPartition{Topic: topic, Partition: p}
	}
	results, planned := planElections(img, controlplane.ElectLeaders{Type: controlplane.ElectPreferred,
		Partitions: []controlplane.TopicPartition{tp("t", 1), tp("t", 1), tp("t", 0), tp("t", 2), tp("t", 9), tp("t", -1), tp("nope", 0)}}, nil)
	want := []error{nil, controlplane.ErrElectionNotNeeded, controlplane.ErrPreferredLeaderNotAvailable,
		controlplane.ErrUnknownTopic, controlplane.ErrUnknownTopic, controlplane.ErrUnknownTopic}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d (a partition named twice is answered once): %+v", len(results), len(want), results)
	}
	for i, w := range want {
		if (w == nil) != (results[i].Err == nil) || (w != nil && !errors.Is(results[i].Err, w)) {
			t.Errorf("result %d (%v): %v, want %v", i, results[i].TopicPartition, results[i].Err, w)
		}
	}
	if len(planned) != 1 || planned[0].result != 0 || planned[0].rec.Leader != 2 {
		t.Errorf("planned %+v, want partition 1's election alone", planned)
	}

	// Every partition: only those that needed one are answered.
	results, _ = planElections(img, controlplane.ElectLeaders{Type: controlplane.ElectPreferred}, nil)
	for _, r := range results {
		if errors.Is(r.Err, controlplane.ErrElectionNotNeeded) {
			t.Errorf("every partition: %v answered ELECTION_NOT_NEEDED", r.TopicPartition)
		}
	}
	if len(results) == 0 {
		t.Error("every partition: no results, want partition 1's election at least")
	}

	// Unclean: a led partition needs none; a leaderless one whose ISR
	// has no member in service takes the decided replica, alone in the
	// ISR; undecided, none is eligible.
	unc, _ := uncleanImage(t, false)
	var leaderless int32 = -1
	for i, p := range unc.Topics["t"].Partitions {
		if p.Leader == -1 && len(p.Replicas) > 1 {
			leaderless = int32(i)
		}
	}
	if leaderless < 0 {
		t.Fatal("uncleanImage has no leaderless partition with several replicas")
	}
	req := controlplane.ElectLeaders{Type: controlplane.ElectUnclean, Partitions: []controlplane.TopicPartition{tp("t", 0), tp("t", leaderless)}}
	results, planned = planElections(unc, req, nil)
	if !errors.Is(results[0].Err, controlplane.ErrElectionNotNeeded) || !errors.Is(results[1].Err, controlplane.ErrEligibleLeadersNotAvailable) || len(planned) != 0 {
		t.Errorf("unclean, nothing decided: %+v, planned %d; want ELECTION_NOT_NEEDED, ELIGIBLE_LEADERS_NOT_AVAILABLE", results, len(planned))
	}
	cands := uncleanRequested(unc, req.Partitions)
	if len(cands) != 1 || cands[0].partition != leaderless {
		t.Fatalf("unclean candidates %+v, want partition %d alone (whatever the topic config)", cands, leaderless)
	}
	e := uncleanElection{candidate: cands[0], leader: logEnd{broker: cands[0].live[0], epoch: 0, end: 5}}
	results, planned = planElections(unc, req, map[controlplane.TopicPartition]uncleanElection{tp("t", leaderless): e})
	if results[1].Err != nil || len(planned) != 1 || planned[0].unclean == nil {
		t.Fatalf("unclean, decided: %+v, planned %+v", results, planned)
	}
	after := apply(t, unc, []metadata.Record{planned[0].rec}).Topics["t"].Partitions[leaderless]
	if after.Leader != e.leader.broker || !slices.Equal(after.ISR, []int32{e.leader.broker}) {
		t.Errorf("after the unclean election: %+v, want leader %d alone in the ISR", after, e.leader.broker)
	}

	if _, err := (&Controller{}).ElectLeaders(t.Context(), controlplane.ElectLeaders{Type: 5}); !errors.Is(err, controlplane.ErrInvalidRequest) {
		t.Errorf("election type 5: %v, want INVALID_REQUEST", err)
	}
}
