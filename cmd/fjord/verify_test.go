package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Bad settings fail before anything connects (the brokers named are a
// closed port), one line each; what is not built is refused, not
// ignored.
func TestVerifyBadInput(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`--workload "groups": only queue is built`, []string{"--workload", "groups"}},
		{`--workload "` + strings.Repeat("x", 64) + `...": only queue is built`, []string{"--workload", strings.Repeat("x", 100000)}},
		{"--local is not built yet", []string{"--local"}},
		{"--fault-cmd is not built yet", []string{"--fault-cmd", "./faults.sh"}},
		{"--nodes is not built yet", []string{"--nodes", "3"}},
		{"--duration 0s: want more than 0 and at most 24h", []string{"--duration", "0"}},
		{"--duration 48h0m0s: want more than 0 and at most 24h", []string{"--duration", "48h"}},
		{`invalid argument "soon" for "--duration" flag`, []string{"--duration", "soon"}},
		{"--rate 0: want 1 to 1000000", []string{"--rate", "0"}},
		{"--rate 2000000: want 1 to 1000000", []string{"--rate", "2000000"}},
		{"--producers 0: want 1 to 64", []string{"--producers", "0"}},
		{"--producers 65: want 1 to 64", []string{"--producers", "65"}},
		{"--group-members -1: want 0 to 64", []string{"--group-members", "-1"}},
		{"--group-members 65: want 0 to 64", []string{"--group-members", "65"}},
		{"--value-size 8: want 32 to 1048576", []string{"--value-size", "8"}},
		{"--value-size 2097152: want 32 to 1048576", []string{"--value-size", "2097152"}},
		{`invalid argument "0" for "--partitions" flag`, []string{"--partitions", "0"}},
		{`invalid argument "-1" for "--seed" flag`, []string{"--seed", "-1"}},
		{"unknown command \"now\"", []string{"now"}},
	} {
		r := fjord(t, "", append([]string{"verify", "--brokers", addr}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("fjord verify %s: exit %d, stderr %q; want exit 1 before connecting, saying %q", short(tc.args), r.code, r.stderr, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
			t.Errorf("fjord verify %s: error is %d lines, want one", short(tc.args), n+1)
		}
	}
}

// On the shared node: a short queue run passes, its counts agree, its
// topic is deleted, and a second run into an existing topic is refused
// before it writes.
func TestVerifyPassesOnANode(t *testing.T) {
	// Long enough for the group to form (a new group waits 3 s for its
	// members) and commit.
	r := ok(t, "", "verify", "--duration", "8s", "--rate", "300", "--seed", "42", "--partitions", "3", "-o", "json")
	doc := decodeJSON(t, r.stdout)
	m := wantKeys(t, "verify", doc, "pass", "workload", "topic", "seed", "sent", "acknowledged", "failed_writes", "read_back",
		"unacknowledged_read_back", "read_live", "reader_errors", "group_commits", "group_errors", "violations", "anomalies", "command")
	if m["pass"] != true || number(t, m["acknowledged"]) < 500 || number(t, m["read_back"]) != number(t, m["acknowledged"])+number(t, m["unacknowledged_read_back"]) ||
		number(t, m["violations"]) != 0 || number(t, m["read_live"]) == 0 || number(t, m["group_commits"]) == 0 || m["topic"] != "fjord-verify-42" || !strings.Contains(fmt.Sprint(m["command"]), "--seed 42") {
		t.Fatalf("fjord verify: %v", m)
	}
	if out := ok(t, "", "topic", "list").stdout; strings.Contains(out, "fjord-verify-42") {
		t.Errorf("the passed run's topic is still there:\n%s", out)
	}
	if out := ok(t, "", "group", "list").stdout; strings.Contains(out, "fjord-verify-42") {
		t.Errorf("the passed run's group is still there:\n%s", out)
	}
	// A group of the topic's name with offsets from before is another
	// history: refused before anything is written.
	stale := topicName("verify-stale")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ok(t, "", "topic", "create", "other-"+stale)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "other-" + stale, Partition: 0, At: 0})
	if resp, err := kadm.NewClient(cl).CommitOffsets(t.Context(), stale, offsets); err != nil || resp.Error() != nil {
		t.Fatalf("committing for the stale group: %v %v", err, resp.Error())
	}
	fails(t, "the group "+stale+" has committed offsets from an earlier run", "verify", "--topic", stale, "--duration", "1s", "--brokers", brokers(t))
	topic := topicName("verify-existing")
	ok(t, "", "topic", "create", topic)
	fails(t, "creating the topic "+topic+" (it must not exist", "verify", "--topic", topic, "--duration", "1s", "--brokers", brokers(t))
}

// The checker in the command can fail: a record written into the run's
// topic by someone else is one the run never sent, and the run says
// FAIL, exits 1 and keeps the topic.
func TestVerifyFailsOnARecordItNeverSent(t *testing.T) {
	topic := topicName("verify-intruder")
	done := make(chan result, 1)
	go func() {
		done <- fjord(t, "", "verify", "--topic", topic, "--duration", "4s", "--rate", "200", "--partitions", "1", "--group-members", "0", "--brokers", brokers(t))
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.Eventually(t, 10*time.Second, func() error {
		select {
		case r := <-done:
			t.Fatalf("fjord verify ended before its topic was seen: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		// A Metadata request of its own (kadm's may answer from the
		// client's cache), asking not to create the topic.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return fmt.Errorf("%s not created yet", topic)
		}
		return nil
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("intruder")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL: queue workload on "+topic) || !strings.Contains(r.stdout, `value "intruder" was never sent`) ||
		!strings.Contains(r.stderr, "the topic "+topic+" is kept") {
		t.Fatalf("fjord verify with an intruder: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, "", "topic", "list").stdout; !strings.Contains(out, topic) {
		t.Errorf("the failed run's topic was deleted:\n%s", out)
	}
}
