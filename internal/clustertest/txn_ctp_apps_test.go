package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The consume-transform-produce application of issue 17's acceptance
// point 1, once for each client library. The transform is the identity:
// each input record is written to the output topic with the same key and
// value, in a transaction that also commits the group's position past it
// (KIP-447: the consumer's group metadata goes with the offsets, so a
// member fenced by a rebalance cannot commit). The application's whole
// state is the group's committed offsets: after any failure it goes back
// to them, with the failed transaction aborted, which is what makes its
// output exactly once.
//
// An application runs in a process of its own, the test binary started
// again (ctpAppMain, txn_ctp_process_test.go), and reports through
// ctpEvents.

// ctpConfig is what one instance of the application is told.
type ctpConfig struct {
	brokers string
	in, out string
	group   string
	txnID   string
	// sessionTimeout is the group member's session timeout: how long a
	// member that died without leaving holds its partitions.
	sessionTimeout time.Duration
}

// ctpTxnTimeout is every application's transaction timeout: short, so a
// transaction left open by a client that gave up on it (none should) is
// aborted by its coordinator within the test's patience, and long enough
// for a transaction to outlive a coordinator's failover.
const ctpTxnTimeout = 12 * time.Second

// ctpBatchMax is the most input records one transaction takes.
const ctpBatchMax = 200

// ctpEvents is where an application instance reports. Its methods may
// be called from several goroutines at once.
type ctpEvents interface {
	// begun: a transaction is open and its n records are written
	// (acknowledged); its offsets and commit are next.
	begun(n int)
	// committed: the transaction of n records committed.
	committed(n int)
	// restarted: the application went back to the group's committed
	// offsets (a new session, a new producer, or a rewind after an
	// abort) because of why.
	restarted(why string)
	// clientLog is a line of the client library's own log.
	clientLog(line string)
	// stuck: a client call has not returned well past its own timeout
	// (what says which). It does not return: the process ends, to be
	// started again, as a liveness probe would have it.
	stuck(what string)
}

// ctpClient is one client library's application.
type ctpClient interface {
	name() string
	// session runs one session of the application: new clients, their
	// producer id initialised before the group is joined (so a
	// predecessor's open transaction is ended and the offsets fetched
	// after are stable), then transactions until ctx ends (nil) or the
	// session cannot go on (its error).
	session(ctx context.Context, cfg ctpConfig, ev ctpEvents) error
}

// ctpClients are the libraries the tests run the application with.
var ctpClients = []ctpClient{franzCTP{}, saramaCTP{}, rdkCTP{}}

// ctpHoldOpen is how long the application keeps each transaction open
// after its records are written, as the work of a real transform would.
// Without it the commit follows within milliseconds, and a fault the
// test aims inside a transaction (ctpRun.underFault) lands after it.
const ctpHoldOpen = 300 * time.Millisecond

// ctpHolding is the application's ctpEvents: its begun holds the
// transaction open for ctpHoldOpen after reporting it.
type ctpHolding struct{ ctpEvents }

func (h ctpHolding) begun(n int) {
	h.ctpEvents.begun(n)
	time.Sleep(ctpHoldOpen)
}

// runCTPApp runs client's application until ctx ends, starting a new
// session whenever one fails.
func runCTPApp(ctx context.Context, client ctpClient, cfg ctpConfig, ev ctpEvents) {
	ev = ctpHolding{ev}
	for ctx.Err() == nil {
		err := client.session(ctx, cfg, ev)
		if err == nil || ctx.Err() != nil {
			continue
		}
		ev.restarted(fmt.Sprintf("new session after: %v", err))
		select { // not a busy loop while the cluster is down
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// franzCTP is franz-go's GroupTransactSession, which aborts and rewinds
// by itself when a rebalance revokes partitions mid-transaction.
type franzCTP struct{}

func (franzCTP) name() string { return "franz-go" }

func (franzCTP) session(ctx context.Context, cfg ctpConfig, ev ctpEvents) error {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(cfg.brokers, ",")...),
		kgo.TransactionalID(cfg.txnID), kgo.TransactionTimeout(ctpTxnTimeout),
		kgo.ConsumerGroup(cfg.group), kgo.ConsumeTopics(cfg.in), kgo.SessionTimeout(cfg.sessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(cfg.out), kgo.RetryTimeout(30*time.Second),
	)
	if err != nil {
		return err
	}
	defer s.Close()
	// kgo initialises its producer id at the first produce, but the
	// group's offsets are fetched (require_stable) as soon as it joins:
	// after a predecessor's SIGKILL the fetch would wait for its open
	// transaction's timeout. This is Java's initTransactions().
	if _, _, err := s.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("init producer id: %w", err)
	}
	for {
		fs := s.PollRecords(ctx, ctpBatchMax)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var outs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { outs = append(outs, &kgo.Record{Key: r.Key, Value: r.Value}) })
		var produceErr error
		if len(outs) > 0 {
			produceErr = s.ProduceSync(ctx, outs...).FirstErr()
			ev.begun(len(outs))
		}
		committed, err := s.End(ctx, kgo.TransactionEndTry(produceErr == nil))
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		switch {
		case committed && len(outs) > 0:
			ev.committed(len(outs))
		case !committed && len(outs) > 0:
			// End aborted (the produce failed, or a rebalance revoked
			// partitions) and reset the session to the committed
			// offsets itself.
			ev.restarted(fmt.Sprintf("aborted a transaction of %d records (produce: %v)", len(outs), produceErr))
		}
	}
}

// saramaCTP is Sarama: a transactional SyncProducer and a ConsumerGroup
// with autocommit off, read_committed. Sarama calls ConsumeClaim once per
// partition, each on a goroutine of its own, and one producer has one
// transaction at a time: the claims take turns, a transaction per claim
// batch. Sarama cannot move a claim back to an earlier offset
// (ResetOffset only changes what would be committed, so the aborted
// records would be skipped), so after an abort the handler returns,
// which ends the group session, and the next session's claims start at
// the group's committed offsets.
type saramaCTP struct{}

func (saramaCTP) name() string { return "sarama" }

// saramaCTPVersion is the protocol version Sarama speaks: 2.5 or later
// sends TxnOffsetCommit v3 with the member's generation (KIP-447) and
// OffsetFetch with require_stable.
var saramaCTPVersion = sarama.V2_8_0_0

func newSaramaTxnProducer(cfg ctpConfig) (sarama.SyncProducer, error) {
	c := sarama.NewConfig()
	c.Version = saramaCTPVersion
	c.ClientID = cfg.txnID
	c.Producer.Idempotent = true
	c.Producer.Transaction.ID = cfg.txnID
	c.Producer.Transaction.Timeout = ctpTxnTimeout
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Net.MaxOpenRequests = 1
	// NewSyncProducer runs InitProducerId, which fences and ends the
	// transaction of any earlier session of cfg.txnID.
	return sarama.NewSyncProducer(strings.Split(cfg.brokers, ","), c)
}

func (saramaCTP) session(ctx context.Context, cfg ctpConfig, ev ctpEvents) error {
	p, err := newSaramaTxnProducer(cfg)
	if err != nil {
		return fmt.Errorf("transactional producer: %w", err)
	}
	h := &saramaCTPHandler{cfg: cfg, ev: ev}
	h.mu.p = p
	defer func() { _ = h.mu.p.Close() }()

	c := sarama.NewConfig()
	c.Version = saramaCTPVersion
	c.ClientID = cfg.txnID
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Group.Session.Timeout = cfg.sessionTimeout
	c.Consumer.Group.Heartbeat.Interval = cfg.sessionTimeout / 3
	group, err := sarama.NewConsumerGroup(strings.Split(cfg.brokers, ","), cfg.group, c)
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	defer group.Close()
	for ctx.Err() == nil {
		// Consume returns at the end of every group session: a
		// rebalance, or a claim's handler returning after an abort.
		err := group.Consume(ctx, []string{cfg.in}, h)
		if err := h.failure(); err != nil {
			return err
		}
		if err != nil && ctx.Err() == nil {
			ev.restarted(fmt.Sprintf("group session: %v", err))
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	return nil
}

type saramaCTPHandler struct {
	cfg ctpConfig
	ev  ctpEvents
	mu  struct {
		sync.Mutex // held for a whole transaction: the claims take turns
		p          sarama.SyncProducer
		// fatal is set when no new producer could be made: the
		// application session ends.
		fatal error
	}
}

func (h *saramaCTPHandler) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.fatal
}

func (*saramaCTPHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaCTPHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaCTPHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		batch := saramaBatch(s, claim)
		if batch == nil {
			return nil // the session is ending
		}
		if err := h.transact(s, batch); err != nil {
			// Sarama ends the whole session when a handler returns.
			return err
		}
	}
}

// saramaBatch waits for claim's next record and takes those already
// buffered after it, up to ctpBatchMax; nil when the session ends.
func saramaBatch(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) []*sarama.ConsumerMessage {
	var batch []*sarama.ConsumerMessage
	select {
	case m, ok := <-claim.Messages():
		if !ok {
			return nil
		}
		batch = append(batch, m)
	case <-s.Context().Done():
		return nil
	}
	for len(batch) < ctpBatchMax {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		default:
			return batch
		}
	}
	return batch
}

// transact writes batch and commits the claim's offset past it in one
// transaction. An error means the transaction did not commit, and is
// ended, and the session must end so every claim goes back to the
// group's committed offsets.
func (h *saramaCTPHandler) transact(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.fatal != nil {
		return h.mu.fatal
	}
	// The session ended while this claim waited its turn: the next one
	// reads these records again from the committed offsets.
	if s.Context().Err() != nil {
		return nil
	}
	p := h.mu.p
	if err := p.BeginTxn(); err != nil {
		return h.recoverLocked(fmt.Errorf("begin: %w", err))
	}
	msgs := make([]*sarama.ProducerMessage, len(batch))
	for i, m := range batch {
		msgs[i] = &sarama.ProducerMessage{Topic: h.cfg.out, Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)}
	}
	if err := p.SendMessages(msgs); err != nil {
		return h.recoverLocked(fmt.Errorf("produce: %w", err))
	}
	h.ev.begun(len(batch))
	last := batch[len(batch)-1]
	offsets := map[string][]*sarama.PartitionOffsetMetadata{last.Topic: {{Partition: last.Partition, Offset: last.Offset + 1}}}
	if err := p.AddOffsetsToTxnWithGroupMetadata(offsets, sarama.NewConsumerGroupMetadataFromSession(s, h.cfg.group, nil)); err != nil {
		return h.recoverLocked(fmt.Errorf("add offsets: %w", err))
	}
	if err := p.CommitTxn(); err != nil {
		return h.recoverLocked(fmt.Errorf("commit: %w", err))
	}
	h.ev.committed(len(batch))
	return nil
}

// recoverLocked ends the failed transaction: AbortTxn when Sarama allows
// it, else (a fatal error, or the abort failed) a new producer, whose
// InitProducerId ends it at the coordinator, by abort or by completing a
// commit already decided. Either way the records are read again from
// the committed offsets, which then say which it was.
// REQUIRES: h.mu held.
func (h *saramaCTPHandler) recoverLocked(cause error) error {
	if h.mu.p.TxnStatus()&sarama.ProducerTxnFlagFatalError == 0 {
		if err := h.mu.p.AbortTxn(); err == nil {
			h.ev.restarted(fmt.Sprintf("aborted, new group session: %v", cause))
			return cause
		}
	}
	_ = h.mu.p.Close()
	p, err := newSaramaTxnProducer(h.cfg)
	if err != nil {
		h.mu.fatal = fmt.Errorf("a new producer after %v: %w", cause, err)
		return h.mu.fatal
	}
	h.mu.p = p
	h.ev.restarted(fmt.Sprintf("new producer, new group session: %v", cause))
	return cause
}

// rdkCTP is librdkafka through confluent-kafka-go, the way confluent's
// transactions example does it: one goroutine polls, and between polls
// runs the batch's transaction (BeginTransaction, Produce,
// SendOffsetsToTransaction with the consumer's group metadata,
// CommitTransaction). On an abortable error it aborts and rewinds the
// consumer to the committed offsets; on a fatal one (fenced) it makes a
// new producer. Rebalances run inside Poll, so never during a
// transaction; a revocation while a batch is being gathered drops the
// batch (its partitions may be someone else's now, and the assignment
// that follows starts at the committed offsets).
type rdkCTP struct{}

func (rdkCTP) name() string { return "librdkafka" }

type rdkCTPApp struct {
	cfg ctpConfig
	ev  ctpEvents
	c   *kafka.Consumer
	p   *kafka.Producer
	// revoked is set by the rebalance callback, which runs inside Poll
	// on the session's goroutine; poll clears it.
	revoked bool
}

// rdkTxnTimeout bounds each blocking transactional call; a call that
// times out may be made again (librdkafka's docs).
//
// librdkafka does not always keep to it: SendOffsetsToTransaction waits
// for ever when the group coordinator it cached leaves the cluster's
// Metadata (a SIGKILLed node, once fenced: Kafka lists live brokers
// only) and librdkafka decommissions it (librdkafka issues 5456 and
// 5511, open for 2.11, the version confluent-kafka-go v2.11.1 bundles),
// its decommissioned broker thread spinning meanwhile. So every call has
// a watchdog: rdkStuckAfter past the timeout the application reports
// itself stuck and its process ends, to be started again; the new
// process's InitTransactions fences the old producer.
const (
	rdkTxnTimeout = 5 * time.Second
	rdkStuckAfter = 3 * time.Second
)

func (rdkCTP) session(ctx context.Context, cfg ctpConfig, ev ctpEvents) error {
	a := &rdkCTPApp{cfg: cfg, ev: ev}
	if err := a.newProducer(ctx); err != nil {
		return err
	}
	defer func() { a.p.Close() }()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":      cfg.brokers,
		"broker.address.family":  "v4",
		"client.id":              cfg.txnID,
		"group.id":               cfg.group,
		"isolation.level":        "read_committed",
		"enable.auto.commit":     false,
		"auto.offset.reset":      "earliest",
		"session.timeout.ms":     int(cfg.sessionTimeout / time.Millisecond),
		"go.logs.channel.enable": true,
	})
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	go rdkForwardLogs(ev, "consumer", c.Logs())
	defer c.Close()
	a.c = c
	if err := c.Subscribe(cfg.in, a.rebalance); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	for ctx.Err() == nil {
		batch, err := a.poll()
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			if err := a.transact(ctx, batch); err != nil {
				return err
			}
		}
	}
	return nil
}

// newProducer makes the session's transactional producer;
// InitTransactions fences and ends any earlier session's transaction.
func (a *rdkCTPApp) newProducer(ctx context.Context) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":      a.cfg.brokers,
		"broker.address.family":  "v4",
		"client.id":              a.cfg.txnID,
		"transactional.id":       a.cfg.txnID,
		"transaction.timeout.ms": int(ctpTxnTimeout / time.Millisecond),
		"linger.ms":              5,
		"go.delivery.reports":    false, // CommitTransaction reports a failed delivery
		"go.logs.channel.enable": true,
	})
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	go rdkForwardLogs(a.ev, "producer", p.Logs())
	go func() { // ends when Close closes Events
		for e := range p.Events() {
			if err, ok := e.(kafka.Error); ok {
				a.ev.clientLog(fmt.Sprintf("producer error event (fatal %v): %v", err.IsFatal(), err))
			}
		}
	}()
	if err := a.call(ctx, "InitTransactions", p.InitTransactions); err != nil {
		p.Close()
		return fmt.Errorf("InitTransactions: %w", err)
	}
	a.p = p
	return nil
}

func rdkForwardLogs(ev ctpEvents, who string, ch chan kafka.LogEvent) {
	for l := range ch {
		ev.clientLog(fmt.Sprintf("%s %s %d %s: %s", l.Timestamp.Format("15:04:05.000"), who, l.Level, l.Tag, l.Message))
	}
}

func (a *rdkCTPApp) rebalance(c *kafka.Consumer, e kafka.Event) error {
	switch e := e.(type) {
	case kafka.AssignedPartitions:
		return c.Assign(e.Partitions)
	case kafka.RevokedPartitions:
		a.revoked = true
		return c.Unassign()
	}
	return nil
}

// poll gathers a batch: records until ctpBatchMax or a poll that finds
// none.
func (a *rdkCTPApp) poll() ([]*kafka.Message, error) {
	var batch []*kafka.Message
	for len(batch) < ctpBatchMax {
		e := a.c.Poll(100)
		if a.revoked {
			// The records gathered before this Poll were of the revoked
			// assignment: they may be another member's now. Those of a
			// new assignment start at its committed offsets.
			batch, a.revoked = nil, false
		}
		switch e := e.(type) {
		case nil:
			return batch, nil
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return nil, fmt.Errorf("consume %v: %w", e.TopicPartition, e.TopicPartition.Error)
			}
			batch = append(batch, e)
		case kafka.Error:
			if e.IsFatal() {
				return nil, fmt.Errorf("consumer: %w", e)
			}
			a.ev.clientLog(fmt.Sprintf("consumer error event: %v", e))
		}
	}
	return batch, nil
}

// transact runs batch's transaction; an error is one the session cannot
// recover from.
func (a *rdkCTPApp) transact(ctx context.Context, batch []*kafka.Message) error {
	if err := a.p.BeginTransaction(); err != nil {
		return a.recover(ctx, fmt.Errorf("begin: %w", err))
	}
	// The offset to commit per partition: past the batch's last record
	// there, which is the consumer's position on it.
	next := map[int32]kafka.Offset{}
	for _, m := range batch {
		out := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &a.cfg.out, Partition: kafka.PartitionAny}, Key: m.Key, Value: m.Value}
		if err := a.p.Produce(out, nil); err != nil {
			return a.recover(ctx, fmt.Errorf("produce: %w", err))
		}
		next[m.TopicPartition.Partition] = m.TopicPartition.Offset + 1
	}
	// Produce only queues: begun means the records are written, as it
	// does for the other clients. A failed delivery fails the commit.
	a.p.Flush(int(rdkTxnTimeout / time.Millisecond))
	a.ev.begun(len(batch))
	var offsets []kafka.TopicPartition
	for p, o := range next {
		offsets = append(offsets, kafka.TopicPartition{Topic: &a.cfg.in, Partition: p, Offset: o})
	}
	md, err := a.c.GetConsumerGroupMetadata()
	if err != nil {
		return a.recover(ctx, fmt.Errorf("group metadata: %w", err))
	}
	sendOffsets := func(ctx context.Context) error { return a.p.SendOffsetsToTransaction(ctx, offsets, md) }
	if err := a.call(ctx, "SendOffsetsToTransaction", sendOffsets); err != nil {
		return a.recover(ctx, fmt.Errorf("send offsets: %w", err))
	}
	if err := a.call(ctx, "CommitTransaction", a.p.CommitTransaction); err != nil {
		return a.recover(ctx, fmt.Errorf("commit: %w", err))
	}
	a.ev.committed(len(batch))
	return nil
}

// call calls the transactional call f (what names it), with a timeout
// of rdkTxnTimeout and its watchdog, again while it fails with an error
// librdkafka marks retriable (a timeout), until ctx ends.
func (a *rdkCTPApp) call(ctx context.Context, what string, f func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, rdkTxnTimeout)
		watchdog := time.AfterFunc(rdkTxnTimeout+rdkStuckAfter, func() {
			a.ev.stuck(fmt.Sprintf("librdkafka's %s has not returned %v past its %v timeout", what, rdkStuckAfter, rdkTxnTimeout))
		})
		err := f(cctx)
		watchdog.Stop()
		cancel()
		var ke kafka.Error
		if err == nil || !errors.As(err, &ke) || !ke.IsRetriable() || ctx.Err() != nil {
			return err
		}
	}
}

// recover ends the failed transaction, by AbortTransaction or, when the
// error is fatal or the abort fails, by a new producer (InitTransactions
// ends it at the coordinator); then it rewinds the consumer to the
// committed offsets, which say what the ended transaction did. It
// returns an error only when it could do neither.
func (a *rdkCTPApp) recover(ctx context.Context, cause error) error {
	what := "aborted"
	var ke kafka.Error
	fatal := errors.As(cause, &ke) && ke.IsFatal()
	if fatal || a.call(ctx, "AbortTransaction", a.p.AbortTransaction) != nil {
		a.p.Close()
		if err := a.newProducer(ctx); err != nil {
			return fmt.Errorf("a new producer after %v: %w", cause, err)
		}
		what = "new producer"
	}
	assigned, err := a.c.Assignment()
	if err != nil {
		return fmt.Errorf("assignment after %v: %w", cause, err)
	}
	committed, err := a.c.Committed(assigned, int(rdkTxnTimeout/time.Millisecond))
	if err != nil {
		return fmt.Errorf("committed offsets after %v: %w", cause, err)
	}
	for _, tp := range committed {
		if tp.Offset < 0 {
			tp.Offset, tp.LeaderEpoch = kafka.OffsetBeginning, nil
		}
		if err := a.c.Seek(tp, 0); err != nil {
			return fmt.Errorf("rewind %v after %v: %w", tp, cause, err)
		}
	}
	a.ev.restarted(fmt.Sprintf("%s, rewound to the committed offsets: %v", what, cause))
	return nil
}
