package replica

import (
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// This file is the replica manager's surface as the protocol layers
// (kafkaserver, later httpapi) see it. Errors returned per partition are
// the sentinels in errors.go, possibly wrapped with detail (storage's
// errors among them, for the logs); kafkaserver maps them to Kafka error
// codes with errors.As and never needs to look beneath them.

// Acks is a produce request's acks: 0, 1 or -1 (all).
type Acks int16

const (
	AcksNone   Acks = 0
	AcksLeader Acks = 1
	AcksAll    Acks = -1
)

// AppendResult is one partition's answer to a produce.
type AppendResult struct {
	// BaseOffset is the offset given to the first record; for a
	// duplicate batch of an idempotent producer, the offset it was given
	// the first time.
	BaseOffset int64
	// LogAppendTime is the broker's timestamp when the topic uses
	// LogAppendTime, else -1.
	LogAppendTime  int64
	LogStartOffset int64
}

// Isolation is a fetch's isolation level, with Kafka's names
// (FetchIsolation): what offset bounds the read.
type Isolation int8

const (
	// IsolationHighWatermark: read_uncommitted consumers.
	IsolationHighWatermark Isolation = iota
	// IsolationTxnCommitted: read_committed consumers (below the LSO).
	IsolationTxnCommitted
	// IsolationLogEnd: followers.
	IsolationLogEnd
)

// FetchParams are the request-wide fetch settings.
type FetchParams struct {
	ReplicaID int32 // -1 for consumers
	// ReplicaEpoch is a follower's broker epoch (Fetch v15+'s
	// ReplicaState), -1 when not sent.
	ReplicaEpoch int64
	MaxWait      time.Duration
	MinBytes     int32
	MaxBytes     int32 // response-wide byte limit
	Isolation    Isolation
	// MinRangeBytes > 0 lets a partition's answer of at least this
	// many bytes come as a file range (FetchPartitionResult.Range) for
	// the caller to send with sendfile; 0 reads every answer into
	// Records.
	MinRangeBytes int
	// Client is a consumer's client metadata (Fetch v11+, KIP-392):
	// with it the consumer may read from an in-sync follower and the
	// leader may name one (selector.go). nil (older versions,
	// followers): the leader only.
	Client *ClientMetadata
}

// FetchPartition is one partition of a fetch, in request order.
type FetchPartition struct {
	Topic              string
	TopicID            metadata.UUID
	Partition          int32
	FetchOffset        int64
	CurrentLeaderEpoch int32 // -1: not given
	MaxBytes           int32 // partition byte limit
	// LastFetchedEpoch is a follower's epoch of the last batch it holds
	// (Fetch v12+, KIP-595), -1 when not given: the leader checks it
	// against its own epochs and answers DivergingEpoch instead of
	// records when the follower's log has gone its own way.
	LastFetchedEpoch int32
	// LogStartOffset is a follower's log start offset (Fetch v5+), -1
	// when not given; consumers' is ignored.
	LogStartOffset int64
}

// FetchPartitionResult is one partition's answer, in request order.
type FetchPartitionResult struct {
	Err              error
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Records holds whole batches (the first may start before
	// FetchOffset). It aliases a pooled buffer owned by the FetchResult
	// until Release.
	Records []byte
	// Range holds the batches instead of Records when Range.File is set
	// (FetchParams.MinRangeBytes). Its descriptor belongs to the
	// FetchResult until Release.
	Range storage.FileRange
	// LastOffset is the last offset in Records or Range, -1 when they
	// hold nothing (storage.ReadResult.LastOffset).
	LastOffset int64
	// AbortedTxns, for IsolationTxnCommitted, are the aborted
	// transactions that overlap Records or Range: the consumer skips
	// their producers' batches within them.
	AbortedTxns []storage.AbortedTxn
	// DivergingEpoch, when Epoch >= 0, tells a follower that its log
	// differs from the leader's after EndOffset in that epoch: it
	// truncates there and fetches again. Nothing is read then.
	DivergingEpoch EpochEndOffset
	// Redirect: the consumer should read this partition from replica
	// PreferredReadReplica instead (KIP-392), and nothing was read. A
	// flag beside the id, not a -1 id, so that a result built without
	// it (node 0 is a real node) never sends a consumer away.
	Redirect             bool
	PreferredReadReplica int32
	// FromFollower: the records were read from this node's copy as a
	// follower, not as the partition's leader.
	FromFollower bool
}

// EpochEndOffset is a leader epoch and the offset its records end at.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// Size is the bytes of batches in the answer, in Records or Range.
func (r *FetchPartitionResult) Size() int {
	if r.Range.File != nil {
		return r.Range.Size
	}
	return len(r.Records)
}

// FetchResult holds a fetch's answers. Call Release once the response
// holding its Records has been written; the buffers go back to the pool.
type FetchResult struct {
	Partitions []FetchPartitionResult
	// Waited is how long the fetch was parked waiting for data (its
	// long poll): not work, for request_percentage quotas.
	Waited  time.Duration
	release func()
}

// Release returns the result's buffers to the pool and closes its file
// ranges. Records and Range must not be used after it.
func (r *FetchResult) Release() {
	if r != nil && r.release != nil {
		r.release()
		r.release = nil
	}
}

// ListOffsets special timestamps, as Kafka's.
const (
	TimestampLatest       int64 = -1
	TimestampEarliest     int64 = -2
	TimestampMaxTimestamp int64 = -3
)

// OffsetAndTimestamp is a ListOffsets answer.
type OffsetAndTimestamp struct {
	Offset      int64 // -1 when no record has a timestamp at or after the target
	Timestamp   int64 // -1 unless found by timestamp
	LeaderEpoch int32 // epoch of the record at Offset, -1 if unknown
}

// LogDirInfo describes one partition for DescribeLogDirs.
type LogDirInfo struct {
	Topic     string
	Partition int32
	Size      int64
	OffsetLag int64
}
