package offsetstopic

import (
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// The offsets topic is Kafka's: its name, compacted (a group's newest
// commit per partition is what must survive), with small segments so the
// cleaner gets to it, and the configs are ones the controller accepts.
func TestSpec(t *testing.T) {
	s := Spec(DefaultPartitions, 2)
	if s.Name != "__consumer_offsets" || s.NumPartitions != 50 || s.ReplicationFactor != 2 {
		t.Fatalf("spec %+v", s)
	}
	if s.Configs["cleanup.policy"] != "compact" {
		t.Errorf("cleanup.policy %q, want compact", s.Configs["cleanup.policy"])
	}
	// The table node assembles (node/topicconfigs.go).
	img := metadata.Empty(topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), metadata.KafkaTopicConfigs()))
	for name, value := range s.Configs {
		if err := img.ValidateTopicConfig(name, value); err != nil {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
	if err := img.CheckInternalTopicConfigs(s.Name, nil, s.Configs); err != nil {
		t.Errorf("the spec's own configs break the internal topic's rules: %v", err)
	}
}
