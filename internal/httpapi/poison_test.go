package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/poison"
	"github.com/fjordmq/fjord/internal/testutil"
)

type nackResult struct {
	Action      string           `json:"action"`
	Attempts    int32            `json:"attempts"`
	MaxAttempts *int32           `json:"max_attempts"`
	DLQ         *dlqCoords       `json:"dlq"`
	Committed   map[string]int64 `json:"committed"`
	Error       string           `json:"error"`
	Message     string           `json:"message"`
}

type dlqCoords struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type pausedAnswer struct {
	ackAnswer
	Paused []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Reason    string `json:"reason"`
		Attempts  int32  `json:"attempts"`
	} `json:"paused"`
}

func (e *env) nack(topic, group string, gen int32, p int32, offset int64, reason string) (int, nackResult) {
	e.t.Helper()
	var res nackResult
	st := e.do("POST", "/v1/topics/"+topic+"/nack",
		fmt.Sprintf(`{"group": %q, "generation": %d, "partition": %d, "offset": %d, "reason": %q}`, group, gen, p, offset, reason), &res)
	return st, res
}

// consumeRecords consumes at path until want(delivered so far) holds,
// and returns the records by partition and the last answer.
func (e *env) consumeRecords(path string, want func(map[int32][]int64) bool) (map[int32][]int64, pausedAnswer) {
	e.t.Helper()
	got := map[int32][]int64{}
	var last pausedAnswer
	testutil.Eventually(e.t, 30*time.Second, func() error {
		var c pausedAnswer
		if st := e.do("GET", path, "", &c); st != 200 {
			return fmt.Errorf("consume: %d %s", st, c.Error)
		}
		for _, r := range c.Records {
			got[r.Partition] = append(got[r.Partition], r.Offset)
		}
		last = c
		if !want(got) {
			return fmt.Errorf("delivered %v", got)
		}
		return nil
	})
	return got, last
}

// readDLQ reads n records of topic (all partitions) from the start.
func (e *env) readDLQ(topic string, n int) []*kgo.Record {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			e.t.Fatalf("reading %s: %v (%d of %d records)", topic, err, len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// Issue 18, point 1 over HTTP, pause: a record nacked max_attempts times
// stops its partition for the group (the others keep flowing), the
// consume, the group's poison view and the metric say so, and
// resume with skip moves it to the dead-letter topic, after which
// delivery goes on past it.
func TestPoisonPause(t *testing.T) {
	e := newEnv(t)
	e.createTopic("po", 2)
	e.produceN("po", 0, 3) // 1 will be the poison record
	e.produceN("po", 1, 2)
	var pol map[string]any
	if st := e.do("PUT", "/v1/groups/pg/poison/po", `{"policy": "pause", "max_attempts": 2}`, &pol); st != 200 || pol["policy"] != "pause" {
		t.Fatalf("set policy: %d %v", st, pol)
	}
	path := "/v1/topics/po/consume?group=pg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200"
	got, c := e.consumeRecords(path, func(m map[int32][]int64) bool { return len(m[0]) >= 3 && len(m[1]) >= 2 })
	gen := c.Generation
	if st, res := e.ack("po", fmt.Sprintf(`{"group": "pg", "generation": %d, "offsets": {"0": [0], "1": [0, 1]}}`, gen)); st != 200 {
		t.Fatalf("ack: %d %+v", st, res)
	}
	// First failure: the record (and what followed it) comes again.
	if st, res := e.nack("po", "pg", gen, 0, 1, "boom 1"); st != 200 || res.Action != "redeliver" || res.Attempts != 1 || res.MaxAttempts == nil || *res.MaxAttempts != 2 {
		t.Fatalf("first nack: %d %+v", st, res)
	}
	again, c := e.consumeRecords(path, func(m map[int32][]int64) bool { return len(m[0]) >= 2 })
	if !slices.Equal(again[0][:2], []int64{1, 2}) {
		t.Fatalf("redelivered %v (first time %v), want 1 and 2", again, got)
	}
	// Second failure: paused at 1.
	if st, res := e.nack("po", "pg", c.Generation, 0, 1, "boom 2"); st != 200 || res.Action != "paused" || res.Attempts != 2 {
		t.Fatalf("second nack: %d %+v", st, res)
	}
	// Partition 1 keeps flowing; partition 0 delivers nothing, and says
	// why.
	e.produceN("po", 1, 2)
	after, c := e.consumeRecords(path, func(m map[int32][]int64) bool { return len(m[1]) >= 2 })
	if len(after[0]) != 0 || len(c.Paused) != 1 || c.Paused[0].Partition != 0 || c.Paused[0].Offset != 1 || c.Paused[0].Reason != "boom 2" || c.Paused[0].Attempts != 2 {
		t.Fatalf("while paused: delivered %v, paused %+v", after, c.Paused)
	}
	var view struct {
		Paused []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Reason    string `json:"reason"`
		} `json:"paused"`
	}
	if st := e.do("GET", "/v1/groups/pg/poison", "", &view); st != 200 || len(view.Paused) != 1 || view.Paused[0].Topic != "po" || view.Paused[0].Offset != 1 {
		t.Fatalf("group poison view: %d %+v", st, view)
	}
	if v, ok := scrapeValue(t, e, "fjord_http_poison_paused", "group=pg", "topic=po", "partition=0"); !ok || v != 1 {
		t.Errorf("fjord_http_poison_paused: %v (found %v), want the offset 1", v, ok)
	}
	if c := e.committedAt("pg", "po", 0); c != 1 {
		t.Fatalf("committed %d while paused, want 1 (the poison record not passed)", c)
	}

	// Resume with skip: the record goes to po.dlq; the owner (this
	// instance) commits past it at its next consume, and 2 comes.
	var resumed map[string]any
	if st := e.do("POST", "/v1/groups/pg/resume", `{"topic": "po", "partition": 0, "skip": true}`, &resumed); st != 200 || resumed["skipped"] != true {
		t.Fatalf("resume: %d %v", st, resumed)
	}
	dl := e.readDLQ("po.dlq", 1)
	o, ok := poison.OriginOf(dl[0])
	if !ok || o.Topic != "po" || o.Partition != 0 || o.Offset != 1 || o.Group != "pg" || o.Reason != "boom 2" || o.Attempts != 2 || string(dl[0].Value) != "1" {
		t.Fatalf("dead letter %+v (value %q)", o, dl[0].Value)
	}
	resumedRecs, c := e.consumeRecords(path, func(m map[int32][]int64) bool { return len(m[0]) >= 1 })
	if resumedRecs[0][0] != 2 || len(c.Paused) != 0 {
		t.Fatalf("after resume: %v, paused %+v", resumedRecs, c.Paused)
	}
	if c := e.committedAt("pg", "po", 0); c != 2 {
		t.Fatalf("committed %d after the skip, want 2", c)
	}
}

// Issue 18, point 1 over HTTP, dead letters: after max_attempts the
// record is in the dead-letter topic with its coordinates, and only
// then does the group's commit move past it.
func TestPoisonDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.createTopic("dl", 1)
	e.produceN("dl", 0, 3)
	if st := e.do("PUT", "/v1/groups/dg/poison/dl", `{"policy": "dlq", "max_attempts": 1, "dlq_topic": "dl-failed"}`, nil); st != 200 {
		t.Fatalf("set policy: %d", st)
	}
	path := "/v1/topics/dl/consume?group=dg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200"
	_, c := e.consumeRecords(path, func(m map[int32][]int64) bool { return len(m[0]) >= 3 })
	if st, res := e.ack("dl", fmt.Sprintf(`{"group": "dg", "generation": %d, "offsets": {"0": [0, 2]}}`, c.Generation)); st != 200 || res.Committed["0"] != 1 {
		t.Fatalf("ack: %d %+v", st, res)
	}
	st, res := e.nack("dl", "dg", c.Generation, 0, 1, "cannot parse")
	if st != 200 || res.Action != "dead_lettered" || res.DLQ == nil || res.DLQ.Topic != "dl-failed" || res.Committed["0"] != 3 {
		t.Fatalf("nack: %d %+v", st, res)
	}
	dl := e.readDLQ("dl-failed", 1)
	if o, ok := poison.OriginOf(dl[0]); !ok || o.Topic != "dl" || o.Offset != 1 || o.Group != "dg" || o.Reason != "cannot parse" {
		t.Fatalf("dead letter %+v", o)
	}
	if c := e.committedAt("dg", "dl", 0); c != 3 {
		t.Fatalf("committed %d, want 3", c)
	}
}

// Issue 18, point 6 over HTTP: bad policies and nacks get clear errors
// and change nothing.
func TestPoisonBadInput(t *testing.T) {
	e := newEnv(t)
	e.createTopic("bp", 1)
	e.produceN("bp", 0, 1)
	_, c := e.consumeRecords("/v1/topics/bp/consume?group=bg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200",
		func(m map[int32][]int64) bool { return len(m[0]) >= 1 })
	g := fmt.Sprint(c.Generation)
	e.expectErrors([]hostileCase{
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "drop", "max_attempts": 3}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "pause", "max_attempts": 0}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "pause", "max_attempts": -2}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "pause"}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "dlq", "max_attempts": 3, "dlq_topic": "bp"}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "dlq", "max_attempts": 3, "dlq_topic": "no good"}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/bp", `{"policy": "PAUSE", "max_attempts": 3}`, 400, "bad_policy"},
		{"PUT", "/v1/groups/bg/poison/nosuchtopic", `{"policy": "pause", "max_attempts": 3}`, 404, "unknown_topic"},
		{"POST", "/v1/topics/bp/nack", `{"group": "bg", "generation": ` + g + `, "partition": 0, "offset": 5, "reason": "x"}`, 409, "not_delivered"},
		{"POST", "/v1/topics/bp/nack", `{"group": "bg", "generation": ` + g + `, "partition": 0, "reason": "x"}`, 400, "bad_offset"},
		{"POST", "/v1/topics/bp/nack", `{"group": "bg", "partition": 0, "offset": 0}`, 400, "bad_generation"},
		{"POST", "/v1/topics/bp/nack", `{"group": "bg", "generation": ` + g + `, "partition": 0, "offset": 0, "reason": "` + strings.Repeat("a", 5000) + `"}`, 400, "bad_reason"},
		{"POST", "/v1/groups/bg/resume", `{"topic": "bp", "partition": 0}`, 404, "not_paused"},
		{"POST", "/v1/groups/bg/resume", `{"partition": 0}`, 400, "bad_topic"},
		{"POST", "/v1/groups/bg/resume", `{"topic": "bp"}`, 400, "bad_partition"},
	})
	var view struct {
		Policies []any `json:"policies"`
		Paused   []any `json:"paused"`
	}
	if st := e.do("GET", "/v1/groups/bg/poison", "", &view); st != 200 || len(view.Policies) != 0 || len(view.Paused) != 0 {
		t.Fatalf("after only bad input: %d %+v", st, view)
	}
}

// scrapeValue reads one series of the node's /metrics.
func scrapeValue(t *testing.T, e *env, family string, labels ...string) (float64, bool) {
	t.Helper()
	return testutil.Scrape(t, nil, e.base+"/metrics").Value(family, labels...)
}
