package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 18, retention overtaking a group: real time retention
// (retention.ms, checked every 100 ms) deletes records a stopped group
// has not read. The group's coordinator counts them once in
// fjord_consumer_group_records_lost_total and logs the gap once; a
// DeleteRecords further past the same commit adds only the difference;
// once the group commits past the gap the count stays. Before that,
// fjord_consumer_group_retention_margin_seconds and
// fjord_partition_retention_margin_seconds say how long the group has.
func TestRetentionGapCounted(t *testing.T) {
	logs := &testutil.Buffer{}
	cfg := testConfig(t, t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.LogRetentionCheckInterval = 100 * time.Millisecond
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	// An hour of retention to begin with: nothing goes yet.
	retention := "3600000"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &retention, "segment.bytes": ptr("1024")}, "r"); err != nil {
		t.Fatal(err)
	}
	// Ten records a minute old, in segments of their own (each batch
	// near segment.bytes), then ten new ones.
	old := time.Now().Add(-time.Minute)
	for i := range 20 {
		ts := old
		if i >= 10 {
			ts = time.Now()
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "r", Partition: 0, Value: make([]byte, 700), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(at int64) {
		t.Helper()
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "r", Partition: 0, At: at, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, "stopped", o); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	commit(3)
	labels := []string{"group=stopped", "topic=r", "partition=0"}
	testutil.Eventually(t, 10*time.Second, func() error {
		m := scrape(t, n)
		group, ok1 := m.Value("fjord_consumer_group_retention_margin_seconds", labels...)
		part, ok2 := m.Value("fjord_partition_retention_margin_seconds", "topic=r", "partition=0")
		// The oldest segment's records are a minute old: an hour less a
		// minute to go, for the partition and for the group at offset 3.
		if !ok1 || !ok2 || group < 3500 || group > 3540 || part < 3500 || part > 3540 {
			return fmt.Errorf("margins: group %v (found %v), partition %v (found %v); want about 3540 s", group, ok1, part, ok2)
		}
		return nil
	})
	if _, ok := scrape(t, n).Value("fjord_consumer_group_records_lost_total", labels...); ok {
		t.Fatal("records lost before any were")
	}

	// Retention of 30 s: the minute-old segments go, the new records
	// stay. The group, at 3, lost the records up to the new log start.
	retention = "30000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, "r"); err != nil {
		t.Fatal(err)
	}
	var start int64
	testutil.Eventually(t, 20*time.Second, func() error {
		m := scrape(t, n)
		start, _ := m.Value("fjord_partition_log_start_offset", "topic=r", "partition=0")
		lost, _ := m.Value("fjord_consumer_group_records_lost_total", labels...)
		if start < 9 || lost != start-3 {
			return fmt.Errorf("log start %v, lost %v: want the minute-old records gone and counted", start, lost)
		}
		return nil
	})
	starts, err := adm.ListStartOffsets(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup("r", 0)
	start = s.Offset
	// Seen again at every refresh, counted once, logged once.
	refreshed := func() {
		t.Helper()
		before := n.lag.Snapshot().At
		testutil.Eventually(t, 10*time.Second, func() error {
			if !n.lag.Snapshot().At.After(before) {
				return fmt.Errorf("no refresh since %v", before)
			}
			return nil
		})
	}
	refreshed()
	refreshed()
	if lost, _ := scrape(t, n).Value("fjord_consumer_group_records_lost_total", labels...); lost != float64(start-3) {
		t.Fatalf("lost %v after more refreshes, want %d", lost, start-3)
	}
	if c := strings.Count(logs.String(), "consumer group fell behind retention"); c != 1 {
		t.Fatalf("the gap was logged %d times, want once", c)
	}

	// DeleteRecords moves the log start 2 further past the same commit:
	// 2 more lost, the same gap (no second log line).
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "r", Partition: 0, At: start + 2})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if lost, _ := scrape(t, n).Value("fjord_consumer_group_records_lost_total", labels...); lost != float64(start+2-3) {
			return fmt.Errorf("lost %v, want %d", lost, start+2-3)
		}
		return nil
	})
	// The group moves on: the count stays.
	commit(start + 2)
	refreshed()
	refreshed()
	if lost, _ := scrape(t, n).Value("fjord_consumer_group_records_lost_total", labels...); lost != float64(start+2-3) {
		t.Fatalf("lost %v after the group moved on, want %d", lost, start+2-3)
	}
	if c := strings.Count(logs.String(), "consumer group fell behind retention"); c != 1 {
		t.Fatalf("logged %d times, want once", c)
	}
}
