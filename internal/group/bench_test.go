package group

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/fjordmq/fjord/internal/clock"
)

// BenchmarkCommittedOffsets is the coordinator's side of one lag refresh
// (internal/grouplag's Refresher): every committed offset of 1,000
// groups of 50 partitions each, copied out group by group.
//
//	go test -run '^$' -bench CommittedOffsets ./internal/group
func BenchmarkCommittedOffsets(b *testing.B) {
	const groups, partitions = 1000, 50
	c := New(Config{OffsetsPartitions: testPartitions, Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)}, newMemLog())
	defer c.Close()
	for p := range int32(testPartitions) {
		if err := c.Load(p, func(func(Record) error) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	for g := range groups {
		req := CommitRequest{Group: fmt.Sprintf("group-%d", g), Generation: -1}
		for p := range int32(partitions) {
			req.Offsets = append(req.Offsets, OffsetCommit{TopicPartition: TopicPartition{Topic: "events", Partition: p}, Offset: 100, LeaderEpoch: -1})
		}
		if err, _ := c.CommitOffsets(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		c.CommittedOffsets(func(_ string, offsets map[TopicPartition]int64) bool {
			n += len(offsets)
			return true
		})
		if n != groups*partitions {
			b.Fatalf("%d offsets visited, want %d", n, groups*partitions)
		}
	}
}
