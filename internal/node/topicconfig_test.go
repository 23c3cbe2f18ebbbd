package node

import (
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// TestTopicConfigTableOwners: the table the controller and the edge read
// (metadata.TopicConfigDefs) has each owner's definitions as the owner
// states them: storage's log settings and the replica manager's
// min.insync.replicas, with the same default, type, doc and validation.
// metadata cannot import replica, so it holds a copy of
// min.insync.replicas; this test is what keeps the copy honest.
func TestTopicConfigTableOwners(t *testing.T) {
	probes := []string{"", "x", "-2", "-1", "0", "1", "2", "14", "0.5", "2147483647", "2147483648",
		"delete", "compact", "compact,delete", "ack", "interval", "CreateTime", "LogAppendTime"}
	for _, owner := range [][]topicconfig.Def{storage.TopicConfigs(), replica.TopicConfigs()} {
		for _, want := range owner {
			got, ok := metadata.LookupTopicConfig(want.Name)
			if !ok {
				t.Errorf("%s: not in the table", want.Name)
				continue
			}
			if got.Default != want.Default || got.Type != want.Type || got.Doc != want.Doc || got.Inert != want.Inert {
				t.Errorf("%s: table has %q %s %q inert=%v, owner %q %s %q inert=%v", want.Name,
					got.Default, got.Type, got.Doc, got.Inert, want.Default, want.Type, want.Doc, want.Inert)
			}
			for _, v := range probes {
				if (got.Validate(v) == nil) != (want.Validate(v) == nil) {
					t.Errorf("%s=%q: table and owner disagree", want.Name, v)
				}
			}
		}
	}
}
