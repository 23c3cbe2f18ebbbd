package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
)

func deleteRecordsReq(timeoutMs int32, topic string, offsets map[int32]int64, order ...int32) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for _, p := range order {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, offsets[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestDeleteRecords(t *testing.T) {
	for _, version := range []int16{0, 2} {
		f := newAdminFixture(t)
		parts := make([]metadata.Partition, 0, 6)
		for range 5 {
			parts = append(parts, adminLeaderPartitions(0)...)
		}
		follower := adminLeaderPartitions(0)[0]
		follower.Leader = 2
		parts = append(parts, follower)
		f.ctrl.addTopic("t", parts, nil)
		for p := range int32(5) {
			f.reps.setLog("t", p, &adminFakeLog{logStart: 10, hw: 100, leo: 120})
		}

		resp := adminCall[*kmsg.DeleteRecordsResponse](t, f, deleteRecordsReq(5000, "t",
			map[int32]int64{0: 50, 1: -1, 2: 101, 3: -2, 4: 5, 5: 50, 9: 1},
			0, 1, 2, 3, 4, 5, 9), version)
		rt := resp.Topics[0]
		for i, want := range []struct {
			code *kerr.Error
			low  int64
		}{
			{nil, 50},                          // moves the log start
			{nil, 100},                         // -1: the high watermark
			{kerr.OffsetOutOfRange, -1},        // beyond the high watermark
			{kerr.OffsetOutOfRange, -1},        // below -1
			{nil, 10},                          // below the log start: nothing to do
			{kerr.NotLeaderForPartition, -1},   // another node leads it
			{kerr.UnknownTopicOrPartition, -1}, // no such partition
		} {
			rp := rt.Partitions[i]
			adminWantCode(t, "partition", rp.ErrorCode, want.code)
			if rp.LowWatermark != want.low {
				t.Fatalf("v%d partition %d: low watermark %d, want %d", version, rp.Partition, rp.LowWatermark, want.low)
			}
		}
		// The replica manager was asked only for the partitions that
		// passed validation, each with the time left of one deadline.
		if n := len(f.reps.deleteTimeouts); n != 4 {
			t.Fatalf("replica manager asked %d times, want 4", n)
		}
		for _, d := range f.reps.deleteTimeouts {
			if d <= 0 || d.Milliseconds() > 5000 {
				t.Fatalf("timeout %v, want within the request's 5s", d)
			}
		}
	}
}

func TestDeleteRecordsUnknownTopic(t *testing.T) {
	f := newAdminFixture(t)
	resp := adminCall[*kmsg.DeleteRecordsResponse](t, f, deleteRecordsReq(0, "nope", map[int32]int64{0: 1}, 0), 1)
	adminWantCode(t, "nope", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	if len(f.reps.deleteTimeouts) != 0 {
		t.Fatal("replica manager asked about an unknown topic")
	}
}
