package kafkaserver

// Sarama against a Server wired to the in-memory services, with its
// default protocol version and a 3.x one: Sarama picks its request
// versions from Config.Version (non-flexible ones by default), so this
// checks the older shapes the franz-go test does not use.

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func TestSaramaProduceConsume(t *testing.T) {
	for _, version := range []sarama.KafkaVersion{sarama.DefaultVersion, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			h := newWireHarness(t)
			topic := "sarama-" + version.String()
			cfg := sarama.NewConfig()
			cfg.Version = version
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Compression = sarama.CompressionSnappy
			cfg.Metadata.Retry.Backoff = 10 * time.Millisecond

			producer, err := sarama.NewSyncProducer([]string{h.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			const n = 50
			for i := range n {
				p, off, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i))})
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if p != 0 || off != int64(i) {
					t.Fatalf("send %d: partition %d offset %d", i, p, off)
				}
			}
			producer.Close()

			consumer, err := sarama.NewConsumer([]string{h.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			timeout := time.After(20 * time.Second)
			for i := range n {
				select {
				case m := <-pc.Messages():
					if m.Offset != int64(i) || string(m.Value) != fmt.Sprint(i) {
						t.Fatalf("message %d: offset %d value %q", i, m.Offset, m.Value)
					}
				case err := <-pc.Errors():
					t.Fatalf("consume: %v", err)
				case <-timeout:
					t.Fatalf("consumed %d of %d", i, n)
				}
			}
		})
	}
}
