package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// endOffset is the topic's partition p log end.
func (e *env) endOffset(topic string, p int32) int64 {
	e.t.Helper()
	ends, err := e.adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		e.t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, p)
	return o.Offset
}

// A retried produce with the same idempotency key answers the first
// one's partition and offset and appends nothing: in sequence, racing,
// and after the node restarts. Without a record key the idempotency key
// places the record, as Kafka's hash would place a record keyed by it.
func TestIdempotencyKeys(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir)
	e.createTopic("pay", 4)
	body := `{"value": "YQ==", "idempotency_key": "req-5f3a9c"}`
	var first result
	if st := e.do("POST", "/v1/topics/pay/produce", body, &first); st != 200 || first.Error != "" {
		t.Fatalf("first: %d %+v", st, first)
	}
	// Placed as Kafka places a record keyed "req-5f3a9c".
	kr := &kgo.Record{Topic: "pay", Key: []byte("req-5f3a9c"), Value: []byte("b")}
	if err := e.kcl.ProduceSync(context.Background(), kr).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if kr.Partition != first.Partition {
		t.Fatalf("idempotency key placed the record in %d; Kafka's hash of it gives %d", first.Partition, kr.Partition)
	}
	end := e.endOffset("pay", first.Partition)

	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.do("POST", "/v1/topics/pay/produce", body, &results[i])
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Error != "" || r.Partition != first.Partition || r.Offset != first.Offset || r.Timestamp != first.Timestamp {
			t.Fatalf("retry %d: %+v, want the first %+v", i, r, first)
		}
	}
	if got := e.endOffset("pay", first.Partition); got != end {
		t.Fatalf("log end %d after retries, want %d: a retry appended", got, end)
	}
	var other result
	if st := e.do("POST", "/v1/topics/pay/produce", `{"value": "YQ==", "idempotency_key": "req-other"}`, &other); st != 200 ||
		(other.Partition == first.Partition && other.Offset == first.Offset) {
		t.Fatalf("another key: %d %+v", st, other)
	}

	// Restart on the same data: the key is remembered.
	e.n.Close()
	e2 := newEnvIn(t, dir)
	var after result
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := e2.do("POST", "/v1/topics/pay/produce", body, &after); st != 200 {
			return fmt.Errorf("%d %+v", st, after)
		}
		return nil
	})
	if after.Partition != first.Partition || after.Offset != first.Offset {
		t.Fatalf("after a restart: %+v, want %+v", after, first)
	}
	if got := e2.endOffset("pay", first.Partition); got != end {
		t.Fatalf("log end %d after the restart's retry, want %d", got, end)
	}
}

// A pending entry without its done entry (the node died between the
// record and the second write) is resolved by finding the record: the
// retry answers it and appends nothing.
func TestIdempotencyKeyPendingIsFound(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir)
	e.createTopic("pay", 2)
	// What a crash between the two writes leaves: the record with its
	// header, and only the pending entry.
	manual := e.putIndexEntry(anonymousKey("pay", "crashed"), map[string]any{"state": "pending", "partition": 1, "at": time.Now().Add(-time.Second).UnixMilli()})
	rec := &kgo.Record{Topic: "pay", Partition: 1, Value: []byte("landed"),
		Headers: []kgo.RecordHeader{{Key: "fjord-idempotency-key", Value: []byte("crashed")}}}
	if err := manual.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.n.Close()

	e2 := newEnvIn(t, dir)
	end := e2.endOffset("pay", 1)
	var res result
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := e2.do("POST", "/v1/topics/pay/produce", `{"value": "YQ==", "idempotency_key": "crashed"}`, &res); st != 200 {
			return fmt.Errorf("%d %+v", st, res)
		}
		return nil
	})
	if res.Partition != 1 || res.Offset != rec.Offset {
		t.Fatalf("retry after a crash: %+v, want partition 1 offset %d (the record that landed)", res, rec.Offset)
	}
	if got := e2.endOffset("pay", 1); got != end {
		t.Fatalf("log end %d, want %d: the retry appended", got, end)
	}
}

// putIndexEntry writes entry for key to the idempotency index topic,
// as the API would have, and returns the client that wrote it (one that
// names its partitions). The index topic is made first by an idempotent
// produce to "pay".
func (e *env) putIndexEntry(key string, entry map[string]any) *kgo.Client {
	e.t.Helper()
	var warm result
	e.do("POST", "/v1/topics/pay/produce", `{"value": "YQ==", "idempotency_key": "warm"}`, &warm)
	// The index is internal: only the node's own client id writes it.
	manual, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID(e.n.InternalClientID()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(manual.Close)
	v, _ := json.Marshal(entry)
	if err := manual.ProduceSync(context.Background(), &kgo.Record{Topic: "__fjord_http_idempotency", Partition: 0, Key: []byte(key), Value: v}).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	return manual
}

// newEnvIn is newEnv on a data directory a test may restart a node on.
func newEnvIn(t testing.TB, dir string) *env {
	t.Helper()
	return newEnvWith(t, node.Config{
		NodeID: 1, DataDir: dir,
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler),
	})
}

// Past the window a key is forgotten: the same key produces anew.
func TestIdempotencyWindow(t *testing.T) {
	e := newEnv(t)
	e.createTopic("pay", 1)
	var clock atomic.Int64 // Unix ms of the API's clock, moved by hand
	clock.Store(time.Now().UnixMilli())
	api, err := httpapi.New(httpapi.Config{Brokers: []string{e.n.KafkaAddr().String()}, InternalClientID: e.n.InternalClientID(), IdempotencyWindow: time.Hour,
		Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	produce := func() result {
		resp, err := http.Post(srv.URL+"/v1/topics/pay/produce", "application/json", strings.NewReader(`{"value": "YQ==", "idempotency_key": "k"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r result
		json.NewDecoder(resp.Body).Decode(&r)
		if resp.StatusCode != 200 {
			t.Fatalf("produce: %d %+v", resp.StatusCode, r)
		}
		return r
	}
	first := produce()
	if again := produce(); again.Offset != first.Offset {
		t.Fatalf("within the window: offset %d, want %d", again.Offset, first.Offset)
	}
	clock.Add((time.Hour + time.Second).Milliseconds()) // the window passes
	if later := produce(); later.Offset == first.Offset {
		t.Fatalf("past the window the key still answered offset %d", later.Offset)
	}
}

// Regression (issue 12): an idempotency key sent again with another
// record was answered the first record's result, as if it were a retry.
// It is 422 idempotency_key_reused, naming the key; a true retry still
// answers the first result, and both hold after a restart. A batch's
// records are each judged by their own key.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir)
	e.createTopic("pay", 2)
	const body = `{"key": "user-1", "value": "YQ==", "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`
	var first result
	if st := e.do("POST", "/v1/topics/pay/produce", body, &first); st != 200 || first.Error != "" {
		t.Fatalf("first: %d %+v", st, first)
	}
	// The same record given another way is the same record.
	same := []string{body, `{"key_b64": "dXNlci0x", "value": "YQ==", "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`}
	others := []string{
		`{"key": "user-1", "value": "Yg==", "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`, // value
		`{"key": "user-2", "value": "YQ==", "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`, // key
		`{"value": "YQ==", "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`,                  // no key
		`{"key": "user-1", "value": "YQ==", "idempotency_key": "req-1"}`,                           // headers
		`{"key": "user-1", "value": null, "headers": {"h": "eA=="}, "idempotency_key": "req-1"}`,   // tombstone
		`{"key": "user-1", "value": "YQ==", "headers": {"h": "eA=="}, "partition": 1, "idempotency_key": "req-1"}`,
	}
	check := func(e *env, when string) {
		t.Helper()
		end := e.endOffset("pay", first.Partition)
		for _, b := range same {
			var res result
			if st := e.do("POST", "/v1/topics/pay/produce", b, &res); st != 200 || res.Partition != first.Partition || res.Offset != first.Offset {
				t.Errorf("%s: retry %s: %d %+v, want the first %+v", when, b, st, res, first)
			}
		}
		for _, b := range others {
			var res result
			if st := e.do("POST", "/v1/topics/pay/produce", b, &res); st != 422 || res.Error != "idempotency_key_reused" || !strings.Contains(res.Message, `"req-1"`) {
				t.Errorf("%s: %s: %d %+v, want 422 idempotency_key_reused naming the key", when, b, st, res)
			}
		}
		var batch struct{ Results []result }
		b := `{"records": [{"value": "Yw==", "idempotency_key": "req-1"}, {"value": "Yw==", "idempotency_key": "req-new-` + when + `"}]}`
		if st := e.do("POST", "/v1/topics/pay/produce", b, &batch); st != 200 || len(batch.Results) != 2 ||
			batch.Results[0].Error != "idempotency_key_reused" || batch.Results[1].Error != "" {
			t.Errorf("%s: batch: %d %+v", when, st, batch)
		}
		if got := e.endOffset("pay", first.Partition); got > end+1 {
			t.Errorf("%s: log end %d after retries and reuses, want at most %d (the batch's new key)", when, got, end+1)
		}
	}
	check(e, "before")
	e.n.Close()
	e2 := newEnvIn(t, dir)
	testutil.Eventually(t, 30*time.Second, func() error {
		var res result
		if st := e2.do("POST", "/v1/topics/pay/produce", body, &res); st != 200 {
			return fmt.Errorf("%d %+v", st, res)
		}
		return nil
	})
	check(e2, "after-restart")
}

// anonymousKey is the index key of idemKey produced to topic by
// User:ANONYMOUS (httpapi's dedupKey: topic 0x00 0xFF principal 0xFF key).
func anonymousKey(topic, idemKey string) string {
	return topic + "\x00\xffUser:ANONYMOUS\xff" + idemKey
}

// An index entry written before entries carried a digest of their
// record is kept: a produce with its key is a retry, whatever its body.
// One written before entries were keyed by principal ("topic 0x00 key",
// with no principal) matches no produce: its key is written anew, as
// idempotency.go's dedupKey accepts.
func TestIdempotencyEntryWithoutDigest(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir)
	e.createTopic("pay", 1)
	e.putIndexEntry(anonymousKey("pay", "old"), map[string]any{"state": "done", "partition": 0, "offset": 0, "timestamp": 7, "at": time.Now().UnixMilli()})
	e.putIndexEntry("pay\x00older", map[string]any{"state": "done", "partition": 0, "offset": 0, "timestamp": 7, "at": time.Now().UnixMilli()})
	e.n.Close()
	e2 := newEnvIn(t, dir)
	var res result
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := e2.do("POST", "/v1/topics/pay/produce", `{"value": "Yg==", "idempotency_key": "old"}`, &res); st != 200 {
			return fmt.Errorf("%d %+v", st, res)
		}
		return nil
	})
	if res.Offset != 0 || res.Timestamp != 7 {
		t.Fatalf("old entry: %+v, want offset 0 timestamp 7", res)
	}
	end := e2.endOffset("pay", 0)
	if st := e2.do("POST", "/v1/topics/pay/produce", `{"value": "Yg==", "idempotency_key": "older"}`, &res); st != 200 || res.Timestamp == 7 {
		t.Fatalf("an entry from before principals: %d %+v, want the record written anew", st, res)
	}
	if got := e2.endOffset("pay", 0); got != end+1 {
		t.Fatalf("log end %d, want %d: the record written once", got, end+1)
	}
}

// A gateway started with a longer window than the one the index topic
// was made with raises the topic's retention to it: otherwise retention
// would delete, after the old window, the entries the new one promises
// to remember, and a retry then would write twice.
func TestIdempotencyLongerWindowRaisesRetention(t *testing.T) {
	e := newEnv(t) // the node's gateway: the default window, an hour
	e.createTopic("pay", 1)
	var r result
	if code := e.do("POST", "/v1/topics/pay/produce", `{"value": "YQ==", "idempotency_key": "first"}`, &r); code != 200 {
		t.Fatalf("produce: %d %+v", code, r)
	}
	retention := func() string {
		t.Helper()
		rcs, err := e.adm.DescribeTopicConfigs(context.Background(), "__fjord_http_idempotency")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("__fjord_http_idempotency", nil)
		if err != nil || rc.Err != nil {
			t.Fatal(err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				return c.MaybeValue()
			}
		}
		t.Fatal("no retention.ms")
		return ""
	}
	if got := retention(); got != "3600000" {
		t.Fatalf("index topic made with retention.ms %s, want the default window's 3600000", got)
	}

	for _, window := range []time.Duration{3 * time.Hour, 2 * time.Hour} { // a shorter one leaves it
		api, err := httpapi.New(httpapi.Config{Brokers: []string{e.n.KafkaAddr().String()}, InternalClientID: e.n.InternalClientID(), IdempotencyWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		api.Register(mux)
		srv := httptest.NewServer(mux)
		// An idempotent produce waits for the index's load.
		resp, err := http.Post(srv.URL+"/v1/topics/pay/produce", "application/json", strings.NewReader(`{"value": "Yg==", "idempotency_key": "second-`+window.String()+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		api.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("produce through the gateway with a %v window: %d", window, resp.StatusCode)
		}
		if got := retention(); got != "10800000" {
			t.Errorf("after a gateway with a %v window loaded the index: retention.ms %s, want 10800000", window, got)
		}
	}
}

// gateway starts another gateway on the node, as another node's would
// be (its index is its own), with its own clock, and returns its URL.
func (e *env) gateway(now func() time.Time) string {
	e.t.Helper()
	api, err := httpapi.New(httpapi.Config{Brokers: []string{e.n.KafkaAddr().String()}, InternalClientID: e.n.InternalClientID(), Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(api.Close)
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	e.t.Cleanup(srv.Close)
	return srv.URL
}

// post sends a produce body to a gateway's URL and returns the status,
// the answer and the Retry-After header.
func post(t *testing.T, url, topic, body string) (int, result, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/topics/"+topic+"/produce", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, r, resp.Header.Get("Retry-After")
}

// Regression (issue 16, found by fjord verify's http workload): a key
// produced through one node's gateway and retried through another's was
// written twice, each gateway knowing only the keys it had loaded or
// written itself. Now a gateway catches up with the index topic before
// it decides: the retry answers the first result, both ways, and
// appends nothing.
func TestIdempotencyKeysAcrossGateways(t *testing.T) {
	e := newEnv(t)
	e.createTopic("pay", 2)
	other := e.gateway(nil) // started, and loaded, before any key exists
	for i, tc := range []struct{ first, retry string }{{e.base, other}, {other, e.base}} {
		body := fmt.Sprintf(`{"value": "YQ==", "idempotency_key": "across-%d"}`, i)
		st, first, _ := post(t, tc.first, "pay", body)
		if st != 200 {
			t.Fatalf("case %d first: %d %+v", i, st, first)
		}
		end := e.endOffset("pay", first.Partition)
		st, again, _ := post(t, tc.retry, "pay", body)
		if st != 200 || again.Partition != first.Partition || again.Offset != first.Offset {
			t.Fatalf("case %d retry on the other gateway: %d %+v, want the first %+v", i, st, again, first)
		}
		if got := e.endOffset("pay", first.Partition); got != end {
			t.Fatalf("case %d: log end %d after the retry, want %d: the other gateway wrote it again", i, got, end)
		}
	}
}

// A pending entry whose writer may still be writing (a gateway on another
// node, mid-produce, or dead with its request on the wire) holds the key:
// 409 idempotency_key_in_progress with Retry-After, until its lease and
// slack have passed. Then the partition is searched as after a crash:
// the record found is answered; none found, it is written, once.
func TestIdempotencyKeyPendingElsewhere(t *testing.T) {
	e := newEnv(t)
	e.createTopic("pay", 2)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	url := e.gateway(func() time.Time { return time.UnixMilli(clock.Load()) })
	lease := time.Now().Add(10 * time.Second).UnixMilli()
	manual := e.putIndexEntry(anonymousKey("pay", "elsewhere"), map[string]any{"state": "pending", "partition": 1, "at": time.Now().UnixMilli(), "until": lease, "gateway": "another"})
	e.putIndexEntry(anonymousKey("pay", "landed"), map[string]any{"state": "pending", "partition": 0, "at": time.Now().UnixMilli(), "until": lease, "gateway": "another"})
	landed := &kgo.Record{Topic: "pay", Partition: 0, Value: []byte("YQ=="),
		Headers: []kgo.RecordHeader{{Key: "fjord-idempotency-key", Value: []byte("landed")}}}
	if err := manual.ProduceSync(context.Background(), landed).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"elsewhere", "landed"} {
		st, r, retry := post(t, url, "pay", `{"value": "YQ==", "idempotency_key": "`+key+`"}`)
		if n, _ := strconv.Atoi(retry); st != 409 || r.Error != "idempotency_key_in_progress" || n < 40 || n > 51 {
			t.Fatalf("%s within its lease: %d %+v, Retry-After %q; want 409 idempotency_key_in_progress, about 50 s", key, st, r, retry)
		}
	}
	clock.Add((51 * time.Second).Milliseconds()) // lease and slack past
	end := e.endOffset("pay", 0)
	st, r, _ := post(t, url, "pay", `{"value": "YQ==", "idempotency_key": "landed"}`)
	if st != 200 || r.Partition != 0 || r.Offset != landed.Offset || e.endOffset("pay", 0) != end {
		t.Fatalf("landed, past its lease: %d %+v, want the record that landed at %d, nothing appended", st, r, landed.Offset)
	}
	st, first, _ := post(t, url, "pay", `{"value": "YQ==", "idempotency_key": "elsewhere"}`)
	if st != 200 || first.Partition != 1 {
		t.Fatalf("never landed, past its lease: %d %+v, want it written to partition 1", st, first)
	}
	st, again, _ := post(t, e.base, "pay", `{"value": "YQ==", "idempotency_key": "elsewhere"}`)
	if st != 200 || again.Offset != first.Offset || again.Partition != first.Partition {
		t.Fatalf("the key taken over, retried on the first gateway: %d %+v, want %+v", st, again, first)
	}
}
