package controller_test

import (
	"errors"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// MarkTopicKeyed commits one TopicKeyedRecord per topic: a repeat
// answers nil and commits nothing; an unknown id is UNKNOWN_TOPIC_ID and
// the zero id INVALID_REQUEST, nothing committed; the mark stays across
// growth and config changes, and goes with the topic.
func TestMarkTopicKeyed(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	created := create(t, c, topic("k", 1), topic("other", 1))
	k := created[0]
	if c.Image().MetadataVersion < metadata.KeyedTopicsMetadataVersion {
		t.Fatalf("a new log is at metadata version %d", c.Image().MetadataVersion)
	}
	if err := c.MarkTopicKeyed(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	img := c.Image()
	if !img.Topics["k"].Keyed || img.Topics["other"].Keyed {
		t.Fatalf("after marking k: k %v, other %v", img.Topics["k"].Keyed, img.Topics["other"].Keyed)
	}
	for _, tc := range []struct {
		name string
		id   metadata.UUID
		want error
	}{
		{"a repeat", k.ID, nil},
		{"an unknown id", metadata.UUID{0xde, 0xad}, controlplane.ErrUnknownTopicID},
		{"the zero id", metadata.UUID{}, controlplane.ErrInvalidRequest},
	} {
		before := c.Image().Offset
		if err := c.MarkTopicKeyed(ctx, tc.id); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if after := c.Image().Offset; after != before {
			t.Errorf("%s committed: offset %d -> %d", tc.name, before, after)
		}
	}
	if err := c.CreatePartitions(ctx, "k", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	v := "60000"
	if err := c.AlterConfigs(ctx, "k", []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: &v}}, false, false); err != nil {
		t.Fatal(err)
	}
	if tp := c.Image().Topics["k"]; !tp.Keyed || len(tp.Partitions) != 3 {
		t.Fatalf("after growth and a config change: keyed %v, %d partitions", tp.Keyed, len(tp.Partitions))
	}
	if errs := c.DeleteTopics(ctx, []string{"k"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := c.MarkTopicKeyed(ctx, k.ID); !errors.Is(err, controlplane.ErrUnknownTopicID) {
		t.Fatalf("marking a deleted topic: %v", err)
	}
	if again := create(t, c, topic("k", 1))[0]; c.Image().Topics["k"].Keyed || again.ID == k.ID {
		t.Fatal("a topic created again under a keyed topic's name is keyed")
	}
}
