package poison_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/poison"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The Store against a real node: its records go through the Kafka
// protocol to a real log, as on any node of a cluster.

// startNode starts a node of its own on dir (a restart when dir holds
// one already).
func startNode(t *testing.T, dir string) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		NodeID: 1, DataDir: dir,
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.Eventually(t, 10*time.Second, n.Ready)
	return n
}

func brokers(n *node.Node) []string { return []string{n.KafkaAddr().String()} }

func open(t *testing.T, n *node.Node, opts ...kgo.Opt) *poison.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := poison.Open(ctx, brokers(n), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func admin(t *testing.T, n *node.Node) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(n)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// endOffset is the high watermark of the policies topic.
func endOffset(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), poison.Topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(poison.Topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end of %s: %v %v", poison.Topic, ok, o.Err)
	}
	return o.Offset
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Issue 18, point 6: policies with unknown values, zero or negative
// attempts, or a DLQ topic equal to the source are refused with a clear
// error, and nothing changes. So are the other bad policies and pauses
// the API names. Open created the topic; not one record lands in it.
func TestInvalidPoliciesChangeNothing(t *testing.T) {
	n := startNode(t, t.TempDir())
	s := open(t, n)
	adm := admin(t, n)
	before := endOffset(t, adm)
	ctx := ctxT(t)

	ok := poison.Policy{Group: "billing", Topic: "orders", Action: poison.ActionDLQ, MaxAttempts: 3}
	with := func(change func(*poison.Policy)) poison.Policy {
		p := ok
		change(&p)
		return p
	}
	long := strings.Repeat("t", 249)
	for _, c := range []struct {
		name   string
		policy poison.Policy
		want   string
	}{
		{"empty group", with(func(p *poison.Policy) { p.Group = "" }), "the group is empty"},
		{"group over a Kafka string", with(func(p *poison.Policy) { p.Group = strings.Repeat("g", 1<<15) }), "the group is 32768 bytes long"},
		{"empty topic", with(func(p *poison.Policy) { p.Topic = "" }), "topic name is empty"},
		{"topic Kafka refuses", with(func(p *poison.Policy) { p.Topic = "orders/eu" }), `topic name "orders/eu" contains "/"`},
		{"topic too long", with(func(p *poison.Policy) { p.Topic = long + "x" }), "250 characters long"},
		{"unknown action", with(func(p *poison.Policy) { p.Action = "drop" }), `the action "drop" is unknown (allowed: pause, dlq)`},
		{"action in capitals", with(func(p *poison.Policy) { p.Action = "PAUSE" }), `the action "PAUSE" is unknown`},
		{"no action", with(func(p *poison.Policy) { p.Action = "" }), "the action is empty"},
		{"zero attempts", with(func(p *poison.Policy) { p.MaxAttempts = 0 }), "max attempts is 0 (allowed: 1 to 1000)"},
		{"negative attempts", with(func(p *poison.Policy) { p.MaxAttempts = -3 }), "max attempts is -3"},
		{"too many attempts", with(func(p *poison.Policy) { p.MaxAttempts = 1001 }), "max attempts is 1001"},
		{"DLQ the source", with(func(p *poison.Policy) { p.DLQTopic = "orders" }), `the dead-letter topic "orders" is the source topic`},
		{"DLQ the source, pause", with(func(p *poison.Policy) { p.Action, p.DLQTopic = poison.ActionPause, "orders" }), "is the source topic"},
		{"DLQ name Kafka refuses", with(func(p *poison.Policy) { p.DLQTopic = "orders dlq" }), `dead-letter topic: topic name "orders dlq" contains " "`},
		{"DLQ dot", with(func(p *poison.Policy) { p.DLQTopic = "." }), `topic name "." is not allowed`},
		{"DLQ too long", with(func(p *poison.Policy) { p.DLQTopic = long + "x" }), "dead-letter topic: topic name is 250 characters long"},
		{"default DLQ too long", with(func(p *poison.Policy) { p.Topic = long }), "the default dead-letter topic \"" + long + ".dlq\" is 253 characters long (allowed: at most 249): name a shorter one"},
		{"DLQ internal", with(func(p *poison.Policy) { p.DLQTopic = "__consumer_offsets" }), `"__consumer_offsets" is internal to Fjord`},
		{"DLQ the policies topic", with(func(p *poison.Policy) { p.DLQTopic = poison.Topic }), "is internal to Fjord"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for what, err := range map[string]error{"Validate": c.policy.Validate(), "SetPolicy": s.SetPolicy(ctx, c.policy)} {
				if !errors.Is(err, poison.ErrInvalidPolicy) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s = %v, want ErrInvalidPolicy saying %q", what, err, c.want)
				}
				// The message is for a user: no Kafka error code.
				if err != nil && strings.Contains(err.Error(), "INVALID_TOPIC") {
					t.Errorf("%s = %v: names Kafka's error code", what, err)
				}
			}
		})
	}
	// The long default is fine once the DLQ is named.
	if err := with(func(p *poison.Policy) { p.Topic, p.DLQTopic = long, "short.dlq" }).Validate(); err != nil {
		t.Errorf("a 249-character topic with a named DLQ: %v", err)
	}

	// Clearing and pausing with bad names or numbers are refused too.
	for name, err := range map[string]error{
		"clear, empty group": s.ClearPolicy(ctx, "", "orders"),
		"clear, empty topic": s.ClearPolicy(ctx, "billing", ""),
	} {
		if !errors.Is(err, poison.ErrInvalidPolicy) {
			t.Errorf("%s: %v, want ErrInvalidPolicy", name, err)
		}
	}
	good := poison.Pause{Group: "billing", Topic: "orders", Partition: 1, Offset: 5, Attempts: 3}
	bad := func(change func(*poison.Pause)) poison.Pause {
		p := good
		change(&p)
		return p
	}
	_, _, resumeErr := s.Resume(ctx, "billing", "orders", -1)
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"pause, empty group":         {s.Pause(ctx, bad(func(p *poison.Pause) { p.Group = "" })), "the group is empty"},
		"pause, empty topic":         {s.Pause(ctx, bad(func(p *poison.Pause) { p.Topic = "" })), "topic name is empty"},
		"pause, negative partition":  {s.Pause(ctx, bad(func(p *poison.Pause) { p.Partition = -1 })), "partition -1 is negative"},
		"pause, negative offset":     {s.Pause(ctx, bad(func(p *poison.Pause) { p.Offset = -1 })), "offset -1 is negative"},
		"pause, negative attempts":   {s.Pause(ctx, bad(func(p *poison.Pause) { p.Attempts = -1 })), "attempts -1 is negative"},
		"resume, negative partition": {resumeErr, "partition -1 is negative"},
	} {
		if !errors.Is(c.err, poison.ErrInvalidPause) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidPause saying %q", name, c.err, c.want)
		}
	}

	if after := endOffset(t, adm); after != before {
		t.Fatalf("%s grew from %d to %d records: a refused change wrote", poison.Topic, before, after)
	}
	if p, q := s.Policies(""), s.Pauses("", ""); len(p) != 0 || len(q) != 0 {
		t.Fatalf("after refusals: policies %+v, pauses %+v", p, q)
	}
}

// Set, read, replace and clear a policy; the reads after each write are
// the writer's own (read your writes: no waiting).
func TestPolicyRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir())
	s := open(t, n)
	ctx := ctxT(t)

	dlq := poison.Policy{Group: "billing", Topic: "orders", Action: poison.ActionDLQ, MaxAttempts: 5}
	if err := s.SetPolicy(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Policy("billing", "orders"); !ok || got != dlq {
		t.Fatalf("Policy = %+v %v, want %+v", got, ok, dlq)
	}
	if got := dlq.DeadLetterTopic(); got != "orders.dlq" || got != poison.DefaultDLQTopic("orders") {
		t.Fatalf("default dead-letter topic %q", got)
	}
	// A pause policy may name the topic `resume --skip` writes to.
	pause := poison.Policy{Group: "billing", Topic: "audit", Action: poison.ActionPause, MaxAttempts: 1, DLQTopic: "audit-quarantine"}
	other := poison.Policy{Group: "analytics", Topic: "orders", Action: poison.ActionPause, MaxAttempts: 1000}
	for _, p := range []poison.Policy{pause, other} {
		if err := s.SetPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := pause.DeadLetterTopic(); got != "audit-quarantine" {
		t.Fatalf("named dead-letter topic %q", got)
	}
	if got, want := s.Policies("billing"), []poison.Policy{pause, dlq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Policies(billing) = %+v, want %+v (sorted by topic)", got, want)
	}
	if got, want := s.Policies(""), []poison.Policy{other, pause, dlq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Policies() = %+v, want %+v (sorted by group, topic)", got, want)
	}

	// Setting again replaces.
	dlq.MaxAttempts, dlq.DLQTopic = 2, "orders-dead"
	if err := s.SetPolicy(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Policy("billing", "orders"); got != dlq {
		t.Fatalf("after replacing: %+v, want %+v", got, dlq)
	}

	// Clearing removes it; clearing what is not there is not an error.
	if err := s.ClearPolicy(ctx, "billing", "orders"); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Policy("billing", "orders"); ok {
		t.Fatalf("after clearing: %+v", got)
	}
	if err := s.ClearPolicy(ctx, "billing", "orders"); err != nil {
		t.Fatalf("clearing again: %v", err)
	}
	if err := s.ClearPolicy(ctx, "nobody", "nothing"); err != nil {
		t.Fatalf("clearing a policy never set: %v", err)
	}
	if got, want := s.Policies(""), []poison.Policy{other, pause}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Policies() = %+v, want %+v", got, want)
	}
	if _, ok := s.Policy("nobody", "nothing"); ok {
		t.Fatal("a policy never set is there")
	}
}

// Pause and resume: pauses listed by partition (numerically), the reason
// bounded, the time set when not given; Resume returns what it removed.
func TestPauseResume(t *testing.T) {
	n := startNode(t, t.TempDir())
	s := open(t, n)
	ctx := ctxT(t)

	at := time.UnixMilli(1_700_000_000_123)
	first := poison.Pause{Group: "billing", Topic: "orders", Partition: 2, Offset: 42, Reason: "decode: unexpected EOF", Attempts: 5, At: at}
	if err := s.Pause(ctx, first); err != nil {
		t.Fatal(err)
	}
	got := s.Pauses("billing", "orders")
	if len(got) != 1 || got[0] != first {
		t.Fatalf("Pauses = %+v, want [%+v]", got, first)
	}

	before := time.Now()
	// A byte that is not UTF-8 (kept as U+FFFD, 3 bytes), then a 4-byte
	// character at bytes 1022 to 1025: cut before it.
	reason := "bad \xff" + strings.Repeat("r", poison.MaxReasonBytes-9) + "🎉 and more"
	for _, p := range []int32{10, 0, 1} {
		if err := s.Pause(ctx, poison.Pause{Group: "billing", Topic: "orders", Partition: p, Offset: int64(p), Reason: reason, Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Pause(ctx, poison.Pause{Group: "billing", Topic: "audit", Partition: 7, Offset: 1, Attempts: 1, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(ctx, poison.Pause{Group: "analytics", Topic: "orders", Partition: 0, Offset: 1, Attempts: 1, At: at}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	var parts []int32
	for _, p := range s.Pauses("billing", "orders") {
		parts = append(parts, p.Partition)
		if p.Partition == 2 {
			continue
		}
		if len(p.Reason) != poison.MaxReasonBytes-2 || !utf8.ValidString(p.Reason) || !strings.HasPrefix(p.Reason, "bad \uFFFDrrr") || strings.Contains(p.Reason, "more") {
			t.Fatalf("reason of %d bytes, UTF-8 %v: %.20q...", len(p.Reason), utf8.ValidString(p.Reason), p.Reason)
		}
		if p.At.Before(before.Truncate(time.Millisecond)) || p.At.After(after) {
			t.Fatalf("At %v, want between %v and %v", p.At, before, after)
		}
	}
	if want := []int32{0, 1, 2, 10}; !reflect.DeepEqual(parts, want) {
		t.Fatalf("partitions %v, want %v", parts, want)
	}
	var all []string
	for _, p := range s.Pauses("billing", "") {
		all = append(all, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
	}
	if want := []string{"audit/7", "orders/0", "orders/1", "orders/2", "orders/10"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("Pauses(billing, \"\") = %v, want %v", all, want)
	}
	if got := len(s.Pauses("", "")); got != 6 {
		t.Fatalf("%d pauses in all, want 6", got)
	}

	// Resolving with a skip rewrites the pause, marked.
	first.Skip = true
	if err := s.Pause(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := s.Pauses("billing", "orders"); got[2] != first {
		t.Fatalf("after marking the skip: %+v, want %+v", got[2], first)
	}

	was, ok, err := s.Resume(ctx, "billing", "orders", 2)
	if err != nil || !ok || was != first {
		t.Fatalf("Resume = %+v %v %v, want %+v", was, ok, err, first)
	}
	for _, p := range s.Pauses("billing", "orders") {
		if p.Partition == 2 {
			t.Fatalf("partition 2 still paused after Resume: %+v", p)
		}
	}
	if was, ok, err := s.Resume(ctx, "billing", "orders", 2); err != nil || ok {
		t.Fatalf("second Resume = %+v %v %v, want nothing", was, ok, err)
	}
}

// Two Stores on one cluster (two nodes' gateways, or a gateway and the
// CLI) see each other's writes once their followers fetch them, and at
// once after Sync.
func TestStoresSeeEachOther(t *testing.T) {
	n := startNode(t, t.TempDir())
	a, b := open(t, n), open(t, n)
	ctx := ctxT(t)

	p := poison.Policy{Group: "billing", Topic: "orders", Action: poison.ActionPause, MaxAttempts: 3}
	if err := a.SetPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got, ok := b.Policy("billing", "orders"); !ok || got != p {
			return fmt.Errorf("b sees %+v %v", got, ok)
		}
		return nil
	})

	q := poison.Pause{Group: "billing", Topic: "orders", Partition: 3, Offset: 9, Reason: "boom", Attempts: 3, At: time.UnixMilli(1_700_000_000_000)}
	if err := b.Pause(ctx, q); err != nil {
		t.Fatal(err)
	}
	// Sync: everything written before it is in the view when it returns.
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Pauses("billing", "orders"); len(got) != 1 || got[0] != q {
		t.Fatalf("after Sync, a sees %+v, want [%+v]", got, q)
	}
	// a resumes b's pause: Resume syncs first, so it returns it.
	if was, ok, err := a.Resume(ctx, "billing", "orders", 3); err != nil || !ok || was != q {
		t.Fatalf("a.Resume = %+v %v %v, want %+v", was, ok, err, q)
	}
	if err := b.ClearPolicy(ctx, "billing", "orders"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got, ok := a.Policy("billing", "orders"); ok {
			return fmt.Errorf("a still sees %+v", got)
		}
		if got := b.Pauses("", ""); len(got) != 0 {
			return fmt.Errorf("b still sees %+v", got)
		}
		return nil
	})
}

// A Store opened after the writes holds them when Open returns, also
// after the node restarts on its data (the records are in the log, not
// in a Store's memory).
func TestOpenLoads(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	// The node's internal client id passes through to the clients, as
	// the node's gateway will open it.
	w := open(t, n, kgo.ClientID(n.InternalClientID()))
	ctx := ctxT(t)

	var want []poison.Policy
	for i, g := range []string{"a", "b", "c"} {
		p := poison.Policy{Group: g, Topic: "orders", Action: poison.ActionDLQ, MaxAttempts: int32(i + 1)}
		if err := w.SetPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if err := w.ClearPolicy(ctx, "b", "orders"); err != nil {
		t.Fatal(err)
	}
	want = append(want[:1], want[2:]...)
	q := poison.Pause{Group: "a", Topic: "orders", Partition: 1, Offset: 7, Reason: "boom", Attempts: 1, At: time.UnixMilli(1_700_000_000_000)}
	if err := w.Pause(ctx, q); err != nil {
		t.Fatal(err)
	}

	check := func(s *poison.Store, when string) {
		t.Helper()
		if got := s.Policies(""); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: policies %+v, want %+v", when, got, want)
		}
		if got := s.Pauses("", ""); len(got) != 1 || got[0] != q {
			t.Fatalf("%s: pauses %+v, want [%+v]", when, got, q)
		}
		if s.Undecodable() != 0 {
			t.Fatalf("%s: %d records skipped", when, s.Undecodable())
		}
	}
	check(open(t, n), "opened after the writes")

	w.Close()
	if err := w.SetPolicy(ctx, want[0]); !errors.Is(err, poison.ErrClosed) {
		t.Fatalf("SetPolicy after Close: %v, want ErrClosed", err)
	}
	n.Close()
	n2 := startNode(t, dir)
	check(open(t, n2), "opened after a restart")
}

// Records the Store cannot decode, written by any client (the topic is
// not internal), are skipped and counted, by a Store following the topic
// and by one opened after them; the records around them are applied. A
// bad value under a good key removes that key's entry, as a fresh Store
// (which reads only the newest record of a key after compaction) would
// not have it either.
func TestMalformedRecordsSkipped(t *testing.T) {
	n := startNode(t, t.TempDir())
	live := open(t, n)
	ctx := ctxT(t)
	doomed := poison.Policy{Group: "g", Topic: "doomed", Action: poison.ActionPause, MaxAttempts: 1}
	if err := live.SetPolicy(ctx, doomed); err != nil {
		t.Fatal(err)
	}

	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers(n)...), kgo.DefaultProduceTopic(poison.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Keys as the package doc draws them: version, kind, then
	// length-prefixed group and topic.
	policyKey := func(group, topic string) []byte {
		b := []byte{1, 1, 0, byte(len(group))}
		b = append(b, group...)
		b = append(append(b, 0, byte(len(topic))), topic...)
		return b
	}
	pauseKey := append(policyKey("g", "t"), 0, 0, 0, 4)
	pauseKey[1] = 2
	valid := `{"version":1,"action":"dlq","max_attempts":4}`
	bad := []struct {
		name       string
		key, value []byte
	}{
		// (No key at all the broker refuses: the topic is compacted.)
		{"an empty key", []byte{}, []byte(valid)},
		{"key of another version", append([]byte{9}, policyKey("g", "t")[1:]...), []byte(valid)},
		{"key of an unknown kind", append([]byte{1, 7}, policyKey("g", "t")[2:]...), []byte(valid)},
		{"key with a byte after it", append(policyKey("g", "t"), 0), []byte(valid)},
		{"key cut short", policyKey("g", "t")[:6], []byte(valid)},
		{"key with an empty topic", policyKey("g", ""), []byte(valid)},
		{"key of 40,000 bytes", make([]byte, 40_000), []byte(valid)},
		{"a tombstone under a bad key", []byte{1}, nil},
		{"value not JSON", policyKey("g", "t"), []byte("{not json")},
		{"value of a newer version", policyKey("g", "t"), []byte(`{"version":2,"action":"dlq","max_attempts":4}`)},
		{"value with an unknown action", policyKey("g", "t"), []byte(`{"version":1,"action":"retry","max_attempts":4}`)},
		{"value of 20,000 bytes", policyKey("g", "t"), []byte(`{"version":1,"pad":"` + strings.Repeat("x", 20_000) + `"}`)},
		{"pause value with a negative offset", pauseKey, []byte(`{"version":1,"offset":-4}`)},
		{"bad value over a good policy", policyKey("g", "doomed"), []byte(`{"version":1,"action":"pause","max_attempts":0}`)},
	}
	for _, r := range bad {
		if err := raw.ProduceSync(ctx, &kgo.Record{Key: r.key, Value: r.value}).FirstErr(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	// And one good record, written by hand: it is applied.
	if err := raw.ProduceSync(ctx, &kgo.Record{Key: policyKey("g", "t"), Value: []byte(valid)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := poison.Policy{Group: "g", Topic: "t", Action: poison.ActionDLQ, MaxAttempts: 4}

	check := func(s *poison.Store) error {
		if got := s.Undecodable(); got != int64(len(bad)) {
			return fmt.Errorf("skipped %d, want %d", got, len(bad))
		}
		if got := s.Policies(""); !reflect.DeepEqual(got, []poison.Policy{want}) {
			return fmt.Errorf("policies %+v, want [%+v]", got, want)
		}
		return nil
	}
	testutil.Eventually(t, 10*time.Second, func() error { return check(live) })
	if err := check(open(t, n)); err != nil {
		t.Fatalf("opened after: %v", err)
	}
	// The Store still writes and reads after all that.
	if err := live.SetPolicy(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	if _, ok := live.Policy("g", "doomed"); !ok {
		t.Fatal("a policy set after the bad records is not there")
	}
}
