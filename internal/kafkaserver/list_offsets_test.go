package kafkaserver

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/replica"
)

// listOffsetsFixture: topic t, partition 0 led here at epoch 5 (records
// 0-3, timestamps 100 300 200 400, epochs 3 3 5 5, high watermark 3,
// last stable offset 2, log end 4), partition 1 led by node 2.
func listOffsetsFixture(t *testing.T) *adminFixture {
	f := newAdminFixture(t)
	parts := adminLeaderPartitions(5)
	other := parts[0]
	other.Leader = 2
	f.ctrl.addTopic("t", append(parts, other), nil)
	f.reps.setLog("t", 0, &adminFakeLog{
		logStart: 0, hw: 3, lso: 2, leo: 4,
		records: []adminFakeRecord{{0, 100, 3}, {1, 300, 3}, {2, 200, 5}, {3, 400, 5}},
		epochs:  [][2]int64{{3, 0}, {5, 2}},
	})
	return f
}

type listReq struct {
	partition    int32
	timestamp    int64
	currentEpoch int32
	maxOffsets   int32
}

func listOffsets(t *testing.T, f *adminFixture, version int16, isolation int8, replicaID int32, parts ...listReq) []kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel, req.ReplicaID = isolation, replicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = p.partition, p.timestamp, p.currentEpoch, p.maxOffsets
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := adminCall[*kmsg.ListOffsetsResponse](t, f, req, version)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != len(parts) {
		t.Fatalf("response shape %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions
}

func TestListOffsetsTimestamps(t *testing.T) {
	f := listOffsetsFixture(t)
	for _, tc := range []struct {
		name      string
		timestamp int64
		offset    int64
		ts        int64
		epoch     int32
	}{
		{"earliest", replica.TimestampEarliest, 0, -1, 3},
		{"latest", replica.TimestampLatest, 3, -1, 5},
		{"max timestamp", replica.TimestampMaxTimestamp, 1, 300, 3},
		{"earliest local", timestampEarliestLocal, 0, -1, 3},
		{"by timestamp", 150, 1, 300, 3},
		{"exact timestamp", 100, 0, 100, 3},
		{"past every record", 1000, -1, -1, -1},
	} {
		got := listOffsets(t, f, 8, 0, -1, listReq{0, tc.timestamp, 5, 1})[0]
		adminWantCode(t, tc.name, got.ErrorCode, nil)
		if got.Offset != tc.offset || got.Timestamp != tc.ts || got.LeaderEpoch != tc.epoch {
			t.Fatalf("%s: offset %d ts %d epoch %d; want %d %d %d",
				tc.name, got.Offset, got.Timestamp, got.LeaderEpoch, tc.offset, tc.ts, tc.epoch)
		}
		if got.OldStyleOffsets != nil {
			t.Fatalf("%s: v8 carries no old-style offsets", tc.name)
		}
	}
	// -4 is asked of the replica manager as earliest.
	if last := f.reps.listCalls[3]; last.timestamp != replica.TimestampEarliest {
		t.Fatalf("earliest local asked as %d", last.timestamp)
	}
}

// v0 answers in a list of at most MaxNumOffsets offsets; the epoch the
// request struct holds is not on the wire below v4, so it fences nothing.
func TestListOffsetsV0OldStyle(t *testing.T) {
	f := listOffsetsFixture(t)
	for _, tc := range []struct {
		name       string
		timestamp  int64
		maxOffsets int32
		want       []int64
	}{
		{"latest", replica.TimestampLatest, 1, []int64{3}},
		{"earliest, up to 5", replica.TimestampEarliest, 5, []int64{0}},
		{"by timestamp", 150, 1, []int64{1}},
		{"none found", 1000, 1, []int64{}},
		{"no offsets wanted", replica.TimestampLatest, 0, []int64{}},
	} {
		got := listOffsets(t, f, 0, 1, -1, listReq{0, tc.timestamp, 99, tc.maxOffsets})[0]
		adminWantCode(t, tc.name, got.ErrorCode, nil)
		if !slices.Equal(got.OldStyleOffsets, tc.want) {
			t.Fatalf("%s: offsets %v, want %v", tc.name, got.OldStyleOffsets, tc.want)
		}
		if got.Offset != -1 || got.Timestamp != -1 {
			t.Fatalf("%s: v0 carries no single offset or timestamp", tc.name)
		}
	}
	for _, c := range f.reps.listCalls {
		if c.currentEpoch != -1 || c.isolation != replica.IsolationHighWatermark {
			t.Fatalf("v0 asked with epoch %d isolation %d; v0 has neither field", c.currentEpoch, c.isolation)
		}
	}
}

func TestListOffsetsV1NoLeaderEpoch(t *testing.T) {
	f := listOffsetsFixture(t)
	got := listOffsets(t, f, 1, 0, -1, listReq{0, replica.TimestampLatest, -1, 1})[0]
	adminWantCode(t, "v1", got.ErrorCode, nil)
	if got.Offset != 3 || got.Timestamp != -1 || got.LeaderEpoch != -1 {
		t.Fatalf("v1: offset %d ts %d epoch %d; the epoch is v4+", got.Offset, got.Timestamp, got.LeaderEpoch)
	}
}

func TestListOffsetsIsolation(t *testing.T) {
	f := listOffsetsFixture(t)
	for _, tc := range []struct {
		name      string
		version   int16
		isolation int8
		replicaID int32
		want      int64
		code      *kerr.Error
	}{
		{"read_uncommitted", 2, 0, -1, 3, nil},
		{"read_committed", 2, 1, -1, 2, nil},
		{"read_committed before v2 is not on the wire", 1, 1, -1, 3, nil},
		{"follower reads to the log end", 8, 0, 0, 4, nil},
		{"unknown isolation", 5, 2, -1, -1, kerr.InvalidRequest},
	} {
		got := listOffsets(t, f, tc.version, tc.isolation, tc.replicaID, listReq{0, replica.TimestampLatest, -1, 1})[0]
		adminWantCode(t, tc.name, got.ErrorCode, tc.code)
		if got.Offset != tc.want {
			t.Fatalf("%s: offset %d, want %d", tc.name, got.Offset, tc.want)
		}
	}
}

// Validation order: request shape, topic, partition, leadership, epoch
// fence; the replica manager is asked only once all pass.
func TestListOffsetsErrors(t *testing.T) {
	f := listOffsetsFixture(t)
	got := listOffsets(t, f, 8, 0, -1,
		listReq{0, replica.TimestampLatest, 4, 1},  // client epoch older
		listReq{1, replica.TimestampLatest, -1, 1}, // another node leads it
		listReq{2, replica.TimestampLatest, -1, 1}, // no such partition
		listReq{3, -7, -1, 1},                      // not a timestamp
		listReq{4, replica.TimestampLatest, -1, 1},
		listReq{4, replica.TimestampLatest, -1, 1}, // listed twice
	)
	for i, want := range []*kerr.Error{
		kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition,
		kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest,
	} {
		adminWantCode(t, fmt.Sprint("partition entry ", i), got[i].ErrorCode, want)
		if got[i].Offset != -1 || got[i].LeaderEpoch != -1 {
			t.Fatalf("entry %d: error answered offset %d epoch %d", i, got[i].Offset, got[i].LeaderEpoch)
		}
	}
	if n := len(f.reps.listCalls); n != 0 {
		t.Fatalf("replica manager asked %d times about refused partitions", n)
	}

	got = listOffsets(t, f, 4, 0, -1, listReq{0, replica.TimestampLatest, 6, 1})
	adminWantCode(t, "client epoch newer", got[0].ErrorCode, kerr.UnknownLeaderEpoch)
	got = listOffsets(t, f, 4, 0, -1, listReq{0, replica.TimestampLatest, 5, 1})
	adminWantCode(t, "client epoch current", got[0].ErrorCode, nil)
	if c := f.reps.listCalls[0]; c.currentEpoch != 5 {
		t.Fatalf("replica manager asked with epoch %d, want the client's 5", c.currentEpoch)
	}
	got = listOffsets(t, f, 3, 0, -1, listReq{0, replica.TimestampLatest, 4, 1})
	adminWantCode(t, "epoch below v4 is not on the wire", got[0].ErrorCode, nil)

	req := kmsg.NewPtrListOffsetsRequest()
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "missing", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
	resp := adminCall[*kmsg.ListOffsetsResponse](t, f, req, 7)
	adminWantCode(t, "unknown topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
}

// Before the controller publishes an image every topic is unknown, not a
// crash.
func TestListOffsetsBeforeFirstImage(t *testing.T) {
	f := listOffsetsFixture(t)
	f.ctrl.mu.Lock()
	f.ctrl.img = nil
	f.ctrl.mu.Unlock()
	got := listOffsets(t, f, 8, 0, -1, listReq{0, replica.TimestampLatest, -1, 1})
	adminWantCode(t, "no image", got[0].ErrorCode, kerr.UnknownTopicOrPartition)
}
