package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
)

// BenchmarkAppendAcksAll measures the produce path through the replica
// manager onto real files: 1 KiB records in batches of 16 (16 KiB), acks=all,
// under both flush policies, from one producer and from 16 concurrent
// ones (which share fsyncs under flush.policy=ack: group commit).
//
//	go test -run '^$' -bench BenchmarkAppendAcksAll ./internal/replica/
func BenchmarkAppendAcksAll(b *testing.B) {
	for _, policy := range []string{"interval", "ack"} {
		for _, producers := range []int{1, 16} {
			b.Run(fmt.Sprintf("flush.policy=%s/producers=%d", policy, producers), func(b *testing.B) {
				e := newEnv(b, "")
				e.put(newTopic("bench", 1, 1, map[string]string{
					"flush.policy": policy,
					// Keep the benchmark's disk use bounded; a roll every
					// 64 MiB is part of the measured cost, as in service.
					"segment.bytes": "67108864",
				}))
				data := bigBatch(b, 16, 1024, time.Now().UnixMilli())
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				b.ResetTimer()
				b.SetParallelism(max(producers/2, 1)) // GOMAXPROCS goroutines per unit
				if producers == 1 {
					for b.Loop() {
						if _, err := e.m.Append(context.Background(), "bench", 0, data, AcksAll, 30*time.Second); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						mine := append([]byte(nil), data...) // Append rewrites the header in place
						for pb.Next() {
							if _, err := e.m.Append(context.Background(), "bench", 0, mine, AcksAll, 30*time.Second); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkFetch measures consumer fetches of up to 1 MiB from a 32 MiB
// partition, reading it front to back and starting over, with pooled
// buffers released after each fetch as kafkaserver does once the
// response is written.
//
//	go test -run '^$' -bench BenchmarkFetch ./internal/replica/
func BenchmarkFetch(b *testing.B) {
	e := newEnv(b, "")
	e.put(newTopic("bench", 1, 1, map[string]string{"flush.policy": "interval"}))
	data := bigBatch(b, 16, 1024, time.Now().UnixMilli())
	for range 32 << 20 / len(data) {
		if _, err := e.m.Append(context.Background(), "bench", 0, data, AcksLeader, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	end := e.log("bench", 0).HighWatermark()
	parts := []FetchPartition{part("bench", 0, 0)}
	var bytes int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res := e.m.Fetch(context.Background(), consumerFetch(0, 0), parts)
		p := res.Partitions[0]
		if p.Err != nil || len(p.Records) == 0 {
			b.Fatalf("fetch at %d: %v, %d bytes", parts[0].FetchOffset, p.Err, len(p.Records))
		}
		bytes += int64(len(p.Records))
		parts[0].FetchOffset = nextOffset(b, p.Records)
		if parts[0].FetchOffset >= end {
			parts[0].FetchOffset = 0
		}
		res.Release()
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// nextOffset returns the offset after the last batch in b.
func nextOffset(tb testing.TB, b []byte) int64 {
	var next int64
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			tb.Fatal(err)
		}
		next = h.LastOffset() + 1
		b = b[h.Size():]
	}
	return next
}
