package main

import (
	"encoding/json"
	"net"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// decodeJSON parses out as exactly one JSON document.
func decodeJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", out)
	}
	return v
}

// wantKeys checks that an object has exactly these fields: the names
// scripts rely on.
func wantKeys(t *testing.T, what string, v any, want ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", what, v)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s has fields %q, want %q", what, got, want)
	}
	return m
}

func list(t *testing.T, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is %T, want a list", v, v)
	}
	return l
}

// seconds is a JSON number that may have a fraction.
func seconds(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is %T, want a number", v, v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func number(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is %T, want a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestTopicAndClusterJSON(t *testing.T) {
	topic := topicName("json")
	ok(t, "", "topic", "create", topic, "--partitions", "2", "--config", "retention.ms=3600000")
	ok(t, "a\nb\nc\n", "produce", topic, "--partition", "1")

	doc := decodeJSON(t, ok(t, "", "topic", "list", "-o", "json").stdout)
	wantKeys(t, "topic list", doc, "topics")
	var found bool
	for _, e := range list(t, doc["topics"]) {
		m := wantKeys(t, "topic list entry", e, "name", "id", "partitions", "replication_factor")
		if m["name"] == topic {
			found = true
			if number(t, m["partitions"]) != 2 || number(t, m["replication_factor"]) != 1 || len(m["id"].(string)) != 22 {
				t.Errorf("topic list entry %v", m)
			}
		}
	}
	if !found {
		t.Errorf("topic list -o json does not list %s", topic)
	}

	doc = decodeJSON(t, ok(t, "", "topic", "describe", topic, "--output", "json").stdout)
	wantKeys(t, "topic describe", doc, "name", "id", "replication_factor", "min_insync_replicas", "min_insync_replicas_source", "configs", "partitions")
	if doc["name"] != topic || number(t, doc["replication_factor"]) != 1 || number(t, doc["min_insync_replicas"]) != 1 ||
		doc["min_insync_replicas_source"] != "default" {
		t.Errorf("topic describe: %v", doc)
	}
	if c := wantKeys(t, "configs", doc["configs"], "retention.ms"); c["retention.ms"] != "3600000" {
		t.Errorf("configs %v", c)
	}
	parts := list(t, doc["partitions"])
	if len(parts) != 2 {
		t.Fatalf("%d partitions, want 2", len(parts))
	}
	for i, p := range parts {
		m := wantKeys(t, "partition", p, "partition", "leader", "leader_epoch", "replicas", "isr", "offline_replicas", "status",
			"log_start_offset", "log_end_offset")
		wantEnd := []int64{0, 3}[i]
		if number(t, m["partition"]) != int64(i) || number(t, m["leader"]) != 1 || number(t, m["log_start_offset"]) != 0 ||
			number(t, m["log_end_offset"]) != wantEnd || len(list(t, m["replicas"])) != 1 || len(list(t, m["isr"])) != 1 ||
			len(list(t, m["offline_replicas"])) != 0 || len(list(t, m["status"])) != 0 {
			t.Errorf("partition %d: %v", i, m)
		}
	}

	n := sharedNode(t)
	doc = decodeJSON(t, ok(t, "", "cluster", "describe", "-o", "json").stdout)
	wantKeys(t, "cluster describe", doc, "cluster_id", "controller", "brokers", "quorum", "partitions")
	q := wantKeys(t, "quorum", doc["quorum"], "leader", "epoch", "high_watermark", "voters", "observers", "replicas")
	if number(t, q["leader"]) != 1 || number(t, q["epoch"]) < 1 || number(t, q["high_watermark"]) < 1 || len(list(t, q["voters"])) != 1 || len(list(t, q["observers"])) != 0 {
		t.Errorf("cluster describe's quorum: %v, want node 1 leading a quorum of itself", q)
	}
	host, port, _ := net.SplitHostPort(n.KafkaAddr().String())
	brokerList := list(t, doc["brokers"])
	if doc["cluster_id"] != n.ClusterID() || number(t, doc["controller"]) != 1 || len(brokerList) != 1 {
		t.Fatalf("cluster describe: %v", doc)
	}
	b := wantKeys(t, "broker", brokerList[0], "node_id", "host", "port", "rack", "fenced", "shutting_down")
	if number(t, b["node_id"]) != 1 || b["host"] != host || strconv.FormatInt(number(t, b["port"]), 10) != port || b["rack"] != nil ||
		b["fenced"] != false || b["shutting_down"] != false {
		t.Errorf("broker %v", b)
	}

	doc = decodeJSON(t, fjord(t, "", "version", "-o", "json").stdout)
	wantKeys(t, "version", doc, "module", "version", "commit", "modified", "commit_time", "go_version")
	if doc["go_version"] != runtime.Version() {
		t.Errorf("version: %v", doc)
	}

	// -o text is the default, and the same as giving nothing.
	if a, b := ok(t, "", "topic", "describe", topic).stdout, ok(t, "", "topic", "describe", topic, "-o", "text").stdout; a != b {
		t.Errorf("-o text differs from the default:\n%s\n%s", a, b)
	}
	for _, args := range [][]string{
		{"topic", "list"}, {"topic", "describe", "t"}, {"cluster", "describe"},
		{"group", "list"}, {"group", "describe", "g"}, {"version"},
	} {
		for _, bad := range []string{"yaml", "JSON", "", "json,text"} {
			fails(t, `invalid argument "`+bad+`" for "-o, --output" flag: allowed: text, json`,
				append(args, "-o", bad, "--brokers", closedPort(t))...)
		}
		if r := fjord(t, "", append(args, "--help")...); !strings.Contains(r.stdout, "-o, --output") {
			t.Errorf("fjord %s --help does not name -o, --output", strings.Join(args, " "))
		}
	}
	// An error is still one line on stderr, and nothing on stdout.
	if r := fails(t, `topic "no-such-topic" does not exist`, "topic", "describe", "no-such-topic", "-o", "json", "--brokers", brokers(t)); r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
}
