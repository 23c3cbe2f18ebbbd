package kafkaserver

// franz-go's client against a Server wired to the in-memory services:
// the shapes a real client expects from ApiVersions (including the
// downgrade from its newer ApiVersions version), Metadata with
// auto-creation, idempotent Produce, and Fetch with sessions.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestKgoProduceConsume(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.numPartitions = 4
	const topic, n = "kgo-roundtrip", 400

	producer, err := kgo.NewClient(
		kgo.SeedBrokers(h.addr),
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// Every record got an offset, and within a partition the offsets
	// follow the produce order (one producer, in-order pipelining).
	last := map[int32]int64{}
	for _, r := range recs {
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
	}
	if len(last) < 2 {
		t.Fatalf("keys spread over %d partitions, want several", len(last))
	}

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(h.addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := make(map[string]*kgo.Record)
	for len(got) < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Value)]; dup {
				t.Fatalf("record %s consumed twice", r.Value)
			}
			got[string(r.Value)] = r
		})
	}
	for _, want := range recs {
		r := got[string(want.Value)]
		if r == nil || r.Partition != want.Partition || r.Offset != want.Offset || string(r.Key) != string(want.Key) {
			t.Fatalf("record %s: consumed %+v, produced at %d/%d", want.Value, r, want.Partition, want.Offset)
		}
	}
	// The consumer used a fetch session.
	if h.srv.sessions.len() == 0 {
		t.Fatal("kgo consumed without a fetch session")
	}
}
