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
	v, err := ValidateBatch(b, opts)
	return v.Header, err
}

// Validated is what ValidateBatch learned of a batch while checking it.
type Validated struct {
	Header Header
	// Keyed reports that at least one record has a key: a non-null one
	// (key length >= 0; an empty key, length 0, is a key, and murmur2
	// places it like any other). It covers only the records the check
	// walked, so it is false for a compressed batch validated without
	// VerifyCompressedRecords, and for a batch that failed. A control
	// batch's records (transaction markers) have keys too: a caller
	// that asks about data records skips those batches.
	//
	// It is folded into the walk that checks the records rather than
	// asked of the batch afterwards: that walk already decompresses and
	// parses every key, and a second look at a gzip or zstd batch would
	// decompress it again (DESIGN.md section 24 measured the fold within
	// noise, and a separate probe at up to three quarters of an append).
	Keyed bool
}

// ValidateBatch is Validate that also reports what the walk over the
// records saw (Validated), at no extra cost: the same single pass, no
// allocation for an uncompressed batch.
func ValidateBatch(b []byte, opts ValidateOptions) (Validated, error) {
	var v Validated
	var err error
	if v.Header, err = validateHeader(b, opts); err != nil {
		return v, err
	}
	h := &v.Header
	body := b[HeaderSize:]
	if c := h.Codec(); c != CodecNone {
		if !opts.VerifyCompressedRecords {
			return v, nil
		}
		maxSize := opts.MaxDecompressedBytes
		if maxSize <= 0 {
			maxSize = DefaultMaxDecompressedBytes
		}
		buf := getBuffer()
		defer putBuffer(buf)
		if *buf, err = Decompress(c, (*buf)[:0], body, maxSize); err != nil {
			return v, err
		}
		body = *buf
	}
	keyed, err := validateRecords(h, body, opts.Client)
	v.Keyed = keyed && err == nil
	return v, err
}

// validateHeader is Validate's checks up to the records: framing, size
// limit, CRC, codec, count and the client rules.
func validateHeader(b []byte, opts ValidateOptions) (Header, error) {
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
	return h, nil
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
// allocate, and reports whether any record has a non-null key.
func validateRecords(h *Header, body []byte, client bool) (keyed bool, err error) {
	it := newRecordIter(h, body, client)
	var raw rawRecord
	for {
		more, err := it.next(&raw)
		if err != nil {
			return keyed, err
		}
		if !more {
			return keyed, it.finish()
		}
		// parseRecord leaves key nil for length -1 only; an empty key
		// aliases the body and is not nil.
		keyed = keyed || raw.key != nil
	}
}
