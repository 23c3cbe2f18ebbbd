package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// BenchmarkReplayIsolation is issue 19's acceptance point 2: a tail
// consumer's end-to-end latency beside a 5,000 records/s producer, with
// and without a backfill reading a 2 GiB topic from the start at full
// speed, and with the backfill under replay.max.bytes.per.second. It is
// a scenario, not a loop: b.N is ignored and one run takes about a
// minute and a half.
//
//	go test ./internal/e2e -run '^$' -bench BenchmarkReplayIsolation -benchtime 1x
//
// One `fjord serve` process, its data in the benchmark's temporary
// directory and removed with it (where /tmp is a tmpfs, point $TMPDIR at
// a disk: the figure is for data on a disk). A topic of 4
// partitions, flush.policy=ack (Fjord's default), is filled with 2 GiB
// of 1 KiB records of random bytes (franz-go, acks=all, as fast as it
// goes). Then one producer sends 10 records every 2 ms (5,000/s,
// acks=all), each carrying its scheduled send time in a header, and a
// tail consumer reading from the fill's end offsets takes each record's
// latency from that time, so a stall anywhere, the producer's own
// goroutine included, delays every record scheduled behind it (no
// coordinated omission). Phases, each about 20 s of samples, by
// scheduled send time:
//
//   - A: no backfill, no budget: the reference every ratio is taken
//     against.
//   - B: a backfill consumer reads the 2 GiB from the start, 64 MiB
//     fetches, as fast as it goes, again from the start each time it
//     reaches the fill's end, for 20 s; no budget.
//   - C: the same backfill, a new client from the start, with
//     replay.max.bytes.per.second set as the cluster default
//     ($FJORD_REPLAY_BUDGET bytes/s, else replayBudgetDefault).
//   - A2: no backfill, the budget still set: the baseline again, to see
//     the run's drift, and a check that the tail's fetches never draw on
//     the budget (the node's replay counters must not move).
//
// The backfill runs in a process of its own (this test binary run again,
// replayBackfillEnv naming what to do), as a backfill does in
// production: in this process its allocation (most of a million records
// a second at full speed) would put garbage collection on the tail's
// goroutines, and the figure would measure the client's runtime rather
// than the node's isolation. Both processes and the node still share the
// machine's cores.
//
// The log (replayTable) gives each phase's latencies, the producer's
// acknowledgement p99 beside the tail's (which path slowed), the node's
// CPU and Fetch rate and replay counters, and the backfill's rate per
// second (whether the budget makes it flow or stall), Fetch responses
// and how far its last pass got in each partition. The run fails if a
// record is lost, duplicated or out of order at the tail consumer, if a
// send fails, if the node's replay counter in C exceeds the budget over
// the phase plus one second's burst and one batch per partition or is
// zero, or if it moves in A2 (a tail read taken for a replay).
func BenchmarkReplayIsolation(b *testing.B) {
	if cfg := os.Getenv(replayBackfillEnv); cfg != "" {
		runReplayBackfill(b, cfg)
		return
	}
	budget := int64(replayBudgetDefault)
	if s := os.Getenv("FJORD_REPLAY_BUDGET"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("$FJORD_REPLAY_BUDGET=%q: want bytes per second, at least 1", s)
		}
		budget = n
	}
	node := testcluster.Start(b, testcluster.Options{LogLevel: "warn"}) // data in b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const topic = "replay"
	benchCreateTopic(ctx, b, node.Brokers(), topic, replayPartitions, "ack")

	// The fill.
	prod := benchProducer(b, node.Brokers(), topic)
	payloads := randomPayloads(4096, replayRecordBytes)
	var acks benchAcks
	fillStart := time.Now()
	for i := range replayFillRecords {
		acks.wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, acks.done)
	}
	acks.wg.Wait()
	fill := time.Since(fillStart)
	if n := acks.failures.Load(); n > 0 {
		b.Fatalf("fill: %d of %d records failed; first: %v", n, replayFillRecords, acks.firstErr.Load())
	}
	adm := kadm.NewClient(replayClient(b, node.Brokers()))
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		b.Fatal(err)
	}
	ends := make(map[int32]int64, replayPartitions)
	var filled int64
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset; filled += o.Offset })
	if filled != replayFillRecords {
		b.Fatalf("the log holds %d records after the fill, %d were acknowledged", filled, replayFillRecords)
	}

	tail := startReplayTail(ctx, b, node.Brokers(), topic, ends)
	pacer := startReplayProducer(ctx, prod, payloads)
	phases := []*replayPhase{}
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
	}
	steady := func(name string) {
		p := beginReplayPhase(b, node, name)
		pause(replayPhaseLength)
		p.end(b, node)
		p.from, p.to = p.scrapedAt, p.endScrapedAt
		phases = append(phases, p)
	}
	backfill := func(name string) {
		p := beginReplayPhase(b, node, name)
		p.backfill = runReplayBackfillProcess(ctx, b, node.Brokers(), topic, ends)
		p.end(b, node)
		p.from, p.to = p.backfill.first(), p.backfill.last()
		phases = append(phases, p)
	}
	pause(3 * time.Second) // connections, first batches, the node's caches
	steady("A")
	pause(2 * time.Second)
	backfill("B")
	pause(2 * time.Second)
	setReplayBudget(ctx, b, adm, node, budget)
	backfill("C")
	pause(2 * time.Second)
	steady("A2")

	produced, acked := pacer.stop(b)
	samples := tail.stop(b, produced)

	for _, p := range phases {
		p.latency = replayLatencyOf(samples, p.from, p.to)
		p.ack = replayLatencyOf(acked, p.from, p.to)
		if p.latency.count == 0 {
			b.Fatalf("phase %s: no samples", p.name)
		}
	}
	a, bb, c, a2 := phases[0], phases[1], phases[2], phases[3]
	b.Logf("fill: %d records of %d bytes (%.2f GiB) over %d partitions in %.1f s (%.0f MB/s); "+
		"budget in C and A2: replay.max.bytes.per.second=%d (%.1f MB/s), replay.tail.bytes the default (64 MiB)",
		replayFillRecords, replayRecordBytes, float64(replayFillRecords*replayRecordBytes)/(1<<30),
		replayPartitions, fill.Seconds(), float64(replayFillRecords*replayRecordBytes)/1e6/fill.Seconds(),
		budget, float64(budget)/1e6)
	b.Log(replayTable(phases))
	for _, p := range []*replayPhase{bb, c} {
		bf := p.backfill
		var reached strings.Builder
		for part := range int32(replayPartitions) {
			fmt.Fprintf(&reached, " %d:%.0f%%", part, 100*float64(bf.Next[part])/float64(ends[part]))
		}
		b.Logf("%s: the backfill read %.1f MB of values in %.1f MB of batches in %d Fetch responses (%.0f/s); its last pass ended at (partition:share of the fill)%s",
			p.name, float64(bf.Bytes)/1e6, float64(bf.BatchBytes)/1e6, bf.Fetches, float64(bf.Fetches)/p.endScrapedAt.Sub(p.scrapedAt).Seconds(), reached.String())
	}
	span := c.endScrapedAt.Sub(c.scrapedAt).Seconds()
	// The budget allows, over the span of C's scrapes, what the bucket
	// gains over it and the second it can hold when the phase starts.
	allowed := float64(budget) * (span + 1)
	verdict := func(got float64) string {
		if got > allowed {
			return "EXCEEDS it"
		}
		return "within it"
	}
	b.Logf("C against the budget (%.1f MB over the %.1f s around the phase: rate x (span + 1 s)): the backfill's batches %.1f MB, %s (%.2f); "+
		"the node's replay reads %.1f MB, %s (%.2f); the node sent consumers %.1f MB in all",
		allowed/1e6, span, float64(c.backfill.BatchBytes)/1e6, verdict(float64(c.backfill.BatchBytes)), float64(c.backfill.BatchBytes)/allowed,
		c.replayBytes()/1e6, verdict(c.replayBytes()), c.replayBytes()/allowed, c.bytesOut()/1e6)
	b.ReportMetric(fill.Seconds(), "fill-s")
	b.ReportMetric(a.latency.p99, "A-p99-ms")
	b.ReportMetric(bb.latency.p99, "B-p99-ms")
	b.ReportMetric(c.latency.p99, "C-p99-ms")
	b.ReportMetric(a2.latency.p99, "A2-p99-ms")
	b.ReportMetric(bb.latency.p99/a.latency.p99, "B/A-p99")
	b.ReportMetric(c.latency.p99/a.latency.p99, "C/A-p99")
	b.ReportMetric(bb.backfill.mbPerSecond(), "B-backfill-MB/s")
	b.ReportMetric(c.backfill.mbPerSecond(), "C-backfill-MB/s")
	b.ReportMetric(float64(budget)/1e6, "budget-MB/s")
	b.ReportMetric(c.backfill.mbPerSecond()*1e6/float64(budget), "C-backfill/budget")

	// The budget's own sanity checks. The node's replay reads over C may
	// pass allowed by one batch per partition (a fetch's first partition
	// returns a whole batch past an almost empty bucket). The backfill's
	// own bytes are only logged above: the last replay.tail.bytes of each
	// partition it reaches are tail reads, outside the budget by design.
	if got, most := c.replayBytes(), allowed+replayPartitions*(1<<20); got > most {
		b.Errorf("C: the node read %.0f replay bytes in %.1f s, more than the budget allows (%.0f: %d B/s over the phase plus one second, plus a MiB a partition)", got, span, most, budget)
	}
	if got := c.replayBytes(); got == 0 {
		b.Errorf("C: the backfill read %d bytes and the node counted none as replay: the backfill was not classified as replay", c.backfill.Bytes)
	}
	if d, h := a2.replayBytes(), a2.replayHeld(); d != 0 || h != 0 {
		b.Errorf("A2 (tail only, budget set): the node counted %.0f replay bytes and %.0f held reads: the tail was drawn as replay", d, h)
	}
}

const (
	// replayBackfillEnv, when set, makes BenchmarkReplayIsolation the
	// backfill process: its value is a replayBackfillConfig in JSON.
	replayBackfillEnv = "FJORD_REPLAY_BACKFILL"
	// replayBudgetDefault is C's replay.max.bytes.per.second, 64 MiB/s:
	// a round number, about 8% of what the backfill reaches unthrottled
	// on the 2-core machine of BENCHMARKS.md (a quarter of it, 200 MiB/s,
	// did not keep the tail within 2x there).
	replayBudgetDefault = 64 << 20

	replayPartitions  = 4
	replayRecordBytes = 1024
	// replayFillRecords of replayRecordBytes are 2 GiB.
	replayFillRecords = 2 << 30 / replayRecordBytes
	replayRate        = 5000 // records a second at the tail
	replayTick        = 2 * time.Millisecond
	replayPhaseLength = 20 * time.Second
	// replaySentHeader carries a record's scheduled send time, Unix
	// nanoseconds, big-endian.
	replaySentHeader = "sent"
)

// replayClient is a franz-go client of brokers, closed with the
// benchmark.
func replayClient(b *testing.B, brokers string, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// setReplayBudget sets replay.max.bytes.per.second as the cluster
// default and waits until the node reports it.
func setReplayBudget(ctx context.Context, b *testing.B, adm *kadm.Client, node *testcluster.Node, budget int64) {
	b.Helper()
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "replay.max.bytes.per.second", Value: kadm.StringPtr(strconv.FormatInt(budget, 10))},
	})
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = fmt.Errorf("%v %s", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		b.Fatalf("setting replay.max.bytes.per.second: %v", err)
	}
	testutil.Eventually(b, 10*time.Second, func() error {
		v, _ := replayScrape(b, node).Value("fjord_replay_budget_bytes_per_second")
		if int64(v) != budget {
			return fmt.Errorf("fjord_replay_budget_bytes_per_second %v, want %d", v, budget)
		}
		return nil
	})
}

func replayScrape(b *testing.B, node *testcluster.Node) testutil.Metrics {
	return testutil.Scrape(b, nil, "http://"+node.HTTPAddr()+"/metrics")
}

// replayPhase is one phase's window and what was measured over it.
type replayPhase struct {
	name string
	// from and to bound the samples by scheduled send time: the sleep
	// for a steady phase, the backfill's first to last byte for the
	// others.
	from, to time.Time
	// The node's CPU seconds and replay counters at both ends, scraped
	// around the whole phase.
	scrapedAt, endScrapedAt time.Time
	cpu, endCPU             float64
	// fjord_replay_bytes_total, fjord_replay_reads_held_total,
	// fjord_kafka_requests_total{api="Fetch"} and
	// fjord_topic_bytes_out_total (the topic's, to every consumer).
	counters, endCounters [4]float64
	backfill              *replayBackfillResult
	// latency is the tail's end-to-end latency, ack the producer's.
	latency, ack replayLatency
}

func beginReplayPhase(b *testing.B, node *testcluster.Node, name string) *replayPhase {
	p := &replayPhase{name: name}
	p.cpu, p.counters = replayNodeCounters(b, node)
	p.scrapedAt = time.Now()
	return p
}

func (p *replayPhase) end(b *testing.B, node *testcluster.Node) {
	p.endScrapedAt = time.Now()
	p.endCPU, p.endCounters = replayNodeCounters(b, node)
}

func (p *replayPhase) replayBytes() float64 { return p.endCounters[0] - p.counters[0] }
func (p *replayPhase) replayHeld() float64  { return p.endCounters[1] - p.counters[1] }

// bytesOut is the record batch bytes the node sent consumers over the
// phase.
func (p *replayPhase) bytesOut() float64 { return p.endCounters[3] - p.counters[3] }

// fetchesPerSecond is the Fetch requests the node handled a second over
// the phase: the tail consumer's and the backfill's.
func (p *replayPhase) fetchesPerSecond() float64 {
	return (p.endCounters[2] - p.counters[2]) / p.endScrapedAt.Sub(p.scrapedAt).Seconds()
}

// nodeCPUCores is the cores the node kept busy over the phase.
func (p *replayPhase) nodeCPUCores() float64 {
	return (p.endCPU - p.cpu) / p.endScrapedAt.Sub(p.scrapedAt).Seconds()
}

func replayNodeCounters(b *testing.B, node *testcluster.Node) (cpu float64, counters [4]float64) {
	b.Helper()
	m := replayScrape(b, node)
	counters[0], _ = m.Value("fjord_replay_bytes_total")
	counters[1], _ = m.Value("fjord_replay_reads_held_total")
	counters[2], _ = m.Value("fjord_kafka_requests_total", "api=Fetch")
	counters[3], _ = m.Value("fjord_topic_bytes_out_total")
	cpu, err := replayProcessCPU(node.Pid())
	if err != nil {
		b.Fatal(err)
	}
	return cpu, counters
}

// replayProcessCPU is utime+stime of pid, from /proc/<pid>/stat (fields
// 14 and 15, counted after the command name's closing parenthesis), in
// USER_HZ ticks, which Linux fixes at 100 for user space.
func replayProcessCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat too short: %q", pid, data)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime: %q", pid, data)
	}
	return float64(u+s) / 100, nil
}

// replayProducer sends replayRate records a second, in batches every
// replayTick, each stamped with its batch's scheduled time, and keeps
// each record's acknowledgement latency from that time: beside the
// tail's end-to-end figure it tells a slower produce path (the append,
// its fsync) from a slower fetch path.
type replayProducer struct {
	cl       *kgo.Client
	halt     chan struct{}
	done     chan struct{}
	sent     atomic.Int64
	failures atomic.Int64
	firstErr atomic.Value
	mu       struct {
		sync.Mutex
		acks []replaySample
	}
}

func startReplayProducer(ctx context.Context, cl *kgo.Client, payloads [][]byte) *replayProducer {
	p := &replayProducer{cl: cl, halt: make(chan struct{}), done: make(chan struct{})}
	perTick := int(replayRate * replayTick / time.Second)
	promise := func(r *kgo.Record, err error) {
		now := time.Now().UnixNano()
		if err != nil {
			if p.failures.Add(1) == 1 {
				p.firstErr.Store(err)
			}
			return
		}
		sent := int64(binary.BigEndian.Uint64(r.Headers[0].Value))
		p.mu.Lock()
		p.mu.acks = append(p.mu.acks, replaySample{sent: sent, latency: now - sent})
		p.mu.Unlock()
	}
	go func() {
		defer close(p.done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		start := time.Now()
		n := 0
		for tick := 0; ; tick++ {
			due := start.Add(time.Duration(tick) * replayTick)
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-p.halt:
					return
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			// A batch due in the past (the goroutine was late) goes out
			// at once with its scheduled time, so the delay counts.
			stamp := binary.BigEndian.AppendUint64(nil, uint64(due.UnixNano()))
			for range perTick {
				p.cl.Produce(ctx, &kgo.Record{
					Value:   payloads[n%len(payloads)],
					Headers: []kgo.RecordHeader{{Key: replaySentHeader, Value: stamp}},
				}, promise)
				n++
			}
			p.sent.Add(int64(perTick))
		}
	}()
	return p
}

// stop ends the sends, waits for every answer and returns how many
// records were acknowledged, and their acknowledgement latencies.
func (p *replayProducer) stop(b *testing.B) (int64, []replaySample) {
	b.Helper()
	close(p.halt)
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		b.Fatalf("flushing the paced producer: %v", err)
	}
	if n := p.failures.Load(); n > 0 {
		b.Fatalf("%d of %d paced records failed; first: %v", n, p.sent.Load(), p.firstErr.Load())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.Load(), p.mu.acks
}

// replaySample is one record's scheduled send time and its latency to
// the tail consumer (or to its acknowledgement), nanoseconds.
type replaySample struct{ sent, latency int64 }

// replayTail reads every partition from the fill's end and keeps a
// sample for every record, checking that each partition's offsets come
// in order, each once.
type replayTail struct {
	cancel  context.CancelFunc
	done    chan struct{}
	samples []replaySample // owned by the consumer's goroutine until done
	count   atomic.Int64
	err     error // the first error, read after done
}

func startReplayTail(ctx context.Context, b *testing.B, brokers, topic string, ends map[int32]int64) *replayTail {
	offsets := make(map[int32]kgo.Offset, len(ends))
	next := make(map[int32]int64, len(ends))
	for p, end := range ends {
		offsets[p] = kgo.NewOffset().At(end)
		next[p] = end
	}
	cl := replayClient(b, brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err := cl.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &replayTail{cancel: cancel, done: make(chan struct{}), samples: make([]replaySample, 0, 1<<20)}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachError(func(_ string, p int32, err error) {
				if ctx.Err() == nil && c.err == nil {
					c.err = fmt.Errorf("partition %d: %w", p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next[r.Partition] && c.err == nil {
					c.err = fmt.Errorf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
				}
				next[r.Partition] = r.Offset + 1
				var sent int64 = -1
				for _, h := range r.Headers {
					if h.Key == replaySentHeader && len(h.Value) == 8 {
						sent = int64(binary.BigEndian.Uint64(h.Value))
					}
				}
				if sent < 0 && c.err == nil {
					c.err = fmt.Errorf("partition %d offset %d: no %q header", r.Partition, r.Offset, replaySentHeader)
				}
				c.samples = append(c.samples, replaySample{sent: sent, latency: now - sent})
			})
			c.count.Add(int64(fs.NumRecords()))
		}
	}()
	return c
}

// stop waits until the consumer has read the produced records, then
// ends it and returns its samples.
func (c *replayTail) stop(b *testing.B, produced int64) []replaySample {
	b.Helper()
	err := testutil.Wait(30*time.Second, func() error {
		if n := c.count.Load(); n < produced {
			return fmt.Errorf("the tail consumer read %d of %d records", n, produced)
		}
		return nil
	})
	c.cancel()
	<-c.done
	if err != nil {
		b.Fatal(err)
	}
	if c.err != nil {
		b.Fatalf("tail consumer: %v", c.err)
	}
	if n := c.count.Load(); n != produced {
		b.Fatalf("the tail consumer read %d records, %d were acknowledged", n, produced)
	}
	return c.samples
}

// replayLatency is a phase's latency percentiles, milliseconds.
type replayLatency struct {
	count                    int
	p50, p99, p999, maxValue float64
}

func replayLatencyOf(samples []replaySample, from, to time.Time) replayLatency {
	var lat []int64
	for _, s := range samples {
		if s.sent >= from.UnixNano() && s.sent < to.UnixNano() {
			lat = append(lat, s.latency)
		}
	}
	if len(lat) == 0 {
		return replayLatency{}
	}
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6
	}
	return replayLatency{count: len(lat), p50: pct(0.50), p99: pct(0.99), p999: pct(0.999), maxValue: float64(lat[len(lat)-1]) / 1e6}
}

// replayTable is the run's figures, a row a phase: the tail's
// end-to-end latency and the producer's acknowledgement p99 (ms); the
// node's CPU cores and Fetch requests a second; the backfill's (bf)
// rate, passes begun, lowest and highest MB in any whole second, longest
// time between two polls that brought records, and its process's CPU
// cores; the node's replay bytes and held partition reads. Few lines: a
// benchmark's log is cut after ten without -v.
func replayTable(phases []*replayPhase) string {
	var s strings.Builder
	a := phases[0].latency.p99
	fmt.Fprintf(&s, "%-3s %7s %7s %7s %7s %8s %7s %6s %7s %6s %8s %8s %6s %15s %9s %8s %9s %8s",
		"", "seconds", "samples", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "p99/A", "ack p99", "node", "fetch/s",
		"bf MB/s", "passes", "bf MB/s lo..hi", "bf gap ms", "bf cores", "replay MB", "held")
	for _, p := range phases {
		l := p.latency
		fmt.Fprintf(&s, "\n%-3s %7.1f %7d %7.2f %7.2f %8.2f %7.2f %6.2f %7.2f %6.2f %8.0f", p.name, p.to.Sub(p.from).Seconds(),
			l.count, l.p50, l.p99, l.p999, l.maxValue, l.p99/a, p.ack.p99, p.nodeCPUCores(), p.fetchesPerSecond())
		if bf := p.backfill; bf != nil {
			lo, hi := bf.secondRange()
			fmt.Fprintf(&s, " %8.1f %6d %15s %9.0f %8.2f", bf.mbPerSecond(), bf.Passes,
				fmt.Sprintf("%.0f..%.0f", lo, hi), bf.longestGap().Seconds()*1e3, bf.CPUCores)
		} else {
			fmt.Fprintf(&s, " %8s %6s %15s %9s %8s", "-", "-", "-", "-", "-")
		}
		fmt.Fprintf(&s, " %9.1f %8.0f", p.replayBytes()/1e6, p.replayHeld())
	}
	return s.String()
}

// runReplayBackfillProcess runs the backfill as a child process (this test
// binary again) and returns what it measured.
func runReplayBackfillProcess(ctx context.Context, b *testing.B, brokers, topic string, ends map[int32]int64) *replayBackfillResult {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	out, err := os.CreateTemp(b.TempDir(), "backfill-*.json")
	if err != nil {
		b.Fatal(err)
	}
	out.Close()
	cfg, err := json.Marshal(replayBackfillConfig{
		Brokers: brokers, Topic: topic, Ends: ends, Duration: replayPhaseLength, Out: out.Name(),
	})
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$", "-test.bench=^BenchmarkReplayIsolation$",
		"-test.benchtime=1x", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), replayBackfillEnv+"="+string(cfg))
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("backfill process: %v\n%s", err, output.String())
	}
	wall := time.Since(start)
	data, err := os.ReadFile(out.Name())
	if err != nil {
		b.Fatal(err)
	}
	var res replayBackfillResult
	if err := json.Unmarshal(data, &res); err != nil {
		b.Fatalf("backfill result %q: %v\n%s", data, err, output.String())
	}
	if len(res.Samples) == 0 {
		b.Fatalf("the backfill read nothing\n%s", output.String())
	}
	st := cmd.ProcessState
	res.CPUCores = (st.UserTime() + st.SystemTime()).Seconds() / wall.Seconds()
	return &res
}

// replayBackfillConfig tells the backfill process what to read.
type replayBackfillConfig struct {
	Brokers, Topic string
	// Ends are the fill's end offsets: a pass is done once every
	// partition has been read to its end.
	Ends map[int32]int64
	// Duration is how long it reads from its first byte.
	Duration time.Duration
	// Out is where it writes its replayBackfillResult.
	Out string
}

// replayBackfillResult is what the backfill process measured.
type replayBackfillResult struct {
	// Bytes are the record values it read, BatchBytes the record
	// batches they came in (as the node counts its replay reads),
	// Fetches the Fetch responses it read, Passes the passes it began.
	Bytes, BatchBytes, Fetches int64
	Passes                     int
	// Next is, by partition, the offset after the last record its last
	// pass read.
	Next map[int32]int64
	// Samples are the time (Unix nanoseconds) and bytes read so far
	// after each poll that returned records.
	Samples [][2]int64
	// CPUCores is the process's CPU time over its wall time (set by the
	// parent).
	CPUCores float64 `json:"-"`
}

func (r *replayBackfillResult) first() time.Time { return time.Unix(0, r.Samples[0][0]) }
func (r *replayBackfillResult) last() time.Time {
	return time.Unix(0, r.Samples[len(r.Samples)-1][0])
}

// mbPerSecond is its rate from its first poll that returned records to
// its last (what the first poll brought was fetched before the span).
func (r *replayBackfillResult) mbPerSecond() float64 {
	return float64(r.Bytes-r.Samples[0][1]) / 1e6 / r.last().Sub(r.first()).Seconds()
}

// secondRange is the least and most it read in any whole second of its
// run, MB/s: a budget that holds a fetch back for long shows as a low
// second where a steady flow would not.
func (r *replayBackfillResult) secondRange() (lo, hi float64) {
	at := func(t int64) int64 { // bytes read by time t
		i, _ := slices.BinarySearchFunc(r.Samples, t, func(s [2]int64, t int64) int { return cmp.Compare(s[0], t) })
		if i < len(r.Samples) && r.Samples[i][0] == t {
			return r.Samples[i][1]
		}
		if i == 0 {
			return 0
		}
		return r.Samples[i-1][1]
	}
	lo = -1
	for t := r.Samples[0][0]; t+int64(time.Second) <= r.Samples[len(r.Samples)-1][0]; t += int64(time.Second) {
		mb := float64(at(t+int64(time.Second))-at(t)) / 1e6
		if lo < 0 || mb < lo {
			lo = mb
		}
		hi = max(hi, mb)
	}
	return max(lo, 0), hi
}

// longestGap is the longest time between two polls that returned
// records.
func (r *replayBackfillResult) longestGap() time.Duration {
	var gap int64
	for i := 1; i < len(r.Samples); i++ {
		gap = max(gap, r.Samples[i][0]-r.Samples[i-1][0])
	}
	return time.Duration(gap)
}

// replayBackfillHooks count the record batch bytes a client fetched
// and the Fetch responses it read (franz-go calls them from its own
// goroutines).
type replayBackfillHooks struct{ batchBytes, fetches atomic.Int64 }

func (h *replayBackfillHooks) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.batchBytes.Add(int64(m.CompressedBytes))
}

func (h *replayBackfillHooks) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Fetch.Int16() && err == nil {
		h.fetches.Add(1)
	}
}

// runReplayBackfill is the backfill process: franz-go reading every
// partition from the start with 64 MiB fetches (16 MiB a partition), as
// fast as it goes, a new client each pass, until Duration has passed
// since its first byte.
func runReplayBackfill(b *testing.B, cfgJSON string) {
	var cfg replayBackfillConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		b.Fatalf("$%s: %v", replayBackfillEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+time.Minute)
	defer cancel()
	var (
		res replayBackfillResult
		// deadline ends the run Duration after the first byte.
		deadline *time.Timer
	)
	for ctx.Err() == nil {
		res.Passes++
		offsets := make(map[int32]kgo.Offset, len(cfg.Ends))
		for p := range cfg.Ends {
			offsets[p] = kgo.NewOffset().AtStart()
		}
		var hooks replayBackfillHooks
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cfg.Brokers),
			kgo.ClientID("replay-backfill"),
			kgo.WithHooks(&hooks),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
			kgo.FetchMaxBytes(64<<20),
			kgo.FetchMaxPartitionBytes(16<<20),
			kgo.FetchMaxWait(500*time.Millisecond),
		)
		if err != nil {
			b.Fatal(err)
		}
		left := len(cfg.Ends)
		reached := make(map[int32]bool, len(cfg.Ends))
		res.Next = make(map[int32]int64, len(cfg.Ends))
		for left > 0 && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachError(func(_ string, p int32, err error) {
				if ctx.Err() == nil {
					b.Fatalf("backfill, partition %d: %v", p, err)
				}
			})
			if fs.NumRecords() == 0 {
				continue
			}
			fs.EachRecord(func(r *kgo.Record) {
				res.Bytes += int64(len(r.Value))
				res.Next[r.Partition] = r.Offset + 1
				if r.Offset >= cfg.Ends[r.Partition]-1 && !reached[r.Partition] {
					reached[r.Partition] = true
					left--
				}
			})
			res.Samples = append(res.Samples, [2]int64{now, res.Bytes})
			if deadline == nil {
				deadline = time.AfterFunc(cfg.Duration, cancel)
			}
		}
		cl.Close()
		res.BatchBytes += hooks.batchBytes.Load()
		res.Fetches += hooks.fetches.Load()
	}
	data, err := json.Marshal(&res)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfg.Out, data, 0o644); err != nil {
		b.Fatal(err)
	}
}
