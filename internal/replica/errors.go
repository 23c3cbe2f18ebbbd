package replica

import "github.com/twmb/franz-go/pkg/kerr"

// Expected per-partition conditions. Each is the Kafka error it is
// answered with, so the protocol edge maps them by errors.Is; they are
// wrapped with detail where there is some. Storage errors
// (storage.ErrOffsetOutOfRange, ErrBatchTooLarge, ErrInvalidBatch,
// ErrStorage, corruption, and the producer-state errors) pass through
// unwrapped-by-kind and are mapped by kafkaserver too.
var (
	ErrUnknownTopicOrPartition = kerr.UnknownTopicOrPartition
	ErrNotLeader               = kerr.NotLeaderForPartition
	ErrFencedLeaderEpoch       = kerr.FencedLeaderEpoch
	ErrUnknownLeaderEpoch      = kerr.UnknownLeaderEpoch
	ErrNotEnoughReplicas       = kerr.NotEnoughReplicas
	ErrRequestTimedOut         = kerr.RequestTimedOut
	ErrInvalidRequiredAcks     = kerr.InvalidRequiredAcks
	ErrUnknownTopicID          = kerr.UnknownTopicID
	// ErrNotEnoughReplicasAfterAppend: an acks=all produce was appended
	// and reached the high watermark, but the ISR shrank below
	// min.insync.replicas while it waited (Kafka's
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND; the records are in the log).
	ErrNotEnoughReplicasAfterAppend = kerr.NotEnoughReplicasAfterAppend
	// ErrOffsetOutOfRange: a DeleteRecords offset above the high
	// watermark (reads out of range pass storage.ErrOffsetOutOfRange
	// through instead).
	ErrOffsetOutOfRange = kerr.OffsetOutOfRange
)
