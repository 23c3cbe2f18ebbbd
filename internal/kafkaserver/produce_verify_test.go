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
// in the transaction) and records what it was asked.
type scriptedVerifier struct {
	mu      sync.Mutex
	asked   []txn.TopicPartition
	answers map[string]error
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
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		id := "app"
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		for _, topic := range topics {
			opts := record.DefaultBatchOptions()
			opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, 0, seq[topic]
			b := record.NewBuilder(opts)
			b.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
			batch, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.ProduceResponse)
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
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	id := "app"
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	for i, pid := range []int64{7, 8} {
		opts := record.DefaultBatchOptions()
		opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, 0, int32(1-i)
		b := record.NewBuilder(opts)
		b.Add(nil, []byte("v"), nil, 1)
		batch, _ := b.Build()
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "added"
		if i == 1 {
			rt.Topic = "busy"
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
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
