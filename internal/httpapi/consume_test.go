package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

type consumed struct {
	Records []struct {
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset"`
		Value     *string `json:"value"`
	} `json:"records"`
	NextOffsets map[string]int64 `json:"next_offsets"`
	Error       string           `json:"error"`
}

// waitStable waits until group has members members and is Stable.
func (e *env) waitStable(group string, members int, poll func()) {
	e.t.Helper()
	testutil.Eventually(e.t, 30*time.Second, func() error {
		poll()
		d, err := e.adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return err
		}
		if g := d[group]; g.State != "Stable" || len(g.Members) != members {
			return fmt.Errorf("group %s is %s with %d members", group, g.State, len(g.Members))
		}
		return nil
	})
}

// An HTTP consumer is a member of its group: it reads what is produced
// after it joins, commits next_offsets as they come, and seeks back.
func TestConsumeCommitSeek(t *testing.T) {
	e := newEnv(t)
	e.createTopic("orders", 2)
	consume := func(query string) consumed {
		var c consumed
		if st := e.do("GET", "/v1/topics/orders/consume?group=billing&auto_offset_reset=earliest&timeout_ms=300"+query, "", &c); st != 200 {
			t.Fatalf("consume: %d %+v", st, c)
		}
		return c
	}
	e.waitStable("billing", 1, func() { consume("") })

	for i := range 10 { // seven records in partition 0, three in 1
		var res result
		if st := e.do("POST", "/v1/topics/orders/produce", fmt.Sprintf(`{"value": %q, "partition": %d}`, b64(fmt.Sprint(i)), []int{0, 0, 1}[i%3]), &res); st != 200 {
			t.Fatalf("produce: %d %+v", st, res)
		}
	}
	ends, _ := e.adm.ListEndOffsets(context.Background(), "orders")
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })

	got := map[int32][]int64{}
	next := map[string]int64{}
	testutil.Eventually(t, 20*time.Second, func() error {
		c := consume("&max_bytes=1") // one record per answer: the rest wait in the instance
		for _, r := range c.Records {
			got[r.Partition] = append(got[r.Partition], r.Offset)
		}
		for p, o := range c.NextOffsets {
			next[p] = o
		}
		if int64(len(got[0])) != want[0] || int64(len(got[1])) != want[1] {
			return fmt.Errorf("consumed %v, want %v records", got, want)
		}
		return nil
	})
	for p, offs := range got {
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: offsets %v, want 0, 1, ... in order", p, offs)
			}
		}
	}

	body := fmt.Sprintf(`{"group": "billing", "offsets": {"0": %d, "1": %d}}`, next["0"], next["1"])
	var res result
	if st := e.do("POST", "/v1/topics/orders/commit", body, &res); st != 200 {
		t.Fatalf("commit: %d %+v", st, res)
	}
	committed, err := e.adm.FetchOffsets(context.Background(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		if o, _ := committed.Lookup("orders", p); o.At != w {
			t.Fatalf("partition %d committed at %d, want %d", p, o.At, w)
		}
	}

	// Seek partition 0 back to 2: it is read again from there.
	if st := e.do("POST", "/v1/topics/orders/seek", `{"group": "billing", "partition": 0, "offset": 2}`, &res); st != 200 {
		t.Fatalf("seek: %d %+v", st, res)
	}
	var again []int64
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, r := range consume("").Records {
			if r.Partition == 0 {
				again = append(again, r.Offset)
			}
		}
		if int64(len(again)) < want[0]-2 {
			return fmt.Errorf("re-read %v", again)
		}
		return nil
	})
	if again[0] != 2 {
		t.Fatalf("after the seek partition 0 was read from %d, want 2", again[0])
	}
}

// Bad group requests, and a group whose partitions a Kafka member owns:
// a commit or seek from outside it is a conflict.
func TestConsumeBadInputAndConflicts(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/v1/topics/t/consume", "", 400, "bad_group"},
		{"GET", "/v1/topics/t/consume?group=g&timeout_ms=-1", "", 400, "bad_timeout"},
		{"GET", "/v1/topics/t/consume?group=g&max_bytes=0", "", 400, "bad_max_bytes"},
		{"GET", "/v1/topics/nope/consume?group=g", "", 404, "unknown_topic"},
		{"POST", "/v1/topics/t/commit", `{"offsets": {"0": 1}}`, 400, "bad_group"},
		{"POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {}}`, 400, "bad_offsets"},
		{"POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"5": 1}}`, 400, "bad_partition"},
		{"POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"x": 1}}`, 400, "bad_partition"},
		{"POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"0": -1}}`, 400, "bad_offset"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0}`, 400, "bad_seek"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "offset": 1, "timestamp": 5}`, 400, "bad_seek"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "offset": 1}`, 400, "bad_partition"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 3, "offset": 1}`, 400, "bad_partition"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "offset": -4}`, 400, "bad_offset"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "offset": 99999999999999999999}`, 400, "bad_offset"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "timestamp": 1e30}`, 400, "bad_timestamp"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": 99999999999, "offset": 1}`, 400, "bad_partition"},
		{"POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"0": 99999999999999999999}}`, 400, "bad_offset"},
		{"POST", "/v1/topics/t/seek", `{"group": "g", "partition": "0", "offset": 1}`, 400, "malformed_json"},
	} {
		var res result
		if st := e.do(tc.method, tc.path, tc.body, &res); st != tc.status || res.Error != tc.code {
			t.Errorf("%s %s %s: %d %+v, want %d %q", tc.method, tc.path, tc.body, st, res, tc.status, tc.code)
		}
	}

	member, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.ConsumerGroup("kafka-side"), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	e.waitStable("kafka-side", 1, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		member.PollFetches(ctx)
		cancel()
	})
	var res result
	if st := e.do("POST", "/v1/topics/t/commit", `{"group": "kafka-side", "offsets": {"0": 0}}`, &res); st != 409 || res.Error != "group_conflict" {
		t.Errorf("commit into a group with a Kafka member: %d %+v", st, res)
	}
	if st := e.do("POST", "/v1/topics/t/seek", `{"group": "kafka-side", "partition": 0, "offset": 0}`, &res); st != 409 || res.Error != "group_conflict" {
		t.Errorf("seek of a partition a Kafka member owns: %d %+v", st, res)
	}
}

// An instance unused past the idle timeout leaves its group; past
// MaxConsumers a new one is 429.
func TestConsumerInstancesExpireAndAreBounded(t *testing.T) {
	// Set through the node's config, as `fjord serve` sets them.
	e := newEnvWith(t, node.Config{
		NodeID: 1, DataDir: t.TempDir(),
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTP:   node.HTTPConfig{ConsumerIdleTimeout: 500 * time.Millisecond, MaxConsumers: 1},
		Logger: slog.New(slog.DiscardHandler),
	})
	e.createTopic("t", 1)
	get := func(path string) int {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := get("/v1/topics/t/consume?group=idle&timeout_ms=0"); st != 200 {
		t.Fatalf("first consume: %d", st)
	}
	if st := get("/v1/topics/t/consume?group=idle&consumer=second&timeout_ms=0"); st != http.StatusTooManyRequests {
		t.Fatalf("a second instance past MaxConsumers=1: %d", st)
	}
	// Nobody asks again: the instance expires and its slot frees, so a
	// new instance can start...
	testutil.Eventually(t, 20*time.Second, func() error {
		if st := get("/v1/topics/t/consume?group=idle&consumer=second&timeout_ms=0"); st != 200 {
			return fmt.Errorf("a new instance: %d", st)
		}
		return nil
	})
	// ...and the first one left the group: one member, not two.
	testutil.Eventually(t, 30*time.Second, func() error {
		get("/v1/topics/t/consume?group=idle&consumer=second&timeout_ms=100")
		d, err := e.adm.DescribeGroups(context.Background(), "idle")
		if err != nil {
			return err
		}
		if g := d["idle"]; g.State != "Stable" || len(g.Members) != 1 {
			return fmt.Errorf("group is %s with %d members", g.State, len(g.Members))
		}
		return nil
	})
}
