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
var minInsyncReplicasConfig = topicconfig.Def{
	Name: "min.insync.replicas", Default: strconv.Itoa(defaultMinInsync), Type: "int",
	Doc:      "Smallest ISR an acks=all produce is accepted with.",
	Validate: topicconfig.IntAtLeast(1),
}

// defaultMinInsync is Kafka's default min.insync.replicas, and a new
// partition's until its topic's config is applied.
const defaultMinInsync = 1

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

// minInsyncReplicas returns the topic's min.insync.replicas.
func minInsyncReplicas(topic *metadata.Topic) (int, error) {
	def := minInsyncReplicasConfig
	value, ok := topic.Configs[def.Name]
	if !ok {
		value = def.Default
	}
	if err := def.Validate(value); err != nil {
		return defaultMinInsync, fmt.Errorf("%w: topic %s: %s=%q: %v", storage.ErrInvalidConfig, topic.Name, def.Name, value, err)
	}
	n, _ := strconv.Atoi(value)
	return n, nil
}
