package txn

import (
	"context"
	"log/slog"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/group"
)

// Config holds the coordinator's settings, each named after the Kafka
// broker setting it mirrors. A zero field takes Kafka's default, except
// TransactionVersion, whose zero is TV0.
type Config struct {
	TransactionPartitions int32         // transaction.state.log.num.partitions (50)
	MaxTransactionTimeout time.Duration // transaction.max.timeout.ms (15m)
	// AbortTimedOutTransactionCleanupInterval is how often Ongoing
	// transactions older than their timeout are looked for and aborted
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10s).
	AbortTimedOutTransactionCleanupInterval time.Duration
	// TransactionalIDExpiration is how long an id may stay idle in Empty,
	// CompleteCommit or CompleteAbort before it is tombstoned
	// (transactional.id.expiration.ms, 7 days), checked every
	// RemoveExpiredTransactionalIDCleanupInterval
	// (transaction.remove.expired.transaction.cleanup.interval.ms, 1h).
	TransactionalIDExpiration                   time.Duration
	RemoveExpiredTransactionalIDCleanupInterval time.Duration
	// TransactionVersion is the cluster's finalized transaction.version
	// (0, 1 or 2). It decides only the version of the aborts the
	// coordinator starts itself (timeout, fence), as Kafka's does; a
	// client's own requests carry theirs.
	TransactionVersion int16
	// MarkerRetryBackoff is the first wait before markers that failed
	// are sent again, doubled after each failure up to
	// MarkerRetryBackoffMax (Fjord's: 50ms and 1s; Kafka's send loop
	// retries after its 50ms reconnect backoff).
	MarkerRetryBackoff    time.Duration
	MarkerRetryBackoffMax time.Duration
	// OffsetsPartitionFor places a consumer group on __consumer_offsets,
	// for AddOffsetsToTxn. Nil: group.PartitionFor over
	// OffsetsPartitions (offsets.topic.num.partitions, 50).
	OffsetsPartitionFor func(groupID string) int32
	OffsetsPartitions   int32
	// Clock times the timeout and expiration checks and the marker
	// backoffs, so a test drives them with a clock.Fake. Nil:
	// clock.Real().
	Clock  clock.Clock
	Logger *slog.Logger
}

// Kafka's defaults, used for zero Config fields.
const (
	defaultTransactionPartitions                       = 50
	defaultMaxTransactionTimeout                       = 15 * time.Minute
	defaultAbortTimedOutTransactionCleanupInterval     = 10 * time.Second
	defaultTransactionalIDExpiration                   = 7 * 24 * time.Hour
	defaultRemoveExpiredTransactionalIDCleanupInterval = time.Hour
	defaultMarkerRetryBackoff                          = 50 * time.Millisecond
	defaultMarkerRetryBackoffMax                       = time.Second
	defaultOffsetsPartitions                           = 50

	// tombstoneAppendTimeout bounds the append of expired ids'
	// tombstones: Kafka's request.timeout.ms, which it uses there.
	// Transitions are bounded by their transaction's timeout instead,
	// as Kafka's are.
	tombstoneAppendTimeout = 30 * time.Second

	// maxTombstoneBatchBytes bounds one append of tombstones, well
	// under the topic's default max.message.bytes (1 MiB): expiring many
	// ids at once must not build one batch too large to write
	// (KAFKA-13099).
	maxTombstoneBatchBytes = 256 << 10
)

// MaxTransactionalIDBytes bounds a transactional id (InitProducerId
// answers a longer one INVALID_REQUEST). Kafka has no bound but the
// protocol's 32,767 bytes; every id is held in the coordinator's memory
// and in each of its __transaction_state records, and real ones
// (an application's name and a task or instance number) are short, so a
// longer one is a mistake or an attack, and refused before it is stored.
const MaxTransactionalIDBytes = 4096

// ConsumerOffsetsTopic is the topic whose partition AddOffsetsToTxn adds.
const ConsumerOffsetsTopic = "__consumer_offsets"

func (cfg Config) withDefaults() Config {
	if cfg.TransactionPartitions <= 0 {
		cfg.TransactionPartitions = defaultTransactionPartitions
	}
	if cfg.MaxTransactionTimeout <= 0 {
		cfg.MaxTransactionTimeout = defaultMaxTransactionTimeout
	}
	if cfg.AbortTimedOutTransactionCleanupInterval <= 0 {
		cfg.AbortTimedOutTransactionCleanupInterval = defaultAbortTimedOutTransactionCleanupInterval
	}
	if cfg.TransactionalIDExpiration <= 0 {
		cfg.TransactionalIDExpiration = defaultTransactionalIDExpiration
	}
	if cfg.RemoveExpiredTransactionalIDCleanupInterval <= 0 {
		cfg.RemoveExpiredTransactionalIDCleanupInterval = defaultRemoveExpiredTransactionalIDCleanupInterval
	}
	if cfg.MarkerRetryBackoff <= 0 {
		cfg.MarkerRetryBackoff = defaultMarkerRetryBackoff
	}
	if cfg.MarkerRetryBackoffMax < cfg.MarkerRetryBackoff {
		cfg.MarkerRetryBackoffMax = max(defaultMarkerRetryBackoffMax, cfg.MarkerRetryBackoff)
	}
	if cfg.OffsetsPartitions <= 0 {
		cfg.OffsetsPartitions = defaultOffsetsPartitions
	}
	if cfg.OffsetsPartitionFor == nil {
		n := cfg.OffsetsPartitions
		cfg.OffsetsPartitionFor = func(groupID string) int32 { return group.PartitionFor(groupID, n) }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Log is the coordinator's durable store: the partitions of
// __transaction_state. Append writes recs to partition p as one batch and
// returns once they are committed (acks=all) or with why not. A nil Value
// is a tombstone.
//
// Errors: Kafka's produce errors as kerr values where there is one; the
// coordinator maps them as Kafka's does (C§2.4): NOT_LEADER_OR_FOLLOWER
// and KAFKA_STORAGE_ERROR answer NOT_COORDINATOR;
// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS (also after append) and
// REQUEST_TIMED_OUT answer COORDINATOR_NOT_AVAILABLE; MESSAGE_TOO_LARGE
// and RECORD_LIST_TOO_LARGE answer UNKNOWN_SERVER_ERROR. Any other error
// (an ended context above all) answers COORDINATOR_NOT_AVAILABLE, which
// every client retries after looking the coordinator up again.
//
// Threads: Append is called from many goroutines at once, with no
// coordinator lock held. Appends for one transactional id never overlap
// (one transition at a time), except across an Unload and Load of its
// partition, when an append begun before may still be finishing (Load
// waits for those before it replays). Append must honour ctx, which ends
// when the partition is unloaded, and must not keep recs after it
// returns.
type Log interface {
	Append(ctx context.Context, p int32, recs []Record) error
}

// Record is one __transaction_state record: a kmsg-encoded key and value
// (records.go). A nil Value is a tombstone.
type Record struct{ Key, Value []byte }

// MarkerSender writes transaction markers: the node's side of Kafka's
// TransactionMarkerChannelManager, which sends WriteTxnMarkers to the
// leaders of a transaction's partitions.
//
// WriteTxnMarkers writes m to every partition of m.Partitions and returns
// one result per partition, in the same order (a result slice of another
// length is a bug, and panics): nil once the marker is written there
// (acks=all), a duplicate of one already written included;
// ErrPartitionDeleted if the partition no longer exists in the sender's
// metadata (its marker is then not needed); otherwise the partition's error as a kerr value
// (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS,
// INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...) or a
// transport error for every partition the failed request carried. See
// markers.go for what the coordinator does with each.
//
// Threads: called from one goroutine per transaction being completed,
// so for many transactions at once, but never twice at once for one
// transaction. ctx ends when the transaction's __transaction_state
// partition is unloaded or the coordinator closes; the sender should
// then return promptly (the results no longer matter). It must not keep
// m.Partitions after it returns.
type MarkerSender interface {
	WriteTxnMarkers(ctx context.Context, m Marker) []error
}

// Marker is one transaction's commit or abort marker, as WriteTxnMarkers
// carries it.
type Marker struct {
	ProducerID    int64
	ProducerEpoch int16 // the Prepare record's: Transactions V2's is the bumped epoch
	// CoordinatorEpoch is the leader epoch of the __transaction_state
	// partition at Load, so a partition refuses a deposed coordinator's
	// markers (TRANSACTION_COORDINATOR_FENCED).
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the transaction's client version (0, 1 or
	// 2), WriteTxnMarkers v2's field: 2 makes the partition's epoch check
	// strict.
	TransactionVersion int8
	Partitions         []TopicPartition
}
