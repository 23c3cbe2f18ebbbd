package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 17, acceptance point 5, on one node: a compacted topic written
// by committed and aborted transactions keeps, once the cleaner has run,
// exactly the newest committed value of each key, and no reader sees an
// aborted record, read_committed or not; a topic under time retention
// drops whole old segments with their transactions, and what is left
// reads the same way, the last stable offset not held by anything gone.
// Every batch is a segment of its own (segment.bytes 128), so the cleaner
// and retention reach all but the last.
func TestTransactionsUnderCompactionAndRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNode(t, testConfig(t, t.TempDir()))
	testutil.Eventually(t, 10*time.Second, n.Ready)
	adm := kadm.NewClient(newClient(t, n))
	small := "128"
	for topic, configs := range map[string]map[string]*string{
		"ledger": {"cleanup.policy": ptr("compact"), "segment.bytes": &small, "min.cleanable.dirty.ratio": ptr("0.01")},
		"events": {"cleanup.policy": ptr("delete"), "segment.bytes": &small, "retention.ms": ptr("-1")},
	} {
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	p := newClient(t, n, kgo.TransactionalID("cleaning"), kgo.TransactionTimeout(30*time.Second))
	txn := func(topic, value string, keys int, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := range keys {
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: []byte(value)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	// Compaction.
	txn("ledger", "c1", 6, true)
	txn("ledger", "a2", 6, false)
	txn("ledger", "c3", 3, true)
	txn("ledger", "a4", 3, false)
	plain := newClient(t, n)
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "ledger", Key: []byte("last"), Value: []byte("p5")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k0": "c3", "k1": "c3", "k2": "c3", "k3": "c1", "k4": "c1", "k5": "c1", "last": "p5"}
	log := n.storage
	testutil.Eventually(t, 20*time.Second, func() error {
		if _, err := log.CleanOnce(); err != nil {
			return err
		}
		for _, committed := range []bool{true, false} {
			got := readAll(t, ctx, n, "ledger", committed)
			if !maps.Equal(lastByKey(got), want) || len(got) != len(want) {
				return fmt.Errorf("read_committed %v after cleaning: %v, want exactly %v", committed, got, want)
			}
		}
		return nil
	})

	// Retention: once every segment is older than retention.ms, all go,
	// the active one too (rolled first, as Kafka does), transactions and
	// markers with them: nothing is left to hold the last stable
	// offset, and a record written after is all any reader sees.
	txn("events", "c1", 4, true)
	txn("events", "a2", 4, false)
	txn("events", "c3", 2, true)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("1")}}, "events"); err != nil {
		t.Fatal(err)
	}
	var l *storage.Log
	testutil.Eventually(t, 20*time.Second, func() error {
		log.ApplyRetention()
		var ok bool
		if l, ok = log.Log(storage.TopicPartition{Topic: "events", Partition: 0}); !ok {
			return errors.New("no log of events-0")
		}
		if start, end := l.LogStartOffset(), l.LogEndOffset(); start != end {
			return fmt.Errorf("events-0 still holds offsets %d..%d", start, end-1)
		}
		return nil
	})
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw {
		t.Fatalf("events-0 after retention: last stable offset %d, high watermark %d", lso, hw)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("-1")}}, "events"); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "events", Key: []byte("after"), Value: []byte("p4")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, committed := range []bool{true, false} {
		if got := readAll(t, ctx, n, "events", committed); len(got) != 1 || got[0] != [2]string{"after", "p4"} {
			t.Fatalf("read_committed %v after retention: %v, want the record written after only", committed, got)
		}
	}
}

func ptr(s string) *string { return &s }

// readAll reads every record of topic's partition 0, up to its high
// watermark, read_committed or not, as key and value pairs in order.
func readAll(t *testing.T, ctx context.Context, n *Node, topic string, committed bool) [][2]string {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	adm := kadm.NewClient(newClient(t, n))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level))
	defer cl.Close()
	var out [][2]string
	for {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(fctx)
		timedOut := fctx.Err() != nil
		cancel()
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, [2]string{string(r.Key), string(r.Value)})
			done = done || r.Offset+1 >= end.Offset
		})
		if done || timedOut {
			return out
		}
	}
}

// lastByKey is each key's last value in recs.
func lastByKey(recs [][2]string) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		m[r[0]] = r[1]
	}
	return m
}
