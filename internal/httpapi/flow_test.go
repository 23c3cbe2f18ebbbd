package httpapi_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// The end-to-end flow with net/http against a real node: produce
// one record and a batch, consume as a group and commit, restart the
// node, consume again (it resumes after the commit), seek back by offset
// and by timestamp (it replays), and read the same records with
// franz-go.
func TestHTTPFlowAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir)
	e.createTopic("flow", 1)
	consume := func(e *env) consumed {
		var c consumed
		if st := e.do("GET", "/v1/topics/flow/consume?group=flow-g&auto_offset_reset=earliest&timeout_ms=300", "", &c); st != 200 {
			t.Fatalf("consume: %d %+v", st, c)
		}
		return c
	}
	e.waitStable("flow-g", 1, func() { consume(e) })

	var one result
	if st := e.do("POST", "/v1/topics/flow/produce", fmt.Sprintf(`{"key": "k", "value": %q}`, b64("r0")), &one); st != 200 {
		t.Fatalf("produce: %d %+v", st, one)
	}
	var batch struct{ Results []result }
	if st := e.do("POST", "/v1/topics/flow/produce", fmt.Sprintf(`{"records": [{"value": %q}, {"value": %q}, {"value": %q}]}`, b64("r1"), b64("r2"), b64("r3")), &batch); st != 200 {
		t.Fatalf("batch: %d %+v", st, batch)
	}
	read := func(e *env, want int) (vals []string, next map[string]int64) {
		next = map[string]int64{}
		testutil.Eventually(t, 20*time.Second, func() error {
			c := consume(e)
			for _, r := range c.Records {
				vals = append(vals, *r.Value)
			}
			for p, o := range c.NextOffsets {
				next[p] = o
			}
			if len(vals) < want {
				return fmt.Errorf("consumed %d of %d", len(vals), want)
			}
			return nil
		})
		return vals, next
	}
	vals, next := read(e, 4)
	if vals[0] != b64("r0") || vals[3] != b64("r3") {
		t.Fatalf("consumed %v", vals)
	}
	// Commit the first two only: the rest must come again after the restart.
	var res result
	if st := e.do("POST", "/v1/topics/flow/commit", `{"group": "flow-g", "offsets": {"0": 2}}`, &res); st != 200 {
		t.Fatalf("commit: %d %+v", st, res)
	}
	_ = next

	e.n.Close()
	e2 := newEnvIn(t, dir)
	var after []string
	testutil.Eventually(t, 30*time.Second, func() error {
		var c consumed
		if st := e2.do("GET", "/v1/topics/flow/consume?group=flow-g&auto_offset_reset=earliest&timeout_ms=300", "", &c); st != 200 {
			return fmt.Errorf("consume after restart: %d %+v", st, c)
		}
		for _, r := range c.Records {
			after = append(after, *r.Value)
		}
		if len(after) < 2 {
			return fmt.Errorf("consumed %v after the restart", after)
		}
		return nil
	})
	if after[0] != b64("r2") || after[1] != b64("r3") {
		t.Fatalf("after the restart the group read %v, want r2, r3 (it resumes after the commit)", after)
	}

	// Seek back by offset: replays from 1.
	if st := e2.do("POST", "/v1/topics/flow/seek", `{"group": "flow-g", "partition": 0, "offset": 1}`, &res); st != 200 {
		t.Fatalf("seek: %d %+v", st, res)
	}
	if vals, _ := read(e2, 3); vals[0] != b64("r1") {
		t.Fatalf("after seeking to 1 the group read %v", vals)
	}
	// And by timestamp: the first record's time replays everything.
	if st := e2.do("POST", "/v1/topics/flow/seek", fmt.Sprintf(`{"group": "flow-g", "partition": 0, "timestamp": %d}`, one.Timestamp), &res); st != 200 {
		t.Fatalf("seek by time: %d %+v", st, res)
	}
	if vals, _ := read(e2, 4); vals[0] != b64("r0") {
		t.Fatalf("after seeking to the first record's time the group read %v", vals)
	}

	// franz-go reads the same records.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e2.n.KafkaAddr().String()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"flow": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var kvals []string
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(kvals) < 4 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { kvals = append(kvals, string(r.Value)) })
	}
	if fmt.Sprint(kvals) != "[r0 r1 r2 r3]" {
		t.Fatalf("franz-go read %v", kvals)
	}
}

// An HTTP consumer instance and a franz-go member in one group on four
// partitions split them, and together consume every record.
func TestMixedGroup(t *testing.T) {
	e := newEnv(t)
	e.createTopic("mixed", 4)
	member, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.ConsumerGroup("mixed-g"), kgo.ConsumeTopics("mixed"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	got := map[string]bool{}
	kafkaParts := map[int32]bool{}
	httpParts := map[int32]bool{}
	pollKafka := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		member.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[b64(string(r.Value))] = true; kafkaParts[r.Partition] = true })
		cancel()
	}
	pollHTTP := func() {
		var c consumed
		e.do("GET", "/v1/topics/mixed/consume?group=mixed-g&auto_offset_reset=earliest&timeout_ms=100", "", &c)
		for _, r := range c.Records {
			got[*r.Value] = true
			httpParts[r.Partition] = true
		}
	}
	e.waitStable("mixed-g", 2, func() { pollKafka(); pollHTTP() })

	const n = 200
	for i := range n {
		var res result
		if st := e.do("POST", "/v1/topics/mixed/produce", fmt.Sprintf(`{"value": %q, "partition": %d}`, b64(strconv.Itoa(i)), i%4), &res); st != 200 {
			t.Fatalf("produce: %d %+v", st, res)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		pollKafka()
		pollHTTP()
		if len(got) < n {
			return fmt.Errorf("%d of %d records consumed", len(got), n)
		}
		return nil
	})
	for p := range kafkaParts {
		if httpParts[p] {
			t.Errorf("partition %d consumed by both members without a rebalance", p)
		}
	}
	if len(kafkaParts) == 0 || len(httpParts) == 0 || len(kafkaParts)+len(httpParts) != 4 {
		t.Errorf("partitions split %v (Kafka) / %v (HTTP), want all four between them", kafkaParts, httpParts)
	}
}

// A /metrics scrape parses with Prometheus' own text parser, and the
// produce and fetch counters move with traffic.
func TestMetricsParseAndMove(t *testing.T) {
	e := newEnv(t)
	e.createTopic("m", 1)
	scrape := func() map[string]float64 {
		return testutil.Scrape(t, nil, e.base+"/metrics").ByLabel("fjord_kafka_requests_total", "api")
	}
	before := scrape()
	var res result
	for range 3 {
		e.do("POST", "/v1/topics/m/produce", `{"value": "YQ==", "partition": 0}`, &res)
	}
	e.do("GET", "/v1/topics/m/partitions/0/records", "", nil)
	after := scrape()
	if after["Produce"] < before["Produce"]+3 || after["Fetch"] < before["Fetch"]+1 {
		t.Fatalf("counters before %v, after %v: want Produce +3 and Fetch +1 at least", before, after)
	}
}
