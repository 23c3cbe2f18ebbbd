package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawBatch assembles a batch around body with a correct length and CRC, so a
// test can hand-craft what is inside.
func rawBatch(h Header, body []byte) []byte {
	h.Magic = Magic
	b := appendHeader(nil, &h)
	b = append(b, body...)
	if err := finishBatch(b); err != nil {
		panic(err)
	}
	return b
}

// edit copies b, applies f, and optionally fixes the CRC, so each table case
// damages exactly one thing.
func edit(b []byte, crc bool, f func(b []byte) []byte) []byte {
	c := f(append([]byte(nil), b...))
	if crc {
		fixCRC(c)
	}
	return c
}

func kmsgDeltaBatch(t *testing.T, lastOffsetDelta int32, deltas ...int32) []byte {
	recs := make([]kmsg.Record, len(deltas))
	for i, d := range deltas {
		recs[i] = kmsg.Record{OffsetDelta: d, Value: []byte("v")}
	}
	kh := sampleKmsgHeader(len(deltas))
	kh.LastOffsetDelta = lastOffsetDelta
	return kmsgBatch(t, CodecNone, kh, recs)
}

func TestValidateRejectsBadInput(t *testing.T) {
	good := buildBatch(t, DefaultBatchOptions(), sizedRecords(3, 10))
	if _, err := Validate(good, ValidateOptions{Client: true}); err != nil {
		t.Fatalf("base batch invalid: %v", err)
	}
	firstRecordLen := int(good[HeaderSize]) / 2 // one-byte zigzag varint

	bomb := func(c Codec) []byte {
		opts := DefaultBatchOptions()
		opts.Codec = c
		return buildBatch(t, opts, []testRecord{{value: make([]byte, 2<<20)}})
	}
	garbageBody := func(c Codec) []byte {
		return rawBatch(Header{NumRecords: 1, Attributes: int16(c), ProducerID: -1}, []byte("certainly not a compressed blob, just text"))
	}

	type tc struct {
		name string
		b    []byte
		opts ValidateOptions
		want error
	}
	cases := []tc{
		{"empty input", nil, ValidateOptions{}, ErrCorruptLength},
		{"16 bytes", good[:16], ValidateOptions{}, ErrCorruptLength},
		{"truncated header", good[:HeaderSize-1], ValidateOptions{}, ErrCorruptLength},
		{"truncated batch", good[:len(good)-1], ValidateOptions{}, ErrCorruptLength},
		{"bad crc", edit(good, false, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ValidateOptions{}, ErrCorruptCRC},
		{"crc field flipped", edit(good, false, func(b []byte) []byte { b[offCRC] ^= 0x80; return b }), ValidateOptions{}, ErrCorruptCRC},
		{"magic 1", edit(good, false, func(b []byte) []byte { b[offMagic] = 1; return b }), ValidateOptions{}, ErrInvalidMagic},
		{"magic 0 short message", edit(good[:30], false, func(b []byte) []byte { b[offMagic] = 0; return b }), ValidateOptions{}, ErrInvalidMagic},
		{"length longer than b", edit(good, false, func(b []byte) []byte {
			putInt32(b, offBatchLength, int32(len(b)-12+10))
			return b
		}), ValidateOptions{}, ErrCorruptLength},
		{"length shorter than b", edit(good, false, func(b []byte) []byte {
			putInt32(b, offBatchLength, int32(len(b)-12-10))
			return b
		}), ValidateOptions{}, ErrCorruptLength},
		{"length below header", edit(good, false, func(b []byte) []byte { putInt32(b, offBatchLength, 48); return b }), ValidateOptions{}, ErrCorruptLength},
		{"length negative", edit(good, false, func(b []byte) []byte { putInt32(b, offBatchLength, -1); return b }), ValidateOptions{}, ErrCorruptLength},
		{"count higher", edit(good, true, func(b []byte) []byte { putInt32(b, offNumRecords, 4); return b }), ValidateOptions{}, ErrRecordCountMismatch},
		{"count lower", edit(good, true, func(b []byte) []byte { putInt32(b, offNumRecords, 2); return b }), ValidateOptions{}, ErrRecordCountMismatch},
		{"count negative", edit(good, true, func(b []byte) []byte { putInt32(b, offNumRecords, -1); return b }), ValidateOptions{}, ErrRecordCountMismatch},
		{"record length too long", edit(good, true, func(b []byte) []byte { b[HeaderSize] = byte(2 * (firstRecordLen + 1)); return b }), ValidateOptions{}, ErrCorruptRecord},
		{"record length too short", edit(good, true, func(b []byte) []byte { b[HeaderSize] = byte(2 * (firstRecordLen - 1)); return b }), ValidateOptions{}, ErrCorruptRecord},
		{"record length past body", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{100, 0, 0, 0, 1, 1, 0}), ValidateOptions{}, ErrCorruptRecord},
		{"record length negative", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{1, 0, 0, 0, 1, 1, 0}), ValidateOptions{}, ErrCorruptRecord},
		{"truncated length varint", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{0x80}), ValidateOptions{}, ErrCorruptRecord},
		{"truncated field varint", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{12, 0, 0x80, 0x80, 0x80, 0x80, 0x80}), ValidateOptions{}, ErrCorruptRecord},
		{"key longer than record", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{12, 0, 0, 0, 20, 'k', 'k'}), ValidateOptions{}, ErrCorruptRecord},
		{"null header key", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{16, 0, 0, 0, 1, 1, 2, 1, 0}), ValidateOptions{}, ErrCorruptRecord},
		{"header count past record", rawBatch(Header{NumRecords: 1, ProducerID: -1}, []byte{12, 0, 0, 0, 1, 1, 20}), ValidateOptions{}, ErrCorruptRecord},
		{"trailing garbage", edit(good, true, func(b []byte) []byte {
			b = append(b, 0xff, 0xff)
			putInt32(b, offBatchLength, int32(len(b)-12))
			return b
		}), ValidateOptions{}, ErrCorruptRecord},
		{"oversized", good, ValidateOptions{MaxBatchBytes: len(good) - 1}, ErrBatchTooLarge},
		{"codec 5", edit(good, true, func(b []byte) []byte { b[offAttributes+1] |= 5; return b }), ValidateOptions{}, ErrUnsupportedCodec},
		{"codec 6", edit(good, true, func(b []byte) []byte { b[offAttributes+1] |= 6; return b }), ValidateOptions{}, ErrUnsupportedCodec},
		{"codec 7", edit(good, true, func(b []byte) []byte { b[offAttributes+1] |= 7; return b }), ValidateOptions{}, ErrUnsupportedCodec},
		{"negative lastOffsetDelta", edit(good, true, func(b []byte) []byte { putInt32(b, offLastOffsetDelta, -1); return b }), ValidateOptions{}, ErrCorruptRecord},
		{"offset deltas backwards", kmsgDeltaBatch(t, 2, 0, 2, 1), ValidateOptions{}, ErrCorruptRecord},
		{"offset delta repeated", kmsgDeltaBatch(t, 2, 0, 0, 1), ValidateOptions{}, ErrCorruptRecord},
		{"offset delta past lastOffsetDelta", kmsgDeltaBatch(t, 2, 0, 1, 3), ValidateOptions{}, ErrCorruptRecord},

		// Client rules.
		{"client: no records", EmptyBatch(nil, Header{LastOffsetDelta: 0, ProducerID: -1}), ValidateOptions{Client: true}, ErrInvalidRecordBatch},
		{"client: lastOffsetDelta mismatch", edit(good, true, func(b []byte) []byte { putInt32(b, offLastOffsetDelta, 5); return b }), ValidateOptions{Client: true}, ErrInvalidRecordBatch},
		{"client: sequential deltas", kmsgDeltaBatch(t, 2, 0, 1, 2), ValidateOptions{Client: true}, nil},
		{"client: offset delta not i", kmsgDeltaBatch(t, 2, 0, 1, 3), ValidateOptions{Client: true}, ErrInvalidRecordBatch},
		{"client: control batch", edit(good, true, func(b []byte) []byte { b[offAttributes+1] |= attrControl; return b }), ValidateOptions{Client: true}, ErrInvalidRecordBatch},
		{"client: transactional without producer id", edit(good, true, func(b []byte) []byte { b[offAttributes+1] |= attrTransactional; return b }), ValidateOptions{Client: true}, ErrInvalidRecordBatch},
	}
	for _, c := range allCodecs[1:] {
		cases = append(cases,
			tc{"corrupt blob " + c.String(), garbageBody(c), ValidateOptions{VerifyCompressedRecords: true}, ErrCorruptRecord},
			// Without verification the CRC is all that covers a compressed body.
			tc{"corrupt blob unverified " + c.String(), garbageBody(c), ValidateOptions{}, nil},
			tc{"bomb " + c.String(), bomb(c), ValidateOptions{VerifyCompressedRecords: true, MaxDecompressedBytes: 1 << 20}, ErrDecompressedTooLarge},
			tc{"bomb under limit " + c.String(), bomb(c), ValidateOptions{VerifyCompressedRecords: true, MaxDecompressedBytes: 3 << 20}, nil},
		)
	}

	sentinels := []error{ErrCorruptLength, ErrInvalidMagic, ErrCorruptCRC, ErrRecordCountMismatch, ErrCorruptRecord,
		ErrBatchTooLarge, ErrUnsupportedCodec, ErrDecompressedTooLarge, ErrInvalidRecordBatch}
	corruption := map[error]bool{ErrCorruptLength: true, ErrInvalidMagic: true, ErrCorruptCRC: true, ErrRecordCountMismatch: true, ErrCorruptRecord: true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Validate(c.b, c.opts)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v, want success", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate: %v, want %v", err, c.want)
			}
			// Exactly one sentinel, so callers can map errors to codes.
			for _, s := range sentinels {
				if s != c.want && errors.Is(err, s) {
					t.Fatalf("error %v also matches %v", err, s)
				}
			}
			if IsCorruption(err) != corruption[c.want] {
				t.Fatalf("IsCorruption(%v) = %v", err, IsCorruption(err))
			}
		})
	}
}

func TestValidateSizeLimitIsInclusive(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), sizedRecords(2, 10))
	if _, err := Validate(b, ValidateOptions{MaxBatchBytes: len(b)}); err != nil {
		t.Fatalf("batch exactly at the limit: %v", err)
	}
}

func TestParseHeader(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), sizedRecords(2, 10))
	two := append(append([]byte(nil), b...), b...)
	// Stepping through a log: the header of the first batch is parsed from
	// a buffer that holds more.
	h, err := ParseHeader(two)
	if err != nil || h.Size() != len(b) {
		t.Fatalf("ParseHeader: %+v %v", h, err)
	}
	h2, err := ParseHeader(two[h.Size():])
	if err != nil || h2 != h {
		t.Fatalf("second header %+v %v", h2, err)
	}
	// Only the header is needed, not the body.
	if _, err := ParseHeader(b[:HeaderSize]); err != nil {
		t.Fatalf("header only: %v", err)
	}
	maxLen := append([]byte(nil), b[:HeaderSize]...)
	putInt32(maxLen, offBatchLength, 1<<31-1)
	if _, err := ParseHeader(maxLen); !errors.Is(err, ErrCorruptLength) {
		t.Fatalf("batchLength MaxInt32: %v, want ErrCorruptLength", err)
	}
	putInt32(maxLen, offBatchLength, 1<<31-1-12)
	if h, err := ParseHeader(maxLen); err != nil || h.Size() != 1<<31-1 {
		t.Fatalf("largest batchLength: %v", err)
	}
}

func TestSettersKeepCRCValid(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		opts := DefaultBatchOptions()
		opts.Codec = c
		b := buildBatch(t, opts, sizedRecords(4, 100))
		crc := append([]byte(nil), b[offCRC:offCRC+4]...)
		SetBaseOffset(b, 1<<40)
		SetPartitionLeaderEpoch(b, 77)
		if !bytes.Equal(crc, b[offCRC:offCRC+4]) {
			t.Fatal("setters outside the CRC'd range changed the CRC")
		}
		h, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil || h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 77 || h.LastOffset() != 1<<40+3 {
			t.Fatalf("after setters: %+v %v", h, err)
		}
		SetLogAppendTime(b, 12345)
		h, err = Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil || h.MaxTimestamp != 12345 || h.TimestampType() != LogAppendTime || h.BaseOffset != 1<<40 {
			t.Fatalf("after SetLogAppendTime: %+v %v", h, err)
		}
		recs, err := Records(b)
		if err != nil || recs[3].Offset != 1<<40+3 || recs[3].Timestamp != 12345 {
			t.Fatalf("records after setters: %v", err)
		}
	})
}

// The produce path validates every batch; it must cost no garbage.
func TestValidateDoesNotAllocate(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), append(sizedRecords(16, 1000),
		testRecord{key: []byte("k"), headers: []RecordHeader{{Key: "h1", Value: []byte("v")}, {Key: "h2"}}}))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b, ValidateOptions{Client: true, MaxBatchBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseHeader(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Validate+ParseHeader allocate %v times per run", allocs)
	}
}

// ForEachRecord allocates per call, never per record, unless records carry
// headers (whose keys become strings).
func TestForEachRecordAllocations(t *testing.T) {
	small := buildBatch(t, DefaultBatchOptions(), sizedRecords(2, 100))
	large := buildBatch(t, DefaultBatchOptions(), sizedRecords(200, 100))
	count := func(b []byte) float64 {
		return testing.AllocsPerRun(50, func() {
			if err := ForEachRecord(b, func(*Record) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := count(small), count(large); a != b || b > 2 {
		t.Fatalf("ForEachRecord allocations: %v for 2 records, %v for 200", a, b)
	}
}

// Storage may hold a batch in a buffer with more bytes after it; the setters
// must not let those bytes into the CRC.
func TestSetLogAppendTimeIgnoresTrailingBytes(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), sizedRecords(3, 10))
	size := len(b)
	buf := append(b, "next batch bytes"...)
	SetLogAppendTime(buf, 77)
	if h, err := Validate(buf[:size], ValidateOptions{Client: true}); err != nil || h.MaxTimestamp != 77 {
		t.Fatalf("after SetLogAppendTime with trailing bytes: %+v %v", h, err)
	}
	if string(buf[size:]) != "next batch bytes" {
		t.Fatal("trailing bytes changed")
	}
}
