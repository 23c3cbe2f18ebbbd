package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// allCodecs is every codec Kafka defines, for tests that run once per codec.
var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// forEachCodec runs f as a subtest per codec.
func forEachCodec(t *testing.T, f func(t *testing.T, c Codec)) {
	t.Helper()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) { f(t, c) })
	}
}

// kmsgRecordBytes encodes r with kmsg, filling in the length prefix kmsg
// leaves to the caller.
func kmsgRecordBytes(r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // a zero length is one varint byte
	r.Length = int32(len(body))
	return r.AppendTo(nil)
}

// kmsgBatch builds a batch entirely with kmsg's encoders, the codec applied
// with this package's Compress (kmsg has no compression of its own).
func kmsgBatch(t testing.TB, codec Codec, hdr kmsg.RecordBatch, recs []kmsg.Record) []byte {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		raw = append(raw, kmsgRecordBytes(r)...)
	}
	body, err := Compress(codec, nil, raw)
	if err != nil {
		t.Fatalf("compress %s: %v", codec, err)
	}
	hdr.Magic = 2
	hdr.Attributes = hdr.Attributes&^7 | int16(codec)
	hdr.NumRecords = int32(len(recs))
	hdr.Records = body
	hdr.Length = int32(HeaderSize - 12 + len(body))
	b := hdr.AppendTo(nil)
	hdr.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return hdr.AppendTo(nil)
}

// sampleKmsgRecords covers the shapes a record can take: null and empty keys
// and values, headers with null and empty values, negative and large
// timestamp deltas.
func sampleKmsgRecords() []kmsg.Record {
	return []kmsg.Record{
		{OffsetDelta: 0, TimestampDelta64: 0, Key: []byte("k0"), Value: []byte("v0")},
		{OffsetDelta: 1, TimestampDelta64: 5, Key: nil, Value: []byte("null key")},
		{OffsetDelta: 2, TimestampDelta64: -3, Key: []byte{}, Value: nil},
		{OffsetDelta: 3, TimestampDelta64: 1 << 40, Key: []byte("h"), Value: []byte{},
			Headers: []kmsg.Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "c", Value: []byte{}}}},
		{OffsetDelta: 4, TimestampDelta64: 7, Key: bytes.Repeat([]byte("K"), 300), Value: bytes.Repeat([]byte("value "), 2000)},
	}
}

// sampleKmsgHeader is a producer-shaped batch header.
func sampleKmsgHeader(numRecords int) kmsg.RecordBatch {
	return kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      int32(numRecords - 1),
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_000 + 1<<40,
		ProducerID:           42,
		ProducerEpoch:        3,
		FirstSequence:        100,
	}
}

// kmsgRecordsOf decodes the records of a batch parsed by kmsg, with this
// package's Decompress and kmsg's record decoder.
func kmsgRecordsOf(t testing.TB, kb *kmsg.RecordBatch) []kmsg.Record {
	t.Helper()
	raw, err := Decompress(Codec(kb.Attributes&7), nil, kb.Records, 0)
	if err != nil {
		t.Fatalf("decompress: %v", err)
	}
	var out []kmsg.Record
	for p := 0; p < len(raw); {
		n, next, ok := readVarint(raw, p)
		if !ok || int(n) > len(raw)-next {
			t.Fatalf("bad record length at %d", p)
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[p : next+int(n)]); err != nil {
			t.Fatalf("kmsg record at %d: %v", p, err)
		}
		out = append(out, r)
		p = next + int(n)
	}
	return out
}

// testRecord is a record as a producer hands it to a Builder.
type testRecord struct {
	key, value []byte
	headers    []RecordHeader
	timestamp  int64
}

func buildBatch(t testing.TB, opts BatchOptions, recs []testRecord) []byte {
	t.Helper()
	bld := NewBuilder(opts)
	for _, r := range recs {
		bld.Add(r.key, r.value, r.headers, r.timestamp)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return b
}

// sizedRecords makes n records of valueSize bytes each with compressible but
// not constant values.
func sizedRecords(n, valueSize int) []testRecord {
	recs := make([]testRecord, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte('a' + (i+j*7)%26)
		}
		recs[i] = testRecord{key: fmt.Appendf(nil, "key-%d", i), value: v, timestamp: 1_700_000_000_000 + int64(i)}
	}
	return recs
}

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// sameBytes compares keeping nil (null) and empty distinct.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func checkRecordsEqual(t fataler, got []Record, want []testRecord, baseOffset int64, logAppendTs *int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		wantTs := w.timestamp
		if logAppendTs != nil {
			wantTs = *logAppendTs
		}
		if g.Offset != baseOffset+int64(i) || g.Timestamp != wantTs {
			t.Fatalf("record %d: offset %d ts %d, want %d %d", i, g.Offset, g.Timestamp, baseOffset+int64(i), wantTs)
		}
		if !sameBytes(g.Key, w.key) || !sameBytes(g.Value, w.value) {
			t.Fatalf("record %d: key %q value %q (nil %v %v), want %q %q (nil %v %v)",
				i, g.Key, g.Value, g.Key == nil, g.Value == nil, w.key, w.value, w.key == nil, w.value == nil)
		}
		if len(g.Headers) != len(w.headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.headers))
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.headers[j].Key || !sameBytes(g.Headers[j].Value, w.headers[j].Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, j, g.Headers[j], w.headers[j])
			}
		}
	}
}

// putHeader helpers poke header fields to craft bad batches.
func putInt32(b []byte, off int, v int32) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }

// fixCRC recomputes the CRC after a test edits the CRC'd range on purpose.
func fixCRC(b []byte) []byte { setCRC(b); return b }
