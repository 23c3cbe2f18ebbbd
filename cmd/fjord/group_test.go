package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The group commands run in-process, as the other client commands' tests
// do, against a node of their own: one per test, so that `group list`
// shows exactly the test's groups, and with no initial rebalance delay,
// so that each `consume --group` joins at once instead of waiting Kafka's
// 3 s for more members of an empty group.

type groupTestNode struct {
	brokers string
	// adm is the test's own view of the node, to check what the
	// commands under test did.
	adm *kadm.Client
}

func startGroupNode(t *testing.T, configure ...func(*node.Config)) *groupTestNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := node.Config{
		NodeID:                     1,
		DataDir:                    t.TempDir(),
		KafkaAddr:                  "127.0.0.1:0",
		ControllerAddr:             "127.0.0.1:0",
		HTTPAddr:                   "127.0.0.1:0",
		GroupInitialRebalanceDelay: -1,
		Logger:                     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, f := range configure {
		f(&cfg)
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting a node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.Eventually(t, 20*time.Second, n.Ready)
	g := &groupTestNode{brokers: n.KafkaAddr().String()}
	g.adm = kadm.NewClient(g.client(t))
	return g
}

// ok runs a command that must succeed against this node.
func (n *groupTestNode) ok(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := fjord(t, stdin, append(args, "--brokers", n.brokers)...)
	if r.code != 0 {
		t.Fatalf("fjord %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs a command that must fail with one line saying want.
func (n *groupTestNode) fails(t *testing.T, want string, args ...string) result {
	t.Helper()
	return fails(t, want, append(args, "--brokers", n.brokers)...)
}

func (n *groupTestNode) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.brokers)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// committed reads a group's committed offsets with a client of the
// test's own, not with the commands under test.
func (n *groupTestNode) committed(t *testing.T, group string) map[topicPartition]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offsets, err := n.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	out := map[topicPartition]int64{}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			out[topicPartition{o.Topic, o.Partition}] = o.At
		}
	})
	return out
}

func (n *groupTestNode) wantCommitted(t *testing.T, group string, want map[topicPartition]int64) {
	t.Helper()
	if got := n.committed(t, group); !maps.Equal(got, want) {
		t.Fatalf("group %s has committed %v, want %v", group, got, want)
	}
}

// describe describes a group with the test's own client.
func (n *groupTestNode) describe(t *testing.T, group string) kadm.DescribedGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := n.adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("describing group %s: %v", group, err)
	}
	return described[group]
}

// logEnd lists a partition's log end offset with the test's own client.
func (n *groupTestNode) logEnd(t *testing.T, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := n.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("listing the end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, partition)
	if !ok {
		t.Fatalf("no end offset for %s-%d", topic, partition)
	}
	return o.Offset
}

// produceAt writes values to one partition with the given record
// timestamp.
func (n *groupTestNode) produceAt(t *testing.T, topic string, partition int32, ts time.Time, values ...string) {
	t.Helper()
	cl := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v), Timestamp: ts})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s-%d: %v", topic, partition, err)
	}
}

// member joins group as a kgo consumer that stays until the test ends
// or it is closed, and waits until the group is stable with it.
func (n *groupTestNode) member(t *testing.T, group, topic string) *kgo.Client {
	t.Helper()
	cl := n.client(t,
		kgo.ClientID("test-member"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
	)
	testutil.Eventually(t, 20*time.Second, func() error {
		if d := n.describe(t, group); d.State != "Stable" || len(d.Members) != 1 {
			return fmt.Errorf("group %s is %s with %d members, want Stable with 1", group, d.State, len(d.Members))
		}
		return nil
	})
	return cl
}

func tp(topic string, partition int32) topicPartition { return topicPartition{topic, partition} }

// tableRows returns the rows of a tabwriter table whose first column is
// first: the second column -> all columns.
func tableRows(out, first string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == first {
			rows[f[1]] = f
		}
	}
	return rows
}

// lines returns the lines of out, sorted.
func sortedLines(out string) []string {
	l := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.Strings(l)
	return l
}

func TestGroupListAndDescribe(t *testing.T) {
	testStart := time.Now()
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "orders", "--partitions", "2")
	n.ok(t, "a\nb\nc\n", "produce", "orders", "--partition", "0")
	n.ok(t, "d\ne\n", "produce", "orders", "--partition", "1")

	r := n.ok(t, "", "consume", "orders", "--group", "billing", "--from-beginning", "--max-messages", "5", "--format", `%p/%o %v\n`)
	if got, want := sortedLines(r.stdout), []string{"0/0 a", "0/1 b", "0/2 c", "1/0 d", "1/1 e"}; !slices.Equal(got, want) {
		t.Fatalf("consume --group printed %q, want %q", got, want)
	}
	n.ok(t, "f\ng\nh\ni\n", "produce", "orders", "--partition", "0")
	n.ok(t, "j\n", "produce", "orders", "--partition", "1")
	// A second group that has only committed, with reset-offsets.
	n.ok(t, "", "group", "reset-offsets", "audit", "--topic", "orders:1", "--to-offset", "1", "--execute")

	r = n.ok(t, "", "group", "list")
	for _, want := range []string{`(?m)^GROUP\s+STATE\s+PROTOCOL-TYPE$`, `(?m)^billing\s+Empty\s+consumer$`, `(?m)^audit\s+Empty\s+-$`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("group list does not match %s:\n%s", want, r.stdout)
		}
	}
	for _, tc := range []struct {
		states []string
		want   bool
	}{
		{[]string{"empty"}, true},
		{[]string{"Stable"}, false},
		{[]string{"stable,EMPTY"}, true},
		{[]string{"Dead", "Empty"}, true},
		{[]string{"PreparingRebalance,CompletingRebalance"}, false},
	} {
		args := []string{"group", "list"}
		for _, s := range tc.states {
			args = append(args, "--state", s)
		}
		r := n.ok(t, "", args...)
		if got := strings.Contains(r.stdout, "billing"); got != tc.want {
			t.Errorf("group list --state %v lists billing: %v, want %v:\n%s", tc.states, got, tc.want, r.stdout)
		}
	}

	r = n.ok(t, "", "group", "describe", "billing")
	for _, want := range []string{"Group: billing\n", "State: Empty\n", "Protocol type: consumer\n", "Members: 0\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "MEMBER-ID\tINSTANCE-ID") || strings.Contains(r.stdout, "CLIENT-ID") {
		t.Errorf("describe of an empty group shows a member table:\n%s", r.stdout)
	}
	// TOPIC PARTITION COMMITTED LOG-END LAG LAG-BYTES LAG-TIME
	// MEMBER-ID: what was consumed is committed; what was produced after
	// is the lag, in records, in bytes of log (some, as records are
	// behind) and in time (the age of the first unconsumed record, from
	// this test).
	lagColumns := func(row []string) string {
		if len(row) != 8 {
			return fmt.Sprintf("%d columns", len(row))
		}
		if b, err := strconv.Atoi(row[5]); err != nil || b <= 0 {
			return "LAG-BYTES " + row[5]
		}
		if d, err := time.ParseDuration(row[6]); err != nil || d < 0 || d > time.Since(testStart) {
			return "LAG-TIME " + row[6]
		}
		return ""
	}
	rows := tableRows(r.stdout, "orders")
	for p, want := range map[string][]string{
		"0": {"orders", "0", "3", "7", "4", "-"},
		"1": {"orders", "1", "2", "3", "1", "-"},
	} {
		if row := rows[p]; len(row) != 8 || !slices.Equal(append(row[:5:5], row[7]), want) || lagColumns(row) != "" {
			t.Errorf("describe row of partition %s is %q, want %q and lag bytes and time (%s):\n%s", p, rows[p], want, lagColumns(row), r.stdout)
		}
	}
	r = n.ok(t, "", "group", "describe", "audit")
	if rows := tableRows(r.stdout, "orders"); len(rows) != 1 || len(rows["1"]) != 8 || !slices.Equal(append(rows["1"][:5:5], rows["1"][7]), []string{"orders", "1", "1", "3", "2", "-"}) || lagColumns(rows["1"]) != "" {
		t.Errorf("describe of a group with one committed partition:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "Gap on") {
		t.Errorf("describe says there is a gap where there is none:\n%s", r.stdout)
	}

	// -o json: the same, for scripts; "-" in the tables is null.
	doc := decodeJSON(t, n.ok(t, "", "group", "list", "-o", "json").stdout)
	wantKeys(t, "group list", doc, "groups")
	groups := list(t, doc["groups"])
	if len(groups) != 2 {
		t.Fatalf("group list -o json: %v", doc)
	}
	for i, want := range [][2]any{{"audit", nil}, {"billing", "consumer"}} {
		g := wantKeys(t, "group", groups[i], "group", "state", "protocol_type")
		if g["group"] != want[0] || g["state"] != "Empty" || g["protocol_type"] != want[1] {
			t.Errorf("group %d: %v, want %v", i, g, want)
		}
	}
	describeJSON := func(group string) map[string]any {
		t.Helper()
		doc := decodeJSON(t, n.ok(t, "", "group", "describe", group, "-o", "json").stdout)
		wantKeys(t, "group describe", doc, "group", "state", "protocol_type", "protocol", "coordinator", "members", "offsets", "paused")
		return doc
	}
	doc = describeJSON("audit")
	offsets := list(t, doc["offsets"])
	if doc["group"] != "audit" || doc["protocol_type"] != nil || doc["protocol"] != nil || number(t, doc["coordinator"]) != 1 ||
		len(list(t, doc["members"])) != 0 || len(offsets) != 1 {
		t.Fatalf("group describe audit -o json: %v", doc)
	}
	o := wantKeys(t, "offset row", offsets[0], "topic", "partition", "committed_offset", "log_start_offset", "log_end_offset", "lag",
		"lag_bytes", "lag_seconds", "records_lost", "member_id")
	if o["topic"] != "orders" || number(t, o["partition"]) != 1 || number(t, o["committed_offset"]) != 1 ||
		number(t, o["log_start_offset"]) != 0 || number(t, o["log_end_offset"]) != 3 || number(t, o["lag"]) != 2 ||
		number(t, o["lag_bytes"]) <= 0 || seconds(t, o["lag_seconds"]) < 0 || number(t, o["records_lost"]) != 0 || o["member_id"] != nil {
		t.Errorf("offset row %v", o)
	}

	// With a live member: its row, its assignment decoded, and the
	// partitions attributed to it.
	member := n.member(t, "billing", "orders")
	d := n.describe(t, "billing")
	id := d.Members[0].MemberID
	r = n.ok(t, "", "group", "describe", "billing")
	for _, want := range []string{"State: Stable\n", "Protocol: cooperative-sticky\n", "Members: 1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe with a member does not say %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+-\s+test-member\s+\S*127\.0\.0\.1\s+orders:0,1$`).MatchString(r.stdout) {
		t.Errorf("describe has no member row for %s with client test-member and assignment orders:0,1:\n%s", id, r.stdout)
	}
	rows = tableRows(r.stdout, "orders")
	for _, p := range []string{"0", "1"} {
		if f := rows[p]; len(f) != 8 || f[7] != id {
			t.Errorf("partition %s row %q, want member %s", p, f, id)
		}
	}
	doc = describeJSON("billing")
	members := list(t, doc["members"])
	if doc["state"] != "Stable" || doc["protocol"] != "cooperative-sticky" || len(members) != 1 {
		t.Fatalf("group describe billing -o json: %v", doc)
	}
	m := wantKeys(t, "member", members[0], "member_id", "instance_id", "client_id", "host", "assignment")
	assigned := list(t, m["assignment"])
	if m["member_id"] != id || m["instance_id"] != nil || m["client_id"] != "test-member" || len(assigned) != 1 {
		t.Fatalf("member %v", m)
	}
	a := wantKeys(t, "assignment", assigned[0], "topic", "partitions")
	if ps := list(t, a["partitions"]); a["topic"] != "orders" || len(ps) != 2 || number(t, ps[0]) != 0 || number(t, ps[1]) != 1 {
		t.Errorf("assignment %v", a)
	}
	for _, row := range list(t, doc["offsets"]) {
		if r := row.(map[string]any); r["member_id"] != id {
			t.Errorf("offset row %v, want member %s", r, id)
		}
	}
	r = n.ok(t, "", "group", "list", "--state", "stable")
	if !regexp.MustCompile(`(?m)^billing\s+Stable\s+consumer$`).MatchString(r.stdout) || strings.Contains(r.stdout, "audit") {
		t.Errorf("group list --state stable:\n%s", r.stdout)
	}
	member.Close()
}

func TestResetOffsets(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "events", "--partitions", "2")
	// Two batches an hour apart: offsets 0-2 and 3-5 of partition 0,
	// 0-1 and 2-3 of partition 1.
	first := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	second := first.Add(time.Hour)
	n.produceAt(t, "events", 0, first, "a0", "a1", "a2")
	n.produceAt(t, "events", 1, first, "b0", "b1")
	n.produceAt(t, "events", 0, second, "a3", "a4", "a5")
	n.produceAt(t, "events", 1, second, "b2", "b3")
	all := []string{"0/0", "0/1", "0/2", "0/3", "0/4", "0/5", "1/0", "1/1", "1/2", "1/3"}
	consume := func(max int) []string {
		t.Helper()
		r := n.ok(t, "", "consume", "events", "--group", "g", "--max-messages", fmt.Sprint(max), "--format", `%p/%o\n`)
		return sortedLines(r.stdout)
	}
	reset := func(args ...string) result {
		t.Helper()
		return n.ok(t, "", append([]string{"group", "reset-offsets", "g", "--topic", "events", "--execute"}, args...)...)
	}
	at := func(p0, p1 int64) map[topicPartition]int64 {
		return map[topicPartition]int64{tp("events", 0): p0, tp("events", 1): p1}
	}

	r := n.ok(t, "", "consume", "events", "--group", "g", "--from-beginning", "--max-messages", "10", "--format", `%p/%o\n`)
	if got := sortedLines(r.stdout); !slices.Equal(got, all) {
		t.Fatalf("first consume printed %q", got)
	}
	n.wantCommitted(t, "g", at(6, 4))

	// Without --execute, and with --dry-run, the plan is printed and
	// nothing changes, as with kafka-consumer-groups.
	for _, dry := range [][]string{{}, {"--dry-run"}, {"--execute=false"}} {
		r = n.ok(t, "", append([]string{"group", "reset-offsets", "g", "--topic", "events", "--to-earliest"}, dry...)...)
		rows := tableRows(r.stdout, "events")
		if !slices.Equal(rows["0"], []string{"events", "0", "6", "0"}) || !slices.Equal(rows["1"], []string{"events", "1", "4", "0"}) ||
			!strings.Contains(r.stdout, "dry run: nothing committed; add --execute to move the offsets of group g\n") {
			t.Errorf("reset %v plan:\n%s", dry, r.stdout)
		}
		n.wantCommitted(t, "g", at(6, 4))
	}

	// --to-earliest: the next consume re-reads everything.
	r = reset("--to-earliest")
	if !strings.Contains(r.stdout, "moved the offsets of group g for 2 partitions") {
		t.Errorf("reset output:\n%s", r.stdout)
	}
	n.wantCommitted(t, "g", at(0, 0))
	if got := consume(10); !slices.Equal(got, all) {
		t.Fatalf("consume after --to-earliest printed %q, want everything", got)
	}
	n.wantCommitted(t, "g", at(6, 4))

	// --to-datetime between the batches: the second batch's first
	// offsets, and the next consume starts there. RFC 3339 and local
	// time say the same.
	mid := first.Add(30 * time.Minute)
	for _, ts := range []string{mid.UTC().Format(time.RFC3339), mid.In(time.FixedZone("", 5*3600)).Format(time.RFC3339), mid.Local().Format("2006-01-02T15:04:05")} {
		reset("--to-latest")
		reset("--to-datetime", ts)
		n.wantCommitted(t, "g", at(3, 2))
	}
	if got, want := consume(5), []string{"0/3", "0/4", "0/5", "1/2", "1/3"}; !slices.Equal(got, want) {
		t.Fatalf("consume after --to-datetime %s printed %q, want %q", mid, got, want)
	}
	// At the first record's own timestamp: that record. After every
	// record: the log end.
	reset("--to-datetime", first.Format(time.RFC3339))
	n.wantCommitted(t, "g", at(0, 0))
	reset("--to-datetime", time.Now().Add(time.Hour).Format(time.RFC3339))
	n.wantCommitted(t, "g", at(6, 4))

	// --shift-by moves from the committed offset, kept within the log.
	reset("--shift-by", "-2")
	n.wantCommitted(t, "g", at(4, 2))
	r = reset("--shift-by", "-100")
	n.wantCommitted(t, "g", at(0, 0))
	if !strings.Contains(r.stderr, "warning: events-0: offset -96 is before the log start offset 0; using 0") {
		t.Errorf("no clamping warning:\n%s", r.stderr)
	}
	reset("--shift-by", "+5")
	n.wantCommitted(t, "g", at(5, 4))

	// --to-offset, kept within the log too.
	r = reset("--to-offset", "5")
	n.wantCommitted(t, "g", at(5, 4))
	if !strings.Contains(r.stderr, "warning: events-1: offset 5 is past the log end offset 4; using 4") || strings.Contains(r.stderr, "events-0") {
		t.Errorf("clamping warnings:\n%s", r.stderr)
	}
	rows := tableRows(r.stdout, "events")
	if !slices.Equal(rows["0"], []string{"events", "0", "5", "5"}) || !slices.Equal(rows["1"], []string{"events", "1", "4", "4"}) {
		t.Errorf("--to-offset plan:\n%s", r.stdout)
	}
	if got, want := consume(1), []string{"0/5"}; !slices.Equal(got, want) {
		t.Fatalf("consume after --to-offset 5 printed %q, want %q", got, want)
	}

	// TOPIC:PARTITIONS moves only those.
	r = n.ok(t, "", "group", "reset-offsets", "g", "--topic", "events:1", "--to-earliest", "--execute")
	if rows := tableRows(r.stdout, "events"); len(rows) != 1 || rows["1"] == nil {
		t.Errorf("--topic events:1 plan:\n%s", r.stdout)
	}
	n.wantCommitted(t, "g", at(6, 0))

	// A group that does not exist yet gets its first offsets, as with
	// kafka-consumer-groups; --shift-by needs offsets to shift from.
	n.fails(t, `--shift-by: group "fresh" has no committed offset for events-0 to shift from`,
		"group", "reset-offsets", "fresh", "--topic", "events", "--shift-by", "1", "--execute")
	n.wantCommitted(t, "fresh", map[topicPartition]int64{})
	n.ok(t, "", "group", "reset-offsets", "fresh", "--topic", "events:0", "--to-offset", "2", "--execute")
	n.wantCommitted(t, "fresh", map[topicPartition]int64{tp("events", 0): 2})
}

// Reference: Kafka's coordinator takes offsets without a member only for
// a group without members, and deletes only such a group
// (NON_EMPTY_GROUP).
func TestGroupWithMembersIsNotResetOrDeleted(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "jobs", "--partitions", "2")
	n.ok(t, "a\nb\nc\n", "produce", "jobs", "--partition", "0")
	n.ok(t, "", "consume", "jobs", "--group", "workers", "--from-beginning", "--max-messages", "3")
	before := map[topicPartition]int64{tp("jobs", 0): 3, tp("jobs", 1): 0}
	n.wantCommitted(t, "workers", before)

	member := n.member(t, "workers", "jobs")
	n.fails(t, `group "workers" has 1 member (state Stable): stop its consumers first; offsets can be reset only while a group has no members`,
		"group", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest", "--execute")
	n.fails(t, `group "workers" has 1 member`,
		"group", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest", "--dry-run")
	n.wantCommitted(t, "workers", before)
	r := n.fails(t, `cannot delete group "workers" while it has members (stop its consumers first): NON_EMPTY_GROUP`,
		"group", "delete", "workers")
	if !strings.Contains(r.stderr, "The group is not empty") {
		t.Errorf("delete does not give the server's reason:\n%s", r.stderr)
	}
	n.wantCommitted(t, "workers", before)

	// Once the member has left, both work.
	member.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if d := n.describe(t, "workers"); d.State != "Empty" {
			return fmt.Errorf("group is %s after its member left", d.State)
		}
		return nil
	})
	n.ok(t, "", "group", "reset-offsets", "workers", "--topic", "jobs:0", "--to-offset", "1", "--execute")
	n.wantCommitted(t, "workers", map[topicPartition]int64{tp("jobs", 0): 1, tp("jobs", 1): 0})
	r = n.ok(t, "", "group", "delete", "workers")
	if r.stdout != "deleted group workers\n" {
		t.Errorf("delete output %q", r.stdout)
	}
	if r := n.ok(t, "", "group", "list"); strings.Contains(r.stdout, "workers") {
		t.Errorf("deleted group still listed:\n%s", r.stdout)
	}
	n.wantCommitted(t, "workers", map[topicPartition]int64{})
	n.fails(t, `group "workers" does not exist`, "group", "describe", "workers")
	n.fails(t, `group "workers" does not exist`, "group", "delete", "workers")
}

func TestGroupBadInput(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "t", "--partitions", "2")
	n.ok(t, "x\ny\n", "produce", "t", "--partition", "1")
	n.ok(t, "", "consume", "t", "--group", "g", "--from-beginning", "--max-messages", "2")
	before := map[topicPartition]int64{tp("t", 0): 0, tp("t", 1): 2}
	n.wantCommitted(t, "g", before)

	reset := []string{"group", "reset-offsets", "g"}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`group "nope" does not exist`, []string{"group", "describe", "nope"}},
		{`group "nope" does not exist`, []string{"group", "delete", "nope"}},
		{`topic "nope" does not exist`, append(reset, "--topic", "nope", "--to-earliest")},
		{`topic "nope" does not exist`, append(reset, "--topic", "t", "--topic", "nope", "--to-earliest")},
		{`--topic t: partition 2 does not exist; topic t has 2 partitions (0 to 1)`, append(reset, "--topic", "t:0,2", "--to-earliest")},
		{`--to-earliest and --to-offset exclude each other: give one of --to-earliest, --to-latest, --to-offset N, --to-datetime T, --by-duration D or --shift-by N`,
			append(reset, "--topic", "t", "--to-earliest", "--to-offset", "1")},
		{`--to-latest and --shift-by exclude each other`, append(reset, "--topic", "t", "--shift-by", "1", "--to-latest")},
		{`say where to move the offsets: give one of --to-earliest, --to-latest, --to-offset N, --to-datetime T, --by-duration D or --shift-by N`, append(reset, "--topic", "t")},
		{`say where to move the offsets`, append(reset, "--topic", "t", "--to-earliest=false")},
		{`--to-datetime "yesterday": want RFC 3339`, append(reset, "--topic", "t", "--to-datetime", "yesterday")},
		{`--to-datetime "2024-13-01T00:00:00Z": want RFC 3339`, append(reset, "--topic", "t", "--to-datetime", "2024-13-01T00:00:00Z")},
		// Regression: a time before 1970 is a negative timestamp, which
		// ListOffsets reads as "latest" (-1) or "earliest" (-2).
		{`--to-datetime "1969-12-31T23:59:59.999Z": before 1970-01-01T00:00:00Z`, append(reset, "--topic", "t", "--to-datetime", "1969-12-31T23:59:59.999Z")},
		{`invalid argument "back" for "--shift-by" flag: allowed: an integer`, append(reset, "--topic", "t", "--shift-by", "back")},
		{`invalid argument "-1" for "--to-offset" flag: allowed: an integer from 0`, append(reset, "--topic", "t", "--to-offset", "-1")},
		{`--topic is required: give TOPIC or TOPIC:PARTITION[,PARTITION...]`, append(reset, "--to-earliest")},
		{`--topic "t:x": want TOPIC or TOPIC:PARTITION[,PARTITION...]`, append(reset, "--topic", "t:x", "--to-earliest")},
		{`--topic ":1": want TOPIC`, append(reset, "--topic", ":1", "--to-earliest")},
		{`--state "bored": allowed: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead`, []string{"group", "list", "--state", "bored"}},
		{`the group id is empty`, []string{"group", "describe", ""}},
		{`the group id is empty`, []string{"group", "delete", ""}},
		{`the group id is empty`, []string{"group", "reset-offsets", "", "--topic", "t", "--to-earliest"}},
		{`accepts 1 arg(s), received 0`, []string{"group", "describe"}},
		{`--group is empty: give the consumer group's name`, []string{"consume", "t", "--group", ""}},
		{`--partition and --group exclude each other: a group member reads the partitions the group assigns it`,
			[]string{"consume", "t", "--group", "g", "--partition", "0"}},
		{`--offset and --group exclude each other: a group member starts at the group's committed offsets; move them with "fjord group reset-offsets"`,
			[]string{"consume", "t", "--group", "g", "--offset", "0"}},
		{`topic "nope" does not exist`, []string{"consume", "nope", "--group", "g", "--max-messages", "1"}},
	} {
		r := n.fails(t, tc.want, tc.args...)
		if r.stdout != "" {
			t.Errorf("fjord %s printed %q on stdout", strings.Join(tc.args, " "), r.stdout)
		}
	}
	n.wantCommitted(t, "g", before)
	n.wantCommitted(t, "nope", map[topicPartition]int64{})
	if r := n.ok(t, "", "group", "list"); strings.Contains(r.stdout, "nope") {
		t.Errorf("a failed command created a group:\n%s", r.stdout)
	}

	// The group commands say when there is no node, as the others do.
	addr := closedPort(t)
	want := fmt.Sprintf(`fjord: cannot reach a Fjord node at %s (connection refused); is "fjord serve" running?`+"\n", addr)
	for _, args := range [][]string{
		{"group", "list"},
		{"group", "describe", "g"},
		{"group", "reset-offsets", "g", "--topic", "t", "--to-earliest"},
		{"group", "delete", "g"},
		{"consume", "t", "--group", "g"},
	} {
		if r := fjord(t, "", append(args, "--brokers", addr)...); r.code != 1 || r.stderr != want {
			t.Errorf("fjord %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
}
