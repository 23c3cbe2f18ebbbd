package grouplag

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// fakeLeaders answers DescribePositions as leaders would, from a table:
// per partition, its leader, log start, high watermark and, per offset,
// bytes and timestamp. A node in down fails its requests.
type fakeLeaders struct {
	mu     sync.Mutex
	leader map[TopicPartition]int32
	parts  map[TopicPartition]fjordmsg.DescribePositionsResponsePartition
	down   map[int32]bool
	asked  map[int32]int // requests per node
}

func (f *fakeLeaders) leaderOf() LeaderOf {
	return func(topic string, partition int32) (int32, error) {
		l, ok := f.leader[TopicPartition{topic, partition}]
		switch {
		case !ok:
			return -1, kerr.UnknownTopicOrPartition
		case l < 0:
			return -1, ErrNoLeader
		}
		return l, nil
	}
}

var errDown = errors.New("node down")

func (f *fakeLeaders) ask(_ context.Context, node int32, req *fjordmsg.DescribePositionsRequest) (*fjordmsg.DescribePositionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[node]++
	if f.down[node] {
		return nil, errDown
	}
	resp := &fjordmsg.DescribePositionsResponse{}
	for _, t := range req.Topics {
		rt := fjordmsg.DescribePositionsResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			rp, ok := f.parts[tp]
			if !ok || f.leader[tp] != node {
				rt.Partitions = append(rt.Partitions, fjordmsg.DescribePositionsResponsePartition{Partition: p.Partition, ErrorCode: kerr.NotLeaderForPartition.Code})
				continue
			}
			out := rp
			out.Positions = nil
			for _, o := range p.Offsets {
				pos := fjordmsg.Position{Offset: o, Timestamp: -1, DeleteAt: -1}
				for _, known := range rp.Positions {
					if known.Offset == o {
						pos = known
					}
				}
				out.Positions = append(out.Positions, pos)
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func newFakeLeaders() *fakeLeaders {
	a, b, c := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"u", 0}
	return &fakeLeaders{
		leader: map[TopicPartition]int32{a: 1, b: 2, c: 2},
		parts: map[TopicPartition]fjordmsg.DescribePositionsResponsePartition{
			a: {Partition: 0, LogStartOffset: 0, HighWatermark: 100, LastStableOffset: 100, Positions: []fjordmsg.Position{
				{Offset: 40, Bytes: 6000, Timestamp: 10_000, DeleteAt: 70_000}, {Offset: 90, Bytes: 1000, Timestamp: 19_000, DeleteAt: 80_000}}},
			b: {Partition: 1, LogStartOffset: 50, HighWatermark: 80, LastStableOffset: 80, Positions: []fjordmsg.Position{
				{Offset: 20, Bytes: 3000, Timestamp: 15_000, DeleteAt: -1}}},
			c: {Partition: 0, LogStartOffset: 0, HighWatermark: 7, LastStableOffset: 7},
		},
		down:  map[int32]bool{},
		asked: map[int32]int{},
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func fixedClock(ms int64) func() time.Time { return func() time.Time { return time.UnixMilli(ms) } }

// Two groups over three partitions on two leaders: one request per
// leader, each group's lag from its own offset, a gap below the log
// start, 0 seconds when caught up, and rows in order.
func TestRefresherSnapshot(t *testing.T) {
	f := newFakeLeaders()
	committed := func(visit func(string, map[TopicPartition]int64) bool) {
		if !visit("g2", map[TopicPartition]int64{{"t", 0}: 90, {"u", 0}: 7}) {
			return
		}
		visit("g1", map[TopicPartition]int64{{"t", 0}: 40, {"t", 1}: 20, {"u", 0}: -1})
	}
	r := NewRefresher(committed, f.leaderOf, f.ask, fixedClock(20_000), discard)
	if len(r.Snapshot().Rows) != 0 {
		t.Fatal("a snapshot before the first refresh")
	}
	s := r.Refresh(context.Background())
	if f.asked[1] != 1 || f.asked[2] != 1 {
		t.Errorf("requests per leader %v, want one each", f.asked)
	}
	want := []Row{
		{Group: "g1", Topic: "t", Partition: 0, Committed: 40, LogStartOffset: 0, HighWatermark: 100, Lag: Lag{Records: 60, Bytes: 6000, Age: 10 * time.Second, DeleteAt: time.UnixMilli(70_000)}},
		{Group: "g1", Topic: "t", Partition: 1, Committed: 20, LogStartOffset: 50, HighWatermark: 80, Lag: Lag{Records: 60, Bytes: 3000, Age: 5 * time.Second, Lost: 30}, LostTotal: 30},
		{Group: "g2", Topic: "t", Partition: 0, Committed: 90, LogStartOffset: 0, HighWatermark: 100, Lag: Lag{Records: 10, Bytes: 1000, Age: time.Second, DeleteAt: time.UnixMilli(80_000)}},
		{Group: "g2", Topic: "u", Partition: 0, Committed: 7, LogStartOffset: 0, HighWatermark: 7},
	}
	if !slices.Equal(s.Rows, want) {
		t.Errorf("rows\n got %+v\nwant %+v", s.Rows, want)
	}
	if s.Unknown != 0 || r.Snapshot() != s {
		t.Errorf("unknown %d; stored %v", s.Unknown, r.Snapshot() == s)
	}
}

// Records lost to retention are counted once per gap: a gap seen again
// adds nothing, a log start moving further past the same committed
// offset adds the difference, a gap closed and a new one opened counts
// anew; pairs that disappear are forgotten.
func TestRefresherCountsGaps(t *testing.T) {
	f := newFakeLeaders()
	tp := TopicPartition{"t", 1}
	commit := int64(20)
	committed := func(visit func(string, map[TopicPartition]int64) bool) {
		if commit >= 0 {
			visit("g", map[TopicPartition]int64{tp: commit})
		}
	}
	r := NewRefresher(committed, f.leaderOf, f.ask, fixedClock(20_000), discard)
	setStart := func(start int64) {
		p := f.parts[tp]
		p.LogStartOffset = start
		f.parts[tp] = p
	}
	step := func(what string, wantLost, wantTotal int64) {
		t.Helper()
		s := r.Refresh(context.Background())
		if len(s.Rows) != 1 || s.Rows[0].Lost != wantLost || s.Rows[0].LostTotal != wantTotal {
			t.Fatalf("%s: rows %+v, want lost %d, total %d", what, s.Rows, wantLost, wantTotal)
		}
	}
	step("a gap of 30", 30, 30)
	step("the same gap again", 30, 30)
	setStart(60)
	step("the log start moved on by 10", 40, 40)
	commit = 60
	step("the group caught up to the log start", 0, 40)
	setStart(75)
	step("a new gap of 15", 15, 55)
	commit = -1
	if s := r.Refresh(context.Background()); len(s.Rows) != 0 {
		t.Fatalf("rows %+v after the commit went", s.Rows)
	}
	commit = 70
	step("back: counted afresh", 5, 5)
}

// A leader that is down, a partition with no leader and a partition its
// supposed leader refuses are left out and counted; the rest stands.
func TestRefresherUnknown(t *testing.T) {
	f := newFakeLeaders()
	f.down[2] = true
	f.leader[TopicPartition{"moved", 0}] = 3 // node 3 does not lead it (any more)
	f.leader[TopicPartition{"offline", 0}] = -1
	committed := func(visit func(string, map[TopicPartition]int64) bool) {
		visit("g", map[TopicPartition]int64{{"t", 0}: 40, {"t", 1}: 20, {"u", 0}: 1, {"moved", 0}: 0, {"offline", 0}: 0, {"deleted", 0}: 5})
	}
	s := NewRefresher(committed, f.leaderOf, f.ask, fixedClock(20_000), discard).Refresh(context.Background())
	// t-1 and u-0 (node 2 down), moved-0, offline-0 unknown; the deleted
	// topic's offset is nobody's lag.
	if len(s.Rows) != 1 || s.Rows[0].Topic != "t" || s.Rows[0].Partition != 0 || s.Unknown != 4 {
		t.Fatalf("rows %+v unknown %d, want t-0 only and 4 unknown", s.Rows, s.Unknown)
	}
}

// Ask's errors name the cause: no leader, a node that failed, a refusal.
func TestAskErrors(t *testing.T) {
	f := newFakeLeaders()
	f.down[1] = true
	f.leader[TopicPartition{"u", 0}] = 2
	delete(f.parts, TopicPartition{"u", 0})
	got := Ask(context.Background(), f.leaderOf(), f.ask, map[TopicPartition][]int64{
		{"t", 0}: {1}, {"u", 0}: {1}, {"none", 0}: {1}, {"t", 1}: {20},
	}, fixedClock(0))
	for tp, want := range map[TopicPartition]error{{"t", 0}: errDown, {"u", 0}: kerr.NotLeaderForPartition, {"none", 0}: kerr.UnknownTopicOrPartition} {
		if a := got[tp]; a == nil || !errors.Is(a.Err, want) {
			t.Errorf("%v: %+v, want %v", tp, a, want)
		}
	}
	if a := got[TopicPartition{"t", 1}]; a == nil || a.Err != nil || a.Positions[20].Bytes != 3000 {
		t.Errorf("t-1: %+v", a)
	}
}

// Run refreshes at once, then again after MinInterval, and stops with
// its context.
func TestRefresherRun(t *testing.T) {
	f := newFakeLeaders()
	calls := make(chan struct{}, 10)
	committed := func(visit func(string, map[TopicPartition]int64) bool) {
		calls <- struct{}{}
		visit("g", map[TopicPartition]int64{{"t", 0}: 40})
	}
	r := NewRefresher(committed, f.leaderOf, f.ask, time.Now, discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	<-calls
	<-calls // the second refresh, a MinInterval later
	cancel()
	<-done
	if len(r.Snapshot().Rows) != 1 {
		t.Fatalf("snapshot %+v", r.Snapshot())
	}
}

// The wait after a refresh: a second at least, four times the refresh,
// and at most five seconds however long a leader made it wait.
func TestInterval(t *testing.T) {
	for took, want := range map[time.Duration]time.Duration{
		0:                      MinInterval,
		100 * time.Millisecond: MinInterval,
		time.Second:            4 * time.Second,
		5 * time.Second:        MaxInterval,
	} {
		if got := Interval(took); got != want {
			t.Errorf("Interval(%v) = %v, want %v", took, got, want)
		}
	}
}
