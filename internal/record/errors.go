package record

import "errors"

// Errors returned by this package. Each is wrapped with the numbers that
// explain it (fmt.Errorf("%w: ...")), so compare with errors.Is.
var (
	// ErrCorruptLength: fewer bytes than a header, a batchLength too small to
	// hold a header, or a batchLength that disagrees with the bytes given.
	// A corruption: on disk it marks where recovery truncates.
	ErrCorruptLength = errors.New("record: corrupt batch length")

	// ErrInvalidMagic: the magic byte is not 2. Message sets of magic 0 and 1
	// (pre-0.11 clients) are not supported. A corruption.
	ErrInvalidMagic = errors.New("record: invalid magic")

	// ErrCorruptCRC: the CRC-32C stored in the header does not match the
	// bytes it covers. A corruption.
	ErrCorruptCRC = errors.New("record: crc mismatch")

	// ErrRecordCountMismatch: the records in the body, parsed one by one, are
	// fewer or more than the header's recordsCount, or recordsCount is
	// negative. A corruption.
	ErrRecordCountMismatch = errors.New("record: record count mismatch")

	// ErrCorruptRecord: a record inside the batch does not parse (a varint
	// runs off the end, a length lies, offset deltas go backwards, bytes
	// trail the last record) or a compressed blob does not decompress.
	// A corruption.
	ErrCorruptRecord = errors.New("record: corrupt record")

	// ErrBatchTooLarge: the batch is larger than ValidateOptions.MaxBatchBytes,
	// or would not fit in batchLength's int32 when built.
	ErrBatchTooLarge = errors.New("record: batch too large")

	// ErrUnsupportedCodec: attributes name a compression codec other than
	// none, gzip, snappy, lz4 and zstd.
	ErrUnsupportedCodec = errors.New("record: unsupported compression codec")

	// ErrDecompressedTooLarge: decompressing would exceed the caller's limit.
	// Decompression stops there, so a small hostile blob (a zip bomb) costs
	// at most the limit in memory.
	ErrDecompressedTooLarge = errors.New("record: decompressed size over limit")

	// ErrInvalidRecordBatch: a well-formed batch that a producer may not
	// send: no records, lastOffsetDelta other than recordsCount-1, record
	// offset deltas other than 0, 1, 2, ..., a control batch, a
	// transactional batch without a producer id. Not a corruption: the data
	// is intact, the client is wrong (Kafka's INVALID_RECORD).
	ErrInvalidRecordBatch = errors.New("record: invalid record batch")
)

// IsCorruption reports whether err says the bytes themselves are damaged
// (length, magic, CRC, record structure, record count), as opposed to a
// policy refusal or a client breaking the protocol. Corrupt batches are
// never served; on disk they mark where recovery truncates the log.
func IsCorruption(err error) bool {
	return errors.Is(err, ErrCorruptLength) ||
		errors.Is(err, ErrInvalidMagic) ||
		errors.Is(err, ErrCorruptCRC) ||
		errors.Is(err, ErrCorruptRecord) ||
		errors.Is(err, ErrRecordCountMismatch)
}
