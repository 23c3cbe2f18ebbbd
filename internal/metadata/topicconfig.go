package metadata

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ConfigDef describes one topic config Fjord understands. Names and
// defaults are Kafka's (flush.policy is Fjord's own); ranges match
// storage.Config.Validate, so a value accepted here never makes a log
// refuse its config later.
type ConfigDef struct {
	Name    string
	Default string
	// Type is Kafka's config type name: "boolean", "string", "int",
	// "long", "double" or "list".
	Type string
	Doc  string
	// Inert: accepted, stored and described so Kafka tooling that sets it
	// (Terraform and Strimzi specs, configs copied between clusters) works,
	// but Fjord does not act on it yet; Doc says so.
	Inert bool

	validate func(string) error
}

// TopicConfigDefs lists every supported topic config, by name.
var TopicConfigDefs = []ConfigDef{
	{
		Name: "cleanup.policy", Default: "delete", Type: "list",
		Doc:      "delete: drop old segments by retention; compact: keep the newest record per key; or both.",
		validate: validateCleanupPolicy,
	},
	{
		Name: "compression.type", Default: "producer", Type: "string",
		Doc: "Only producer: batches are stored as the producer compressed them.",
		validate: func(v string) error {
			if v == "producer" {
				return nil
			}
			return fmt.Errorf("not supported: Fjord stores batches as the producer compressed them and never recompresses (allowed: producer)")
		},
	},
	{
		Name: "delete.retention.ms", Default: "86400000", Type: "long",
		Doc:      "How long a compacted topic keeps tombstones.",
		validate: longAtLeast(0),
	},
	{
		Name: "flush.ms", Default: "1000", Type: "long",
		Doc:      "Background fsync period under flush.policy=interval.",
		validate: longAtLeast(1),
	},
	{
		Name: "flush.policy", Default: "ack", Type: "string",
		Doc:      "ack: fsync (group committed) before acknowledging; interval: fsync every flush.ms, durability by replication.",
		validate: oneOf("ack", "interval"),
	},
	{
		Name: "index.interval.bytes", Default: "4096", Type: "int",
		Doc:      "Bytes between sparse offset index entries.",
		validate: intAtLeast(0),
	},
	{
		Name: "max.message.bytes", Default: "1048588", Type: "int",
		Doc:      "Largest record batch accepted.",
		validate: intAtLeast(0),
	},
	{
		Name: "message.timestamp.type", Default: "CreateTime", Type: "string",
		Doc:      "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's time.",
		validate: oneOf("CreateTime", "LogAppendTime"),
	},
	{
		Name: "min.cleanable.dirty.ratio", Default: "0.5", Type: "double",
		Doc:      "Share of uncleaned bytes at which the cleaner compacts a log.",
		validate: validateRatio,
	},
	{
		Name: "min.insync.replicas", Default: "1", Type: "int",
		Doc:      "Smallest ISR an acks=all produce is accepted with.",
		validate: intAtLeast(1),
	},
	{
		Name: "retention.bytes", Default: "-1", Type: "long",
		Doc:      "Size bound per partition; -1 for none.",
		validate: longAtLeast(-1),
	},
	{
		Name: "retention.ms", Default: "604800000", Type: "long",
		Doc:      "How long records are kept; -1 forever.",
		validate: longAtLeast(-1),
	},
	{
		Name: "segment.bytes", Default: "1073741824", Type: "int",
		Doc:      "Segment size at which the log rolls.",
		validate: intAtLeast(14),
	},
	{
		Name: "segment.ms", Default: "604800000", Type: "long",
		Doc:      "Age at which the active segment rolls.",
		validate: longAtLeast(1),
	},
	{
		Name: "unclean.leader.election.enable", Default: "false", Type: "boolean",
		Doc: "Only false: a new leader comes only from the ISR.",
		validate: func(v string) error {
			if v == "false" {
				return nil
			}
			return fmt.Errorf("not supported: a new leader comes only from the ISR (allowed: false)")
		},
	},
}

// inertTopicConfigs are Kafka topic configs Fjord accepts and stores but
// does not act on yet (see ConfigDef.Inert). Their values are checked as
// Kafka checks them, so a typo is still refused. Each doc says what Fjord
// does instead.
var inertTopicConfigs = []ConfigDef{
	{Name: "file.delete.delay.ms", Default: "60000", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on: deleted segments are removed once no reader holds them."},
	{Name: "flush.messages", Default: "9223372036854775807", Type: "long", validate: longAtLeast(1),
		Doc: "Not acted on: flush.policy decides fsyncs (ack: before every acknowledgement, group committed)."},
	{Name: "follower.replication.throttled.replicas", Default: "", Type: "list", validate: anyValue,
		Doc: "Not acted on: replication is not throttled."},
	{Name: "leader.replication.throttled.replicas", Default: "", Type: "list", validate: anyValue,
		Doc: "Not acted on: replication is not throttled."},
	{Name: "local.retention.bytes", Default: "-2", Type: "long", validate: longAtLeast(-2),
		Doc: "Not acted on: there is no tiered storage; retention.bytes applies."},
	{Name: "local.retention.ms", Default: "-2", Type: "long", validate: longAtLeast(-2),
		Doc: "Not acted on: there is no tiered storage; retention.ms applies."},
	{Name: "max.compaction.lag.ms", Default: "9223372036854775807", Type: "long", validate: longAtLeast(1),
		Doc: "Not acted on yet: the cleaner runs by min.cleanable.dirty.ratio only."},
	{Name: "message.downconversion.enable", Default: "true", Type: "boolean", validate: oneOf("true", "false"),
		Doc: "Not acted on: Fjord never down-converts; fetches below v4 are not served."},
	{Name: "message.format.version", Default: "3.0-IV1", Type: "string", validate: anyValue,
		Doc: "Not acted on: batches are always record batch v2 (deprecated in Kafka too)."},
	{Name: "message.timestamp.after.max.ms", Default: "9223372036854775807", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "message.timestamp.before.max.ms", Default: "9223372036854775807", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "message.timestamp.difference.max.ms", Default: "9223372036854775807", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "min.compaction.lag.ms", Default: "0", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on yet: any record below the cleaning bound may be compacted."},
	{Name: "preallocate", Default: "false", Type: "boolean", validate: oneOf("true", "false"),
		Doc: "Not acted on: segments grow as written."},
	{Name: "remote.storage.enable", Default: "false", Type: "boolean", validate: oneOf("false"),
		Doc: "Only false: there is no tiered storage."},
	{Name: "segment.index.bytes", Default: "10485760", Type: "int", validate: intAtLeast(4),
		Doc: "Not acted on: indexes grow with their segment."},
	{Name: "segment.jitter.ms", Default: "0", Type: "long", validate: longAtLeast(0),
		Doc: "Not acted on: segments roll at segment.ms exactly."},
}

func init() {
	for _, d := range inertTopicConfigs {
		d.Inert = true
		TopicConfigDefs = append(TopicConfigDefs, d)
	}
	slices.SortFunc(TopicConfigDefs, func(a, b ConfigDef) int { return strings.Compare(a.Name, b.Name) })
	topicConfigByName = make(map[string]int, len(TopicConfigDefs))
	for i, d := range TopicConfigDefs {
		topicConfigByName[d.Name] = i
	}
}

func anyValue(string) error { return nil }

// topicConfigByName indexes TopicConfigDefs (built by init, with the
// inert configs merged in and everything sorted by name).
var topicConfigByName map[string]int

// LookupTopicConfig returns the definition of a topic config.
func LookupTopicConfig(name string) (ConfigDef, bool) {
	i, ok := topicConfigByName[name]
	if !ok {
		return ConfigDef{}, false
	}
	return TopicConfigDefs[i], true
}

// ValidateTopicConfig checks one topic config override. The error wraps
// ErrInvalidConfig and names the config, the value and what is allowed.
// Values are taken exactly as given (no trimming), so what is stored is what
// the storage layer parses.
func ValidateTopicConfig(name, value string) error {
	def, ok := LookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
	}
	if err := def.validate(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
	}
	return nil
}

// SplitList splits a list config's value as Kafka does ("a,b" -> [a b],
// "" -> none).
func SplitList(value string) []string {
	if value == "" {
		return nil
	}
	return strings.Split(value, ",")
}

func validateCleanupPolicy(v string) error {
	const allowed = "allowed: delete, compact, compact,delete"
	items := SplitList(v)
	if len(items) == 0 {
		return fmt.Errorf("empty (%s)", allowed)
	}
	seen := map[string]bool{}
	for _, it := range items {
		if it != "delete" && it != "compact" {
			return fmt.Errorf("unknown policy %q (%s)", it, allowed)
		}
		if seen[it] {
			return fmt.Errorf("policy %q listed twice (%s)", it, allowed)
		}
		seen[it] = true
	}
	return nil
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("not allowed (allowed: %s)", strings.Join(allowed, ", "))
	}
}

func intAtLeast(lo int64) func(string) error {
	return integerAtLeast(lo, 32)
}

func longAtLeast(lo int64) func(string) error {
	return integerAtLeast(lo, 64)
}

func integerAtLeast(lo int64, bits int) func(string) error {
	hi := int64(math.MaxInt64)
	if bits == 32 {
		hi = math.MaxInt32
	}
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < lo {
			return fmt.Errorf("not an integer in range (allowed: %d to %d)", lo, hi)
		}
		return nil
	}
}

func validateRatio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return fmt.Errorf("not a number in range (allowed: 0 to 1)")
	}
	return nil
}
