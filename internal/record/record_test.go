package record

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batches that franz-go's kmsg encodes must validate as a producer's batch
// and iterate to exactly the records kmsg was given, for every codec.
func TestKmsgBatchValidatesAndIterates(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		recs := sampleKmsgRecords()
		kh := sampleKmsgHeader(len(recs))
		b := kmsgBatch(t, c, kh, recs)

		h, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if h.Codec() != c || h.NumRecords != int32(len(recs)) || h.ProducerID != 42 ||
			h.ProducerEpoch != 3 || h.BaseSequence != 100 || h.FirstTimestamp != kh.FirstTimestamp ||
			h.MaxTimestamp != kh.MaxTimestamp || h.LastOffsetDelta != int32(len(recs)-1) ||
			h.PartitionLeaderEpoch != -1 || h.Size() != len(b) {
			t.Fatalf("header %+v does not match kmsg's %+v", h, kh)
		}

		var n int
		err = ForEachRecord(b, func(r *Record) error {
			k := recs[n]
			if r.Offset != int64(k.OffsetDelta) || r.Timestamp != kh.FirstTimestamp+k.TimestampDelta64 {
				t.Errorf("record %d: offset %d ts %d", n, r.Offset, r.Timestamp)
			}
			if !sameBytes(r.Key, k.Key) || !sameBytes(r.Value, k.Value) {
				t.Errorf("record %d: key %q value %q", n, r.Key, r.Value)
			}
			if len(r.Headers) != len(k.Headers) {
				t.Fatalf("record %d: %d headers, want %d", n, len(r.Headers), len(k.Headers))
			}
			for i, hdr := range r.Headers {
				if hdr.Key != k.Headers[i].Key || !sameBytes(hdr.Value, k.Headers[i].Value) {
					t.Errorf("record %d header %d: %+v", n, i, hdr)
				}
			}
			n++
			return nil
		})
		if err != nil || n != len(recs) {
			t.Fatalf("ForEachRecord: %d records, err %v", n, err)
		}
	})
}

// Batches the Builder makes must decode with kmsg field for field, with a CRC
// that kmsg's bytes agree with.
func TestBuilderBatchDecodesWithKmsg(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		opts := DefaultBatchOptions()
		opts.Codec = c
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 2, 30
		opts.Transactional = true
		opts.PartitionLeaderEpoch = 9
		opts.BaseOffset = 1000
		recs := []testRecord{
			{key: []byte("a"), value: []byte("1"), timestamp: 50},
			{key: nil, value: nil, timestamp: 40, headers: []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n"}}},
			{key: []byte{}, value: bytes.Repeat([]byte("z"), 5000), timestamp: 60},
		}
		b := buildBatch(t, opts, recs)

		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg ReadFrom: %v", err)
		}
		if kb.FirstOffset != 1000 || kb.PartitionLeaderEpoch != 9 || kb.Magic != 2 ||
			kb.Attributes != int16(c)|attrTransactional || kb.LastOffsetDelta != 2 ||
			kb.FirstTimestamp != 40 || kb.MaxTimestamp != 60 || kb.ProducerID != 7 ||
			kb.ProducerEpoch != 2 || kb.FirstSequence != 30 || kb.NumRecords != 3 ||
			int(kb.Length) != len(b)-12 {
			t.Fatalf("kmsg header %+v", kb)
		}
		if want := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(kb.CRC) != want {
			t.Fatalf("crc %#x, want %#x", uint32(kb.CRC), want)
		}
		got := kmsgRecordsOf(t, &kb)
		if len(got) != len(recs) {
			t.Fatalf("kmsg decoded %d records", len(got))
		}
		for i, k := range got {
			w := recs[i]
			if k.OffsetDelta != int32(i) || kb.FirstTimestamp+k.TimestampDelta64 != w.timestamp ||
				!sameBytes(k.Key, w.key) || !sameBytes(k.Value, w.value) || len(k.Headers) != len(w.headers) {
				t.Fatalf("record %d: kmsg %+v, want %+v", i, k, w)
			}
			for j, hdr := range k.Headers {
				if hdr.Key != w.headers[j].Key || !sameBytes(hdr.Value, w.headers[j].Value) {
					t.Fatalf("record %d header %d: %+v", i, j, hdr)
				}
			}
		}
	})
}

func TestRecordsAreCopies(t *testing.T) {
	recs := []testRecord{{key: []byte("key"), value: []byte("value"), headers: []RecordHeader{{Key: "h", Value: []byte("hv")}}, timestamp: 1}}
	b := buildBatch(t, DefaultBatchOptions(), recs)
	got, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xff
	}
	checkRecordsEqual(t, got, recs, 0, nil)
}

func TestForEachRecordStopsOnCallbackError(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), sizedRecords(5, 10))
	stop := errors.New("stop")
	var seen int
	err := ForEachRecord(b, func(r *Record) error {
		seen++
		if seen == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 2 {
		t.Fatalf("err %v after %d records, want stop after 2", err, seen)
	}
}

func TestForEachRecordRejectsDamage(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), sizedRecords(3, 10))
	// A lying record count is caught even though ForEachRecord skips the CRC.
	putInt32(b, offNumRecords, 4)
	if err := ForEachRecord(b, func(*Record) error { return nil }); !errors.Is(err, ErrRecordCountMismatch) {
		t.Fatalf("err %v, want ErrRecordCountMismatch", err)
	}
	if err := ForEachRecord(b[:40], func(*Record) error { return nil }); !errors.Is(err, ErrCorruptLength) {
		t.Fatalf("err %v, want ErrCorruptLength", err)
	}
	if _, err := Records(b[:len(b)-1]); !errors.Is(err, ErrCorruptLength) {
		t.Fatalf("err %v, want ErrCorruptLength", err)
	}
}

func TestLogAppendTimeRecords(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		opts := DefaultBatchOptions()
		opts.Codec = c
		recs := sizedRecords(3, 20)
		b := buildBatch(t, opts, recs)
		const appendTime = 1_800_000_000_000
		SetLogAppendTime(b, appendTime)
		h, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil {
			t.Fatalf("Validate after SetLogAppendTime: %v", err)
		}
		if h.TimestampType() != LogAppendTime || h.MaxTimestamp != appendTime || h.FirstTimestamp != recs[0].timestamp {
			t.Fatalf("header %+v", h)
		}
		got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		ts := int64(appendTime)
		checkRecordsEqual(t, got, recs, 0, &ts)
	})
}

func TestControlRecords(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		opts := DefaultBatchOptions()
		opts.Control, opts.Transactional = true, true
		opts.ProducerID, opts.ProducerEpoch = 5, 1
		bld := NewBuilder(opts)
		bld.Add(ControlRecordKey(typ), EndTxnMarkerValue(17), nil, 100)
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		h, err := Validate(b, ValidateOptions{})
		if err != nil || !h.IsControl() || !h.IsTransactional() {
			t.Fatalf("control batch: %+v %v", h, err)
		}
		if _, err := Validate(b, ValidateOptions{Client: true}); !errors.Is(err, ErrInvalidRecordBatch) {
			t.Fatalf("client control batch: %v, want ErrInvalidRecordBatch", err)
		}
		var got ControlType = -1
		err = ForEachRecord(b, func(r *Record) error {
			var err error
			got, err = ParseControlRecord(r)
			return err
		})
		if err != nil || got != typ {
			t.Fatalf("control type %v err %v, want %v", got, err, typ)
		}
		// Cross-check the key layout with kmsg's EndTxnMarker value schema.
		var v kmsg.EndTxnMarker
		if err := v.ReadFrom(EndTxnMarkerValue(17)); err != nil || v.CoordinatorEpoch != 17 || v.Version != 0 {
			t.Fatalf("EndTxnMarker %+v %v", v, err)
		}
	}
	for _, bad := range [][]byte{nil, {0, 0, 1}, {0x80, 0, 0, 1}} {
		if _, err := ParseControlRecord(&Record{Key: bad}); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("key %v: %v, want ErrCorruptRecord", bad, err)
		}
	}
	if typ, err := ParseControlRecord(&Record{Key: []byte{0, 1, 0, 2}}); err != nil || typ != 2 {
		t.Fatalf("newer version, other type: %v %v", typ, err)
	}
}

func TestHeaderAccessors(t *testing.T) {
	h := Header{BaseOffset: 100, LastOffsetDelta: 9, BatchLength: 200, ProducerID: -1,
		Attributes: int16(CodecZstd) | attrTimestampType | attrTransactional | attrControl | attrHasDeleteHorizon}
	if h.Size() != 212 || h.LastOffset() != 109 || h.Codec() != CodecZstd || h.TimestampType() != LogAppendTime ||
		!h.IsTransactional() || !h.IsControl() || !h.HasDeleteHorizon() || h.HasProducerID() {
		t.Fatalf("accessors of %+v wrong", h)
	}
	h.Attributes, h.ProducerID = int16(CodecGzip), 0
	if h.Codec() != CodecGzip || h.TimestampType() != CreateTime || h.IsTransactional() || h.IsControl() ||
		h.HasDeleteHorizon() || !h.HasProducerID() {
		t.Fatalf("accessors of %+v wrong", h)
	}
	for c, want := range map[Codec]string{CodecNone: "none", CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd", 6: "codec(6)"} {
		if c.String() != want {
			t.Errorf("Codec(%d).String() = %q, want %q", c, c.String(), want)
		}
	}
	if CreateTime.String() != "CreateTime" || LogAppendTime.String() != "LogAppendTime" || ControlCommit.String() != "COMMIT" {
		t.Error("String methods")
	}
}

func TestVarints(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, -(1 << 31), 1<<31 - 1, 1 << 62, -1 << 63, 1<<63 - 1} {
		b := appendVarlong(nil, v)
		if len(b) != varintLen(v) {
			t.Fatalf("varintLen(%d) = %d, encoded %d", v, varintLen(v), len(b))
		}
		got, n, ok := readVarlong(b, 0)
		if !ok || got != v || n != len(b) {
			t.Fatalf("varlong %d: got %d n %d ok %v", v, got, n, ok)
		}
		if v == int64(int32(v)) {
			got, n, ok := readVarint(b, 0)
			if !ok || int64(got) != v || n != len(b) {
				t.Fatalf("varint %d: got %d n %d ok %v", v, got, n, ok)
			}
		}
	}
	bad := [][]byte{
		{},                                   // empty
		{0x80},                               // truncated
		{0x80, 0x80, 0x80, 0x80, 0x80},       // sixth byte needed
		{0xff, 0xff, 0xff, 0xff, 0x1f},       // 5th byte carries bits past 32
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // too long
	}
	for _, b := range bad {
		if _, _, ok := readVarint(b, 0); ok {
			t.Errorf("readVarint(%x) accepted", b)
		}
	}
	if _, _, ok := readVarlong([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 0); ok {
		t.Error("varlong with bits past 64 accepted")
	}
}

// The Java client frames snappy with xerial's chunked format; such a batch
// validates and iterates like any other.
func TestXerialSnappyBatch(t *testing.T) {
	recs := sampleKmsgRecords()
	var raw []byte
	for _, r := range recs {
		raw = append(raw, kmsgRecordBytes(r)...)
	}
	kh := sampleKmsgHeader(len(recs))
	kh.Attributes = int16(CodecSnappy)
	kh.NumRecords = int32(len(recs))
	// Chunks of at most 4 KiB, so the 12 KiB value spans several.
	body := xerialFrame()
	for len(raw) > 0 {
		n := min(len(raw), 4096)
		body = append(body[:len(body):len(body)], xerialFrame(raw[:n])[16:]...)
		raw = raw[n:]
	}
	kh.Records = body
	kh.Magic = 2
	kh.Length = int32(HeaderSize - 12 + len(body))
	b := fixCRC(kh.AppendTo(nil))

	if _, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got, err := Records(b)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("Records: %d, %v", len(got), err)
	}
	for i, r := range got {
		if !sameBytes(r.Value, recs[i].Value) || !sameBytes(r.Key, recs[i].Key) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// A marker batch reads back as what it was made from; other control
// records and short values are refused.
func TestEndTxnMarkerBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b, err := EndTxnMarkerBatch(42, 7, 19, commit, 1234)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(b)
		if err != nil || !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.NumRecords != 1 {
			t.Fatalf("header %+v, %v", h, err)
		}
		recs, err := Records(b)
		if err != nil || len(recs) != 1 {
			t.Fatalf("records %v, %v", recs, err)
		}
		typ, ce, err := ParseEndTxnMarker(&recs[0])
		if want := map[bool]ControlType{true: ControlCommit, false: ControlAbort}[commit]; err != nil || typ != want || ce != 19 || recs[0].Timestamp != 1234 {
			t.Fatalf("marker %v %d %v, want %v 19", typ, ce, err, want)
		}
	}
	for _, r := range []Record{
		{Key: ControlRecordKey(ControlType(3)), Value: EndTxnMarkerValue(1)}, // a leader-change record
		{Key: ControlRecordKey(ControlCommit), Value: []byte{0, 0, 1}},       // cut short
		{Key: ControlRecordKey(ControlCommit), Value: []byte{0xff, 0xff, 0, 0, 0, 1}},
		{Key: []byte{0}, Value: EndTxnMarkerValue(1)},
	} {
		if _, _, err := ParseEndTxnMarker(&r); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("ParseEndTxnMarker(key %x value %x): %v, want ErrCorruptRecord", r.Key, r.Value, err)
		}
	}
}
