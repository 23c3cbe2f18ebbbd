package main

import (
	"strings"
	"testing"
	"time"
)

func TestResetOffsetsAllTopicsByDuration(t *testing.T) {
	n := startGroupNode(t)
	for _, topic := range []string{"a", "b", "c"} {
		n.ok(t, "", "topic", "create", topic, "--partitions", "2")
	}
	old, recent := time.Now().Add(-2*time.Hour), time.Now().Add(-30*time.Minute)
	n.produceAt(t, "a", 0, old, "a0", "a1", "a2")
	n.produceAt(t, "a", 0, recent, "a3", "a4")
	n.produceAt(t, "a", 1, old, "a'0")
	n.produceAt(t, "b", 1, old, "b0", "b1")
	n.produceAt(t, "b", 1, recent, "b2")
	n.produceAt(t, "c", 0, old, "c0")
	// The group has offsets for a (both partitions) and b:1 only.
	n.ok(t, "", "group", "reset-offsets", "g", "--topic", "a", "--topic", "b:1", "--to-latest", "--execute")
	latest := map[topicPartition]int64{tp("a", 0): 5, tp("a", 1): 1, tp("b", 1): 3}
	n.wantCommitted(t, "g", latest)

	// --all-topics: every partition the group has an offset for, and no
	// other. --by-duration D: the first record at or after now-D (the
	// log end where there is none), as kafka-consumer-groups.
	r := n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", "1h")
	if rows := tableRows(r.stdout, "a"); len(rows) != 2 || len(tableRows(r.stdout, "b")) != 1 || len(tableRows(r.stdout, "c")) != 0 {
		t.Errorf("--all-topics plan:\n%s", r.stdout)
	}
	n.wantCommitted(t, "g", latest) // no --execute
	hourAgo := map[topicPartition]int64{tp("a", 0): 3, tp("a", 1): 1, tp("b", 1): 2}
	for _, d := range []string{"1h", "PT1H", "pt60m", "PT3600S", "59m59.5s"} {
		n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--to-latest", "--execute")
		n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", d, "--execute")
		n.wantCommitted(t, "g", hourAgo)
	}
	n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", "P1D", "--execute")
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("a", 0): 0, tp("a", 1): 0, tp("b", 1): 0})
	n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", "P1DT2H30M", "--execute")
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("a", 0): 0, tp("a", 1): 0, tp("b", 1): 0})
	// 0: now, after every record: the log end.
	n.ok(t, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", "0s", "--execute")
	n.wantCommitted(t, "g", latest)

	reset := []string{"group", "reset-offsets", "g"}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--dry-run and --execute exclude each other: --dry-run only prints the plan, --execute commits it", append(reset, "--topic", "a", "--to-earliest", "--dry-run", "--execute")},
		{"--topic and --all-topics exclude each other: give one", append(reset, "--topic", "a", "--all-topics", "--to-earliest")},
		{"e.g. --topic orders:0,2; or --all-topics for every partition the group has an offset for", append(reset, "--to-earliest")},
		{`group "nobody" has no committed offsets for --all-topics to reset; name the partitions with --topic`,
			[]string{"group", "reset-offsets", "nobody", "--all-topics", "--to-earliest", "--execute"}},
		{"--to-earliest and --by-duration exclude each other", append(reset, "--all-topics", "--to-earliest", "--by-duration", "1h")},
		{`--by-duration "-1h": want a duration back from now, e.g. 1h30m or Kafka's PT1H30M (P1D is a day)`, append(reset, "--all-topics", "--by-duration", "-1h")},
		{`--by-duration "-PT1H": want a duration`, append(reset, "--all-topics", "--by-duration", "-PT1H")},
		{`--by-duration "soon": want a duration`, append(reset, "--all-topics", "--by-duration", "soon")},
		{`--by-duration "": want a duration`, append(reset, "--all-topics", "--by-duration", "")},
		{`--by-duration "P": want a duration`, append(reset, "--all-topics", "--by-duration", "P")},
		{`--by-duration "PT": want a duration`, append(reset, "--all-topics", "--by-duration", "PT")},
		{`--by-duration "P1H": want a duration`, append(reset, "--all-topics", "--by-duration", "P1H")},
		{`--by-duration "PT1D": want a duration`, append(reset, "--all-topics", "--by-duration", "PT1D")},
		{`--by-duration "99999999999h": want a duration`, append(reset, "--all-topics", "--by-duration", "99999999999h")},
		{`--by-duration "P99999999999D": want a duration`, append(reset, "--all-topics", "--by-duration", "P99999999999D")},
		{`--by-duration "P36500D" goes back to before 1970-01-01T00:00:00Z`, append(reset, "--all-topics", "--by-duration", "P36500D")},
	} {
		r := n.fails(t, tc.want, tc.args...)
		if r.stdout != "" {
			t.Errorf("stdout %q", r.stdout)
		}
	}
	n.wantCommitted(t, "g", latest)
	n.wantCommitted(t, "nobody", map[topicPartition]int64{})
	r = fjord(t, "", "group", "reset-offsets", "--help")
	for _, flag := range []string{"--all-topics", "--by-duration", "--execute", "--dry-run"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("--help does not name %s", flag)
		}
	}
}
