package kafkaserver

import (
	"context"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/txn"
)

// The services the protocol handlers call. The server holds no state but
// its connections (and fetch sessions); everything else is behind these
// interfaces, implemented by the control plane (controlplane.Images,
// Client and ISR: *controller.Controller on a cluster of one),
// *replica.Manager and *txn.ProducerIDManager and wired together by
// internal/node. The server never sees the Raft library.
//
// Threads: every method may be called from many connections at once.

// Controller is the control plane: this node's metadata image and the
// changes it asks the active controller for. ISR is served to other
// nodes' leaders (AlterPartition), always as the active controller
// (controlplane.LocalOnly).
type Controller interface {
	// Image is the latest metadata image published on this node.
	Image() *metadata.Image
	controlplane.Quorum
	controlplane.Client
	controlplane.ISR
}

// Replicas is the data plane: the partitions this node hosts.
type Replicas interface {
	// StartAppend appends records (one or more v2 batches, validated
	// before any is written) to a partition this node leads, and returns
	// once they are in the log; the returned Pending's Wait answers when
	// acks is satisfied. The records slice is rewritten in place
	// (offsets, epoch). A connection's appends must start in request
	// order, their waits may overlap (see conn.produceTurn).
	StartAppend(topic string, partition int32, records []byte, acks replica.Acks) (replica.Pending, error)
	// TxnVerificationGuard starts the verification of a transactional
	// batch (KIP-890 part 1) on a partition this node leads: needed is
	// false when the producer's transaction at epoch is open there
	// already; otherwise the guard to append with once the coordinator
	// has said the partition is in the transaction. supportsEpochBump:
	// the producer is on Transactions V2 (Produce v12+).
	TxnVerificationGuard(topic string, partition int32, producerID int64, epoch int16, supportsEpochBump bool) (guard uint64, needed bool, err error)
	// StartAppendVerified is StartAppend for a request with a
	// transactional id: a batch that opens its producer's transaction is
	// appended only while guard is the partition's verification guard
	// for the producer (a marker in between clears it).
	StartAppendVerified(topic string, partition int32, records []byte, acks replica.Acks, guard uint64) (replica.Pending, error)
	// StartTxnMarker writes a transaction marker to a partition this
	// node leads (WriteTxnMarkers); the Pending's Wait answers once the
	// high watermark passes it.
	StartTxnMarker(topic string, partition int32, marker storage.TxnMarker) (replica.Pending, error)
	// ActiveProducers describes the producers of a partition this node
	// leads (DescribeProducers), by producer id.
	ActiveProducers(topic string, partition int32) ([]replica.ActiveProducer, error)
	// Fetch reads every partition, waiting (long-poll, woken by appends
	// and high-watermark moves, not a timer) until MinBytes are ready,
	// MaxWait passes or ctx ends.
	Fetch(ctx context.Context, params replica.FetchParams, parts []replica.FetchPartition) *replica.FetchResult
	// ListOffset answers ListOffsets for one partition; timestamp may be
	// one of replica.TimestampLatest/Earliest/MaxTimestamp.
	ListOffset(topic string, partition int32, currentLeaderEpoch int32, timestamp int64, isolation replica.Isolation) (replica.OffsetAndTimestamp, error)
	// DescribePositions answers where offsets stand in a partition this
	// node leads (FjordDescribePositions): one backlog per offset.
	DescribePositions(topic string, partition int32, offsets []int64) (replica.Positions, error)
	// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch
	// <= epoch this log knows and the end offset of that epoch.
	EndOffsetForEpoch(topic string, partition int32, currentLeaderEpoch, epoch int32) (leaderEpoch int32, endOffset int64, err error)
	// LogEnd is this node's own replica's latest leader epoch and log
	// end offset, led or not (OffsetForLeaderEpoch from the active
	// controller before an unclean election).
	LogEnd(topic string, partition int32) (leaderEpoch int32, endOffset int64, err error)
	// DeleteRecords moves the log start offset to offset (-1: the high
	// watermark) and returns the new low watermark.
	DeleteRecords(ctx context.Context, topic string, partition int32, offset int64, timeout time.Duration) (lowWatermark int64, err error)
	// LogDirs describes the data directory and every partition in it.
	LogDirs() (dir string, totalBytes, usableBytes int64, parts []replica.LogDirInfo)
}

// ProducerIDs hands out idempotent producer ids (InitProducerId).
type ProducerIDs interface {
	// InitProducerID returns a fresh producer id with epoch 0. Calls that
	// carry transactional ids are refused until transactions exist.
	InitProducerID(ctx context.Context) (producerID int64, epoch int16, err error)
}

// Groups is the consumer group coordinator (*group.Coordinator): the
// classic protocol's groups and their committed offsets, for the
// __consumer_offsets partitions this node leads. Its errors are kerr
// values. JoinGroup and SyncGroup block until the rebalance lets them
// answer, or ctx ends.
type Groups interface {
	JoinGroup(ctx context.Context, req group.JoinRequest) group.JoinResult
	SyncGroup(ctx context.Context, req group.SyncRequest) group.SyncResult
	Heartbeat(req group.HeartbeatRequest) error
	LeaveGroup(ctx context.Context, groupID string, members []group.LeaveMember) (err error, memberErrs []error)
	CommitOffsets(ctx context.Context, req group.CommitRequest) (err error, partErrs []error)
	CommitTxnOffsets(ctx context.Context, req group.TxnCommitRequest) (err error, partErrs []error)
	// CompleteTxn applies a transaction marker written to
	// __consumer_offsets partition p: the producer's pending offsets
	// there become committed, or are dropped.
	CompleteTxn(p int32, producerID int64, commit bool)
	FetchOffsets(groupID string, parts []group.TopicPartition, requireStable bool) ([]group.CommittedOffset, error)
	DescribeGroup(groupID string) (group.GroupDescription, error)
	ListGroups(states []string) ([]group.GroupListing, error)
	DeleteGroups(ctx context.Context, groups []string) []error
	DeleteOffsets(ctx context.Context, groupID string, parts []group.TopicPartition) (err error, partErrs []error)
}

// TxnVerifier asks a transactional id's coordinator, wherever it runs,
// whether partitions are in the producer's ongoing transaction (KIP-890
// part 1: the partition leader's question before it lets a batch open
// the producer's transaction there). Per partition, in order: nil when
// it is; TRANSACTION_ABORTABLE when it is not; otherwise the
// coordinator's error for all (PRODUCER_FENCED,
// INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
// a NETWORK_EXCEPTION when it could not be asked).
//
// AddPartitionsToTxn is Transactions V2's implicit add (Produce v12,
// TxnOffsetCommit v5): the leader adds the partitions to the producer's
// transaction, starting one if none is open, with the coordinator's
// errors per partition (CONCURRENT_TRANSACTIONS while the previous
// transaction's markers are being written).
type TxnVerifier interface {
	VerifyPartitionsInTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition) []error
	AddPartitionsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition) []error
}

// Transactions is the transaction coordinator (internal/txn): the
// transactional APIs' handlers decode requests into its calls and answer
// its kerr errors by code (txn.ErrorForVersion maps them to what each
// request version may carry). Only what the served APIs call.
type Transactions interface {
	InitProducerID(ctx context.Context, transactionalID string, transactionTimeoutMs int32, expectedProducerID int64, expectedEpoch int16) (producerID int64, epoch int16, err error)
	AddPartitionsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition, tv2 bool) error
	AddOffsetsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, groupID string) error
	VerifyPartitionsInTxn(transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition) []error
	EndTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit, tv2 bool) (int64, int16, error)
	DescribeTransactions(ids []string) []txn.TransactionDescription
	ListTransactions(f txn.ListTransactionsFilter) (txns []txn.TransactionListing, unknownStates []string, err error)
}
