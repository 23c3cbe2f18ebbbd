package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestProduceFetchRoundTrip(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e := newEnv(t, "")
		e.put(newTopic("orders", 1, 2, map[string]string{"flush.policy": policy}))
		if !e.m.Ready() {
			t.Fatal("not ready after the image was applied")
		}
		r1 := e.append("orders", 0, batch(t, "a", 3, 1000), AcksLeader)
		r2 := e.append("orders", 0, batch(t, "b", 2, 1001), AcksAll)
		r3 := e.append("orders", 1, batch(t, "c", 1, 1002), AcksLeader)
		if r1.BaseOffset != 0 || r2.BaseOffset != 3 || r3.BaseOffset != 0 {
			t.Fatalf("base offsets %d %d %d, want 0 3 0", r1.BaseOffset, r2.BaseOffset, r3.BaseOffset)
		}
		if r1.LogAppendTime != -1 || r1.LogStartOffset != 0 {
			t.Fatalf("append result %+v: want LogAppendTime -1, LogStartOffset 0", r1)
		}
		res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("orders", 0, 0), part("orders", 1, 0)})
		defer res.Release()
		p0, p1 := res.Partitions[0], res.Partitions[1]
		if p0.Err != nil || p1.Err != nil {
			t.Fatalf("errors: %v, %v", p0.Err, p1.Err)
		}
		if got, want := values(t, p0.Records), []string{"a-0", "a-1", "a-2", "b-0", "b-1"}; !slices.Equal(got, want) {
			t.Fatalf("partition 0 values %q, want %q", got, want)
		}
		if got := values(t, p1.Records); !slices.Equal(got, []string{"c-0"}) {
			t.Fatalf("partition 1 values %q", got)
		}
		if p0.HighWatermark != 5 || p0.LastStableOffset != 5 || p0.LogStartOffset != 0 {
			t.Fatalf("partition 0 offsets: hw %d lso %d start %d", p0.HighWatermark, p0.LastStableOffset, p0.LogStartOffset)
		}
		if l := e.log("orders", 0); l.HighWatermark() != 5 || (policy == "ack" && l.RecoveryPoint() < 5) {
			t.Fatalf("log: hw %d recovery point %d", l.HighWatermark(), l.RecoveryPoint())
		}
		// Fetching from the middle of a batch returns the whole batch, as
		// Kafka does; the consumer skips what it did not ask for.
		mid := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("orders", 0, 4)})
		defer mid.Release()
		if got := offsets(t, mid.Partitions[0].Records); !slices.Equal(got, []int64{3, 4}) {
			t.Fatalf("fetch at 4: offsets %v, want the batch 3..4", got)
		}
	})
}

func TestAcks(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e := newEnv(t, "")
		e.put(newTopic("t", 1, 1, map[string]string{"flush.policy": policy}))
		l := e.log("t", 0)

		// acks=1: under ack, answered only after the flush covers it.
		e.append("t", 0, batch(t, "one", 2, 0), AcksLeader)
		if l.HighWatermark() != 2 {
			t.Fatalf("acks=1: high watermark %d, want 2", l.HighWatermark())
		}
		if policy == "ack" && l.RecoveryPoint() < 2 {
			t.Fatalf("acks=1 under flush.policy=ack answered before the flush: recovery point %d", l.RecoveryPoint())
		}

		// acks=all: the high watermark passes the batch before the answer.
		res := e.append("t", 0, batch(t, "all", 3, 0), AcksAll)
		if res.BaseOffset != 2 || l.HighWatermark() < 5 {
			t.Fatalf("acks=all: base %d, high watermark %d", res.BaseOffset, l.HighWatermark())
		}

		// acks=0: answered after the append; the records become visible
		// (flushed in the background under ack), which a long poll sees.
		res = e.append("t", 0, batch(t, "zero", 1, 0), AcksNone)
		if res.BaseOffset != 5 {
			t.Fatalf("acks=0: base %d, want 5", res.BaseOffset)
		}
		f := e.m.Fetch(context.Background(), consumerFetch(10*time.Second, 1), []FetchPartition{part("t", 0, 5)})
		defer f.Release()
		if got := values(t, f.Partitions[0].Records); !slices.Equal(got, []string{"zero-0"}) {
			t.Fatalf("acks=0 record not visible: %q (err %v)", got, f.Partitions[0].Err)
		}
		if policy == "ack" && l.RecoveryPoint() < 6 {
			t.Fatalf("acks=0 record visible before it was flushed: recovery point %d", l.RecoveryPoint())
		}

		// Invalid acks: refused, nothing written.
		for _, acks := range []Acks{2, -2, 100} {
			_, err := e.m.Append(context.Background(), "t", 0, batch(t, "bad", 1, 0), acks, time.Second)
			if !errors.Is(err, ErrInvalidRequiredAcks) {
				t.Fatalf("acks=%d: %v, want ErrInvalidRequiredAcks", acks, err)
			}
		}
		if l.LogEndOffset() != 6 {
			t.Fatalf("log end offset %d after refused appends, want 6", l.LogEndOffset())
		}
	})
}

func TestProduceErrors(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	_, err := e.m.Append(context.Background(), "nope", 0, batch(t, "x", 1, 0), AcksLeader, time.Second)
	if !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	_, err = e.m.Append(context.Background(), "t", 1, batch(t, "x", 1, 0), AcksLeader, time.Second)
	if !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	// A corrupt batch fails with storage's error and leaves the log unchanged.
	b := batch(t, "x", 1, 0)
	b[len(b)-1] ^= 0xff
	res, err := e.m.Append(context.Background(), "t", 0, b, AcksAll, time.Second)
	if err == nil || !storage.IsCorruption(err) {
		t.Fatalf("corrupt batch: %v, want a corruption error", err)
	}
	if res.BaseOffset != -1 || res.LogStartOffset != -1 {
		t.Fatalf("failed append answered %+v, want -1 offsets", res)
	}
	if l := e.log("t", 0); l.LogEndOffset() != 0 {
		t.Fatalf("log end offset %d after a refused batch", l.LogEndOffset())
	}
}

func TestMinInsyncReplicas(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, map[string]string{"min.insync.replicas": "2"}))
	_, err := e.m.Append(context.Background(), "t", 0, batch(t, "x", 1, 0), AcksAll, time.Second)
	if !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with 1 in-sync replica and min.insync.replicas=2: %v", err)
	}
	if l := e.log("t", 0); l.LogEndOffset() != 0 {
		t.Fatalf("refused produce appended: log end offset %d", l.LogEndOffset())
	}
	// min.insync.replicas binds acks=all only, as in Kafka.
	if res := e.append("t", 0, batch(t, "x", 1, 0), AcksLeader); res.BaseOffset != 0 {
		t.Fatalf("acks=1: base %d", res.BaseOffset)
	}
	// Lowering it through a config change lets acks=all through.
	e.put(withConfigs(e.topics["t"], map[string]string{"min.insync.replicas": "1"}))
	if res := e.append("t", 0, batch(t, "y", 1, 0), AcksAll); res.BaseOffset != 1 {
		t.Fatalf("acks=all after lowering min.insync.replicas: base %d", res.BaseOffset)
	}
}

// TestMinInsyncReplicasDefault: a topic of three replicas that does not
// set min.insync.replicas gets 2, so with its followers out of the ISR
// acks=all is refused before the append; acks=1 is not.
func TestMinInsyncReplicasDefault(t *testing.T) {
	e := newEnv(t, "")
	tp := newTopic("r3", 1, 1, nil)
	tp.Partitions[0].Replicas = []int32{testNode, testNode + 1, testNode + 2}
	e.put(tp)
	_, err := e.m.Append(context.Background(), "r3", 0, batch(t, "x", 1, 0), AcksAll, time.Second)
	if !errors.Is(err, ErrNotEnoughReplicas) || !strings.Contains(err.Error(), "min.insync.replicas is 2") {
		t.Fatalf("acks=all with 1 of 3 replicas in sync: %v, want NOT_ENOUGH_REPLICAS under min.insync.replicas 2", err)
	}
	if l := e.log("r3", 0); l.LogEndOffset() != 0 {
		t.Fatalf("refused produce appended: log end offset %d", l.LogEndOffset())
	}
	if res := e.append("r3", 0, batch(t, "x", 1, 0), AcksLeader); res.BaseOffset != 0 {
		t.Fatalf("acks=1: base %d", res.BaseOffset)
	}
}

// Many producers on one partition at once: offsets are distinct and
// contiguous, and every acknowledged acks>=1 batch is below the high
// watermark when its producer hears back. Run with -race.
func TestConcurrentAppends(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e := newEnv(t, "")
		e.put(newTopic("t", 1, 1, map[string]string{"flush.policy": policy}))
		l := e.log("t", 0)
		const producers, perProducer, perBatch = 12, 40, 3
		type acked struct{ base, hwAfter int64 }
		results := make([][]acked, producers)
		var wg sync.WaitGroup
		errs := make(chan error, producers)
		for g := range producers {
			data := make([][]byte, perProducer)
			for i := range data {
				data[i] = batch(t, fmt.Sprintf("g%d-%d", g, i), perBatch, 0)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				acks := []Acks{AcksAll, AcksLeader, AcksAll}[g%3]
				for i := range perProducer {
					res, err := e.m.Append(context.Background(), "t", 0, data[i], acks, 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					results[g] = append(results[g], acked{res.BaseOffset, l.HighWatermark()})
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var bases []int64
		for g := range results {
			for _, a := range results[g] {
				if a.hwAfter < a.base+perBatch {
					t.Fatalf("producer %d acknowledged batch at %d with the high watermark at %d", g, a.base, a.hwAfter)
				}
				bases = append(bases, a.base)
			}
		}
		slices.Sort(bases)
		for i, b := range bases {
			if b != int64(i*perBatch) {
				t.Fatalf("batch %d at offset %d, want %d: offsets not distinct and contiguous", i, b, i*perBatch)
			}
		}
		total := int64(producers * perProducer * perBatch)
		if l.LogEndOffset() != total || l.HighWatermark() != total {
			t.Fatalf("log end %d, high watermark %d, want %d", l.LogEndOffset(), l.HighWatermark(), total)
		}
		// Every record reads back once, each producer's in its order.
		var got []string
		for off := int64(0); off < total; {
			res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, off)})
			got = append(got, values(t, res.Partitions[0].Records)...)
			off += int64(len(offsets(t, res.Partitions[0].Records)))
			res.Release()
		}
		if len(got) != int(total) {
			t.Fatalf("read back %d records, want %d", len(got), total)
		}
	})
}

func TestAcksAllWaitsForISR(t *testing.T) {
	e := newEnv(t, "")
	// Node 2 is in the ISR but nothing replicates to it yet: the high
	// watermark cannot pass what node 2 has not confirmed.
	two := withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1, 2}
	})
	e.put(two)
	l := e.log("t", 0)

	start := time.Now()
	_, err := e.m.Append(context.Background(), "t", 0, batch(t, "x", 1, 0), AcksAll, 50*time.Millisecond)
	if !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("acks=all with an unconfirmed ISR member: %v, want ErrRequestTimedOut", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatalf("timed out after %v, before the 50ms timeout", time.Since(start))
	}
	if l.LogEndOffset() != 1 || l.HighWatermark() != 0 {
		t.Fatalf("log end %d, high watermark %d: want the record appended, not committed", l.LogEndOffset(), l.HighWatermark())
	}
	// Timeout 0: answered at once.
	if _, err := e.m.Append(context.Background(), "t", 0, batch(t, "x", 1, 0), AcksAll, 0); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("timeout 0: %v", err)
	}

	// ctx ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Append(ctx, "t", 0, batch(t, "x", 1, 0), AcksAll, time.Minute)
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := e.waiters("t", 0); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled produce: %v", err)
	}

	// The ISR shrinking to this node lets the parked produce complete:
	// ApplyImage advances the high watermark and wakes it.
	go func() {
		_, err := e.m.Append(context.Background(), "t", 0, batch(t, "y", 1, 0), AcksAll, time.Minute)
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := e.waiters("t", 0); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("acks=all produce answered (%v) before the high watermark could pass it", err)
	default:
	}
	e.put(withPartition(two, 0, func(p *metadata.Partition) { p.ISR = []int32{1} }))
	if err := <-done; err != nil {
		t.Fatalf("parked produce after the ISR shrank: %v", err)
	}
	if l.HighWatermark() != l.LogEndOffset() {
		t.Fatalf("high watermark %d, log end %d", l.HighWatermark(), l.LogEndOffset())
	}
}

func TestParkedProduceLearnsOfLeadershipLossAndDeletion(t *testing.T) {
	e := newEnv(t, "")
	two := withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1, 2}
	})
	e.put(two)
	park := func() chan error {
		done := make(chan error, 1)
		go func() {
			_, err := e.m.Append(context.Background(), "t", 0, batch(t, "x", 1, 0), AcksAll, time.Minute)
			done <- err
		}()
		testutil.Eventually(t, 5*time.Second, func() error {
			if n := e.waiters("t", 0); n != 1 {
				return fmt.Errorf("%d waiters", n)
			}
			return nil
		})
		return done
	}

	done := park()
	e.put(withPartition(two, 0, func(p *metadata.Partition) { p.Leader = 2; p.LeaderEpoch = 1 }))
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("leadership moved away: %v, want ErrNotLeader", err)
	}

	e.put(withPartition(two, 0, func(p *metadata.Partition) { p.Leader = 1; p.LeaderEpoch = 2 }))
	done = park()
	e.remove("t")
	if err := <-done; !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("topic deleted: %v, want ErrUnknownTopicOrPartition", err)
	}
}

func TestLogAppendTime(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, map[string]string{"message.timestamp.type": "LogAppendTime"}))
	before := time.Now().UnixMilli()
	res := e.append("t", 0, batch(t, "x", 1, 5), AcksLeader)
	if res.LogAppendTime < before {
		t.Fatalf("LogAppendTime %d, want the broker's time (>= %d)", res.LogAppendTime, before)
	}
}

// An idempotent producer's retry is answered with the original offsets
// and writes nothing; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentRetry(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e := newEnv(t, "")
		e.put(newTopic("t", 1, 1, map[string]string{"flush.policy": policy}))
		e.append("t", 0, batch(t, "plain", 2, 0), AcksLeader)
		idem := func(seq int32, n int) []byte { return idempotentBatch(t, 7, seq, n) }
		first := e.append("t", 0, idem(0, 3), AcksAll)
		retry := e.append("t", 0, idem(0, 3), AcksAll)
		if first.BaseOffset != 2 || retry.BaseOffset != first.BaseOffset {
			t.Fatalf("first at %d, retry answered %d; want both 2", first.BaseOffset, retry.BaseOffset)
		}
		l := e.log("t", 0)
		if l.LogEndOffset() != 5 {
			t.Fatalf("retry was written: log end offset %d, want 5", l.LogEndOffset())
		}
		if _, err := e.m.Append(context.Background(), "t", 0, idem(9, 1), AcksAll, time.Second); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("sequence gap: %v, want ErrOutOfOrderSequence", err)
		}
		if next := e.append("t", 0, idem(3, 1), AcksAll); next.BaseOffset != 5 {
			t.Fatalf("next in sequence at %d, want 5", next.BaseOffset)
		}
		// What each append wrote, for the listener's records-in count:
		// the records of a new batch, none for a retry.
		for _, tc := range []struct {
			batch []byte
			want  int64
		}{{idem(4, 4), 4}, {idem(4, 4), 0}} {
			pending, err := e.m.StartAppend("t", 0, tc.batch, AcksAll)
			if err != nil {
				t.Fatal(err)
			}
			if got := pending.Records(); got != tc.want {
				t.Fatalf("Records() %d, want %d", got, tc.want)
			}
			if _, err := pending.Wait(context.Background(), time.Second); err != nil {
				t.Fatal(err)
			}
		}
	})
}
