package kafkaserver

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
)

// fetchPart names one partition to fetch.
type fetchPart struct {
	topic     string
	id        metadata.UUID
	partition int32
	offset    int64
}

// fetchReq builds a fetch of parts (consecutive parts of one topic share
// its entry), sessionless unless the caller sets the session fields.
func fetchReq(version int16, maxWaitMs, minBytes int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = minBytes
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	for _, p := range parts {
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != p.topic || req.Topics[n-1].TopicID != p.id {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.id
			req.Topics = append(req.Topics, rt)
			n++
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.partition
		rp.FetchOffset = p.offset
		rp.PartitionMaxBytes = 1 << 20
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
	}
	return req
}

// fetched flattens a fetch response: topic (name or id) and partition
// -> answer.
func fetched(resp *kmsg.FetchResponse) map[fetchPart]kmsg.FetchResponseTopicPartition {
	out := make(map[fetchPart]kmsg.FetchResponseTopicPartition)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[fetchPart{topic: rt.Topic, id: rt.TopicID, partition: p.Partition}] = p
		}
	}
	return out
}

// values decodes the record values of fetched batches.
func values(t *testing.T, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		h, err := record.ParseHeader(batches)
		if err != nil {
			t.Fatal(err)
		}
		err = record.ForEachRecord(batches[:h.Size()], func(r *record.Record) error {
			out = append(out, string(r.Value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		batches = batches[h.Size():]
	}
	return out
}

func (h *wireHarness) produce(t *testing.T, topic string, partition int32, prefix string, n int) {
	t.Helper()
	p := producePartition(t, h.dial().roundTrip(produceReq(9, 1, topic, partition, batch(t, prefix, n))))
	if p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}
}

// Every advertised version reads what was produced, by name before v13
// and by topic id from v13.
func TestFetchAllVersions(t *testing.T) {
	h := newWireHarness(t)
	tp := h.ctrl.addTopic("t", 1)
	h.produce(t, "t", 0, "r", 3)
	c := h.dial()
	for v := int16(4); v <= 16; v++ {
		part := fetchPart{topic: "t", partition: 0}
		key := part
		if v >= 13 {
			part = fetchPart{id: tp.ID, partition: 0}
			key = part
		}
		resp := c.roundTrip(fetchReq(v, 5000, 1, part)).(*kmsg.FetchResponse)
		got, ok := fetched(resp)[key]
		if !ok || got.ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		if got.HighWatermark != 3 || got.LastStableOffset != 3 || (v >= 5 && got.LogStartOffset != 0) {
			t.Fatalf("v%d: high watermark %d, last stable %d, log start %d", v, got.HighWatermark, got.LastStableOffset, got.LogStartOffset)
		}
		if vals := values(t, got.RecordBatches); len(vals) != 3 || vals[2] != "r-2" {
			t.Fatalf("v%d: values %v", v, vals)
		}
		if v >= 11 && got.PreferredReadReplica != -1 {
			t.Fatalf("v%d: preferred read replica %d", v, got.PreferredReadReplica)
		}
		if v >= 7 && resp.SessionID != 0 {
			t.Fatalf("v%d: sessionless fetch got session %d", v, resp.SessionID)
		}
	}
}

// Per-partition errors come back at once (not after MaxWait) alongside
// the partitions that read fine.
func TestFetchErrors(t *testing.T) {
	h := newWireHarness(t)
	tp := h.ctrl.addTopic("t", 1)
	h.produce(t, "t", 0, "e", 1)
	c := h.dial()
	// MaxWait is a minute: waiting for it would trip the 10s read deadline.
	resp := c.roundTrip(fetchReq(12, 60_000, 1<<20,
		fetchPart{topic: "t", partition: 0},
		fetchPart{topic: "t", partition: 9},
		fetchPart{topic: "missing", partition: 0},
	)).(*kmsg.FetchResponse)
	got := fetched(resp)
	if p := got[fetchPart{topic: "t", partition: 0}]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("good partition: %+v", p)
	}
	for _, k := range []fetchPart{{topic: "t", partition: 9}, {topic: "missing", partition: 0}} {
		if p := got[k]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.HighWatermark != -1 {
			t.Fatalf("%v: %+v", k, p)
		}
	}
	resp = c.roundTrip(fetchReq(13, 60_000, 1, fetchPart{id: metadata.UUID{7}, partition: 0})).(*kmsg.FetchResponse)
	if p := fetched(resp)[fetchPart{id: metadata.UUID{7}}]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", resp.Topics)
	}
	resp = c.roundTrip(fetchReq(13, 60_000, 1, fetchPart{id: tp.ID, partition: 0, offset: 50})).(*kmsg.FetchResponse)
	if p := fetched(resp)[fetchPart{id: tp.ID}]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("offset out of range: %+v", resp.Topics)
	}
}

// A long-poll waits for data and is woken by an append on another
// connection.
func TestFetchLongPollWokenByProduce(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	req := fetchReq(11, 60_000, 1, fetchPart{topic: "t", partition: 0})
	corr := c.send(req)
	testutil.Eventually(t, 5*time.Second, func() error {
		if h.reps.waiting.Load() != 1 {
			return errors.New("fetch not waiting yet")
		}
		return nil
	})
	h.produce(t, "t", 0, "wake", 1)
	resp := c.recv(req, corr).(*kmsg.FetchResponse)
	p := fetched(resp)[fetchPart{topic: "t", partition: 0}]
	if vals := values(t, p.RecordBatches); len(vals) != 1 || vals[0] != "wake-0" {
		t.Fatalf("values %v", vals)
	}
}

// read_committed answers an empty, non-null aborted transactions list;
// read_uncommitted a null one.
func TestFetchIsolationAbortedTransactions(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	h.produce(t, "t", 0, "i", 1)
	c := h.dial()
	for _, level := range []int8{0, 1} {
		req := fetchReq(11, 0, 0, fetchPart{topic: "t", partition: 0})
		req.IsolationLevel = level
		p := fetched(c.roundTrip(req).(*kmsg.FetchResponse))[fetchPart{topic: "t"}]
		if (p.AbortedTransactions != nil) != (level == 1) || len(p.AbortedTransactions) != 0 {
			t.Fatalf("isolation %d: aborted transactions %#v", level, p.AbortedTransactions)
		}
	}
}

// Regression: a partition with nothing to return (at its end, or in
// error) was answered with a null record set. librdkafka treats that as a
// protocol parse failure and drops the whole response, so `kcat -C -e`
// never saw end-of-partition and never exited. Kafka sends an empty set.
func TestFetchEmptyPartitionRecordsNotNull(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	h.produce(t, "t", 0, "r", 3)
	c := h.dial()
	for v := int16(4); v <= 12; v++ {
		resp := c.roundTrip(fetchReq(v, 0, 0,
			fetchPart{topic: "t", partition: 0, offset: 3},
			fetchPart{topic: "t", partition: 9},
		)).(*kmsg.FetchResponse)
		got := fetched(resp)
		for _, k := range []fetchPart{{topic: "t", partition: 0}, {topic: "t", partition: 9}} {
			p, ok := got[k]
			if !ok || p.RecordBatches == nil {
				t.Fatalf("v%d %v: answered %v with a null record set, want an empty one", v, k, ok)
			}
		}
	}
}
