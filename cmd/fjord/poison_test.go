package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/poison"
)

// The poison-record commands (issue 18, poison.go) against a node of the
// test's own (group_test.go), with the policies and pauses checked
// through internal/poison, not through the commands under test.

// freshAdmin is an admin client of the test's own with no metadata
// cached: n.adm's would answer that a topic made a moment ago is
// missing, for as long as its cache lasts.
func (n *groupTestNode) freshAdmin(t *testing.T) *kadm.Client {
	t.Helper()
	return kadm.NewClient(n.client(t))
}

// hasTopic says whether topic exists, asked with a client of the test's
// own.
func (n *groupTestNode) hasTopic(t *testing.T, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := n.freshAdmin(t).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("listing %s: %v", topic, err)
	}
	return topics.Has(topic)
}

// policyStore opens the policies topic as the HTTP API does.
func (n *groupTestNode) policyStore(t *testing.T) *poison.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := poison.Open(ctx, []string{n.brokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// pauses are group's pauses once store has read every write.
func pauses(t *testing.T, store *poison.Store, group string) []poison.Pause {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return store.Pauses(group, "")
}

// endOffsets are topic's high watermarks, asked with a client of the
// test's own.
func (n *groupTestNode) endOffsets(t *testing.T, topic string) kadm.ListedOffsets {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := n.freshAdmin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("listing the end offsets of %s: %v", topic, err)
	}
	return ends
}

func (n *groupTestNode) endOffset(t *testing.T, topic string, partition int32) int64 {
	t.Helper()
	o, _ := n.endOffsets(t, topic).Lookup(topic, partition)
	return o.Offset
}

// readTopic reads every record of topic, read_committed, by partition
// and offset, up to the end offsets it has when called. REQUIRES: no
// transaction open on topic.
func (n *groupTestNode) readTopic(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	ends := n.endOffsets(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left, from := map[int32]int64{}, map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition], from[o.Partition] = o.Offset, kgo.NewOffset().AtStart()
		}
	})
	var out []*kgo.Record
	if len(left) == 0 {
		return out
	}
	// Markers kept, so that the last offset below the end is read even
	// when it is one.
	cl := n.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("reading %s: %v (%d records read)", topic, err, len(out))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset < end {
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
				if r.Offset+1 >= end {
					delete(left, r.Partition)
				}
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// header is the value of rec's last header named key, and whether it
// has one.
func header(rec *kgo.Record, key string) (string, bool) {
	v, ok := "", false
	for _, h := range rec.Headers {
		if h.Key == key {
			v, ok = string(h.Value), true
		}
	}
	return v, ok
}

// Issue 18, point 6, from the CLI: set, describe and clear policies;
// every bad policy is refused with the policy's own words and changes
// nothing, not even by creating the policies topic or a dead-letter
// topic.
func TestGroupPoisonPolicies(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "orders", "--partitions", "2")
	n.ok(t, "", "topic", "create", "refunds")

	// Reads find nothing and leave nothing behind: group describe (which
	// works against any Kafka cluster) included.
	n.ok(t, "", "group", "reset-offsets", "billing", "--topic", "orders", "--to-earliest", "--execute")
	if r := n.ok(t, "", "group", "describe", "billing"); strings.Contains(r.stdout, "Paused") || r.stderr != "" {
		t.Errorf("describe with no policies topic:\n%s\n%s", r.stdout, r.stderr)
	}
	if doc := decodeJSON(t, n.ok(t, "", "group", "describe", "billing", "-o", "json").stdout); len(list(t, doc["paused"])) != 0 {
		t.Errorf("describe -o json with no policies topic: paused %v", doc["paused"])
	}
	if r := n.ok(t, "", "group", "poison", "describe", "billing"); r.stdout != "Group: billing\n\nPolicies: none\n\nPaused: none\n" {
		t.Errorf("describe with no policies:\n%s", r.stdout)
	}
	if r := n.ok(t, "", "group", "poison", "clear", "billing", "--topic", "orders"); r.stdout != "group billing has no poison policy on topic orders: nothing to clear\n" {
		t.Errorf("clear with no policy: %q", r.stdout)
	}
	doc := decodeJSON(t, n.ok(t, "", "group", "poison", "describe", "billing", "-o", "json").stdout)
	wantKeys(t, "group poison describe", doc, "group", "policies", "paused")
	if doc["group"] != "billing" || len(list(t, doc["policies"])) != 0 || len(list(t, doc["paused"])) != 0 {
		t.Errorf("describe -o json with no policies: %v", doc)
	}
	if n.hasTopic(t, poison.Topic) {
		t.Fatalf("describe or clear created %s", poison.Topic)
	}

	set := func(args ...string) []string {
		return append([]string{"group", "poison", "set", "billing", "--topic", "orders"}, args...)
	}
	bad := []struct {
		want string
		args []string
	}{
		{`invalid poison policy: the action "drop" is unknown (allowed: pause, dlq)`, set("--policy", "drop", "--max-attempts", "3")},
		{`invalid poison policy: the action "PAUSE" is unknown (allowed: pause, dlq)`, set("--policy", "PAUSE", "--max-attempts", "3")},
		{`invalid poison policy: the action is empty (allowed: pause, dlq)`, set("--policy", "", "--max-attempts", "3")},
		{`invalid poison policy: max attempts is 0 (allowed: 1 to 1000)`, set("--policy", "pause", "--max-attempts", "0")},
		{`invalid poison policy: max attempts is -2 (allowed: 1 to 1000)`, set("--policy", "dlq", "--max-attempts", "-2")},
		{`invalid poison policy: max attempts is 1001 (allowed: 1 to 1000)`, set("--policy", "pause", "--max-attempts", "1001")},
		{`invalid poison policy: the dead-letter topic "orders" is the source topic: a failed record would be written back where it failed`,
			set("--policy", "dlq", "--max-attempts", "3", "--dlq-topic", "orders")},
		{`the dead-letter topic "orders" is the source topic`, set("--policy", "pause", "--max-attempts", "3", "--dlq-topic", "orders")},
		{`invalid poison policy: dead-letter topic: topic name "orders dlq" contains " "`, set("--policy", "dlq", "--max-attempts", "3", "--dlq-topic", "orders dlq")},
		{`invalid poison policy: the dead-letter topic "__consumer_offsets" is internal to Fjord`, set("--policy", "dlq", "--max-attempts", "3", "--dlq-topic", "__consumer_offsets")},
		{`--dlq-topic is empty: leave it out for the default orders.dlq`, set("--policy", "dlq", "--max-attempts", "3", "--dlq-topic", "")},
		{`--max-attempts is required: after how many failed attempts at one record the policy acts (1 to 1000)`, set("--policy", "pause")},
		{`--policy is required: pause (stop the partition at the record) or dlq (write it to the dead-letter topic and move past it)`, set("--max-attempts", "3")},
		{`invalid argument "three" for "--max-attempts" flag`, set("--policy", "pause", "--max-attempts", "three")},
		{`--topic is required: give the topic the policy is for`, []string{"group", "poison", "set", "billing", "--policy", "pause", "--max-attempts", "3"}},
		{`the group id is empty`, []string{"group", "poison", "set", "", "--topic", "orders", "--policy", "pause", "--max-attempts", "3"}},
		{`topic "nosuch" does not exist`, []string{"group", "poison", "set", "billing", "--topic", "nosuch", "--policy", "dlq", "--max-attempts", "3"}},
		{`--topic is required: give the topic whose policy to remove`, []string{"group", "poison", "clear", "billing"}},
		{`the group id is empty`, []string{"group", "poison", "describe", ""}},
	}
	refuse := func() {
		t.Helper()
		for _, c := range bad {
			if r := n.fails(t, c.want, c.args...); r.stdout != "" {
				t.Errorf("fjord %s printed %q", strings.Join(c.args, " "), r.stdout)
			}
		}
	}
	refuse()
	for _, topic := range []string{poison.Topic, "orders.dlq", "nosuch.dlq", "nosuch"} {
		if n.hasTopic(t, topic) {
			t.Errorf("a refused policy created %s", topic)
		}
	}

	// pause: the dead-letter topic is where resume --skip writes, made
	// then. dlq: made now.
	r := n.ok(t, "", set("--policy", "pause", "--max-attempts", "3")...)
	if want := `set the poison policy of group billing on topic orders: pause the partition after 3 failed attempts at one record ("fjord group resume --skip" writes the record to orders.dlq)` + "\n"; r.stdout != want {
		t.Errorf("set pause printed %q, want %q", r.stdout, want)
	}
	if n.hasTopic(t, "orders.dlq") {
		t.Errorf("a pause policy created its dead-letter topic")
	}
	r = n.ok(t, "", "group", "poison", "set", "billing", "--topic", "refunds", "--policy", "dlq", "--max-attempts", "1", "--dlq-topic", "refunds-failed")
	if want := "set the poison policy of group billing on topic refunds: after 1 failed attempt at one record, write it to the dead-letter topic refunds-failed and move past it\n"; r.stdout != want {
		t.Errorf("set dlq printed %q, want %q", r.stdout, want)
	}
	if !n.hasTopic(t, "refunds-failed") {
		t.Errorf("a dlq policy did not create its dead-letter topic")
	}
	wantPolicies := func(want ...string) {
		t.Helper()
		r := n.ok(t, "", "group", "poison", "describe", "billing")
		var rows []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) == 4 && f[0] != "TOPIC" {
				rows = append(rows, strings.Join(f, " "))
			}
		}
		if !slices.Equal(rows, want) || !strings.Contains(r.stdout, "Policies:\nTOPIC  ") || !strings.HasSuffix(r.stdout, "\nPaused: none\n") {
			t.Errorf("describe shows policies %q, want %q:\n%s", rows, want, r.stdout)
		}
	}
	wantPolicies("orders pause 3 orders.dlq", "refunds dlq 1 refunds-failed")
	doc = decodeJSON(t, n.ok(t, "", "group", "poison", "describe", "billing", "-o", "json").stdout)
	policies := list(t, doc["policies"])
	if len(policies) != 2 {
		t.Fatalf("describe -o json: %v", doc)
	}
	for i, want := range []policyRow{{"orders", "pause", 3, "orders.dlq"}, {"refunds", "dlq", 1, "refunds-failed"}} {
		p := wantKeys(t, "policy", policies[i], "topic", "policy", "max_attempts", "dlq_topic")
		if got := (policyRow{p["topic"].(string), p["policy"].(string), int32(number(t, p["max_attempts"])), p["dlq_topic"].(string)}); got != want {
			t.Errorf("policy %d: %v, want %v", i, p, want)
		}
	}
	if r := n.ok(t, "", "group", "poison", "describe", "audit"); !strings.Contains(r.stdout, "Policies: none") {
		t.Errorf("another group shows policies:\n%s", r.stdout)
	}

	// Now that the topic exists, a refusal still writes nothing.
	before := n.endOffset(t, poison.Topic, 0)
	refuse()
	if after := n.endOffset(t, poison.Topic, 0); after != before {
		t.Errorf("refused policies wrote %d records", after-before)
	}
	wantPolicies("orders pause 3 orders.dlq", "refunds dlq 1 refunds-failed")

	// A policy replaces the earlier one.
	n.ok(t, "", set("--policy", "dlq", "--max-attempts", "5")...)
	wantPolicies("orders dlq 5 orders.dlq", "refunds dlq 1 refunds-failed")
	if !n.hasTopic(t, "orders.dlq") {
		t.Errorf("a dlq policy did not create orders.dlq")
	}

	r = n.ok(t, "", "group", "poison", "clear", "billing", "--topic", "orders")
	if want := "cleared the poison policy of group billing on topic orders (it was: after 5 failed attempts at one record, write it to the dead-letter topic orders.dlq and move past it)\n"; r.stdout != want {
		t.Errorf("clear printed %q, want %q", r.stdout, want)
	}
	wantPolicies("refunds dlq 1 refunds-failed")
	before = n.endOffset(t, poison.Topic, 0)
	if r := n.ok(t, "", "group", "poison", "clear", "billing", "--topic", "orders"); !strings.Contains(r.stdout, "nothing to clear") {
		t.Errorf("second clear: %q", r.stdout)
	}
	if after := n.endOffset(t, poison.Topic, 0); after != before {
		t.Errorf("a clear with nothing to clear wrote %d records", after-before)
	}
	// What the HTTP API's instances read agrees.
	if got := n.policyStore(t).Policies(""); len(got) != 1 || got[0] != (poison.Policy{Group: "billing", Topic: "refunds", Action: poison.ActionDLQ, MaxAttempts: 1, DLQTopic: "refunds-failed"}) {
		t.Errorf("the store holds %+v", got)
	}
}

// Issue 18, point 1's resume, from the CLI, of a pause written as the
// HTTP API writes it: describe shows it; resume delivers the record
// again, or with --skip writes it to the dead-letter topic with its
// origin and moves the group past it (a group with no members), or
// leaves the commit to the partition's owner (a group with one).
func TestGroupResume(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "jobs", "--partitions", "2")
	n.ok(t, "a\nb\nc\nd\n", "produce", "jobs", "--partition", "0", "--key", "k", "--header", "trace=t1")
	n.ok(t, "", "consume", "jobs", "--group", "workers", "--from-beginning", "--max-messages", "1")
	n.wantCommitted(t, "workers", map[topicPartition]int64{tp("jobs", 0): 1, tp("jobs", 1): 0})
	original := n.readTopic(t, "jobs")[1]

	store := n.policyStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
	pz := poison.Pause{Group: "workers", Topic: "jobs", Partition: 0, Offset: 1, Reason: "cannot parse\tline 2", Attempts: 3, At: at}
	if err := store.Pause(ctx, pz); err != nil {
		t.Fatal(err)
	}

	// group describe and group poison describe show it.
	row := regexp.MustCompile(`(?m)^Paused:\nTOPIC\s+PARTITION\s+OFFSET\s+ATTEMPTS\s+PAUSED-AT\s+REASON\njobs\s+0\s+1\s+3\s+` +
		regexp.QuoteMeta(formatMillis(at.UnixMilli())) + `\s+cannot parse\\x09line 2\n`)
	for _, args := range [][]string{{"group", "describe", "workers"}, {"group", "poison", "describe", "workers"}} {
		if r := n.ok(t, "", args...); !row.MatchString(r.stdout) || !strings.Contains(r.stdout, `Resume with "fjord group resume workers --topic TOPIC --partition P"`) {
			t.Errorf("fjord %s does not show the pause:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	doc := decodeJSON(t, n.ok(t, "", "group", "describe", "workers", "-o", "json").stdout)
	wantKeys(t, "group describe", doc, "group", "state", "protocol_type", "protocol", "coordinator", "members", "offsets", "paused")
	wantPaused := func(doc map[string]any, offset int64, skip bool) {
		t.Helper()
		paused := list(t, doc["paused"])
		if len(paused) != 1 {
			t.Fatalf("paused: %v", doc["paused"])
		}
		p := wantKeys(t, "paused", paused[0], "topic", "partition", "offset", "reason", "attempts", "at_ms", "skip")
		if p["topic"] != "jobs" || number(t, p["partition"]) != 0 || number(t, p["offset"]) != offset || p["reason"] != "cannot parse\tline 2" ||
			number(t, p["attempts"]) != 3 || number(t, p["at_ms"]) != at.UnixMilli() || p["skip"] != skip {
			t.Errorf("paused %v", p)
		}
	}
	wantPaused(doc, 1, false)
	wantPaused(decodeJSON(t, n.ok(t, "", "group", "poison", "describe", "workers", "-o", "json").stdout), 1, false)

	// Without --skip: the pause goes, the commit stays at the record.
	r := n.ok(t, "", "group", "resume", "workers", "--topic", "jobs", "--partition", "0")
	if want := "resumed jobs-0 for group workers at offset 1: the paused record is delivered again\n"; r.stdout != want {
		t.Errorf("resume printed %q, want %q", r.stdout, want)
	}
	if got := pauses(t, store, "workers"); len(got) != 0 {
		t.Errorf("after resume: %+v", got)
	}
	n.wantCommitted(t, "workers", map[topicPartition]int64{tp("jobs", 0): 1, tp("jobs", 1): 0})
	if r := n.ok(t, "", "group", "describe", "workers"); strings.Contains(r.stdout, "Paused") {
		t.Errorf("describe after resume:\n%s", r.stdout)
	}
	doc = decodeJSON(t, n.ok(t, "", "group", "describe", "workers", "-o", "json").stdout)
	if paused := list(t, doc["paused"]); len(paused) != 0 {
		t.Errorf("describe -o json after resume: paused %v", paused)
	}

	// Not paused: refused, with nothing written anywhere.
	before := n.endOffset(t, poison.Topic, 0)
	for _, args := range [][]string{
		{"group", "resume", "workers", "--topic", "jobs", "--partition", "0"},
		{"group", "resume", "workers", "--topic", "jobs", "--partition", "0", "--skip"},
		{"group", "resume", "workers", "--topic", "jobs", "--partition", "1", "--skip"},
		{"group", "resume", "nobody", "--topic", "jobs", "--partition", "0", "--skip"},
	} {
		n.fails(t, `has no pause on partition `+args[6]+` of topic "jobs" ("fjord group poison describe `+args[2]+`" lists its paused partitions)`, args...)
	}
	for _, c := range []struct{ want, args string }{
		{"--topic is required: give the topic of the paused partition", "group resume workers --partition 0"},
		{`--partition is required: give the paused partition ("fjord group describe" shows it)`, "group resume workers --topic jobs"},
		{`invalid argument "-1" for "--partition" flag: allowed: an integer from 0`, "group resume workers --topic jobs --partition -1"},
		{"the group id is empty", "group resume  --topic jobs --partition 0"},
		{"accepts 1 arg(s), received 0", "group resume --topic jobs --partition 0"},
	} {
		n.fails(t, c.want, strings.Split(c.args, " ")...)
	}
	if after := n.endOffset(t, poison.Topic, 0); after != before || n.hasTopic(t, "jobs.dlq") {
		t.Errorf("refused resumes wrote %d records, or made jobs.dlq (%v)", after-before, n.hasTopic(t, "jobs.dlq"))
	}

	// --skip in a group with no members: the record goes to jobs.dlq
	// (no policy names another), then the commit moves past it.
	if err := store.Pause(ctx, pz); err != nil {
		t.Fatal(err)
	}
	r = n.ok(t, "", "group", "resume", "workers", "--topic", "jobs", "--partition", "0", "--skip")
	if !regexp.MustCompile(`^skipped the record at offset 1 of jobs-0 into jobs\.dlq at partition \d+, offset 0; committed group workers past it \(offset 2\) and resumed the partition\n$`).MatchString(r.stdout) {
		t.Errorf("resume --skip printed %q", r.stdout)
	}
	n.wantCommitted(t, "workers", map[topicPartition]int64{tp("jobs", 0): 2, tp("jobs", 1): 0})
	if got := pauses(t, store, "workers"); len(got) != 0 {
		t.Errorf("after resume --skip: %+v", got)
	}
	dl := n.readTopic(t, "jobs.dlq")
	if len(dl) != 1 {
		t.Fatalf("jobs.dlq holds %d records, want 1", len(dl))
	}
	o, ok := poison.OriginOf(dl[0])
	if want := (poison.Origin{Topic: "jobs", Partition: 0, Offset: 1, Timestamp: time.UnixMilli(original.Timestamp.UnixMilli()), Group: "workers", Reason: "cannot parse\tline 2", Attempts: 3}); !ok || o != want {
		t.Errorf("dead letter's origin %+v (%v), want %+v", o, ok, want)
	}
	if trace, _ := header(dl[0], "trace"); string(dl[0].Value) != "b" || string(dl[0].Key) != "k" || trace != "t1" {
		t.Errorf("dead letter %q=%q, trace %q: want the record at offset 1 with its header", dl[0].Key, dl[0].Value, trace)
	}

	// --skip in a group with a member: the policy's dead-letter topic,
	// and the commit is the owner's to make.
	n.ok(t, "", "group", "poison", "set", "workers", "--topic", "jobs", "--policy", "pause", "--max-attempts", "2", "--dlq-topic", "jobs-failed")
	member := n.member(t, "workers", "jobs")
	defer member.Close()
	pz.Offset = 3
	if err := store.Pause(ctx, pz); err != nil {
		t.Fatal(err)
	}
	r = n.ok(t, "", "group", "resume", "workers", "--topic", "jobs", "--partition", "0", "--skip")
	if !regexp.MustCompile(`^skipped the record at offset 3 of jobs-0 into jobs-failed at partition \d+, offset 0; group workers has members, so the partition's owner commits past it \(offset 4\) at its next consume and resumes the partition there\n$`).MatchString(r.stdout) {
		t.Errorf("resume --skip with a member printed %q", r.stdout)
	}
	if got := pauses(t, store, "workers"); len(got) != 1 || !got[0].Skip || got[0].Offset != 3 {
		t.Errorf("after resume --skip with a member: %+v, want the pause marked skip", got)
	}
	if r := n.ok(t, "", "group", "describe", "workers"); !strings.Contains(r.stdout, "jobs-0 was resumed with --skip: the record at offset 3 is in the dead-letter topic, and the partition's owner commits past it at its next consume.\n") {
		t.Errorf("describe of a skip left to the owner:\n%s", r.stdout)
	}
	wantPaused(decodeJSON(t, n.ok(t, "", "group", "describe", "workers", "-o", "json").stdout), 3, true)
	if dl := n.readTopic(t, "jobs-failed"); len(dl) != 1 || string(dl[0].Value) != "d" {
		t.Errorf("jobs-failed holds %d records, want the one at offset 3", len(dl))
	}
}
