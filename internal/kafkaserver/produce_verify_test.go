package kafkaserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/txn"
)

// scriptedVerifier answers each partition from answers by topic (nil:
// in the transaction) and records what it was asked; an add (V2) of a
// topic in busy is answered CONCURRENT_TRANSACTIONS busy[topic] times
// first.
type scriptedVerifier struct {
	mu      sync.Mutex
	asked   []txn.TopicPartition
	added   []txn.TopicPartition
	answers map[string]error
	busy    map[string]int
}

func (v *scriptedVerifier) AddPartitionsToTxn(_ context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition) []error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.added = append(v.added, tps...)
	errs := make([]error, len(tps))
	for i, tp := range tps {
		if v.busy[tp.Topic] > 0 {
			v.busy[tp.Topic]--
			errs[i] = txn.ErrConcurrentTransactions
			continue
		}
		errs[i] = v.answers[tp.Topic]
	}
	return errs
}

func (v *scriptedVerifier) VerifyPartitionsInTxn(_ context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition) []error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, tps...)
	errs := make([]error, len(tps))
	for i, tp := range tps {
		errs[i] = v.answers[tp.Topic]
	}
	return errs
}

// txnBatch is one batch of a transactional Produce: one record to
// topic's partition 0, from producer pid at epoch, its sequence seq.
type txnBatch struct {
	topic string
	pid   int64
	epoch int16
	seq   int32
}

// txnProduceRequest is a Produce of version from the transactional id
// "app" (acks=all), one topic per batch in batches' order. A request may
// carry batches of different producers, which the server refuses.
func txnProduceRequest(t *testing.T, version int16, batches ...txnBatch) *kmsg.ProduceRequest {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	id := "app"
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	for _, tb := range batches {
		opts := record.DefaultBatchOptions()
		opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, tb.pid, tb.epoch, tb.seq
		b := record.NewBuilder(opts)
		b.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = tb.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// The produce path's verification (produce_verify.go) over the real
// replica manager: each partition where the batch would open the
// producer's transaction is asked about once, and the coordinator's
// answers come back as Kafka's produce answers them, per version;
// refused partitions write nothing; a partition whose transaction is
// open is not asked again; batches of two producers in one request are
// INVALID_PRODUCER_ID_MAPPING.
func TestProduceVerifiesTransactions(t *testing.T) {
	v := &scriptedVerifier{answers: map[string]error{
		"notadded": txn.ErrTransactionAbortable,
		"fenced":   txn.ErrProducerFenced,
		"busy":     txn.ErrConcurrentTransactions,
		"down":     errors.New("connection refused"),
		"unknown":  txn.ErrInvalidProducerIDMapping,
	}}
	h := newRealReplicasHarness(t, withTransactions(&scriptedTxns{}), withConfig(func(c *Config) { c.TxnVerifier = v }))
	for _, topic := range []string{"added", "notadded", "fenced", "busy", "down", "unknown"} {
		h.ctrl.addTopic(topic, 1)
	}
	c := h.dial()
	seq := map[string]int32{}
	produce := func(version int16, pid int64, topics ...string) []int16 {
		t.Helper()
		var batches []txnBatch
		for _, topic := range topics {
			batches = append(batches, txnBatch{topic: topic, pid: pid, seq: seq[topic]})
		}
		resp := c.roundTrip(txnProduceRequest(t, version, batches...)).(*kmsg.ProduceResponse)
		var codes []int16
		for i, rt := range resp.Topics {
			code := rt.Partitions[0].ErrorCode
			if code == 0 {
				seq[topics[i]]++
			}
			codes = append(codes, code)
		}
		return codes
	}
	code := func(e *kerr.Error) int16 { return e.Code }
	for _, tc := range []struct {
		name    string
		version int16
		topics  []string
		want    []int16
	}{
		{"v10", 10, []string{"added", "notadded"}, []int16{0, code(kerr.InvalidTxnState)}},
		{"v11", 11, []string{"notadded", "fenced", "unknown"}, []int16{code(kerr.TransactionAbortable), code(kerr.InvalidProducerEpoch), code(kerr.InvalidProducerIDMapping)}},
		{"retriable", 11, []string{"busy", "down"}, []int16{code(kerr.NotEnoughReplicas), code(kerr.NotEnoughReplicas)}},
	} {
		if got := produce(tc.version, 7, tc.topics...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: codes %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, topic := range []string{"notadded", "fenced", "busy", "down", "unknown"} {
		if _, end, err := h.manager.LogEnd(topic, 0); err != nil || end != 0 {
			t.Errorf("%s-0: log end %d (%v): a refused batch was written", topic, end, err)
		}
	}
	// "added" has producer 7's transaction open now: not asked again.
	v.mu.Lock()
	v.asked = nil
	v.mu.Unlock()
	if got := produce(11, 7, "added"); !slices.Equal(got, []int16{0}) {
		t.Fatalf("second batch to added: %v", got)
	}
	if len(v.asked) != 0 {
		t.Fatalf("asked %v for a partition whose transaction is open", v.asked)
	}
	// Two producers' batches in one request.
	req := txnProduceRequest(t, 11, txnBatch{topic: "added", pid: 7, seq: 1}, txnBatch{topic: "busy", pid: 8})
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	if got := resp.Topics[1].Partitions[0].ErrorCode; got != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("a second producer's batch: code %d, want INVALID_PRODUCER_ID_MAPPING", got)
	}
}

// AddPartitionsToTxn v4, the leaders' batched form: a verify-only
// transaction answers per partition and adds nothing; an add in v4 adds
// as v3 does; each transaction is answered under its id.
func TestAddPartitionsToTxnV4(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	h.ctrl.addTopic("added", 1)
	h.ctrl.addTopic("other", 2)
	c := h.dial()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(4)
	verify := kmsg.NewAddPartitionsToTxnRequestTransaction()
	verify.TransactionalID, verify.ProducerID, verify.ProducerEpoch, verify.VerifyOnly = "a", 7, 0, true
	verify.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{
		{Topic: "added", Partitions: []int32{0}},
		{Topic: "other", Partitions: []int32{1, 5}},
	}
	add := kmsg.NewAddPartitionsToTxnRequestTransaction()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "b", 8, 0
	add.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "other", Partitions: []int32{0}}}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{verify, add}
	resp := c.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 || len(resp.Transactions) != 2 {
		t.Fatalf("answer %+v", resp)
	}
	got := map[string][]int16{}
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				got[rt.TransactionalID] = append(got[rt.TransactionalID], p.ErrorCode)
			}
		}
	}
	want := map[string][]int16{
		"a": {0, kerr.TransactionAbortable.Code, kerr.UnknownTopicOrPartition.Code},
		"b": {0},
	}
	for id, codes := range want {
		if !slices.Equal(got[id], codes) {
			t.Errorf("transaction %s: codes %v, want %v", id, got[id], codes)
		}
	}
	if !slices.Equal(f.calls, []string{"verify a", "add b"}) {
		t.Fatalf("coordinator calls %q, want a verify of a and an add of b", f.calls)
	}
}

// Produce v12 (Transactions V2): the leader adds the partition itself,
// asking again while the coordinator answers CONCURRENT_TRANSACTIONS
// (the previous transaction's markers), and answers CONCURRENT_TRANSACTIONS
// when it still does after txnAddRetryMax; a verify-only question is
// never asked.
func TestProduceV12AddsPartitions(t *testing.T) {
	v := &scriptedVerifier{answers: map[string]error{"notadded": txn.ErrTransactionAbortable}, busy: map[string]int{"soon": 2, "stuck": 1000}}
	h := newRealReplicasHarness(t, withTransactions(&scriptedTxns{}), withConfig(func(c *Config) { c.TxnVerifier = v }))
	for _, topic := range []string{"soon", "stuck", "notadded"} {
		h.ctrl.addTopic(topic, 1)
	}
	c := h.dial()
	produce := func(topic string) int16 {
		t.Helper()
		req := txnProduceRequest(t, 12, txnBatch{topic: topic, pid: 9, epoch: 1})
		return c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce("soon"); code != 0 {
		t.Fatalf("busy twice, then added: code %d", code)
	}
	if code := produce("stuck"); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("busy throughout: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if code := produce("notadded"); code != kerr.TransactionAbortable.Code {
		t.Fatalf("refused add: code %d, want TRANSACTION_ABORTABLE", code)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.asked) != 0 {
		t.Fatalf("verify-only questions %v for a v12 produce", v.asked)
	}
	var soon int
	for _, tp := range v.added {
		if tp.Topic == "soon" {
			soon++
		}
	}
	if soon != 3 {
		t.Fatalf("soon was added %d times, want 3 (two busy answers, then the add)", soon)
	}
	for topic, want := range map[string]int64{"soon": 1, "stuck": 0, "notadded": 0} {
		if _, end, err := h.manager.LogEnd(topic, 0); err != nil || end != want {
			t.Errorf("%s-0: log end %d (%v), want %d", topic, end, err, want)
		}
	}
}

// With verification off (transaction.partition.verification.enable
// =false) a Produce v11 is appended unasked, as before Kafka 3.6; a v12
// still adds its partition, or the partition would never be in the
// transaction.
func TestProduceVerificationOff(t *testing.T) {
	v := &scriptedVerifier{answers: map[string]error{"t": txn.ErrTransactionAbortable}}
	h := newRealReplicasHarness(t, withTransactions(&scriptedTxns{}), withConfig(func(c *Config) {
		c.TxnVerifier, c.TxnVerifyOnlyDisabled = v, true
	}))
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	for _, tc := range []struct {
		version int16
		pid     int64
		want    int16
	}{{11, 1, 0}, {12, 2, kerr.TransactionAbortable.Code}} {
		req := txnProduceRequest(t, tc.version, txnBatch{topic: "t", pid: tc.pid})
		if got := c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("v%d: code %d, want %d", tc.version, got, tc.want)
		}
	}
	if len(v.asked) != 0 || len(v.added) != 1 {
		t.Fatalf("asked %v, added %v: want only the v12 add", v.asked, v.added)
	}
}
