package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every plan Kafka's kafka-reassign-partitions.sh refuses, and the ones
// it leaves to the cluster or ignores, are refused whole with the bad
// entry named; the plans it takes are read as it reads them.
func TestReassignmentPlanParse(t *testing.T) {
	for _, tc := range []struct {
		name, plan, want string
	}{
		{"not JSON", `{"version":1,"partitions":[{"topic":"t",}]}`, `not valid JSON: invalid character '}' looking for beginning of object key string (line 1, column 41)`},
		{"a syntax error on line 3", "{\n\"version\": 1,\n\"partitions\": [}\n", "(line 3, column 16)"},
		{"empty", ``, "empty: want a JSON object"},
		{"a list, not an object", `[1,2]`, "want a JSON object, not an array"},
		{"two documents", `{"version":1} {}`, "more than one JSON value"},
		{"an unknown version", `{"version":2,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`, "version 2 is not supported: the plan format is version 1"},
		{"a version that is not a number", `{"version":"one","partitions":[]}`, `version "one" is not supported: the plan format is version 1`},
		{"a version as a string", `{"version":"1","partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`, `version "1" is not supported`},
		{"a partition as a string", `{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}`, `partitions[0] (topic t): "partition" "0": want a partition number`},
		{"a topic that is not a string", `{"version":1,"partitions":[{"topic":7,"partition":0,"replicas":[1]}]}`, `partitions[0]: "topic" is a number, want a string`},
		{"a partition list that is not a list", `{"version":1,"partitions":{"topic":"t"}}`, `"partitions" is an object, want a list`},
		{"a broker id as a string", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}`, `partitions[0] (t-0): "replicas": "2" is not a broker id`},
		{"no partitions", `{"version":1}`, "no partitions to reassign"},
		{"an empty partition list", `{"version":1,"partitions":[]}`, "no partitions to reassign"},
		{"an unknown top-level field", `{"version":1,"partitions":[],"throttle":5}`, `unknown field "throttle"`},
		{"an entry that is not an object", `{"version":1,"partitions":[7]}`, "partitions[0]: want a JSON object, not a number"},
		{"no topic", `{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`, `partitions[0]: no "topic"`},
		{"an empty topic", `{"version":1,"partitions":[{"topic":"","partition":0,"replicas":[1]}]}`, `partitions[0]: no "topic"`},
		{"no partition", `{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}`, `partitions[0] (topic t): no "partition"`},
		{"a negative partition", `{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}`, `partitions[0] (topic t): "partition" -1: want a partition number, 0 or more`},
		{"a partition beyond int32", `{"version":1,"partitions":[{"topic":"t","partition":2147483648,"replicas":[1]}]}`, `"partition" 2147483648: want a partition number`},
		{"a fractional partition", `{"version":1,"partitions":[{"topic":"t","partition":1.5,"replicas":[1]}]}`, `"partition" 1.5: want a partition number`},
		{"no replicas", `{"version":1,"partitions":[{"topic":"t","partition":0}]}`, `partitions[0] (t-0): no "replicas"`},
		{"null replicas", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":null}]}`, `partitions[0] (t-0): no "replicas"`},
		{"empty replicas", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`, `partitions[0] (t-0): "replicas" is empty: a partition needs at least one replica (to stop a reassignment, use --cancel)`},
		{"a negative broker id", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,-2]}]}`, `partitions[0] (t-0): "replicas": -2 is not a broker id`},
		{"a broker twice", `{"version":1,"partitions":[{"topic":"t","partition":3,"replicas":[1,2,1]}]}`, `partitions[0] (t-3): "replicas" names broker 1 twice`},
		{"replicas as strings", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":"1,2"}]}`, `partitions[0]: "replicas" is a string, want a list`},
		{"a misspelt field", `{"version":1,"partitions":[{"topic":"t","partition":0,"replica":[1]}]}`, `partitions[0]: unknown field "replica"`},
		{"a partition listed twice", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"u","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`,
			"partitions[2] (t-0): the partition is listed twice (first at partitions[0])"},
		{"a log directory", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","/data"]}]}`, `partitions[0] (t-0): "log_dirs" "/data": only "any" is supported`},
		{"log directories for other replicas", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`, `"log_dirs" has 1 entries for 2 replicas`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := parseReassignmentPlan("p.json", []byte(tc.plan))
			if err == nil {
				t.Fatalf("accepted: %+v", plan)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "reassignment plan p.json: ") {
				t.Fatalf("error %q, want it to start with the plan's name and say %q", err, tc.want)
			}
		})
	}

	// What Kafka's tool writes (--generate's proposal, with "log_dirs"
	// of "any") and what it reads without a version.
	for _, plan := range []string{
		`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1,2],"log_dirs":["any","any","any"]},{"topic":"t","partition":1,"replicas":[0]}]}`,
		`{"partitions":[{"topic":"t","partition":0,"replicas":[3,1,2]},{"topic":"t","partition":1,"replicas":[0]}]}`,
	} {
		got, err := parseReassignmentPlan("p.json", []byte(plan))
		want := []planPartition{{Topic: "t", Partition: 0, Replicas: []int32{3, 1, 2}}, {Topic: "t", Partition: 1, Replicas: []int32{0}}}
		if err != nil || !slices.EqualFunc(got, want, func(a, b planPartition) bool {
			return a.Topic == b.Topic && a.Partition == b.Partition && slices.Equal(a.Replicas, b.Replicas)
		}) {
			t.Errorf("%s: %+v, %v; want %+v", plan, got, err, want)
		}
	}
}

// Usage errors and bad plans fail before the command connects (the
// brokers named are a closed port), with one line on stderr; a bad
// throttle is refused, never ignored.
func TestTopicReassignBadInput(t *testing.T) {
	addr := closedPort(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(dir, "twice.json")
	if err := os.WriteFile(twice, []byte(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		want  string
		stdin string
		args  []string
	}{
		{"give one action: --execute, --verify, --cancel (each with --reassignment-json-file) or --list", "", []string{"--reassignment-json-file", good}},
		{"give one action, not --execute and --verify", "", []string{"--execute", "--verify", "--reassignment-json-file", good}},
		{"give one action, not --cancel and --list", "", []string{"--cancel", "--list"}},
		{"--execute needs --reassignment-json-file FILE (or - for stdin)", "", []string{"--execute"}},
		{"--verify needs --reassignment-json-file", "", []string{"--verify"}},
		{"--list lists every reassignment in progress: it takes no --reassignment-json-file", "", []string{"--list", "--reassignment-json-file", good}},
		{"--additional goes with --execute", "", []string{"--verify", "--additional", "--reassignment-json-file", good}},
		{"--throttle goes with --execute (--verify removes it once the moves are done)", "", []string{"--verify", "--throttle", "1000", "--reassignment-json-file", good}},
		{"--throttle 0: want the bytes per second each receiving broker may copy, at least 1", "", []string{"--execute", "--throttle", "0", "--reassignment-json-file", good}},
		{"--throttle -1: want the bytes per second", "", []string{"--execute", "--throttle", "-1", "--reassignment-json-file", good}},
		{`invalid argument "50MB" for "--throttle" flag`, "", []string{"--execute", "--throttle", "50MB", "--reassignment-json-file", good}},
		{`invalid argument "99999999999999999999" for "--throttle" flag`, "", []string{"--execute", "--throttle", "99999999999999999999", "--reassignment-json-file", good}},
		{"--replica-alter-log-dirs-throttle is not supported: Fjord has one log directory per node", "", []string{"--execute", "--replica-alter-log-dirs-throttle", "1000", "--reassignment-json-file", good}},
		{"reading --reassignment-json-file: open " + filepath.Join(dir, "missing.json"), "", []string{"--execute", "--reassignment-json-file", filepath.Join(dir, "missing.json")}},
		{"reassignment plan " + twice + ": partitions[1] (t-0): the partition is listed twice (first at partitions[0])", "", []string{"--execute", "--reassignment-json-file", twice}},
		{`reassignment plan the plan on stdin: partitions[0] (t-0): "replicas" names broker 2 twice`,
			`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,2]}]}`, []string{"--execute", "--reassignment-json-file", "-"}},
		{"reassignment plan the plan on stdin: empty: want a JSON object", "", []string{"--cancel", "--reassignment-json-file", "-"}},
		{`reassignment plan the plan on stdin: partitions[0] (t-0): "replicas" is empty`,
			`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`, []string{"--verify", "--reassignment-json-file", "-"}},
		{"unknown flag: --generate", "", []string{"--generate"}},
	} {
		r := fjord(t, tc.stdin, append([]string{"topic", "reassign", "--brokers", addr}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("fjord topic reassign %s: exit %d, stderr %q; want exit 1 before connecting, saying %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
			t.Errorf("fjord topic reassign %s: error is %d lines, want one:\n%s", strings.Join(tc.args, " "), n+1, r.stderr)
		}
	}
	// A good plan gets as far as connecting.
	fails(t, "cannot reach a Fjord node at "+addr, "topic", "reassign", "--brokers", addr, "--execute", "--reassignment-json-file", good)
}

// On the shared node (broker 1 alone): nothing is in progress; a plan
// naming a broker that does not exist is the node's
// INVALID_REPLICA_ASSIGNMENT, printed with its message, and the command
// fails; so is a partition the cluster does not have; a plan that asks
// for what a partition has is accepted, complete at once, and there is
// nothing to cancel. The moves themselves, between brokers, are the
// cluster tests'.
func TestTopicReassignOnANode(t *testing.T) {
	topic := topicName("reassign")
	ok(t, "", "topic", "create", topic, "--partitions", "2")

	r := ok(t, "", "topic", "reassign", "--list")
	if strings.TrimSpace(r.stdout) != "No partition reassignments in progress." {
		t.Errorf("--list: %q", r.stdout)
	}
	doc := decodeJSON(t, ok(t, "", "topic", "reassign", "--list", "-o", "json").stdout)
	if l := list(t, wantKeys(t, "reassign --list", doc, "reassignments")["reassignments"]); len(l) != 0 {
		t.Errorf("--list -o json: %v, want []", l)
	}

	dir := t.TempDir()
	write := func(name, plan string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	b := brokers(t)

	// Broker 9 does not exist.
	bad := write("bad.json", `{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[1,9]}]}`)
	r = fjord(t, "", "topic", "reassign", "--brokers", b, "--execute", "--reassignment-json-file", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "INVALID_REPLICA_ASSIGNMENT") || !strings.Contains(r.stdout, "broker 9") ||
		!strings.Contains(r.stderr, "1 of 1 reassignments could not be started") || !strings.Contains(r.stderr, "INVALID_REPLICA_ASSIGNMENT") ||
		!strings.Contains(r.stderr, "broker 9") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("a plan naming broker 9: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The rollback plan is printed first, with the partition's replicas.
	if !strings.Contains(r.stdout, `{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[1]}]}`) {
		t.Errorf("no rollback plan:\n%s", r.stdout)
	}
	r = fjord(t, "", "topic", "reassign", "--brokers", b, "--execute", "-o", "json", "--reassignment-json-file", bad)
	if r.code != 1 {
		t.Errorf("-o json of a refused plan: exit %d", r.code)
	}
	doc = decodeJSON(t, r.stdout)
	wantKeys(t, "reassign --execute", doc, "current", "partitions")
	wantKeys(t, "reassign --execute current", doc["current"], "version", "partitions")
	for _, p := range list(t, doc["partitions"]) {
		m := wantKeys(t, "reassign --execute partition", p, "topic", "partition", "replicas", "result", "message")
		if m["result"] != "INVALID_REPLICA_ASSIGNMENT" || !strings.Contains(m["message"].(string), "broker 9") {
			t.Errorf("-o json: %v", m)
		}
	}

	// A partition the topic lacks, and a topic that does not exist.
	missing := write("missing.json", `{"version":1,"partitions":[{"topic":"`+topic+`","partition":5,"replicas":[1]},{"topic":"no-such-topic","partition":0,"replicas":[1]}]}`)
	r = fjord(t, "", "topic", "reassign", "--brokers", b, "--execute", "--reassignment-json-file", missing)
	if r.code != 1 || strings.Count(r.stdout, "UNKNOWN_TOPIC_OR_PARTITION") != 2 || !strings.Contains(r.stderr, "2 of 2 reassignments could not be started") {
		t.Errorf("missing partitions: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = fjord(t, "", "topic", "reassign", "--brokers", b, "--verify", "--reassignment-json-file", missing)
	if r.code != 1 || strings.Count(r.stdout, "no such partition") != 2 || !strings.Contains(r.stderr, "2 of 2 partitions are not at their target (0 still in progress)") {
		t.Errorf("--verify of missing partitions: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// Where the partitions already are: accepted, and complete.
	same := write("same.json", `{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[1]},{"topic":"`+topic+`","partition":1,"replicas":[1]}]}`)
	r = ok(t, "", "topic", "reassign", "--execute", "--reassignment-json-file", same)
	if strings.Count(r.stdout, "started") != 2 || !strings.Contains(r.stdout, "--verify --reassignment-json-file "+same) {
		t.Errorf("--execute of the current replicas:\n%s", r.stdout)
	}
	r = ok(t, "", "topic", "reassign", "--verify", "--reassignment-json-file", same)
	if strings.Count(r.stdout, "complete") != 2 {
		t.Errorf("--verify:\n%s", r.stdout)
	}
	doc = decodeJSON(t, ok(t, "", "topic", "reassign", "--verify", "-o", "json", "--reassignment-json-file", same).stdout)
	// Complete, and nothing else in progress: the throttle is cleared on
	// every broker (here, the one).
	keys := wantKeys(t, "reassign --verify", doc, "partitions", "throttle_removed_from")
	if got := list(t, keys["throttle_removed_from"]); len(got) != 1 || fmt.Sprint(got[0]) != "1" {
		t.Errorf("--verify -o json: throttle removed from %v, want [1]", got)
	}
	for _, p := range list(t, keys["partitions"]) {
		m := wantKeys(t, "reassign --verify partition", p, "topic", "partition", "status", "replicas", "target", "adding_replicas", "removing_replicas")
		if m["status"] != "complete" || len(list(t, m["adding_replicas"])) != 0 {
			t.Errorf("--verify -o json: %v", m)
		}
	}
	// Not where the plan says, and nothing in progress: --verify fails.
	elsewhere := write("elsewhere.json", `{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[2]}]}`)
	r = fjord(t, "", "topic", "reassign", "--brokers", b, "--verify", "--reassignment-json-file", elsewhere)
	if r.code != 1 || !strings.Contains(r.stdout, "not at target") || !strings.Contains(r.stderr, "1 of 1 partitions are not at their target") {
		t.Errorf("--verify of another target: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Nothing to cancel: said, not an error.
	r = ok(t, "", "topic", "reassign", "--cancel", "--reassignment-json-file", same)
	if strings.Count(r.stdout, "not in progress") != 2 {
		t.Errorf("--cancel with none in progress:\n%s", r.stdout)
	}
	if r := ok(t, "", "topic", "reassign", "--list"); !strings.Contains(r.stdout, "No partition reassignments in progress.") {
		t.Errorf("--list at the end: %s", r.stdout)
	}
}

// cluster rebalance and cluster drain: usage errors fail before the
// command connects (the brokers named are a closed port), one line each.
func TestClusterMovesBadInput(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--throttle goes with --execute", []string{"rebalance", "--throttle", "1000"}},
		{"--timeout goes with --execute", []string{"rebalance", "--timeout", "1m"}},
		{"--throttle 0: want the bytes per second", []string{"rebalance", "--execute", "--throttle", "0"}},
		{"--throttle -5: want the bytes per second", []string{"rebalance", "--execute", "--throttle", "-5"}},
		{`invalid argument "1MB" for "--throttle" flag`, []string{"rebalance", "--execute", "--throttle", "1MB"}},
		{"--timeout -1s: want a duration of 0 (no limit) or more", []string{"rebalance", "--execute", "--timeout", "-1s"}},
		{`invalid argument "soon" for "--timeout" flag`, []string{"rebalance", "--execute", "--timeout", "soon"}},
		{"accepts 1 arg(s), received 0", []string{"drain"}},
		{"accepts 1 arg(s), received 2", []string{"drain", "1", "2"}},
		{`broker "x": want a broker id`, []string{"drain", "x"}},
		{"unknown shorthand flag: '1' in -1", []string{"drain", "-1"}},
		{`broker "99999999999": want a broker id`, []string{"drain", "99999999999"}},
		{`broker "` + strings.Repeat("9", 64) + `...": want a broker id`, []string{"drain", strings.Repeat("9", 100000)}},
		{"--throttle goes with --execute", []string{"drain", "4", "--dry-run", "--throttle", "1000"}},
		{"--throttle 0: want the bytes per second", []string{"drain", "4", "--throttle", "0"}},
	} {
		r := fjord(t, "", append([]string{"cluster"}, append(tc.args, "--brokers", addr)...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("fjord cluster %s: exit %d, stderr %q; want exit 1 before connecting, saying %q", short(tc.args), r.code, r.stderr, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
			t.Errorf("fjord cluster %s: error is %d lines, want one", short(tc.args), n+1)
		}
	}
}

// short is args for a message, a long one cut.
func short(args []string) string {
	s := strings.Join(args, " ")
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// On the shared node (broker 1 alone): a cluster of one is even; a
// drain of its only broker would lower every replication factor and is
// refused, moving nothing; an unknown broker is refused.
func TestClusterMovesOnANode(t *testing.T) {
	topic := topicName("moves")
	ok(t, "", "topic", "create", topic, "--partitions", "2")
	if r := ok(t, "", "cluster", "rebalance"); !strings.Contains(r.stdout, "The cluster is even: nothing to move.") {
		t.Errorf("rebalance of one broker:\n%s", r.stdout)
	}
	doc := decodeJSON(t, ok(t, "", "cluster", "rebalance", "--execute", "-o", "json").stdout)
	if doc["executed"] != true || doc["done"] != true || len(list(t, doc["moves"])) != 0 {
		t.Errorf("rebalance --execute of one broker: %v", doc)
	}
	b := brokers(t)
	fails(t, "would lower its replication factor; nothing was moved", "cluster", "drain", "1", "--brokers", b)
	fails(t, "broker 7 is not registered (brokers 1)", "cluster", "drain", "7", "--brokers", b)
	if r := ok(t, "", "topic", "reassign", "--list"); !strings.Contains(r.stdout, "No partition reassignments in progress.") {
		t.Errorf("after the refused drains: %s", r.stdout)
	}
}
