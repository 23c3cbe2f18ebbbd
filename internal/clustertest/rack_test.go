package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 15, acceptance point 7 (KIP-392): three nodes in racks a, b and
// c, each started with --replica-selector rack. A franz-go consumer in
// rack b reads a topic of three replicas led by node 1 (rack a), and its
// bytes are served by node 2, the rack-b replica, as node 2's
// fjord_consumer_fetch_bytes_total says; no node serves it as leader.
// Then node 2 is SIGKILLed: fenced, it leaves the ISR, and the consumer
// reads the records produced since from the leader (node 1's leader
// counter grows), every record once and in order.
//
// franz-go keeps reading from the replica it was sent to until its
// RecheckPreferredReplicaInterval passes (30 minutes by default), even
// while that replica cannot be reached or refuses; only then does it
// ask the leader again, which no longer names node 2. The consumer here
// rechecks every second.
func TestRackAwareFetch(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{
		Nodes:    3,
		Node:     testcluster.Options{Args: []string{"--replica-selector", "rack"}},
		NodeArgs: map[int32][]string{1: {"--rack", "a"}, 2: {"--rack", "b"}, 3: {"--rack", "c"}},
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const topic, leader, rackB = "racks", 1, 2
	e.createTopic(t, ctx, topic, 1, 3, leader, rackB, 3)
	e.fullISRs(t, ctx, topic, 1)
	if got := c.Leader(t, topic, 0); got != leader {
		t.Fatalf("%s-0 is led by node %d, want its first replica, node %d", topic, got, leader)
	}
	before := servedBytes(t, c)

	const first, second = 2000, 2000
	produceNumbered(t, ctx, c, topic, 0, first)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...),
		kgo.Rack("b"), kgo.RecheckPreferredReplicaInterval(time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consumer.Close)
	var got []string
	got = consumeNumbered(t, ctx, consumer, got, first)
	served := servedBytes(t, c)
	for id := int32(1); id <= 3; id++ {
		grew := served[id].sub(before[id])
		switch {
		case id == rackB && (grew.follower <= 0 || grew.leader != 0):
			t.Fatalf("node 2 (rack b) served %+v bytes, want all of them as a follower", grew)
		case id != rackB && (grew.follower != 0 || grew.leader != 0):
			t.Fatalf("node %d served %+v bytes to a consumer in rack b", id, grew)
		}
	}
	t.Logf("node 2 served the rack-b consumer %v bytes as a follower", served[rackB].sub(before[rackB]).follower)

	// Node 2 gone: fenced, out of the ISR; the leader serves.
	c.Kill(rackB)
	produceNumbered(t, ctx, c, topic, first, second)
	got = consumeNumbered(t, ctx, consumer, got, first+second)
	if grew := servedBytes(t, c)[leader].sub(served[leader]); grew.leader <= 0 {
		t.Fatalf("after node 2 left, node 1 served %+v bytes, want some as leader", grew)
	}
	for i, v := range got {
		if want := fmt.Sprintf("rack-%05d", i); v != want {
			t.Fatalf("record %d is %q, want %q (of %d read)", i, v, want, len(got))
		}
	}
	c.Start(rackB)
	e.fullISRs(t, ctx, topic, 1)
}

// produceNumbered writes records "rack-<from>" to "rack-<from+n-1>" to
// partition 0 of topic, acks=all, and fails on any error.
func produceNumbered(t *testing.T, ctx context.Context, c *testcluster.Cluster, topic string, from, n int) {
	t.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "rack-%05d", from+i)}
	}
	if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing records %d to %d: %v", from, from+n-1, err)
	}
}

// consumeNumbered polls until got holds want values, failing on any
// fetch error or when ctx ends first.
func consumeNumbered(t *testing.T, ctx context.Context, cl *kgo.Client, got []string, want int) []string {
	t.Helper()
	for len(got) < want {
		pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		fs := cl.PollFetches(pollCtx)
		expired := pollCtx.Err() != nil
		cancel()
		if expired {
			t.Fatalf("read %d of %d records before the deadline", len(got), want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetching %s-%d after %d records: %v", topic, p, len(got), err)
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != want {
		t.Fatalf("read %d records, want %d: more than were produced", len(got), want)
	}
	return got
}

// bytesServed is one node's fjord_consumer_fetch_bytes_total.
type bytesServed struct{ leader, follower float64 }

func (b bytesServed) sub(o bytesServed) bytesServed {
	return bytesServed{b.leader - o.leader, b.follower - o.follower}
}

// servedBytes scrapes every running node's consumer bytes by role.
func servedBytes(t *testing.T, c *testcluster.Cluster) map[int32]bytesServed {
	t.Helper()
	out := map[int32]bytesServed{}
	for _, n := range c.Nodes() {
		if !n.Running() {
			continue
		}
		m := testutil.Scrape(t, http.DefaultClient, "http://"+n.HTTPAddr()+"/metrics")
		by := m.ByLabel("fjord_consumer_fetch_bytes_total", "served_as")
		_, hasLeader := by["leader"]
		_, hasFollower := by["follower"]
		if len(by) != 2 || !hasLeader || !hasFollower {
			t.Fatalf("node %d: fjord_consumer_fetch_bytes_total %v, want its leader and follower series", n.ID(), by)
		}
		out[n.ID()] = bytesServed{leader: by["leader"], follower: by["follower"]}
	}
	return out
}
