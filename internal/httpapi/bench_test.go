package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceOne is one record per request, acks=all, from 16
// concurrent callers per core: over HTTP through the gateway, and, as the
// reference measured in the same run against the same node, with
// franz-go's ProduceSync over the Kafka protocol. The ratio of the two is
// what the gateway costs a caller that cannot batch.
//
//	go test -run '^$' -bench ProduceOne -benchtime 5s ./internal/httpapi
func BenchmarkProduceOne(b *testing.B) {
	e := newEnv(b)
	e.createTopic("bench", 4)
	value := bytes.Repeat([]byte{'v'}, 100)

	// Each request with a key of its own, as a client retrying safely
	// sends: the index's two entries and, since issue 16, the catch-up
	// with the index topic (a ListOffsets) before the record.
	var keys atomic.Int64 // unique across the runs of b.N: a key sent again is answered from the index
	plain := []byte(`{"value": "` + b64(string(value)) + `"}`)
	for _, bm := range []struct {
		name string
		body func() []byte
	}{
		{"http", func() []byte { return plain }},
		{"http-idempotent", func() []byte {
			return fmt.Appendf(nil, `{"value": "%s", "idempotency_key": "bench-%d"}`, b64(string(value)), keys.Add(1))
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(e.base+"/v1/topics/bench/produce", "application/json", bytes.NewReader(bm.body()))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
	b.Run("kafka", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.ProducerLinger(0))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.SetParallelism(16)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "bench", Value: value}).FirstErr(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
