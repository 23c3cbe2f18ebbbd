package replica

import (
	"fmt"
	"strconv"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// minInsyncReplicasConfig is the one topic config the replica manager
// acts on itself: the log knows nothing of replicas. The log's own
// settings are storage's (storage.TopicConfigs).
//
// Its default depends on the topic's replication factor
// (defaultMinInsyncReplicas). That default is computed wherever it is
// read, from the topic's replicas, rather than written as an override
// when the topic is created, so DescribeConfigs can say what is true: the
// value in force is a default (source DEFAULT_CONFIG), not a setting
// someone made. A written override would read as DYNAMIC_TOPIC_CONFIG,
// and tools that reconcile a topic's overrides with a spec (Terraform,
// Strimzi) would delete it, silently dropping the topic to 1; deleting
// an override of the computed default, by contrast, lands on 2 again.
// The default also follows the replication factor should it ever
// change.
var minInsyncReplicasConfig = topicconfig.Def{
	Name: "min.insync.replicas", Default: strconv.Itoa(defaultMinInsync), Type: "int",
	Doc: "Smallest ISR an acks=all produce is accepted with. Default: 2 for a topic of 3 or more replicas " +
		"(an acknowledged write then survives the loss of a broker), else 1 (Kafka's default is always 1).",
	Validate:   topicconfig.IntAtLeast(1),
	DefaultFor: func(rf int) string { return strconv.Itoa(defaultMinInsyncReplicas(rf)) },
}

// defaultMinInsync is Kafka's default min.insync.replicas, and a new
// partition's until its topic's config is applied.
const defaultMinInsync = 1

// defaultMinInsyncReplicas is min.insync.replicas for a topic of rf
// replicas that does not set it: 2 from 3 replicas on, so acks=all means
// two copies and one broker may be lost (or restarted) without stopping
// writes; 1 below, since 2 of 2 would stop acks=all writes whenever
// either broker is down, trading availability for no gain in what
// survives a single loss.
func defaultMinInsyncReplicas(rf int) int {
	if rf >= 3 {
		return 2
	}
	return defaultMinInsync
}

// TopicConfigs returns the definitions of the topic configs the replica
// manager acts on, for the node's table (topicconfig.New).
func TopicConfigs() []topicconfig.Def {
	return []topicconfig.Def{minInsyncReplicasConfig}
}

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
		if _, err := cfg.SetTopicConfig(name, value); err != nil {
			return base, fmt.Errorf("topic %s: %w", topic.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return base, fmt.Errorf("topic %s: %w", topic.Name, err)
	}
	return cfg, nil
}

// topicSettings are the topic configs the replica manager keeps on each
// partition, under Partition.mu.
type topicSettings struct {
	minInsync int
	// migratedTo: metadata.MigratedToConfig, the destination of a
	// migration that has cut over ("" for none).
	migratedTo string
}

// minInsyncReplicas returns the topic's min.insync.replicas: its
// override, else the default for its replication factor. An override
// above the replication factor is Kafka's behaviour too: the topic
// takes acks=1 writes only, and acks=all gets NOT_ENOUGH_REPLICAS.
func minInsyncReplicas(topic *metadata.Topic) (int, error) {
	def := minInsyncReplicasConfig
	value, ok := topic.Configs[def.Name]
	if !ok {
		return defaultMinInsyncReplicas(topic.ReplicationFactor()), nil
	}
	if err := def.Validate(value); err != nil {
		return defaultMinInsyncReplicas(topic.ReplicationFactor()), fmt.Errorf("%w: topic %s: %s=%q: %v", storage.ErrInvalidConfig, topic.Name, def.Name, value, err)
	}
	n, _ := strconv.Atoi(value)
	return n, nil
}
