package record

import (
	"fmt"
	"math"
)

// BatchOptions are the header fields of a batch a Builder makes. The zero
// value is not a sensible batch (producer id 0 claims an idempotent producer
// that does not exist): start from DefaultBatchOptions and change what
// differs.
type BatchOptions struct {
	Codec                Codec
	TimestampType        TimestampType
	ProducerID           int64 // -1 when not idempotent
	ProducerEpoch        int16 // -1
	BaseSequence         int32 // -1
	Transactional        bool
	Control              bool
	PartitionLeaderEpoch int32 // -1 when unknown
	BaseOffset           int64
}

// DefaultBatchOptions is an uncompressed, non-idempotent CreateTime batch at
// offset 0 with no leader epoch: what a plain producer sends.
func DefaultBatchOptions() BatchOptions {
	return BatchOptions{
		Codec:                CodecNone,
		TimestampType:        CreateTime,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		PartitionLeaderEpoch: -1,
	}
}

// Builder makes batches for Fjord's own producers: the offsets and
// transaction-state topics, the HTTP API, tests and benchmarks. Records get
// offset deltas 0, 1, 2, ... in the order added.
//
// A Builder copies what Add is given, so callers may reuse their buffers, and
// keeps its memory across Reset: one Builder per producing goroutine makes
// batch after batch without garbage beyond the batches themselves. It is not
// safe for concurrent use.
type Builder struct {
	opts    BatchOptions
	arena   []byte // keys, values and header keys and values of the records added
	records []pendingRecord
	headers []pendingHeader
	raw     []byte // encoded records awaiting compression
}

// span locates bytes in the arena; n == -1 is null.
type span struct{ off, n int }

type pendingRecord struct {
	timestamp  int64
	key, value span
	// headers[hstart:hend] are this record's.
	hstart, hend int
}

type pendingHeader struct{ key, value span }

// NewBuilder returns an empty Builder for batches with opts (start from
// DefaultBatchOptions).
func NewBuilder(opts BatchOptions) *Builder { return &Builder{opts: opts} }

// Reset empties the builder and sets the options for the next batch, keeping
// its buffers.
func (b *Builder) Reset(opts BatchOptions) {
	b.opts = opts
	b.arena = b.arena[:0]
	b.records = b.records[:0]
	b.headers = b.headers[:0]
	b.raw = b.raw[:0]
}

// Len is the number of records added since the last Reset.
func (b *Builder) Len() int { return len(b.records) }

// Add appends a record with the next offset delta. A nil key or value is
// null (a nil value is a tombstone); an empty non-nil one is empty.
func (b *Builder) Add(key, value []byte, headers []RecordHeader, timestamp int64) {
	r := pendingRecord{
		timestamp: timestamp,
		key:       b.store(key, key == nil),
		value:     b.store(value, value == nil),
		hstart:    len(b.headers),
	}
	for _, h := range headers {
		b.headers = append(b.headers, pendingHeader{
			key:   b.storeString(h.Key),
			value: b.store(h.Value, h.Value == nil),
		})
	}
	r.hend = len(b.headers)
	b.records = append(b.records, r)
}

func (b *Builder) store(p []byte, null bool) span {
	if null {
		return span{n: -1}
	}
	s := span{off: len(b.arena), n: len(p)}
	b.arena = append(b.arena, p...)
	return s
}

func (b *Builder) storeString(p string) span {
	s := span{off: len(b.arena), n: len(p)}
	b.arena = append(b.arena, p...)
	return s
}

// EstimatedSize is an upper bound on the uncompressed size of the batch Build
// would make now, for callers that cap batches by bytes.
func (b *Builder) EstimatedSize() int {
	// Worst case per record: 5-byte length, attributes, 10-byte timestamp
	// delta, four 5-byte varints; per header two 5-byte lengths.
	return HeaderSize + len(b.arena) + len(b.records)*(5+1+10+4*5) + len(b.headers)*10
}

// Build encodes the records added so far into a new batch and returns it; the
// Builder keeps its records until Reset. FirstTimestamp is the smallest
// record timestamp and MaxTimestamp the largest, record timestamp deltas are
// from the smallest, and the CRC is set. A batch with records that is not a
// control batch passes Validate with Client set. Building with no records is
// ErrInvalidRecordBatch: use EmptyBatch for the zero-record batch.
func (b *Builder) Build() ([]byte, error) {
	size := b.EstimatedSize()
	if b.opts.Codec != CodecNone {
		size /= 4 // a guess; appending grows it
	}
	return b.AppendBatch(make([]byte, 0, size))
}

// AppendBatch is Build appending the batch to dst, for callers that recycle
// batch buffers (benchmarks, a producer that copies the batch onward).
func (b *Builder) AppendBatch(dst []byte) ([]byte, error) {
	n := len(b.records)
	if n == 0 {
		return nil, fmt.Errorf("%w: no records to build", ErrInvalidRecordBatch)
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d records", ErrBatchTooLarge, n)
	}
	if !b.opts.Codec.valid() {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, b.opts.Codec)
	}
	minTs, maxTs := b.records[0].timestamp, b.records[0].timestamp
	for _, r := range b.records[1:] {
		minTs = min(minTs, r.timestamp)
		maxTs = max(maxTs, r.timestamp)
	}

	attrs := int16(b.opts.Codec) & attrCodecMask
	if b.opts.TimestampType == LogAppendTime {
		attrs |= attrTimestampType
	}
	if b.opts.Transactional {
		attrs |= attrTransactional
	}
	if b.opts.Control {
		attrs |= attrControl
	}
	h := Header{
		BaseOffset:           b.opts.BaseOffset,
		PartitionLeaderEpoch: b.opts.PartitionLeaderEpoch,
		Magic:                Magic,
		Attributes:           attrs,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       minTs,
		MaxTimestamp:         maxTs,
		ProducerID:           b.opts.ProducerID,
		ProducerEpoch:        b.opts.ProducerEpoch,
		BaseSequence:         b.opts.BaseSequence,
		NumRecords:           int32(n),
	}

	start := len(dst)
	dst = appendHeader(dst, &h)
	if b.opts.Codec == CodecNone {
		// Encode straight behind the header: no intermediate copy.
		dst = b.appendRecords(dst, minTs)
	} else {
		b.raw = b.appendRecords(b.raw[:0], minTs)
		var err error
		if dst, err = Compress(b.opts.Codec, dst, b.raw); err != nil {
			return nil, err
		}
	}
	if err := finishBatch(dst[start:]); err != nil {
		return nil, err
	}
	return dst, nil
}

// appendRecords encodes every record, timestamps relative to firstTs.
func (b *Builder) appendRecords(dst []byte, firstTs int64) []byte {
	for i := range b.records {
		r := &b.records[i]
		hdrs := b.headers[r.hstart:r.hend]
		tsDelta := r.timestamp - firstTs
		// The length prefix needs the body's size before the body is
		// written; computing it beats encoding twice.
		size := 1 + varintLen(tsDelta) + varintLen(int64(i)) +
			spanLen(r.key) + spanLen(r.value) + varintLen(int64(len(hdrs)))
		for _, h := range hdrs {
			size += spanLen(h.key) + spanLen(h.value)
		}
		dst = appendVarint(dst, int32(size))
		dst = append(dst, 0) // record attributes: unused
		dst = appendVarlong(dst, tsDelta)
		dst = appendVarint(dst, int32(i))
		dst = b.appendSpan(dst, r.key)
		dst = b.appendSpan(dst, r.value)
		dst = appendVarint(dst, int32(len(hdrs)))
		for _, h := range hdrs {
			dst = b.appendSpan(dst, h.key)
			dst = b.appendSpan(dst, h.value)
		}
	}
	return dst
}

// spanLen is the encoded size of s: its length varint and its bytes.
func spanLen(s span) int {
	if s.n < 0 {
		return 1
	}
	return varintLen(int64(s.n)) + s.n
}

func (b *Builder) appendSpan(dst []byte, s span) []byte {
	if s.n < 0 {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int32(s.n))
	return append(dst, b.arena[s.off:s.off+s.n]...)
}
