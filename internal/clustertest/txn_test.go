package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 17, the transactional producer on three nodes (franz-go, on the
// path given: Transactions V2 by default, since the nodes finalize
// transaction.version 2, or V1 when its versions are capped below EndTxn
// v5, as a client from before KIP-890 would send; point 4): committed transactions are read once by
// read_committed readers and aborted ones never; read_uncommitted readers
// see both. The transaction coordinator's node is SIGKILLed while a
// transaction is open: the client finds the new coordinator, which loaded
// the transaction from __transaction_state, and its commit holds. A
// second producer with the same transactional id fences the first, whose
// later writes and commit are refused and never become visible.
func (e *env) transactions(t *testing.T, v1 bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic, id := "txn-out-v2", "tx-a-v2"
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...)}
	if v1 {
		topic, id = "txn-out-v1", "tx-a-v1"
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
		opts = append(opts, kgo.MaxVersions(versions))
	}
	const partitions = 3
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)

	newProducer := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(append(opts,
			kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RetryTimeout(60*time.Second),
			kgo.TransactionTimeout(60*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	// txn produces n records with values prefix-i in one transaction and
	// ends it; before, when set, runs between the produces and the end.
	txn := func(cl *kgo.Client, prefix string, n int, commit bool, before func()) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := range n {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("%s: produce %d: %w", prefix, i, err)
			}
		}
		if before != nil {
			before()
		}
		return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	}

	p := newProducer(id)
	if err := txn(p, "c1", 60, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := txn(p, "a1", 40, false, nil); err != nil {
		t.Fatal(err)
	}
	// The coordinator's node dies with the transaction open.
	coord := e.coordinatorOf(t, ctx, 1, id)
	if err := txn(p, "c2", 50, true, func() {
		e.c.Kill(coord)
	}); err != nil {
		t.Fatalf("commit across the coordinator's SIGKILL: %v", err)
	}
	e.c.Start(coord)
	if now := e.coordinatorOf(t, ctx, 1, id); now == coord {
		t.Logf("node %d coordinates %s again after its restart", now, id)
	}

	// Zombie fencing: a new session of tx-a fences p.
	q := newProducer(id)
	if err := txn(q, "c3", 30, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err == nil {
		r := &kgo.Record{Value: []byte("zombie")}
		err = p.ProduceSync(ctx, r).FirstErr()
		if err == nil {
			err = p.EndTransaction(ctx, kgo.TryCommit)
		}
		if err == nil {
			t.Fatal("the fenced producer's transaction committed")
		}
		if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.InvalidProducerIDMapping) {
			t.Logf("the fenced producer was refused with %v", err)
		}
	}

	want := map[string]int{"c1": 60, "c2": 50, "c3": 30}
	committed := e.readTxnTopic(t, ctx, topic, partitions, true)
	for prefix, n := range want {
		if got := committed[prefix]; got != n {
			t.Errorf("read_committed: %d records of %s, want %d (all: %v)", got, prefix, n, committed)
		}
	}
	for prefix, n := range committed {
		if _, ok := want[prefix]; !ok {
			t.Errorf("read_committed: %d records of %s, which was never committed", n, prefix)
		}
	}
	uncommitted := e.readTxnTopic(t, ctx, topic, partitions, false)
	t.Logf("coordinator node %d killed mid-transaction; read_committed read %v, read_uncommitted %v", coord, committed, uncommitted)
	if uncommitted["a1"] != 40 || uncommitted["c1"] != 60 {
		t.Errorf("read_uncommitted: %v, want the aborted a1's 40 records and c1's 60 among them", uncommitted)
	}
}

// readTxnTopic reads topic from the start, read_committed or not
// (readToEnd), and counts the records by value prefix (the part before
// "-").
func (e *env) readTxnTopic(t *testing.T, ctx context.Context, topic string, partitions int32, committed bool) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, r := range e.readToEnd(t, ctx, topic, partitions, committed) {
		prefix, _, _ := strings.Cut(string(r.Value), "-")
		counts[prefix]++
	}
	return counts
}

// readToEnd reads every record of topic from the start, read_committed
// or not, in partition order. It first appends a plain record of value
// "end-" to each partition and reads each partition up to it: past the
// markers, and past every transaction before it.
func (e *env) readToEnd(t *testing.T, ctx context.Context, topic string, partitions int32, committed bool) []*kgo.Record {
	t.Helper()
	w, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for p := range partitions {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("end-")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ended := map[int32]bool{} // the partitions whose end record was read
	for len(ended) < int(partitions) {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if fctx.Err() != nil && fs.NumRecords() == 0 {
			t.Fatalf("reading %s (committed %v): nothing new in 30 s, the end record of %d of %d partitions read (%d records)",
				topic, committed, len(ended), partitions, len(recs))
		}
		for _, err := range fs.Errors() {
			if !errors.Is(err.Err, context.DeadlineExceeded) {
				t.Fatalf("reading %s: %v", topic, err.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case string(r.Value) == "end-":
				ended[r.Partition] = true
			case !ended[r.Partition]:
				recs = append(recs, r)
			}
		})
	}
	return recs
}

// Issue 17, acceptance point 3: a producer that begins a transaction,
// writes, and is never heard from again. Its transaction holds the
// partition's last stable offset (read_committed readers wait) until the
// coordinator aborts it at its timeout (checked every second; Kafka
// checks every 10 s); then the last stable offset passes it (the test
// logs how long it held it), read_committed readers never see its
// records, and read_uncommitted readers do.
func (e *env) abandonedTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions = "txn-abandoned", 1
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)

	// Long enough that the writes below land well inside it even on a
	// loaded machine; the test logs how long the last stable offset was
	// held past it.
	const timeout = 10 * time.Second
	p, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.TransactionalID("tx-abandoned"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "abandoned-%d", i)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	abandoned := time.Now()
	// Meanwhile a plain record after it: read_committed cannot reach it
	// while the transaction is open.
	if err := e.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso := func() (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = 1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, -1
		rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, e.cl)
		if err != nil {
			return 0, err
		}
		got := resp.Topics[0].Partitions[0]
		return got.Offset, kerr.ErrorForCode(got.ErrorCode)
	}
	if o, err := lso(); err != nil || o != 0 {
		t.Fatalf("last stable offset %d (%v) with the transaction open from offset 0", o, err)
	}
	var moved time.Duration
	testutil.Eventually(t, 60*time.Second, func() error {
		o, err := lso()
		if err != nil {
			return err
		}
		if o < 12 { // 10 records, the abort marker, the plain record
			return fmt.Errorf("last stable offset %d", o)
		}
		moved = time.Since(abandoned)
		return nil
	})
	t.Logf("the abandoned transaction (timeout %v) held the last stable offset for %v", timeout, moved.Round(100*time.Millisecond))

	committed := e.readTxnTopic(t, ctx, topic, partitions, true)
	if committed["abandoned"] != 0 || committed["after"] != 1 {
		t.Errorf("read_committed read %v; want the plain record alone", committed)
	}
	if uncommitted := e.readTxnTopic(t, ctx, topic, partitions, false); uncommitted["abandoned"] != 10 {
		t.Errorf("read_uncommitted read %v; want the abandoned transaction's 10 records", uncommitted)
	}
	// The producer learns it at its next commit: its epoch was bumped.
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Error("the abandoned transaction's commit after its abort was accepted")
	}
}
