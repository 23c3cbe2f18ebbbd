package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoIdempotentKeyed: franz-go's idempotent producer with acks=all
// writes 100,000 keyed records over 8 partitions; a direct-partition
// consumer reads them back complete, each key in one partition and in send
// order, nothing twice, each at the offset its acknowledgement named. On
// one node and on three, with three replicas of each partition.
func TestFranzGoIdempotentKeyed(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testFranzGoIdempotentKeyed)
}

func testFranzGoIdempotentKeyed(t *testing.T, g target) {
	ctx := testContext(t, 2*time.Minute)
	const partitions, keys = 8, 1000
	topic := g.topic("franz-keyed")
	records := scale(100_000, 1_000_000)
	g.createTopic(ctx, t, topic, partitions)

	producer := newClient(t, g,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default with acks=all
	)
	checker := history.NewChecker()
	var failures errorList
	begin := time.Now()
	for i := range records {
		key := fmt.Appendf(nil, "key-%04d", i%keys)
		value := fmt.Appendf(nil, "key-%04d/%07d", i%keys, i/keys)
		checker.Sent(topic, key, value)
		producer.Produce(ctx, &kgo.Record{Key: key, Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				failures.add(fmt.Errorf("%s: %w", r.Value, err))
				return
			}
			checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	elapsed := time.Since(begin)
	if err := failures.err(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	t.Logf("produced %d records in %v (%.0f records/s)", records, elapsed, float64(records)/elapsed.Seconds())

	logs := readAll(ctx, t, g, topic)
	if len(logs) != partitions {
		t.Fatalf("read %d partitions, want %d", len(logs), partitions)
	}
	sum, err := checker.Verify(logs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked != records || sum.Read != records {
		t.Fatalf("%v; want all %d acknowledged and read back once", sum, records)
	}

	// Kafka's partitioner puts a key in one partition, and the batches
	// carry the producer id InitProducerId handed out: one id for the
	// producer, whichever nodes lead its partitions.
	keyPartition := make(map[string]int32)
	producerIDs := make(map[int64]bool)
	for tp, recs := range logs {
		if len(recs) == 0 {
			t.Errorf("%s is empty: %d keys should spread over every partition", tp, keys)
		}
		for _, r := range recs {
			if p, ok := keyPartition[string(r.Key)]; ok && p != r.Partition {
				t.Fatalf("key %s in partitions %d and %d", r.Key, p, r.Partition)
			}
			keyPartition[string(r.Key)] = r.Partition
			producerIDs[r.ProducerID] = true
		}
	}
	if len(producerIDs) != 1 || producerIDs[-1] {
		t.Fatalf("producer ids in the batches: %v; want the one id of the idempotent producer", producerIDs)
	}
}

// produceRecordsSync is a small helper for tests that need some records
// in place: it produces them with acks=all and fails the test on error.
func produceRecordsSync(ctx context.Context, t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
