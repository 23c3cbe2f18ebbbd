package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// groupRunChecks are the two runs of issue 5's second acceptance test,
// shared by Sarama and librdkafka: a group consumes a topic completely
// and commits; a second run of the same group, after more records were
// produced, gets only the new ones. Both runs start from the earliest
// offset when the group has no commit, so a commit the node lost would
// show as old records read again.
//
// consume runs one session of the client's group consumer until it has
// received want records, commits what it received, closes the consumer
// (which leaves the group) and returns what it received.
type groupConsume func(ctx context.Context, t *testing.T, want int) []history.Record

func groupRunChecks(ctx context.Context, t *testing.T, n *testcluster.Node, adm *kadm.Client, topic, group string, partitions int32, records int, consume groupConsume) {
	t.Helper()
	producer := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(from, to int) map[history.TopicPartition][]history.Record {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%03d", i%101), Value: fmt.Appendf(nil, "%s %06d", group, i)})
		}
		produceRecordsSync(ctx, t, producer, recs...)
		sent := make(map[history.TopicPartition][]history.Record)
		for _, r := range recs {
			tp := history.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			sent[tp] = append(sent[tp], history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		}
		return sent
	}
	checkCommitted := func(run string, want map[int32]int64) {
		t.Helper()
		got, err := committedOffsets(ctx, adm, group)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		for p := range partitions {
			if o, ok := got[history.TopicPartition{Topic: topic, Partition: p}]; !ok || o.At != want[p] {
				t.Errorf("%s: partition %d: committed %s, want offset %d (the log end)", run, p, describeCommit(o, ok), want[p])
			}
		}
	}

	// First run: everything, once each, in order.
	first := produce(0, records)
	got := consume(ctx, t, records)
	compareGroupRun(t, "first run", first, got)
	ends := endOffsets(ctx, t, adm, topic, partitions)
	checkCommitted("first run", ends)
	if d := describeGroup(ctx, t, adm, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("after the first run closed: group state %q with %d members, want Empty with none", d.State, len(d.Members))
	}

	// Second run: only what was produced after the first.
	more := max(records/10, 100)
	second := produce(records, records+more)
	got = consume(ctx, t, more)
	for _, r := range got {
		if r.Offset < ends[r.Partition] {
			t.Fatalf("second run: read %s offset %d (%q), which the first run had committed past (committed %d)",
				r.TopicPartition(), r.Offset, r.Value, ends[r.Partition])
		}
	}
	compareGroupRun(t, "second run", second, got)
	checkCommitted("second run", endOffsets(ctx, t, adm, topic, partitions))
}

// compareGroupRun checks that a group consumer received exactly the
// records sent: each once, per partition in offset order.
func compareGroupRun(t *testing.T, run string, sent map[history.TopicPartition][]history.Record, got []history.Record) {
	t.Helper()
	byPartition := make(map[history.TopicPartition][]history.Record)
	for _, r := range got {
		byPartition[r.TopicPartition()] = append(byPartition[r.TopicPartition()], r)
	}
	for tp, want := range sent {
		have := byPartition[tp]
		if len(have) != len(want) {
			t.Errorf("%s: %s: received %d records, %d were produced", run, tp, len(have), len(want))
			continue
		}
		for i := range want {
			w, h := want[i], have[i]
			if h.Offset != w.Offset || !bytes.Equal(h.Key, w.Key) || !bytes.Equal(h.Value, w.Value) {
				t.Errorf("%s: %s: record %d: produced offset %d %q=%q, received offset %d %q=%q", run, tp, i, w.Offset, w.Key, w.Value, h.Offset, h.Key, h.Value)
				break
			}
		}
	}
	for tp, have := range byPartition {
		if _, ok := sent[tp]; !ok {
			t.Errorf("%s: %s: received %d records from a partition nothing was produced to in this run", run, tp, len(have))
		}
	}
}

// TestGroupSarama: Sarama's consumer group (sarama.NewConsumerGroup, the
// range assignor), with its default protocol version and with the newest
// Kafka 3.x one, consumes a topic completely with a commit; a second
// session of the group reads only what was produced after it.
func TestGroupSarama(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	adm := newAdmin(t, n)
	for _, version := range []sarama.KafkaVersion{sarama.NewConfig().Version, saramaNewestV3} {
		t.Run(version.String(), func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			topic, group := "sarama-group-"+version.String(), "sarama-"+version.String()
			const partitions = 3
			createTopic(ctx, t, adm, topic, partitions)
			cfg := saramaConfig(version)
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			// The test commits once it has everything, and checks that
			// commit alone.
			cfg.Consumer.Offsets.AutoCommit.Enable = false
			groupRunChecks(ctx, t, n, adm, topic, group, partitions, scale(3000, 30_000),
				func(ctx context.Context, t *testing.T, want int) []history.Record {
					return saramaGroupConsume(ctx, t, n, cfg, topic, group, want)
				})
		})
	}
}

// saramaHandler collects what a Sarama group session's claims deliver.
type saramaHandler struct {
	changed chan struct{} // a message arrived or a session began; buffered 1

	mu struct {
		sync.Mutex
		got      []history.Record
		sessions []sarama.ConsumerGroupSession
	}
}

func (h *saramaHandler) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.mu.sessions = append(h.mu.sessions, s)
	h.mu.Unlock()
	h.notify()
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			h.mu.got = append(h.mu.got, history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value})
			h.mu.Unlock()
			s.MarkMessage(m, "")
			h.notify()
		case <-s.Context().Done():
			return nil
		}
	}
}

// saramaGroupConsume joins group with one Sarama member, waits for want
// records, commits the marked offsets, and closes the group consumer.
func saramaGroupConsume(ctx context.Context, t *testing.T, b brokers, cfg *sarama.Config, topic, group string, want int) []history.Record {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(seedBrokers(b), group, cfg)
	if err != nil {
		t.Fatalf("sarama consumer group (%v): %v", cfg.Version, err)
	}
	closed := false
	closeGroup := func() {
		if !closed {
			closed = true
			if err := cg.Close(); err != nil {
				t.Errorf("closing the sarama consumer group: %v", err)
			}
		}
	}
	defer closeGroup()
	h := &saramaHandler{changed: make(chan struct{}, 1)}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumeDone := make(chan error, 1)
	go func() {
		// Consume returns at the end of each session (a rebalance); a
		// member calls it again to rejoin.
		for runCtx.Err() == nil {
			if err := cg.Consume(runCtx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				consumeDone <- err
				return
			}
		}
		consumeDone <- nil
	}()
	for {
		h.mu.Lock()
		have, sessions := len(h.mu.got), len(h.mu.sessions)
		h.mu.Unlock()
		if have >= want {
			if sessions != 1 {
				t.Errorf("sarama member went through %d group sessions, want 1 (a rebalance with one member)", sessions)
			}
			break
		}
		select {
		case <-h.changed:
		case err := <-cg.Errors():
			t.Fatalf("sarama consumer group (%v): %v", cfg.Version, err)
		case err := <-consumeDone:
			t.Fatalf("sarama consumer group (%v): Consume: %v", cfg.Version, err)
		case <-ctx.Done():
			t.Fatalf("sarama consumer group (%v): %d of %d records before the deadline", cfg.Version, have, want)
		}
	}
	h.mu.Lock()
	s := h.mu.sessions[len(h.mu.sessions)-1]
	h.mu.Unlock()
	// Commit is synchronous; a failure goes to Errors, which Close
	// drains and returns. The test then checks the commit through
	// OffsetFetch.
	s.Commit()
	cancel()
	if err := <-consumeDone; err != nil {
		t.Fatalf("sarama consumer group (%v): Consume: %v", cfg.Version, err)
	}
	closeGroup()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.got
}

// TestGroupLibrdkafka: librdkafka's consumer (confluent-kafka-go
// kafka.NewConsumer with group.id), with its default assignors (range,
// roundrobin: eager) and with cooperative-sticky, consumes a topic
// completely and commits; a second run of the group reads only what was
// produced after it.
func TestGroupLibrdkafka(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	adm := newAdmin(t, n)
	for _, strategy := range []string{"", "cooperative-sticky"} {
		name := strategy
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			topic, group := "librdkafka-group-"+name, "librdkafka-"+name
			const partitions = 3
			createTopic(ctx, t, adm, topic, partitions)
			config := kafka.ConfigMap{}
			if strategy != "" {
				config["partition.assignment.strategy"] = strategy
			}
			groupRunChecks(ctx, t, n, adm, topic, group, partitions, scale(3000, 30_000),
				func(ctx context.Context, t *testing.T, want int) []history.Record {
					return rdkGroupConsume(ctx, t, n, topic, group, config, want)
				})
		})
	}
}

// rdkGroupConsume subscribes one librdkafka member of group to topic,
// polls until it has want records, commits synchronously what it
// consumed, and closes the consumer (which leaves the group).
func rdkGroupConsume(ctx context.Context, t *testing.T, b brokers, topic, group string, extra kafka.ConfigMap, want int) []history.Record {
	t.Helper()
	cfg := kafka.ConfigMap{
		"bootstrap.servers":      b.Brokers(),
		"broker.address.family":  "v4",
		"group.id":               group,
		"auto.offset.reset":      "earliest",
		"enable.auto.commit":     false,
		"go.logs.channel.enable": true,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		t.Fatalf("librdkafka consumer: %v", err)
	}
	closed := false
	closeConsumer := func() {
		if !closed {
			closed = true
			if err := c.Close(); err != nil {
				t.Errorf("closing the librdkafka consumer: %v", err)
			}
		}
	}
	defer closeConsumer()
	logs := watchRdkLogs(t, "group consumer", c.Logs())
	if err := c.SubscribeTopics([]string{topic}, nil); err != nil {
		t.Fatalf("librdkafka SubscribeTopics: %v", err)
	}
	var got []history.Record
	for len(got) < want {
		if ctx.Err() != nil {
			t.Fatalf("librdkafka group consumer: %d of %d records at the deadline", len(got), want)
		}
		select {
		case line := <-logs.protocolErrors:
			t.Fatalf("librdkafka group consumer: %s", line)
		default:
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				t.Fatalf("librdkafka group consumer: %v", e.TopicPartition.Error)
			}
			got = append(got, history.Record{
				Topic: topic, Partition: e.TopicPartition.Partition, Offset: int64(e.TopicPartition.Offset),
				Key: bytes.Clone(e.Key), Value: bytes.Clone(e.Value),
			})
		case kafka.Error:
			if e.IsFatal() {
				t.Fatalf("librdkafka group consumer: %v", e)
			}
			t.Logf("librdkafka group consumer (transient): %v", e)
		}
	}
	// Commit commits the offsets stored for what Poll returned
	// (enable.auto.offset.store) and waits for the answer.
	committed, err := c.Commit()
	if err != nil {
		t.Fatalf("librdkafka Commit: %v", err)
	}
	for _, tp := range committed {
		if tp.Error != nil {
			t.Errorf("librdkafka Commit: %s-%d: %v", *tp.Topic, tp.Partition, tp.Error)
		}
	}
	closeConsumer()
	return got
}
