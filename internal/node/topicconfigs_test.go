package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// TestTopicConfigDefs: the node's table, as DescribeConfigs lists it (by
// name), with every owner's definitions: storage's, replica's
// min.insync.replicas, and metadata's refused and inert Kafka configs.
func TestTopicConfigDefs(t *testing.T) {
	want := []string{
		"cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "fjord.migrated.to", "fjord.migrating.from",
		"flush.messages", "flush.ms", "flush.policy", "follower.replication.throttled.replicas",
		"index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes",
		"local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
		"message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
		"message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
		"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
		"remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
		"segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
	}
	var names []string
	for _, d := range topicConfigs.Defs() {
		names = append(names, d.Name)
		if err := validateTopicConfig(d.Name, d.Default); err != nil {
			t.Errorf("default of %s is invalid: %v", d.Name, err)
		}
		for rf := 0; d.DefaultFor != nil && rf <= 40; rf++ {
			if err := validateTopicConfig(d.Name, d.DefaultFor(rf)); err != nil {
				t.Errorf("default of %s for replication factor %d is invalid: %v", d.Name, rf, err)
			}
		}
		if d.Doc == "" || d.Type == "" {
			t.Errorf("%s lacks doc or type", d.Name)
		}
		if got, ok := topicConfigs.Lookup(d.Name); !ok || got.Name != d.Name {
			t.Errorf("topicConfigs.Lookup(%s) = %v, %v", d.Name, got, ok)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("configs = %v\nwant      %v", names, want)
	}
	if _, ok := topicConfigs.Lookup("retention"); ok {
		t.Fatal("LookupTopicConfig found an unknown name")
	}
	for _, name := range []string{"min.compaction.lag.ms", "preallocate", "segment.jitter.ms"} {
		if d, _ := topicConfigs.Lookup(name); !d.Inert || !strings.HasPrefix(d.Doc, "Not acted on") {
			t.Errorf("%s: inert %v, doc %q; want it marked as not acted on", name, d.Inert, d.Doc)
		}
	}
	if d, _ := topicConfigs.Lookup("retention.ms"); d.Inert {
		t.Error("retention.ms marked inert")
	}
}

func TestValidateTopicConfig(t *testing.T) {
	tests := []struct {
		name  string
		good  []string
		bad   []string
		allow string // the error names what is allowed
	}{
		{"cleanup.policy", []string{"delete", "compact", "compact,delete", "delete,compact"},
			[]string{"", "Delete", "compact,", "compact, delete", "delete,delete", "none"}, "allowed: delete, compact, compact,delete"},
		{"compression.type", []string{"producer"}, []string{"gzip", "zstd", "uncompressed", ""}, "never recompresses"},
		{"delete.retention.ms", []string{"0", "86400000", "9223372036854775807"}, []string{"-1", "1.5", "x", "9223372036854775808"}, "0 to 9223372036854775807"},
		{"flush.ms", []string{"1", "1000"}, []string{"0", "-1"}, "1 to"},
		{"flush.policy", []string{"ack", "interval"}, []string{"always", "ACK", ""}, "allowed: ack, interval"},
		{"index.interval.bytes", []string{"0", "4096", "2147483647"}, []string{"-1", "2147483648"}, "0 to 2147483647"},
		{"max.message.bytes", []string{"0", "1048588"}, []string{"-1", " 1"}, "0 to 2147483647"},
		{"message.timestamp.type", []string{"CreateTime", "LogAppendTime"}, []string{"createtime", "now"}, "CreateTime, LogAppendTime"},
		{"min.cleanable.dirty.ratio", []string{"0", "0.5", "1", "1e-3"}, []string{"-0.1", "1.01", "NaN", "x"}, "0 to 1"},
		{"min.insync.replicas", []string{"1", "2"}, []string{"0", "-1"}, "1 to 2147483647"},
		{"retention.bytes", []string{"-1", "0", "1073741824"}, []string{"-2"}, "-1 to"},
		{"retention.ms", []string{"-1", "0", "604800000"}, []string{"-2", "forever"}, "-1 to"},
		{"segment.bytes", []string{"14", "1073741824", "2147483647"}, []string{"13", "0", "2147483648"}, "14 to 2147483647"},
		{"segment.ms", []string{"1", "604800000"}, []string{"0"}, "1 to"},
		{"unclean.leader.election.enable", []string{"false", "true"}, []string{"yes", "", "TRUE"}, "allowed: true, false"},
		// Inert configs (stored, not acted on) are still checked as
		// Kafka checks them, so a typo is refused.
		{"min.compaction.lag.ms", []string{"0", "3600000"}, []string{"-1", "1h"}, "0 to"},
		{"preallocate", []string{"true", "false"}, []string{"yes", ""}, "allowed: true, false"},
		{"remote.storage.enable", []string{"false"}, []string{"true"}, "allowed: false"},
		{"segment.index.bytes", []string{"4", "10485760"}, []string{"3", "2147483648"}, "4 to 2147483647"},
	}
	for _, tc := range tests {
		for _, v := range tc.good {
			if err := validateTopicConfig(tc.name, v); err != nil {
				t.Errorf("%s=%q: %v", tc.name, v, err)
			}
		}
		for _, v := range tc.bad {
			err := validateTopicConfig(tc.name, v)
			if err == nil {
				t.Errorf("%s=%q accepted", tc.name, v)
				continue
			}
			// The message names the config, the value and what is allowed.
			wantValue := fmt.Sprintf("%s=%q", tc.name, v)
			if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), wantValue) || !strings.Contains(err.Error(), tc.allow) {
				t.Errorf("%s=%q: error %q; want INVALID_CONFIG naming %s and %q", tc.name, v, err, wantValue, tc.allow)
			}
		}
	}
	err := validateTopicConfig("retention.mss", "1")
	if !errors.Is(err, metadata.ErrInvalidConfig) || !strings.Contains(err.Error(), `unknown topic config "retention.mss"`) {
		t.Errorf("unknown config: %v", err)
	}
}

// validateTopicConfig validates as the controller and the edge do: with
// an image built over the node's table.
func validateTopicConfig(name, value string) error {
	return metadata.Empty(topicConfigs).ValidateTopicConfig(name, value)
}
