package offsetstopic

import (
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
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
	for name, value := range s.Configs {
		if err := metadata.ValidateTopicConfig(name, value); err != nil {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
	if err := metadata.CheckInternalTopicConfigs(s.Name, nil, s.Configs); err != nil {
		t.Errorf("the spec's own configs break the internal topic's rules: %v", err)
	}
}
