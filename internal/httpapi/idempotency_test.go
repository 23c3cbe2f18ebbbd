package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	// Wait for the index topic (the API creates it at start).
	var warm result
	e.do("POST", "/v1/topics/pay/produce", `{"value": "YQ==", "idempotency_key": "warm"}`, &warm)

	// What a crash between the two writes leaves: the record with its
	// header, and only the pending entry.
	ctx := context.Background()
	rec := &kgo.Record{Topic: "pay", Partition: 1, Value: []byte("landed"),
		Headers: []kgo.RecordHeader{{Key: "fjord-idempotency-key", Value: []byte("crashed")}}}
	// The index is internal: only the node's own client id writes it.
	manual, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID(e.n.InternalClientID()))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	pending, _ := json.Marshal(map[string]any{"state": "pending", "partition": 1, "at": time.Now().Add(-time.Second).UnixMilli()})
	if err := manual.ProduceSync(ctx, &kgo.Record{Topic: "__fjord_http_idempotency", Partition: 0, Key: []byte("pay\x00crashed"), Value: pending}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := manual.ProduceSync(ctx, rec).FirstErr(); err != nil {
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
