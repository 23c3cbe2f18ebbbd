package kafkaserver

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/storage"
)

// encodeRanged's pieces, with each range's bytes between them, are
// byte for byte what kmsg encodes with the records inline: for every
// Fetch version served, by topic name and by id, with errors, aborted
// transactions, current-leader tags, broker endpoints, empty and null
// record sets, and ranges first, last, adjacent and alone.
func TestEncodeRangedMatchesKmsg(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "segment.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	for iter := range 2000 {
		version := int16(4 + iter%13) // 4..16
		resp := kmsg.NewPtrFetchResponse()
		resp.ThrottleMillis = rng.Int32N(1000)
		resp.SessionID = rng.Int32()
		inline := kmsg.NewPtrFetchResponse()
		var ranges []storage.FileRange
		var fileEnd int64
		for ti := range 1 + rng.IntN(4) {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = string(rune('a'+ti)) + "-topic"
			rt.TopicID = [16]byte{byte(ti + 1), 7}
			for pi := range rng.IntN(5) {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(pi)
				p.HighWatermark = rng.Int64N(1 << 40)
				p.LastStableOffset = p.HighWatermark
				p.LogStartOffset = rng.Int64N(1000)
				p.RecordBatches = []byte{}
				switch rng.IntN(6) {
				case 0:
					p.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
					p.CurrentLeader.LeaderID = 2
					p.CurrentLeader.LeaderEpoch = 9
				case 1:
					p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 4, FirstOffset: 10}}
				case 2:
					p.RecordBatches = nil
				}
				rec := make([]byte, 61+rng.IntN(300))
				for i := range rec {
					rec[i] = byte(rng.Uint32())
				}
				pin := p
				switch rng.IntN(3) {
				case 0: // a range
					if _, err := file.WriteAt(rec, fileEnd); err != nil {
						t.Fatal(err)
					}
					ranges = append(ranges, storage.FileRange{File: file, Pos: fileEnd, Size: len(rec)})
					fileEnd += int64(len(rec)) + int64(rng.IntN(10))
					p.RecordBatches = rangePlaceholder
					pin.RecordBatches = rec
				case 1: // records in memory
					p.RecordBatches, pin.RecordBatches = rec, rec
				}
				rt.Partitions = append(rt.Partitions, p)
				rtin := &inline.Topics
				if len(*rtin) <= ti {
					*rtin = append(*rtin, kmsg.NewFetchResponseTopic())
					(*rtin)[ti].Topic, (*rtin)[ti].TopicID = rt.Topic, rt.TopicID
				}
				(*rtin)[ti].Partitions = append((*rtin)[ti].Partitions, pin)
			}
			if len(inline.Topics) <= ti {
				in := kmsg.NewFetchResponseTopic()
				in.Topic, in.TopicID = rt.Topic, rt.TopicID
				inline.Topics = append(inline.Topics, in)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if version >= 16 && rng.IntN(2) == 0 {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = 2, "127.0.0.1", 9093
			resp.Brokers = append(resp.Brokers, b)
		}
		inline.ThrottleMillis, inline.SessionID, inline.Brokers = resp.ThrottleMillis, resp.SessionID, resp.Brokers

		want := appendResponse(nil, &slot{key: 1, version: version, correlationID: int32(iter), resp: inline})
		rf := &rangedFetch{FetchResponse: resp, ranges: ranges}
		wire, ends, err := encodeRanged(nil, &slot{key: 1, version: version, correlationID: int32(iter), resp: rf}, rf)
		if err != nil {
			t.Fatalf("iteration %d, v%d, %d ranges: %v", iter, version, len(ranges), err)
		}
		var got []byte
		prev := 0
		for k, r := range ranges {
			got = append(got, wire[prev:ends[k]]...)
			b := make([]byte, r.Size)
			if _, err := file.ReadAt(b, r.Pos); err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
			prev = ends[k]
		}
		got = append(got, wire[prev:]...)
		if !bytes.Equal(got, want) {
			t.Fatalf("iteration %d, v%d, %d ranges: %d bytes on the wire, kmsg encodes %d; first difference at %d",
				iter, version, len(ranges), len(got), len(want), mismatch(got, want))
		}
		// The placeholders are back for the writer's fallback.
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if len(p.RecordBatches) == 2 {
					t.Fatalf("iteration %d: a two-byte placeholder left in the response", iter)
				}
			}
		}
	}
}

// inlineRanges, the writer's fallback, reads each range in place of its
// placeholder.
func TestInlineRanges(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "segment.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte("0123456789"), 0); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	for i, b := range [][]byte{rangePlaceholder, []byte("in memory"), rangePlaceholder, {}} {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.RecordBatches = int32(i), b
		rt.Partitions = append(rt.Partitions, p)
	}
	resp.Topics = append(resp.Topics, rt)
	rf := &rangedFetch{FetchResponse: resp, ranges: []storage.FileRange{{File: file, Pos: 1, Size: 3}, {File: file, Pos: 6, Size: 4}}}
	if err := inlineRanges(rf); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range resp.Topics[0].Partitions {
		got = append(got, string(p.RecordBatches))
	}
	if want := []string{"123", "in memory", "6789", ""}; !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	rf.ranges = rf.ranges[:0]
	resp.Topics[0].Partitions[0].RecordBatches = rangePlaceholder
	if err := inlineRanges(rf); err == nil {
		t.Fatal("more placeholders than ranges: no error")
	}
}
