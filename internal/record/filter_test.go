package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func filterSourceBatch(t *testing.T, c Codec) ([]byte, []testRecord) {
	opts := BatchOptions{Codec: c, ProducerID: 21, ProducerEpoch: 2, BaseSequence: 700, Transactional: true,
		PartitionLeaderEpoch: 5, BaseOffset: 5000}
	recs := sizedRecords(10, 200)
	recs[3].headers = []RecordHeader{{Key: "k", Value: []byte("v")}}
	recs[4].value = nil // a tombstone
	b := buildBatch(t, opts, recs)
	return b, recs
}

func TestFilterKeepsOffsetsAndHeader(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		b, recs := filterSourceBatch(t, c)
		orig, err := Validate(b, ValidateOptions{VerifyCompressedRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("dst-prefix")
		out, kept, err := Filter(append([]byte(nil), prefix...), b, func(r *Record) bool { return r.Offset%2 == 1 })
		if err != nil || kept != 5 {
			t.Fatalf("Filter: kept %d, %v", kept, err)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatal("Filter did not append to dst")
		}
		out = out[len(prefix):]

		h, err := Validate(out, ValidateOptions{VerifyCompressedRecords: true})
		if err != nil {
			t.Fatalf("filtered batch invalid: %v", err)
		}
		want := orig
		want.NumRecords, want.BatchLength, want.CRC = 5, int32(len(out)-12), computeCRC(out)
		if h != want {
			t.Fatalf("filtered header\n got %+v\nwant %+v", h, want)
		}
		if h.Codec() != c {
			t.Fatalf("codec %s, want %s", h.Codec(), c)
		}
		// A compacted batch has gaps, which only producers may not send.
		if _, err := Validate(out, ValidateOptions{Client: true}); !errors.Is(err, ErrInvalidRecordBatch) {
			t.Fatalf("filtered batch as a client batch: %v", err)
		}

		got, err := Records(out)
		if err != nil || len(got) != 5 {
			t.Fatalf("Records: %d, %v", len(got), err)
		}
		for i, r := range got {
			src := recs[2*i+1]
			if r.Offset != 5000+int64(2*i+1) || r.Timestamp != src.timestamp || !sameBytes(r.Key, src.key) ||
				!sameBytes(r.Value, src.value) || len(r.Headers) != len(src.headers) {
				t.Fatalf("kept record %d: %+v", i, r)
			}
		}

		// kmsg reads the same thing: original deltas, same header fields.
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(out); err != nil {
			t.Fatalf("kmsg: %v", err)
		}
		if kb.FirstOffset != 5000 || kb.LastOffsetDelta != 9 || kb.NumRecords != 5 || kb.FirstTimestamp != orig.FirstTimestamp ||
			kb.MaxTimestamp != orig.MaxTimestamp || kb.ProducerID != 21 || kb.FirstSequence != 700 || kb.Attributes != orig.Attributes {
			t.Fatalf("kmsg header %+v", kb)
		}
		for i, kr := range kmsgRecordsOf(t, &kb) {
			if kr.OffsetDelta != int32(2*i+1) || kb.FirstTimestamp+kr.TimestampDelta64 != recs[2*i+1].timestamp {
				t.Fatalf("kmsg record %d: delta %d ts delta %d", i, kr.OffsetDelta, kr.TimestampDelta64)
			}
		}

		// Filtering a filtered batch works the same way.
		out2, kept2, err := Filter(nil, out, func(r *Record) bool { return r.Offset != 5001 })
		if err != nil || kept2 != 4 {
			t.Fatalf("second Filter: %d %v", kept2, err)
		}
		if _, err := Validate(out2, ValidateOptions{VerifyCompressedRecords: true}); err != nil {
			t.Fatalf("twice-filtered batch invalid: %v", err)
		}
	})
}

func TestFilterAllOrNothing(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		b, _ := filterSourceBatch(t, c)
		out, kept, err := Filter([]byte("x"), b, func(*Record) bool { return false })
		if err != nil || kept != 0 || out != nil {
			t.Fatalf("keep none: %q %d %v", out, kept, err)
		}
		out, kept, err = Filter(nil, b, func(*Record) bool { return true })
		if err != nil || kept != 10 || !bytes.Equal(out, b) {
			t.Fatalf("keep all: %d %v, equal %v", kept, err, bytes.Equal(out, b))
		}
	})
}

func TestFilterRejectsDamage(t *testing.T) {
	b, _ := filterSourceBatch(t, CodecNone)
	putInt32(b, offNumRecords, 11)
	if _, _, err := Filter(nil, b, func(*Record) bool { return true }); !errors.Is(err, ErrRecordCountMismatch) {
		t.Fatalf("lying count: %v", err)
	}
	if _, _, err := Filter(nil, b[:30], func(*Record) bool { return true }); !errors.Is(err, ErrCorruptLength) {
		t.Fatalf("short: %v", err)
	}
}

func TestEmptyBatch(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		b, _ := filterSourceBatch(t, c)
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		e := EmptyBatch([]byte("pre"), h)
		if !bytes.HasPrefix(e, []byte("pre")) {
			t.Fatal("EmptyBatch did not append")
		}
		e = e[3:]
		got, err := Validate(e, ValidateOptions{VerifyCompressedRecords: true})
		if err != nil {
			t.Fatalf("empty batch invalid: %v", err)
		}
		want := h
		want.NumRecords, want.BatchLength, want.CRC = 0, HeaderSize-12, computeCRC(e)
		want.Attributes &^= attrCodecMask
		if got != want || len(e) != HeaderSize {
			t.Fatalf("empty batch\n got %+v\nwant %+v", got, want)
		}
		if got.LastOffset() != h.LastOffset() || got.ProducerID != 21 || got.BaseSequence != 700 || !got.IsTransactional() {
			t.Fatalf("empty batch lost producer state: %+v", got)
		}
		if recs, err := Records(e); err != nil || len(recs) != 0 {
			t.Fatalf("Records of empty batch: %v %v", recs, err)
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(e); err != nil || kb.NumRecords != 0 || len(kb.Records) != 0 {
			t.Fatalf("kmsg empty batch: %+v %v", kb, err)
		}
	})
}
