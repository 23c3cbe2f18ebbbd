package group

import (
	"context"
	"log/slog"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
)

// Config holds the coordinator's settings, each named after the Kafka
// broker setting it mirrors. A zero field takes Kafka's default, except
// InitialRebalanceDelay and MaxGroupSize, where zero means "none" (tests
// run without the delay; Kafka's own default group.max.size is unlimited).
type Config struct {
	OffsetsPartitions      int32         // offsets.topic.num.partitions (50)
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms (Kafka: 3s; zero here: none)
	MinSessionTimeout      time.Duration // group.min.session.timeout.ms (6s)
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms (30m)
	MaxGroupSize           int           // group.max.size (0: unlimited)
	MaxMetadataBytes       int           // offset.metadata.max.bytes (4096)
	OffsetsRetention       time.Duration // offsets.retention.minutes (7 days)
	RetentionCheckInterval time.Duration // offsets.retention.check.interval.ms (10m)
	// CommitTimeout bounds every append to __consumer_offsets
	// (offsets.commit.timeout.ms, 5s): an append that has not reached all
	// replicas by then fails the request it serves.
	CommitTimeout time.Duration
	// Clock times every deadline of the coordinator (sessions,
	// rebalances, the initial delay, retention), so a test drives them
	// with a clock.Fake instead of waiting. Nil: clock.Real().
	Clock  clock.Clock
	Logger *slog.Logger
}

// Kafka's defaults, used for zero Config fields.
const (
	defaultOffsetsPartitions      = 50
	defaultMinSessionTimeout      = 6 * time.Second
	defaultMaxSessionTimeout      = 30 * time.Minute
	defaultMaxMetadataBytes       = 4096
	defaultOffsetsRetention       = 7 * 24 * time.Hour
	defaultRetentionCheckInterval = 10 * time.Minute
	defaultCommitTimeout          = 5 * time.Second

	// newMemberJoinTimeout is how long a new member may wait in a
	// JoinGroup that has not completed before it is dropped. A new member
	// has no id to heartbeat with, and a client that gave up and retried
	// would otherwise leave a defunct member behind in every rebalance
	// (Kafka's NewMemberJoinTimeoutMs).
	newMemberJoinTimeout = 5 * time.Minute
)

func (cfg Config) withDefaults() Config {
	if cfg.OffsetsPartitions <= 0 {
		cfg.OffsetsPartitions = defaultOffsetsPartitions
	}
	if cfg.MinSessionTimeout <= 0 {
		cfg.MinSessionTimeout = defaultMinSessionTimeout
	}
	if cfg.MaxSessionTimeout <= 0 {
		cfg.MaxSessionTimeout = defaultMaxSessionTimeout
	}
	if cfg.MaxMetadataBytes <= 0 {
		cfg.MaxMetadataBytes = defaultMaxMetadataBytes
	}
	if cfg.OffsetsRetention <= 0 {
		cfg.OffsetsRetention = defaultOffsetsRetention
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = defaultRetentionCheckInterval
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = defaultCommitTimeout
	}
	if cfg.InitialRebalanceDelay < 0 {
		cfg.InitialRebalanceDelay = 0
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
// __consumer_offsets. Append writes recs to partition p as one batch and
// returns once they are committed (acks=all) or with why not. A nil Value
// is a tombstone.
//
// Errors: Kafka's produce errors as kerr values where there is one (the
// replica package's sentinels are kerr values), mapped as Kafka maps them
// for coordinator writes: NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR
// become NOT_COORDINATOR; UNKNOWN_TOPIC_OR_PARTITION and NOT_ENOUGH_REPLICAS
// (also after append) COORDINATOR_NOT_AVAILABLE; a timeout
// REQUEST_TIMED_OUT for commits and REBALANCE_IN_PROGRESS for a SyncGroup;
// MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE INVALID_COMMIT_OFFSET_SIZE
// for commits and UNKNOWN_SERVER_ERROR for group metadata. Any other error
// is answered COORDINATOR_NOT_AVAILABLE, which every client retries after
// looking the coordinator up again.
//
// Threads: Append is called from many goroutines at once, with no
// coordinator mutex held. Appends for one group never overlap (the
// coordinator orders them), except across an Unload and Load of its
// partition, when a write begun before may still be finishing. Append must
// honour ctx and must not keep recs after it returns.
type Log interface {
	Append(ctx context.Context, p int32, recs []Record) error
	// AppendTxn writes recs as one transactional batch of producer
	// (producerID, epoch): a TxnOffsetCommit's offsets, which the
	// transaction's marker on partition p later commits or aborts
	// (CompleteTxn). The partition checks the epoch as it does a
	// producer's own batches: one older than the producer's latest on
	// p is kerr.InvalidProducerEpoch; with guard.Verify, a batch that
	// would open the producer's transaction there needs guard.Guard
	// (kerr.InvalidTxnState otherwise). Errors are otherwise Append's.
	AppendTxn(ctx context.Context, p int32, producerID int64, epoch int16, guard TxnGuard, recs []Record) error
}

// TxnGuard is a TxnOffsetCommit's transaction verification (KIP-890 part
// 1), which the protocol layer does before the commit reaches the
// coordinator, as a partition leader does a produce's: the guard it took
// from the partition before asking the transaction coordinator whether
// the partition is in the transaction. The zero value verifies nothing.
type TxnGuard struct {
	Verify bool
	Guard  uint64
}

// Record is one __consumer_offsets record: a kmsg-encoded key and value.
// Load's read also says where each record stands in the log: its offset,
// and whether it belongs to a transaction (Transactional, with the
// writing producer's id) or is a transaction marker (Control: no key or
// value; Commit says which). Append and AppendTxn ignore these fields.
type Record struct {
	Key, Value []byte

	Offset        int64
	Transactional bool
	ProducerID    int64 // when Transactional or Control
	Control       bool
	Commit        bool // when Control: a commit marker, else an abort
}
