package record

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// genBlob draws a key or value: null, empty, small random, or large and
// compressible (so the codecs' multi-block paths run).
var genBlob = rapid.Custom(func(t *rapid.T) []byte {
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, "small")
	default:
		pattern := rapid.SliceOfN(rapid.Byte(), 1, 16).Draw(t, "pattern")
		n := rapid.IntRange(1000, 150_000).Draw(t, "size")
		return bytes.Repeat(pattern, n/len(pattern)+1)[:n]
	}
})

var genHeader = rapid.Custom(func(t *rapid.T) RecordHeader {
	return RecordHeader{Key: rapid.String().Draw(t, "key"), Value: genBlob.Draw(t, "value")}
})

var genTimestamp = rapid.OneOf(
	rapid.Int64Range(1_600_000_000_000, 1_600_000_100_000),
	rapid.Int64(), // extreme spreads make deltas wrap; decoding must wrap back
)

// Any records under any codec and header options: Build, then Validate as a
// client batch, then Records gives back exactly what was added.
func TestPropertyBuildValidateRecords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		opts := DefaultBatchOptions()
		opts.Codec = rapid.SampledFrom(allCodecs).Draw(t, "codec")
		opts.BaseOffset = rapid.Int64Range(0, 1<<50).Draw(t, "baseOffset")
		if rapid.Bool().Draw(t, "logAppendTime") {
			opts.TimestampType = LogAppendTime
		}
		if rapid.Bool().Draw(t, "idempotent") {
			opts.ProducerID = rapid.Int64Range(0, 1<<40).Draw(t, "producerID")
			opts.ProducerEpoch = rapid.Int16Range(0, 1<<14).Draw(t, "producerEpoch")
			opts.BaseSequence = rapid.Int32Range(0, 1<<30).Draw(t, "baseSequence")
			opts.Transactional = rapid.Bool().Draw(t, "transactional")
		}

		n := rapid.IntRange(1, 40).Draw(t, "records")
		recs := make([]testRecord, n)
		bld := NewBuilder(opts)
		for i := range recs {
			recs[i] = testRecord{
				key:       genBlob.Draw(t, "key"),
				value:     genBlob.Draw(t, "value"),
				headers:   rapid.SliceOfN(genHeader, 0, 4).Draw(t, "headers"),
				timestamp: genTimestamp.Draw(t, "timestamp"),
			}
			bld.Add(recs[i].key, recs[i].value, recs[i].headers, recs[i].timestamp)
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		h, err := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true})
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if h.NumRecords != int32(n) || h.Codec() != opts.Codec || h.BaseOffset != opts.BaseOffset {
			t.Fatalf("header %+v", h)
		}
		got, err := Records(b)
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		var logAppend *int64
		if opts.TimestampType == LogAppendTime {
			logAppend = &h.MaxTimestamp
		}
		checkRecordsEqual(t, got, recs, opts.BaseOffset, logAppend)
	})
}
