package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// The workload benchmarks are the data-path engineer's load shapes, close
// to issue 4's targets, for profiling and before/after comparisons of
// changes in storage, record, replica and kafkaserver (`fjord bench` is the
// user-facing tool). b.N is the number of records in every one of them, so
// run them with a fixed count:
//
//	go test ./internal/e2e -run '^$' -bench 'Workload16p1KB' -benchtime 500000x -count 3
//	go test ./internal/e2e -run '^$' -bench 'Workload16p100B' -benchtime 2000000x -count 3
//	go test ./internal/e2e -run '^$' -bench 'WorkloadLatency' -benchtime 50000x -count 3
//	go test ./internal/e2e -run '^$' -bench 'Workload16p1KB/flush=interval' -benchtime 2000000x  # peak RSS after 2 GB
//
// By default the node is a separate `fjord serve` process (testcluster),
// and node-VmHWM-MiB is its peak resident memory. With
// FJORD_BENCH_INPROC=1 the node runs inside the benchmark process
// (internal/node.Start), so `-cpuprofile`, `-memprofile`, `-mutexprofile`
// and `-blockprofile` see its goroutines (FJORD_BENCH_PEAKHEAP=path also
// writes the heap profile at the live heap's peak); the client's share of the CPU is
// then in the same profile, and the figures are for profiling only. Data
// goes to $FJORD_BENCH_DIR when set, else to a temporary directory.

// benchTarget is a node to load: its bootstrap address and the pid whose
// memory is reported.
type benchTarget struct {
	brokers string
	pid     int
}

func startBenchTarget(b *testing.B) benchTarget {
	b.Helper()
	dir := b.TempDir()
	if root := os.Getenv("FJORD_BENCH_DIR"); root != "" {
		d, err := os.MkdirTemp(root, "workload-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	if os.Getenv("FJORD_BENCH_INPROC") != "1" {
		n := testcluster.Start(b, testcluster.Options{LogLevel: "warn", DataDir: dir})
		return benchTarget{brokers: n.Brokers(), pid: n.Pid()}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctrlAddr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		NodeID:         1,
		DataDir:        dir,
		KafkaAddr:      "127.0.0.1:0",
		ControllerAddr: ctrlAddr,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := n.Close(); err != nil {
			b.Errorf("closing node: %v", err)
		}
	})
	if path := os.Getenv("FJORD_BENCH_PEAKHEAP"); path != "" {
		peakHeapProfile(b, path)
	}
	return benchTarget{brokers: n.KafkaAddr().String(), pid: os.Getpid()}
}

// peakHeapProfile writes a heap profile to path each time the live heap
// reaches a new high, sampled every 100ms, until the benchmark ends: the
// profile at the peak says which allocation sites make the peak RSS.
func peakHeapProfile(b *testing.B, path string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	b.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak {
				peak = v
				f, err := os.Create(path)
				if err != nil {
					return
				}
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
}

// vmHWM returns a process's peak resident set in bytes, from
// /proc/<pid>/status.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(rest, []byte("kB")))), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

func benchCreateTopic(ctx context.Context, b *testing.B, brokers, topic string, partitions int32, policy string) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, map[string]*string{"flush.policy": &policy}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic: %v", err)
	}
}

// benchProducer is a franz-go producer with the settings every workload
// prints: acks=all, idempotent (franz-go's default), no compression,
// linger 0, 1 MiB batches.
func benchProducer(b *testing.B, brokers, topic string) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<15),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// benchConsumer reads the given partitions of topic from the start,
// directly (no group), as `fjord bench` consumers do.
func benchConsumer(b *testing.B, brokers, topic string, partitions []int32) *kgo.Client {
	b.Helper()
	offsets := make(map[int32]kgo.Offset, len(partitions))
	for _, p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// randomPayloads returns n distinct random values of size bytes, reused
// round-robin: random bytes per record would cost the client more than
// sending them, and any codec would find nothing to compress.
func randomPayloads(n, size int) [][]byte {
	p := make([][]byte, n)
	for i := range p {
		p[i] = make([]byte, size)
		rand.Read(p[i])
	}
	return p
}

// BenchmarkWorkload16p1KB is max-rate-16p-1kb-4p4c: 16 partitions, four
// producers and four consumers (four partitions each), 1 KiB records.
func BenchmarkWorkload16p1KB(b *testing.B) {
	for _, policy := range []string{"interval", "ack"} {
		b.Run("flush="+policy, func(b *testing.B) {
			benchMaxRate(b, policy, 1024, 4, 4)
		})
	}
}

// BenchmarkWorkload16p100B is max-rate-16p-100b: 16 partitions, four
// producers, 100-byte records, produce only (target 500,000 records/s).
func BenchmarkWorkload16p100B(b *testing.B) {
	benchMaxRate(b, "interval", 100, 4, 0)
}

func benchMaxRate(b *testing.B, policy string, size, producers, consumers int) {
	const (
		topic      = "bench"
		partitions = 16
	)
	t := startBenchTarget(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	benchCreateTopic(ctx, b, t.brokers, topic, partitions, policy)
	payloads := randomPayloads(4096, size)

	prods := make([]*kgo.Client, producers)
	for i := range prods {
		prods[i] = benchProducer(b, t.brokers, topic)
	}
	var cons []*kgo.Client
	for i := range consumers {
		var ps []int32
		for p := int32(i); p < partitions; p += int32(consumers) {
			ps = append(ps, p)
		}
		cons = append(cons, benchConsumer(b, t.brokers, topic, ps))
	}

	var (
		failures atomic.Int64
		firstErr atomic.Value
		consumed atomic.Int64
		wg       sync.WaitGroup
	)
	total := int64(b.N)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	consumeDone := make(chan time.Duration, 1)
	if consumers > 0 {
		// A consumer whose partitions are all read waits in PollFetches
		// until the last record anywhere is consumed: that ends cctx.
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		var cwg sync.WaitGroup
		for _, cl := range cons {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for cctx.Err() == nil {
					fs := cl.PollFetches(cctx)
					fs.EachError(func(_ string, _ int32, err error) {
						if cctx.Err() == nil && failures.Add(1) == 1 {
							firstErr.Store(err)
						}
					})
					if consumed.Add(int64(fs.NumRecords())) >= total {
						ccancel()
					}
				}
			}()
		}
		go func() {
			cwg.Wait()
			consumeDone <- time.Since(start)
		}()
	}
	var produceElapsed time.Duration
	var pwg sync.WaitGroup
	for i, cl := range prods {
		n := b.N / producers
		if i == 0 {
			n += b.N % producers
		}
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			done := func(_ *kgo.Record, err error) {
				if err != nil && failures.Add(1) == 1 {
					firstErr.Store(err)
				}
				wg.Done()
			}
			for j := range n {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: payloads[(i*n+j)%len(payloads)]}, done)
			}
		}()
	}
	pwg.Wait()
	wg.Wait()
	produceElapsed = time.Since(start)
	var consumeElapsed time.Duration
	if consumers > 0 {
		select {
		case consumeElapsed = <-consumeDone:
		case <-ctx.Done():
			b.Fatalf("consumed %d of %d records before the deadline", consumed.Load(), total)
		}
	}
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d errors; first: %v", n, firstErr.Load())
	}
	if consumers > 0 && consumed.Load() != total {
		b.Fatalf("consumed %d records, produced %d", consumed.Load(), total)
	}
	b.ReportMetric(float64(b.N)/produceElapsed.Seconds(), "produce-records/s")
	b.ReportMetric(float64(b.N)*float64(size)/1e6/produceElapsed.Seconds(), "produce-MB/s")
	if consumers > 0 {
		b.ReportMetric(float64(b.N)*float64(size)/1e6/consumeElapsed.Seconds(), "consume-MB/s")
	}
	reportHWM(b, t)
}

func reportHWM(b *testing.B, t benchTarget) {
	if hwm, err := vmHWM(t.pid); err != nil {
		b.Errorf("node peak RSS: %v", err)
	} else {
		b.ReportMetric(float64(hwm)/(1<<20), "node-VmHWM-MiB")
	}
}

// BenchmarkWorkloadLatency16p1KB5k is latency-16p-1kb-5k: one producer at
// a fixed 5,000 records/s over 16 partitions, 1 KiB records, one consumer
// of all 16; end-to-end latency from each record's intended send time
// (carried in its first 8 bytes) to its consumption. Pacing by intended
// time means a stall delays every record behind it, and the percentiles
// show it (no coordinated omission). Targets: p50 <= 1 ms, p99 <= 10 ms.
func BenchmarkWorkloadLatency16p1KB5k(b *testing.B) {
	const (
		topic      = "bench"
		partitions = 16
		rate       = 5000
		size       = 1024
	)
	t := startBenchTarget(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	benchCreateTopic(ctx, b, t.brokers, topic, partitions, "interval")
	prod := benchProducer(b, t.brokers, topic)
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	cons := benchConsumer(b, t.brokers, topic, ps)
	// Connect both before the clock starts: the first records must not
	// pay for metadata and connection setup.
	if err := prod.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	if err := cons.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	payloads := randomPayloads(1024, size)

	latencies := make([]time.Duration, 0, b.N)
	var failures atomic.Int64
	var firstErr atomic.Value
	consumeDone := make(chan struct{})
	go func() {
		defer close(consumeDone)
		for len(latencies) < b.N && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachError(func(_ string, _ int32, err error) {
				if ctx.Err() == nil && failures.Add(1) == 1 {
					firstErr.Store(err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				sent := int64(binary.BigEndian.Uint64(r.Value))
				latencies = append(latencies, time.Duration(now-sent))
			})
		}
	}()

	b.SetBytes(size)
	b.ResetTimer()
	interval := time.Second / rate
	start := time.Now()
	done := func(_ *kgo.Record, err error) {
		if err != nil && failures.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	for i := 0; i < b.N; {
		now := time.Now()
		due := int(now.Sub(start)/interval) + 1
		for ; i < b.N && i < due; i++ {
			v := make([]byte, size)
			copy(v, payloads[i%len(payloads)])
			binary.BigEndian.PutUint64(v, uint64(start.Add(time.Duration(i)*interval).UnixNano()))
			prod.Produce(ctx, &kgo.Record{Value: v}, done)
		}
		if i < b.N {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		}
	}
	select {
	case <-consumeDone:
	case <-ctx.Done():
	}
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d errors; first: %v", n, firstErr.Load())
	}
	if len(latencies) != b.N {
		b.Fatalf("consumed %d records, produced %d", len(latencies), b.N)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]) / 1e6
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(0.999), "p99.9-ms")
	b.ReportMetric(float64(latencies[len(latencies)-1])/1e6, "max-ms")
	reportHWM(b, t)
}

// BenchmarkWorkloadCatchup16p1KB is catchup-2gb's shape: b.N records of
// 1 KiB are produced to 16 partitions first (untimed), then one consumer
// of all 16 reads the backlog from the start; the figure is the consume
// rate (target: 40% of loopback TCP bandwidth). For 2 GB:
//
//	go test ./internal/e2e -run '^$' -bench WorkloadCatchup -benchtime 2000000x
func BenchmarkWorkloadCatchup16p1KB(b *testing.B) {
	const (
		topic      = "bench"
		partitions = 16
		size       = 1024
	)
	t := startBenchTarget(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	benchCreateTopic(ctx, b, t.brokers, topic, partitions, "interval")
	payloads := randomPayloads(4096, size)
	prod := benchProducer(b, t.brokers, topic)
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for i := range b.N {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(_ *kgo.Record, err error) {
			if err != nil && failures.Add(1) == 1 {
				firstErr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d produce errors; first: %v", n, firstErr.Load())
	}
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	cons := benchConsumer(b, t.brokers, topic, ps)

	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	consumed := 0
	for consumed < b.N && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil && failures.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
		consumed += fs.NumRecords()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d consume errors; first: %v", n, firstErr.Load())
	}
	if consumed != b.N {
		b.Fatalf("consumed %d records, produced %d", consumed, b.N)
	}
	b.ReportMetric(float64(b.N)*size/1e6/elapsed.Seconds(), "consume-MB/s")
	reportHWM(b, t)
}
