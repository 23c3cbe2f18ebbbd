package record

import "fmt"

// ValidateOptions says how much Validate checks beyond the batch's framing.
type ValidateOptions struct {
	// MaxBatchBytes, when > 0, refuses a batch whose whole size exceeds it
	// with ErrBatchTooLarge (Kafka's max.message.bytes).
	MaxBatchBytes int
	// Client enables the produce-time rules, for batches straight from a
	// producer: at least one record, lastOffsetDelta == recordsCount-1,
	// record i has offset delta i, no control batches (only the broker
	// writes transaction markers), and transactional batches carry a
	// producer id. Violations are ErrInvalidRecordBatch.
	Client bool
	// VerifyCompressedRecords also decompresses a compressed batch and walks
	// its records. Without it a compressed body is covered by the CRC only,
	// which is what makes the produce path cheap; the cost of a bad blob
	// then falls on consumers.
	VerifyCompressedRecords bool
	// MaxDecompressedBytes bounds that decompression; 0 means
	// DefaultMaxDecompressedBytes.
	MaxDecompressedBytes int
}

// Validate checks that b is exactly one well-formed batch: len(b) == Size(),
// magic 2, CRC, codec known, NumRecords >= 0, and for uncompressed batches
// (and compressed ones when VerifyCompressedRecords) that the records parse,
// each record's length covers exactly its fields, their count equals
// NumRecords, their offset deltas strictly increase within [0,
// LastOffsetDelta], and they exactly fill the body. With Client: NumRecords >
// 0, LastOffsetDelta == NumRecords-1, record i has offsetDelta i, control
// batches are refused. Never panics on any input.
//
// Checks run cheapest first and framing before content, so the error names
// the outermost thing wrong: magic and length, size limit, CRC, codec,
// count, client rules, then records. The size limit comes before the CRC so
// an oversized batch is refused without reading it. An uncompressed batch is checked without
// allocating.
func Validate(b []byte, opts ValidateOptions) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: batchLength %d says %d bytes, have %d", ErrCorruptLength, h.BatchLength, h.Size(), len(b))
	}
	if opts.MaxBatchBytes > 0 && len(b) > opts.MaxBatchBytes {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(b), opts.MaxBatchBytes)
	}
	if crc := computeCRC(b); crc != h.CRC {
		return h, fmt.Errorf("%w: header %#08x, computed %#08x", ErrCorruptCRC, h.CRC, crc)
	}
	c := h.Codec()
	if !c.valid() {
		return h, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	if h.NumRecords < 0 {
		return h, fmt.Errorf("%w: recordsCount %d", ErrRecordCountMismatch, h.NumRecords)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d", ErrCorruptRecord, h.LastOffsetDelta)
	}
	if opts.Client {
		if err := validateClientHeader(&h); err != nil {
			return h, err
		}
	}

	body := b[HeaderSize:]
	if c != CodecNone {
		if !opts.VerifyCompressedRecords {
			return h, nil
		}
		maxSize := opts.MaxDecompressedBytes
		if maxSize <= 0 {
			maxSize = DefaultMaxDecompressedBytes
		}
		buf := getBuffer()
		defer putBuffer(buf)
		if *buf, err = Decompress(c, (*buf)[:0], body, maxSize); err != nil {
			return h, err
		}
		body = *buf
	}
	return h, validateRecords(&h, body, opts.Client)
}

// validateClientHeader applies the produce-time rules that need only the
// header.
func validateClientHeader(h *Header) error {
	switch {
	case h.IsControl():
		return fmt.Errorf("%w: control batch from a client", ErrInvalidRecordBatch)
	case h.NumRecords == 0:
		return fmt.Errorf("%w: no records", ErrInvalidRecordBatch)
	case h.LastOffsetDelta != h.NumRecords-1:
		return fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalidRecordBatch, h.LastOffsetDelta, h.NumRecords)
	case h.IsTransactional() && !h.HasProducerID():
		return fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecordBatch)
	}
	return nil
}

// validateRecords walks the records without decoding headers, so it does not
// allocate.
func validateRecords(h *Header, body []byte, client bool) error {
	it := newRecordIter(h, body, client)
	var raw rawRecord
	for {
		more, err := it.next(&raw)
		if err != nil {
			return err
		}
		if !more {
			return it.finish()
		}
	}
}
