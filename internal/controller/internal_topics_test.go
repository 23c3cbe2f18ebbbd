package controller_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Issue 12: the controller, where every delete, partition change and
// config change is decided, refuses those that would lose an internal
// topic's state, whatever surface asked (the Kafka listener, the HTTP
// gateway or the CLI through it).
func TestInternalTopicsRefused(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	compact := "compact"
	ts := create(t, c,
		controlplane.CreateTopic{Name: "__consumer_offsets", NumPartitions: 50, ReplicationFactor: -1,
			Configs: map[string]string{"cleanup.policy": "compact"}},
		controlplane.CreateTopic{Name: "__fjord_http_idempotency", NumPartitions: 1, ReplicationFactor: -1,
			Configs: map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000"}},
		topic("__Consumer_Offsets", 1), topic("orders", 1))
	internal := []string{"__consumer_offsets", "__fjord_http_idempotency", "__transaction_state"}

	isInternalRefusal := func(what string, err error, name string, want error) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), "internal") {
			t.Errorf("%s %s: %v; want %v naming it as internal", what, name, err, want)
		}
	}
	for i, err := range c.DeleteTopics(ctxT(t), internal) {
		isInternalRefusal("DeleteTopics", err, internal[i], controlplane.ErrInvalidTopic)
	}
	names, errs := c.DeleteTopicsByID(ctxT(t), []metadata.UUID{ts[0].ID, ts[1].ID})
	for i, err := range errs {
		isInternalRefusal("DeleteTopicsByID", err, names[i], controlplane.ErrInvalidTopic)
	}
	for _, name := range internal {
		isInternalRefusal("CreatePartitions", c.CreatePartitions(ctxT(t), name, 60, nil, false), name, controlplane.ErrInvalidTopic)
	}
	del := func(name string) controlplane.ConfigOp {
		return controlplane.ConfigOp{Name: name, Op: controlplane.ConfigDelete}
	}
	set := func(name, value string) controlplane.ConfigOp {
		return controlplane.ConfigOp{Name: name, Op: controlplane.ConfigSet, Value: &value}
	}
	for _, alter := range []struct {
		topic      string
		ops        []controlplane.ConfigOp
		replaceAll bool
	}{
		{"__consumer_offsets", []controlplane.ConfigOp{set("cleanup.policy", "delete")}, false},
		{"__consumer_offsets", []controlplane.ConfigOp{del("cleanup.policy")}, false},
		{"__consumer_offsets", []controlplane.ConfigOp{set("segment.bytes", "1048576")}, true},
		{"__fjord_http_idempotency", []controlplane.ConfigOp{set("retention.ms", "1000")}, false},
		{"__fjord_http_idempotency", []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigSubtract, Value: &compact}}, false},
	} {
		err := c.AlterConfigs(ctxT(t), alter.topic, alter.ops, alter.replaceAll, true)
		isInternalRefusal("AlterConfigs (validate only)", err, alter.topic, controlplane.ErrInvalidConfig)
		err = c.AlterConfigs(ctxT(t), alter.topic, alter.ops, alter.replaceAll, false)
		isInternalRefusal("AlterConfigs", err, alter.topic, controlplane.ErrInvalidConfig)
	}
	if err := c.AlterConfigs(ctxT(t), "__fjord_http_idempotency", []controlplane.ConfigOp{set("retention.ms", "7200000")}, false, false); err != nil {
		t.Errorf("raising the idempotency index's retention: %v", err)
	}

	img := c.Image()
	for i, name := range []string{"__consumer_offsets", "__fjord_http_idempotency"} {
		got, ok := img.Topic(name)
		if !ok || got.ID != ts[i].ID || len(got.Partitions) != len(ts[i].Partitions) {
			t.Fatalf("%s after the refusals: %+v (found %v)", name, got, ok)
		}
	}
	if got, _ := img.Topic("__consumer_offsets"); got.Configs["cleanup.policy"] != "compact" {
		t.Errorf("__consumer_offsets configs: %v", got.Configs)
	}

	// A name that differs by case is another topic, deleted like any.
	for i, err := range c.DeleteTopics(ctxT(t), []string{"__Consumer_Offsets", "orders"}) {
		if err != nil {
			t.Errorf("delete topic %d: %v", i, err)
		}
	}
	// One that collides with an internal name in metrics would keep the
	// internal topic from being created.
	for _, r := range c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic("__transaction.state", 1)}, false) {
		if !errors.Is(r.Err, controlplane.ErrInvalidTopic) || !strings.Contains(r.Err.Error(), `"__transaction_state"`) {
			t.Errorf("create __transaction.state: %v", r.Err)
		}
	}
}
