package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/testutil"
)

// hostileCase is a request and the error it must get.
type hostileCase struct {
	method, path, body string
	status             int
	code               string
}

// expectErrors sends each case and checks its status and error code.
func (e *env) expectErrors(cases []hostileCase) {
	e.t.Helper()
	for _, tc := range cases {
		var res result
		if st := e.do(tc.method, tc.path, tc.body, &res); st != tc.status || res.Error != tc.code {
			e.t.Errorf("%s %s %.80s: %d %+v, want %d %q", tc.method, tc.path, tc.body, st, res, tc.status, tc.code)
		}
	}
}

// oversized is a JSON body past the API's default 16 MiB limit.
func oversized(field string) string {
	return `{"` + field + `": "` + strings.Repeat("a", 17<<20) + `"}`
}

// PATCH /v1/topics/{topic} is `fjord topic alter`: grows the partitions,
// sets and removes config overrides, and refuses what the CLI refuses
// without changing anything.
func TestAlterTopic(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 2)
	partitions := func() int {
		t.Helper()
		td, err := e.adm.ListTopics(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		return len(td["t"].Partitions)
	}
	override := func(name string) (string, bool) {
		t.Helper()
		rcs, err := e.adm.DescribeTopicConfigs(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("t", nil)
		for _, c := range rc.Configs {
			if c.Key == name && c.Value != nil && c.Source.String() == "DYNAMIC_TOPIC_CONFIG" {
				return *c.Value, true
			}
		}
		return "", false
	}

	type alterAnswer struct {
		Name       string             `json:"name"`
		Partitions int                `json:"partitions"`
		Configs    map[string]*string `json:"configs"`
		Warning    string             `json:"warning"`
	}
	var altered alterAnswer
	if st := e.do("PATCH", "/v1/topics/t", `{"partitions": 4, "configs": {"retention.ms": "3600000", "segment.ms": "600000"}}`, &altered); st != 200 ||
		altered.Partitions != 4 || !strings.Contains(altered.Warning, "per-key order") {
		t.Fatalf("alter: %d %+v", st, altered)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := partitions(); n != 4 {
			return fmt.Errorf("%d partitions", n)
		}
		return nil
	})
	if v, ok := override("retention.ms"); v != "3600000" || !ok {
		t.Fatalf("retention.ms = %q (%v) after the alter", v, ok)
	}
	// null removes an override; the same partition count changes nothing.
	altered = alterAnswer{}
	if st := e.do("PATCH", "/v1/topics/t", `{"partitions": 4, "configs": {"retention.ms": null}}`, &altered); st != 200 || altered.Warning != "" {
		t.Fatalf("remove retention.ms: %d %+v", st, altered)
	}
	if v, ok := override("retention.ms"); ok {
		t.Fatalf("retention.ms still overridden (%q) after removing it", v)
	}

	e.expectErrors([]hostileCase{
		{"PATCH", "/v1/topics/t", `{}`, 400, "nothing_to_change"},
		{"PATCH", "/v1/topics/t", `{"configs": {}}`, 400, "nothing_to_change"},
		{"PATCH", "/v1/topics/t", `{"partitions": 0}`, 400, "bad_partitions"},
		{"PATCH", "/v1/topics/t", `{"partitions": -3}`, 400, "bad_partitions"},
		{"PATCH", "/v1/topics/t", `{"partitions": 2}`, 400, "bad_partitions"}, // fewer: never removed
		{"PATCH", "/v1/topics/t", `{"partitions": 99999999999}`, 400, "bad_partitions"},
		{"PATCH", "/v1/topics/t", `{"partitions": 2147483647}`, 400, "invalid_topic"}, // past the cluster's bound
		{"PATCH", "/v1/topics/t", `{"configs": {"no.such.config": "1"}}`, 400, "invalid_config"},
		// Validated whole before anything applies: the partitions stay 4.
		{"PATCH", "/v1/topics/t", `{"partitions": 6, "configs": {"no.such.config": "1"}}`, 400, "invalid_config"},
		{"PATCH", "/v1/topics/t", `{"partitions": "6"}`, 400, "malformed_json"},
		{"PATCH", "/v1/topics/t", `{"partition": 6}`, 400, "malformed_json"},
		{"PATCH", "/v1/topics/t", `{"partitions": 6`, 400, "malformed_json"},
		{"PATCH", "/v1/topics/t", `{"configs": {"retention.ms": 5}}`, 400, "malformed_json"},
		{"PATCH", "/v1/topics/t", oversized("configs"), 413, "body_too_large"},
		{"PATCH", "/v1/topics/nope", `{"partitions": 6}`, 404, "unknown_topic"},
		{"PATCH", "/v1/topics/a%2Fb", `{"partitions": 6}`, 400, "bad_topic"},
		{"PATCH", "/v1/topics/%C3%A9t%C3%A9", `{"partitions": 6}`, 400, "bad_topic"},
	})
	if n := partitions(); n != 4 {
		t.Fatalf("%d partitions after refused alters, want 4", n)
	}
	if _, ok := override("segment.ms"); !ok {
		t.Fatal("segment.ms lost its override in a refused alter")
	}

	// A keyed record makes its topic refuse to grow (409 keyed_topic,
	// nothing changed, configs included) unless allow_key_remap. The
	// mark is committed after the append, so the refusal is waited for
	// with validate-only asks of the node (a PATCH that went through
	// would grow the topic).
	var res result
	if st := e.do("POST", "/v1/topics/t/produce", `{"key": "alice", "value": "YQ=="}`, &res); st != 200 {
		t.Fatalf("keyed produce: %d %+v", st, res)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := fjordmsg.GrowPartitions(context.Background(), e.kcl, "t", 6, 10*time.Second, false, true)
		if !errors.Is(err, fjordmsg.ErrKeyedTopic) {
			return fmt.Errorf("a validate-only grow of the keyed topic: %v", err)
		}
		return nil
	})
	e.expectErrors([]hostileCase{
		{"PATCH", "/v1/topics/t", `{"partitions": 6}`, 409, "keyed_topic"},
		{"PATCH", "/v1/topics/t", `{"partitions": 6, "configs": {"retention.ms": "60000"}}`, 409, "keyed_topic"},
		{"PATCH", "/v1/topics/t", `{"partitions": 6, "allow_key_remap": "yes"}`, 400, "malformed_json"},
	})
	if _, ok := override("retention.ms"); ok || partitions() != 4 {
		t.Fatalf("a refused grow of the keyed topic changed it: %d partitions, retention.ms overridden %v", partitions(), ok)
	}
	altered = alterAnswer{}
	if st := e.do("PATCH", "/v1/topics/t", `{"partitions": 6, "allow_key_remap": true}`, &altered); st != 200 ||
		altered.Partitions != 6 || !strings.Contains(altered.Warning, "per-key order") {
		t.Fatalf("grow with allow_key_remap: %d %+v", st, altered)
	}
}

type resetAnswer struct {
	Group   string `json:"group"`
	DryRun  bool   `json:"dry_run"`
	Offsets []struct {
		Topic       string `json:"topic"`
		Partition   int32  `json:"partition"`
		Old         *int64 `json:"old"`
		New         int64  `json:"new"`
		ClampedFrom *int64 `json:"clamped_from"`
	} `json:"offsets"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Group delete and reset-offsets over HTTP, as `fjord group delete` and
// `fjord group reset-offsets`: refused while the group has members (an
// HTTP consumer instance among them until it is closed), the targets of
// the CLI, offsets outside the log moved to its bounds and saying so.
func TestGroupDeleteAndResetOffsets(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 2)
	e.produceN("t", 0, 5)
	e.produceN("t", 1, 3)
	committed := func(p int32) int64 {
		t.Helper()
		os, err := e.adm.FetchOffsets(context.Background(), "g")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := os.Lookup("t", p); ok {
			return o.At
		}
		return -1
	}

	// An HTTP consumer is a member: the group cannot be reset or deleted.
	e.consumeOffsets("/v1/topics/t/consume?group=g&auto_offset_reset=earliest&timeout_ms=200", 8)
	e.expectErrors([]hostileCase{
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "to": "earliest"}`, 409, "group_not_empty"},
		{"DELETE", "/v1/groups/g", "", 409, "group_not_empty"},
	})
	// Closing it (not waiting five minutes for it to expire) frees the group.
	var closed struct {
		Closed map[string]string `json:"closed"`
	}
	if st := e.do("DELETE", "/v1/topics/t/consume?group=g", "", &closed); st != 200 || closed.Closed["group"] != "g" || closed.Closed["topic"] != "t" {
		t.Fatalf("close the instance: %d %+v", st, closed)
	}
	e.expectErrors([]hostileCase{
		{"DELETE", "/v1/topics/t/consume?group=g", "", 404, "unknown_consumer"},
		{"DELETE", "/v1/topics/t/consume?group=g&consumer=other", "", 404, "unknown_consumer"},
		{"DELETE", "/v1/topics/t/consume", "", 400, "bad_group"},
		{"DELETE", "/v1/topics/a%2Fb/consume?group=g%2F%C3%A9", "", 404, "unknown_consumer"},
	})

	reset := func(body string) resetAnswer {
		t.Helper()
		var ra resetAnswer
		if st := e.do("POST", "/v1/groups/g/reset-offsets", body, &ra); st != 200 {
			t.Fatalf("reset %s: %d %+v", body, st, ra)
		}
		return ra
	}
	// The group empties once the coordinator has the leave.
	testutil.Eventually(t, 10*time.Second, func() error {
		var ra resetAnswer
		if st := e.do("POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "to": "earliest", "dry_run": true}`, &ra); st != 200 {
			return fmt.Errorf("reset after the close: %d %+v", st, ra)
		}
		if len(ra.Offsets) != 2 || ra.Offsets[0].New != 0 || ra.Offsets[1].New != 0 || !ra.DryRun {
			t.Fatalf("dry run to earliest: %+v", ra)
		}
		return nil
	})
	if c := committed(0); c != -1 {
		t.Fatalf("a dry run committed %d", c)
	}

	if ra := reset(`{"topics": [{"topic": "t", "partitions": [1]}], "offset": 2}`); len(ra.Offsets) != 1 || ra.Offsets[0].New != 2 || ra.Offsets[0].Old != nil {
		t.Fatalf("to offset 2: %+v", ra)
	}
	if c := committed(1); c != 2 {
		t.Fatalf("partition 1 committed at %d, want 2", c)
	}
	if ra := reset(`{"topics": [{"topic": "t", "partitions": [1]}], "offset": 99}`); ra.Offsets[0].New != 3 || ra.Offsets[0].ClampedFrom == nil || *ra.Offsets[0].ClampedFrom != 99 || *ra.Offsets[0].Old != 2 {
		t.Fatalf("to offset 99, past the log end 3: %+v", ra)
	}
	if ra := reset(`{"topics": [{"topic": "t", "partitions": [1]}], "shift_by": -2}`); ra.Offsets[0].New != 1 {
		t.Fatalf("shift by -2 from 3: %+v", ra)
	}
	if ra := reset(`{"topics": [{"topic": "t", "partitions": [1]}], "shift_by": -9223372036854775807}`); ra.Offsets[0].New != 0 || ra.Offsets[0].ClampedFrom == nil {
		t.Fatalf("shift far back: %+v", ra)
	}
	if ra := reset(`{"topics": [{"topic": "t"}, {"topic": "t", "partitions": [0]}], "to": "latest"}`); len(ra.Offsets) != 2 || ra.Offsets[0].New != 5 || ra.Offsets[1].New != 3 {
		t.Fatalf("to latest: %+v", ra)
	}
	if ra := reset(`{"topics": [{"topic": "t", "partitions": [0, 0]}], "timestamp": 0}`); len(ra.Offsets) != 1 || ra.Offsets[0].New != 0 {
		t.Fatalf("to the first record at or after time 0: %+v", ra)
	}
	if ra := reset(`{"topics": [{"topic": "t", "partitions": [0]}], "timestamp": 32503680000000}`); ra.Offsets[0].New != 5 {
		t.Fatalf("to a time after every record (the log end): %+v", ra)
	}

	e.expectErrors([]hostileCase{
		{"POST", "/v1/groups/g/reset-offsets", `{"to": "earliest"}`, 400, "bad_topics"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [], "to": "earliest"}`, 400, "bad_topics"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": ""}], "to": "earliest"}`, 400, "bad_topics"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}]}`, 400, "bad_reset"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "to": "earliest", "offset": 1}`, 400, "bad_reset"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "to": "middle"}`, 400, "bad_reset"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "offset": -1}`, 400, "bad_offset"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "timestamp": -1}`, 400, "bad_timestamp"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "shift_by": 99999999999999999999}`, 400, "bad_reset"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t", "partitions": []}], "to": "earliest"}`, 400, "bad_partition"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t", "partitions": [-1]}], "to": "earliest"}`, 400, "bad_partition"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t", "partitions": [0, 7]}], "to": "earliest"}`, 400, "bad_partition"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t", "partitions": [99999999999]}], "to": "earliest"}`, 400, "bad_partitions"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "nope"}], "to": "earliest"}`, 404, "unknown_topic"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t/../x"}], "to": "earliest"}`, 400, "bad_topic"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}], "to": "earliest"`, 400, "malformed_json"},
		{"POST", "/v1/groups/g/reset-offsets", `{"topics": {"t": [0]}, "to": "earliest"}`, 400, "malformed_json"},
		{"POST", "/v1/groups/g/reset-offsets", oversized("to"), 413, "body_too_large"},
		// No committed offset to shift from in a group that has none.
		{"POST", "/v1/groups/fresh/reset-offsets", `{"topics": [{"topic": "t"}], "shift_by": 1}`, 400, "bad_reset"},
		{"DELETE", "/v1/groups/nope", "", 404, "unknown_group"},
		{"DELETE", "/v1/groups/a%2Fb", "", 404, "unknown_group"},
		{"DELETE", "/v1/groups/gr%C3%BCppe%E2%80%8B", "", 404, "unknown_group"},
	})
	// The refused resets moved nothing.
	if c0, c1 := committed(0), committed(1); c0 != 5 || c1 != 3 {
		t.Fatalf("committed %d, %d after refused resets, want 5, 3", c0, c1)
	}

	// A group named with a slash and unicode is a group like any other.
	var ra resetAnswer
	if st := e.do("POST", "/v1/groups/a%2F%C3%A9/reset-offsets", `{"topics": [{"topic": "t"}], "to": "latest"}`, &ra); st != 200 || ra.Group != "a/é" {
		t.Fatalf("reset a group named a/é: %d %+v", st, ra)
	}
	var deleted map[string]string
	for _, g := range []string{"g", "a%2F%C3%A9"} {
		if st := e.do("DELETE", "/v1/groups/"+g, "", &deleted); st != 200 {
			t.Fatalf("delete %s: %d %+v", g, st, deleted)
		}
	}
	if deleted["deleted"] != "a/é" {
		t.Fatalf("delete answered %+v", deleted)
	}
	e.expectErrors([]hostileCase{
		{"GET", "/v1/groups/g", "", 404, "unknown_group"},
		{"DELETE", "/v1/groups/g", "", 404, "unknown_group"},
	})
}
