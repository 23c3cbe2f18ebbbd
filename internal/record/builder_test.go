package record

import (
	"bytes"
	"errors"
	"testing"
)

func TestDefaultBatchOptions(t *testing.T) {
	o := DefaultBatchOptions()
	if o.ProducerID != -1 || o.ProducerEpoch != -1 || o.BaseSequence != -1 || o.PartitionLeaderEpoch != -1 ||
		o.Codec != CodecNone || o.TimestampType != CreateTime || o.Transactional || o.Control || o.BaseOffset != 0 {
		t.Fatalf("DefaultBatchOptions() = %+v", o)
	}
	b := buildBatch(t, o, sizedRecords(1, 1))
	h, err := Validate(b, ValidateOptions{Client: true})
	if err != nil || h.HasProducerID() || h.PartitionLeaderEpoch != -1 || h.BaseSequence != -1 || h.ProducerEpoch != -1 {
		t.Fatalf("default batch %+v %v", h, err)
	}
}

func TestBuilderHeaderFields(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		opts := BatchOptions{Codec: c, TimestampType: LogAppendTime, ProducerID: 11, ProducerEpoch: 4,
			BaseSequence: 99, Transactional: true, PartitionLeaderEpoch: 6, BaseOffset: 1 << 33}
		// Out of order timestamps: first is the smallest, max the largest.
		recs := []testRecord{{value: []byte("a"), timestamp: 500}, {value: []byte("b"), timestamp: 100}, {value: []byte("c"), timestamp: 900}}
		b := buildBatch(t, opts, recs)
		h, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Header{BaseOffset: 1 << 33, BatchLength: int32(len(b) - 12), PartitionLeaderEpoch: 6, Magic: 2, CRC: computeCRC(b),
			Attributes: int16(c) | attrTimestampType | attrTransactional, LastOffsetDelta: 2, FirstTimestamp: 100,
			MaxTimestamp: 900, ProducerID: 11, ProducerEpoch: 4, BaseSequence: 99, NumRecords: 3}
		if h != want {
			t.Fatalf("header\n got %+v\nwant %+v", h, want)
		}
		// CreateTime keeps each record's own timestamp.
		opts.TimestampType = CreateTime
		got, err := Records(buildBatch(t, opts, recs))
		if err != nil {
			t.Fatal(err)
		}
		checkRecordsEqual(t, got, recs, 1<<33, nil)
	})
}

func TestBuilderErrors(t *testing.T) {
	if _, err := NewBuilder(DefaultBatchOptions()).Build(); !errors.Is(err, ErrInvalidRecordBatch) {
		t.Fatalf("empty Build: %v, want ErrInvalidRecordBatch", err)
	}
	opts := DefaultBatchOptions()
	opts.Codec = 6
	bld := NewBuilder(opts)
	bld.Add(nil, []byte("v"), nil, 0)
	if _, err := bld.Build(); !errors.Is(err, ErrUnsupportedCodec) {
		t.Fatalf("codec 6: %v, want ErrUnsupportedCodec", err)
	}
}

func TestBuilderCopiesInputAndResets(t *testing.T) {
	bld := NewBuilder(DefaultBatchOptions())
	key, value := []byte("key"), []byte("value")
	hdrs := []RecordHeader{{Key: "h", Value: []byte("hv")}}
	bld.Add(key, value, hdrs, 10)
	copy(key, "XXX")
	copy(value, "YYYYY")
	hdrs[0].Value[0] = 'Z'
	if bld.Len() != 1 {
		t.Fatalf("Len %d", bld.Len())
	}
	first, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	again, err := bld.Build()
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("second Build differs: %v", err)
	}
	want := []testRecord{{key: []byte("key"), value: []byte("value"), headers: []RecordHeader{{Key: "h", Value: []byte("hv")}}, timestamp: 10}}
	got, err := Records(first)
	if err != nil {
		t.Fatal(err)
	}
	checkRecordsEqual(t, got, want, 0, nil)

	appended, err := bld.AppendBatch([]byte("prefix"))
	if err != nil || !bytes.Equal(appended, append([]byte("prefix"), first...)) {
		t.Fatalf("AppendBatch: %v", err)
	}

	snapshot := append([]byte(nil), first...)
	opts := DefaultBatchOptions()
	opts.Codec = CodecZstd
	bld.Reset(opts)
	if bld.Len() != 0 {
		t.Fatalf("Len after Reset %d", bld.Len())
	}
	bld.Add(nil, nil, nil, 20)
	second, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, snapshot) {
		t.Fatal("Reset and Build changed an earlier batch")
	}
	got, err = Records(second)
	if err != nil {
		t.Fatal(err)
	}
	checkRecordsEqual(t, got, []testRecord{{timestamp: 20}}, 0, nil)
}

func TestBuilderEstimatedSizeBoundsBatch(t *testing.T) {
	bld := NewBuilder(DefaultBatchOptions())
	for _, r := range sizedRecords(100, 300) {
		bld.Add(r.key, r.value, []RecordHeader{{Key: "trace", Value: r.key}}, r.timestamp)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if est := bld.EstimatedSize(); est < len(b) || est > 2*len(b) {
		t.Fatalf("EstimatedSize %d for a %d-byte batch", est, len(b))
	}
}
