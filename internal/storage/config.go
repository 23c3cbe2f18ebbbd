package storage

import (
	"fmt"
	"time"
)

// FlushPolicy says when appended batches are fsynced.
type FlushPolicy int8

const (
	// FlushAck: an acknowledged write is fsynced first. Callers call
	// Log.Flush after Append and answer once it returns; concurrent callers
	// share fsyncs (group commit). The default: acknowledged means on disk.
	FlushAck FlushPolicy = iota
	// FlushInterval: the log manager fsyncs every flush.ms in the
	// background; durability comes from replication, Kafka's page-cache
	// behaviour.
	FlushInterval
)

func (p FlushPolicy) String() string {
	if p == FlushInterval {
		return "interval"
	}
	return "ack"
}

// ParseFlushPolicy parses the flush.policy config value.
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "ack":
		return FlushAck, nil
	case "interval":
		return FlushInterval, nil
	}
	return 0, fmt.Errorf("%w: flush.policy %q (allowed: ack, interval)", ErrInvalidConfig, s)
}

// CleanupPolicy is Kafka's cleanup.policy.
type CleanupPolicy int8

const (
	CleanupDelete CleanupPolicy = 1 << iota
	CleanupCompact
)

// ParseCleanupPolicy accepts "delete", "compact" and "compact,delete" (in
// either order), as Kafka does.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	switch s {
	case "delete":
		return CleanupDelete, nil
	case "compact":
		return CleanupCompact, nil
	case "compact,delete", "delete,compact":
		return CleanupCompact | CleanupDelete, nil
	}
	return 0, fmt.Errorf("%w: cleanup.policy %q (allowed: delete, compact, compact,delete)", ErrInvalidConfig, s)
}

func (p CleanupPolicy) Compact() bool { return p&CleanupCompact != 0 }
func (p CleanupPolicy) Delete() bool  { return p&CleanupDelete != 0 }

func (p CleanupPolicy) String() string {
	switch p {
	case CleanupCompact:
		return "compact"
	case CleanupCompact | CleanupDelete:
		return "compact,delete"
	}
	return "delete"
}

// Config holds one partition log's settings, named after Kafka's topic
// configs. A Config is immutable once handed to a log; Log.SetConfig swaps
// the whole value.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll when the active segment would pass this
	SegmentMs          int64 // segment.ms: roll when the first batch is older than this
	IndexIntervalBytes int   // index.interval.bytes: bytes between sparse index entries
	MaxMessageBytes    int   // max.message.bytes: largest batch accepted
	FlushPolicy        FlushPolicy
	FlushMs            int64 // flush.ms: background fsync period under FlushInterval
	RetentionMs        int64 // retention.ms: -1 keeps forever
	RetentionBytes     int64 // retention.bytes: -1 means no size bound
	CleanupPolicy      CleanupPolicy
	DeleteRetentionMs  int64 // delete.retention.ms: how long a compacted log keeps tombstones
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner
	// compacts a log once this share of its non-active bytes is uncleaned.
	MinCleanableDirtyRatio float64
	// LogAppendTime: message.timestamp.type=LogAppendTime; the broker
	// stamps each batch with its append time.
	LogAppendTime bool
	// ProducerIDExpirationMs is producer.id.expiration.ms (a broker config
	// in Kafka): a producer the log has not seen a batch from for this
	// long is dropped from the producer state at the next retention pass.
	// 0 means the default, a day.
	ProducerIDExpirationMs int64
}

// defaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms.
const defaultProducerIDExpirationMs = 24 * int64(time.Hour/time.Millisecond)

func (c *Config) producerIDExpirationMs() int64 {
	if c.ProducerIDExpirationMs == 0 {
		return defaultProducerIDExpirationMs
	}
	return c.ProducerIDExpirationMs
}

// DefaultConfig returns Kafka's defaults, except flush.policy=ack (see
// DESIGN.md: acknowledged means fsynced) and a one second flush.ms for
// logs that choose the interval policy.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * int64(time.Hour/time.Millisecond),
		IndexIntervalBytes:     4096,
		MaxMessageBytes:        1048588,
		FlushPolicy:            FlushAck,
		FlushMs:                1000,
		RetentionMs:            7 * 24 * int64(time.Hour/time.Millisecond),
		RetentionBytes:         -1,
		CleanupPolicy:          CleanupDelete,
		DeleteRetentionMs:      24 * int64(time.Hour/time.Millisecond),
		MinCleanableDirtyRatio: 0.5,
	}
}

// Validate names the first value out of range and what is allowed. The
// topic configs are checked by their definitions (topicconfig.go), in
// name order, so the log and the controller refuse the same values; an
// int config (segment.bytes, max.message.bytes, index.interval.bytes) is
// Kafka's int, at most 2147483647.
func (c Config) Validate() error {
	for _, tc := range topicConfigs {
		v := tc.get(c)
		if err := tc.Validate(v); err != nil {
			return fmt.Errorf("%w: %s=%s: %v", ErrInvalidConfig, tc.Name, v, err)
		}
	}
	if c.ProducerIDExpirationMs < 0 {
		return fmt.Errorf("%w: producer.id.expiration.ms=%d (allowed: >= 1, or 0 for the default)", ErrInvalidConfig, c.ProducerIDExpirationMs)
	}
	return nil
}
