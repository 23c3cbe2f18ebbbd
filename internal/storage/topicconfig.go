package storage

import (
	"fmt"
	"strconv"

	"github.com/fjordmq/fjord/internal/topicconfig"
)

// TopicConfig is one topic config the log acts on: its definition and
// how it maps onto a Config field. The definition's Default is the
// field's value in DefaultConfig, so the two cannot disagree, and
// Config.Validate checks each field with the definition's Validate, so
// a value the controller accepts never makes a log refuse its config.
type TopicConfig struct {
	topicconfig.Def
	// set stores a value that passed Validate in its field.
	set func(c *Config, value string)
	// get formats the field as the config's value. A field out of range
	// formats as its number, so Validate refuses it (FlushPolicy(7) is
	// "7", never String()'s "ack").
	get func(c Config) string
}

// topicConfigs are the log's settings, by name.
var topicConfigs = []TopicConfig{
	{
		Def: topicconfig.Def{Name: "cleanup.policy", Type: "list",
			Doc:      "delete: drop old segments by retention; compact: keep the newest record per key; or both.",
			Validate: topicconfig.PolicyList("delete, compact, compact,delete", "delete", "compact")},
		set: func(c *Config, v string) { c.CleanupPolicy, _ = ParseCleanupPolicy(v) },
		get: func(c Config) string {
			if c.CleanupPolicy == 0 || c.CleanupPolicy&^(CleanupDelete|CleanupCompact) != 0 {
				return strconv.Itoa(int(c.CleanupPolicy))
			}
			return c.CleanupPolicy.String()
		},
	},
	{
		Def: topicconfig.Def{Name: "delete.retention.ms", Type: "long",
			Doc:      "How long a compacted topic keeps tombstones.",
			Validate: topicconfig.LongAtLeast(0)},
		set: func(c *Config, v string) { c.DeleteRetentionMs = parseInt(v) },
		get: func(c Config) string { return formatInt(c.DeleteRetentionMs) },
	},
	{
		Def: topicconfig.Def{Name: "flush.ms", Type: "long",
			Doc:      "Background fsync period under flush.policy=interval.",
			Validate: topicconfig.LongAtLeast(1)},
		set: func(c *Config, v string) { c.FlushMs = parseInt(v) },
		get: func(c Config) string { return formatInt(c.FlushMs) },
	},
	{
		Def: topicconfig.Def{Name: "flush.policy", Type: "string",
			Doc:      "ack: fsync (group committed) before acknowledging; interval: fsync every flush.ms, durability by replication.",
			Validate: topicconfig.OneOf("ack", "interval")},
		set: func(c *Config, v string) { c.FlushPolicy, _ = ParseFlushPolicy(v) },
		get: func(c Config) string {
			if c.FlushPolicy != FlushAck && c.FlushPolicy != FlushInterval {
				return strconv.Itoa(int(c.FlushPolicy))
			}
			return c.FlushPolicy.String()
		},
	},
	{
		Def: topicconfig.Def{Name: "index.interval.bytes", Type: "int",
			Doc:      "Bytes between sparse offset index entries.",
			Validate: topicconfig.IntAtLeast(0)},
		set: func(c *Config, v string) { c.IndexIntervalBytes = int(parseInt(v)) },
		get: func(c Config) string { return strconv.Itoa(c.IndexIntervalBytes) },
	},
	{
		Def: topicconfig.Def{Name: "max.message.bytes", Type: "int",
			Doc:      "Largest record batch accepted.",
			Validate: topicconfig.IntAtLeast(0)},
		set: func(c *Config, v string) { c.MaxMessageBytes = int(parseInt(v)) },
		get: func(c Config) string { return strconv.Itoa(c.MaxMessageBytes) },
	},
	{
		Def: topicconfig.Def{Name: "message.timestamp.type", Type: "string",
			Doc:      "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's time.",
			Validate: topicconfig.OneOf("CreateTime", "LogAppendTime")},
		set: func(c *Config, v string) { c.LogAppendTime = v == "LogAppendTime" },
		get: func(c Config) string {
			if c.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		},
	},
	{
		Def: topicconfig.Def{Name: "min.cleanable.dirty.ratio", Type: "double",
			Doc:      "Share of uncleaned bytes at which the cleaner compacts a log.",
			Validate: topicconfig.Ratio},
		set: func(c *Config, v string) { c.MinCleanableDirtyRatio, _ = strconv.ParseFloat(v, 64) },
		get: func(c Config) string { return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64) },
	},
	{
		Def: topicconfig.Def{Name: "retention.bytes", Type: "long",
			Doc:      "Size bound per partition; -1 for none.",
			Validate: topicconfig.LongAtLeast(-1)},
		set: func(c *Config, v string) { c.RetentionBytes = parseInt(v) },
		get: func(c Config) string { return formatInt(c.RetentionBytes) },
	},
	{
		Def: topicconfig.Def{Name: "retention.ms", Type: "long",
			Doc:      "How long records are kept; -1 forever.",
			Validate: topicconfig.LongAtLeast(-1)},
		set: func(c *Config, v string) { c.RetentionMs = parseInt(v) },
		get: func(c Config) string { return formatInt(c.RetentionMs) },
	},
	{
		// An int: positions in the index are uint32, and Kafka's floor is
		// 14 bytes.
		Def: topicconfig.Def{Name: "segment.bytes", Type: "int",
			Doc:      "Segment size at which the log rolls.",
			Validate: topicconfig.IntAtLeast(14)},
		set: func(c *Config, v string) { c.SegmentBytes = parseInt(v) },
		get: func(c Config) string { return formatInt(c.SegmentBytes) },
	},
	{
		Def: topicconfig.Def{Name: "segment.ms", Type: "long",
			Doc:      "Age at which the active segment rolls.",
			Validate: topicconfig.LongAtLeast(1)},
		set: func(c *Config, v string) { c.SegmentMs = parseInt(v) },
		get: func(c Config) string { return formatInt(c.SegmentMs) },
	},
}

func init() {
	def := DefaultConfig()
	for i := range topicConfigs {
		topicConfigs[i].Default = topicConfigs[i].get(def)
	}
}

func parseInt(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// TopicConfigs returns the definitions of the topic configs the log acts
// on, for the node's table (topicconfig.New). The caller may keep the
// slice; it is a copy.
func TopicConfigs() []topicconfig.Def {
	defs := make([]topicconfig.Def, len(topicConfigs))
	for i, c := range topicConfigs {
		defs[i] = c.Def
	}
	return defs
}

// SetTopicConfig sets the field the topic config name maps to. known is
// false for a name that is not the log's (min.insync.replicas,
// compression.type, ...), which leaves c alone. A value the definition
// refuses is an ErrInvalidConfig naming the config, the value and what is
// allowed.
func (c *Config) SetTopicConfig(name, value string) (known bool, err error) {
	for _, tc := range topicConfigs {
		if tc.Name != name {
			continue
		}
		if err := tc.Validate(value); err != nil {
			return true, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
		}
		tc.set(c, value)
		return true, nil
	}
	return false, nil
}
