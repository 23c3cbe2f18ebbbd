package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The API against a real node: the requests go through the node's HTTP
// listener and, from there, the Kafka protocol.

type env struct {
	t    testing.TB
	n    *node.Node
	base string
	adm  *kadm.Client
	kcl  *kgo.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir())
}

func newEnvWith(t testing.TB, cfg node.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.Eventually(t, 10*time.Second, n.Ready)
	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcl.Close)
	return &env{t: t, n: n, base: "http://" + n.HTTPAddr().String(), adm: kadm.NewClient(kcl), kcl: kcl}
}

func (e *env) createTopic(name string, partitions int32) {
	e.t.Helper()
	if _, err := e.adm.CreateTopic(context.Background(), partitions, 1, nil, name); err != nil {
		e.t.Fatal(err)
	}
}

// do sends a request and decodes the JSON answer into out (when not nil).
func (e *env) do(method, path, body string, out any) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

type result struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	Error     string `json:"error"`
	Message   string `json:"message"`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A produced record is where the answer says, readable by a Kafka client
// and by the API's own read, key, value and headers intact; a key lands
// where a Kafka producer's would.
func TestProduceThenRead(t *testing.T) {
	e := newEnv(t)
	e.createTopic("orders", 4)
	var res result
	body := fmt.Sprintf(`{"key": "user-8841", "value": %q, "headers": {"trace": %q}}`, b64("first order"), b64("abc"))
	if st := e.do("POST", "/v1/topics/orders/produce", body, &res); st != 200 || res.Error != "" {
		t.Fatalf("produce: %d %+v", st, res)
	}
	// The same key from a Kafka producer goes to the same partition.
	kr := &kgo.Record{Topic: "orders", Key: []byte("user-8841"), Value: []byte("second order")}
	if err := e.kcl.ProduceSync(context.Background(), kr).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if kr.Partition != res.Partition || kr.Offset != res.Offset+1 {
		t.Fatalf("Kafka producer: partition %d offset %d; HTTP: partition %d offset %d", kr.Partition, kr.Offset, res.Partition, res.Offset)
	}

	var read struct {
		Records []struct {
			Partition int32             `json:"partition"`
			Offset    int64             `json:"offset"`
			Key       *string           `json:"key"`
			Value     *string           `json:"value"`
			Headers   map[string]string `json:"headers"`
			Timestamp int64             `json:"timestamp"`
		} `json:"records"`
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
	}
	path := fmt.Sprintf("/v1/topics/orders/partitions/%d/records?offset=%d", res.Partition, res.Offset)
	if st := e.do("GET", path, "", &read); st != 200 {
		t.Fatalf("read: %d", st)
	}
	if len(read.Records) != 2 || read.NextOffset != res.Offset+2 || read.HighWatermark != res.Offset+2 {
		t.Fatalf("read %+v", read)
	}
	r0 := read.Records[0]
	if *r0.Key != "user-8841" || *r0.Value != b64("first order") || r0.Headers["trace"] != b64("abc") || r0.Timestamp != res.Timestamp {
		t.Fatalf("first record %+v", r0)
	}
	if *read.Records[1].Value != b64("second order") {
		t.Fatalf("second record %+v", read.Records[1])
	}
	// Nothing more: an empty page, and where to continue.
	path = fmt.Sprintf("/v1/topics/orders/partitions/%d/records?offset=%d", res.Partition, read.NextOffset)
	if st := e.do("GET", path, "", &read); st != 200 || len(read.Records) != 0 || read.NextOffset != res.Offset+2 {
		t.Fatalf("read at the end: %d %+v", st, read)
	}
}

// A batch answers each record in order, with explicit partitions kept and
// acks honoured.
func TestProduceBatchAndAcks(t *testing.T) {
	e := newEnv(t)
	e.createTopic("events", 3)
	var batch struct{ Results []result }
	body := fmt.Sprintf(`{"records": [{"value": %q, "partition": 2}, {"value": %q, "partition": 0}, {"value": null, "key": "gone", "partition": 2}]}`, b64("a"), b64("b"))
	if st := e.do("POST", "/v1/topics/events/produce", body, &batch); st != 200 || len(batch.Results) != 3 {
		t.Fatalf("batch: %d %+v", st, batch)
	}
	want := []struct{ p int32 }{{2}, {0}, {2}}
	for i, r := range batch.Results {
		if r.Error != "" || r.Partition != want[i].p {
			t.Fatalf("result %d: %+v (all %+v)", i, r, batch.Results)
		}
	}
	if batch.Results[2].Offset != batch.Results[0].Offset+1 {
		t.Fatalf("offsets in partition 2: %d then %d", batch.Results[0].Offset, batch.Results[2].Offset)
	}
	for _, acks := range []string{"1", "0"} {
		var res result
		body := fmt.Sprintf(`{"value": %q, "partition": 1, "acks": %q}`, b64("x"), acks)
		if st := e.do("POST", "/v1/topics/events/produce", body, &res); st != 200 || res.Partition != 1 {
			t.Fatalf("acks=%s: %d %+v", acks, st, res)
		}
		if acks == "0" && res.Offset != -1 {
			t.Errorf("acks=0 answered offset %d; nothing says where it went", res.Offset)
		}
	}
	// Both records reached partition 1.
	testutil.Eventually(t, 5*time.Second, func() error {
		ends, err := e.adm.ListEndOffsets(context.Background(), "events")
		if err != nil {
			return err
		}
		if o, _ := ends.Lookup("events", 1); o.Offset != 2 {
			return fmt.Errorf("partition 1 ends at %d, want 2", o.Offset)
		}
		return nil
	})
}

// Bad input is refused with a stable code and the right status, and
// nothing is produced.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 2)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/topics/t/produce", `{"value": `, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/topics/t/produce", `{"valu": "YQ=="}`, 400, "malformed_json"},
		{"two values", "POST", "/v1/topics/t/produce", `{"value": "YQ=="} {"value": "YQ=="}`, 400, "malformed_json"},
		{"bad base64", "POST", "/v1/topics/t/produce", `{"value": "not base64!"}`, 400, "bad_base64"},
		{"bad header base64", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "headers": {"h": "%%%"}}`, 400, "bad_base64"},
		{"negative partition", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "partition": -1}`, 400, "bad_partition"},
		{"partition past the end", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "partition": 2}`, 400, "bad_partition"},
		{"huge partition", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "partition": 99999999999}`, 400, "bad_partition"},
		{"huge partition in a batch", "POST", "/v1/topics/t/produce", `{"records": [{"value": "YQ==", "partition": 2147483648}]}`, 400, "bad_partition"},
		{"fractional partition", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "partition": 1.5}`, 400, "bad_partition"},
		{"bad acks", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "acks": "2"}`, 400, "bad_acks"},
		{"no record", "POST", "/v1/topics/t/produce", `{}`, 400, "malformed_request"},
		{"empty records", "POST", "/v1/topics/t/produce", `{"records": []}`, 400, "malformed_request"},
		{"record and records", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "records": [{"value": "YQ=="}]}`, 400, "malformed_request"},
		{"bad record in a batch", "POST", "/v1/topics/t/produce", `{"records": [{"value": "YQ=="}, {"value": "??"}]}`, 400, "bad_base64"},
		{"empty idempotency key", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "idempotency_key": ""}`, 400, "bad_idempotency_key"},
		{"idempotency key too long", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "idempotency_key": "` + strings.Repeat("k", 257) + `"}`, 400, "bad_idempotency_key"},
		{"idempotency key without acks all", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "idempotency_key": "k", "acks": "1"}`, 400, "bad_acks"},
		{"unknown topic", "POST", "/v1/topics/nope/produce", `{"value": "YQ=="}`, 404, "unknown_topic"},
		{"read unknown topic", "GET", "/v1/topics/nope/partitions/0/records", "", 404, "unknown_topic"},
		{"read unknown partition", "GET", "/v1/topics/t/partitions/7/records", "", 404, "unknown_partition"},
		{"read bad partition", "GET", "/v1/topics/t/partitions/x/records", "", 400, "bad_partition"},
		{"read bad offset", "GET", "/v1/topics/t/partitions/0/records?offset=-5", "", 400, "bad_offset"},
		{"read offset past the end", "GET", "/v1/topics/t/partitions/0/records?offset=100", "", 416, "offset_out_of_range"},
		{"read bad max_bytes", "GET", "/v1/topics/t/partitions/0/records?max_bytes=0", "", 400, "bad_max_bytes"},
		{"read bad timeout", "GET", "/v1/topics/t/partitions/0/records?timeout_ms=999999999", "", 400, "bad_timeout"},
		{"read huge offset", "GET", "/v1/topics/t/partitions/0/records?offset=99999999999999999999", "", 400, "bad_offset"},
		{"read huge partition", "GET", "/v1/topics/t/partitions/99999999999/records", "", 400, "bad_partition"},
		{"partition of the wrong type", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "partition": "1"}`, 400, "malformed_json"},
		{"value of the wrong type", "POST", "/v1/topics/t/produce", `{"value": 7}`, 400, "malformed_json"},
		{"headers of the wrong type", "POST", "/v1/topics/t/produce", `{"value": "YQ==", "headers": ["a"]}`, 400, "malformed_json"},
		{"records of the wrong type", "POST", "/v1/topics/t/produce", `{"records": {"value": "YQ=="}}`, 400, "malformed_json"},
		{"not an object", "POST", "/v1/topics/t/produce", `"YQ=="`, 400, "malformed_json"},
		{"wrong method", "PUT", "/v1/topics/t/produce", `{"value": "YQ=="}`, 405, "method_not_allowed"},
		{"wrong method on topics", "PATCH", "/v1/topics", "", 405, "method_not_allowed"},
		{"unknown route", "GET", "/v1/nothing", "", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res result
			if st := e.do(tc.method, tc.path, tc.body, &res); st != tc.status || res.Error != tc.code || res.Message == "" {
				t.Errorf("%d %+v, want %d %q with a message", st, res, tc.status, tc.code)
			}
		})
	}
	ends, err := e.adm.ListEndOffsets(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("partition %d has %d records after requests that all failed", o.Partition, o.Offset)
		}
	})
}

// A body over the limit is 413 and produces nothing; so is a record over
// the topic's max.message.bytes.
func TestTooLarge(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	big := bytes.Repeat([]byte("a"), 100<<20) // the 100 MiB
	var res result
	if st := e.do("POST", "/v1/topics/t/produce", `{"value": "`+string(big)+`"}`, &res); st != 413 || res.Error != "body_too_large" {
		t.Fatalf("100 MiB body: %d %+v", st, res)
	}
	value := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 2<<20)) // over 1 MiB max.message.bytes
	if st := e.do("POST", "/v1/topics/t/produce", `{"value": "`+value+`"}`, &res); st != 413 || res.Error != "record_too_large" {
		t.Fatalf("2 MiB record: %d %+v", st, res)
	}
}

// Past MaxConcurrent requests, or MaxLongPolls reads, in flight, the
// next of that kind is 429 at once, and the other kind is still served;
// routes that do not exist are JSON 404s.
func TestConcurrencyLimitAndUnknownRoutes(t *testing.T) {
	e := newEnv(t)
	e.createTopic("quiet", 1)
	api, err := httpapi.New(httpapi.Config{Brokers: []string{e.n.KafkaAddr().String()}, MaxConcurrent: 1, MaxLongPolls: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(ctx context.Context, method, path string, body io.Reader) (int, result, error) {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, result{}, err
		}
		defer resp.Body.Close()
		var res result
		json.NewDecoder(resp.Body).Decode(&res)
		return resp.StatusCode, res, nil
	}
	const longPoll = "/v1/topics/quiet/partitions/0/records?timeout_ms=30000"

	// holdUntilTurnedAway keeps one request of a kind in flight, and
	// checks that probe (of the same kind) is turned away and other (of
	// the other kind) is not. A probe that arrives before the holder
	// takes the slot itself and turns the holder away; then the holder
	// starts again.
	holdUntilTurnedAway := func(hold func(ctx context.Context) int, probe, other string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // on a failure too: the server's Close waits for the holder
		var held chan int
		start := func() {
			held = make(chan int, 1)
			go func(done chan int) { done <- hold(ctx) }(held)
		}
		start()
		testutil.Eventually(t, 10*time.Second, func() error {
			select {
			case <-held: // turned away by a probe
				start()
			default:
			}
			st, res, err := do(context.Background(), "GET", probe, nil)
			if err != nil {
				return err
			}
			if st != http.StatusTooManyRequests || res.Error != "too_many_requests" {
				return fmt.Errorf("%s: %d %+v while the slot should be held", probe, st, res)
			}
			return nil
		})
		if st, res, err := do(context.Background(), "GET", other, nil); err != nil || st != 200 {
			t.Errorf("%s while the other pool is full: %d %+v %v", other, st, res, err)
		}
		cancel() // the client gives up; its slot comes back
		<-held
		testutil.Eventually(t, 10*time.Second, func() error {
			if st, res, err := do(context.Background(), "GET", probe, nil); err != nil || st != 200 {
				return fmt.Errorf("%s: %d %+v %v after the slot came back", probe, st, res, err)
			}
			return nil
		})
	}

	// A long-poll of an empty partition holds the only read slot: reads
	// are turned away, the cluster is still described.
	holdUntilTurnedAway(func(ctx context.Context) int {
		st, _, _ := do(ctx, "GET", longPoll, nil)
		return st
	}, "/v1/topics/quiet/partitions/0/records", "/v1/cluster")

	// While the read slot is held, a read turned away whose body never
	// ends is answered at once, not after the server has waited for the
	// body (net/http reads an unread body before it answers, unless the
	// connection closes).
	func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var held chan int
		start := func() {
			held = make(chan int, 1)
			go func(done chan int) { st, _, _ := do(ctx, "GET", longPoll, nil); done <- st }(held)
		}
		start()
		testutil.Eventually(t, 10*time.Second, func() error {
			select {
			case <-held: // turned away by a probe that came first
				start()
			default:
			}
			if st, _, err := do(context.Background(), "GET", "/v1/topics/quiet/partitions/0/records", nil); err != nil || st != http.StatusTooManyRequests {
				return fmt.Errorf("probe while the long poll should hold the slot: %d %v", st, err)
			}
			return nil
		})
		body, w := io.Pipe()
		defer w.Close()
		go w.Write([]byte(`{"never": `))
		probeCtx, probeCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer probeCancel()
		st, res, err := do(probeCtx, "GET", "/v1/topics/quiet/partitions/0/records", body)
		if err != nil || st != http.StatusTooManyRequests || res.Error != "too_many_requests" {
			t.Fatalf("a read turned away with a body that never ends: %d %+v %v; want 429 too_many_requests at once", st, res, err)
		}
		cancel()
		<-held
	}()

	// A produce whose body never ends holds the only request slot:
	// requests are turned away, reads are still served.
	holdUntilTurnedAway(func(ctx context.Context) int {
		body, w := io.Pipe()
		go func() { w.Write([]byte(`{"value": `)); <-ctx.Done(); w.CloseWithError(ctx.Err()) }()
		st, _, _ := do(ctx, "POST", "/v1/topics/quiet/produce", body)
		return st
	}, "/v1/cluster", "/v1/topics/quiet/partitions/0/records")

	if st, res, _ := do(context.Background(), "GET", "/v1/nothing/here", nil); st != 404 || res.Error != "not_found" {
		t.Errorf("unknown route: %d %+v", st, res)
	}
}

// Headers over the node's 64 KiB bound are refused before any route runs.
func TestOversizedHeaders(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest("GET", e.base+"/v1/cluster", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 100<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d", resp.StatusCode)
	}
}

// /v1/openapi.json is OpenAPI 3.0 and describes exactly the routes
// there are: every path and method in it is served (a request to it is
// never the catch-all not_found), and the routes the tests use are in it.
func TestOpenAPIDocument(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if st := e.do("GET", "/v1/openapi.json", "", &doc); st != 200 || doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi.json: %d %q", st, doc.OpenAPI)
	}
	for _, want := range []string{"post /v1/topics/{topic}/produce", "get /v1/topics/{topic}/partitions/{partition}/records",
		"get /v1/topics/{topic}/consume", "post /v1/topics/{topic}/commit", "post /v1/topics/{topic}/seek",
		"get /v1/topics", "post /v1/topics", "get /v1/topics/{topic}", "delete /v1/topics/{topic}",
		"get /v1/cluster", "get /v1/groups", "get /v1/groups/{group}",
		"patch /v1/topics/{topic}", "delete /v1/topics/{topic}/consume", "delete /v1/groups/{group}", "post /v1/groups/{group}/reset-offsets",
		"get /v1/openapi.json", "get /healthz", "get /readyz", "get /metrics"} {
		method, path, _ := strings.Cut(want, " ")
		if doc.Paths[path][method] == nil {
			t.Errorf("openapi.json lacks %s", want)
		}
	}
	n := 0
	for path, ops := range doc.Paths {
		concrete := strings.NewReplacer("{topic}", "zz-none", "{partition}", "0", "{group}", "zz-none").Replace(path)
		for method := range ops {
			n++
			req, _ := http.NewRequest(strings.ToUpper(method), e.base+concrete, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var res result
			json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound && res.Error != "unknown_topic" && res.Error != "unknown_group" {
				t.Errorf("%s %s is documented but not served: %d %+v", method, path, resp.StatusCode, res)
			}
		}
	}
	if n != 26 {
		t.Errorf("%d operations documented, want 26", n)
	}
}

// /metrics has the Kafka listener's and the API's request metrics by API
// and route, each hosted partition's offsets, and the Go runtime's.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.createTopic("metered", 2)
	var res result
	for range 3 {
		if st := e.do("POST", "/v1/topics/metered/produce", `{"value": "YQ==", "partition": 1}`, &res); st != 200 {
			t.Fatalf("produce: %d %+v", st, res)
		}
	}
	e.do("POST", "/v1/topics/metered/produce", `{"value": "not base64"}`, &res)
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(raw)
	for _, want := range []string{
		`fjord_http_requests_total{code="200",route="POST /v1/topics/{topic}/produce"} 3`,
		`fjord_http_requests_total{code="400",route="POST /v1/topics/{topic}/produce"} 1`,
		`fjord_kafka_requests_total{api="Produce"} 3`,
		`fjord_partition_log_end_offset{partition="1",topic="metered"} 3`,
		`fjord_partition_high_watermark{partition="1",topic="metered"} 3`,
		`fjord_partition_log_end_offset{partition="0",topic="metered"} 0`,
		`fjord_kafka_request_duration_seconds_count{api="Metadata"}`,
		"fjord_kafka_connections ",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A produce's cached view of a topic never hides a change made by
// another client a moment ago: a topic created is seen at once, a
// partition added is seen by the first produce that names it, and a
// topic deleted is refused by the broker.
func TestProduceSeesTopicChangesAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var res result
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ=="}`, &res); st != 404 || res.Error != "unknown_topic" {
		t.Fatalf("before the topic exists: %d %+v", st, res)
	}
	e.createTopic("late", 1)
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ=="}`, &res); st != 200 {
		t.Fatalf("just after another client created it: %d %+v", st, res)
	}
	if _, err := e.adm.CreatePartitions(ctx, 2, "late"); err != nil {
		t.Fatal(err)
	}
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ==", "partition": 2}`, &res); st != 200 || res.Partition != 2 {
		t.Fatalf("to a partition another client just added: %d %+v", st, res)
	}
	// So does an idempotent one, which places its record itself.
	if _, err := e.adm.CreatePartitions(ctx, 13, "late"); err != nil {
		t.Fatal(err)
	}
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ==", "partition": 15, "idempotency_key": "k"}`, &res); st != 200 || res.Partition != 15 {
		t.Fatalf("idempotent, to a partition another client just added: %d %+v", st, res)
	}
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ==", "partition": 16}`, &res); st != 400 || res.Error != "bad_partition" {
		t.Fatalf("past the partitions: %d %+v", st, res)
	}
	if _, err := e.adm.DeleteTopic(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if st := e.do("POST", "/v1/topics/late/produce", `{"value": "YQ=="}`, &res); st != 404 || res.Error != "unknown_topic" {
		t.Fatalf("just after another client deleted it: %d %+v", st, res)
	}
}
