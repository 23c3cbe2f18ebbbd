package storage

import (
	"errors"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Expected conditions. The protocol layers map each to a Kafka error code
// (noted beside it); none of them means the log is damaged.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// log end offset. OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrBatchTooLarge: a batch over max.message.bytes or segment.bytes.
	// MESSAGE_TOO_LARGE.
	ErrBatchTooLarge = errors.New("storage: record batch too large")
	// ErrInvalidBatch: a batch that breaks a produce rule (offsets, control
	// flag, keyless record in a compacted topic). INVALID_RECORD.
	ErrInvalidBatch = errors.New("storage: invalid record batch")
	// ErrNonMonotonicOffset: a follower append whose offsets do not follow
	// the log end offset. Replication must truncate first.
	ErrNonMonotonicOffset = errors.New("storage: append offset below log end offset")
	// ErrLogClosed: the log was closed or deleted.
	ErrLogClosed = errors.New("storage: log closed")
	// ErrStorage: an I/O error (a failed fsync above all) left the log in an
	// unknown state; it refuses writes until the node restarts and recovers
	// it, as Kafka does after fsyncgate. KAFKA_STORAGE_ERROR.
	ErrStorage = errors.New("storage: log directory failed")
	// ErrInvalidConfig: a config value out of its allowed range.
	ErrInvalidConfig = errors.New("storage: invalid config")
	// ErrOutOfOrderSequence: an idempotent producer's batch whose first
	// sequence number does not follow its last one (a gap, a repeat that
	// is not one of its last five batches, a new epoch or a producer new to
	// the partition not starting at 0). OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = producerstate.ErrOutOfOrderSequence
	// ErrInvalidProducerEpoch: a batch from an epoch older than the
	// producer's newest on this partition (a fenced producer).
	// INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = producerstate.ErrInvalidProducerEpoch
	// ErrInvalidTxnState: a non-transactional batch from a producer with
	// a transaction open on the partition, or a transactional batch that
	// would open one without its verification guard (AppendVerified).
	// INVALID_TXN_STATE.
	ErrInvalidTxnState = producerstate.ErrInvalidTxnState
	// ErrCoordinatorFenced: a transaction marker from an older
	// transaction coordinator epoch than the producer's last marker's.
	// TRANSACTION_COORDINATOR_FENCED.
	ErrCoordinatorFenced = producerstate.ErrCoordinatorFenced
)

// ErrCorruptTxnIndex: a segment's transaction index is damaged. A
// read_committed read that needs it fails (KAFKA_STORAGE_ERROR) rather
// than serve an aborted transaction's records as committed; the log's
// open rebuilds the indexes from the log when it finds one damaged
// (producer.go), and removing the partition's producer snapshots before a
// restart rebuilds them all.
var ErrCorruptTxnIndex = errors.New("storage: corrupt transaction index")

// IsCorruption reports whether err says stored or offered bytes are
// damaged (bad length, magic, CRC, record structure). Damaged data is never
// served and never appended.
func IsCorruption(err error) bool { return record.IsCorruption(err) }

func isNotExist(err error) bool { return vfs.IsNotExist(err) }
