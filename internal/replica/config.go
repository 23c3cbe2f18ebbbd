package replica

import (
	"fmt"
	"strconv"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// Topic config names this package reads. The metadata package owns the
// list of valid names, their defaults and their validation; the replica
// manager only translates the ones the log (or it) acts on.
const (
	configMinInsyncReplicas = "min.insync.replicas"
	defaultMinInsync        = 1
)

// storageConfig returns base with the topic's overrides of the log's
// configs applied. Only overrides are read: a name the topic does not
// set keeps base's value, which is the node's default (Options.Defaults).
// Names that are not the log's (min.insync.replicas, compression.type,
// unclean.leader.election.enable) are ignored here. The result is
// validated as the log will validate it, so a value the controller let
// through but the log refuses is reported with its name instead of
// failing later in SetConfig.
func storageConfig(base storage.Config, topic *metadata.Topic) (storage.Config, error) {
	cfg := base
	for name, value := range topic.Configs {
		if err := setStorageConfig(&cfg, name, value); err != nil {
			return base, fmt.Errorf("topic %s: %w", topic.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return base, fmt.Errorf("topic %s: %w", topic.Name, err)
	}
	return cfg, nil
}

// setStorageConfig sets the Config field that the metadata config name
// maps to; unknown names are left alone (see storageConfig).
func setStorageConfig(cfg *storage.Config, name, value string) error {
	bad := func(allowed string) error {
		return fmt.Errorf("%w: %s=%q (allowed: %s)", storage.ErrInvalidConfig, name, value, allowed)
	}
	parseInt := func(dst *int64) error {
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return bad("an integer")
		}
		*dst = v
		return nil
	}
	parseSmallInt := func(dst *int) error {
		v, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return bad("a 32-bit integer")
		}
		*dst = int(v)
		return nil
	}
	switch name {
	case "segment.bytes":
		return parseInt(&cfg.SegmentBytes)
	case "segment.ms":
		return parseInt(&cfg.SegmentMs)
	case "index.interval.bytes":
		return parseSmallInt(&cfg.IndexIntervalBytes)
	case "max.message.bytes":
		return parseSmallInt(&cfg.MaxMessageBytes)
	case "flush.policy":
		p, err := storage.ParseFlushPolicy(value)
		if err != nil {
			return err
		}
		cfg.FlushPolicy = p
	case "flush.ms":
		return parseInt(&cfg.FlushMs)
	case "retention.ms":
		return parseInt(&cfg.RetentionMs)
	case "retention.bytes":
		return parseInt(&cfg.RetentionBytes)
	case "cleanup.policy":
		p, err := storage.ParseCleanupPolicy(value)
		if err != nil {
			return err
		}
		cfg.CleanupPolicy = p
	case "delete.retention.ms":
		return parseInt(&cfg.DeleteRetentionMs)
	case "min.cleanable.dirty.ratio":
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return bad("a number from 0 to 1")
		}
		cfg.MinCleanableDirtyRatio = v
	case "message.timestamp.type":
		switch value {
		case "CreateTime":
			cfg.LogAppendTime = false
		case "LogAppendTime":
			cfg.LogAppendTime = true
		default:
			return bad("CreateTime, LogAppendTime")
		}
	}
	return nil
}

// minInsyncReplicas returns the topic's min.insync.replicas, which is the
// replica manager's own config: the log knows nothing of replicas.
func minInsyncReplicas(topic *metadata.Topic) (int, error) {
	value, ok := topic.Configs[configMinInsyncReplicas]
	if !ok {
		return defaultMinInsync, nil
	}
	v, err := strconv.ParseInt(value, 10, 32)
	if err != nil || v < 1 {
		return defaultMinInsync, fmt.Errorf("%w: topic %s: %s=%q (allowed: an integer >= 1)",
			storage.ErrInvalidConfig, topic.Name, configMinInsyncReplicas, value)
	}
	return int(v), nil
}
