package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/fjordmq/fjord/internal/history"
)

// saramaNewestV3 is the newest Kafka 3.x version Sarama knows: the version
// a Sarama user pinning "3.x" gets, and the highest request versions
// Sarama sends before Kafka 4's.
var saramaNewestV3 = sarama.V3_9_2_0

// TestSarama: Sarama's SyncProducer writes keyed records and its
// PartitionConsumer reads them back identical, at the offsets the
// producer was given, with Sarama's default protocol version and with
// Kafka 3.x versions (which use newer Produce, Fetch and Metadata
// versions). On one node and on three, with three replicas of each
// partition.
func TestSarama(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testSarama)
}

func testSarama(t *testing.T, g target) {
	for _, tc := range []struct {
		name    string
		version sarama.KafkaVersion
	}{
		{"default-" + sarama.NewConfig().Version.String(), sarama.NewConfig().Version},
		{"V3_6_0_0", sarama.V3_6_0_0},
		{"newest-v3-" + saramaNewestV3.String(), saramaNewestV3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			topic := g.topic("sarama-" + tc.version.String())
			const partitions = 3
			g.createTopic(ctx, t, topic, partitions)
			cfg := saramaConfig(tc.version)

			records := scale(3000, 30_000)
			checker := history.NewChecker()
			msgs := make([]*sarama.ProducerMessage, records)
			for i := range msgs {
				key := fmt.Appendf(nil, "k%03d", i%97)
				// Padded so each partition's log passes 64 KiB: the
				// consumer's fetches are answered with sendfile.
				value := fmt.Appendf(nil, "sarama %s record %06d %0100d", tc.version, i, i)
				msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)}
				checker.Sent(topic, key, value)
			}
			sent := saramaProduce(t, g, cfg, msgs)
			for _, recs := range sent {
				for _, r := range recs {
					checker.Acked(r)
				}
			}
			got := saramaConsume(ctx, t, g, cfg, topic, partitions, sent)
			compareLogs(t, sent, got)
			// compareLogs holds the consumer to what the producer was
			// told; the Checker holds both to what was sent: every
			// record acknowledged and read once, each key's records in
			// the order they were sent.
			sum, err := checker.Verify(got)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Acked != records || sum.Read != records {
				t.Fatalf("%v; want all %d acknowledged and read back once", sum, records)
			}
		})
	}
}

func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "fjord-e2e"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Return.Errors = true
	return cfg
}

// saramaProduce sends msgs with a SyncProducer in batches of 100 and
// returns, by partition, what the producer was told it wrote where.
func saramaProduce(t *testing.T, b brokers, cfg *sarama.Config, msgs []*sarama.ProducerMessage) map[history.TopicPartition][]history.Record {
	t.Helper()
	producer, err := sarama.NewSyncProducer(seedBrokers(b), cfg)
	if err != nil {
		t.Fatalf("sarama producer (%v): %v", cfg.Version, err)
	}
	defer producer.Close()
	sent := make(map[history.TopicPartition][]history.Record)
	const batch = 100
	for start := 0; start < len(msgs); start += batch {
		chunk := msgs[start:min(start+batch, len(msgs))]
		if err := producer.SendMessages(chunk); err != nil {
			t.Fatalf("sarama SendMessages (%v): %v", cfg.Version, err)
		}
		for _, m := range chunk {
			k, _ := m.Key.Encode()
			v, _ := m.Value.Encode()
			tp := history.TopicPartition{Topic: m.Topic, Partition: m.Partition}
			sent[tp] = append(sent[tp], history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: k, Value: v})
		}
	}
	return sent
}

// saramaConsume reads each partition with a PartitionConsumer from the
// oldest offset until it has as many records as were sent there, and
// checks the consumer's high watermark says there are no more.
func saramaConsume(ctx context.Context, t *testing.T, b brokers, cfg *sarama.Config, topic string, partitions int32, sent map[history.TopicPartition][]history.Record) map[history.TopicPartition][]history.Record {
	t.Helper()
	consumer, err := sarama.NewConsumer(seedBrokers(b), cfg)
	if err != nil {
		t.Fatalf("sarama consumer (%v): %v", cfg.Version, err)
	}
	defer consumer.Close()
	got := make(map[history.TopicPartition][]history.Record)
	for p := range partitions {
		tp := history.TopicPartition{Topic: topic, Partition: p}
		want := len(sent[tp])
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama ConsumePartition %s (%v): %v", tp, cfg.Version, err)
		}
		for len(got[tp]) < want {
			select {
			case m := <-pc.Messages():
				got[tp] = append(got[tp], history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value})
			case err := <-pc.Errors():
				t.Fatalf("sarama consumer %s (%v): %v", tp, cfg.Version, err)
			case <-ctx.Done():
				t.Fatalf("sarama consumer %s (%v): %d of %d records before the deadline", tp, cfg.Version, len(got[tp]), want)
			}
		}
		if hw := pc.HighWaterMarkOffset(); hw != int64(want) {
			t.Errorf("sarama consumer %s (%v): high watermark %d after reading %d records from offset 0", tp, cfg.Version, hw, want)
		}
		if err := pc.Close(); err != nil {
			t.Fatalf("closing sarama partition consumer %s: %v", tp, err)
		}
	}
	return got
}

// compareLogs checks that what a consumer read is exactly what the
// producer was told it wrote: the same records at the same offsets, per
// partition, starting at offset 0 with no gaps (one producer, no faults).
func compareLogs(t *testing.T, sent, got map[history.TopicPartition][]history.Record) {
	t.Helper()
	for tp, want := range sent {
		have := got[tp]
		if len(have) != len(want) {
			t.Errorf("%s: read %d records, produced %d", tp, len(have), len(want))
			continue
		}
		for i := range want {
			w, h := want[i], have[i]
			if w.Offset != int64(i) {
				t.Errorf("%s: record %d acknowledged at offset %d: offsets from one producer should be 0, 1, 2, ...", tp, i, w.Offset)
				break
			}
			if h.Offset != w.Offset || !bytes.Equal(h.Key, w.Key) || !bytes.Equal(h.Value, w.Value) {
				t.Errorf("%s: produced offset %d key %q value %q, read offset %d key %q value %q", tp, w.Offset, w.Key, w.Value, h.Offset, h.Key, h.Value)
				break
			}
		}
	}
	for tp, have := range got {
		if _, ok := sent[tp]; !ok && len(have) > 0 {
			t.Errorf("%s: read %d records from a partition nothing was produced to", tp, len(have))
		}
	}
}
