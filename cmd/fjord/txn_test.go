package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The transaction commands run in-process against a node of their own
// per test (startGroupNode's, the group commands' harness), so that
// `txn list` shows exactly the test's transactional ids. Transactions
// come from franz-go's transactional producer, and the hanging one from
// a raw Produce of a transactional batch no coordinator knows of, which
// is what a client that skips AddPartitionsToTxn sends.

// txnProducer is a franz-go transactional producer writing to the
// partitions its records name. Its transaction timeout outlasts the
// test, so no coordinator aborts a transaction the test keeps open.
func (n *groupTestNode) txnProducer(t *testing.T, id string) *kgo.Client {
	t.Helper()
	return n.client(t, kgo.TransactionalID(id), kgo.TransactionTimeout(2*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// produceInTxn begins a transaction on cl and writes values to one
// partition, leaving the transaction open.
func produceInTxn(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("producing to %s-%d in a transaction: %v", topic, partition, err)
		}
	}
}

func endTxn(t *testing.T, cl *kgo.Client, commit kgo.TransactionEndTry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.EndTransaction(ctx, commit); err != nil {
		t.Fatalf("ending the transaction: %v", err)
	}
}

// describeTxn describes a transactional id with the test's own client.
func (n *groupTestNode) describeTxn(t *testing.T, id string) kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := n.adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describing transactional id %s: %v", id, err)
	}
	d, err := described.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		t.Fatalf("describing transactional id %s: %v", id, err)
	}
	return d
}

// waitTxnState waits until id's coordinator has it in state.
func (n *groupTestNode) waitTxnState(t *testing.T, id, state string) kadm.DescribedTransaction {
	t.Helper()
	var d kadm.DescribedTransaction
	testutil.Eventually(t, 10*time.Second, func() error {
		if d = n.describeTxn(t, id); d.State != state {
			return fmt.Errorf("transactional id %s is %s, want %s", id, d.State, state)
		}
		return nil
	})
	return d
}

// lastStable lists a partition's last stable offset (ListOffsets latest
// at read_committed) with the test's own client.
func (n *groupTestNode) lastStable(t *testing.T, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := n.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("listing the last stable offsets of %s: %v", topic, err)
	}
	o, ok := listed.Lookup(topic, partition)
	if !ok {
		t.Fatalf("no last stable offset for %s-%d", topic, partition)
	}
	return o.Offset
}

// idempotentProducerID asks for a producer id without a transactional
// id: an idempotent producer's, which no coordinator ever registers.
func (n *groupTestNode) idempotentProducerID(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, n.client(t))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId without a transactional id: %v", err)
	}
	return resp.ProducerID
}

// produceHanging writes values as one transactional batch of producer
// pid at epoch and sequence seq, in a Produce request carrying a
// transactional id no InitProducerId or AddPartitionsToTxn ever named:
// the partition opens a transaction no coordinator knows. It returns
// the batch's base offset.
func (n *groupTestNode) produceHanging(t *testing.T, topic string, partition int32, pid int64, epoch int16, seq int32, values ...string) int64 {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, true
	b := record.NewBuilder(opts)
	for _, v := range values {
		b.Add(nil, []byte(v), nil, time.Now().UnixMilli())
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	id := "never-registered"
	req.TransactionID = &id
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Produce v11: a v12 (Transactions V2) adds its partition to the
	// transaction, verification or not.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	resp, err := req.RequestWith(ctx, n.client(t, kgo.MaxVersions(versions)))
	if err != nil {
		t.Fatalf("producing a transactional batch of producer %d: %v", pid, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce answer %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		if p.ErrorMessage != nil {
			err = kafkaError(err, *p.ErrorMessage)
		}
		t.Fatalf("producing a transactional batch of producer %d (epoch %d, sequence %d) to %s-%d: %v",
			pid, epoch, seq, topic, partition, err)
	}
	return p.BaseOffset
}

// readCommitted reads a partition from its start at read_committed
// until it reads the value last, and returns the values read.
func (n *groupTestNode) readCommitted(t *testing.T, topic string, partition int32, last string) []string {
	t.Helper()
	cl := n.client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for !slices.Contains(got, last) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed consumer of %s-%d read %q, not yet %q", topic, partition, got, last)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// wantStable checks a partition's last stable offset and high watermark.
func (n *groupTestNode) wantStable(t *testing.T, topic string, partition int32, wantLSO, wantHW int64) {
	t.Helper()
	if lso, hw := n.lastStable(t, topic, partition), n.logEnd(t, topic, partition); lso != wantLSO || hw != wantHW {
		t.Fatalf("%s-%d: last stable offset %d, high watermark %d; want %d and %d", topic, partition, lso, hw, wantLSO, wantHW)
	}
}

func wantMatch(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("%s does not match %s:\n%s", what, p, out)
		}
	}
}

func TestTxnListAndDescribe(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "orders", "--partitions", "2")

	// One transaction left open, another id's committed.
	open := n.txnProducer(t, "open-txn")
	produceInTxn(t, open, "orders", 0, "a")
	committed := n.txnProducer(t, "committed-txn")
	produceInTxn(t, committed, "orders", 1, "b")
	endTxn(t, committed, kgo.TryCommit)
	c := n.waitTxnState(t, "committed-txn", "CompleteCommit")
	o := n.describeTxn(t, "open-txn")
	if o.State != "Ongoing" {
		t.Fatalf("open-txn is %s, want Ongoing", o.State)
	}

	r := n.ok(t, "", "txn", "list")
	wantMatch(t, "txn list", r.stdout,
		`(?m)^TRANSACTIONAL-ID\s+COORDINATOR\s+PRODUCER-ID\s+STATE$`,
		fmt.Sprintf(`(?m)^committed-txn\s+1\s+%d\s+CompleteCommit$`, c.ProducerID),
		fmt.Sprintf(`(?m)^open-txn\s+1\s+%d\s+Ongoing$`, o.ProducerID))
	if got := len(strings.Split(strings.TrimSpace(r.stdout), "\n")); got != 3 {
		t.Errorf("txn list has %d lines, want a header and 2 rows:\n%s", got, r.stdout)
	}
	for _, tc := range []struct {
		args       []string
		open, done bool
	}{
		{[]string{"--state", "ongoing"}, true, false},
		{[]string{"--state", "COMPLETECOMMIT,empty"}, false, true},
		{[]string{"--state", "Ongoing", "--state", "CompleteCommit"}, true, true},
		{[]string{"--state", "PrepareAbort"}, false, false},
		{[]string{"--producer-id", fmt.Sprint(c.ProducerID)}, false, true},
		{[]string{"--producer-id", fmt.Sprintf("%d,%d", c.ProducerID, o.ProducerID)}, true, true},
		{[]string{"--producer-id", fmt.Sprint(o.ProducerID), "--state", "CompleteCommit"}, false, false},
	} {
		r := n.ok(t, "", append([]string{"txn", "list"}, tc.args...)...)
		if got := strings.Contains(r.stdout, "open-txn"); got != tc.open {
			t.Errorf("txn list %v lists open-txn: %v, want %v:\n%s", tc.args, got, tc.open, r.stdout)
		}
		if got := strings.Contains(r.stdout, "committed-txn"); got != tc.done {
			t.Errorf("txn list %v lists committed-txn: %v, want %v:\n%s", tc.args, got, tc.done, r.stdout)
		}
	}

	doc := decodeJSON(t, n.ok(t, "", "txn", "list", "-o", "json").stdout)
	wantKeys(t, "txn list", doc, "transactions")
	txns := list(t, doc["transactions"])
	if len(txns) != 2 {
		t.Fatalf("txn list -o json: %v", doc)
	}
	for i, want := range []kadm.DescribedTransaction{c, o} {
		e := wantKeys(t, "transaction", txns[i], "transactional_id", "coordinator", "producer_id", "state")
		if e["transactional_id"] != want.TxnID || number(t, e["coordinator"]) != 1 || number(t, e["producer_id"]) != want.ProducerID || e["state"] != want.State {
			t.Errorf("transaction %d: %v, want %s %d %s", i, e, want.TxnID, want.ProducerID, want.State)
		}
	}

	// describe: what each id's coordinator has.
	r = n.ok(t, "", "txn", "describe", "open-txn", "committed-txn")
	blocks := strings.Split(r.stdout, "\n\n")
	if len(blocks) != 2 {
		t.Fatalf("txn describe of two ids:\n%s", r.stdout)
	}
	// Sorted by id: committed-txn first.
	for i, want := range [][]string{
		{"Transactional id: committed-txn\n", "State: CompleteCommit\n", "Coordinator: 1\n",
			fmt.Sprintf("Producer id: %d\n", c.ProducerID), fmt.Sprintf("Producer epoch: %d\n", c.ProducerEpoch),
			"Timeout: 2m0s\n", "Partitions: -\n"},
		{"Transactional id: open-txn\n", "State: Ongoing\n", "Coordinator: 1\n",
			fmt.Sprintf("Producer id: %d\n", o.ProducerID), fmt.Sprintf("Producer epoch: %d\n", o.ProducerEpoch),
			"Timeout: 2m0s\n", "Partitions: orders:0\n"},
	} {
		for _, w := range want {
			if !strings.Contains(blocks[i]+"\n", w) {
				t.Errorf("describe block %d does not say %q:\n%s", i, w, blocks[i])
			}
		}
		wantMatch(t, "describe block", blocks[i], `(?m)^Started: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\S+ ago\)$`)
	}

	doc = decodeJSON(t, n.ok(t, "", "txn", "describe", "open-txn", "committed-txn", "-o", "json").stdout)
	wantKeys(t, "txn describe", doc, "transactions")
	described := list(t, doc["transactions"])
	if len(described) != 2 {
		t.Fatalf("txn describe -o json: %v", doc)
	}
	for i, want := range []kadm.DescribedTransaction{c, o} {
		d := wantKeys(t, "description", described[i], "transactional_id", "state", "coordinator", "producer_id", "producer_epoch",
			"timeout_ms", "start_time_ms", "partitions")
		if d["transactional_id"] != want.TxnID || d["state"] != want.State || number(t, d["coordinator"]) != 1 ||
			number(t, d["producer_id"]) != want.ProducerID || number(t, d["producer_epoch"]) != int64(want.ProducerEpoch) ||
			number(t, d["timeout_ms"]) != 120000 || number(t, d["start_time_ms"]) != want.StartTimestamp {
			t.Errorf("description %d: %v, want %+v", i, d, want)
		}
	}
	if ps := list(t, described[0].(map[string]any)["partitions"]); len(ps) != 0 {
		t.Errorf("committed-txn has partitions %v, want none", ps)
	}
	ps := list(t, described[1].(map[string]any)["partitions"])
	if len(ps) != 1 {
		t.Fatalf("open-txn has partitions %v, want orders:0", ps)
	}
	p := wantKeys(t, "partitions", ps[0], "topic", "partitions")
	if ns := list(t, p["partitions"]); p["topic"] != "orders" || len(ns) != 1 || number(t, ns[0]) != 0 {
		t.Errorf("open-txn has partitions %v, want orders:0", p)
	}

	// An unknown id is an error, after the known ones are shown.
	r = fjord(t, "", "txn", "describe", "open-txn", "nope", "--brokers", n.brokers)
	if r.code != 1 || !strings.Contains(r.stdout, "Transactional id: open-txn\n") ||
		r.stderr != `fjord: transactional id "nope" does not exist (fjord txn list shows the ids there are)`+"\n" {
		t.Errorf("describe of a known and an unknown id: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := n.fails(t, `transactional ids "gone", "nope" do not exist`, "txn", "describe", "nope", "gone"); r.stdout != "" {
		t.Errorf("describe of unknown ids printed %q", r.stdout)
	}

	// A live transaction is not hanging, however recent: its coordinator
	// has its partition.
	r = n.ok(t, "", "txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0")
	if want := "found 0 hanging transactions in 2 partitions of topic orders (1 open transaction, 1 last written at least 0s ago)\n"; r.stdout != want {
		t.Errorf("find-hanging with a live transaction printed %q, want %q", r.stdout, want)
	}
	endTxn(t, open, kgo.TryAbort)
	n.waitTxnState(t, "open-txn", "CompleteAbort")
	r = n.ok(t, "", "txn", "list", "--state", "CompleteAbort")
	wantMatch(t, "txn list --state CompleteAbort", r.stdout, fmt.Sprintf(`(?m)^open-txn\s+1\s+%d\s+CompleteAbort$`, o.ProducerID))
}

func TestTxnFindHangingAndAbort(t *testing.T) {
	// With KIP-890's verification a partition refuses the batch that
	// would hang; without it (transaction.partition.verification.enable
	// =false, as a cluster from before Kafka 3.6) one can be made.
	n := startGroupNode(t, func(c *node.Config) { c.DisableTxnPartitionVerification = true })
	n.ok(t, "", "topic", "create", "events", "--partitions", "2")
	n.ok(t, "x\ny\n", "produce", "events", "--partition", "1")

	// A live transaction on partition 0, which is not hanging.
	live := n.txnProducer(t, "live")
	produceInTxn(t, live, "events", 0, "l")

	// The hanging one on partition 1: an idempotent producer id, a
	// transactional batch, no coordinator.
	pid := n.idempotentProducerID(t)
	start := n.produceHanging(t, "events", 1, pid, 0, 0, "h1", "h2")
	if start != 2 {
		t.Fatalf("the hanging transaction starts at %d, want 2", start)
	}
	n.wantStable(t, "events", 1, 2, 4)

	// Too recent for the default 15 minutes.
	r := n.ok(t, "", "txn", "find-hanging", "--topic", "events")
	if want := "found 0 hanging transactions in 2 partitions of topic events (2 open transactions, 0 last written at least 15m0s ago)\n"; r.stdout != want {
		t.Errorf("find-hanging printed %q, want %q", r.stdout, want)
	}
	r = n.ok(t, "", "txn", "find-hanging", "--topic", "events", "--max-transaction-timeout", "0s")
	wantMatch(t, "find-hanging", r.stdout,
		`(?m)^TOPIC\s+PARTITION\s+PRODUCER-ID\s+EPOCH\s+COORDINATOR-EPOCH\s+START-OFFSET\s+LAST-TIMESTAMP\s+AGE\s+TRANSACTIONAL-ID$`,
		fmt.Sprintf(`(?m)^events\s+1\s+%d\s+0\s+-1\s+2\s+\d{4}-\S+Z\s+\S+\s+-$`, pid),
		`(?m)^found 1 hanging transaction in 2 partitions of topic events \(2 open transactions, 2 last written at least 0s ago\)$`,
		`(?m)^end each with fjord txn abort, e.g. fjord txn abort --topic events --partition 1 --start-offset 2$`)
	if rows := regexp.MustCompile(`(?m)^events\s`).FindAllString(r.stdout, -1); len(rows) != 1 {
		t.Errorf("find-hanging reports more than the hanging transaction:\n%s", r.stdout)
	}
	r = n.ok(t, "", "txn", "find-hanging", "--topic", "events", "--partition", "0", "--max-transaction-timeout", "0")
	if want := "found 0 hanging transactions in partition 0 of topic events (1 open transaction, 1 last written at least 0s ago)\n"; r.stdout != want {
		t.Errorf("find-hanging --partition 0 printed %q, want %q", r.stdout, want)
	}

	hangingJSON := func(args ...string) map[string]any {
		t.Helper()
		doc := decodeJSON(t, n.ok(t, "", append([]string{"txn", "find-hanging", "--topic", "events", "--max-transaction-timeout", "0", "-o", "json"}, args...)...).stdout)
		wantKeys(t, "find-hanging", doc, "topic", "partition", "partitions_checked", "open_transactions", "checked", "max_transaction_timeout_ms", "hanging")
		return doc
	}
	doc := hangingJSON()
	hanging := list(t, doc["hanging"])
	if doc["topic"] != "events" || doc["partition"] != nil || number(t, doc["partitions_checked"]) != 2 || number(t, doc["open_transactions"]) != 2 ||
		number(t, doc["checked"]) != 2 || number(t, doc["max_transaction_timeout_ms"]) != 0 || len(hanging) != 1 {
		t.Fatalf("find-hanging -o json: %v", doc)
	}
	h := wantKeys(t, "hanging", hanging[0], "topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch",
		"start_offset", "last_timestamp_ms", "age_ms", "transactional_id")
	if h["topic"] != "events" || number(t, h["partition"]) != 1 || number(t, h["producer_id"]) != pid || number(t, h["producer_epoch"]) != 0 ||
		number(t, h["coordinator_epoch"]) != -1 || number(t, h["start_offset"]) != 2 || h["transactional_id"] != nil ||
		number(t, h["age_ms"]) < 0 || number(t, h["last_timestamp_ms"]) <= 0 {
		t.Errorf("hanging transaction %v", h)
	}

	// abort finds the transaction by its start offset, and refuses to
	// write a marker that would end nothing.
	n.fails(t, "no open transaction starts at offset 3 on events-1 (its open transactions start at 2; fjord txn find-hanging --topic events lists the hanging ones)",
		"txn", "abort", "--topic", "events", "--partition", "1", "--start-offset", "3")
	n.fails(t, "producer 999999 has no open transaction on events-1 (its open transactions start at 2): nothing to abort",
		"txn", "abort", "--topic", "events", "--partition", "1", "--producer-id", "999999", "--producer-epoch", "0", "--coordinator-epoch", "0")
	n.wantStable(t, "events", 1, 2, 4)

	// The coordinator epoch DescribeProducers reports is -1 (no marker
	// yet): written as 0.
	r = n.ok(t, "", "txn", "abort", "--topic", "events", "--partition", "1", "--start-offset", "2")
	if want := fmt.Sprintf("aborted the transaction that started at offset 2 on events-1: wrote an abort marker for producer %d (epoch 0, coordinator epoch 0) to the leader, node 1\n", pid); r.stdout != want {
		t.Errorf("abort printed %q, want %q", r.stdout, want)
	}
	// The marker at 4 ends it: read_committed reads up to the end again.
	n.wantStable(t, "events", 1, 5, 5)
	r = n.ok(t, "", "txn", "find-hanging", "--topic", "events", "--max-transaction-timeout", "0")
	if want := "found 0 hanging transactions in 2 partitions of topic events (1 open transaction, 1 last written at least 0s ago)\n"; r.stdout != want {
		t.Errorf("find-hanging after the abort printed %q, want %q", r.stdout, want)
	}

	// The explicit form, and the partition's refusals: a newer
	// coordinator epoch, then a newer producer epoch, than the marker's.
	at := n.produceHanging(t, "events", 1, pid, 0, 2, "h3")
	r = n.ok(t, "", "txn", "abort", "--topic", "events", "--partition", "1",
		"--producer-id", fmt.Sprint(pid), "--producer-epoch", "0", "--coordinator-epoch", "5")
	if want := fmt.Sprintf("aborted the transaction that started at offset %d on events-1: wrote an abort marker for producer %d (epoch 0, coordinator epoch 5) to the leader, node 1\n", at, pid); r.stdout != want {
		t.Errorf("abort printed %q, want %q", r.stdout, want)
	}
	n.produceHanging(t, "events", 1, pid, 0, 3, "h4")
	n.fails(t, fmt.Sprintf("the leader of events-1 refused the abort marker for producer %d (epoch 0, coordinator epoch 0): TRANSACTION_COORDINATOR_FENCED: the partition has a marker of producer %d with a newer coordinator epoch", pid, pid),
		"txn", "abort", "--topic", "events", "--partition", "1",
		"--producer-id", fmt.Sprint(pid), "--producer-epoch", "0", "--coordinator-epoch", "-1")
	n.ok(t, "", "txn", "abort", "--topic", "events", "--partition", "1",
		"--producer-id", fmt.Sprint(pid), "--producer-epoch", "1", "--coordinator-epoch", "5")
	at = n.produceHanging(t, "events", 1, pid, 1, 0, "h5")
	doc = hangingJSON("--partition", "1")
	if hanging := list(t, doc["hanging"]); len(hanging) != 1 || number(t, hanging[0].(map[string]any)["producer_epoch"]) != 1 ||
		number(t, hanging[0].(map[string]any)["coordinator_epoch"]) != 5 || number(t, hanging[0].(map[string]any)["start_offset"]) != at {
		t.Fatalf("find-hanging -o json --partition 1 after epoch 1's batch: %v", doc)
	}
	n.fails(t, fmt.Sprintf("the leader of events-1 refused the abort marker for producer %d (epoch 0, coordinator epoch 5): INVALID_PRODUCER_EPOCH: the partition has a newer epoch of producer %d; --start-offset takes the partition's own", pid, pid),
		"txn", "abort", "--topic", "events", "--partition", "1",
		"--producer-id", fmt.Sprint(pid), "--producer-epoch", "0", "--coordinator-epoch", "5")
	r = n.ok(t, "", "txn", "abort", "--topic", "events", "--partition", "1", "--start-offset", fmt.Sprint(at))
	if want := fmt.Sprintf("aborted the transaction that started at offset %d on events-1: wrote an abort marker for producer %d (epoch 1, coordinator epoch 5) to the leader, node 1\n", at, pid); r.stdout != want {
		t.Errorf("abort printed %q, want %q", r.stdout, want)
	}
	hw := n.logEnd(t, "events", 1)
	n.wantStable(t, "events", 1, hw, hw)
	if doc := hangingJSON(); len(list(t, doc["hanging"])) != 0 {
		t.Errorf("find-hanging after every abort: %v", doc)
	}
	// A read_committed consumer reads past the aborted transactions,
	// none of their records.
	n.ok(t, "z\n", "produce", "events", "--partition", "1")
	if got := n.readCommitted(t, "events", 1, "z"); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Errorf("read_committed consumer of events-1 read %q, want x, y, z", got)
	}

	// The live transaction still holds partition 0 until its producer
	// commits it.
	n.wantStable(t, "events", 0, 0, 1)
	endTxn(t, live, kgo.TryCommit)
	d := n.waitTxnState(t, "live", "CompleteCommit")
	testutil.Eventually(t, 10*time.Second, func() error {
		if lso, hw := n.lastStable(t, "events", 0), n.logEnd(t, "events", 0); lso != 2 || hw != 2 {
			return fmt.Errorf("events-0: last stable offset %d, high watermark %d; want 2 and 2", lso, hw)
		}
		return nil
	})

	// A late produce after its transaction ended (the producer's next
	// sequence, its epoch): hanging, and reported with the transactional
	// id its coordinator has the producer id under.
	at = n.produceHanging(t, "events", 0, d.ProducerID, d.ProducerEpoch, 1, "late")
	r = n.ok(t, "", "txn", "find-hanging", "--topic", "events", "--max-transaction-timeout", "0")
	wantMatch(t, "find-hanging of a late produce", r.stdout,
		fmt.Sprintf(`(?m)^events\s+0\s+%d\s+%d\s+\d+\s+%d\s+\S+\s+\S+\s+live$`, d.ProducerID, d.ProducerEpoch, at),
		`(?m)^found 1 hanging transaction in 2 partitions of topic events`)
	n.ok(t, "", "txn", "abort", "--topic", "events", "--partition", "0", "--start-offset", fmt.Sprint(at))
	hw = n.logEnd(t, "events", 0)
	n.wantStable(t, "events", 0, hw, hw)
	// The coordinator was not told, and needed not be.
	if d := n.describeTxn(t, "live"); d.State != "CompleteCommit" {
		t.Errorf("live is %s after the admin abort, want CompleteCommit", d.State)
	}
}

// The flags are checked before the command connects: against a closed
// port, each fails with its own message, not "cannot reach".
func TestTxnBadFlags(t *testing.T) {
	addr := closedPort(t)
	hanging := []string{"txn", "find-hanging"}
	abort := []string{"txn", "abort", "--topic", "t"}
	abortP := []string{"txn", "abort", "--topic", "t", "--partition", "0"}
	timeoutErr := `for "--max-transaction-timeout" flag: allowed: a duration from 0s to 596h31m23.647s`
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--topic is required: give the topic whose partitions to search", hanging},
		{"--topic is required", slices.Concat(hanging, []string{"--topic", ""})},
		{`invalid argument "-1" for "--partition" flag: allowed: an integer from 0 to 2147483647`, slices.Concat(hanging, []string{"--topic", "t", "--partition", "-1"})},
		{`invalid argument "-1s" ` + timeoutErr, slices.Concat(hanging, []string{"--topic", "t", "--max-transaction-timeout", "-1s"})},
		{`invalid argument "-1" ` + timeoutErr, slices.Concat(hanging, []string{"--topic", "t", "--max-transaction-timeout", "-1"})},
		{`invalid argument "soon" ` + timeoutErr, slices.Concat(hanging, []string{"--topic", "t", "--max-transaction-timeout", "soon"})},
		{`invalid argument "900000" ` + timeoutErr, slices.Concat(hanging, []string{"--topic", "t", "--max-transaction-timeout", "900000"})},
		{`invalid argument "600h" ` + timeoutErr, slices.Concat(hanging, []string{"--topic", "t", "--max-transaction-timeout", "600h"})},
		{"--topic is required: give the topic of the partition holding the transaction", []string{"txn", "abort", "--partition", "0", "--start-offset", "1"}},
		{"--partition is required", slices.Concat(abort, []string{"--start-offset", "1"})},
		{`invalid argument "-1" for "--partition" flag`, slices.Concat(abort, []string{"--partition", "-1", "--start-offset", "1"})},
		{"say which transaction to abort: give --start-offset O (the transaction's first offset, as find-hanging prints it), or --producer-id, --producer-epoch and --coordinator-epoch", abortP},
		{"--start-offset and --producer-id exclude each other", slices.Concat(abortP, []string{"--start-offset", "1", "--producer-id", "2"})},
		{"--producer-id needs --producer-epoch too", slices.Concat(abortP, []string{"--producer-id", "2", "--coordinator-epoch", "0"})},
		{"--producer-id needs --coordinator-epoch too", slices.Concat(abortP, []string{"--producer-id", "2", "--producer-epoch", "0"})},
		{"--producer-epoch goes only with --producer-id, not --start-offset", slices.Concat(abortP, []string{"--start-offset", "1", "--producer-epoch", "0"})},
		{"--producer-epoch and --coordinator-epoch go only with --producer-id:", slices.Concat(abortP, []string{"--producer-epoch", "0", "--coordinator-epoch", "0"})},
		{`invalid argument "-1" for "--start-offset" flag: allowed: an integer from 0`, slices.Concat(abortP, []string{"--start-offset", "-1"})},
		{`invalid argument "-2" for "--producer-id" flag: allowed: an integer from 0`, slices.Concat(abortP, []string{"--producer-id", "-2"})},
		{`invalid argument "40000" for "--producer-epoch" flag: allowed: an integer from 0 to 32767`, slices.Concat(abortP, []string{"--producer-id", "1", "--producer-epoch", "40000"})},
		{`--state "bogus": allowed: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence`, []string{"txn", "list", "--state", "ongoing,bogus"}},
		{`--producer-id "x": allowed: an integer from 0`, []string{"txn", "list", "--producer-id", "x"}},
		{`--producer-id "-1": allowed: an integer from 0`, []string{"txn", "list", "--producer-id", "1,-1"}},
		{"a transactional id is empty", []string{"txn", "describe", "a", ""}},
		{"requires at least 1 arg(s), only received 0", []string{"txn", "describe"}},
	} {
		r := fails(t, tc.want, append(tc.args, "--brokers", addr)...)
		if r.stdout != "" {
			t.Errorf("fjord %s printed %q on stdout", strings.Join(tc.args, " "), r.stdout)
		}
	}

	// Good flags against no node: the one-line "cannot reach".
	want := fmt.Sprintf(`fjord: cannot reach a Fjord node at %s (connection refused); is "fjord serve" running?`+"\n", addr)
	for _, args := range [][]string{
		{"txn", "list"},
		{"txn", "describe", "a"},
		{"txn", "find-hanging", "--topic", "t"},
		{"txn", "abort", "--topic", "t", "--partition", "0", "--start-offset", "1"},
	} {
		if r := fjord(t, "", append(args, "--brokers", addr)...); r.code != 1 || r.stderr != want {
			t.Errorf("fjord %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
}

// What needs the node: topics and partitions that do not exist, and a
// transaction that is not there.
func TestTxnBadInput(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "t", "--partitions", "2")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`topic "nope" does not exist`, []string{"txn", "find-hanging", "--topic", "nope"}},
		{`--partition 2 does not exist: topic t has 2 partitions (0 to 1)`, []string{"txn", "find-hanging", "--topic", "t", "--partition", "2"}},
		{`topic "nope" does not exist`, []string{"txn", "abort", "--topic", "nope", "--partition", "0", "--start-offset", "0"}},
		{`--partition 5 does not exist: topic t has 2 partitions (0 to 1)`, []string{"txn", "abort", "--topic", "t", "--partition", "5", "--start-offset", "0"}},
		{`no open transaction starts at offset 0 on t-0 (it has no open transaction;`, []string{"txn", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0"}},
		{`producer 7 has no open transaction on t-1 (it has no open transaction): nothing to abort`,
			[]string{"txn", "abort", "--topic", "t", "--partition", "1", "--producer-id", "7", "--producer-epoch", "0", "--coordinator-epoch", "-1"}},
		{`transactional id "nope" does not exist`, []string{"txn", "describe", "nope"}},
	} {
		if r := n.fails(t, tc.want, tc.args...); r.stdout != "" {
			t.Errorf("fjord %s printed %q on stdout", strings.Join(tc.args, " "), r.stdout)
		}
	}
	if want := n.logEnd(t, "t", 0) + n.logEnd(t, "t", 1); want != 0 {
		t.Errorf("a failed abort wrote to t: log ends sum to %d", want)
	}
	r := n.ok(t, "", "txn", "list")
	if r.stdout != "TRANSACTIONAL-ID  COORDINATOR  PRODUCER-ID  STATE\n" {
		t.Errorf("txn list with no transactional ids printed %q", r.stdout)
	}
}

// Which open transactions find-hanging reports, case by case: the
// decision, without a node.
func TestTxnHangingDecision(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	open := func(pid int64, ageMs int64) kadm.DescribedProducer {
		return kadm.DescribedProducer{Topic: "t", Partition: 1, ProducerID: pid, CurrentTxnStartOffset: 10, LastTimestamp: now.UnixMilli() - ageMs}
	}
	idle := kadm.DescribedProducer{Topic: "t", Partition: 1, ProducerID: 9, CurrentTxnStartOffset: -1, LastTimestamp: 0}
	producers := []kadm.DescribedProducer{idle, open(1, 60_000), open(2, 20*60_000), open(3, -5_000)}
	for _, tc := range []struct {
		timeout          time.Duration
		open, candidates int
	}{
		{15 * time.Minute, 3, 1},
		{time.Minute, 3, 2},
		{0, 3, 3}, // every open transaction, even one stamped in the future
	} {
		o, c := openTxnCandidates(producers, now, tc.timeout)
		if len(o) != tc.open || len(c) != tc.candidates {
			t.Errorf("timeout %v: %d open, %d candidates; want %d and %d", tc.timeout, len(o), len(c), tc.open, tc.candidates)
		}
	}

	in := func(topic string, p int32) kadm.TopicsSet { s := kadm.TopicsSet{}; s.Add(topic, p); return s }
	txn := func(id string, pid int64, state string, topics kadm.TopicsSet) kadm.DescribedTransaction {
		return kadm.DescribedTransaction{TxnID: id, ProducerID: pid, State: state, Topics: topics}
	}
	for _, tc := range []struct {
		name      string
		described []kadm.DescribedTransaction
		hanging   bool
		id        string
	}{
		{"no coordinator knows the producer id", nil, true, ""},
		{"Ongoing with the partition", []kadm.DescribedTransaction{txn("a", 1, "Ongoing", in("t", 1))}, false, ""},
		{"PrepareCommit awaiting the partition's marker", []kadm.DescribedTransaction{txn("a", 1, "PrepareCommit", in("t", 1))}, false, ""},
		{"PrepareAbort awaiting the partition's marker", []kadm.DescribedTransaction{txn("a", 1, "PrepareAbort", in("t", 1))}, false, ""},
		{"Ongoing without the partition (no AddPartitionsToTxn)", []kadm.DescribedTransaction{txn("a", 1, "Ongoing", in("t", 0))}, true, "a"},
		{"Ongoing with another topic's partition 1", []kadm.DescribedTransaction{txn("a", 1, "Ongoing", in("u", 1))}, true, "a"},
		{"CompleteAbort (a produce after the abort)", []kadm.DescribedTransaction{txn("a", 1, "CompleteAbort", nil)}, true, "a"},
		{"Empty", []kadm.DescribedTransaction{txn("a", 1, "Empty", nil)}, true, "a"},
		{"the id now has another producer id", []kadm.DescribedTransaction{txn("a", 2, "Ongoing", in("t", 1))}, true, ""},
		{"the id is gone since the listing", []kadm.DescribedTransaction{{TxnID: "a", ProducerID: -1, Err: kerr.TransactionalIDNotFound}}, true, ""},
	} {
		got := hangingTransactions([]kadm.DescribedProducer{open(1, 0)}, tc.described)
		if (len(got) == 1) != tc.hanging || len(got) > 1 {
			t.Errorf("%s: hanging %v, want %v", tc.name, got, tc.hanging)
			continue
		}
		if len(got) == 1 && got[0].transactionalID != tc.id {
			t.Errorf("%s: reported with transactional id %q, want %q", tc.name, got[0].transactionalID, tc.id)
		}
	}
}

func TestTxnTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration // -1: refused
	}{
		{"15m", 15 * time.Minute},
		{"15", 15 * time.Minute}, // Kafka's tool: whole minutes
		{"0", 0},
		{"0s", 0},
		{"1ms", time.Millisecond},
		{" 2h ", 2 * time.Hour},
		{"596h31m23.647s", maxTxnTimeout},
		{"35791", 35791 * time.Minute},
		{"596h31m23.648s", -1},
		{"35792", -1},
		{"-1s", -1},
		{"-1", -1},
		{"", -1},
		{"1.5", -1},
		{"PT15M", -1},
	} {
		d := time.Duration(-2)
		err := (&txnTimeoutFlag{&d}).Set(tc.in)
		switch {
		case tc.want < 0 && err == nil:
			t.Errorf("%q: accepted as %v", tc.in, d)
		case tc.want >= 0 && (err != nil || d != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.in, d, err, tc.want)
		}
	}
}
