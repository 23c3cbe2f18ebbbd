package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

func scrape(t *testing.T, n *Node) testutil.Metrics {
	t.Helper()
	return testutil.Scrape(t, nil, "http://"+n.HTTPAddr().String()+"/metrics")
}

// The data metrics follow traffic exactly: records and bytes in as
// produced, out as fetched (through sendfile for the first, large fetch
// and copied for the small one after), fsyncs as acknowledged writes
// need them, and a group's lag as the high watermark less its commits.
// A deleted topic's series go.
func TestDataMetrics(t *testing.T) {
	testStart := time.Now()
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, n, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // batches as large as their values
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, n)
	fsyncsBefore, _ := before.Value("fjord_log_flush_duration_seconds")

	produce := func(count int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range count {
			recs = append(recs, &kgo.Record{Topic: "m", Partition: 0, Value: []byte(fmt.Sprintf("%0100d", i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Over 64 KiB of batches, so the first fetch answers with a file
	// range (sendfile), and the later small one with copied bytes.
	const first, second = 2000, 10
	for range 4 {
		produce(first / 4)
	}
	consumer := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"m": {0: kgo.NewOffset().AtStart()}}))
	consumed := 0
	poll := func(want int) {
		t.Helper()
		for consumed < want {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			consumed += fs.NumRecords()
		}
	}
	poll(first)
	produce(second)
	poll(first + second)

	// commit 500 of partition 0, and 0 of partition 1 (empty): lag 1510.
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "m", Partition: 0, At: 500, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: "m", Partition: 1, At: 0, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "billing", commits); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	// An error code in a response is counted by API and name.
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "m"); err == nil && resp.Err == nil {
		t.Fatal("created m twice")
	}

	var after testutil.Metrics
	// The fetch counters move when the response is built; the consumer
	// has the records by then, so one scrape suffices for them. Lag needs
	// the commit, which is synchronous too.
	after = scrape(t, n)
	recordsIn, _ := after.Value("fjord_topic_records_in_total", "topic=m")
	recordsOut, _ := after.Value("fjord_topic_records_out_total", "topic=m")
	bytesIn, _ := after.Value("fjord_topic_bytes_in_total", "topic=m")
	bytesOut, _ := after.Value("fjord_topic_bytes_out_total", "topic=m")
	if recordsIn != first+second || recordsOut != first+second {
		t.Errorf("records in %v, out %v; want %d each", recordsIn, recordsOut, first+second)
	}
	// Every batch was fetched once, from its start: bytes out are bytes
	// in. Both are at least the values' bytes.
	if bytesIn < 100*(first+second) || bytesOut != bytesIn {
		t.Errorf("bytes in %v, out %v; want equal and at least %d", bytesIn, bytesOut, 100*(first+second))
	}
	if fsyncs, _ := after.Value("fjord_log_flush_duration_seconds"); fsyncs <= fsyncsBefore {
		t.Errorf("fsync observations %v before the writes, %v after", fsyncsBefore, fsyncs)
	}
	// Lag comes from the coordinator's lag refresher, within a second.
	testutil.Eventually(t, 10*time.Second, func() error {
		m := scrape(t, n)
		want := map[string]float64{"topic": first + second - 500, "0": first + second - 500, "1": 0}
		if lag, ok := m.Value("fjord_consumer_group_lag", "group=billing", "topic=m"); !ok || lag != want["topic"] {
			return fmt.Errorf("lag of billing on m: %v (found %v), want %v", lag, ok, want["topic"])
		}
		for _, p := range []string{"0", "1"} {
			if lag, ok := m.Value("fjord_consumer_group_lag_records", "group=billing", "topic=m", "partition="+p); !ok || lag != want[p] {
				return fmt.Errorf("lag of billing on m-%s: %v (found %v), want %v", p, lag, ok, want[p])
			}
		}
		return nil
	})
	lagged := scrape(t, n)
	// Partition 0's unconsumed 1,510 records of 100-byte values are
	// more than 151,000 bytes of log and less than all of it; they were
	// produced within this test. Partition 1 is empty: nothing to lag.
	bytes0, _ := lagged.Value("fjord_consumer_group_lag_bytes", "group=billing", "topic=m", "partition=0")
	secs0, _ := lagged.Value("fjord_consumer_group_lag_seconds", "group=billing", "topic=m", "partition=0")
	bytes1, ok1 := lagged.Value("fjord_consumer_group_lag_bytes", "group=billing", "topic=m", "partition=1")
	secs1, _ := lagged.Value("fjord_consumer_group_lag_seconds", "group=billing", "topic=m", "partition=1")
	if bytes0 < 100*(first+second-500) || bytes0 >= bytesIn {
		t.Errorf("lag bytes of m-0: %v, want at least %d and less than the %v bytes in", bytes0, 100*(first+second-500), bytesIn)
	}
	if secs0 < 0 || secs0 > time.Since(testStart).Seconds() {
		t.Errorf("lag seconds of m-0: %v, want between 0 and the test's %v s", secs0, time.Since(testStart).Seconds())
	}
	if !ok1 || bytes1 != 0 || secs1 != 0 {
		t.Errorf("lag of the empty m-1: %v bytes (found %v), %v s; want 0 and 0", bytes1, ok1, secs1)
	}
	if n, ok := after.Value("fjord_kafka_errors_total", "api=CreateTopics", "error=TOPIC_ALREADY_EXISTS"); !ok || n != 1 {
		t.Errorf("CreateTopics TOPIC_ALREADY_EXISTS counted %v times (found %v), want 1", n, ok)
	}
	// The scrape's own connection, at least.
	if conns, ok := after.Value("fjord_http_connections"); !ok || conns < 1 {
		t.Errorf("HTTP connections %v (found %v) during a scrape", conns, ok)
	}
	if conns, ok := after.Value("fjord_kafka_connections"); !ok || conns < 2 {
		t.Errorf("Kafka connections %v (found %v) with a producer and a consumer open", conns, ok)
	}
	if dropped, ok := after.Value("fjord_consumer_group_lag_series_dropped"); !ok || dropped != 0 {
		t.Errorf("lag series dropped: %v (found %v)", dropped, ok)
	}

	// Deleting the topic drops its series (and its partitions' logs, so
	// their lag goes too).
	if _, err := adm.DeleteTopic(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		fams := scrape(t, n)
		var left []string
		for _, f := range []string{"fjord_topic_records_in_total", "fjord_topic_bytes_out_total", "fjord_consumer_group_lag", "fjord_partition_high_watermark"} {
			if _, ok := fams.Value(f, "topic=m"); ok {
				left = append(left, f)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("series of the deleted topic remain: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// The lag families keep to their bound on series and say how many they
// left out.
func TestLagSeriesBound(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, n))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	const groups = 5
	for i := range groups {
		commits := kadm.Offsets{}
		commits.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("g%d", i), commits); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if rows := len(n.lag.Snapshot().Rows); rows != groups {
			return fmt.Errorf("%d lag rows, want %d", rows, groups)
		}
		return nil
	})
	var s textScrape
	textCollector{lag: n.lag.Snapshot, maxLagRows: 3}.read(&s, time.Now())
	body, err := s.appendExposition(nil, nil, textFamilies, expfmt.NewFormat(expfmt.TypeTextPlain), nil)
	if err != nil {
		t.Fatal(err)
	}
	fams := parseExposition(t, body)
	rows := len(fams["fjord_consumer_group_lag_records"].GetMetric())
	sums := len(fams["fjord_consumer_group_lag"].GetMetric())
	dropped := -1.0
	if m := fams["fjord_consumer_group_lag_series_dropped"].GetMetric(); len(m) == 1 {
		dropped = m[0].GetGauge().GetValue()
	}
	if rows != 3 || sums != 3 || dropped != groups-3 {
		t.Fatalf("%d lag rows, %d sums and %v dropped; want 3, 3 and %d", rows, sums, dropped, groups-3)
	}
}
