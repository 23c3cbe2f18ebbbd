package metadata

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestIsInternalTopic(t *testing.T) {
	for _, name := range append(InternalTopics(), "__consumer_offsets", "__transaction_state", "__share_group_state", "__fjord_http_idempotency") {
		if !IsInternalTopic(name) {
			t.Errorf("IsInternalTopic(%q) = false", name)
		}
	}
	// Kafka's names are case sensitive and never trimmed: these are other
	// topics (or invalid names), and must not be refused as internal,
	// nor the real ones let through by a look-alike.
	for _, name := range []string{
		"", "orders", "__Consumer_Offsets", "__CONSUMER_OFFSETS", " __consumer_offsets", "__consumer_offsets ",
		"__consumer_offsets\n", "__consumer.offsets", "_consumer_offsets", "__consumer_offsets2",
		"__FJORD_HTTP_IDEMPOTENCY", "__fjord_http_idempotency.", "__debezium-heartbeat.db", "__",
	} {
		if IsInternalTopic(name) {
			t.Errorf("IsInternalTopic(%q) = true", name)
		}
	}
}

func TestCheckInternalTopicConfigs(t *testing.T) {
	offsets := map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}
	dedup := map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000"}
	cases := []struct {
		name      string
		topic     string
		old, next map[string]string
		refused   string // "" when allowed
	}{
		{"offsets: policy to delete", ConsumerOffsetsTopic, offsets, map[string]string{"cleanup.policy": "delete"}, "must stay compacted"},
		{"offsets: policy gains delete", ConsumerOffsetsTopic, offsets, map[string]string{"cleanup.policy": "compact,delete"}, "retention would fall from unbounded to 604800000 ms"},
		// Legacy AlterConfigs replaces every override: leaving
		// cleanup.policy out sets it back to the default, delete.
		{"offsets: policy override dropped", ConsumerOffsetsTopic, offsets, map[string]string{"segment.bytes": "1048576"}, "must stay compacted"},
		{"transactions: policy to delete", TransactionStateTopic, offsets, map[string]string{"cleanup.policy": "delete"}, "must stay compacted"},
		{"offsets: retention under compact removes nothing", ConsumerOffsetsTopic, offsets,
			map[string]string{"cleanup.policy": "compact", "retention.ms": "1", "retention.bytes": "1"}, ""},
		{"offsets: other configs", ConsumerOffsetsTopic, offsets,
			map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "flush.policy": "interval"}, ""},
		{"offsets: repaired after a bad change", ConsumerOffsetsTopic, map[string]string{"cleanup.policy": "delete"}, offsets, ""},

		{"dedup: shorter retention", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "60000"}, "from 3600000 ms to 60000 ms"},
		{"dedup: byte bound", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000", "retention.bytes": "1024"}, "from unbounded to 1024 bytes"},
		{"dedup: compaction off", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "delete", "retention.ms": "3600000"}, "must stay compacted"},
		{"dedup: longer retention (a larger window)", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "7200000"}, ""},
		{"dedup: retention override dropped (default 7 days)", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "compact,delete"}, ""},
		{"dedup: delete policy off", HTTPIdempotencyTopic, dedup, map[string]string{"cleanup.policy": "compact"}, ""},
		{"dedup: unchanged", HTTPIdempotencyTopic, dedup, dedup, ""},

		{"ordinary topic", "orders", offsets, map[string]string{"cleanup.policy": "delete", "retention.ms": "1"}, ""},
		{"look-alike of an internal topic", "__Consumer_Offsets", offsets, map[string]string{"cleanup.policy": "delete"}, ""},
	}
	for _, c := range cases {
		err := testImage.CheckInternalTopicConfigs(c.topic, c.old, c.next)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refused != "" && err == nil:
			t.Errorf("%s: allowed, want refused (%s)", c.name, c.refused)
		case c.refused != "" && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), `"`+c.topic+`"`)):
			t.Errorf("%s: %v; want INVALID_CONFIG naming %q and containing %q", c.name, err, c.topic, c.refused)
		}
	}
}
