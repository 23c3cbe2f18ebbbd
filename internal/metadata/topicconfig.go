package metadata

import (
	"fmt"

	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// ConfigDef describes one topic config Fjord understands (see
// topicconfig.Def).
type ConfigDef = topicconfig.Def

// topicConfigs is the one table of topic configs: the controller
// validates with it, the image answers defaults from it, and DescribeConfigs
// lists it. Each setting is defined where it acts: the log's settings by
// storage (storage.TopicConfigs; their defaults are DefaultConfig's, and
// the replica manager sets them on a log with the same entries),
// min.insync.replicas by the replica manager (replica.TopicConfigs).
//
// The Kafka configs Fjord refuses at any value but the default, and the
// inert ones, are defined here: nothing below acts on them, and this is
// where every value is accepted or refused, whichever way it arrives (the
// Kafka protocol, the HTTP API, the metadata log on replay).
//
// metadata cannot import replica (it imports metadata), so this table
// holds a copy of min.insync.replicas, and node's
// TestTopicConfigTableOwners holds the copy to replica's definition.
var topicConfigs = topicconfig.New(
	storage.TopicConfigs(),
	[]topicconfig.Def{{
		Name: "min.insync.replicas", Default: "1", Type: "int",
		Doc:      "Smallest ISR an acks=all produce is accepted with.",
		Validate: topicconfig.IntAtLeast(1),
	}},
	refusedTopicConfigs,
	inert(inertTopicConfigs),
)

// TopicConfigDefs lists every supported topic config, by name. Read it,
// never modify it.
var TopicConfigDefs = topicConfigs.Defs()

// refusedTopicConfigs are Kafka topic configs Fjord supports only at their
// default: the controller refuses any other value, saying why.
var refusedTopicConfigs = []topicconfig.Def{
	{
		Name: "compression.type", Default: "producer", Type: "string",
		Doc:      "Only producer: batches are stored as the producer compressed them.",
		Validate: topicconfig.Only("producer", "Fjord stores batches as the producer compressed them and never recompresses"),
	},
	{
		Name: "unclean.leader.election.enable", Default: "false", Type: "boolean",
		Doc:      "Only false: a new leader comes only from the ISR.",
		Validate: topicconfig.Only("false", "a new leader comes only from the ISR"),
	},
}

// inertTopicConfigs are Kafka topic configs Fjord accepts and stores but
// does not act on yet (see ConfigDef.Inert). Their values are checked as
// Kafka checks them, so a typo is still refused. Each doc says what Fjord
// does instead.
var inertTopicConfigs = []topicconfig.Def{
	{Name: "file.delete.delay.ms", Default: "60000", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on: deleted segments are removed once no reader holds them."},
	{Name: "flush.messages", Default: "9223372036854775807", Type: "long", Validate: topicconfig.LongAtLeast(1),
		Doc: "Not acted on: flush.policy decides fsyncs (ack: before every acknowledgement, group committed)."},
	{Name: "follower.replication.throttled.replicas", Default: "", Type: "list", Validate: topicconfig.AnyValue,
		Doc: "Not acted on: replication is not throttled."},
	{Name: "leader.replication.throttled.replicas", Default: "", Type: "list", Validate: topicconfig.AnyValue,
		Doc: "Not acted on: replication is not throttled."},
	{Name: "local.retention.bytes", Default: "-2", Type: "long", Validate: topicconfig.LongAtLeast(-2),
		Doc: "Not acted on: there is no tiered storage; retention.bytes applies."},
	{Name: "local.retention.ms", Default: "-2", Type: "long", Validate: topicconfig.LongAtLeast(-2),
		Doc: "Not acted on: there is no tiered storage; retention.ms applies."},
	{Name: "max.compaction.lag.ms", Default: "9223372036854775807", Type: "long", Validate: topicconfig.LongAtLeast(1),
		Doc: "Not acted on yet: the cleaner runs by min.cleanable.dirty.ratio only."},
	{Name: "message.downconversion.enable", Default: "true", Type: "boolean", Validate: topicconfig.OneOf("true", "false"),
		Doc: "Not acted on: Fjord never down-converts; fetches below v4 are not served."},
	{Name: "message.format.version", Default: "3.0-IV1", Type: "string", Validate: topicconfig.AnyValue,
		Doc: "Not acted on: batches are always record batch v2 (deprecated in Kafka too)."},
	{Name: "message.timestamp.after.max.ms", Default: "9223372036854775807", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "message.timestamp.before.max.ms", Default: "9223372036854775807", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "message.timestamp.difference.max.ms", Default: "9223372036854775807", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on yet: producer timestamps are not bounded."},
	{Name: "min.compaction.lag.ms", Default: "0", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on yet: any record below the cleaning bound may be compacted."},
	{Name: "preallocate", Default: "false", Type: "boolean", Validate: topicconfig.OneOf("true", "false"),
		Doc: "Not acted on: segments grow as written."},
	{Name: "remote.storage.enable", Default: "false", Type: "boolean", Validate: topicconfig.OneOf("false"),
		Doc: "Only false: there is no tiered storage."},
	{Name: "segment.index.bytes", Default: "10485760", Type: "int", Validate: topicconfig.IntAtLeast(4),
		Doc: "Not acted on: indexes grow with their segment."},
	{Name: "segment.jitter.ms", Default: "0", Type: "long", Validate: topicconfig.LongAtLeast(0),
		Doc: "Not acted on: segments roll at segment.ms exactly."},
}

func inert(defs []topicconfig.Def) []topicconfig.Def {
	for i := range defs {
		defs[i].Inert = true
	}
	return defs
}

// LookupTopicConfig returns the definition of a topic config.
func LookupTopicConfig(name string) (ConfigDef, bool) {
	return topicConfigs.Lookup(name)
}

// ValidateTopicConfig checks one topic config override. The error wraps
// ErrInvalidConfig and names the config, the value and what is allowed.
// Values are taken exactly as given (no trimming), so what is stored is what
// the storage layer parses.
func ValidateTopicConfig(name, value string) error {
	if err := topicConfigs.Check(name, value); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

// SplitList splits a list config's value as Kafka does ("a,b" -> [a b],
// "" -> none).
func SplitList(value string) []string { return topicconfig.SplitList(value) }
