package kafkaserver

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type epochReq struct {
	partition    int32
	currentEpoch int32
	epoch        int32
}

func offsetForLeaderEpoch(t *testing.T, f *adminFixture, version int16, parts ...epochReq) []kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.partition, p.currentEpoch, p.epoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := adminCall[*kmsg.OffsetForLeaderEpochResponse](t, f, req, version)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != len(parts) {
		t.Fatalf("response shape %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions
}

// Reference: KIP-101, KIP-279 (end offsets by epoch), KIP-320 (fencing).
func TestOffsetForLeaderEpoch(t *testing.T) {
	// The fixture's partition 0 has epochs 3 (from offset 0) and 5 (from
	// 2), log end 4, and is led here at epoch 5.
	for _, version := range []int16{2, 4} {
		f := listOffsetsFixture(t)
		for _, tc := range []struct {
			name  string
			epoch int32
			want  int32
			end   int64
		}{
			{"latest epoch ends at the log end", 5, 5, 4},
			{"an earlier epoch ends where the next starts", 3, 3, 2},
			{"a missing epoch answers the largest below it", 4, 3, 2},
			{"older than the history", 1, 1, 0},
			{"unknown newer epoch", 9, -1, -1},
		} {
			got := offsetForLeaderEpoch(t, f, version, epochReq{0, 5, tc.epoch})[0]
			adminWantCode(t, tc.name, got.ErrorCode, nil)
			if got.Partition != 0 || got.LeaderEpoch != tc.want || got.EndOffset != tc.end {
				t.Fatalf("v%d %s: partition %d epoch %d end %d; want epoch %d end %d",
					version, tc.name, got.Partition, got.LeaderEpoch, got.EndOffset, tc.want, tc.end)
			}
		}
	}
}

func TestOffsetForLeaderEpochV0(t *testing.T) {
	f := listOffsetsFixture(t)
	// v0 has no current epoch (a stale one in the struct fences
	// nothing) and answers no epoch.
	got := offsetForLeaderEpoch(t, f, 0, epochReq{0, 1, 3})[0]
	adminWantCode(t, "v0", got.ErrorCode, nil)
	if got.EndOffset != 2 || got.LeaderEpoch != -1 {
		t.Fatalf("v0: end %d epoch %d; want end 2 and no epoch on the wire", got.EndOffset, got.LeaderEpoch)
	}
}

func TestOffsetForLeaderEpochFencing(t *testing.T) {
	f := listOffsetsFixture(t)
	got := offsetForLeaderEpoch(t, f, 3,
		epochReq{0, 4, 3},  // client's leader epoch is stale
		epochReq{0, 6, 3},  // client knows a newer leader
		epochReq{1, -1, 3}, // another node leads it
		epochReq{7, -1, 3}, // no such partition
		epochReq{0, -1, 3}, // no current epoch: not fenced
	)
	for i, want := range []*kerr.Error{
		kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, nil,
	} {
		adminWantCode(t, fmt.Sprint("entry ", i), got[i].ErrorCode, want)
		if want != nil && (got[i].LeaderEpoch != -1 || got[i].EndOffset != -1) {
			t.Fatalf("entry %d: error answered epoch %d end %d", i, got[i].LeaderEpoch, got[i].EndOffset)
		}
	}
	if got[4].EndOffset != 2 {
		t.Fatalf("unfenced entry: end %d", got[4].EndOffset)
	}
}

// A Fjord node asking with replica id -2 (the active controller before
// an unclean election) learns how far this node's own replica reaches,
// led or not; anyone else, or any other replica id, gets Kafka's
// leader-only answer, so the extension changes nothing for clients.
func TestOffsetForLeaderEpochOwnLogForFjordNodes(t *testing.T) {
	f := listOffsetsFixture(t)
	const peer = "fjord-internal-test-peer"
	f.s.cfg.InternalClientID = peer
	// Partition 1 is led by node 2; this node follows it with epochs 3
	// (from 0) and 6 (from 5), log end 9.
	f.reps.setLog("t", 1, &adminFakeLog{leo: 9, epochs: [][2]int64{{3, 0}, {6, 5}}})
	ask := func(clientID *string, version int16, replicaID int32, partition int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(version)
		req.ReplicaID = replicaID
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, -1, 1
		rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt}
		resp, _, err := handleOffsetForLeaderEpoch(context.Background(), f.s, &request{key: req.Key(), version: version, body: req, clientID: clientID})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	outsider := "kcat"
	for _, tc := range []struct {
		name      string
		clientID  *string
		version   int16
		replicaID int32
		partition int32
		want      *kerr.Error
		epoch     int32
		end       int64
	}{
		{"a Fjord node, of a follower's replica", kmsg.StringPtr(peer), 4, -2, 1, nil, 6, 9},
		{"a Fjord node, of a replica it leads", kmsg.StringPtr(peer), 4, -2, 0, nil, 5, 4},
		{"a Fjord node, of a partition not here", kmsg.StringPtr(peer), 4, -2, 7, kerr.UnknownTopicOrPartition, -1, -1},
		{"a Fjord node as a follower (replica id >= 0)", kmsg.StringPtr(peer), 4, 3, 1, kerr.NotLeaderForPartition, -1, -1},
		{"a Fjord node at v2, which has no replica id", kmsg.StringPtr(peer), 2, -2, 1, kerr.NotLeaderForPartition, -1, -1},
		{"an outside client naming replica -2", &outsider, 4, -2, 1, kerr.NotLeaderForPartition, -1, -1},
		{"a client with no id", nil, 4, -2, 1, kerr.NotLeaderForPartition, -1, -1},
	} {
		got := ask(tc.clientID, tc.version, tc.replicaID, tc.partition)
		adminWantCode(t, tc.name, got.ErrorCode, tc.want)
		if got.LeaderEpoch != tc.epoch || got.EndOffset != tc.end {
			t.Errorf("%s: epoch %d end %d, want epoch %d end %d", tc.name, got.LeaderEpoch, got.EndOffset, tc.epoch, tc.end)
		}
	}
}
