package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// BenchmarkMetricsScrapeWithLag is issue 18's point 4: a scrape of
// /metrics on one node hosting 10,000 partitions (100 topics of 100),
// coordinating 100 groups that each committed an offset on the 100
// partitions of one topic, stays under 100 ms. That is 10,000 lag rows
// (three or four series each, beside each partition's five or six), and
// the real refresher behind them, asking this node every second or so
// while the scrapes run. Setup (20 to 50 s on 2 cores: 10,000 logs on
// disk) is not timed; it runs once, and every sub-benchmark (each
// -count times) shares the node:
//
//   - scrape=text: a full GET of /metrics over HTTP, the body read
//     whole, Prometheus's text format;
//   - scrape=gzip: the same with Accept-Encoding: gzip, as Prometheus
//     scrapes (the body counted compressed, not inflated: that is the
//     scraper's work);
//   - client_golang=text and client_golang=gzip: the reference, the
//     same series served as before metrics_text.go, all through
//     client_golang (promhttp over the node's registry and
//     clientGolangReference), over HTTP the same way;
//   - text-families: the families metrics_text.go writes, alone and in
//     process: reading the rows and writing them into a buffer;
//   - registry-rest: the rest of the node's registry alone (runtime,
//     process, listeners, replication...), served by promhttp in
//     process: the part still on client_golang's path.
func BenchmarkMetricsScrapeWithLag(b *testing.B) {
	const topics, partitions, records = 100, 100, 5
	setupStart := time.Now()
	n := startLagBenchNode(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr().String()), kgo.RetryTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Ten topics per CreateTopics: 1,000 partitions, each a log the node
	// creates on disk before it answers.
	adm.SetTimeoutMillis(120_000)
	topic := func(i int) string { return fmt.Sprintf("lag-%03d", i) }
	for first := 0; first < topics; first += 10 {
		var names []string
		for i := first; i < first+10; i++ {
			names = append(names, topic(i))
		}
		resp, err := adm.CreateTopics(ctx, partitions, 1, nil, names...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			b.Fatalf("create %s..%s: %v", names[0], names[len(names)-1], err)
		}
	}
	created := time.Now()
	// Five 100-byte records per partition, one batch each (franz-go
	// batches a partition's buffered records together).
	value := make([]byte, 100)
	for i := range topics {
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for range records {
				recs = append(recs, &kgo.Record{Topic: topic(i), Partition: p, Value: value})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatalf("produce to %s: %v", topic(i), err)
		}
	}
	produced := time.Now()
	// Group i commits on topic i's partition p the offset p mod 6: lag
	// of 5 records down to 0 (caught up), so every lag figure is real
	// and some rows are zero.
	var wantRecords int64
	for i := range topics {
		commits := kadm.Offsets{}
		for p := range int32(partitions) {
			at := int64(p) % (records + 1)
			wantRecords += records - at
			commits.Add(kadm.Offset{Topic: topic(i), Partition: p, At: at, LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("group-%03d", i), commits)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			b.Fatalf("commit group-%03d: %v", i, err)
		}
	}
	committed := time.Now()
	testutil.Eventually(b, 2*time.Minute, func() error {
		s := n.lag.Snapshot()
		if len(s.Rows) != topics*partitions || s.Unknown != 0 {
			return fmt.Errorf("%d lag rows and %d unknown, want %d and 0", len(s.Rows), s.Unknown, topics*partitions)
		}
		return nil
	})
	snap := n.lag.Snapshot()
	var gotRecords int64
	for _, r := range snap.Rows {
		gotRecords += r.Records
		if (r.Records > 0) != (r.Bytes > 0) || (r.Records > 0) != (r.Age > 0) {
			b.Fatalf("lag row %+v: records, bytes and age should be all zero or all positive", r)
		}
	}
	if gotRecords != wantRecords {
		b.Fatalf("lag rows sum to %d records, want %d", gotRecords, wantRecords)
	}
	url := "http://" + n.HTTPAddr().String() + "/metrics"
	// The reference: the same rows, through client_golang as before.
	text := n.metricsText
	reference := prometheus.NewRegistry()
	reference.MustRegister(clientGolangReference{func() *textScrape {
		s := new(textScrape)
		text.read(s, time.Now())
		return s
	}})
	referenceServer := httptest.NewServer(promhttp.HandlerFor(prometheus.Gatherers{n.metrics, reference}, promhttp.HandlerOpts{}))
	defer referenceServer.Close()
	// One parse of each with Prometheus's own parser: both are valid and
	// hold the same series, counted once, outside the timing.
	series := 0
	got, want := testutil.Scrape(b, nil, url), testutil.Scrape(b, nil, referenceServer.URL)
	for name, f := range want {
		if len(got[name].GetMetric()) != len(f.GetMetric()) {
			b.Fatalf("%s: %d series, client_golang's reference has %d", name, len(got[name].GetMetric()), len(f.GetMetric()))
		}
		series += len(f.GetMetric())
	}
	if len(got) != len(want) {
		b.Fatalf("%d families, client_golang's reference has %d", len(got), len(want))
	}
	openFiles := -1
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		openFiles = len(fds)
	}
	b.Logf("setup %.1fs: create %.1fs, produce %.1fs, commit %.1fs, first full lag snapshot %.1fs (refresh took %v); %d series per scrape, %d open files",
		time.Since(setupStart).Seconds(), created.Sub(setupStart).Seconds(), produced.Sub(created).Seconds(),
		committed.Sub(produced).Seconds(), time.Since(committed).Seconds(), snap.Took.Round(time.Millisecond), series, openFiles)

	// No transparent gzip: the gzip case reads the compressed bytes.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, server := range []struct{ name, url string }{{"scrape", url}, {"client_golang", referenceServer.URL}} {
		for _, encoding := range []string{"text", "gzip"} {
			b.Run(server.name+"="+encoding, func(b *testing.B) {
				var body int64
				var slowest time.Duration
				for b.Loop() {
					start := time.Now()
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.url, nil)
					if err != nil {
						b.Fatal(err)
					}
					if encoding == "gzip" {
						req.Header.Set("Accept-Encoding", "gzip")
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					body, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK {
						b.Fatalf("GET %s: %s, %v", server.url, resp.Status, err)
					}
					slowest = max(slowest, time.Since(start))
				}
				reportScrape(b, float64(body), series, slowest)
			})
		}
	}
	b.Run("text-families", func(b *testing.B) {
		var s textScrape
		var slowest time.Duration
		for b.Loop() {
			start := time.Now()
			text.read(&s, time.Now())
			var err error
			if s.out, err = s.appendExposition(s.out[:0], nil, textFamilies, expfmt.NewFormat(expfmt.TypeTextPlain), nil); err != nil {
				b.Fatal(err)
			}
			slowest = max(slowest, time.Since(start))
		}
		reportScrape(b, float64(len(s.out)), -1, slowest)
	})
	rest := promhttp.HandlerFor(n.metrics, promhttp.HandlerOpts{})
	b.Run("registry-rest", func(b *testing.B) {
		var body int
		var slowest time.Duration
		for b.Loop() {
			start := time.Now()
			w := httptest.NewRecorder()
			rest.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if w.Code != http.StatusOK {
				b.Fatalf("registry-rest: %d", w.Code)
			}
			body = w.Body.Len()
			slowest = max(slowest, time.Since(start))
		}
		reportScrape(b, float64(body), -1, slowest)
	})
}

// reportScrape reports a scrape benchmark's figures in the units of the
// bound: ms/op and the slowest op, with bytes and series per op where
// known (0 or -1 leaves them out), and allocations: the whole process's,
// so the node's background work (the refresher's) is in them too.
func reportScrape(b *testing.B, bytes float64, series int, slowest time.Duration) {
	b.ReportAllocs()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
	if bytes > 0 {
		b.ReportMetric(bytes, "bytes/scrape")
	}
	if series >= 0 {
		b.ReportMetric(float64(series), "series/scrape")
	}
}

// startLagBenchNode starts a node as startNode does (testConfig's
// listeners, no topic auto-creation), for a benchmark: those helpers
// take a *testing.T.
func startLagBenchNode(b *testing.B) *Node {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, Config{
		NodeID:         1,
		DataDir:        b.TempDir(),
		KafkaAddr:      "127.0.0.1:0",
		ControllerAddr: "127.0.0.1:0",
		HTTPAddr:       "127.0.0.1:0",
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatalf("Start: %v", err)
	}
	b.Cleanup(func() { n.Close() })
	testutil.Eventually(b, 10*time.Second, n.Ready)
	return n
}
