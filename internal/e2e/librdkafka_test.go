package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/fjordmq/fjord/internal/history"
)

// TestLibrdkafkaIdempotent: librdkafka (through confluent-kafka-go) with
// enable.idempotence=true and acks=all writes keyed records; its consumer,
// assigned the partitions directly from the beginning (no group), reads
// them all back at their acknowledged offsets, once each, in per-key
// order; franz-go sees the producer id on every batch. On one node and
// on three, with three replicas of each partition.
func TestLibrdkafkaIdempotent(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testLibrdkafkaIdempotent)
}

func testLibrdkafkaIdempotent(t *testing.T, g target) {
	ctx := testContext(t, 2*time.Minute)
	const partitions = 4
	topic := g.topic("librdkafka-idempotent")
	g.createTopic(ctx, t, topic, partitions)
	records := scale(5000, 50_000)

	checker := history.NewChecker()
	msgs := make([]rdkRecord, records)
	for i := range msgs {
		msgs[i] = rdkRecord{
			partition: kafka.PartitionAny,
			key:       fmt.Appendf(nil, "k%02d", i%50),
			// Padded so each partition's log passes 64 KiB: the
			// consumer's fetches are answered with sendfile.
			value: fmt.Appendf(nil, "librdkafka record %06d %0100d", i, i),
		}
		checker.Sent(topic, msgs[i].key, msgs[i].value)
	}
	acked := rdkProduce(ctx, t, g, topic, kafka.ConfigMap{
		"enable.idempotence": true,
		"acks":               "all",
	}, msgs)
	for _, recs := range acked {
		for _, r := range recs {
			checker.Acked(r)
		}
	}

	got := rdkConsumeAssigned(ctx, t, g, topic, partitions)
	sum, err := checker.Verify(got)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked != records || sum.Read != records {
		t.Fatalf("%v; want all %d acknowledged and read back once", sum, records)
	}

	// The same log through franz-go, which also shows the batches' producer
	// ids: librdkafka really was idempotent.
	franz := readAll(ctx, t, g, topic)
	if sum, err := checker.Verify(franz); err != nil || sum.Read != records {
		t.Fatalf("franz-go read of librdkafka's records: %v, %v", sum, err)
	}
	for tp, recs := range franz {
		for _, r := range recs {
			if r.ProducerID < 0 {
				t.Fatalf("%s offset %d: batch without a producer id from an idempotent producer", tp, r.Offset)
			}
		}
	}
}

// rdkRecord is one record for rdkProduce.
type rdkRecord struct {
	partition  int32 // kafka.PartitionAny: librdkafka's partitioner picks
	key, value []byte
}

// rdkProduce produces msgs in order with a librdkafka producer configured
// with config on top of the bootstrap address, waits for every delivery
// report, fails the test on any failed delivery, and returns what each
// report said, by partition.
func rdkProduce(ctx context.Context, t *testing.T, b brokers, topic string, config kafka.ConfigMap, msgs []rdkRecord) map[history.TopicPartition][]history.Record {
	t.Helper()
	cfg := kafka.ConfigMap{
		"bootstrap.servers":      b.Brokers(),
		"broker.address.family":  "v4",
		"linger.ms":              5,
		"go.logs.channel.enable": true,
	}
	maps.Copy(cfg, config)
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		t.Fatalf("librdkafka producer: %v", err)
	}
	defer p.Close()
	logs := watchRdkLogs(t, "producer", p.Logs())

	type report struct {
		rec history.Record
		err error
	}
	reports := make(chan report, 1024)
	stop := make(chan struct{})
	defer close(stop) // before p.Close: the reader must not block on reports
	send := func(r report) {
		select {
		case reports <- r:
		case <-stop:
		}
	}
	go func() {
		// Ends when Close closes Events.
		for ev := range p.Events() {
			switch e := ev.(type) {
			case *kafka.Message:
				send(report{
					rec: history.Record{
						Topic: *e.TopicPartition.Topic, Partition: e.TopicPartition.Partition,
						Offset: int64(e.TopicPartition.Offset), Key: e.Key, Value: e.Value,
					},
					err: e.TopicPartition.Error,
				})
			case kafka.Error:
				if e.IsFatal() {
					send(report{err: fmt.Errorf("fatal librdkafka error: %w", e)})
				}
				// Others are transient (a connection reset, ...):
				// librdkafka retries, and a failed delivery is reported
				// per message.
			}
		}
	}()

	for _, m := range msgs {
		msg := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: m.partition},
			Key:            m.key,
			Value:          m.value,
		}
		if err := p.Produce(msg, nil); err != nil {
			t.Fatalf("librdkafka Produce: %v", err)
		}
	}
	acked := make(map[history.TopicPartition][]history.Record)
	var failures errorList
	for range msgs {
		select {
		case r := <-reports:
			if r.err != nil {
				failures.add(fmt.Errorf("%s: %w", r.rec.Value, r.err))
				continue
			}
			tp := r.rec.TopicPartition()
			acked[tp] = append(acked[tp], r.rec)
		case line := <-logs.protocolErrors:
			t.Fatalf("librdkafka producer: %s", line)
		case <-ctx.Done():
			t.Fatalf("librdkafka: delivery reports missing at the deadline (%d delivered)", len(acked))
		}
	}
	if err := failures.err(); err != nil {
		t.Fatalf("librdkafka deliveries: %v", err)
	}
	return acked
}

// rdkConsumeAssigned reads every partition of topic from the beginning
// with a librdkafka consumer using assign() (no group membership: groups
// come with a later issue) until each partition reports end of partition
// at the offset ListOffsets gives as its high watermark.
func rdkConsumeAssigned(ctx context.Context, t *testing.T, b brokers, topic string, partitions int32) map[history.TopicPartition][]history.Record {
	t.Helper()
	ends := make(map[int32]int64)
	hw, err := newAdmin(t, b).ListEndOffsets(ctx, topic)
	if err == nil {
		err = hw.Error()
	}
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	for p := range partitions {
		o, ok := hw.Lookup(topic, p)
		if !ok {
			t.Fatalf("no end offset for %s-%d", topic, p)
		}
		ends[p] = o.Offset
	}

	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":     b.Brokers(),
		"broker.address.family": "v4",
		// confluent-kafka-go insists on a group id; with assign() and
		// nothing committed the group is never joined.
		"group.id":                 "fjord-e2e-assign",
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		"enable.partition.eof":     true,
		"go.logs.channel.enable":   true,
	})
	if err != nil {
		t.Fatalf("librdkafka consumer: %v", err)
	}
	defer c.Close()
	logs := watchRdkLogs(t, "consumer", c.Logs())
	var assign []kafka.TopicPartition
	for p := range partitions {
		assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(assign); err != nil {
		t.Fatalf("librdkafka Assign: %v", err)
	}

	got := make(map[history.TopicPartition][]history.Record)
	done := make(map[int32]bool)
	for p := range partitions {
		got[history.TopicPartition{Topic: topic, Partition: p}] = []history.Record{}
		if ends[p] == 0 {
			done[p] = true
		}
	}
	for len(done) < int(partitions) {
		if ctx.Err() != nil {
			t.Fatalf("librdkafka consumer: partitions %v of %d done at the deadline (ends %v)", done, partitions, ends)
		}
		select {
		case line := <-logs.protocolErrors:
			// librdkafka backs off and refetches forever; no point waiting.
			t.Fatalf("librdkafka consumer: %s", line)
		default:
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				t.Fatalf("librdkafka consumer: %v", e.TopicPartition.Error)
			}
			tp := history.TopicPartition{Topic: topic, Partition: e.TopicPartition.Partition}
			got[tp] = append(got[tp], history.Record{
				Topic: topic, Partition: tp.Partition, Offset: int64(e.TopicPartition.Offset),
				Key: bytes.Clone(e.Key), Value: bytes.Clone(e.Value),
			})
		case kafka.PartitionEOF:
			if int64(e.Offset) >= ends[e.Partition] {
				done[e.Partition] = true
			}
		case kafka.Error:
			if e.IsFatal() {
				t.Fatalf("librdkafka consumer: %v", e)
			}
			t.Logf("librdkafka consumer (transient): %v", e)
		}
	}
	return got
}

// rdkLogs collects a librdkafka client's log (go.logs.channel.enable), so
// a failed test shows it, and passes on protocol errors (a response
// librdkafka could not parse) at once: librdkafka only logs them and
// retries.
type rdkLogs struct {
	protocolErrors chan string

	mu    sync.Mutex
	lines []string
}

// contains reports whether a kept log line contains s.
func (l *rdkLogs) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// rdkLogLines is how many of the latest log lines a failed test shows.
const rdkLogLines = 40

// watchRdkLogs keeps the client's latest log lines for a failure's
// report and, under FJORD_E2E_CLIENT_DEBUG=1, copies every line to
// stderr as it comes.
func watchRdkLogs(t *testing.T, who string, ch chan kafka.LogEvent) *rdkLogs {
	l := &rdkLogs{protocolErrors: make(chan string, 1)}
	echo := clientDebug()
	go func() {
		// Ends when the client's Close closes the channel.
		for ev := range ch {
			line := fmt.Sprintf("%s %d %s: %s", ev.Timestamp.Format("15:04:05.000"), ev.Level, ev.Tag, ev.Message)
			if ev.Tag == "PROTOERR" {
				select {
				case l.protocolErrors <- line:
				default:
				}
			}
			if echo {
				fmt.Fprintf(os.Stderr, "[librdkafka %s] %s\n", who, line)
			}
			l.mu.Lock()
			l.lines = append(l.lines, line)
			if len(l.lines) > 2*rdkLogLines {
				l.lines = append(l.lines[:0], l.lines[len(l.lines)-rdkLogLines:]...)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !t.Failed() || len(l.lines) == 0 {
			return
		}
		tail := l.lines[max(0, len(l.lines)-rdkLogLines):]
		t.Logf("librdkafka %s log, last %d lines:\n%s", who, len(tail), strings.Join(tail, "\n"))
	})
	return l
}
