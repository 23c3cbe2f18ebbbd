package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Partition growth that keeps key order (issue 18, DESIGN.md section
// 24), against the shared node: a topic that has keyed records is not
// grown by `fjord topic alter --partitions` unless --allow-key-remap,
// one of null keys only is; Kafka's API grows either, and the node
// counts the keyed topic's growth.
func TestTopicAlterRefusesKeyedTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keyed, nulls := topicName("keyed"), topicName("null-keys")
	ok(t, "", "topic", "create", keyed, "--partitions", "2")
	ok(t, "", "topic", "create", nulls, "--partitions", "2")

	// franz-go producing as an application does: keyed records, with
	// gzip so the keys are inside a compressed batch, and null-key ones
	// to the other topic.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: keyed, Key: []byte(fmt.Sprintf("key-%d", i%5)), Value: []byte("v")},
			&kgo.Record{Topic: nulls, Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The mark is a metadata commit after the append: wait for the node
	// to refuse a validate-only grow carrying the CLI's tag, which
	// changes nothing, then ask the CLI.
	testutil.Eventually(t, 10*time.Second, func() error {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly, req.TimeoutMillis = true, 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = keyed, 3
		fjordmsg.SetRefuseKeyed(&rt)
		req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if !fjordmsg.RefusedKeyed(&resp.Topics[0]) {
			return fmt.Errorf("not refused yet: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
		}
		return nil
	})
	for _, args := range [][]string{
		{"topic", "alter", keyed, "--partitions", "4"},
		// With a config change too: the refusal comes first, and the
		// config is not changed either.
		{"topic", "alter", keyed, "--partitions", "4", "--config", "retention.ms=1000"},
	} {
		r := fails(t, "not growing "+keyed+" from 2 to 4 partitions: its records have keys", append(args, "--brokers", brokers(t))...)
		for _, want := range []string{"per-key order breaks", "nothing was changed", "--allow-key-remap",
			"fjord topic migrate " + keyed + " DST --partitions 4"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("fjord %s: the refusal does not say %q:\n%s", strings.Join(args, " "), want, r.stderr)
			}
		}
	}
	r := ok(t, "", "topic", "describe", keyed)
	if !strings.Contains(r.stdout, "Partitions: 2\n") || !strings.Contains(r.stdout, "Configs: (defaults)\n") {
		t.Fatalf("a refused alter changed the topic:\n%s", r.stdout)
	}

	// With --allow-key-remap it grows, saying what that breaks.
	r = ok(t, "", "topic", "alter", keyed, "--partitions", "4", "--allow-key-remap")
	if !strings.Contains(r.stderr, "warning: growing "+keyed+" from 2 to 4 partitions") || !strings.Contains(r.stdout, "now has 4 partitions") {
		t.Errorf("--allow-key-remap:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	// Null keys only: grown without the flag, and without a warning.
	r = ok(t, "", "topic", "alter", nulls, "--partitions", "3")
	if strings.Contains(r.stderr, "warning") || !strings.Contains(r.stdout, "now has 3 partitions") {
		t.Errorf("growing the null-key topic:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}

	// Kafka's API (kadm, no tag) grows the keyed topic as Kafka does.
	resps, err := kadm.NewClient(cl).UpdatePartitions(ctx, 6, keyed)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("kadm UpdatePartitions: %v", err)
	}
	r = ok(t, "", "topic", "describe", keyed)
	if !strings.Contains(r.stdout, "Partitions: 6\n") {
		t.Fatalf("after kadm's grow:\n%s", r.stdout)
	}
	// Counted: 2 -> 4 by the CLI with --allow-key-remap, 4 -> 6 by kadm;
	// the null-key topic's growth is not.
	got := scrapeCounter(t, "fjord_partitions_added_to_keyed_topics_total")
	if got[keyed] != 4 || got[nulls] != 0 {
		t.Fatalf("fjord_partitions_added_to_keyed_topics_total %v, want %s=4 and no %s", got, keyed, nulls)
	}

	r = ok(t, "", "topic", "alter", "--help")
	if !strings.Contains(r.stdout, "--allow-key-remap") || !strings.Contains(r.stdout, "fjord topic migrate SRC DST --partitions N") {
		t.Errorf("topic alter --help:\n%s", r.stdout)
	}
}

// scrapeCounter reads a counter family labelled by topic from the
// shared node's /metrics: topic -> value.
func scrapeCounter(t *testing.T, name string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + sharedNode(t).HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, found := strings.CutPrefix(line, name+`{topic="`)
		if !found {
			continue
		}
		topic, value, found := strings.Cut(rest, `"} `)
		if !found {
			t.Fatalf("metric line %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[topic] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
