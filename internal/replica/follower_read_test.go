package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Follower fetching (KIP-392; selector.go): the follower's side. Node 1
// holds ten one-record batches it wrote as leader, then follows node 2
// in epoch 1 with its high watermark at 5 (no fetcher runs: the test
// sets what the leader would have said).
func TestConsumerReadsFromAnInSyncFollower(t *testing.T) {
	e := newEnv(t, "")
	topic := newTopic("f", 1, 1, nil)
	e.put(topic)
	for i := range 10 {
		e.append("f", 0, batch(t, fmt.Sprint("r", i), 1, 1000), AcksAll)
	}
	follow := func(isr ...int32) {
		e.put(withPartition(topic, 0, func(p *metadata.Partition) {
			p.Replicas, p.ISR, p.Leader, p.LeaderEpoch = []int32{1, 2}, isr, 2, 1
		}))
	}
	follow(1, 2)
	e.log("f", 0).SetHighWatermark(5)

	client := &ClientMetadata{RackID: "b"}
	fetch := func(client *ClientMetadata, iso Isolation, offset int64, epoch int32) FetchPartitionResult {
		t.Helper()
		params := consumerFetch(0, 1)
		params.Client, params.Isolation = client, iso
		fp := part("f", 0, offset)
		fp.CurrentLeaderEpoch = epoch
		res := e.m.Fetch(context.Background(), params, []FetchPartition{fp})
		t.Cleanup(res.Release)
		return res.Partitions[0]
	}
	for _, iso := range []Isolation{IsolationHighWatermark, IsolationTxnCommitted} {
		r := fetch(client, iso, 0, 1)
		if r.Err != nil || !r.FromFollower || r.Redirect {
			t.Fatalf("isolation %d: err %v, from follower %v, redirect %v; want records from the follower's copy", iso, r.Err, r.FromFollower, r.Redirect)
		}
		// Below the follower's own high watermark, never past it.
		if got := offsets(t, r.Records); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) || r.HighWatermark != 5 {
			t.Fatalf("isolation %d: offsets %v, high watermark %d; want 0 to 4 and 5", iso, got, r.HighWatermark)
		}
	}
	// Kafka's empty client rack still reads from any in-sync replica.
	if r := fetch(&ClientMetadata{}, IsolationHighWatermark, 3, -1); r.Err != nil || len(offsets(t, r.Records)) != 2 {
		t.Fatalf("no rack: err %v, %d records; want 3 and 4", r.Err, len(offsets(t, r.Records)))
	}
	// Past its high watermark but in its log: nothing yet, no error
	// (Kafka's LocalLog.read), and no long poll with MaxWait 0.
	if r := fetch(client, IsolationHighWatermark, 7, 1); r.Err != nil || len(r.Records) != 0 || r.HighWatermark != 5 {
		t.Fatalf("offset 7: err %v, %d bytes, high watermark %d; want none, no error", r.Err, len(r.Records), r.HighWatermark)
	}
	for _, tc := range []struct {
		name   string
		client *ClientMetadata
		offset int64
		epoch  int32
		want   error
	}{
		{"before Fetch v11: the leader only", nil, 0, 1, ErrNotLeader},
		{"past its log end", client, 11, 1, ErrOffsetOutOfRange},
		{"an older leader epoch", client, 0, 0, ErrFencedLeaderEpoch},
		{"a newer leader epoch", client, 0, 2, ErrUnknownLeaderEpoch},
	} {
		if r := fetch(tc.client, IsolationHighWatermark, tc.offset, tc.epoch); !errors.Is(r.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, r.Err, tc.want)
		}
	}

	// Out of the ISR: sent back to the leader, after the epoch fence
	// (Kafka's order).
	follow(2)
	if r := fetch(client, IsolationHighWatermark, 0, 1); !errors.Is(r.Err, ErrNotLeader) {
		t.Fatalf("out of the ISR: %v, want NOT_LEADER_OR_FOLLOWER", r.Err)
	}
	if r := fetch(client, IsolationHighWatermark, 0, 0); !errors.Is(r.Err, ErrFencedLeaderEpoch) {
		t.Fatalf("out of the ISR with an older epoch: %v, want FENCED_LEADER_EPOCH", r.Err)
	}
}

// The leader's side, with --replica-selector rack, and the follower's
// long poll, over two real managers replicating: node 1 (rack a) leads,
// node 2 (rack b) follows.
func TestLeaderSendsAConsumerToItsRacksReplica(t *testing.T) {
	_, nodes := newPair(t, func(o *Options) { o.ReplicaSelector = SelectRack })
	leader, follower := nodes[0], nodes[1]
	racks := map[int32]metadata.Broker{1: {NodeID: 1, Rack: "a"}, 2: {NodeID: 2, Rack: "b"}}
	set := func(brokers map[int32]metadata.Broker, isr ...int32) {
		for _, n := range nodes {
			n.brokers = brokers
			n.set(1, 0, isr...)
		}
	}
	set(racks, 1, 2)
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "a", 5, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	fetch := func(n *node, rack *string, offset int64, maxWait time.Duration) (FetchPartitionResult, time.Duration) {
		t.Helper()
		params := consumerFetch(maxWait, 1)
		if rack != nil {
			params.Client = &ClientMetadata{RackID: *rack}
		}
		start := time.Now()
		res := n.m.Fetch(context.Background(), params, []FetchPartition{part("r", 0, offset)})
		t.Cleanup(res.Release)
		return res.Partitions[0], time.Since(start)
	}
	rack := func(s string) *string { return &s }

	// The acks=all write means node 2 fetched past it: the leader knows
	// its copy holds offset 0. Named with no records and at once, not
	// after the 30 s long poll a read at the high watermark would be.
	r, took := fetch(leader, rack("b"), 0, 30*time.Second)
	if r.Err != nil || !r.Redirect || r.PreferredReadReplica != 2 || r.Size() != 0 || r.HighWatermark != 5 {
		t.Fatalf("rack b: err %v, redirect %v to %d, %d bytes, high watermark %d; want node 2 named, no records",
			r.Err, r.Redirect, r.PreferredReadReplica, r.Size(), r.HighWatermark)
	}
	if took > 10*time.Second {
		t.Fatalf("the answer naming node 2 took %v: it waited", took)
	}
	for name, c := range map[string]*string{"the leader's rack": rack("a"), "no rack": rack(""), "before v11": nil, "a rack with no replica": rack("c")} {
		r, _ := fetch(leader, c, 0, 0)
		if r.Err != nil || r.Redirect || r.FromFollower || len(offsets(t, r.Records)) != 5 {
			t.Fatalf("%s: err %v, redirect %v, from follower %v; want the leader's five records", name, r.Err, r.Redirect, r.FromFollower)
		}
	}
	if r, _ := fetch(leader, rack("b"), 6, 0); !errors.Is(r.Err, ErrOffsetOutOfRange) || r.Redirect {
		t.Fatalf("past the leader's log end: %v, redirect %v; want OFFSET_OUT_OF_RANGE from the leader", r.Err, r.Redirect)
	}

	// Node 2 serves the consumer sent to it, from its own copy.
	testutil.Eventually(t, 10*time.Second, func() error {
		if hw := follower.log().HighWatermark(); hw != 5 {
			return fmt.Errorf("node 2's high watermark %d, want 5", hw)
		}
		return nil
	})
	if r, _ := fetch(follower, rack("b"), 0, 0); r.Err != nil || !r.FromFollower || len(offsets(t, r.Records)) != 5 {
		t.Fatalf("node 2: err %v, from follower %v, %d records; want five", r.Err, r.FromFollower, len(offsets(t, r.Records)))
	}
	// A consumer parked at node 2's high watermark is woken when the
	// fetcher moves it, not at MaxWait.
	type outcome struct {
		r    FetchPartitionResult
		took time.Duration
	}
	parked := make(chan outcome, 1)
	go func() {
		r, took := fetch(follower, rack("b"), 5, 30*time.Second)
		parked <- outcome{r, took}
	}()
	p, _ := follower.m.Partition("r", 0)
	testutil.Eventually(t, 5*time.Second, func() error {
		p.wait.Lock()
		defer p.wait.Unlock()
		if len(p.wait.waiters) == 0 {
			return errors.New("the consumer's fetch is not parked on node 2")
		}
		return nil
	})
	if _, err := leader.m.Append(context.Background(), "r", 0, batch(t, "b", 3, 1000), AcksAll, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	o := <-parked
	if o.r.Err != nil || !slices.Equal(offsets(t, o.r.Records), []int64{5, 6, 7}) || o.took > 20*time.Second {
		t.Fatalf("parked on node 2: err %v, offsets %v after %v; want 5 to 7 when its high watermark moved", o.r.Err, offsets(t, o.r.Records), o.took)
	}

	// Node 2 fenced: never named, and the leader serves.
	fenced := map[int32]metadata.Broker{1: racks[1], 2: {NodeID: 2, Rack: "b", Fenced: true}}
	set(fenced, 1, 2)
	if r, _ := fetch(leader, rack("b"), 0, 0); r.Redirect || r.Err != nil || r.Size() == 0 {
		t.Fatalf("node 2 fenced: err %v, redirect %v to %d; want the leader's records", r.Err, r.Redirect, r.PreferredReadReplica)
	}
	// Node 2 out of the ISR: never named, and it sends consumers back.
	set(racks, 1)
	if r, _ := fetch(leader, rack("b"), 0, 0); r.Redirect || r.Err != nil {
		t.Fatalf("node 2 out of the ISR: err %v, redirect %v to %d; want the leader's records", r.Err, r.Redirect, r.PreferredReadReplica)
	}
	if r, _ := fetch(follower, rack("b"), 0, 0); !errors.Is(r.Err, ErrNotLeader) {
		t.Fatalf("node 2 out of the ISR answered %v, want NOT_LEADER_OR_FOLLOWER", r.Err)
	}
}
