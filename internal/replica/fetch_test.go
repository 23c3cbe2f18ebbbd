package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/bufpool"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
)

type fetchOutcome struct {
	res *FetchResult
	at  time.Time
}

// startFetch runs Fetch on its own goroutine.
func (e *testEnv) startFetch(ctx context.Context, params FetchParams, parts ...FetchPartition) chan fetchOutcome {
	out := make(chan fetchOutcome, 1)
	go func() {
		res := e.m.Fetch(ctx, params, parts)
		out <- fetchOutcome{res, time.Now()}
	}()
	return out
}

// awaitParked waits until n requests are parked on the partition.
func (e *testEnv) awaitParked(topic string, partition int32, n int) {
	e.t.Helper()
	testutil.Eventually(e.t, 5*time.Second, func() error {
		if got := e.waiters(topic, partition); got != n {
			return fmt.Errorf("%d requests parked on %s-%d, want %d", got, topic, partition, n)
		}
		return nil
	})
}

func TestLongPollWakesOnAppend(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e := newEnv(t, "")
		e.put(newTopic("t", 1, 2, map[string]string{"flush.policy": policy}))
		start := time.Now()
		done := e.startFetch(context.Background(), consumerFetch(10*time.Second, 1), part("t", 0, 0), part("t", 1, 0))
		// Parked on both partitions of the request.
		e.awaitParked("t", 0, 1)
		e.awaitParked("t", 1, 1)
		select {
		case o := <-done:
			t.Fatalf("fetch answered before any append: %+v", o.res.Partitions)
		default:
		}
		appended := time.Now()
		e.append("t", 1, batch(t, "late", 1, 0), AcksLeader)
		o := <-done
		defer o.res.Release()
		if o.at.Before(appended) {
			t.Fatal("fetch answered before the append")
		}
		if d := o.at.Sub(start); d > 5*time.Second {
			t.Fatalf("fetch took %v: not woken by the append", d)
		}
		if len(o.res.Partitions[0].Records) != 0 {
			t.Fatalf("partition 0 has records: %q", values(t, o.res.Partitions[0].Records))
		}
		if got := values(t, o.res.Partitions[1].Records); !slices.Equal(got, []string{"late-0"}) {
			t.Fatalf("partition 1: %q", got)
		}
		// The waiter is gone from both partitions.
		if e.waiters("t", 0) != 0 || e.waiters("t", 1) != 0 {
			t.Fatalf("waiters left behind: %d, %d", e.waiters("t", 0), e.waiters("t", 1))
		}
	})
}

// A long poll waiting for more than one batch's worth of bytes keeps
// waiting after a wake that does not bring enough.
func TestLongPollWaitsForMinBytes(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	one := batch(t, "a", 1, 0)
	done := e.startFetch(context.Background(), consumerFetch(10*time.Second, int32(len(one)+1)), part("t", 0, 0))
	e.awaitParked("t", 0, 1)
	e.append("t", 0, one, AcksLeader)
	e.append("t", 0, batch(t, "b", 1, 0), AcksLeader)
	o := <-done
	defer o.res.Release()
	if got := values(t, o.res.Partitions[0].Records); !slices.Equal(got, []string{"a-0", "b-0"}) {
		t.Fatalf("got %q, want both batches", got)
	}
}

func TestLongPollMaxWaitExpires(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	start := time.Now()
	res := e.m.Fetch(context.Background(), consumerFetch(60*time.Millisecond, 1), []FetchPartition{part("t", 0, 0)})
	defer res.Release()
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("answered after %v, before MaxWait", d)
	}
	p := res.Partitions[0]
	if p.Err != nil || len(p.Records) != 0 || p.HighWatermark != 0 {
		t.Fatalf("expired fetch: %+v, want empty and no error", p)
	}
	if e.waiters("t", 0) != 0 {
		t.Fatal("waiter left behind")
	}
}

func TestLongPollContextCancel(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := e.startFetch(ctx, consumerFetch(time.Minute, 1), part("t", 0, 0))
	e.awaitParked("t", 0, 1)
	cancelled := time.Now()
	cancel()
	o := <-done
	defer o.res.Release()
	if d := o.at.Sub(cancelled); d > 5*time.Second {
		t.Fatalf("fetch answered %v after cancel", d)
	}
	if len(o.res.Partitions[0].Records) != 0 || o.res.Partitions[0].Err != nil {
		t.Fatalf("cancelled fetch: %+v", o.res.Partitions[0])
	}
	if e.waiters("t", 0) != 0 {
		t.Fatal("waiter left behind")
	}
}

func TestLongPollWokenByDeletion(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	done := e.startFetch(context.Background(), consumerFetch(time.Minute, 1), part("t", 0, 0))
	e.awaitParked("t", 0, 1)
	e.remove("t")
	o := <-done
	defer o.res.Release()
	if err := o.res.Partitions[0].Err; !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("fetch of a deleted topic: %v", err)
	}
	if p := o.res.Partitions[0]; p.HighWatermark != -1 || p.LogStartOffset != -1 {
		t.Fatalf("failed partition offsets: %+v", p)
	}
}

func TestClosedManagerWakesWaiters(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	done := e.startFetch(context.Background(), consumerFetch(time.Minute, 1), part("t", 0, 0))
	e.awaitParked("t", 0, 1)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	defer o.res.Release()
	if err := o.res.Partitions[0].Err; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fetch during close: %v", err)
	}
	if _, err := e.m.Append(context.Background(), "t", 0, batch(t, "x", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append after close: %v", err)
	}
	if e.m.Ready() {
		t.Fatal("ready after close")
	}
}

func TestFetchErrorAnswersAtOnce(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	e.append("t", 0, batch(t, "a", 2, 0), AcksLeader)
	start := time.Now()
	res := e.m.Fetch(context.Background(), consumerFetch(time.Minute, 1<<20), []FetchPartition{
		part("t", 0, 0), part("t", 0, 3), part("t", 7, 0), part("nope", 0, 0),
	})
	defer res.Release()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a fetch with failed partitions waited %v", d)
	}
	if got := values(t, res.Partitions[0].Records); len(got) != 2 {
		t.Fatalf("partition with data: %q", got)
	}
	if err := res.Partitions[1].Err; !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("offset past the log end: %v", err)
	}
	for i := 2; i < 4; i++ {
		if err := res.Partitions[i].Err; !errors.Is(err, ErrUnknownTopicOrPartition) {
			t.Fatalf("partition %d: %v", i, err)
		}
	}
}

func TestFetchOffsetRange(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	e.append("t", 0, batch(t, "a", 4, 0), AcksLeader)
	// At the log end: empty, no error.
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 4)})
	if p := res.Partitions[0]; p.Err != nil || len(p.Records) != 0 || p.HighWatermark != 4 {
		t.Fatalf("fetch at the log end: %+v", p)
	}
	res.Release()
	// Below the log start after DeleteRecords: out of range.
	if _, err := e.m.DeleteRecords(context.Background(), "t", 0, 2, time.Second); err != nil {
		t.Fatal(err)
	}
	res = e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 1), part("t", 0, 2)})
	defer res.Release()
	if err := res.Partitions[0].Err; !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("fetch below the log start: %v", err)
	}
	if p := res.Partitions[1]; p.Err != nil || p.LogStartOffset != 2 {
		t.Fatalf("fetch at the log start: %+v", p)
	}
}

// Reference: KIP-74 (the first batch of the first partition with data is
// returned whatever the limits; later partitions stay within them).
func TestFetchByteLimits(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 3, nil))
	big := bigBatch(t, 4, 1000, 0) // one batch, ~4 KB
	small := func(p string) []byte { return batch(t, p, 1, 0) }
	e.append("t", 0, big, AcksLeader)
	p0Small := small("p0")
	e.append("t", 0, p0Small, AcksLeader)
	e.append("t", 1, big, AcksLeader)
	for i := range 10 {
		e.append("t", 2, small(fmt.Sprintf("p2.%d", i)), AcksLeader)
	}
	bigSize, smallSize := len(big), len(small("p2.0"))

	limited := func(partMax int32, offsets ...int64) []FetchPartition {
		var out []FetchPartition
		for i, o := range offsets {
			fp := part("t", int32(i), o)
			fp.MaxBytes = partMax
			out = append(out, fp)
		}
		return out
	}

	// Partition limits smaller than a batch: partition 0 (first with
	// data) gets its first whole batch and no more; partition 1's batch
	// is over its limit and it is not first, so it gets nothing.
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), limited(100, 0, 0, 0))
	if n := len(res.Partitions[0].Records); n != bigSize {
		t.Fatalf("partition 0: %d bytes, want its first batch (%d)", n, bigSize)
	}
	if n := len(res.Partitions[1].Records); n != 0 {
		t.Fatalf("partition 1: %d bytes, want none (its batch is over the limit)", n)
	}
	if got := values(t, res.Partitions[2].Records); len(got) != 100/smallSize {
		t.Fatalf("partition 2: %d records within 100 bytes, want %d", len(got), 100/smallSize)
	}
	res.Release()

	// An empty first partition does not use up the "at least one batch":
	// partition 1 is then the first with data.
	res = e.m.Fetch(context.Background(), consumerFetch(0, 0), limited(100, 5, 0))
	if n := len(res.Partitions[1].Records); n != bigSize {
		t.Fatalf("partition 1 as first with data: %d bytes, want %d", n, bigSize)
	}
	res.Release()

	// The response limit: partition 0's first batch passes it alone, and
	// nothing is left for the others.
	params := consumerFetch(0, 0)
	params.MaxBytes = 10
	res = e.m.Fetch(context.Background(), params, limited(1<<20, 0, 0, 0))
	if n := len(res.Partitions[0].Records); n != bigSize {
		t.Fatalf("response limit 10: partition 0 has %d bytes, want its first batch", n)
	}
	for i := 1; i < 3; i++ {
		if p := res.Partitions[i]; len(p.Records) != 0 || p.Err != nil || p.HighWatermark <= 0 {
			t.Fatalf("response limit used up: partition %d: %d bytes, err %v, hw %d", i, len(p.Records), p.Err, p.HighWatermark)
		}
	}
	res.Release()

	// The response limit split across partitions: what is left after
	// partition 0 bounds partition 2.
	params.MaxBytes = int32(bigSize + len(p0Small) + 3*smallSize)
	res = e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0), part("t", 2, 0)})
	if n := len(res.Partitions[0].Records); n != bigSize+len(p0Small) {
		t.Fatalf("partition 0: %d bytes, want %d", n, bigSize+len(p0Small))
	}
	if got := values(t, res.Partitions[1].Records); len(got) != 3 {
		t.Fatalf("partition 2 with %d bytes left: %d records, want 3", 3*smallSize, len(got))
	}
	total := 0
	for _, p := range res.Partitions {
		total += len(p.Records)
	}
	if total > int(params.MaxBytes) {
		t.Fatalf("response has %d bytes, limit %d", total, params.MaxBytes)
	}
	res.Release()
}

// Fetch reads up to the high watermark for consumers and up to the log
// end for followers (IsolationLogEnd).
func TestFetchIsolation(t *testing.T) {
	e := newEnv(t, "")
	// An ISR member that confirms nothing holds the high watermark at 0.
	e.put(withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1, 2}
	}))
	e.append("t", 0, batch(t, "a", 2, 0), AcksLeader)
	for _, iso := range []Isolation{IsolationHighWatermark, IsolationTxnCommitted} {
		params := consumerFetch(0, 0)
		params.Isolation = iso
		res := e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0)})
		if p := res.Partitions[0]; p.Err != nil || len(p.Records) != 0 || p.HighWatermark != 0 || p.LastStableOffset != 0 {
			t.Fatalf("isolation %d: %+v, want nothing above the high watermark", iso, p)
		}
		res.Release()
	}
	// Only a replica of the partition may read past the high watermark:
	// a client that sets a replica id of its own choosing is refused.
	for _, id := range []int32{1, 3} {
		params := FetchParams{ReplicaID: id, MaxBytes: 1 << 20, Isolation: IsolationLogEnd}
		res := e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0)})
		if p := res.Partitions[0]; !errors.Is(p.Err, ErrNotLeader) || len(p.Records) != 0 {
			t.Fatalf("fetch as replica %d: %+v, want ErrNotLeader and no records", id, p)
		}
		res.Release()
	}
	params := FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, Isolation: IsolationLogEnd}
	res := e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0)})
	if got := values(t, res.Partitions[0].Records); len(got) != 2 {
		t.Fatalf("follower fetch: %q, want both records", got)
	}
	res.Release()

	// A follower's long poll wakes on an append even though the high
	// watermark does not move.
	params.MaxWait, params.MinBytes = 10*time.Second, 1
	done := e.startFetch(context.Background(), params, part("t", 0, 2))
	e.awaitParked("t", 0, 1)
	e.append("t", 0, batch(t, "b", 1, 0), AcksLeader)
	o := <-done
	defer o.res.Release()
	if got := values(t, o.res.Partitions[0].Records); !slices.Equal(got, []string{"b-0"}) {
		t.Fatalf("follower long poll: %q", got)
	}
}

func TestEpochFencing(t *testing.T) {
	e := newEnv(t, "")
	topic := withPartition(newTopic("t", 1, 2, nil), 0, func(p *metadata.Partition) { p.LeaderEpoch = 5 })
	topic = withPartition(topic, 1, func(p *metadata.Partition) {
		p.Replicas = []int32{2, 1}
		p.Leader = 2
		p.LeaderEpoch = 3
	})
	e.put(topic)
	fetchEpoch := func(partition, epoch int32) error {
		fp := part("t", partition, 0)
		fp.CurrentLeaderEpoch = epoch
		res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{fp})
		defer res.Release()
		return res.Partitions[0].Err
	}
	for _, c := range []struct {
		epoch int32
		want  error
	}{{-1, nil}, {5, nil}, {4, ErrFencedLeaderEpoch}, {6, ErrUnknownLeaderEpoch}} {
		if err := fetchEpoch(0, c.epoch); c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("fetch with epoch %d: %v, want %v", c.epoch, err, c.want)
		}
		if _, err := e.m.ListOffset("t", 0, c.epoch, TimestampLatest, IsolationHighWatermark); c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("list offsets with epoch %d: %v, want %v", c.epoch, err, c.want)
		}
		if _, _, err := e.m.EndOffsetForEpoch("t", 0, c.epoch, 5); c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("offset for leader epoch with epoch %d: %v, want %v", c.epoch, err, c.want)
		}
	}
	// Partition 1 is led by node 2: this node is a follower and serves
	// no consumer, whatever epoch it names.
	if err := fetchEpoch(1, 3); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fetch from a follower: %v", err)
	}
	if _, err := e.m.Append(context.Background(), "t", 1, batch(t, "x", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce to a follower: %v", err)
	}
	// The follower's log exists: it is a replica here.
	e.log("t", 1)

	// Batches carry the epoch they were appended in.
	e.append("t", 0, batch(t, "x", 1, 0), AcksLeader)
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 0)})
	defer res.Release()
	h, err := record.ParseHeader(res.Partitions[0].Records)
	if err != nil || h.PartitionLeaderEpoch != 5 {
		t.Fatalf("batch leader epoch %d (%v), want 5", h.PartitionLeaderEpoch, err)
	}
}

// Fetch by topic id (Fetch v13+): a stale id is UNKNOWN_TOPIC_ID.
func TestFetchByTopicID(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	e.append("t", 0, batch(t, "a", 1, 0), AcksLeader)
	fp := FetchPartition{TopicID: topicID(1), Partition: 0, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}
	stale := fp
	stale.TopicID = topicID(9)
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{fp, stale})
	defer res.Release()
	if got := values(t, res.Partitions[0].Records); !slices.Equal(got, []string{"a-0"}) {
		t.Fatalf("fetch by id: %q (%v)", got, res.Partitions[0].Err)
	}
	if err := res.Partitions[1].Err; !errors.Is(err, ErrUnknownTopicID) {
		t.Fatalf("stale topic id: %v", err)
	}
}

// Results alias pooled buffers until Release; many small partitions do
// not each pin a partition-limit-sized buffer.
func TestFetchBuffers(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 4, nil))
	var parts []FetchPartition
	for i := range int32(4) {
		e.append("t", i, batch(t, fmt.Sprintf("p%d", i), 1, 0), AcksLeader)
		parts = append(parts, part("t", i, 0))
	}
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), parts)
	for i, p := range res.Partitions {
		if got := values(t, p.Records); !slices.Equal(got, []string{fmt.Sprintf("p%d-0", i)}) {
			t.Fatalf("partition %d: %q", i, got)
		}
		if cap(p.Records) > bufpool.ClassBytes(0) {
			t.Fatalf("partition %d: a %d-byte result holds a %d-byte buffer", i, len(p.Records), cap(p.Records))
		}
	}
	res.Release()
	res.Release() // idempotent
}
