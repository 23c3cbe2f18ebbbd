package record

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// RecordHeader is one user header of a record. Kafka never looks at them.
type RecordHeader struct {
	Key   string
	Value []byte // nil = null
}

// Record is one decoded record, its offset and timestamp made absolute.
type Record struct {
	Offset     int64 // absolute: batch base offset + offset delta
	Timestamp  int64 // absolute: first timestamp + delta; for LogAppendTime batches, MaxTimestamp
	Attributes int8
	Key        []byte // nil = null key
	Value      []byte // nil = null value (tombstone)
	Headers    []RecordHeader
}

// rawRecord is a record as it sits in the body: deltas not yet made absolute
// and headers left encoded, so that walking a batch to check it allocates
// nothing. Slices alias the body.
type rawRecord struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key, value     []byte // nil = null
	numHeaders     int
	headers        []byte // the encoded headers, numHeaders of them, already checked
}

// minRecordSize is the smallest encoding of a record: a one-byte length, the
// attributes byte, and one-byte varints for timestampDelta, offsetDelta,
// keyLength, valueLength and headersCount.
const minRecordSize = 7

// parseRecord checks and decodes the record that starts at b[pos:], returning
// the position just past it. The record's length varint must exactly cover
// its fields, and every field must lie inside that length.
func parseRecord(b []byte, pos int, r *rawRecord) (int, error) {
	length, p, ok := readVarint(b, pos)
	if !ok {
		return 0, fmt.Errorf("%w: truncated or overlong length varint at body offset %d", ErrCorruptRecord, pos)
	}
	if length < minRecordSize-1 || int(length) > len(b)-p {
		return 0, fmt.Errorf("%w: record length %d at body offset %d, %d bytes left", ErrCorruptRecord, length, pos, len(b)-p)
	}
	end := p + int(length)
	rec := b[:end] // fields may not read past the record's own length

	r.attributes = int8(rec[p])
	p++
	if r.timestampDelta, p, ok = readVarlong(rec, p); !ok {
		return 0, fmt.Errorf("%w: bad timestampDelta in record at body offset %d", ErrCorruptRecord, pos)
	}
	if r.offsetDelta, p, ok = readVarint(rec, p); !ok {
		return 0, fmt.Errorf("%w: bad offsetDelta in record at body offset %d", ErrCorruptRecord, pos)
	}
	if r.key, p, ok = readBytes(rec, p); !ok {
		return 0, fmt.Errorf("%w: bad key in record at body offset %d", ErrCorruptRecord, pos)
	}
	if r.value, p, ok = readBytes(rec, p); !ok {
		return 0, fmt.Errorf("%w: bad value in record at body offset %d", ErrCorruptRecord, pos)
	}
	count, p, ok := readVarint(rec, p)
	// Each header takes at least two bytes, which bounds the count by what
	// is left and so bounds the slice a decoder allocates for them.
	if !ok || count < 0 || int(count) > (end-p)/2 {
		return 0, fmt.Errorf("%w: bad headersCount %d in record at body offset %d", ErrCorruptRecord, count, pos)
	}
	hstart := p
	for i := int32(0); i < count; i++ {
		var klen int32
		if klen, p, ok = readVarint(rec, p); !ok || klen < 0 || int(klen) > end-p {
			// Kafka forbids null header keys.
			return 0, fmt.Errorf("%w: bad header %d key in record at body offset %d", ErrCorruptRecord, i, pos)
		}
		p += int(klen)
		if _, p, ok = readBytes(rec, p); !ok {
			return 0, fmt.Errorf("%w: bad header %d value in record at body offset %d", ErrCorruptRecord, i, pos)
		}
	}
	if p != end {
		return 0, fmt.Errorf("%w: record at body offset %d has length %d but its fields take %d", ErrCorruptRecord, pos, length, p-(end-int(length)))
	}
	r.numHeaders = int(count)
	r.headers = rec[hstart:end]
	return end, nil
}

// readBytes reads a varint length (-1 = null) and that many bytes.
func readBytes(b []byte, pos int) ([]byte, int, bool) {
	n, p, ok := readVarint(b, pos)
	if !ok || n < -1 || int(n) > len(b)-p {
		return nil, p, false
	}
	if n == -1 {
		return nil, p, true
	}
	return b[p : p+int(n) : p+int(n)], p + int(n), true
}

// decodeHeaders appends the headers parseRecord already checked to dst.
// Keys become strings (one allocation each) rather than aliases of the
// batch, because a caller may reasonably keep a string, e.g. as a map key.
func decodeHeaders(dst []RecordHeader, r *rawRecord) []RecordHeader {
	b, p := r.headers, 0
	for i := 0; i < r.numHeaders; i++ {
		klen, next, _ := readVarint(b, p)
		key := string(b[next : next+int(klen)])
		var value []byte
		value, p, _ = readBytes(b, next+int(klen))
		dst = append(dst, RecordHeader{Key: key, Value: value})
	}
	return dst
}

// recordIter walks the records of one batch body in order, enforcing what
// holds for every stored batch (offset deltas strictly increase and stay
// within [0, lastOffsetDelta]; exactly recordsCount records fill the body)
// and, with client set, what a producer must also get right (offset deltas
// are 0, 1, 2, ...).
type recordIter struct {
	body            []byte
	pos             int
	numRecords      int32
	lastOffsetDelta int32
	read            int32
	prevDelta       int32
	client          bool
}

func newRecordIter(h *Header, body []byte, client bool) recordIter {
	return recordIter{
		body:            body,
		numRecords:      h.NumRecords,
		lastOffsetDelta: h.LastOffsetDelta,
		prevDelta:       -1,
		client:          client,
	}
}

// next decodes the next record into r. It returns false once recordsCount
// records have been read; then call finish.
func (it *recordIter) next(r *rawRecord) (bool, error) {
	if it.read >= it.numRecords {
		return false, nil
	}
	if it.pos == len(it.body) {
		return false, fmt.Errorf("%w: recordsCount %d, body holds %d", ErrRecordCountMismatch, it.numRecords, it.read)
	}
	next, err := parseRecord(it.body, it.pos, r)
	if err != nil {
		return false, fmt.Errorf("record %d: %w", it.read, err)
	}
	if it.client && r.offsetDelta != it.read {
		return false, fmt.Errorf("%w: record %d has offsetDelta %d", ErrInvalidRecordBatch, it.read, r.offsetDelta)
	}
	if r.offsetDelta <= it.prevDelta || r.offsetDelta > it.lastOffsetDelta {
		return false, fmt.Errorf("%w: record %d has offsetDelta %d after %d, lastOffsetDelta %d",
			ErrCorruptRecord, it.read, r.offsetDelta, it.prevDelta, it.lastOffsetDelta)
	}
	it.prevDelta = r.offsetDelta
	it.pos = next
	it.read++
	return true, nil
}

// finish checks that the records read exactly fill the body. Bytes left over
// are either more records than recordsCount claims (a count mismatch) or
// garbage (a corrupt record).
func (it *recordIter) finish() error {
	if it.pos == len(it.body) {
		return nil
	}
	var extra rawRecord
	if _, err := parseRecord(it.body, it.pos, &extra); err == nil {
		return fmt.Errorf("%w: recordsCount %d, body holds more", ErrRecordCountMismatch, it.numRecords)
	}
	return fmt.Errorf("%w: %d bytes trail record %d", ErrCorruptRecord, len(it.body)-it.pos, it.numRecords-1)
}

// DefaultMaxDecompressedBytes bounds decompression where the caller gives no
// limit: ForEachRecord, Records, Filter and Validate with
// MaxDecompressedBytes 0.
const DefaultMaxDecompressedBytes = 64 << 20

// decompressPool recycles buffers for decompressed bodies. Buffers that grew
// past maxPooledBuffer are dropped so one huge batch does not pin memory.
var decompressPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuffer = 4 << 20

func getBuffer() *[]byte { return decompressPool.Get().(*[]byte) }

func putBuffer(buf *[]byte) {
	if cap(*buf) > maxPooledBuffer {
		return
	}
	*buf = (*buf)[:0]
	decompressPool.Put(buf)
}

// batchBody checks b's header and returns it with the batch's records,
// decompressed into *buf when the batch is compressed.
func batchBody(b []byte, buf *[]byte, maxSize int) (Header, []byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.Size() > len(b) {
		return h, nil, fmt.Errorf("%w: batch is %d bytes, have %d", ErrCorruptLength, h.Size(), len(b))
	}
	if h.NumRecords < 0 {
		return h, nil, fmt.Errorf("%w: recordsCount %d", ErrRecordCountMismatch, h.NumRecords)
	}
	body := b[HeaderSize:h.Size()]
	c := h.Codec()
	if c == CodecNone {
		return h, body, nil
	}
	if !c.valid() {
		return h, nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	*buf, err = Decompress(c, (*buf)[:0], body, maxSize)
	if err != nil {
		return h, nil, err
	}
	return h, *buf, nil
}

// ForEachRecord decodes the records of the batch at the start of b (bytes
// after it are ignored), decompressing if needed, bounded by
// DefaultMaxDecompressedBytes, and calls fn for each in order. Slices handed
// to fn (the Record itself, keys, values, the headers slice) may alias b or
// a pooled decompression buffer and are valid only during the call; header
// keys are strings of their own. An error from fn stops the walk and is
// returned.
//
// The CRC is not checked (run Validate first where the bytes are untrusted),
// but the record structure is, as the walk goes: a corrupt record is reported
// after fn has seen the records before it.
func ForEachRecord(b []byte, fn func(r *Record) error) error {
	buf := getBuffer()
	defer putBuffer(buf)
	h, body, err := batchBody(b, buf, DefaultMaxDecompressedBytes)
	if err != nil {
		return err
	}
	it := newRecordIter(&h, body, false)
	var (
		raw     rawRecord
		rec     Record
		headers []RecordHeader
	)
	logAppend := h.TimestampType() == LogAppendTime
	for {
		more, err := it.next(&raw)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		rec.Offset = h.BaseOffset + int64(raw.offsetDelta)
		if logAppend {
			rec.Timestamp = h.MaxTimestamp
		} else {
			rec.Timestamp = h.FirstTimestamp + raw.timestampDelta
		}
		rec.Attributes = raw.attributes
		rec.Key = raw.key
		rec.Value = raw.value
		rec.Headers = nil
		if raw.numHeaders > 0 {
			headers = decodeHeaders(headers[:0], &raw)
			rec.Headers = headers
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return it.finish()
}

// Records returns copies of b's records, safe to keep. Like ForEachRecord it
// does not check the CRC.
func Records(b []byte) ([]Record, error) {
	var out []Record
	if h, err := ParseHeader(b); err == nil && h.NumRecords > 0 && h.Codec() == CodecNone {
		// A hint only: the walk below still checks the count against the
		// body, which bounds it (every record takes minRecordSize bytes).
		out = make([]Record, 0, min(int(h.NumRecords), len(b)/minRecordSize))
	}
	err := ForEachRecord(b, func(r *Record) error {
		c := Record{
			Offset:     r.Offset,
			Timestamp:  r.Timestamp,
			Attributes: r.Attributes,
			Key:        cloneBytes(r.Key),
			Value:      cloneBytes(r.Value),
		}
		if len(r.Headers) > 0 {
			c.Headers = make([]RecordHeader, len(r.Headers))
			for i, hdr := range r.Headers {
				c.Headers[i] = RecordHeader{Key: hdr.Key, Value: cloneBytes(hdr.Value)}
			}
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cloneBytes copies b, keeping nil and empty distinct (null vs empty key).
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// ControlType is the type in a control record's key: what a transaction
// marker says.
type ControlType int16

const (
	// ControlAbort marks the end of an aborted transaction.
	ControlAbort ControlType = 0
	// ControlCommit marks the end of a committed transaction.
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("ControlType(%d)", int16(t))
}

// controlKeySize is the size of a control record key: version int16, type int16.
const controlKeySize = 4

// ParseControlRecord reads a control record's key (version int16, type
// int16). Versions above 0 are accepted, as Kafka does, since the key's
// first two fields are fixed; types other than abort and commit (KRaft's
// leader-change and snapshot markers) are returned as they are for the
// caller to ignore.
func ParseControlRecord(r *Record) (ControlType, error) {
	if len(r.Key) < controlKeySize {
		return 0, fmt.Errorf("%w: control record key of %d bytes", ErrCorruptRecord, len(r.Key))
	}
	version := int16(binary.BigEndian.Uint16(r.Key))
	if version < 0 {
		return 0, fmt.Errorf("%w: control record key version %d", ErrCorruptRecord, version)
	}
	return ControlType(binary.BigEndian.Uint16(r.Key[2:])), nil
}

// ControlRecordKey is the key of a version 0 control record of type t, for
// building transaction markers.
func ControlRecordKey(t ControlType) []byte {
	return binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(t))
}

// EndTxnMarkerValue is the value of a transaction marker control record:
// version int16 (0) and the coordinator epoch that wrote it.
func EndTxnMarkerValue(coordinatorEpoch int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
}

// endTxnMarkerValueSize is a transaction marker value's size: version
// int16, coordinator epoch int32.
const endTxnMarkerValueSize = 6

// ParseEndTxnMarker reads a transaction marker: its control record's type
// (abort or commit) and the coordinator epoch in its value. A control
// record of another type, or a marker whose value is cut short, is
// ErrCorruptRecord; a value version above 0 is read as 0 (its first
// fields are fixed, as Kafka reads it).
func ParseEndTxnMarker(r *Record) (t ControlType, coordinatorEpoch int32, err error) {
	if t, err = ParseControlRecord(r); err != nil {
		return 0, 0, err
	}
	if t != ControlAbort && t != ControlCommit {
		return 0, 0, fmt.Errorf("%w: control record of type %v, not a transaction marker", ErrCorruptRecord, t)
	}
	if len(r.Value) < endTxnMarkerValueSize || int16(binary.BigEndian.Uint16(r.Value)) < 0 {
		return 0, 0, fmt.Errorf("%w: transaction marker value of %d bytes", ErrCorruptRecord, len(r.Value))
	}
	return t, int32(binary.BigEndian.Uint32(r.Value[2:])), nil
}

// EndTxnMarkerBatch is the batch of one transaction marker, as a
// partition's leader writes it for the coordinator: a control batch,
// transactional, of producer pid at epoch, without a sequence, holding one
// record (key: the type; value: the coordinator epoch) at timestamp. Its
// base offset and leader epoch are the log's to assign.
func EndTxnMarkerBatch(pid int64, epoch int16, coordinatorEpoch int32, commit bool, timestamp int64) ([]byte, error) {
	opts := DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch = pid, epoch
	opts.Transactional, opts.Control = true, true
	b := NewBuilder(opts)
	t := ControlAbort
	if commit {
		t = ControlCommit
	}
	b.Add(ControlRecordKey(t), EndTxnMarkerValue(coordinatorEpoch), nil, timestamp)
	return b.Build()
}
