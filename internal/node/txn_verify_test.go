package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// Transaction verification (KIP-890 part 1) as the node wires it, on
// three nodes: the coordinator of the transactional id runs on one node
// and the data partitions are led by every node, so a leader asks its
// own coordinator in process or another node's over AddPartitionsToTxn
// v4. A produce to a partition that was not added to the transaction is
// refused (INVALID_TXN_STATE for Produce v10, TRANSACTION_ABORTABLE for
// v11) and writes nothing, so no transaction is left open that no
// coordinator would end; a produce to an added one is written; after
// the transaction is aborted, a late produce of it is refused at every
// partition, where before verification it would have opened a hanging
// transaction.
func TestTransactionVerification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startCluster(t, 3)
	_, b := brokerClient(t, nodes[0])
	createTopic(t, ctx, b, "orders", -1, -1, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	createTransactionStateTopic(t, ctx, nodes[0], 3)

	const id = "verified-1"
	leaderOf := func(topic string, p int32) *Node {
		var leader int32 = -1
		testutil.Eventually(t, 10*time.Second, func() error {
			t := nodes[0].ctrl.Image().Topics[topic]
			if leader = t.Partitions[p].Leader; leader < 0 {
				return fmt.Errorf("%s-%d has no leader", topic, p)
			}
			return nil
		})
		return nodes[leader-1]
	}
	coordinator := leaderOf(metadata.TransactionStateTopic, txn.PartitionFor(id, txnstatetopic.DefaultPartitions))
	var pid int64
	var epoch int16
	testutil.Eventually(t, 20*time.Second, func() error {
		var err error
		pid, epoch, err = coordinator.txns.InitProducerID(ctx, id, 60_000, -1, -1)
		return err
	})
	seq := map[int32]int32{}
	// produce sends one transactional record to orders-p at its
	// leader, with the wire's Produce of version, and answers its code.
	produce := func(p int32, version int16) int16 {
		t.Helper()
		opts := record.DefaultBatchOptions()
		opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, epoch, seq[p]
		bld := record.NewBuilder(opts)
		bld.Add([]byte("k"), []byte("v"), nil, time.Now().UnixMilli())
		batch, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		leader := leaderOf("orders", p)
		// The client sends the highest version both sides serve, up to
		// its own maximum: this one's is version.
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(kmsg.Produce.Int16(), version)
		_, lb := brokerClient(t, leader, kgo.MaxVersions(versions))
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		txnID := id
		req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		resp, err := req.RequestWith(ctx, lb)
		if err != nil {
			t.Fatalf("produce to orders-%d: %v", p, err)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			seq[p]++
		}
		return code
	}
	logEnd := func(p int32) int64 {
		t.Helper()
		_, end, err := leaderOf("orders", p).replicas.LogEnd("orders", p)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		var code int16
		if want != nil {
			code = want.Code
		}
		if got != code {
			t.Fatalf("%s: code %d (%v), want %v", what, got, kerr.ErrorForCode(got), want)
		}
	}

	// Only orders-0 is added. Every partition is asked about, on its
	// own leader: one of them shares the coordinator's node.
	if err := coordinator.txns.AddPartitionsToTxn(ctx, id, pid, epoch, []txn.TopicPartition{{Topic: "orders", Partition: 0}}, false); err != nil {
		t.Fatal(err)
	}
	before := [3]int64{logEnd(0), logEnd(1), logEnd(2)}
	expect("orders-1, not added (v10)", produce(1, 10), kerr.InvalidTxnState)
	expect("orders-2, not added (v11)", produce(2, 11), kerr.TransactionAbortable)
	if logEnd(1) != before[1] || logEnd(2) != before[2] {
		t.Fatalf("refused produces wrote: log ends %d, %d, before %d, %d", logEnd(1), logEnd(2), before[1], before[2])
	}
	expect("orders-0, added", produce(0, 11), nil)
	expect("orders-0 again, the transaction open there", produce(0, 11), nil)

	// Aborted: its late produces are refused everywhere, orders-0
	// included, where the marker cleared the open transaction.
	if _, _, err := coordinator.txns.EndTxn(ctx, id, pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		d := coordinator.txns.DescribeTransactions([]string{id})[0]
		if d.State != txn.StateCompleteAbort {
			return fmt.Errorf("transaction %s: %s", id, d.State)
		}
		return nil
	})
	for p := range int32(3) {
		end := logEnd(p)
		expect(fmt.Sprintf("orders-%d after the abort", p), produce(p, 11), kerr.TransactionAbortable)
		if got := logEnd(p); got != end {
			t.Fatalf("orders-%d: a late produce wrote (log end %d -> %d)", p, end, got)
		}
	}
	for p := range int32(3) {
		part, _ := leaderOf("orders", p).replicas.Partition("orders", p)
		testutil.Eventually(t, 10*time.Second, func() error {
			if lso, leo := part.Log().LastStableOffset(), part.Log().LogEndOffset(); lso != leo {
				return fmt.Errorf("orders-%d: last stable offset %d, log end %d: a transaction was left open", p, lso, leo)
			}
			return nil
		})
	}
}
