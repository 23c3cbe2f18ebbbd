package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/twmb/franz-go/pkg/kgo"
)

// codec is one compression codec under each client's name for it.
type codec struct {
	name   string // librdkafka's and kcat's name
	id     uint8  // the batch attribute's codec bits
	franz  kgo.CompressionCodec
	sarama sarama.CompressionCodec
}

var codecs = []codec{
	{"gzip", 1, kgo.GzipCompression(), sarama.CompressionGZIP},
	{"snappy", 2, kgo.SnappyCompression(), sarama.CompressionSnappy},
	{"lz4", 3, kgo.Lz4Compression(), sarama.CompressionLZ4},
	{"zstd", 4, kgo.ZstdCompression(), sarama.CompressionZSTD},
}

// Partitions of a codec's topic, one per producing client.
const (
	partFranz int32 = iota
	partSarama
	partLibrdkafka
	partKcat
	compressionPartitions
)

// compressibleValue is a value that compresses well (repeated words; a
// client may send a batch uncompressed when the codec does not shrink it,
// as librdkafka does) but also holds every byte value, so a codec or a
// broker that mangles bytes shows.
func compressibleValue(rng *rand.Rand, client string, i int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %05d ", client, i)
	b.WriteString(strings.Repeat("fjord keeps every byte ", 40+rng.IntN(60)))
	for j := range 256 {
		b.WriteByte(byte(j))
	}
	for range rng.IntN(32) {
		b.WriteByte(byte(rng.Uint32()))
	}
	return b.Bytes()
}

// TestCompression: for each of gzip, snappy, lz4 and zstd, four clients
// (franz-go, Sarama, librdkafka, kcat -z) each produce compressed batches
// to their own partition; franz-go reads every record back byte-identical,
// from batches still carrying the producer's codec (Fjord never
// recompresses, and a client that silently sent uncompressed batches, as
// librdkafka does when Produce v0 is not advertised, would show here).
func TestCompression(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	n := startNode(t)
	adm := newAdmin(t, n)
	records := scale(200, 5000)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			topic := "compressed-" + c.name
			createTopic(ctx, t, adm, topic, compressionPartitions)
			rng := rand.New(rand.NewPCG(uint64(c.id), 7))
			want := make(map[history.TopicPartition][]history.Record)
			add := func(p int32, key, value []byte) {
				tp := history.TopicPartition{Topic: topic, Partition: p}
				want[tp] = append(want[tp], history.Record{Topic: topic, Partition: p, Offset: int64(len(want[tp])), Key: key, Value: value})
			}

			// franz-go.
			var franzRecs []*kgo.Record
			for i := range records {
				key, value := fmt.Appendf(nil, "franz-%d", i%10), compressibleValue(rng, "franz-go", i)
				franzRecs = append(franzRecs, &kgo.Record{Topic: topic, Partition: partFranz, Key: key, Value: value})
				add(partFranz, key, value)
			}
			franz := newClient(t, n, kgo.ProducerBatchCompression(c.franz), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			produceRecordsSync(ctx, t, franz, franzRecs...)

			// Sarama.
			cfg := saramaConfig(sarama.NewConfig().Version)
			cfg.Producer.Compression = c.sarama
			cfg.Producer.Partitioner = sarama.NewManualPartitioner
			var saramaMsgs []*sarama.ProducerMessage
			for i := range records {
				key, value := fmt.Appendf(nil, "sarama-%d", i%10), compressibleValue(rng, "sarama", i)
				saramaMsgs = append(saramaMsgs, &sarama.ProducerMessage{Topic: topic, Partition: partSarama, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)})
				add(partSarama, key, value)
			}
			saramaProduce(t, n, cfg, saramaMsgs)

			// librdkafka.
			var rdkMsgs []rdkRecord
			for i := range records {
				key, value := fmt.Appendf(nil, "librdkafka-%d", i%10), compressibleValue(rng, "librdkafka", i)
				rdkMsgs = append(rdkMsgs, rdkRecord{partition: partLibrdkafka, key: key, value: value})
				add(partLibrdkafka, key, value)
			}
			rdkProduce(ctx, t, n, topic, kafka.ConfigMap{"compression.codec": c.name, "acks": "all", "linger.ms": 20}, rdkMsgs)

			// kcat: lines, so text values without the key delimiter.
			var lines bytes.Buffer
			for i := range records {
				key := fmt.Sprintf("kcat-%d", i%10)
				value := fmt.Sprintf("kcat %05d %s", i, strings.Repeat("fjord keeps every byte ", 40+rng.IntN(60)))
				fmt.Fprintf(&lines, "%s\t%s\n", key, value)
				add(partKcat, []byte(key), []byte(value))
			}
			runKcat(ctx, t, lines.Bytes(), "-b", n.Brokers(), "-X", "broker.address.family=v4",
				"-P", "-t", topic, "-p", fmt.Sprint(partKcat), "-K", "\t", "-z", c.name, "-X", "linger.ms=20")

			got := readAll(ctx, t, n, topic)
			compareLogs(t, want, got)
			for tp, recs := range got {
				for _, r := range recs {
					if r.Compression != c.id {
						hint := ""
						if c.name == "lz4" && (tp.Partition == partLibrdkafka || tp.Partition == partKcat) {
							// rdkafka_feature.c: RD_KAFKA_FEATURE_LZ4 depends on FindCoordinator v0.
							hint = " (librdkafka enables lz4 only when the broker advertises FindCoordinator)"
						}
						t.Fatalf("%s offset %d: read from a batch with codec %d, produced with %s (%d)%s", tp, r.Offset, r.Compression, c.name, c.id, hint)
					}
				}
			}
		})
	}
}
