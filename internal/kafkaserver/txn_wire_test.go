package kafkaserver

// The partition side of transactions over the wire (issue 17, slice 2),
// against the real replica manager: read_committed fetches through
// franz-go's consumer (which skips the aborted transactions the answer
// lists), ListOffsets at the last stable offset, DescribeProducers and
// WriteTxnMarkers through kadm, the admin's way to end a hanging
// transaction. Until the transaction coordinator exists, Produce refuses
// transactional batches, so the transactions' batches go in through the
// replica manager, the path Produce takes once it accepts them.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
)

// txnWire drives one partition's transactions for the tests below.
type txnWire struct {
	t   *testing.T
	h   *wireHarness
	ctx context.Context
	adm *kadm.Client
	seq map[int64]int32
}

// send appends a batch of values through the replica manager:
// transactional for producer pid (epoch 0), or plain when pid < 0.
func (w *txnWire) send(pid int64, values ...string) int64 {
	w.t.Helper()
	opts := record.DefaultBatchOptions()
	if pid >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, 0, w.seq[pid], true
		w.seq[pid] += int32(len(values))
	}
	b := record.NewBuilder(opts)
	for _, v := range values {
		b.Add(nil, []byte(v), nil, time.Now().UnixMilli())
	}
	data, err := b.Build()
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.h.manager.Append(w.ctx, "t", 0, data, replica.AcksAll, 5*time.Second)
	if err != nil {
		w.t.Fatalf("append for producer %d: %v", pid, err)
	}
	return res.BaseOffset
}

// end writes producer pid's marker with kadm, as an admin would.
func (w *txnWire) end(pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	w.t.Helper()
	resp, err := w.adm.WriteTxnMarkers(w.ctx, kadm.TxnMarkers{
		ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordinatorEpoch, Commit: commit,
		Topics: kadm.TopicsSet{"t": {0: {}}},
	})
	if err != nil {
		w.t.Fatalf("WriteTxnMarkers for producer %d: %v", pid, err)
	}
	p, ok := resp[pid].Topics["t"].Partitions[0]
	if !ok {
		w.t.Fatalf("WriteTxnMarkers for producer %d: no answer for t-0: %+v", pid, resp)
	}
	return p.Err
}

// offsets returns the partition's end offsets: read_uncommitted's (the
// high watermark) and read_committed's (the last stable offset).
func (w *txnWire) offsets() (hw, lso int64) {
	w.t.Helper()
	end, err := w.adm.ListEndOffsets(w.ctx, "t")
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		w.t.Fatal(err)
	}
	committed, err := w.adm.ListCommittedOffsets(w.ctx, "t")
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		w.t.Fatal(err)
	}
	e, _ := end.Lookup("t", 0)
	c, _ := committed.Lookup("t", 0)
	return e.Offset, c.Offset
}

// consume reads the partition from the start at the isolation level
// until it has len(want) values, and checks they are want, in order.
func (w *txnWire) consume(level kgo.IsolationLevel, want ...string) {
	w.t.Helper()
	c, err := kgo.NewClient(
		kgo.SeedBrokers(w.h.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxPartitionBytes(200), // a few batches per fetch: aborted lists across fetches
	)
	if err != nil {
		w.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < len(want) {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			w.t.Fatalf("consumed %q, want %q", got, want)
		}
		fs.EachError(func(topic string, p int32, err error) { w.t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		w.t.Fatalf("consumed %q, want %q", got, want)
	}
}

func TestTransactionsOverTheWire(t *testing.T) {
	for _, mode := range []struct {
		name     string
		minBytes int
	}{{"copy", -1}, {"sendfile", 1}} {
		t.Run(mode.name, func(t *testing.T) { testTransactionsOverTheWire(t, mode.minBytes) })
	}
}

func testTransactionsOverTheWire(t *testing.T, sendfileMinBytes int) {
	h := newRealReplicasHarness(t, withConfig(func(c *Config) { c.SendfileMinBytes = sendfileMinBytes }))
	h.ctrl.addTopic("t", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := &txnWire{t: t, h: h, ctx: ctx, adm: kadm.NewClient(cl), seq: map[int64]int32{}}

	// Producer 100 aborts, producer 101 commits, their batches
	// interleaved; a plain batch on either side.
	w.send(-1, "p0", "p1")
	a := w.send(100, "a0", "a1")
	w.send(101, "c0", "c1")
	w.send(100, "a2")
	if err := w.end(100, 0, 3, false); err != nil {
		t.Fatal(err)
	}
	if err := w.end(101, 0, 3, true); err != nil {
		t.Fatal(err)
	}
	w.send(-1, "tail")
	w.consume(kgo.ReadCommitted(), "p0", "p1", "c0", "c1", "tail")
	w.consume(kgo.ReadUncommitted(), "p0", "p1", "a0", "a1", "c0", "c1", "a2", "tail")
	if hw, lso := w.offsets(); hw != lso {
		t.Fatalf("every transaction decided: high watermark %d, last stable offset %d", hw, lso)
	}

	// Producer 102 leaves its transaction open: read_committed stops at
	// its first offset, which DescribeProducers reports.
	o := w.send(102, "o0")
	w.send(-1, "after")
	hw, lso := w.offsets()
	if lso != o || hw != o+2 {
		t.Fatalf("a transaction open at %d: high watermark %d, last stable offset %d", o, hw, lso)
	}
	fetch := fetchReq(11, 0, 0, fetchPart{topic: "t", partition: 0, offset: o})
	fetch.IsolationLevel = 1
	p := fetched(h.dial().roundTrip(fetch).(*kmsg.FetchResponse))[fetchPart{topic: "t"}]
	if p.ErrorCode != 0 || p.LastStableOffset != o || p.HighWatermark != hw || len(values(t, p.RecordBatches)) != 0 {
		t.Fatalf("read_committed fetch at the last stable offset: error %d, last stable %d, high watermark %d, %d values",
			p.ErrorCode, p.LastStableOffset, p.HighWatermark, len(values(t, p.RecordBatches)))
	}
	described, err := w.adm.DescribeProducers(ctx, kadm.TopicsSet{"t": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]kadm.DescribedProducer{}
	described.EachProducer(func(d kadm.DescribedProducer) { byID[d.ProducerID] = d })
	want := map[int64][3]int64{ // coordinator epoch, open transaction's start, last sequence
		100: {3, -1, 2},
		101: {3, -1, 1},
		102: {-1, o, 0},
	}
	if len(byID) != len(want) {
		t.Fatalf("described producers %+v", byID)
	}
	for pid, wv := range want {
		d := byID[pid]
		if int64(d.CoordinatorEpoch) != wv[0] || d.CurrentTxnStartOffset != wv[1] || int64(d.LastSequence) != wv[2] || d.ProducerEpoch != 0 {
			t.Fatalf("producer %d described as %+v, want coordinator epoch %d, start %d, last sequence %d", pid, d, wv[0], wv[1], wv[2])
		}
	}

	// The admin abort of the hanging transaction, built from what
	// DescribeProducers said.
	hanging := byID[102]
	if err := w.end(102, hanging.ProducerEpoch, hanging.CoordinatorEpoch, false); err != nil {
		t.Fatal(err)
	}
	if hw, lso := w.offsets(); hw != lso || hw != o+3 {
		t.Fatalf("after the abort: high watermark %d, last stable offset %d, want both %d", hw, lso, o+3)
	}
	w.consume(kgo.ReadCommitted(), "p0", "p1", "c0", "c1", "tail", "after")

	// The fetch answer lists the aborted transactions of what it holds.
	fetch = fetchReq(11, 0, 0, fetchPart{topic: "t", partition: 0, offset: a})
	fetch.IsolationLevel = 1
	p = fetched(h.dial().roundTrip(fetch).(*kmsg.FetchResponse))[fetchPart{topic: "t"}]
	var aborted []int64
	for _, at := range p.AbortedTransactions {
		aborted = append(aborted, at.ProducerID, at.FirstOffset)
	}
	if !slices.Equal(aborted, []int64{100, a, 102, o}) {
		t.Fatalf("aborted transactions from %d: %+v", a, p.AbortedTransactions)
	}
}

// WriteTxnMarkers' refusals, each for its partition only, and none
// writes.
func TestWriteTxnMarkersRefusals(t *testing.T) {
	h := newRealReplicasHarness(t)
	h.ctrl.addTopic("t", 2)
	h.ctrl.addTopic("__transaction_state", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &txnWire{t: t, h: h, ctx: ctx, seq: map[int64]int32{}}
	w.send(7, "x")
	c := h.dial()
	marker := func(pid int64, epoch int16, coordinatorEpoch int32, version int8, topic string, partitions ...int32) kmsg.WriteTxnMarkersRequestMarker {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, coordinatorEpoch, version
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = topic, partitions
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{rt}
		return m
	}
	send := func(m kmsg.WriteTxnMarkersRequestMarker) []int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(2)
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
		resp := c.roundTrip(req).(*kmsg.WriteTxnMarkersResponse)
		if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != m.ProducerID || len(resp.Markers[0].Topics) != 1 {
			t.Fatalf("answer %+v", resp)
		}
		var codes []int16
		for _, p := range resp.Markers[0].Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		return codes
	}
	leo := func() int64 {
		_, end, err := h.manager.LogEnd("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	// Coordinator epoch 5 ends producer 7's transaction on t-0 only.
	if codes := send(marker(7, 0, 5, 0, "t", 0)); !slices.Equal(codes, []int16{0}) {
		t.Fatalf("the marker: %v", codes)
	}
	// Producer 7's next transaction, open: a V2 marker at its epoch is
	// not a resend.
	w.send(7, "y")
	before := leo()
	for _, tc := range []struct {
		name   string
		marker kmsg.WriteTxnMarkersRequestMarker
		want   []*kerr.Error
	}{
		{"an older coordinator", marker(7, 0, 4, 0, "t", 0), []*kerr.Error{kerr.TransactionCoordinatorFenced}},
		{"V2 at the producer's epoch", marker(7, 0, 5, 2, "t", 0), []*kerr.Error{kerr.InvalidProducerEpoch}},
		{"a negative producer id", marker(-1, 0, 5, 0, "t", 0, 1), []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest}},
		{"a negative epoch", marker(7, -1, 5, 0, "t", 0), []*kerr.Error{kerr.InvalidRequest}},
		{"transaction version 3", marker(7, 0, 5, 3, "t", 0), []*kerr.Error{kerr.InvalidRequest}},
		{"unknown topic and partition", marker(7, 0, 5, 0, "missing", 0), []*kerr.Error{kerr.UnknownTopicOrPartition}},
		{"unknown partition", marker(7, 0, 5, 0, "t", 9, -1), []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition}},
		{"__transaction_state", marker(7, 0, 5, 0, "__transaction_state", 0), []*kerr.Error{kerr.InvalidTopicException}},
	} {
		var want []int16
		for _, e := range tc.want {
			want = append(want, e.Code)
		}
		if codes := send(tc.marker); !slices.Equal(codes, want) {
			t.Errorf("%s: codes %v, want %v", tc.name, codes, want)
		}
	}
	if after := leo(); after != before {
		t.Fatalf("refused markers wrote: log end %d -> %d", before, after)
	}
	// Each partition on its own: t-1 never saw producer 7, so even the
	// old coordinator's marker is written there.
	if codes := send(marker(7, 0, 4, 0, "t", 0, 1)); !slices.Equal(codes, []int16{kerr.TransactionCoordinatorFenced.Code, 0}) {
		t.Fatalf("a marker for two partitions: %v", codes)
	}
}

// DescribeProducers' refusals, with a message.
func TestDescribeProducersRefusals(t *testing.T) {
	h := newRealReplicasHarness(t)
	h.ctrl.addTopic("t", 1)
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tp := range []struct {
		topic     string
		partition int32
	}{{"t", 0}, {"t", 4}, {"missing", 0}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, []int32{tp.partition}
		req.Topics = append(req.Topics, rt)
	}
	resp := h.dial().roundTrip(req).(*kmsg.DescribeProducersResponse)
	var got []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			msg := ""
			if rp.ErrorMessage != nil {
				msg = "with a message"
			}
			got = append(got, fmt.Sprintf("%s-%d %v %s %d", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), msg, len(rp.ActiveProducers)))
		}
	}
	want := []string{
		"t-0 <nil>  0",
		"t-4 UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. with a message 0",
		"missing-0 UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. with a message 0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("answers\n%q\nwant\n%q", got, want)
	}
}
