package metadata

import (
	"fmt"
	"slices"

	"github.com/fjordmq/fjord/internal/topicconfig"
)

// ConfigDef describes one topic config Fjord understands (see
// topicconfig.Def).
type ConfigDef = topicconfig.Def

// KafkaTopicConfigs returns the definitions of the Kafka topic configs
// nothing in Fjord acts on: the one it refuses at any value but the
// default, and the inert ones. They are defined here, not at the edge,
// because this is where every value is accepted or refused however it
// arrives (the Kafka protocol, the HTTP API, the metadata log on
// replay). The log's settings are storage's (storage.TopicConfigs),
// min.insync.replicas is the replica manager's (replica.TopicConfigs)
// and unclean.leader.election.enable the controller's
// (controller.TopicConfigs); node puts the four in one table (topicconfig.New) and hands it to
// Empty. The caller may keep the slice; it is a copy.
func KafkaTopicConfigs() []topicconfig.Def {
	defs := slices.Clone(refusedTopicConfigs)
	for _, d := range inertTopicConfigs {
		d.Inert = true
		defs = append(defs, d)
	}
	return defs
}

// refusedTopicConfigs are Kafka topic configs Fjord supports only at their
// default: the controller refuses any other value, saying why.
var refusedTopicConfigs = []topicconfig.Def{
	{
		Name: "compression.type", Default: "producer", Type: "string",
		Doc:      "Only producer: batches are stored as the producer compressed them.",
		Validate: topicconfig.Only("producer", "Fjord stores batches as the producer compressed them and never recompresses"),
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

// LookupTopicConfig returns the definition of a topic config.
func (img *Image) LookupTopicConfig(name string) (ConfigDef, bool) {
	return img.TopicConfigs.Lookup(name)
}

// ValidateTopicConfig checks one topic config override. The error wraps
// ErrInvalidConfig and names the config, the value and what is allowed.
// Values are taken exactly as given (no trimming), so what is stored is what
// the storage layer parses.
func (img *Image) ValidateTopicConfig(name, value string) error {
	if err := img.TopicConfigs.Check(name, value); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

// SplitList splits a list config's value as Kafka does ("a,b" -> [a b],
// "" -> none).
func SplitList(value string) []string { return topicconfig.SplitList(value) }
