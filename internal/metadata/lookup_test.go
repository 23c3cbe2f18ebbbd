package metadata

import (
	"strconv"
	"testing"

	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// TestTopicConfigDefaultFollowsReplicationFactor: a definition with
// DefaultFor (min.insync.replicas, in the node's table) answers the
// default for the topic's replication factor, which TopicConfig returns
// unless the topic overrides it; the others answer their Default.
func TestTopicConfigDefaultFollowsReplicationFactor(t *testing.T) {
	byRF := topicconfig.Def{
		Name: "test.by.rf", Default: "none", Type: "int", Doc: "The replication factor, doubled.",
		Validate: topicconfig.AnyValue, DefaultFor: func(rf int) string { return strconv.Itoa(2 * rf) },
	}
	img := Empty(topicconfig.New(storage.TopicConfigs(), KafkaTopicConfigs(), []topicconfig.Def{byRF}))
	withReplicas := func(rf int, configs map[string]string) *Topic {
		reps := make([]int32, rf)
		return &Topic{Name: "t", Configs: configs, Partitions: []Partition{{Replicas: reps}, {Replicas: reps}}}
	}
	for _, tc := range []struct {
		topic      *Topic
		dflt, want string
	}{
		{&Topic{Name: "no partitions"}, "0", "0"},
		{withReplicas(1, nil), "2", "2"},
		{withReplicas(3, nil), "6", "6"},
		{withReplicas(3, map[string]string{"test.by.rf": "7"}), "6", "7"},
	} {
		if got := img.TopicConfigDefault(tc.topic, "test.by.rf"); got != tc.dflt {
			t.Errorf("rf %d: default %q, want %q", tc.topic.ReplicationFactor(), got, tc.dflt)
		}
		if got := img.TopicConfig(tc.topic, "test.by.rf"); got != tc.want {
			t.Errorf("rf %d, overrides %v: value %q, want %q", tc.topic.ReplicationFactor(), tc.topic.Configs, got, tc.want)
		}
	}
	if got := img.TopicConfigDefault(withReplicas(3, nil), "cleanup.policy"); got != "delete" {
		t.Errorf("cleanup.policy default %q, want delete whatever the replication factor", got)
	}
	if got := img.TopicConfigDefault(withReplicas(3, nil), "no.such.config"); got != "" {
		t.Errorf("unknown config's default %q", got)
	}
}
