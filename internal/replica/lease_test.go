package replica

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

type fakeLease struct{ held atomic.Bool }

func (l *fakeLease) Held() bool { return l.held.Load() }

// Without its leader lease a leader refuses produce (whatever the acks),
// consumer fetches, offset lookups and record deletions, retriably
// (NOT_LEADER_OR_FOLLOWER), and appends nothing; followers' fetches are
// still served. With it back, everything works again.
func TestLeaseLapsedRefusesClients(t *testing.T) {
	e := newEnv(t, "")
	l := &fakeLease{}
	l.held.Store(true)
	e.m.opts.Lease = l
	e.put(withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1}
	}))
	e.append("t", 0, batch(t, "a", 2, 0), AcksLeader)

	l.held.Store(false)
	for _, acks := range []Acks{AcksLeader, AcksAll, AcksNone} {
		if _, err := e.m.Append(context.Background(), "t", 0, batch(t, "b", 1, 0), acks, time.Second); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("append acks=%d without the lease: %v, want ErrNotLeader", acks, err)
		}
	}
	if end := e.log("t", 0).LogEndOffset(); end != 2 {
		t.Fatalf("log end %d after refused appends, want 2", end)
	}
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 0)})
	if p := res.Partitions[0]; !errors.Is(p.Err, ErrNotLeader) || len(p.Records) != 0 {
		t.Fatalf("consumer fetch without the lease: %+v, want ErrNotLeader and no records", p)
	}
	res.Release()
	if _, err := e.m.ListOffset("t", 0, -1, TimestampLatest, IsolationHighWatermark); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ListOffset without the lease: %v, want ErrNotLeader", err)
	}
	if _, _, err := e.m.EndOffsetForEpoch("t", 0, -1, 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("EndOffsetForEpoch without the lease: %v, want ErrNotLeader", err)
	}
	if _, err := e.m.DeleteRecords(context.Background(), "t", 0, 1, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("DeleteRecords without the lease: %v, want ErrNotLeader", err)
	}
	if start := e.log("t", 0).LogStartOffset(); start != 0 {
		t.Fatalf("log start %d after a refused deletion, want 0", start)
	}
	params := FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, Isolation: IsolationLogEnd}
	res = e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0)})
	if p := res.Partitions[0]; p.Err != nil || len(values(t, p.Records)) != 2 {
		t.Fatalf("follower fetch without the lease: err %v, %d records; want both records", p.Err, len(values(t, p.Records)))
	}
	res.Release()

	l.held.Store(true)
	if r := e.append("t", 0, batch(t, "c", 1, 0), AcksLeader); r.BaseOffset != 2 {
		t.Fatalf("append with the lease back at offset %d, want 2", r.BaseOffset)
	}
}

// The delayed produce's completion rule, a case per sentence of
// delayedProduceOutcome's doc.
func TestDelayedProduceOutcome(t *testing.T) {
	gone := fmt.Errorf("%w: t-0: topic deleted", ErrUnknownTopicOrPartition)
	written := produceWait{next: 10, epoch: 3, leaseLapses: 7}
	// waiting is the state the write was made in: leader in epoch 3, a
	// full ISR, the high watermark below the write, no lapse since.
	waiting := produceState{leaderEpoch: 3, isr: 3, minInsync: 2, highWatermark: 5, leaseLapses: 7}
	for _, tc := range []struct {
		name    string
		change  func(s *produceState)
		done    bool
		wantErr error
	}{
		{"waiting for the followers", func(*produceState) {}, false, nil},
		{"partition gone", func(s *produceState) { s.notLeader = gone }, true, ErrUnknownTopicOrPartition},
		{"leadership moved", func(s *produceState) { s.notLeader = ErrNotLeader }, true, ErrNotLeader},
		{"epoch ended, leads again", func(s *produceState) { s.leaderEpoch = 4 }, true, ErrNotLeader},
		{"epoch ended, committed in the next", func(s *produceState) { s.leaderEpoch, s.highWatermark = 4, 10 }, true, ErrNotLeader},
		{"ISR below min.insync.replicas", func(s *produceState) { s.isr = 1 }, true, ErrNotEnoughReplicasAfterAppend},
		{"committed", func(s *produceState) { s.highWatermark = 10 }, true, nil},
		{"committed past it", func(s *produceState) { s.highWatermark = 12 }, true, nil},
		{"lease lapsed, not committed", func(s *produceState) { s.leaseLapses = 8 }, true, ErrNotLeader},
		// The count, not the lease as it is now: a lapse that healed
		// before the write looked still answers it.
		{"lease lapsed twice since", func(s *produceState) { s.leaseLapses = 9 }, true, ErrNotLeader},
		{"lease lapsed, committed", func(s *produceState) { s.leaseLapses, s.highWatermark = 8, 10 }, true, nil},
		{"lease lapsed, one record short", func(s *produceState) { s.leaseLapses, s.highWatermark = 8, 9 }, true, ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := waiting
			tc.change(&s)
			done, err := delayedProduceOutcome(written, s, stringer("t-0"))
			if done != tc.done || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("done %v, err %v; want done %v, err %v", done, err, tc.done, tc.wantErr)
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// twoReplicas is topic "t", one partition led by this node with node 2
// in its ISR: node 2 never fetches unless the test does it, so an
// acks=all write waits for it.
func twoReplicas() *metadata.Topic {
	return withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1, 2}
	})
}

// leaseEnv is newEnv with a fake lease, held.
func leaseEnv(t *testing.T) (*testEnv, *fakeLease) {
	e := newEnv(t, "")
	l := &fakeLease{}
	l.held.Store(true)
	e.m.opts.Lease = l
	return e, l
}

// answerBound bounds the waits for answers in these tests. Their
// requests have timeouts of an hour, so an answer within it came from
// something other than a timeout.
const answerBound = 10 * time.Second

// produceAsync appends data to t-0, acks=all with a timeout of an hour,
// on a goroutine of its own, and sends its error.
func produceAsync(e *testEnv, data []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Append(context.Background(), "t", 0, data, AcksAll, time.Hour)
		done <- err
	}()
	return done
}

// fetchAsNode2 is node 2's fetch of t-0 at offset, not waiting: the
// leader records that node 2 holds everything below offset.
func fetchAsNode2(t *testing.T, e *testEnv, offset int64) {
	t.Helper()
	res := e.m.Fetch(context.Background(), FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, Isolation: IsolationLogEnd},
		[]FetchPartition{part("t", 0, offset)})
	defer res.Release()
	if err := res.Partitions[0].Err; err != nil {
		t.Fatalf("node 2's fetch at %d: %v", offset, err)
	}
}

// A lapse of the leader lease answers the acks=all produce waiting for a
// follower that never fetches, NOT_LEADER_OR_FOLLOWER, and the consumer's
// long poll on the same partition the same, both long before their
// timeouts (an hour); a follower's parked fetch is left alone. The records
// stay in the log. With the lease back (the heal) a new write waits for
// the follower and is acknowledged once it fetches: the lapse left
// nothing behind.
func TestLeaseLapseAnswersParkedProduces(t *testing.T) {
	forEachFlushPolicy(t, func(t *testing.T, policy string) {
		e, l := leaseEnv(t)
		e.put(withConfigs(twoReplicas(), map[string]string{"flush.policy": policy}),
			withPartition(newTopic("f", 2, 1, nil), 0, func(p *metadata.Partition) { p.Replicas = []int32{1, 2} }))

		// A follower's long poll on f, where nothing is written.
		fctx, stopFollower := context.WithCancel(context.Background())
		defer stopFollower()
		followerDone := make(chan error, 1)
		go func() {
			res := e.m.Fetch(fctx, FetchParams{ReplicaID: 2, MaxWait: time.Hour, MinBytes: 1, MaxBytes: 1 << 20, Isolation: IsolationLogEnd},
				[]FetchPartition{part("f", 0, 0)})
			followerDone <- res.Partitions[0].Err
			res.Release()
		}()
		produced := produceAsync(e, batch(t, "a", 2, 0))
		consumed := make(chan error, 1)
		go func() {
			res := e.m.Fetch(context.Background(), consumerFetch(time.Hour, 1), []FetchPartition{part("t", 0, 0)})
			consumed <- res.Partitions[0].Err
			res.Release()
		}()
		testutil.Eventually(t, answerBound, func() error {
			if n, f := e.waiters("t", 0), e.waiters("f", 0); n != 2 || f != 1 {
				return fmt.Errorf("%d requests parked on t-0, %d on f-0; want the produce and the consumer, and the follower", n, f)
			}
			return nil
		})

		l.held.Store(false)
		if woken := e.m.LeaseLapsed(); woken != 2 {
			t.Fatalf("LeaseLapsed woke %d requests, want 2: the produce and the consumer, not the follower", woken)
		}
		if err := testutil.Receive(t, answerBound, "the parked produce", produced); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("parked acks=all produce after the lapse: %v, want NOT_LEADER_OR_FOLLOWER", err)
		}
		if err := testutil.Receive(t, answerBound, "the consumer's long poll", consumed); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("consumer's long poll after the lapse: %v, want NOT_LEADER_OR_FOLLOWER", err)
		}
		if end, hw := e.log("t", 0).LogEndOffset(), e.log("t", 0).HighWatermark(); end != 2 || hw != 0 {
			t.Fatalf("log end %d, high watermark %d after the lapse; want the records in the log (2), uncommitted (0)", end, hw)
		}
		select {
		case err := <-followerDone:
			t.Fatalf("the follower's parked fetch was answered (%v) by the lapse", err)
		default:
		}
		stopFollower()
		testutil.Receive(t, answerBound, "the follower's fetch, cancelled", followerDone)

		// The heal: a write made now waits for node 2 as any other.
		l.held.Store(true)
		produced = produceAsync(e, batch(t, "b", 1, 0))
		testutil.Eventually(t, answerBound, func() error {
			if n := e.waiters("t", 0); n != 1 {
				return fmt.Errorf("%d requests parked on t-0, want the produce", n)
			}
			return nil
		})
		select {
		case err := <-produced:
			t.Fatalf("produce after the heal answered (%v) before node 2 fetched it", err)
		default:
		}
		fetchAsNode2(t, e, 3)
		if err := testutil.Receive(t, answerBound, "the produce after the heal", produced); err != nil {
			t.Fatalf("produce after the heal, node 2 holding it: %v, want acknowledged", err)
		}
		// Node 2 holds the lapse's records too: committed, though their
		// producer was told otherwise (its retry is a duplicate, which an
		// idempotent producer is answered for with these offsets).
		if hw := e.log("t", 0).HighWatermark(); hw != 3 {
			t.Fatalf("high watermark %d after node 2's fetch, want 3", hw)
		}
	})
}

// A write the high watermark passed before the lease lapsed is
// acknowledged whenever its producer looks, lapse or not: every ISR member
// holds it. One written before the lapse and not committed is answered
// NOT_LEADER_OR_FOLLOWER at once, even when it looks after the lease came
// back: it was made under the lease that lapsed.
func TestLeaseLapseAcknowledgesCommittedProduces(t *testing.T) {
	e, l := leaseEnv(t)
	e.put(twoReplicas())
	log := e.log("t", 0)

	committed, err := e.m.StartAppend("t", 0, batch(t, "a", 2, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(2); err != nil { // the leader's own copy, under flush.policy=ack
		t.Fatal(err)
	}
	fetchAsNode2(t, e, 2)
	if hw := log.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d after node 2's fetch, want 2", hw)
	}
	uncommitted, err := e.m.StartAppend("t", 0, batch(t, "b", 1, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}

	l.held.Store(false)
	e.m.LeaseLapsed()
	if err := testutil.Receive(t, answerBound, "the committed write", waitFor(committed)); err != nil {
		t.Fatalf("write committed before the lapse: %v, want acknowledged", err)
	}
	l.held.Store(true)
	if err := testutil.Receive(t, answerBound, "the uncommitted write", waitFor(uncommitted)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write made before the lapse, uncommitted: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// waitFor calls pa.Wait with a timeout of an hour on a goroutine of its
// own and sends its answer.
func waitFor(pa Pending) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := pa.Wait(context.Background(), time.Hour)
		done <- err
	}()
	return done
}
