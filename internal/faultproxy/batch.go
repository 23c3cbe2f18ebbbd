package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The fields of a record batch (magic 2) the proxy reads or rewrites.
// Everything from attributes on is under the batch's CRC; the base
// offset, length, leader epoch and magic before it are not, which is
// why moving a batch to another offset costs no re-encoding.
const (
	offBaseOffset    = 0
	offBatchLength   = 8
	offMagic         = 16
	offCRC           = 17
	offAttributes    = 21
	offLastDelta     = 23
	offProducerID    = 43
	offProducerEpoch = 51
	offBaseSequence  = 53
	batchHeaderSize  = 61
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch is one record batch as it travels in a Fetch or Produce.
type batch []byte

func (b batch) baseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// records is how many offsets the batch spans.
func (b batch) records() int64 { return int64(int32(binary.BigEndian.Uint32(b[offLastDelta:]))) + 1 }

// rebased is a copy of b that starts at offset base.
func (b batch) rebased(base int64) batch {
	out := append(batch(nil), b...)
	binary.BigEndian.PutUint64(out[offBaseOffset:], uint64(base))
	return out
}

// withoutProducer is a copy of b with no producer id, epoch or sequence:
// a write the broker cannot recognise as a retry of b, so it appends it
// again. The CRC covers those fields and is computed anew.
func (b batch) withoutProducer() batch {
	out := append(batch(nil), b...)
	binary.BigEndian.PutUint64(out[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(out[offProducerEpoch:], ^uint16(0))
	binary.BigEndian.PutUint32(out[offBaseSequence:], ^uint32(0))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

// splitBatches cuts a partition's record bytes into whole batches and
// the partial batch a size-limited fetch may end with (kept as it is:
// clients drop it and fetch it again).
func splitBatches(b []byte) (batches []batch, partial []byte, err error) {
	for len(b) > 0 {
		if len(b) < batchHeaderSize {
			return batches, b, nil
		}
		n := int(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
		if n < batchHeaderSize-12 {
			return nil, nil, fmt.Errorf("record batch at offset %d claims a length of %d", batch(b).baseOffset(), n)
		}
		if b[offMagic] != 2 {
			return nil, nil, errors.New("a record batch of magic other than 2")
		}
		if 12+n > len(b) {
			return batches, b, nil
		}
		batches = append(batches, batch(b[:12+n]))
		b = b[12+n:]
	}
	return batches, nil, nil
}

// joinBatches is splitBatches' inverse.
func joinBatches(batches []batch, partial []byte) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b...)
	}
	return append(out, partial...)
}
