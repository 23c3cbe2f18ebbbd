package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/poison"
)

// `fjord dlq list` and `fjord dlq replay` against a node of the test's
// own (group_test.go), over dead letters written as poison.DeadLetter
// writes them.

// deadLetters writes, for each record of src named by at (partition and
// offset), its dead letter to partition dlqPartition[i] of dlq.
func (n *groupTestNode) deadLetters(t *testing.T, src []*kgo.Record, dlq string, dlqPartitions []int32, reason string) {
	t.Helper()
	cl := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, rec := range src {
		dl := poison.DeadLetter(rec, dlq, "billing", reason, 3)
		dl.Partition = dlqPartitions[i]
		if err := cl.ProduceSync(ctx, dl).FirstErr(); err != nil {
			t.Fatalf("writing a dead letter to %s: %v", dlq, err)
		}
	}
}

// produceRecords writes records, each to its own topic and partition.
func (n *groupTestNode) produceRecords(t *testing.T, records ...*kgo.Record) {
	t.Helper()
	cl := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// Issue 18, point 1's `dlq list` and `dlq replay`: each dead letter is
// listed with its origin, and replayed to it once, across runs.
func TestDLQListAndReplay(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "src", "--partitions", "2")
	n.ok(t, "", "topic", "create", "src.dlq", "--partitions", "2")
	ts := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	n.produceRecords(t,
		&kgo.Record{Topic: "src", Partition: 0, Key: []byte("k0"), Value: []byte("v0"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("a=1")}}},
		&kgo.Record{Topic: "src", Partition: 0, Key: nil, Value: []byte("line\n\xff"), Timestamp: ts},
		&kgo.Record{Topic: "src", Partition: 1, Key: []byte("k2"), Value: []byte("v2"), Timestamp: ts},
	)
	src := n.readTopic(t, "src")
	// src 0/0 -> src.dlq 0/0, src 0/1 -> src.dlq 1/0, src 1/0 -> src.dlq 0/1.
	n.deadLetters(t, src, "src.dlq", []int32{0, 1, 0}, "cannot parse")

	// list: by partition and offset, each with its origin.
	r := n.ok(t, "", "dlq", "list", "src.dlq")
	stamp := formatMillis(ts.UnixMilli())
	want := "src.dlq partition 0 offset 0\n" +
		"  origin:   src partition 0 offset 0, timestamp " + stamp + "\n" +
		"  group:    billing (3 attempts)\n" +
		"  reason:   cannot parse\n" +
		"  key:      k0\n" +
		"  value:    v0\n" +
		"  headers:  trace=a\\x3d1\n\n" +
		"src.dlq partition 0 offset 1\n" +
		"  origin:   src partition 1 offset 0, timestamp " + stamp + "\n" +
		"  group:    billing (3 attempts)\n" +
		"  reason:   cannot parse\n" +
		"  key:      k2\n" +
		"  value:    v2\n" +
		"  headers:  -\n\n" +
		"src.dlq partition 1 offset 0\n" +
		"  origin:   src partition 0 offset 1, timestamp " + stamp + "\n" +
		"  group:    billing (3 attempts)\n" +
		"  reason:   cannot parse\n" +
		"  key:      -\n" +
		"  value:    line\\x0a\\xff\n" +
		"  headers:  -\n\n" +
		"listed 3 records of src.dlq\n"
	if r.stdout != want {
		t.Errorf("dlq list printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r := n.ok(t, "", "dlq", "list", "src.dlq", "--max", "1"); !strings.HasPrefix(r.stdout, "src.dlq partition 0 offset 0\n") ||
		strings.Count(r.stdout, "origin:") != 1 || !strings.HasSuffix(r.stdout, "listed 1 record of src.dlq (--max 1: more may follow)\n") {
		t.Errorf("dlq list --max 1:\n%s", r.stdout)
	}
	doc := decodeJSON(t, n.ok(t, "", "dlq", "list", "src.dlq", "-o", "json").stdout)
	wantKeys(t, "dlq list", doc, "topic", "records")
	records := list(t, doc["records"])
	if doc["topic"] != "src.dlq" || len(records) != 3 {
		t.Fatalf("dlq list -o json: %v", doc)
	}
	fields := []string{"partition", "offset", "timestamp_ms", "origin", "key", "key_b64", "value", "value_b64", "headers"}
	first := wantKeys(t, "record", records[0], fields...)
	o := wantKeys(t, "origin", first["origin"], "topic", "partition", "offset", "timestamp_ms", "group", "reason", "attempts")
	if o["topic"] != "src" || number(t, o["partition"]) != 0 || number(t, o["offset"]) != 0 || number(t, o["timestamp_ms"]) != ts.UnixMilli() ||
		o["group"] != "billing" || o["reason"] != "cannot parse" || number(t, o["attempts"]) != 3 {
		t.Errorf("origin %v", o)
	}
	headers := list(t, first["headers"])
	if first["key"] != "k0" || first["key_b64"] != "azA=" || first["value"] != "v0" || first["value_b64"] != "djA=" || len(headers) != 1 {
		t.Errorf("record %v", first)
	}
	if h := wantKeys(t, "header", headers[0], "key", "value", "value_b64"); h["key"] != "trace" || h["value"] != "a=1" || h["value_b64"] != "YT0x" {
		t.Errorf("header %v", h)
	}
	// No key; a value that is not UTF-8: text null, bytes in base64.
	if third := wantKeys(t, "record", records[2], fields...); third["key"] != nil || third["key_b64"] != nil || third["value"] != nil || third["value_b64"] != "bGluZQr/" {
		t.Errorf("record without a key, value not UTF-8: %v", third)
	}

	// replay: each record to its origin, once.
	r = n.ok(t, "", "dlq", "replay", "src.dlq")
	if r.stdout != "replayed 3 records of src.dlq to their origin topics\n" {
		t.Errorf("replay printed %q", r.stdout)
	}
	wantReplayed := func(topic string, originals int, want map[string]*kgo.Record) {
		t.Helper()
		got := n.readTopic(t, topic)
		if len(got) != originals+len(want) {
			t.Fatalf("%s holds %d records, want %d and %d replayed", topic, len(got), originals, len(want))
		}
		seen := map[string]bool{}
		for _, rec := range got {
			from, ok := header(rec, poison.HeaderReplayed)
			if !ok {
				continue
			}
			orig := want[from]
			if orig == nil || seen[from] {
				t.Errorf("%s-%d@%d replayed from %s: not wanted, or twice", topic, rec.Partition, rec.Offset, from)
				continue
			}
			seen[from] = true
			var others []string
			for _, h := range rec.Headers {
				if strings.HasPrefix(h.Key, "fjord.dlq.") && h.Key != poison.HeaderReplayed {
					t.Errorf("replayed record keeps %s", h.Key)
				}
				others = append(others, h.Key+"="+string(h.Value))
			}
			wantHeaders := []string{}
			for _, h := range orig.Headers {
				wantHeaders = append(wantHeaders, h.Key+"="+string(h.Value))
			}
			wantHeaders = append(wantHeaders, poison.HeaderReplayed+"="+from)
			if string(rec.Key) != string(orig.Key) || string(rec.Value) != string(orig.Value) || !rec.Timestamp.Equal(orig.Timestamp) ||
				fmt.Sprint(others) != fmt.Sprint(wantHeaders) {
				t.Errorf("replayed from %s: %q=%q at %v with %q; want %q=%q at %v with %q", from, rec.Key, rec.Value, rec.Timestamp, others,
					orig.Key, orig.Value, orig.Timestamp, wantHeaders)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%s: replayed %d of %d", topic, len(seen), len(want))
		}
	}
	replayed := map[string]*kgo.Record{"src.dlq/0/0": src[0], "src.dlq/1/0": src[1], "src.dlq/0/1": src[2]}
	wantReplayed("src", 3, replayed)
	n.wantCommitted(t, "fjord-dlq-replay.src.dlq", map[topicPartition]int64{tp("src.dlq", 0): 2, tp("src.dlq", 1): 1})

	// A second run replays nothing: the group is at the end.
	r = n.ok(t, "", "dlq", "replay", "src.dlq")
	if r.stdout != "replayed 0 records of src.dlq: nothing new (consumer group fjord-dlq-replay.src.dlq is at its end)\n" {
		t.Errorf("second replay printed %q", r.stdout)
	}
	wantReplayed("src", 3, replayed)

	// New dead letters are replayed by the next run; two copies of one
	// origin (a dead-letter write repeated after a crash) once.
	n.deadLetters(t, src[:1], "src.dlq", []int32{1}, "again")
	n.deadLetters(t, src[:1], "src.dlq", []int32{0}, "again")
	r = n.ok(t, "", "dlq", "replay", "src.dlq")
	if want := "replayed 1 record of src.dlq to their origin topics\nskipped 1 duplicate: dead-letter copies of records this run replayed already\n"; r.stdout != want {
		t.Errorf("third replay printed %q, want %q", r.stdout, want)
	}
	got := n.readTopic(t, "src")
	if len(got) != 7 {
		t.Fatalf("src holds %d records after the third replay, want 7", len(got))
	}
	n.wantCommitted(t, "fjord-dlq-replay.src.dlq", map[topicPartition]int64{tp("src.dlq", 0): 3, tp("src.dlq", 1): 2})

	// Records with no origin: refused without --to, nothing written,
	// and the group untouched; with --to, replayed there.
	n.ok(t, "", "topic", "create", "other.dlq", "--partitions", "1")
	n.ok(t, "", "topic", "create", "retry", "--partitions", "1")
	n.ok(t, "x\ny\n", "produce", "other.dlq", "--header", "h=1")
	srcEnd := len(n.readTopic(t, "src"))
	for _, c := range []struct{ want, args string }{
		{"2 of the 2 records of other.dlq to replay have no origin headers (fjord.dlq.topic, fjord.dlq.partition, fjord.dlq.offset; not written by Fjord's dead-lettering): give --to TOPIC to replay them there; nothing replayed",
			"dlq replay other.dlq"},
		{"--to other.dlq is the dead-letter topic itself: its records would be read again by the next replay", "dlq replay other.dlq --to other.dlq"},
		{`topic "nope.dlq" does not exist`, "dlq replay nope.dlq"},
		{`topic "nope.dlq" does not exist`, "dlq list nope.dlq"},
		{`topic "nope" does not exist`, "dlq replay other.dlq --to nope"},
		{"--to is empty: give the topic to replay to", "dlq replay other.dlq --to="},
		{`invalid argument "-1" for "--max" flag`, "dlq list other.dlq --max -1"},
	} {
		if r := n.fails(t, c.want, strings.Split(c.args, " ")...); r.stdout != "" {
			t.Errorf("fjord %s printed %q", c.args, r.stdout)
		}
	}
	n.wantCommitted(t, "fjord-dlq-replay.other.dlq", map[topicPartition]int64{})
	if got := n.readTopic(t, "retry"); len(got) != 0 || len(n.readTopic(t, "src")) != srcEnd {
		t.Errorf("refused replays wrote: retry holds %d records", len(got))
	}
	if r := n.ok(t, "", "dlq", "replay", "other.dlq", "--to", "retry"); r.stdout != "replayed 2 records of other.dlq to retry\n" {
		t.Errorf("replay --to printed %q", r.stdout)
	}
	dlq := n.readTopic(t, "other.dlq")
	wantReplayed("retry", 0, map[string]*kgo.Record{"other.dlq/0/0": dlq[0], "other.dlq/0/1": dlq[1]})
	if r := n.ok(t, "", "dlq", "replay", "other.dlq", "--to", "retry"); !strings.HasPrefix(r.stdout, "replayed 0 records of other.dlq: nothing new") {
		t.Errorf("second replay --to printed %q", r.stdout)
	}

	// An origin topic that is gone: refused, nothing written.
	n.ok(t, "", "topic", "create", "gone.dlq")
	n.deadLetters(t, []*kgo.Record{{Topic: "gone", Partition: 0, Offset: 5, Value: []byte("z"), Timestamp: ts}}, "gone.dlq", []int32{0}, "r")
	n.fails(t, `the origin topic "gone" of 1 record of gone.dlq does not exist: create it, or give --to TOPIC to replay them elsewhere; nothing replayed`,
		"dlq", "replay", "gone.dlq")
	n.wantCommitted(t, "fjord-dlq-replay.gone.dlq", map[topicPartition]int64{})
	if n.hasTopic(t, "gone") {
		t.Errorf("a refused replay created its origin topic")
	}
}

// A replay that died mid-transaction, after writing a record and the
// group's offsets and before ending it, leaves the offsets pending
// (UNSTABLE_OFFSET_COMMIT) and its record undecided. The next run fences
// it at once (not after its transaction timeout), its writes are
// aborted, and each record is replayed once.
func TestDLQReplayAfterDeadRun(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "src", "--partitions", "1")
	n.ok(t, "", "topic", "create", "src.dlq", "--partitions", "2")
	n.ok(t, "a\nb\nc\n", "produce", "src")
	src := n.readTopic(t, "src")
	n.deadLetters(t, src, "src.dlq", []int32{0, 1, 0}, "cannot parse")

	// The dead run, as Kafka 3.0's clients speak (AddOffsetsToTxn, then
	// TxnOffsetCommit): a replayed record and the group's offsets, in a
	// transaction that outlives the test unless fenced.
	const group = "fjord-dlq-replay.src.dlq"
	dead := n.client(t, kgo.TransactionalID(group), kgo.TransactionTimeout(5*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(kversion.V3_0_0()))
	produceInTxn(t, dead, "src", 0, "written by the dead run")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, epoch, err := dead.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = group, id, epoch, group
	if resp, err := add.RequestWith(ctx, dead); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = group, group, id, epoch, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "src.dlq"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 1, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(ctx, dead); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %v", err, resp)
	}
	n.wantCommitted(t, group, map[topicPartition]int64{}) // pending: not seen

	start := time.Now()
	if r := n.ok(t, "", "dlq", "replay", "src.dlq"); r.stdout != "replayed 3 records of src.dlq to their origin topics\n" {
		t.Errorf("replay printed %q", r.stdout)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("replay took %v: it waited for the dead run's transaction to time out", d)
	}
	// read_committed: the dead run's record was aborted.
	var values []string
	for _, r := range n.readTopic(t, "src") {
		values = append(values, string(r.Value))
	}
	if len(values) > 3 {
		slices.Sort(values[3:]) // the replay's order across partitions is the fetches'
	}
	if !slices.Equal(values, []string{"a", "b", "c", "a", "b", "c"}) {
		t.Errorf("src holds %q: want a, b, c, then each once more", values)
	}
	n.wantCommitted(t, group, map[topicPartition]int64{tp("src.dlq", 0): 2, tp("src.dlq", 1): 1})
}
