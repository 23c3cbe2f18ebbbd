package main

import (
	"strings"
	"testing"
)

// Regression: --partitions 0 and --replication-factor 0 silently took
// the node's defaults; altering to the current count did nothing and
// said nothing; and a count over the node's maximum was refused with
// kerr's canned "Number of partitions is below 1", after a warning that
// the topic was growing.
func TestPartitionAndReplicationCounts(t *testing.T) {
	topic := topicName("counts")
	ok(t, "", "topic", "create", topic, "--partitions", "3")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`invalid argument "0" for "--partitions" flag: allowed: an integer from 1 to 2147483647 (default: the node's num-partitions)`,
			[]string{"topic", "create", topic + "-x", "--partitions", "0"}},
		{`invalid argument "0" for "--replication-factor" flag: allowed: an integer from 1 to 32767 (default: the node's default-replication-factor)`,
			[]string{"topic", "create", topic + "-x", "--replication-factor", "0"}},
		{`"--partitions" flag: allowed: an integer from 1`, []string{"topic", "create", topic + "-x", "--partitions", "-1"}},
		{`"--partitions" flag: allowed: an integer from 1`, []string{"topic", "create", topic + "-x", "--partitions", "2147483648"}},
		{`"--replication-factor" flag: allowed: an integer from 1`, []string{"topic", "create", topic + "-x", "--replication-factor", "32768"}},
		{`creating topic "` + topic + `-x": INVALID_PARTITIONS: 10001 partitions (allowed: 1 to 10000, or -1 for the default 1)`,
			[]string{"topic", "create", topic + "-x", "--partitions", "10001"}},
		{`creating topic "` + topic + `-x": INVALID_PARTITIONS: 2147483647 partitions (allowed: 1 to 10000`,
			[]string{"topic", "create", topic + "-x", "--partitions", "2147483647"}},
		{`creating topic "` + topic + `-x": INVALID_REPLICATION_FACTOR: replication factor 2 is larger than the number of registered brokers (1, 1 of them live)`,
			[]string{"topic", "create", topic + "-x", "--replication-factor", "2"}},
		{`INVALID_REPLICATION_FACTOR: replication factor 32767 is larger than the number of registered brokers (1, 1 of them live)`,
			[]string{"topic", "create", topic + "-x", "--replication-factor", "32767"}},
		{`--partitions 3: topic ` + topic + ` already has 3 partitions; give a larger count to add partitions`,
			[]string{"topic", "alter", topic, "--partitions", "3"}},
		{`--partitions 3: topic ` + topic + ` already has 3 partitions`,
			[]string{"topic", "alter", topic, "--partitions", "3", "--config", "retention.ms=1000"}},
		{`--partitions 2: topic ` + topic + ` has 3 partitions and partitions cannot be removed`,
			[]string{"topic", "alter", topic, "--partitions", "2", "--config", "retention.ms=1000"}},
		{`adding partitions to "` + topic + `": INVALID_PARTITIONS: 10001 partitions (at most 10000)`,
			[]string{"topic", "alter", topic, "--partitions", "10001"}},
		{`adding partitions to "` + topic + `": INVALID_PARTITIONS: 2147483647 partitions (at most 10000)`,
			[]string{"topic", "alter", topic, "--partitions", "2147483647"}},
		{`"--partitions" flag: allowed: an integer from 1 to 2147483647`, []string{"topic", "alter", topic, "--partitions", "0"}},
	} {
		r := fails(t, tc.want, append(tc.args, "--brokers", brokers(t))...)
		for _, wrong := range []string{"below 1", "warning"} {
			if strings.Contains(r.stderr, wrong) {
				t.Errorf("fjord %s says %q:\n%s", strings.Join(tc.args, " "), wrong, r.stderr)
			}
		}
	}
	// Nothing was created or changed by the refused commands.
	r := ok(t, "", "topic", "describe", topic)
	if !strings.Contains(r.stdout, "Partitions: 3\n") || !strings.Contains(r.stdout, "Configs: (defaults)\n") {
		t.Errorf("a refused alter changed the topic:\n%s", r.stdout)
	}
	fails(t, `topic "`+topic+`-x" does not exist`, "topic", "describe", topic+"-x", "--brokers", brokers(t))
	// Without the flags: the node's defaults.
	r = ok(t, "", "topic", "create", topic+"-defaults")
	if !strings.Contains(r.stdout, "(1 partition, replication factor 1)") {
		t.Errorf("create without counts: %s", r.stdout)
	}
}
