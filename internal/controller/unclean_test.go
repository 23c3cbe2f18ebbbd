package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
)

// uncleanImage is fencingImage with unclean.leader.election.enable set
// on "t" (when allow) and brokers 2 and 4 fenced: partition 3 (replicas
// [2]) and the partitions whose ISR was only fenced brokers have no
// leader.
func uncleanImage(t *testing.T, allow bool) (*metadata.Image, metadata.UUID) {
	t.Helper()
	img, id := fencingImage(t)
	if allow {
		v := "true"
		img = apply(t, img, []metadata.Record{metadata.ConfigRecord{TopicID: id, Name: UncleanLeaderElectionConfig, Value: &v}})
	}
	img = apply(t, img, planFence(img, 4))
	img = apply(t, img, planFence(img, 2))
	return img, id
}

func TestUncleanCandidatesOnlyWhereTheTopicAllowsIt(t *testing.T) {
	img, _ := uncleanImage(t, false)
	if c := uncleanCandidates(img); len(c) != 0 {
		t.Fatalf("%d candidates on a topic without unclean.leader.election.enable", len(c))
	}
	img, _ = uncleanImage(t, true)
	var got []string
	for _, c := range uncleanCandidates(img) {
		got = append(got, fmt.Sprintf("%d:%v", c.partition, c.live))
	}
	// Partition 4 (replicas [2 4 3], ISR [2 4]) lost both ISR members
	// (2 stays, as the last); 3 is live outside its ISR. Partition 3's only replica is fenced:
	// nobody to elect. The rest kept a live ISR member and a leader.
	if want := []string{"4:[3]"}; !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
}

func TestFurthestPrefersTheLaterEpochThenTheLongerLog(t *testing.T) {
	tests := []struct {
		answers []logEnd
		want    int32
	}{
		{[]logEnd{{broker: 1, epoch: 3, end: 100}, {broker: 2, epoch: 4, end: 50}}, 2}, // a later leader's records
		{[]logEnd{{broker: 1, epoch: 4, end: 100}, {broker: 2, epoch: 4, end: 120}}, 2},
		{[]logEnd{{broker: 3, epoch: 4, end: 120}, {broker: 1, epoch: 4, end: 120}}, 3}, // a tie: replica order
		{[]logEnd{{broker: 5, epoch: -1, end: 0}}, 5},
	}
	for _, tc := range tests {
		got, ok := furthest(tc.answers)
		if !ok || got.broker != tc.want {
			t.Errorf("furthest(%v) = %v, want broker %d", tc.answers, got, tc.want)
		}
	}
	if _, ok := furthest(nil); ok {
		t.Error("furthest of no answers chose someone")
	}
}

func TestPlanUncleanMakesTheLeaderTheWholeISR(t *testing.T) {
	img, _ := uncleanImage(t, true)
	cands := uncleanCandidates(img)
	recs, kept := planUnclean(img, []uncleanElection{{candidate: cands[0], leader: logEnd{broker: 3, epoch: 1, end: 10}}})
	if len(kept) != 1 || !slices.Equal(kept[0].lostISR, []int32{2}) {
		t.Fatalf("kept %v", kept)
	}
	before := img.Topics["t"].Partitions[4]
	img = apply(t, img, recs)
	wantPartition(t, img, 4, []int32{3}, 3, before.LeaderEpoch+1, before.PartitionEpoch+1)
	if c := uncleanCandidates(img); len(c) != 0 {
		t.Fatalf("still %d candidates after the election", len(c))
	}
}

// An election decided before the image changed is dropped: the old ISR
// member came back (a clean election), or the chosen broker was fenced.
func TestPlanUncleanDropsWhatTheImageOvertook(t *testing.T) {
	img, _ := uncleanImage(t, true)
	cand := uncleanCandidates(img)[0]
	e := []uncleanElection{{candidate: cand, leader: logEnd{broker: 3}}}

	back := apply(t, img, planUnfence(img, 2)) // the ISR's last member: it leads again, cleanly
	if recs, _ := planUnclean(back, e); len(recs) != 0 {
		t.Fatalf("an unclean election over a clean one: %v", recs)
	}
	gone := apply(t, img, planFence(img, 3))
	if recs, _ := planUnclean(gone, e); len(recs) != 0 {
		t.Fatalf("a fenced broker elected: %v", recs)
	}
	if recs, _ := planUnclean(img, []uncleanElection{{candidate: cand, leader: logEnd{broker: 1}}}); len(recs) != 0 {
		t.Fatalf("a broker that is not a replica elected: %v", recs)
	}
}
