package record

import "encoding/binary"

// Filter rebuilds batch b keeping the records for which keep returns true
// (used by log compaction). The result keeps b's base offset,
// LastOffsetDelta, first timestamp, max timestamp, producer fields,
// partition leader epoch, attributes and codec; kept records keep their
// original offset and timestamp deltas. It returns kept == 0 and a nil batch
// when nothing is kept; EmptyBatch gives the zero-record batch a compacted
// log keeps to preserve a producer's last sequence.
//
// Otherwise the batch is appended to dst. Keeping LastOffsetDelta and the
// base offset is what lets a consumer of a compacted log see the gap where
// removed records were, and the unchanged first timestamp is what makes each
// kept record's bytes reusable as they are: the records are copied, not
// re-encoded, and only a compressed body is compressed again (with b's
// codec). When every record is kept, b itself is appended unchanged.
//
// keep sees records as ForEachRecord hands them out (valid only during the
// call). b's CRC is not checked; its structure is.
func Filter(dst, b []byte, keep func(r *Record) bool) (out []byte, kept int, err error) {
	buf := getBuffer()
	defer putBuffer(buf)
	h, body, err := batchBody(b, buf, DefaultMaxDecompressedBytes)
	if err != nil {
		return nil, 0, err
	}

	// keptRaw collects the kept records' bytes; reuse a pooled buffer since
	// a compressed batch needs them apart from dst before compressing.
	keptRaw := getBuffer()
	defer putBuffer(keptRaw)
	raws := (*keptRaw)[:0]

	it := newRecordIter(&h, body, false)
	var (
		raw     rawRecord
		rec     Record
		headers []RecordHeader
	)
	logAppend := h.TimestampType() == LogAppendTime
	for {
		start := it.pos
		more, err := it.next(&raw)
		if err != nil {
			return nil, 0, err
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
		rec.Key, rec.Value, rec.Headers = raw.key, raw.value, nil
		if raw.numHeaders > 0 {
			headers = decodeHeaders(headers[:0], &raw)
			rec.Headers = headers
		}
		if keep(&rec) {
			raws = append(raws, body[start:it.pos]...)
			kept++
		}
	}
	*keptRaw = raws
	if err := it.finish(); err != nil {
		return nil, 0, err
	}

	switch kept {
	case 0:
		return nil, 0, nil
	case int(h.NumRecords):
		return append(dst, b[:h.Size()]...), kept, nil
	}

	start := len(dst)
	h.NumRecords = int32(kept)
	dst = appendHeader(dst, &h)
	if dst, err = Compress(h.Codec(), dst, raws); err != nil {
		return nil, 0, err
	}
	if err := finishBatch(dst[start:]); err != nil {
		return nil, 0, err
	}
	return dst, kept, nil
}

// EmptyBatch appends to dst the zero-record batch that stands for h once
// compaction has removed all its records: same base offset,
// LastOffsetDelta, timestamps, producer id, epoch and base sequence, leader
// epoch and attribute flags, so the producer's last sequence and the
// batch's offset range survive. The codec bits are cleared: an empty body
// needs no compression, and a compressed empty blob would only be bytes for
// every reader to decode.
func EmptyBatch(dst []byte, h Header) []byte {
	start := len(dst)
	h.Magic = Magic
	h.Attributes &^= attrCodecMask
	h.NumRecords = 0
	h.BatchLength = minBatchLength
	h.CRC = 0
	dst = appendHeader(dst, &h)
	binary.BigEndian.PutUint32(dst[start+offCRC:], computeCRC(dst[start:]))
	return dst
}
