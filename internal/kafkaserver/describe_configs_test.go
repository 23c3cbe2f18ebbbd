package kafkaserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
)

func describeConfigsReq(synonyms, docs bool, resources ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources = resources
	req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
	return req
}

func configResource(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
	return r
}

func configsByName(cs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	m := make(map[string]kmsg.DescribeConfigsResponseResourceConfig, len(cs))
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestDescribeTopicConfigsV0(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000"})
	resp := adminCall[*kmsg.DescribeConfigsResponse](t, f,
		describeConfigsReq(false, false, configResource(kmsg.ConfigResourceTypeTopic, "t")), 0)
	rr := resp.Resources[0]
	adminWantCode(t, "t", rr.ErrorCode, nil)
	if rr.ResourceType != kmsg.ConfigResourceTypeTopic || rr.ResourceName != "t" {
		t.Fatalf("resource %v %q", rr.ResourceType, rr.ResourceName)
	}
	if len(rr.Configs) != len(testConfigs.Defs()) {
		t.Fatalf("%d configs, want all %d", len(rr.Configs), len(testConfigs.Defs()))
	}
	for i, c := range rr.Configs {
		def := testConfigs.Defs()[i]
		if c.Name != def.Name {
			t.Fatalf("config %d is %s, want %s (TopicConfigDefs order)", i, c.Name, def.Name)
		}
		override := c.Name == "retention.ms"
		want := def.Default
		if override {
			want = "1000"
		}
		if *c.Value != want || c.IsDefault == override || c.ReadOnly || c.IsSensitive {
			t.Fatalf("%s: value %q default %v read-only %v sensitive %v", c.Name, *c.Value, c.IsDefault, c.ReadOnly, c.IsSensitive)
		}
		// v0 carries no source, synonyms, type or docs.
		if c.Source != -1 || c.ConfigSynonyms != nil || c.ConfigType != 0 || c.Documentation != nil {
			t.Fatalf("%s: v0 fields leaked: %+v", c.Name, c)
		}
	}
}

func TestDescribeTopicConfigsV4(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"cleanup.policy": "compact"})
	resp := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, true,
		configResource(kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy", "segment.bytes", "no.such.config")), 4)
	rr := resp.Resources[0]
	adminWantCode(t, "t", rr.ErrorCode, nil)
	if len(rr.Configs) != 2 {
		t.Fatalf("asked for 2 known configs (and one unknown), got %d", len(rr.Configs))
	}
	got := configsByName(rr.Configs)

	cp := got["cleanup.policy"]
	if *cp.Value != "compact" || cp.Source != kmsg.ConfigSourceDynamicTopicConfig || cp.ConfigType != kmsg.ConfigTypeList {
		t.Fatalf("cleanup.policy %+v", cp)
	}
	if len(cp.ConfigSynonyms) != 2 ||
		cp.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig || *cp.ConfigSynonyms[0].Value != "compact" ||
		cp.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *cp.ConfigSynonyms[1].Value != "delete" {
		t.Fatalf("cleanup.policy synonyms %+v: want the override, then the default", cp.ConfigSynonyms)
	}
	if cp.Documentation == nil || *cp.Documentation == "" {
		t.Fatal("documentation asked for, not given")
	}

	sb := got["segment.bytes"]
	if *sb.Value != "1073741824" || sb.Source != kmsg.ConfigSourceDefaultConfig || sb.ConfigType != kmsg.ConfigTypeInt ||
		len(sb.ConfigSynonyms) != 1 || sb.ConfigSynonyms[0].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes %+v", sb)
	}

	// Without the flags, no synonyms and no docs.
	resp = adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(false, false,
		configResource(kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy")), 4)
	if c := resp.Resources[0].Configs[0]; c.ConfigSynonyms != nil || c.Documentation != nil {
		t.Fatalf("unasked synonyms or docs: %+v", c)
	}
	// An empty, non-null name list asks for nothing.
	resp = adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(false, false,
		configResource(kmsg.ConfigResourceTypeTopic, "t", []string{}...)), 4)
	if n := len(resp.Resources[0].Configs); n != 0 {
		t.Fatalf("empty name list answered %d configs", n)
	}
}

// TestDescribeMinInsyncReplicas: min.insync.replicas' default follows
// the topic's replication factor and is reported as a default (source
// DEFAULT_CONFIG, IsDefault), not as an override nobody set; an override,
// even one above the replication factor (Kafka allows it), is reported as
// the topic's, with the default for its replication factor beneath it.
func TestDescribeMinInsyncReplicas(t *testing.T) {
	f := newAdminFixture(t)
	three := []metadata.Partition{{Replicas: []int32{adminTestNodeID, 2, 3}, ISR: []int32{adminTestNodeID, 2, 3}, Leader: adminTestNodeID}}
	f.ctrl.addTopic("rf1", adminLeaderPartitions(0), nil)
	f.ctrl.addTopic("rf3", three, nil)
	f.ctrl.addTopic("rf3-override", three, map[string]string{"min.insync.replicas": "3"})
	f.ctrl.addTopic("rf1-above", adminLeaderPartitions(0), map[string]string{"min.insync.replicas": "5"})
	for _, tc := range []struct {
		topic, value string
		source       kmsg.ConfigSource
		synonyms     []string // values, most preferred first
	}{
		{"rf1", "1", kmsg.ConfigSourceDefaultConfig, []string{"1"}},
		{"rf3", "2", kmsg.ConfigSourceDefaultConfig, []string{"2"}},
		{"rf3-override", "3", kmsg.ConfigSourceDynamicTopicConfig, []string{"3", "2"}},
		{"rf1-above", "5", kmsg.ConfigSourceDynamicTopicConfig, []string{"5", "1"}},
	} {
		for _, version := range []int16{0, 4} {
			resp := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, true,
				configResource(kmsg.ConfigResourceTypeTopic, tc.topic, "min.insync.replicas")), version)
			rr := resp.Resources[0]
			adminWantCode(t, tc.topic, rr.ErrorCode, nil)
			if len(rr.Configs) != 1 {
				t.Fatalf("%s v%d: %d configs", tc.topic, version, len(rr.Configs))
			}
			c := rr.Configs[0]
			if *c.Value != tc.value {
				t.Fatalf("%s v%d: min.insync.replicas=%q, want %q", tc.topic, version, *c.Value, tc.value)
			}
			if version == 0 { // IsDefault is v0's source
				if c.IsDefault != (tc.source == kmsg.ConfigSourceDefaultConfig) {
					t.Fatalf("%s v0: IsDefault %v, want %v", tc.topic, c.IsDefault, !c.IsDefault)
				}
				continue
			}
			var syns []string
			for _, s := range c.ConfigSynonyms {
				syns = append(syns, *s.Value)
			}
			if c.Source != tc.source || !slices.Equal(syns, tc.synonyms) {
				t.Fatalf("%s: source %v synonyms %v, want %v %v", tc.topic, c.Source, syns, tc.source, tc.synonyms)
			}
			if c.Documentation == nil || !strings.Contains(*c.Documentation, "2 for a topic of 3 or more replicas") {
				t.Fatalf("%s: documentation %v does not say how the default is chosen", tc.topic, adminMsg(c.Documentation))
			}
		}
	}
}

func TestDescribeConfigsErrors(t *testing.T) {
	f := newAdminFixture(t)
	resp := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(false, false,
		configResource(kmsg.ConfigResourceTypeTopic, "missing"),
		configResource(kmsg.ConfigResourceTypeTopic, "bad/name"),
		configResource(kmsg.ConfigResourceTypeBrokerLogger, "1"),
		configResource(kmsg.ConfigResourceType(99), "x"),
		configResource(kmsg.ConfigResourceTypeBroker, "7"),
	), 2)
	for i, want := range []struct {
		code *kerr.Error
		msg  string
	}{
		{kerr.UnknownTopicOrPartition, "missing"},
		{kerr.InvalidTopicException, "bad/name"},
		{kerr.InvalidRequest, "BROKER_LOGGER"},
		{kerr.InvalidRequest, "(99)"},
		{kerr.InvalidRequest, "this is node 1"},
	} {
		rr := resp.Resources[i]
		adminWantCode(t, rr.ResourceName, rr.ErrorCode, want.code)
		if rr.ErrorMessage == nil || !strings.Contains(*rr.ErrorMessage, want.msg) {
			t.Fatalf("resource %d: message %s should contain %q", i, adminMsg(rr.ErrorMessage), want.msg)
		}
		if rr.Configs != nil {
			t.Fatalf("resource %d: configs on an error", i)
		}
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	f := newAdminFixture(t)
	resp := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, false,
		configResource(kmsg.ConfigResourceTypeBroker, "1"),
		configResource(kmsg.ConfigResourceTypeBroker, ""),
	), 1)
	mine := resp.Resources[0]
	adminWantCode(t, "broker 1", mine.ErrorCode, nil)
	got := configsByName(mine.Configs)
	for name, want := range map[string]string{
		"broker.id":                 "1",
		"node.id":                   "1",
		"auto.create.topics.enable": "true",
		"socket.request.max.bytes":  "104857600",
		"connections.max.idle.ms":   "600000",
		"log.dirs":                  "/data/fjord",
	} {
		c, ok := got[name]
		if !ok || *c.Value != want {
			t.Fatalf("%s: got %+v, want %q", name, c, want)
		}
		if !c.ReadOnly || c.Source != kmsg.ConfigSourceStaticBrokerConfig || len(c.ConfigSynonyms) != 1 {
			t.Fatalf("%s: read-only %v source %v synonyms %d; want read-only static", name, c.ReadOnly, c.Source, len(c.ConfigSynonyms))
		}
	}
	adminWantCode(t, "cluster defaults", resp.Resources[1].ErrorCode, nil)
	if n := len(resp.Resources[1].Configs); n != 0 {
		t.Fatalf("cluster-wide dynamic broker defaults: %d, want none", n)
	}

	// A subset without log.dirs does not walk the log directory.
	calls := f.reps.logDirsCalls
	resp = adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(false, false,
		configResource(kmsg.ConfigResourceTypeBroker, "1", "broker.id")), 3)
	if n := len(resp.Resources[0].Configs); n != 1 || f.reps.logDirsCalls != calls {
		t.Fatalf("subset answered %d configs and walked the dir %d times", n, f.reps.logDirsCalls-calls)
	}
	if c := resp.Resources[0].Configs[0]; c.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("broker.id type %v", c.ConfigType)
	}
}

// A dynamic broker config that is set shows with Kafka's sources: the
// broker's own value as DYNAMIC_BROKER_CONFIG with the default as a
// synonym, the default alone as DYNAMIC_DEFAULT_BROKER_CONFIG.
func TestDescribeDynamicBrokerConfigs(t *testing.T) {
	const throttle = "follower.replication.throttled.rate"
	f := newAdminFixture(t)
	describe := func() (mine, defaults map[string]kmsg.DescribeConfigsResponseResourceConfig) {
		resp := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, false,
			configResource(kmsg.ConfigResourceTypeBroker, "1"),
			configResource(kmsg.ConfigResourceTypeBroker, "")), 1)
		return configsByName(resp.Resources[0].Configs), configsByName(resp.Resources[1].Configs)
	}
	if mine, defaults := describe(); len(defaults) != 0 || mine[throttle].Value != nil {
		t.Fatalf("before any is set: node %+v, defaults %+v", mine[throttle], defaults)
	}
	set := func(broker, v string) {
		resp := incAlter(t, f, 1, false, incResource(kmsg.ConfigResourceTypeBroker, broker, incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp(v))))
		adminWantCode(t, "set", resp.Resources[0].ErrorCode, nil)
	}
	set("", "1000")
	mine, defaults := describe()
	if c := defaults[throttle]; c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("the default: %+v", c)
	}
	if c := mine[throttle]; c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly {
		t.Fatalf("node 1 with only the default: %+v", c)
	}
	set("1", "50")
	mine, _ = describe()
	c := mine[throttle]
	if c.Value == nil || *c.Value != "50" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.ConfigSynonyms) != 2 ||
		c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("node 1 with its own: %+v", c)
	}
}

// The connection limits, once set, show with their Kafka types and docs;
// an unset one is not listed.
func TestDescribeConnectionConfigs(t *testing.T) {
	f := newAdminFixture(t)
	resp := incAlter(t, f, 1, false,
		incResource(kmsg.ConfigResourceTypeBroker, "",
			incOp("max.connections", kmsg.IncrementalAlterConfigOpSet, strp("1000")),
			incOp("max.connections.per.ip.overrides", kmsg.IncrementalAlterConfigOpSet, strp("10.0.0.7:200,[::1]:5"))),
		incResource(kmsg.ConfigResourceTypeBroker, "1",
			incOp("max.connections.per.ip", kmsg.IncrementalAlterConfigOpSet, strp("0"))))
	for _, r := range resp.Resources {
		adminWantCode(t, r.ResourceName, r.ErrorCode, nil)
	}
	d := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, true,
		configResource(kmsg.ConfigResourceTypeBroker, "1")), 4)
	got := configsByName(d.Resources[0].Configs)
	for name, want := range map[string]struct {
		value  string
		typ    kmsg.ConfigType
		source kmsg.ConfigSource
	}{
		"max.connections":                  {"1000", kmsg.ConfigTypeInt, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"max.connections.per.ip":           {"0", kmsg.ConfigTypeInt, kmsg.ConfigSourceDynamicBrokerConfig},
		"max.connections.per.ip.overrides": {"10.0.0.7:200,[::1]:5", kmsg.ConfigTypeString, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
	} {
		c, ok := got[name]
		if !ok || c.Value == nil || *c.Value != want.value || c.ConfigType != want.typ || c.Source != want.source || c.ReadOnly {
			t.Errorf("%s: %+v, want %q type %v source %v", name, c, want.value, want.typ, want.source)
			continue
		}
		if c.Documentation == nil || *c.Documentation != metadata.DynamicBrokerConfigs[name].Doc {
			t.Errorf("%s: documentation %v", name, c.Documentation)
		}
	}
	if _, ok := got["follower.replication.throttled.rate"]; ok {
		t.Error("an unset dynamic config is listed")
	}
}

// The free-space thresholds show the node's static values until a
// dynamic one is set, which then wins with its own source.
func TestDescribeFreeSpaceConfigs(t *testing.T) {
	f := newAdminFixture(t)
	f.s.cfg.LogDirFreeSpaceWarn, f.s.cfg.LogDirFreeSpaceRefuse = "10%", "256MiB"
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		d := adminCall[*kmsg.DescribeConfigsResponse](t, f, describeConfigsReq(true, true,
			configResource(kmsg.ConfigResourceTypeBroker, "1")), 4)
		return configsByName(d.Resources[0].Configs)
	}
	got := describe()
	for name, want := range map[string]string{"log.dir.free.space.warn": "10%", "log.dir.free.space.refuse": "256MiB"} {
		c, ok := got[name]
		if !ok || c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceStaticBrokerConfig || c.ReadOnly {
			t.Errorf("%s: %+v, want %q from the static config, not read-only (it may be set dynamically)", name, c, want)
		}
	}
	resp := incAlter(t, f, 1, false, incResource(kmsg.ConfigResourceTypeBroker, "1",
		incOp("log.dir.free.space.refuse", kmsg.IncrementalAlterConfigOpSet, strp("1GiB"))))
	adminWantCode(t, "set", resp.Resources[0].ErrorCode, nil)
	got = describe()
	if c := got["log.dir.free.space.refuse"]; c.Value == nil || *c.Value != "1GiB" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("after SET: %+v, want 1GiB from the dynamic broker config", c)
	}
	if c := got["log.dir.free.space.warn"]; c.Value == nil || *c.Value != "10%" {
		t.Errorf("warn after the refusal's SET: %+v, want the static 10%%", c)
	}
}
