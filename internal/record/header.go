package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

const (
	// HeaderSize is the fixed size of a v2 batch header; records follow it.
	HeaderSize = 61
	// Magic is the only batch format version Fjord reads and writes.
	Magic = 2

	// batchLengthOverhead is what Size adds to batchLength: the baseOffset and
	// batchLength fields themselves.
	batchLengthOverhead = 12
	// minBatchLength is the batchLength of a batch with an empty body.
	minBatchLength = HeaderSize - batchLengthOverhead
)

// Field offsets within the header.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21 // start of the CRC'd range
	offLastOffsetDelta      = 23
	offFirstTimestamp       = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offNumRecords           = 57
)

// Attribute bits.
const (
	attrCodecMask         = 0x07
	attrTimestampType     = 1 << 3
	attrTransactional     = 1 << 4
	attrControl           = 1 << 5
	attrHasDeleteHorizon  = 1 << 6
	attrTimestampTypeBits = 3
)

// crcTable is Castagnoli's polynomial; hash/crc32 uses the SSE4.2/ARMv8 CRC
// instructions for it, which is what keeps Validate near memory bandwidth.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Codec is the compression applied to a batch's records, attributes bits 0-2.
type Codec int8

// Codecs Kafka defines. Values 5-7 are unassigned and refused.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// valid reports whether c is a codec this package can compress and
// decompress.
func (c Codec) valid() bool { return c >= CodecNone && c <= CodecZstd }

// TimestampType says where record timestamps came from, attributes bit 3.
type TimestampType int8

const (
	// CreateTime: the producer's clock; each record carries its own.
	CreateTime TimestampType = 0
	// LogAppendTime: the leader's clock at append; every record in the batch
	// has the batch's MaxTimestamp.
	LogAppendTime TimestampType = 1
)

func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return fmt.Sprintf("TimestampType(%d)", int8(t))
}

// Header is a decoded batch header. Field names follow Kafka's
// DefaultRecordBatch; FirstTimestamp is the wire's baseTimestamp.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // Invariant after ParseHeader: HeaderSize-12 <= BatchLength <= MaxInt32-12.
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the number of bytes the whole batch occupies, header included.
func (h Header) Size() int { return batchLengthOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record (or, after
// compaction removed it, of the last record it once held).
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression of the records, attributes bits 0-2.
func (h Header) Codec() Codec { return Codec(h.Attributes & attrCodecMask) }

// TimestampType is attributes bit 3.
func (h Header) TimestampType() TimestampType {
	return TimestampType((h.Attributes & attrTimestampType) >> attrTimestampTypeBits)
}

// IsTransactional is attributes bit 4: the batch belongs to a transaction and
// is invisible to read_committed consumers until its commit marker.
func (h Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl is attributes bit 5: the batch holds one control record (a
// transaction marker), not user data.
func (h Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// HasDeleteHorizon is attributes bit 6 (KIP-534): compaction set
// FirstTimestamp to the time after which tombstones may be removed.
func (h Header) HasDeleteHorizon() bool { return h.Attributes&attrHasDeleteHorizon != 0 }

// HasProducerID reports whether the batch came from an idempotent or
// transactional producer.
func (h Header) HasProducerID() bool { return h.ProducerID >= 0 }

// ParseHeader decodes the 61-byte header at the start of b without copying
// and without checking the CRC or that b holds the whole batch (recovery
// scanning and read paths use it to step from batch to batch). Errors:
// ErrCorruptLength if len(b) < HeaderSize or BatchLength < HeaderSize-12;
// ErrInvalidMagic if magic != 2.
//
// The magic is checked before the header length when at least 17 bytes are
// present: magic 0 and 1 message sets keep the magic at the same position but
// are shorter, and "unsupported format" says more about them than "corrupt".
func ParseHeader(b []byte) (Header, error) {
	if len(b) <= offMagic {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorruptLength, len(b), HeaderSize)
	}
	if m := int8(b[offMagic]); m != Magic {
		return Header{}, fmt.Errorf("%w: %d", ErrInvalidMagic, m)
	}
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorruptLength, len(b), HeaderSize)
	}
	b = b[:HeaderSize] // one bounds check for all the loads below
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
	// The upper bound keeps Size() from overflowing an int on 32-bit
	// platforms; no real batch comes near it.
	if h.BatchLength < minBatchLength || h.BatchLength > math.MaxInt32-batchLengthOverhead {
		return Header{}, fmt.Errorf("%w: batchLength %d", ErrCorruptLength, h.BatchLength)
	}
	return h, nil
}

// appendHeader appends h's 61 bytes to dst exactly as given: it neither
// computes BatchLength nor the CRC (see finishBatch).
func appendHeader(dst []byte, h *Header) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BatchLength))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, byte(h.Magic))
	dst = binary.BigEndian.AppendUint32(dst, h.CRC)
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.FirstTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.NumRecords))
	return dst
}

// finishBatch sets batchLength and the CRC of the batch that is all of b, once
// its body is in place.
func finishBatch(b []byte) error {
	if len(b)-batchLengthOverhead > math.MaxInt32 {
		return fmt.Errorf("%w: %d bytes", ErrBatchTooLarge, len(b))
	}
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-batchLengthOverhead))
	setCRC(b)
	return nil
}

// computeCRC is the CRC-32C of the CRC'd range of the batch that is all of b.
func computeCRC(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], crcTable) }

func setCRC(b []byte) { binary.BigEndian.PutUint32(b[offCRC:], computeCRC(b)) }

// SetBaseOffset rewrites the base offset of the batch at the start of b in
// place. The field is outside the CRC'd range, so the CRC stays valid; this
// is how a leader assigns offsets without re-encoding. b must hold at least a
// header.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:offBaseOffset+8], uint64(offset))
}

// SetPartitionLeaderEpoch rewrites the partition leader epoch of the batch at
// the start of b in place; like SetBaseOffset it leaves the CRC valid. b must
// hold at least a header.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:offPartitionLeaderEpoch+4], uint32(epoch))
}

// SetLogAppendTime marks the batch at the start of b as LogAppendTime with
// MaxTimestamp ts, for topics with message.timestamp.type=LogAppendTime.
// Both fields are inside the CRC'd range, so the CRC is recomputed: a pass
// over the whole batch, unlike the other setters. Record timestamps are left
// alone; readers of a LogAppendTime batch take MaxTimestamp for every record.
// Bytes after the batch are not touched; b must hold at least a header.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:offAttributes+2]) | attrTimestampType
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:offMaxTimestamp+8], uint64(ts))
	if size := batchLengthOverhead + int(int32(binary.BigEndian.Uint32(b[offBatchLength:]))); size >= HeaderSize && size <= len(b) {
		b = b[:size]
	}
	setCRC(b)
}
