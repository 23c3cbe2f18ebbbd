package kafkaserver

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
)

func producePartition(t *testing.T, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("response shape %+v", pr.Topics)
	}
	return pr.Topics[0].Partitions[0]
}

// Every advertised version round-trips. v0-2 are advertised for
// librdkafka's sake but their data is refused per partition with
// UNSUPPORTED_FOR_MESSAGE_FORMAT; v3-11 append.
func TestProduceAllVersions(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	next := int64(0)
	for v := int16(0); v <= 11; v++ {
		p := producePartition(t, c.roundTrip(produceReq(v, 1, "t", 0, batch(t, "v", 2))))
		if v < 3 {
			if p.ErrorCode != kerr.UnsupportedForMessageFormat.Code {
				t.Fatalf("v%d: error %d, want UNSUPPORTED_FOR_MESSAGE_FORMAT", v, p.ErrorCode)
			}
			continue
		}
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("v%d: %+v, want base offset %d", v, p, next)
		}
		if v >= 2 && p.LogAppendTime != -1 {
			t.Fatalf("v%d: log append time %d", v, p.LogAppendTime)
		}
		if v >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("v%d: log start offset %d", v, p.LogStartOffset)
		}
		next += 2
	}
}

// Per-partition refusals, each with the code clients act on, and none of
// them appends anything.
func TestProduceRefusals(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
	h.ctrl.addTopic("t", 1)
	good := batch(t, "g", 1)
	messageSet := make([]byte, 40)
	messageSet[magicOffset] = 1
	badCRC := batch(t, "c", 1)
	badCRC[len(badCRC)-1] ^= 0xff
	cases := []struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{
		{"unknown topic", produceReq(9, 1, "missing", 0, good), kerr.UnknownTopicOrPartition},
		{"unknown partition", produceReq(9, 1, "t", 5, good), kerr.UnknownTopicOrPartition},
		{"negative partition", produceReq(9, 1, "t", -1, good), kerr.UnknownTopicOrPartition},
		{"invalid topic name", produceReq(9, 1, "bad/name", 0, good), kerr.InvalidTopicException},
		{"magic 1 message set", produceReq(9, 1, "t", 0, messageSet), kerr.UnsupportedForMessageFormat},
		{"too short", produceReq(9, 1, "t", 0, []byte{1, 2, 3}), kerr.CorruptMessage},
		{"null records", produceReq(9, 1, "t", 0, nil), kerr.CorruptMessage},
		{"bad CRC", produceReq(9, 1, "t", 0, badCRC), kerr.CorruptMessage},
		{"acks 2", produceReq(9, 2, "t", 0, good), kerr.InvalidRequiredAcks},
	}
	txn := produceReq(9, 1, "t", 0, good)
	txn.TransactionID = kmsg.StringPtr("my-txn")
	cases = append(cases, struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{"transactional id", txn, kerr.TransactionalIDAuthorizationFailed})
	// A transactional batch without a transactional id, behind a good
	// one: nothing of the request is written.
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, true
	tb := record.NewBuilder(opts)
	tb.Add(nil, []byte("v"), nil, 1)
	txnBatch, err := tb.Build()
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{"transactional batch", produceReq(9, 1, "t", 0, append(batch(t, "g", 1), txnBatch...)), kerr.TransactionalIDAuthorizationFailed})

	c := h.dial()
	for _, tc := range cases {
		p := producePartition(t, c.roundTrip(tc.req))
		if p.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %s, want %s", tc.name, kerr.ErrorForCode(p.ErrorCode), tc.want)
		}
		if p.BaseOffset != -1 {
			t.Errorf("%s: base offset %d, want -1", tc.name, p.BaseOffset)
		}
		if p.ErrorMessage == nil || *p.ErrorMessage == "" {
			t.Errorf("%s: no error message on v9", tc.name)
		}
	}
	h.reps.mu.Lock()
	defer h.reps.mu.Unlock()
	if p := h.reps.parts[memTP{"t", 0}]; p != nil && p.next != 0 {
		t.Fatalf("refused produces appended %d records", p.next)
	}
}

// An unknown topic is auto-created on produce (once, however many
// partitions of it the request names) and appended to.
func TestProduceAutoCreate(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.numPartitions = 2
	c := h.dial()
	req := produceReq(11, -1, "new-topic", 0, batch(t, "a", 1))
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 1
	rp.Records = batch(t, "b", 1)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("partition %d: %+v", p.Partition, p)
		}
	}
	if n := h.ctrl.creates.Load(); n != 1 {
		t.Fatalf("%d CreateTopics calls", n)
	}
	if tp, ok := h.ctrl.Image().Topic("new-topic"); !ok || len(tp.Partitions) != 2 {
		t.Fatalf("topic not created with the default partitions: %+v", tp)
	}
}

// The partitions of one request are appended concurrently: partition 0's
// append waits for partition 1's to start, which deadlocks (and fails on
// the read deadline) if they run one after the other.
func TestProducePartitionsConcurrently(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 2)
	started := make(chan struct{})
	h.reps.appendHook = func(ctx context.Context, _ string, partition int32) error {
		if partition == 1 {
			close(started)
			return nil
		}
		select {
		case <-started: // partition 1 is being appended at the same time
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	req := produceReq(9, 1, "t", 0, batch(t, "a", 1))
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 1
	rp.Records = batch(t, "b", 1)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	resp := h.dial().roundTrip(req).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}
}

// NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint on
// v10+ (KIP-951).
func TestProduceNotLeaderCarriesLeader(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	h.ctrl.setLeader("t", 0, 1, 4) // we lead in the image...
	h.reps.appendHook = func(context.Context, string, int32) error {
		return kerr.NotLeaderForPartition // ...but the replica manager says not
	}
	resp := h.dial().roundTrip(produceReq(10, 1, "t", 0, batch(t, "x", 1))).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 1 || p.CurrentLeader.LeaderEpoch != 4 {
		t.Fatalf("%+v", p)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 {
		t.Fatalf("brokers %+v", resp.Brokers)
	}
}

// A partition given twice in one request is refused the second time,
// not appended twice in an undefined order.
func TestProduceDuplicatePartition(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	req := produceReq(9, 1, "t", 0, batch(t, "a", 1))
	req.Topics = append(req.Topics, req.Topics[0])
	resp := h.dial().roundTrip(req).(*kmsg.ProduceResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[1].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("%+v", resp.Topics)
	}
}

// kmsg's decoder slices Records out of the request frame, so the records
// reach the append without a copy.
func TestProduceRecordsAliasFrame(t *testing.T) {
	req := produceReq(9, 1, "t", 0, make([]byte, 100))
	frame := req.AppendTo(nil)
	var got kmsg.ProduceRequest
	got.Version = 9
	if err := got.ReadFrom(frame); err != nil {
		t.Fatal(err)
	}
	rec := got.Topics[0].Partitions[0].Records
	start := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
	if len(rec) != 100 || p < start || p+100 > start+uintptr(len(frame)) {
		t.Fatal("decoded records do not alias the frame: the produce path would copy them")
	}
}

// A frame larger than the first buffer chunk grows as it arrives and
// reaches the log intact.
func TestProduceLargeFrame(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("big", 1)
	value := make([]byte, 3<<20+12345)
	for i := range value {
		value[i] = byte(i * 7)
	}
	bld := record.NewBuilder(record.DefaultBatchOptions())
	bld.Add([]byte("k"), value, nil, 1)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	if p := producePartition(t, c.roundTrip(produceReq(9, 1, "big", 0, b))); p.ErrorCode != 0 {
		t.Fatalf("error %d", p.ErrorCode)
	}
	// A small request right after reuses pooled buffers.
	if p := producePartition(t, c.roundTrip(produceReq(9, 1, "big", 0, batch(t, "s", 1)))); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("%+v", p)
	}
	req := fetchReq(11, 0, 0, fetchPart{topic: "big"})
	req.MaxBytes = 8 << 20
	req.Topics[0].Partitions[0].PartitionMaxBytes = 8 << 20
	got := fetched(c.roundTrip(req).(*kmsg.FetchResponse))[fetchPart{topic: "big"}]
	var first []byte
	err = record.ForEachRecord(got.RecordBatches[:len(b)], func(r *record.Record) error {
		first = append([]byte(nil), r.Value...)
		return nil
	})
	if err != nil || !bytes.Equal(first, value) {
		t.Fatalf("large record came back different (err %v, %d bytes)", err, len(first))
	}
}
