package storage

import (
	"reflect"
	"testing"
)

// TestTopicConfigsCoverConfig: every Config field a topic can set has a
// definition, setting every definition's default onto a zero Config gives
// DefaultConfig, and each definition sets exactly one field. A new field
// without a definition fails here (or must be listed as not a topic's).
func TestTopicConfigsCoverConfig(t *testing.T) {
	notTopics := map[string]bool{
		"ProducerIDExpirationMs": true, // a broker config in Kafka
	}
	// A valid value other than the default, per config.
	other := map[string]string{
		"cleanup.policy":            "compact",
		"delete.retention.ms":       "1",
		"flush.ms":                  "2",
		"flush.policy":              "interval",
		"index.interval.bytes":      "3",
		"max.message.bytes":         "4",
		"message.timestamp.type":    "LogAppendTime",
		"min.cleanable.dirty.ratio": "0.25",
		"retention.bytes":           "5",
		"retention.ms":              "6",
		"segment.bytes":             "70",
		"segment.ms":                "8",
	}
	var fromDefaults Config
	covered := map[string]string{}
	for _, tc := range topicConfigs {
		if tc.Default != tc.get(DefaultConfig()) {
			t.Errorf("%s: default %q, DefaultConfig has %q", tc.Name, tc.Default, tc.get(DefaultConfig()))
		}
		if known, err := fromDefaults.SetTopicConfig(tc.Name, tc.Default); !known || err != nil {
			t.Fatalf("%s=%s: known %v, %v", tc.Name, tc.Default, known, err)
		}
		v, ok := other[tc.Name]
		if !ok {
			t.Fatalf("%s: no other value in this test", tc.Name)
		}
		cfg := DefaultConfig()
		if _, err := cfg.SetTopicConfig(tc.Name, v); err != nil {
			t.Fatalf("%s=%s: %v", tc.Name, v, err)
		}
		if got := tc.get(cfg); got != v {
			t.Errorf("%s: set %q, get %q", tc.Name, v, got)
		}
		changed := changedFields(DefaultConfig(), cfg)
		if len(changed) != 1 {
			t.Fatalf("%s=%s changed fields %v, want one", tc.Name, v, changed)
		}
		if prev, dup := covered[changed[0]]; dup {
			t.Errorf("%s and %s both set %s", prev, tc.Name, changed[0])
		}
		covered[changed[0]] = tc.Name
	}
	if fromDefaults != DefaultConfig() {
		t.Errorf("defaults set on a zero Config:\n%+v\nwant DefaultConfig\n%+v", fromDefaults, DefaultConfig())
	}
	for i := range reflect.TypeFor[Config]().NumField() {
		name := reflect.TypeFor[Config]().Field(i).Name
		if covered[name] == "" && !notTopics[name] {
			t.Errorf("Config.%s has no topic config definition (topicconfig.go)", name)
		}
	}
	if known, err := new(Config).SetTopicConfig("min.insync.replicas", "2"); known || err != nil {
		t.Errorf("min.insync.replicas: known %v, %v; it is not the log's", known, err)
	}
}

func changedFields(a, b Config) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var names []string
	for i := range va.NumField() {
		if !va.Field(i).Equal(vb.Field(i)) {
			names = append(names, va.Type().Field(i).Name)
		}
	}
	return names
}
