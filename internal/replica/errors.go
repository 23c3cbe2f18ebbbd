package replica

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
)

// Expected per-partition conditions: every error this package returns to
// the protocol layers (kafkaserver, the group coordinator's offsets log)
// is one of these, possibly wrapped with detail. Each is the Kafka error
// it is answered with, so the protocol edge maps them by errors.As and
// needs to know nothing of storage or record. The log's own errors are
// turned into these where they leave a storage call (fromLog below), and
// keep the storage error underneath (%w) for the detail and the logs.
//
// An error that is none of these (an I/O failure storage did not
// classify) passes through as it is; kafkaserver answers it
// UNKNOWN_SERVER_ERROR and logs it.
var (
	ErrUnknownTopicOrPartition = kerr.UnknownTopicOrPartition
	ErrNotLeader               = kerr.NotLeaderForPartition
	ErrFencedLeaderEpoch       = kerr.FencedLeaderEpoch
	ErrUnknownLeaderEpoch      = kerr.UnknownLeaderEpoch
	ErrNotEnoughReplicas       = kerr.NotEnoughReplicas
	ErrRequestTimedOut         = kerr.RequestTimedOut
	ErrInvalidRequiredAcks     = kerr.InvalidRequiredAcks
	ErrUnknownTopicID          = kerr.UnknownTopicID
	// ErrOffsetNotAvailable: ListOffsets on a new leader whose high
	// watermark has not yet reached the start of its leader epoch
	// (KIP-207): it may be below what the previous leader answered, and
	// a consumer told so could reset past records it was already owed.
	ErrOffsetNotAvailable = kerr.OffsetNotAvailable
	// ErrNotEnoughReplicasAfterAppend: an acks=all produce was appended
	// and reached the high watermark, but the ISR shrank below
	// min.insync.replicas while it waited (Kafka's
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND; the records are in the log).
	ErrNotEnoughReplicasAfterAppend = kerr.NotEnoughReplicasAfterAppend
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// log end offset, or a DeleteRecords offset above the high watermark.
	ErrOffsetOutOfRange = kerr.OffsetOutOfRange
	// ErrMessageTooLarge: a batch over max.message.bytes or segment.bytes,
	// or one that decompresses past the limit.
	ErrMessageTooLarge = kerr.MessageTooLarge
	// ErrInvalidRecord: an intact batch a producer may not send (no
	// records, bad offset deltas, a control batch, a keyless record for a
	// compacted topic, a producer id without epoch or sequence).
	ErrInvalidRecord = kerr.InvalidRecord
	// ErrCorruptMessage marks damaged data: bytes offered by a producer
	// or read from the log whose length, magic, CRC or record structure
	// is wrong, or that name a compression codec no client writes. A
	// damaged batch is never appended and never served: the request that
	// met it gets this error instead of the records.
	ErrCorruptMessage = kerr.CorruptMessage
	// ErrOutOfOrderSequence: an idempotent producer's batch whose
	// sequence does not follow its last one.
	ErrOutOfOrderSequence = kerr.OutOfOrderSequenceNumber
	// ErrInvalidProducerEpoch: a batch from an epoch older than the
	// producer's newest on the partition (a fenced producer).
	ErrInvalidProducerEpoch = kerr.InvalidProducerEpoch
	// ErrInvalidTxnState: a non-transactional batch from a producer with
	// a transaction open on the partition, or a transactional batch that
	// would open one without its verification guard (KIP-890).
	ErrInvalidTxnState = kerr.InvalidTxnState
	// ErrCoordinatorFenced: a transaction marker from an older
	// transaction coordinator epoch than the producer's last marker's.
	ErrCoordinatorFenced = kerr.TransactionCoordinatorFenced
	// ErrStorage: the partition's log failed (a failed fsync above all)
	// and refuses writes until the node restarts and recovers it.
	ErrStorage = kerr.KafkaStorageError
	// ErrTopicMigrated: a produce to a topic whose migration has cut
	// over (metadata.MigratedToConfig); the detail names the topic that
	// takes its produces now. Not retriable: the producer has to switch
	// topics, and INVALID_TOPIC_EXCEPTION makes every Kafka client
	// fail the record at once instead of retrying it until its
	// delivery timeout.
	ErrTopicMigrated = kerr.InvalidTopicException
	// ErrInvalidConfig: a config value the log refuses. ApplyImage logs
	// these today; no request path returns one.
	ErrInvalidConfig = kerr.InvalidConfig
)

// fromLog turns an error from a storage.Log call (storage's sentinels,
// and record's, which storage passes through) into this package's
// sentinel, wrapping it for the detail. The cases are in the order the
// protocol edge checked them before this boundary existed, so an error
// that matches two still gets the code it always got. An error that is
// already a kerr value (this package's own) or that storage did not
// classify is returned as it is.
//
// storage.ErrLogClosed is ErrNotLeader here; Partition.logError first
// gives the partition's own reason (its topic was deleted, the manager
// closed) when it has one.
func fromLog(err error) error {
	var ke *kerr.Error
	if err == nil || errors.As(err, &ke) {
		return err
	}
	var sentinel error
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		sentinel = ErrOffsetOutOfRange
	case errors.Is(err, storage.ErrBatchTooLarge):
		sentinel = ErrMessageTooLarge
	case errors.Is(err, storage.ErrInvalidBatch):
		sentinel = ErrInvalidRecord
	case storage.IsCorruption(err), errors.Is(err, record.ErrUnsupportedCodec):
		// An unknown codec id is damage too: no client writes one.
		sentinel = ErrCorruptMessage
	case errors.Is(err, record.ErrBatchTooLarge), errors.Is(err, record.ErrDecompressedTooLarge):
		sentinel = ErrMessageTooLarge
	case errors.Is(err, record.ErrInvalidRecordBatch):
		sentinel = ErrInvalidRecord
	case errors.Is(err, storage.ErrStorage):
		sentinel = ErrStorage
	case errors.Is(err, storage.ErrLogClosed):
		// The log went away under the request: the partition was
		// deleted or is moving. The client refreshes metadata and
		// retries, which is right for both.
		sentinel = ErrNotLeader
	case errors.Is(err, storage.ErrInvalidConfig):
		sentinel = ErrInvalidConfig
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		sentinel = ErrOutOfOrderSequence
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		sentinel = ErrInvalidProducerEpoch
	case errors.Is(err, storage.ErrInvalidTxnState):
		sentinel = ErrInvalidTxnState
	case errors.Is(err, storage.ErrCoordinatorFenced):
		sentinel = ErrCoordinatorFenced
	case errors.Is(err, storage.ErrCorruptTxnIndex):
		// The log is sound; one segment's index of aborted
		// transactions is not, and read_committed reads over it are
		// refused rather than served wrong.
		sentinel = ErrStorage
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
