package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// BenchmarkProduce is the first end-to-end throughput figure (issue 3; the
// full tool is `fjord bench`, issue 4): one franz-go producer, idempotent,
// acks=all, no compression, 1 KiB records of random bytes (so no codec
// could flatter them), against a real node process over loopback, for 1
// and 8 partitions under flush.policy=interval and ack. b.N is the number
// of records; run it with a fixed count so every case moves the same
// bytes:
//
//	go test -run '^$' -bench BenchmarkProduce -benchtime 200000x ./internal/e2e/
//
// The node's data goes to $FJORD_BENCH_DIR when set (put it on the disk
// being measured, never a tmpfs), else to the test's temporary directory.
// The client and the node share the machine's cores, as they do in every
// single-machine figure in BENCHMARKS.md.
func BenchmarkProduce(b *testing.B) {
	for _, policy := range []string{"interval", "ack"} {
		for _, partitions := range []int32{1, 8} {
			b.Run(fmt.Sprintf("flush=%s/partitions=%d", policy, partitions), func(b *testing.B) {
				benchmarkProduce(b, policy, partitions)
			})
		}
	}
}

func benchmarkProduce(b *testing.B, policy string, partitions int32) {
	opts := testcluster.Options{LogLevel: "warn"}
	if root := os.Getenv("FJORD_BENCH_DIR"); root != "" {
		dir, err := os.MkdirTemp(root, "produce-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		opts.DataDir = dir
	}
	node := testcluster.Start(b, opts)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const topic = "bench"
	admin, err := kgo.NewClient(kgo.SeedBrokers(node.Brokers()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1,
		map[string]*string{"flush.policy": &policy}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic: %v", err)
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(node.Brokers()),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<16),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()

	payloads := benchPayloads()
	var acks benchAcks
	wg, done := &acks.wg, acks.done
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, done)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	acks.check(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")

	// Every acknowledged record is in the log: the figure counts nothing
	// that did not arrive.
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(b.N) {
		b.Fatalf("log holds %d records, %d were acknowledged", total, b.N)
	}
}

// benchPayloads are distinct 1 KiB random payloads, reused round-robin:
// generating 1 KiB of randomness per record would cost the producer more
// than sending it.
func benchPayloads() [][]byte {
	payloads := make([][]byte, 4096)
	for i := range payloads {
		payloads[i] = make([]byte, 1024)
		rand.Read(payloads[i])
	}
	return payloads
}

// benchAcks counts a benchmark's produce answers: done is each record's
// promise; wg waits for them all.
type benchAcks struct {
	wg       sync.WaitGroup
	failures atomic.Int64
	firstErr atomic.Value
}

func (a *benchAcks) done(_ *kgo.Record, err error) {
	if err != nil && a.failures.Add(1) == 1 {
		a.firstErr.Store(err)
	}
	a.wg.Done()
}

// check fails b if any record failed.
func (a *benchAcks) check(b *testing.B) {
	b.Helper()
	if n := a.failures.Load(); n > 0 {
		b.Fatalf("%d of %d records failed; first: %v", n, b.N, a.firstErr.Load())
	}
}
