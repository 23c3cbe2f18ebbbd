package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// newEnvHTTP is newEnv with the HTTP API's settings (and the node's
// auto-create-topics) given.
func newEnvHTTP(t testing.TB, autoCreate bool, http node.HTTPConfig) *env {
	t.Helper()
	return newEnvWith(t, node.Config{
		NodeID: 1, DataDir: t.TempDir(), AutoCreateTopics: autoCreate,
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTP: http, Logger: slog.New(slog.DiscardHandler),
	})
}

// createTopicWith creates a one-partition topic with configs.
func (e *env) createTopicWith(name string, configs map[string]string) {
	e.t.Helper()
	e.createTopicConfigs(name, 1, configs)
}

// Regression (issue 12): records over franz-go's 1 MB batch default were
// refused by the gateway's own client, in a message blaming the server,
// whatever the topic's max.message.bytes. Now the topic's
// max.message.bytes decides, and each too-large answer names its limit
// and who set it.
func TestLargeRecords(t *testing.T) {
	const bodyLimit = 32 << 20
	e := newEnvHTTP(t, false, node.HTTPConfig{MaxBodyBytes: bodyLimit})
	const topicLimit = 16 << 20
	e.createTopicWith("big", map[string]string{"max.message.bytes": strconv.Itoa(topicLimit)})
	value := func(n int) string {
		return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n))
	}
	for _, size := range []int{1 << 20, 5 << 20, 15 << 20} {
		var res result
		if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(size)+`"}`, &res); st != 200 {
			t.Fatalf("%d byte record: %d %+v", size, st, res)
		}
		var read struct {
			Records []struct {
				Value string `json:"value"`
			} `json:"records"`
		}
		if st := e.do("GET", fmt.Sprintf("/v1/topics/big/partitions/0/records?offset=%d", res.Offset), "", &read); st != 200 ||
			len(read.Records) == 0 || read.Records[0].Value != value(size) {
			t.Fatalf("%d byte record read back: %d, %d records", size, st, len(read.Records))
		}
	}

	// Over the topic's max.message.bytes: 413, naming the setting, the
	// topic and its value.
	var res result
	if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(topicLimit+1)+`"}`, &res); st != 413 ||
		res.Error != "record_too_large" || !strings.Contains(res.Message, "max.message.bytes") ||
		!strings.Contains(res.Message, strconv.Itoa(topicLimit)) || !strings.Contains(res.Message, `"big"`) {
		t.Fatalf("record over the topic's limit: %d %+v", st, res)
	}
	// Over the body limit: 413, naming the limit and its flag.
	if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(bodyLimit)+`"}`, &res); st != 413 ||
		res.Error != "body_too_large" || !strings.Contains(res.Message, strconv.Itoa(bodyLimit)) ||
		!strings.Contains(res.Message, "http-max-body-bytes") {
		t.Fatalf("body over the limit: %d %+v", st, res)
	}
	// A topic with the default max.message.bytes still refuses 2 MiB,
	// saying so.
	e.createTopic("small", 1)
	if st := e.do("POST", "/v1/topics/small/produce", `{"value": "YQ=="}`, &res); st != 200 {
		t.Fatalf("small record: %d %+v", st, res)
	}
	if st := e.do("POST", "/v1/topics/small/produce", `{"value": "`+value(2<<20)+`"}`, &res); st != 413 ||
		res.Error != "record_too_large" || !strings.Contains(res.Message, "max.message.bytes") || !strings.Contains(res.Message, "1048588") {
		t.Fatalf("2 MiB record, default topic: %d %+v", st, res)
	}
	// Raised after the gateway's producers learned the topic: they learn
	// the new limit (within the second the gateway keeps a topic's
	// metadata).
	v := strconv.Itoa(4 << 20)
	if _, err := e.adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, "small"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := e.do("POST", "/v1/topics/small/produce", `{"value": "`+value(2<<20)+`"}`, &res); st != 200 {
			return fmt.Errorf("2 MiB record after max.message.bytes was raised to 4 MiB: %d %+v", st, res)
		}
		return nil
	})
}

// Many records produced at once to a topic whose max.message.bytes is
// small are each accepted: the gateway's client batches no more than the
// topic takes.
func TestConcurrentProducesRespectTopicLimit(t *testing.T) {
	e := newEnv(t)
	const limit = 64 << 10
	e.createTopicWith("tight", map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	body := `{"value": "` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 20<<10)) + `"}`
	errs := make(chan string, 32)
	for range cap(errs) {
		go func() { // not e.do: it may call t.Fatal, which only the test's goroutine may
			resp, err := http.Post(e.base+"/v1/topics/tight/produce", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var res result
			json.NewDecoder(resp.Body).Decode(&res)
			if resp.StatusCode != 200 {
				errs <- fmt.Sprintf("%d %+v", resp.StatusCode, res)
				return
			}
			errs <- ""
		}()
	}
	for range cap(errs) {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}

// consumeRecords is the first non-empty consume of topic by a new group,
// g, from the log start, decoded as Ts.
func consumeRecords[T any](e *env, topic string) []T {
	e.t.Helper()
	var c struct{ Records []T }
	testutil.Eventually(e.t, 30*time.Second, func() error {
		if st := e.do("GET", "/v1/topics/"+topic+"/consume?group=g&auto_offset_reset=earliest&timeout_ms=500", "", &c); st != 200 || len(c.Records) == 0 {
			return fmt.Errorf("consume: %d, %d records", st, len(c.Records))
		}
		return nil
	})
	return c.Records
}

type keyedRecord struct {
	Offset  int64   `json:"offset"`
	Key     *string `json:"key"`
	KeyB64  *string `json:"key_b64"`
	Value   *string `json:"value"`
	Headers map[string]string
}

// Regression (issue 12): a key that is not UTF-8 came back as
// "\ufffd\ufffd". Keys round-trip byte for byte: key_b64 gives them on
// produce, and reads and consumes give every key in key_b64, and in key
// too when it is UTF-8 (else key is null, never a mangled string).
func TestBinaryKeys(t *testing.T) {
	e := newEnv(t)
	e.createTopic("bin", 1)
	binary := []byte{0xff, 0xfe}
	var res result
	if st := e.do("POST", "/v1/topics/bin/produce", `{"key_b64": "//4=", "value": "YQ=="}`, &res); st != 200 {
		t.Fatalf("produce key_b64: %d %+v", st, res)
	}
	if err := e.kcl.ProduceSync(context.Background(), &kgo.Record{Topic: "bin", Key: binary, Value: []byte("b")},
		&kgo.Record{Topic: "bin", Key: []byte("text-é"), Value: []byte("c")},
		&kgo.Record{Topic: "bin", Value: []byte("d")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	check := func(where string, recs []keyedRecord) {
		t.Helper()
		if len(recs) != 4 {
			t.Fatalf("%s: %d records, want 4", where, len(recs))
		}
		for i, want := range [][]byte{binary, binary, []byte("text-é"), nil} {
			r := recs[i]
			switch {
			case want == nil && (r.Key != nil || r.KeyB64 != nil):
				t.Errorf("%s: record %d has no key, answered key %v key_b64 %v", where, i, r.Key, r.KeyB64)
			case want != nil && (r.KeyB64 == nil || *r.KeyB64 != base64.StdEncoding.EncodeToString(want)):
				t.Errorf("%s: record %d key_b64 %v, want %q", where, i, r.KeyB64, base64.StdEncoding.EncodeToString(want))
			case want != nil && utf8.Valid(want) && (r.Key == nil || *r.Key != string(want)):
				t.Errorf("%s: record %d key %v, want %q", where, i, r.Key, want)
			case want != nil && !utf8.Valid(want) && r.Key != nil:
				t.Errorf("%s: record %d key %q: a key that is not UTF-8 must be null in key", where, i, *r.Key)
			}
		}
	}
	var body json.RawMessage
	st := e.do("GET", "/v1/topics/bin/partitions/0/records", "", &body)
	if st != 200 || strings.Contains(string(body), `\ufffd`) || strings.Contains(string(body), "\ufffd") {
		t.Fatalf("read: %d %s", st, body)
	}
	var read struct{ Records []keyedRecord }
	if err := json.Unmarshal(body, &read); err != nil {
		t.Fatal(err)
	}
	check("read", read.Records)

	check("consume", consumeRecords[keyedRecord](e, "bin"))

	// The Kafka side sees the bytes the HTTP producer sent.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bin": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rec := cl.PollRecords(ctx, 1).Records(); len(rec) != 1 || !bytes.Equal(rec[0].Key, binary) {
		t.Fatalf("a Kafka consumer read %+v, want key %x", rec, binary)
	}
}

// Hostile keys: both forms, bad base64, and a key larger than the topic
// takes are refused, with a stable code, and nothing is produced.
func TestBadKeys(t *testing.T) {
	e := newEnv(t)
	e.createTopic("k", 1)
	huge := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 2<<20))
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"key and key_b64", `{"key": "a", "key_b64": "YQ==", "value": "YQ=="}`, 400, "bad_key"},
		{"key and key_b64 in a batch", `{"records": [{"value": "YQ=="}, {"key": "a", "key_b64": "YQ=="}]}`, 400, "bad_key"},
		{"bad base64 key", `{"key_b64": "//4", "value": "YQ=="}`, 400, "bad_base64"},
		{"key_b64 not a string", `{"key_b64": 7, "value": "YQ=="}`, 400, "malformed_json"},
		{"key over the topic's limit", `{"key_b64": "` + huge + `"}`, 413, "record_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res result
			if st := e.do("POST", "/v1/topics/k/produce", tc.body, &res); st != tc.status || res.Error != tc.code || !strings.Contains(res.Message, "key") && tc.code != "record_too_large" {
				t.Errorf("%d %+v, want %d %s naming the key", st, res, tc.status, tc.code)
			}
		})
	}
	if end := e.endOffset("k", 0); end != 0 {
		t.Fatalf("%d records produced by refused requests", end)
	}
}

func (e *env) hasTopic(name string) bool {
	e.t.Helper()
	topics, err := e.adm.ListTopics(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return topics.Has(name)
}

// Regression (issue 12): an HTTP produce to a missing topic was 404 even
// on a node that auto-creates topics, where a Kafka producer's (and the
// CLI's) creates it. Now the produce's metadata request asks for the
// topic's creation, as a Kafka producer's does, and the node decides.
func TestProduceAutoCreatesTopics(t *testing.T) {
	t.Run("auto-create-topics on", func(t *testing.T) {
		e := newEnvHTTP(t, true, node.HTTPConfig{})
		for _, tc := range []struct{ topic, body string }{
			{"fresh", `{"value": "YQ=="}`},
			{"fresh-keyed", `{"key": "k", "value": "YQ=="}`},
			{"fresh-explicit", `{"value": "YQ==", "partition": 0}`},
			{"fresh-batch", `{"records": [{"value": "YQ=="}, {"value": "Yg=="}]}`},
			{"fresh-idempotent", `{"value": "YQ==", "idempotency_key": "k1"}`},
		} {
			var res result
			if st := e.do("POST", "/v1/topics/"+tc.topic+"/produce", tc.body, &res); st != 200 || res.Error != "" {
				t.Errorf("%s: %d %+v, want the topic created and the record produced", tc.topic, st, res)
				continue
			}
			if end := e.endOffset(tc.topic, 0); end == 0 {
				t.Errorf("%s: created, but partition 0 is empty", tc.topic)
			}
		}
		// A partition the created topic does not have is still refused
		// (the topic stays, as a Kafka producer's would).
		var res result
		if st := e.do("POST", "/v1/topics/fresh-p5/produce", `{"value": "YQ==", "partition": 5}`, &res); st != 400 || res.Error != "bad_partition" {
			t.Errorf("partition 5 of a new one-partition topic: %d %+v", st, res)
		}
		// A name the node cannot create is 400.
		if st := e.do("POST", "/v1/topics/bad%21name/produce", `{"value": "YQ=="}`, &res); st != 400 || res.Error != "bad_topic" {
			t.Errorf("invalid topic name: %d %+v", st, res)
		}
		// Reads never create.
		if st := e.do("GET", "/v1/topics/unread/partitions/0/records", "", &res); st != 404 {
			t.Errorf("read of a missing topic: %d %+v", st, res)
		}
		if e.hasTopic("unread") {
			t.Error("a read created its topic")
		}
	})
	t.Run("auto-create-topics off", func(t *testing.T) {
		e := newEnvHTTP(t, false, node.HTTPConfig{})
		var res result
		if st := e.do("POST", "/v1/topics/fresh/produce", `{"value": "YQ=="}`, &res); st != 404 || res.Error != "unknown_topic" {
			t.Errorf("%d %+v, want 404 unknown_topic", st, res)
		}
		if e.hasTopic("fresh") {
			t.Error("the topic was created with auto-create-topics off")
		}
	})
}

type headeredRecord struct {
	Headers    map[string]*string `json:"headers"`
	HeaderList []struct {
		Name  string  `json:"name"`
		Value *string `json:"value"`
	} `json:"header_list"`
}

// Headers go both ways with base64 values: produced over HTTP (as an
// object, or as a list that keeps order and repeated names) and by a
// Kafka producer, they come back from records and consume with their
// bytes, null values and repeats intact.
func TestHeadersBothWays(t *testing.T) {
	e := newEnv(t)
	e.createTopic("hdr", 1)
	var res result
	bin := base64.StdEncoding.EncodeToString([]byte{0xff, 0, 0xfe})
	for _, body := range []string{
		`{"value": "YQ==", "headers": {"trace": "YWJj", "bin": "` + bin + `", "empty": "", "none": null}}`,
		`{"value": "YQ==", "headers": [{"name": "trace", "value": "YWJj"}, {"name": "trace", "value": "ZGVm"}, {"name": "none", "value": null}]}`,
	} {
		if st := e.do("POST", "/v1/topics/hdr/produce", body, &res); st != 200 {
			t.Fatalf("produce %s: %d %+v", body, st, res)
		}
	}
	kr := &kgo.Record{Topic: "hdr", Value: []byte("k"), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "b", Value: nil}}}
	if err := e.kcl.ProduceSync(context.Background(), kr).FirstErr(); err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	type header struct {
		name  string
		value *string
	}
	want := [][]header{
		{{"bin", str(bin)}, {"empty", str("")}, {"none", nil}, {"trace", str("YWJj")}}, // an object's headers go in name order
		{{"trace", str("YWJj")}, {"trace", str("ZGVm")}, {"none", nil}},
		{{"a", str("MQ==")}, {"a", str("Mg==")}, {"b", nil}},
	}
	check := func(where string, recs []headeredRecord) {
		t.Helper()
		if len(recs) != len(want) {
			t.Fatalf("%s: %d records", where, len(recs))
		}
		for i, w := range want {
			r := recs[i]
			repeats := map[string]int{}
			for _, h := range w {
				repeats[h.name]++
				got, ok := r.Headers[h.name]
				last := w[len(w)-1]
				for _, h2 := range w {
					if h2.name == h.name {
						last = h2
					}
				}
				if !ok || (got == nil) != (last.value == nil) || got != nil && *got != *last.value {
					t.Errorf("%s: record %d headers[%q] = %v, want %v (the last of that name)", where, i, h.name, got, last.value)
				}
			}
			if len(r.Headers) != len(repeats) {
				t.Errorf("%s: record %d has headers %v", where, i, r.Headers)
			}
			repeated := len(repeats) < len(w)
			if !repeated {
				if r.HeaderList != nil {
					t.Errorf("%s: record %d: header_list without a repeated name", where, i)
				}
				continue
			}
			if len(r.HeaderList) != len(w) {
				t.Fatalf("%s: record %d header_list %+v, want %d headers", where, i, r.HeaderList, len(w))
			}
			for j, h := range w {
				g := r.HeaderList[j]
				if g.Name != h.name || (g.Value == nil) != (h.value == nil) || g.Value != nil && *g.Value != *h.value {
					t.Errorf("%s: record %d header %d: %q=%v, want %q=%v", where, i, j, g.Name, g.Value, h.name, h.value)
				}
			}
		}
	}
	var read struct{ Records []headeredRecord }
	if st := e.do("GET", "/v1/topics/hdr/partitions/0/records", "", &read); st != 200 {
		t.Fatalf("read: %d", st)
	}
	check("read", read.Records)
	check("consume", consumeRecords[headeredRecord](e, "hdr"))

	// Hostile headers.
	for _, tc := range []struct{ body, code string }{
		{`{"value": "YQ==", "headers": [{"name": "h"}]}`, "bad_header"},
		{`{"value": "YQ==", "headers": [{"value": "YQ=="}]}`, "bad_header"},
		{`{"value": "YQ==", "headers": [{"name": "h", "value": "YQ==", "extra": 1}]}`, "malformed_json"},
		{`{"value": "YQ==", "headers": [{"name": "h", "value": "%%"}]}`, "bad_base64"},
		{`{"value": "YQ==", "headers": "h"}`, "malformed_json"},
		{`{"value": "YQ==", "headers": [7]}`, "malformed_json"},
	} {
		if st := e.do("POST", "/v1/topics/hdr/produce", tc.body, &res); st != 400 || res.Error != tc.code {
			t.Errorf("%s: %d %+v, want 400 %s", tc.body, st, res, tc.code)
		}
	}
}
