package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/twmb/franz-go/pkg/kerr"
)

// saramaRoll is Sarama: an AsyncProducer made idempotent the way
// Sarama's docs ask (acks=all, one request in flight), with its default
// retries (3, 100 ms apart); a ConsumerGroup with its default
// autocommit (every second) of the messages the handler marks.
type saramaRoll struct{}

func (saramaRoll) name() string { return "sarama" }

func (saramaRoll) produce(t *testing.T, ctx context.Context, l *rollLoad) {
	cfg := sarama.NewConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	pr, err := sarama.NewAsyncProducer(strings.Split(l.brokers, ","), cfg)
	if err != nil {
		t.Error(err)
		return
	}
	var wg sync.WaitGroup
	// Both end when AsyncClose has delivered everything.
	wg.Go(func() {
		for m := range pr.Successes() {
			l.acked(history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
				Key: saramaBytes(m.Key), Value: saramaBytes(m.Value)})
		}
	})
	wg.Go(func() {
		for e := range pr.Errors() {
			l.produceFailed(fmt.Errorf("%s: %w", saramaBytes(e.Msg.Value), e.Err))
		}
	})
	pace := time.NewTicker(rollPace)
	defer pace.Stop()
	for ctx.Err() == nil {
		p, key, value := l.next()
		select {
		case pr.Input() <- &sarama.ProducerMessage{Topic: l.topic, Partition: p, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)}:
		case <-ctx.Done():
			// Sent to the checker but never handed over: it may be
			// missing, as a record never acknowledged may.
		}
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
	}
	pr.AsyncClose()
	wg.Wait()
}

// keepSaramaLog sends Sarama's own log (global: one test at a time) to
// a buffer of its last lines, which a failed test prints: what Sarama
// tried before it gave a record up is the explanation of the failure.
func keepSaramaLog(t *testing.T, lines int) {
	r := &lineRing{max: lines}
	old := sarama.Logger
	sarama.Logger = log.New(r, "", log.Ltime|log.Lmicroseconds)
	t.Cleanup(func() {
		sarama.Logger = old
		if t.Failed() {
			t.Logf("Sarama's last %d log lines:\n%s", lines, r.String())
		}
	})
}

// lineRing is an io.Writer that keeps the last max lines written to it.
type lineRing struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (r *lineRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		r.lines = append(r.lines, line)
	}
	if len(r.lines) > 2*r.max {
		r.lines = append(r.lines[:0], r.lines[len(r.lines)-r.max:]...)
	}
	return len(p), nil
}

func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines[max(0, len(r.lines)-r.max):], "\n")
}

func saramaBytes(e sarama.Encoder) []byte {
	if e == nil {
		return nil
	}
	b, _ := e.Encode() // a ByteEncoder never fails
	return b
}

func (saramaRoll) consume(t *testing.T, ctx context.Context, l *rollLoad) {
	cfg := sarama.NewConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(strings.Split(l.brokers, ","), l.group, cfg)
	if err != nil {
		t.Error(err)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { // ends when Close closes Errors
		for err := range cg.Errors() {
			if saramaTransient(err) {
				l.notice(fmt.Sprintf("sarama consumer (retried): %v", err))
				continue
			}
			l.fetchFailed(err)
		}
	})
	for ctx.Err() == nil {
		// Consume returns at every rebalance and is called again, as
		// Sarama's example does; an error other than saramaTransient's
		// is the application's.
		err := cg.Consume(ctx, []string{l.topic}, saramaRollHandler{l})
		switch {
		case err == nil || ctx.Err() != nil:
		case saramaTransient(err):
			// The coordinator's connection broke or is not up yet:
			// ask again, after a pause an application would take too.
			l.notice(fmt.Sprintf("sarama Consume (retried): %v", err))
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		default:
			l.fetchFailed(fmt.Errorf("Consume: %w", err))
		}
	}
	if err := cg.Close(); err != nil { // commits what was marked
		l.fetchFailed(fmt.Errorf("Close: %w", err))
	}
	wg.Wait()
}

// saramaTransient reports whether err, from a consumer group's Errors
// channel, is one Sarama reports and then recovers from by itself
// (Consumer.Return.Errors is off by default because of them): a
// connection that broke or was not up yet (an offset commit sent to the coordinator that
// has just stopped; it commits again at the next interval) or a Kafka
// error marked retriable (NOT_COORDINATOR to a heartbeat after the
// coordinator moved: Sarama ends the session and joins again). Every
// other error with a Kafka error code is a failure.
func saramaTransient(err error) bool {
	var ke sarama.KError
	if errors.As(err, &ke) {
		return kerr.IsRetriable(kerr.ErrorForCode(int16(ke)))
	}
	var ne net.Error
	return errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.As(err, &ne)
}

type saramaRollHandler struct{ l *rollLoad }

func (saramaRollHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaRollHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaRollHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.l.consume(m.Value)
			s.MarkMessage(m, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

// rdkRoll is librdkafka through confluent-kafka-go: an idempotent
// producer (acks=all follows) with its default retries, and a group
// consumer with its default auto commit (every 5 s, and on close).
//
// librdkafka also raises error events that are not failures: a broker
// connection that closed, all brokers down for a moment. Its docs call
// them informational (the client reconnects by itself), so they are
// logged, not counted; a fatal error event, a failed delivery report, a
// consumer message carrying an error, and a protocol error in its log
// (a malformed answer) are failures.
type rdkRoll struct{}

func (rdkRoll) name() string { return "librdkafka" }

func (rdkRoll) produce(t *testing.T, ctx context.Context, l *rollLoad) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":      l.brokers,
		"broker.address.family":  "v4",
		"enable.idempotence":     true,
		"linger.ms":              5,
		"go.logs.channel.enable": true,
	})
	if err != nil {
		t.Error(err)
		return
	}
	logs := keepRdkLogs(t, "producer", p.Logs(), l.produceFailed)
	var wg sync.WaitGroup
	wg.Go(func() { // ends when Close closes Events
		for ev := range p.Events() {
			switch e := ev.(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					l.produceFailed(fmt.Errorf("%s: %w", e.Value, e.TopicPartition.Error))
					continue
				}
				l.acked(history.Record{Topic: *e.TopicPartition.Topic, Partition: e.TopicPartition.Partition,
					Offset: int64(e.TopicPartition.Offset), Key: e.Key, Value: e.Value})
			case kafka.Error:
				rdkError(logs, l, e, l.produceFailed)
			}
		}
	})
	pace := time.NewTicker(rollPace)
	defer pace.Stop()
	for ctx.Err() == nil {
		part, key, value := l.next()
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &l.topic, Partition: part}, Key: key, Value: value}
		if err := p.Produce(msg, nil); err != nil {
			l.produceFailed(fmt.Errorf("Produce %s: %w", value, err))
		}
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
	}
	for left := p.Flush(30_000); left > 0; left = p.Flush(30_000) {
		if time.Now().After(deadlineOf(t)) {
			l.produceFailed(fmt.Errorf("%d records still undelivered at the test's deadline", left))
			break
		}
	}
	p.Close()
	wg.Wait()
	logs.wait()
}

// deadlineOf is when t must be done: its -timeout's deadline, or a
// minute from now without one.
func deadlineOf(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

func (rdkRoll) consume(t *testing.T, ctx context.Context, l *rollLoad) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":      l.brokers,
		"broker.address.family":  "v4",
		"group.id":               l.group,
		"auto.offset.reset":      "earliest",
		"go.logs.channel.enable": true,
	})
	if err != nil {
		t.Error(err)
		return
	}
	logs := keepRdkLogs(t, "consumer", c.Logs(), l.fetchFailed)
	defer logs.wait()
	if err := c.SubscribeTopics([]string{l.topic}, nil); err != nil {
		l.fetchFailed(fmt.Errorf("SubscribeTopics: %w", err))
		c.Close()
		return
	}
	for ctx.Err() == nil {
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				l.fetchFailed(fmt.Errorf("%v: %w", e.TopicPartition, e.TopicPartition.Error))
				continue
			}
			l.consume(bytes.Clone(e.Value))
		case kafka.Error:
			rdkError(logs, l, e, l.fetchFailed)
		}
	}
	if err := c.Close(); err != nil { // commits what Poll returned
		l.fetchFailed(fmt.Errorf("Close: %w", err))
	}
}

// rdkError sorts a librdkafka error event: fatal ones fail, the
// informational rest are noticed.
func rdkError(logs *rdkLogs, l *rollLoad, e kafka.Error, fail func(error)) {
	if e.IsFatal() {
		fail(fmt.Errorf("fatal librdkafka error: %w", e))
		return
	}
	logs.add(fmt.Sprintf("error event (informational, %v): %v", e.Code(), e))
	l.notice(fmt.Sprintf("librdkafka error event (informational, %v): %v", e.Code(), e))
}

// rdkLogs keeps the last lines of a librdkafka client's log, printed if
// the test fails.
type rdkLogs struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

const rdkLogLines = 200

// keepRdkLogs reads ch until the client's Close closes it; a protocol
// error line (librdkafka could not parse an answer) is a failure.
func keepRdkLogs(t *testing.T, who string, ch chan kafka.LogEvent, fail func(error)) *rdkLogs {
	l := &rdkLogs{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ev := range ch {
			line := fmt.Sprintf("%s %d %s: %s", ev.Timestamp.Format("15:04:05.000"), ev.Level, ev.Tag, ev.Message)
			if ev.Tag == "PROTOERR" {
				fail(errors.New("librdkafka protocol error: " + line))
			}
			l.add(line)
		}
	}()
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if t.Failed() && len(l.lines) > 0 {
			t.Logf("librdkafka %s log, last %d lines:\n%s", who, len(l.lines), strings.Join(l.lines, "\n"))
		}
	})
	return l
}

func (l *rdkLogs) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if len(l.lines) > 2*rdkLogLines {
		l.lines = append(l.lines[:0], l.lines[len(l.lines)-rdkLogLines:]...)
	}
}

// wait waits for the log's reader to end, after the client's Close.
func (l *rdkLogs) wait() { <-l.done }
