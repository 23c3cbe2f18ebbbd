package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

func TestListOffset(t *testing.T) {
	e := newEnv(t, "")
	topic := newTopic("t", 1, 1, nil)
	e.put(topic)
	list := func(ts int64) OffsetAndTimestamp {
		t.Helper()
		o, err := e.m.ListOffset("t", 0, -1, ts, IsolationHighWatermark)
		if err != nil {
			t.Fatalf("list offset %d: %v", ts, err)
		}
		return o
	}
	none := OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}

	// Empty log.
	if o := list(TimestampEarliest); o.Offset != 0 || o.Timestamp != -1 {
		t.Fatalf("earliest, empty: %+v", o)
	}
	if o := list(TimestampLatest); o.Offset != 0 || o.LeaderEpoch != 0 {
		t.Fatalf("latest, empty: %+v", o)
	}
	if o := list(TimestampMaxTimestamp); o != none {
		t.Fatalf("max timestamp, empty: %+v", o)
	}
	if o := list(1); o != none {
		t.Fatalf("by timestamp, empty: %+v", o)
	}

	// Epoch 0: offsets 0-2 at 1000..; epoch 4: offsets 3-4 at 5000 and
	// an out-of-order older timestamp.
	e.append("t", 0, batch(t, "a", 3, 1000), AcksLeader)
	e.put(withPartition(topic, 0, func(p *metadata.Partition) { p.LeaderEpoch = 4 }))
	e.append("t", 0, batch(t, "b", 1, 5000), AcksLeader)
	e.append("t", 0, batch(t, "c", 1, 3000), AcksLeader)

	if o := list(TimestampEarliest); o.Offset != 0 || o.LeaderEpoch != 0 {
		t.Fatalf("earliest: %+v", o)
	}
	if o := list(TimestampLatest); o.Offset != 5 || o.LeaderEpoch != 4 || o.Timestamp != -1 {
		t.Fatalf("latest: %+v", o)
	}
	if o := list(TimestampMaxTimestamp); o != (OffsetAndTimestamp{Offset: 3, Timestamp: 5000, LeaderEpoch: 4}) {
		t.Fatalf("max timestamp: %+v", o)
	}
	if o := list(500); o != (OffsetAndTimestamp{Offset: 0, Timestamp: 1000, LeaderEpoch: 0}) {
		t.Fatalf("by timestamp 500: %+v", o)
	}
	if o := list(2000); o != (OffsetAndTimestamp{Offset: 3, Timestamp: 5000, LeaderEpoch: 4}) {
		t.Fatalf("by timestamp 2000: %+v", o)
	}
	if o := list(6000); o != none {
		t.Fatalf("by timestamp after every record: %+v", o)
	}

	// After DeleteRecords, earliest is the new log start.
	if low, err := e.m.DeleteRecords(context.Background(), "t", 0, 4, time.Second); err != nil || low != 4 {
		t.Fatalf("delete records: %d %v", low, err)
	}
	if o := list(TimestampEarliest); o.Offset != 4 || o.LeaderEpoch != 4 {
		t.Fatalf("earliest after delete records: %+v", o)
	}
	if o := list(TimestampEarliestLocal); o.Offset != 4 {
		t.Fatalf("earliest local: %+v", o)
	}
	if o := list(-5); o != none {
		t.Fatalf("latest tiered: %+v", o)
	}

	if _, err := e.m.ListOffset("t", 3, -1, TimestampLatest, IsolationHighWatermark); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
}

// Offsets at or past the high watermark are not reported to consumers:
// they could not fetch them.
func TestListOffsetBoundedByHighWatermark(t *testing.T) {
	e := newEnv(t, "")
	e.put(withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas, p.ISR = []int32{1, 2}, []int32{1, 2}
	}))
	e.append("t", 0, batch(t, "a", 2, 1000), AcksLeader) // above the stuck high watermark
	for _, ts := range []int64{1, TimestampMaxTimestamp} {
		if o, err := e.m.ListOffset("t", 0, -1, ts, IsolationHighWatermark); err != nil || o.Offset != -1 {
			t.Fatalf("timestamp %d: %+v %v, want nothing (offset -1)", ts, o, err)
		}
	}
	if o, _ := e.m.ListOffset("t", 0, -1, TimestampLatest, IsolationHighWatermark); o.Offset != 0 {
		t.Fatalf("latest for a consumer: %d, want the high watermark 0", o.Offset)
	}
	if o, _ := e.m.ListOffset("t", 0, -1, TimestampLatest, IsolationLogEnd); o.Offset != 2 {
		t.Fatalf("latest for a replica: %d, want the log end 2", o.Offset)
	}
	if o, _ := e.m.ListOffset("t", 0, -1, 1, IsolationLogEnd); o.Offset != 0 {
		t.Fatalf("by timestamp for a replica: %d, want 0", o.Offset)
	}
}

// Reference: KIP-101, KIP-279.
func TestEndOffsetForEpoch(t *testing.T) {
	e := newEnv(t, "")
	topic := newTopic("t", 1, 1, nil)
	e.put(topic)
	e.append("t", 0, batch(t, "a", 3, 0), AcksLeader) // epoch 0: 0..2
	e.put(withPartition(topic, 0, func(p *metadata.Partition) { p.LeaderEpoch = 2 }))
	e.append("t", 0, batch(t, "b", 2, 0), AcksLeader) // epoch 2: 3..4
	cases := []struct {
		requested, wantEpoch int32
		wantEnd              int64
	}{
		{0, 0, 3},
		{1, 0, 3}, // largest epoch <= 1 is 0, which ends where 2 starts
		{2, 2, 5}, // the latest epoch ends at the log end
		{3, -1, -1},
		{-1, -1, -1},
	}
	for _, c := range cases {
		epoch, end, err := e.m.EndOffsetForEpoch("t", 0, -1, c.requested)
		if err != nil || epoch != c.wantEpoch || end != c.wantEnd {
			t.Errorf("epoch %d: (%d, %d, %v), want (%d, %d)", c.requested, epoch, end, err, c.wantEpoch, c.wantEnd)
		}
	}
}

func TestDeleteRecords(t *testing.T) {
	e := newEnv(t, "")
	e.put(withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
	}))
	e.append("t", 0, batch(t, "a", 5, 0), AcksLeader)
	ctx := context.Background()
	if _, err := e.m.DeleteRecords(ctx, "t", 0, 6, time.Second); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the high watermark: %v", err)
	}
	if _, err := e.m.DeleteRecords(ctx, "t", 0, -2, time.Second); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("negative offset: %v", err)
	}
	if low, err := e.m.DeleteRecords(ctx, "t", 0, 2, time.Second); err != nil || low != 2 {
		t.Fatalf("delete before 2: %d %v", low, err)
	}
	// Below the current start: nothing moves back.
	if low, err := e.m.DeleteRecords(ctx, "t", 0, 1, time.Second); err != nil || low != 2 {
		t.Fatalf("delete before 1 after 2: %d %v", low, err)
	}
	// -1 is the high watermark.
	if low, err := e.m.DeleteRecords(ctx, "t", 0, -1, time.Second); err != nil || low != 5 {
		t.Fatalf("delete before the high watermark: %d %v", low, err)
	}
	if l := e.log("t", 0); l.LogStartOffset() != 5 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	res := e.m.Fetch(ctx, consumerFetch(0, 0), []FetchPartition{part("t", 0, 4)})
	defer res.Release()
	if err := res.Partitions[0].Err; !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("fetch below the new log start: %v", err)
	}

	// A follower refuses.
	e.put(withPartition(e.topics["t"], 0, func(p *metadata.Partition) { p.Leader, p.LeaderEpoch = 2, 1 }))
	if _, err := e.m.DeleteRecords(ctx, "t", 0, -1, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("delete records on a follower: %v", err)
	}
}

func TestLogDirs(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("b", 2, 2, nil), newTopic("a", 1, 1, nil))
	e.append("b", 1, batch(t, "x", 10, 0), AcksLeader)
	dir, total, usable, parts := e.m.LogDirs()
	if dir != e.dir {
		t.Fatalf("dir %q, want %q", dir, e.dir)
	}
	if total <= 0 || usable < 0 || usable > total {
		t.Fatalf("total %d usable %d", total, usable)
	}
	want := []struct {
		topic     string
		partition int32
		nonEmpty  bool
	}{{"a", 0, false}, {"b", 0, false}, {"b", 1, true}}
	if len(parts) != len(want) {
		t.Fatalf("parts %+v", parts)
	}
	for i, w := range want {
		p := parts[i]
		if p.Topic != w.topic || p.Partition != w.partition || (p.Size > 0) != w.nonEmpty || p.OffsetLag != 0 {
			t.Fatalf("part %d: %+v, want %s-%d nonEmpty=%v", i, p, w.topic, w.partition, w.nonEmpty)
		}
	}
	if got := e.log("b", 1).Size(); parts[2].Size != got {
		t.Fatalf("size %d, log says %d", parts[2].Size, got)
	}
}
