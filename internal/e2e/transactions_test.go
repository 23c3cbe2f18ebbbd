package e2e

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
)

// The transactional producers of Sarama and librdkafka on the
// Transactions V1 path (DESIGN.md section 23, slice 3), one scenario
// for both, on one node and on three (forEachTarget):
//
//  1. session 1 commits c1, aborts a1 and commits c2, records with
//     keys, over the topic's three partitions;
//  2. session 2 of the same transactional id initialises, which fences
//     session 1 between transactions: session 1's next transaction, z1,
//     must fail with the client's fencing error, and none of its records
//     may be written;
//  3. session 2 opens f1 and writes its records; session 3 initialises
//     with f1 still open, which fences session 2 and makes the
//     coordinator abort f1: session 2's commit must fail with the
//     fencing error; session 3 commits c3;
//  4. a plain "end" record is appended to every partition, and the
//     client's own consumer reads each partition up to it, once
//     read_committed and once read_uncommitted. read_committed must
//     read c1, c2 and c3 once each, at their acknowledged offsets, in
//     per-key send order, and nothing else; read_uncommitted must read
//     a1 and f1 as well, and still not one record of z1.
//
// The end record is what makes a read complete without knowing the
// offsets of markers: for read_committed it is readable only once the
// last stable offset has passed every transaction before it. No group
// offsets are sent in these transactions: the consume-transform-produce
// loops are their own tests.
//
// FJORD_E2E_CLIENT_DEBUG=1 sends Sarama's log and debug log, and
// librdkafka's debug log ("eos,protocol,broker" for the producers), to
// stderr: what each client sent and was answered, to find which request
// a failure came from.

// txnScenarioSizes are the records in each transaction of the scenario.
//
// The fenced session's z1 is one record: Sarama v1.61.1 races on its
// transactionManager.lastError (written by transitionTo under
// statusLock, read by publishTxnPartitions without it) when batches of
// several partitions fail at once in its fatal state and are retried on
// goroutines of their own, which fails this package under -race. One
// record is one batch, retried in turn. Its fencing is no weaker for
// that: the coordinator refuses the session's AddPartitionsToTxn, so
// the client never produces at all.
var txnScenarioSizes = map[string]int{"c1": 60, "a1": 40, "c2": 50, "z1": 1, "f1": 20, "c3": 30}

// txnPartitions is how many partitions the scenario's topic has.
const txnPartitions = 3

// clientDebug reports whether FJORD_E2E_CLIENT_DEBUG=1 asks for the
// clients' protocol logs.
func clientDebug() bool { return os.Getenv("FJORD_E2E_CLIENT_DEBUG") == "1" }

func init() {
	// Sarama's loggers are globals, read by every Sarama client of every
	// parallel test: set once, before any test runs, or not at all.
	if clientDebug() {
		l := log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)
		sarama.Logger, sarama.DebugLogger = l, l
	}
}

// TestTransactionsSarama: Sarama's transactional SyncProducer at
// Sarama's default version (2.8: InitProducerId v4, AddPartitionsToTxn
// and EndTxn v3) and at the newest 3.x version, through the scenario
// above; its PartitionConsumer reads back with
// Consumer.IsolationLevel ReadCommitted and ReadUncommitted.
func TestTransactionsSarama(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, g target) {
		for _, tc := range []struct {
			name    string
			version sarama.KafkaVersion
		}{
			{"default-" + sarama.NewConfig().Version.String(), sarama.NewConfig().Version},
			{"newest-v3-" + saramaNewestV3.String(), saramaNewestV3},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := testContext(t, 2*time.Minute)
				topic := g.topic("txn-sarama-" + tc.version.String())
				testTransactions(ctx, t, g, topic, saramaTxnClient(g, topic, tc.version))
			})
		}
	})
}

// TestTransactionsLibrdkafka: librdkafka's transactional producer
// (transactional.id, InitTransactions, BeginTransaction, Produce,
// CommitTransaction and AbortTransaction) through the scenario above;
// its consumer, assign()ed every partition, reads back with
// isolation.level read_committed and read_uncommitted.
func TestTransactionsLibrdkafka(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, g target) {
		ctx := testContext(t, 2*time.Minute)
		topic := g.topic("txn-librdkafka")
		testTransactions(ctx, t, g, topic, rdkTxnClient(ctx, g, topic))
	})
}

// txnRecord is one record a transaction sends.
type txnRecord struct{ key, value []byte }

// txnRecords are n records of the transaction called prefix: values
// prefix-0000, prefix-0001, ... (unique in the topic, as the Checker
// needs), keys k00 to k12 in turn, so each key has records in every
// transaction and the keys spread over the partitions.
func txnRecords(prefix string, n int) []txnRecord {
	recs := make([]txnRecord, n)
	for i := range recs {
		recs[i] = txnRecord{key: fmt.Appendf(nil, "k%02d", i%13), value: fmt.Appendf(nil, "%s-%04d", prefix, i)}
	}
	return recs
}

// txnPrefix is the transaction a value of txnRecords or an end record
// belongs to: the part before the "-".
func txnPrefix(value []byte) string {
	prefix, _, _ := strings.Cut(string(value), "-")
	return prefix
}

// txnProducer is one session of a transactional producer: a client
// whose construction ran InitProducerId with the transactional id. Its
// methods run on the test's goroutine, one at a time.
type txnProducer interface {
	begin() error
	// send produces recs in the open transaction and waits until each
	// is acknowledged or refused. It returns what each acknowledgement
	// said and, when any record was refused, an error saying why.
	send(recs []txnRecord) ([]history.Record, error)
	commit() error
	abort() error
	// close closes the client; a second call does nothing.
	close()
}

// txnClient is what the scenario needs of a client library.
type txnClient struct {
	// newProducer starts a new session of transactional id id (a new
	// client, initialised), fencing the earlier sessions; it fails the
	// test when the initialisation fails. The test's cleanup closes it.
	newProducer func(t *testing.T, id string) txnProducer
	// read reads every partition of topic from its start, each up to its
	// first end record (excluded), with the client's consumer,
	// read_committed or read_uncommitted; it fails the test when one
	// partition's end record is not read in time.
	read func(ctx context.Context, t *testing.T, topic string, partitions int32, committed bool) map[history.TopicPartition][]history.Record
	// isFenced reports whether err is the client's way of saying that a
	// newer session of its transactional id fenced it.
	isFenced func(err error) bool
}

func testTransactions(ctx context.Context, t *testing.T, g target, topic string, c txnClient) {
	g.createTopic(ctx, t, topic, txnPartitions)
	// The topic's name is unique in its cluster (target.topic), so it
	// names the transactional id too.
	id := topic
	n := func(prefix string) int { return scale(1, 10) * txnScenarioSizes[prefix] }

	// all holds every record sent and acknowledged (what read_uncommitted
	// must read); committed only those of committed transactions (what
	// read_committed must read: every other record is a phantom to it).
	all, committed := history.NewChecker(), history.NewChecker()
	run := func(p txnProducer, prefix string, commit bool) {
		t.Helper()
		recs := txnRecords(prefix, n(prefix))
		for _, r := range recs {
			all.Sent(topic, r.key, r.value)
			if commit {
				committed.Sent(topic, r.key, r.value)
			}
		}
		if err := p.begin(); err != nil {
			t.Fatalf("%s: begin: %v", prefix, err)
		}
		acked, err := p.send(recs)
		if err != nil {
			t.Fatalf("%s: produce: %v", prefix, err)
		}
		for _, r := range acked {
			all.Acked(r)
			if commit {
				committed.Acked(r)
			}
		}
		end, what := p.abort, "abort"
		if commit {
			end, what = p.commit, "commit"
		}
		if err := end(); err != nil {
			t.Fatalf("%s: %s: %v", prefix, what, err)
		}
	}

	first := c.newProducer(t, id)
	run(first, "c1", true)
	run(first, "a1", false)
	run(first, "c2", true)

	// A second session fences the first between transactions.
	second := c.newProducer(t, id)
	zombie := txnRecords("z1", n("z1"))
	for _, r := range zombie {
		all.Sent(topic, r.key, r.value)
	}
	if err := first.begin(); err != nil {
		// Neither client asks the coordinator here; a refusal must still
		// be the fencing.
		if !c.isFenced(err) {
			t.Errorf("z1: the fenced session's begin failed with %v, want the client's fencing error", err)
		}
	} else {
		acked, sendErr := first.send(zombie)
		if len(acked) > 0 {
			t.Errorf("z1: %d records of the fenced session acknowledged, the first %s offset %d", len(acked), acked[0].TopicPartition(), acked[0].Offset)
		}
		err := first.commit()
		switch {
		case err == nil:
			t.Errorf("z1: the fenced session committed (its produce: %v)", sendErr)
		case !c.isFenced(err):
			t.Errorf("z1: the fenced session's commit failed with %v, want the client's fencing error (its produce: %v)", err, sendErr)
		default:
			t.Logf("z1: the fenced session's produce: %v; its commit: %v", sendErr, err)
		}
	}
	first.close()

	// A third session fences the second with f1 open: the coordinator
	// aborts f1 before the third session's InitProducerId succeeds.
	fenced := txnRecords("f1", n("f1"))
	for _, r := range fenced {
		all.Sent(topic, r.key, r.value)
	}
	if err := second.begin(); err != nil {
		t.Fatalf("f1: begin: %v", err)
	}
	acked, err := second.send(fenced)
	if err != nil {
		t.Fatalf("f1: produce: %v", err)
	}
	for _, r := range acked {
		all.Acked(r)
	}
	third := c.newProducer(t, id)
	switch err := second.commit(); {
	case err == nil:
		t.Errorf("f1: the session fenced with f1 open committed it")
	case !c.isFenced(err):
		t.Errorf("f1: the fenced session's commit failed with %v, want the client's fencing error", err)
	default:
		t.Logf("f1: the fenced session's commit: %v", err)
	}
	second.close()
	run(third, "c3", true)
	third.close()

	// An end record in every partition, after every transaction.
	w := newClient(t, g, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	for p := range int32(txnPartitions) {
		produceRecordsSync(ctx, t, w, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "end-%d", p)})
	}

	wantCommitted := n("c1") + n("c2") + n("c3")
	got := c.read(ctx, t, topic, txnPartitions, true)
	t.Logf("read_committed read %s", describeTxnRead(got))
	if sum, err := committed.Verify(got); err != nil {
		t.Errorf("read_committed: %v", err)
	} else if sum.Read != wantCommitted || sum.Acked != wantCommitted {
		t.Errorf("read_committed: %v; want the %d records of c1, c2 and c3 acknowledged and read once each", sum, wantCommitted)
	}

	wantAll := wantCommitted + n("a1") + n("f1")
	got = c.read(ctx, t, topic, txnPartitions, false)
	t.Logf("read_uncommitted read %s", describeTxnRead(got))
	if sum, err := all.Verify(got); err != nil {
		t.Errorf("read_uncommitted: %v", err)
	} else if sum.Read != wantAll || sum.Acked != wantAll || sum.Unacked != 0 {
		// Unacked records here are z1's: written although refused.
		t.Errorf("read_uncommitted: %v; want the %d records of c1, a1, c2, f1 and c3 acknowledged and read once each, none of z1",
			sum, wantAll)
	}
}

// describeTxnRead counts what a read found, by partition and
// transaction: "p0 [a1:13 c1:21 ...] p1 [...]".
func describeTxnRead(got map[history.TopicPartition][]history.Record) string {
	var b strings.Builder
	for _, tp := range slices.SortedFunc(maps.Keys(got), func(a, b history.TopicPartition) int { return int(a.Partition - b.Partition) }) {
		counts := map[string]int{}
		for _, r := range got[tp] {
			counts[txnPrefix(r.Value)]++
		}
		fmt.Fprintf(&b, "p%d [", tp.Partition)
		for i, prefix := range slices.Sorted(maps.Keys(counts)) {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s:%d", prefix, counts[prefix])
		}
		b.WriteString("] ")
	}
	return strings.TrimSpace(b.String())
}

// txnReadTimeout bounds the wait for a read's end records, and for a
// send's acknowledgements: a transaction left open holds read_committed
// readers below it until its timeout (a minute), and a client that
// never reports a record hangs the test; it should say so sooner.
const txnReadTimeout = 30 * time.Second

// Sarama.

func saramaTxnClient(g target, topic string, version sarama.KafkaVersion) txnClient {
	return txnClient{
		newProducer: func(t *testing.T, id string) txnProducer {
			t.Helper()
			cfg := saramaConfig(version)
			cfg.ClientID = "fjord-e2e-" + id
			cfg.Producer.Idempotent = true
			cfg.Producer.Transaction.ID = id
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Net.MaxOpenRequests = 1
			// NewSyncProducer runs InitProducerId before it returns.
			p, err := sarama.NewSyncProducer(seedBrokers(g), cfg)
			if err != nil {
				t.Fatalf("sarama transactional producer %s (%v): %v", id, version, err)
			}
			s := &saramaTxnProducer{p: p, topic: topic}
			t.Cleanup(s.close)
			return s
		},
		read: func(ctx context.Context, t *testing.T, topic string, partitions int32, committed bool) map[history.TopicPartition][]history.Record {
			t.Helper()
			cfg := saramaConfig(version)
			if committed {
				cfg.Consumer.IsolationLevel = sarama.ReadCommitted
			}
			consumer, err := sarama.NewConsumer(seedBrokers(g), cfg)
			if err != nil {
				t.Fatalf("sarama consumer (%v): %v", version, err)
			}
			defer consumer.Close()
			got := make(map[history.TopicPartition][]history.Record)
			for p := range partitions {
				tp := history.TopicPartition{Topic: topic, Partition: p}
				got[tp] = []history.Record{}
				pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					t.Fatalf("sarama ConsumePartition %s: %v", tp, err)
				}
				deadline := time.NewTimer(txnReadTimeout)
			read:
				for {
					select {
					case m := <-pc.Messages():
						if txnPrefix(m.Value) == "end" {
							break read
						}
						got[tp] = append(got[tp], history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value})
					case err := <-pc.Errors():
						t.Fatalf("sarama consumer %s (committed %v): %v", tp, committed, err)
					case <-deadline.C:
						t.Fatalf("sarama consumer %s (committed %v): no end record in %v, %d records read before it (high watermark %d)",
							tp, committed, txnReadTimeout, len(got[tp]), pc.HighWaterMarkOffset())
					case <-ctx.Done():
						t.Fatalf("sarama consumer %s (committed %v): no end record before the test's deadline", tp, committed)
					}
				}
				deadline.Stop()
				if err := pc.Close(); err != nil {
					t.Fatalf("closing sarama partition consumer %s: %v", tp, err)
				}
			}
			return got
		},
		isFenced: func(err error) bool {
			return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
		},
	}
}

type saramaTxnProducer struct {
	p     sarama.SyncProducer
	topic string
	once  sync.Once
}

func (s *saramaTxnProducer) begin() error  { return s.p.BeginTxn() }
func (s *saramaTxnProducer) commit() error { return s.p.CommitTxn() }
func (s *saramaTxnProducer) abort() error  { return s.p.AbortTxn() }
func (s *saramaTxnProducer) close()        { s.once.Do(func() { _ = s.p.Close() }) }

func (s *saramaTxnProducer) send(recs []txnRecord) ([]history.Record, error) {
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = &sarama.ProducerMessage{Topic: s.topic, Key: sarama.ByteEncoder(r.key), Value: sarama.ByteEncoder(r.value)}
	}
	// SendMessages answers nil or ProducerErrors, one per refused record;
	// the others were acknowledged, their offsets set.
	err := s.p.SendMessages(msgs)
	refused := make(map[*sarama.ProducerMessage]bool)
	if err != nil {
		var perrs sarama.ProducerErrors
		if !errors.As(err, &perrs) || len(perrs) == 0 {
			return nil, err
		}
		for _, pe := range perrs {
			refused[pe.Msg] = true
		}
		err = fmt.Errorf("%d of %d records refused, the first with: %w", len(perrs), len(msgs), perrs[0].Err)
	}
	var acked []history.Record
	for i, m := range msgs {
		if !refused[m] {
			acked = append(acked, history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: recs[i].key, Value: recs[i].value})
		}
	}
	return acked, err
}

// librdkafka.

func rdkTxnClient(ctx context.Context, g target, topic string) txnClient {
	return txnClient{
		newProducer: func(t *testing.T, id string) txnProducer {
			t.Helper()
			cfg := kafka.ConfigMap{
				"bootstrap.servers":      g.Brokers(),
				"broker.address.family":  "v4",
				"transactional.id":       id,
				"linger.ms":              5,
				"go.logs.channel.enable": true,
			}
			if clientDebug() {
				cfg["debug"] = "eos,protocol,broker"
			}
			p, err := kafka.NewProducer(&cfg)
			if err != nil {
				t.Fatalf("librdkafka transactional producer %s: %v", id, err)
			}
			r := &rdkTxnProducer{ctx: ctx, topic: topic, p: p}
			t.Cleanup(r.close)
			r.logs = watchRdkLogs(t, "transactional producer "+id, p.Logs())
			// Delivery reports go to each send's own channel; Events has
			// the rest: errors, fatal ones among them, kept for the
			// messages. Ends when Close closes it.
			go func() {
				for ev := range p.Events() {
					if e, ok := ev.(kafka.Error); ok {
						r.events.add(e)
					}
				}
			}()
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatalf("librdkafka InitTransactions %s: %v (client errors: %v)", id, err, r.events.err())
			}
			return r
		},
		read: func(ctx context.Context, t *testing.T, topic string, partitions int32, committed bool) map[history.TopicPartition][]history.Record {
			t.Helper()
			level := "read_uncommitted"
			if committed {
				level = "read_committed"
			}
			cfg := kafka.ConfigMap{
				"bootstrap.servers":     g.Brokers(),
				"broker.address.family": "v4",
				// confluent-kafka-go insists on a group id; with assign()
				// and nothing committed the group is never joined.
				"group.id":                 "fjord-e2e-assign",
				"enable.auto.commit":       false,
				"enable.auto.offset.store": false,
				"isolation.level":          level,
				"go.logs.channel.enable":   true,
			}
			if clientDebug() {
				cfg["debug"] = "protocol,broker,fetch"
			}
			c, err := kafka.NewConsumer(&cfg)
			if err != nil {
				t.Fatalf("librdkafka consumer: %v", err)
			}
			defer c.Close()
			logs := watchRdkLogs(t, level+" consumer", c.Logs())
			var assign []kafka.TopicPartition
			got := make(map[history.TopicPartition][]history.Record)
			for p := range partitions {
				assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning})
				got[history.TopicPartition{Topic: topic, Partition: p}] = []history.Record{}
			}
			if err := c.Assign(assign); err != nil {
				t.Fatalf("librdkafka Assign: %v", err)
			}
			ended := make(map[int32]bool)
			deadline := time.Now().Add(txnReadTimeout)
			for len(ended) < int(partitions) {
				if ctx.Err() != nil || time.Now().After(deadline) {
					t.Fatalf("librdkafka %s consumer: the end records of partitions %v of %d read in %v; read %s",
						level, sortedKeys(ended), partitions, txnReadTimeout, describeTxnRead(got))
				}
				select {
				case line := <-logs.protocolErrors:
					// librdkafka backs off and refetches forever.
					t.Fatalf("librdkafka %s consumer: %s", level, line)
				default:
				}
				switch e := c.Poll(100).(type) {
				case *kafka.Message:
					if e.TopicPartition.Error != nil {
						t.Fatalf("librdkafka %s consumer: %v", level, e.TopicPartition.Error)
					}
					p := e.TopicPartition.Partition
					if txnPrefix(e.Value) == "end" {
						ended[p] = true
						continue
					}
					if ended[p] {
						continue
					}
					tp := history.TopicPartition{Topic: topic, Partition: p}
					got[tp] = append(got[tp], history.Record{
						Topic: topic, Partition: p, Offset: int64(e.TopicPartition.Offset),
						Key: slices.Clone(e.Key), Value: slices.Clone(e.Value),
					})
				case kafka.Error:
					if e.IsFatal() {
						t.Fatalf("librdkafka %s consumer: %v", level, e)
					}
					t.Logf("librdkafka %s consumer (transient): %v", level, e)
				}
			}
			return got
		},
		isFenced: func(err error) bool {
			var ke kafka.Error
			if !errors.As(err, &ke) || !ke.IsFatal() {
				return false
			}
			switch ke.Code() {
			case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch:
				return true
			}
			return false
		},
	}
}

// rdkTxnProducer is a librdkafka transactional producer. Its methods run
// on the test's goroutine; Events is read by a goroutine of its own.
type rdkTxnProducer struct {
	ctx    context.Context
	topic  string
	p      *kafka.Producer
	logs   *rdkLogs
	events errorList // the client's error events
	once   sync.Once
}

func (r *rdkTxnProducer) begin() error  { return r.p.BeginTransaction() }
func (r *rdkTxnProducer) commit() error { return r.p.CommitTransaction(r.ctx) }
func (r *rdkTxnProducer) abort() error  { return r.p.AbortTransaction(r.ctx) }
func (r *rdkTxnProducer) close()        { r.once.Do(r.p.Close) }

func (r *rdkTxnProducer) send(recs []txnRecord) ([]history.Record, error) {
	// Buffered for every report, so none waits for this goroutine.
	reports := make(chan kafka.Event, len(recs))
	var refused errorList
	queued := 0
	for _, rec := range recs {
		msg := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &r.topic, Partition: kafka.PartitionAny},
			Key:            rec.key,
			Value:          rec.value,
		}
		if err := r.p.Produce(msg, reports); err != nil {
			refused.add(fmt.Errorf("Produce %s: %w", rec.value, err))
			continue
		}
		queued++
	}
	var acked []history.Record
	deadline := time.NewTimer(txnReadTimeout)
	defer deadline.Stop()
	for range queued {
		select {
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			if !ok {
				return acked, fmt.Errorf("a delivery report of type %T: %v", ev, ev)
			}
			if m.TopicPartition.Error != nil {
				refused.add(fmt.Errorf("%s: %w", m.Value, m.TopicPartition.Error))
				continue
			}
			acked = append(acked, history.Record{
				Topic: *m.TopicPartition.Topic, Partition: m.TopicPartition.Partition,
				Offset: int64(m.TopicPartition.Offset), Key: m.Key, Value: m.Value,
			})
		case line := <-r.logs.protocolErrors:
			return acked, fmt.Errorf("protocol error: %s", line)
		case <-deadline.C:
			return acked, fmt.Errorf("%d of %d records acknowledged, %d refused, the rest unreported after %v (client errors: %v)",
				len(acked), queued, refused.n, txnReadTimeout, r.events.err())
		case <-r.ctx.Done():
			return acked, fmt.Errorf("%d of %d records acknowledged, %d refused, the rest unreported at the test's deadline (client errors: %v)",
				len(acked), queued, refused.n, r.events.err())
		}
	}
	if err := refused.err(); err != nil {
		return acked, fmt.Errorf("%w (client errors: %v)", err, r.events.err())
	}
	return acked, nil
}
