// Package record reads, checks and writes Kafka record batches (magic v2),
// the unit Fjord keeps on disk and sends on the wire unchanged.
//
// A batch is a fixed 61-byte header followed by its records. All integers in
// the header are big endian:
//
//	offset  size  field
//	     0     8  baseOffset            assigned by the leader (SetBaseOffset)
//	     8     4  batchLength           bytes after this field: total = 12 + batchLength
//	    12     4  partitionLeaderEpoch  assigned by the leader (SetPartitionLeaderEpoch)
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21, end)
//	  ---------- everything below is covered by the CRC ----------
//	    21     2  attributes            bits 0-2 codec, 3 timestamp type,
//	                                    4 transactional, 5 control, 6 delete horizon
//	    23     4  lastOffsetDelta       last offset - baseOffset
//	    27     8  firstTimestamp        (baseTimestamp)
//	    35     8  maxTimestamp
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordsCount
//	    61     …  records               compressed as one blob when codec != none
//
// Each record is a run of zigzag varints (Kafka's, the same as protobuf's
// sint32/sint64):
//
//	length          varint   bytes that follow, exactly covering the fields below
//	attributes      int8     unused, 0
//	timestampDelta  varlong  from firstTimestamp
//	offsetDelta     varint   from baseOffset
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value (a tombstone)
//	value           bytes
//	headersCount    varint
//	headers         headersCount × (keyLength varint, key, valueLength varint (-1 null), value)
//
// The base offset and partition leader epoch sit before the CRC'd range on
// purpose: the leader rewrites them in place on every append without
// touching the CRC, so the produce path never re-encodes a batch. That is
// why Validate runs once at produce time (with ValidateOptions.Client set,
// to enforce what only a producer can get wrong) and the storage engine
// afterwards only steps through headers with ParseHeader.
//
// Three kinds of failure come back from this package, all sentinel errors
// that work with errors.Is: damaged data (IsCorruption reports true; such a
// batch must never be served), a policy refusal (ErrBatchTooLarge,
// ErrDecompressedTooLarge, ErrUnsupportedCodec) and a producer breaking the
// protocol (ErrInvalidRecordBatch). No input makes this package panic;
// the in-place setters panic only when handed fewer than HeaderSize bytes,
// which is a caller bug.
package record
