package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// On one node every partition is led by its only, preferred replica:
// each election is answered "not needed", every partition is named for
// --topic, and --all-topic-partitions names none. The elections
// themselves, on three nodes, are the cluster tests'.
func TestClusterElectLeaders(t *testing.T) {
	topic := topicName("elect")
	ok(t, "", "topic", "create", topic, "--partitions", "2")

	r := ok(t, "", "cluster", "elect-leaders", "--election-type", "preferred", "--topic", topic)
	for _, want := range []string{"TOPIC", topic + "  0", topic + "  1", "not needed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("elect-leaders --topic: output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = ok(t, "", "cluster", "elect-leaders", "--election-type", "PREFERRED", "--topic", topic, "--partition", "1", "-o", "json")
	var rep electionReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0] != (electionOutcome{Topic: topic, Partition: 1, Result: "not needed", Message: rep.Partitions[0].Message}) {
		t.Errorf("-o json: %+v, want %s-1 not needed", rep, topic)
	}
	r = ok(t, "", "cluster", "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
	if !strings.Contains(r.stdout, "No partition needed an election.") {
		t.Errorf("--all-topic-partitions: %s", r.stdout)
	}
	// An unclean election of a partition that has a leader is not needed.
	r = ok(t, "", "cluster", "elect-leaders", "--election-type", "unclean", "--topic", topic, "--partition", "0")
	if !strings.Contains(r.stdout, "not needed") {
		t.Errorf("unclean of a led partition: %s", r.stdout)
	}
}

func TestClusterElectLeadersBadInput(t *testing.T) {
	topic := topicName("elect-bad")
	ok(t, "", "topic", "create", topic)
	b := brokers(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--election-type is required", []string{"--topic", topic}},
		{`--election-type "sideways"`, []string{"--election-type", "sideways", "--topic", topic}},
		{"not both", []string{"--election-type", "preferred", "--topic", topic, "--all-topic-partitions"}},
		{"name the partitions", []string{"--election-type", "preferred"}},
		{"--partition needs --topic", []string{"--election-type", "preferred", "--partition", "0"}},
		{`"--partition" flag: allowed: an integer from 0`, []string{"--election-type", "preferred", "--topic", topic, "--partition", "-1"}},
		{"one partition at a time", []string{"--election-type", "unclean", "--topic", topic}},
		{"one partition at a time", []string{"--election-type", "unclean", "--all-topic-partitions"}},
		{"does not exist", []string{"--election-type", "preferred", "--topic", "no-such-topic"}},
		{`invalid argument "x" for "--partition"`, []string{"--election-type", "preferred", "--topic", topic, "--partition", "x"}},
	} {
		fails(t, tc.want, append([]string{"cluster", "elect-leaders", "--brokers", b}, tc.args...)...)
	}
	// A partition the topic does not have: the node's answer, printed,
	// and the command fails.
	r := fjord(t, "", "cluster", "elect-leaders", "--brokers", b, "--election-type", "preferred", "--topic", topic, "--partition", "7")
	if r.code == 0 || !strings.Contains(r.stdout, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(r.stderr, "1 of 1 elections could not be made") {
		t.Errorf("partition 7 of a one-partition topic: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
