package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// The transaction coordinator as the node wires it, on one node: once
// __transaction_state exists (created through the node's control plane
// with txnstatetopic.Spec, as FindCoordinator creates it), the node's
// loader loads the partitions it leads; a transaction begun on the
// coordinator and committed ends with the commit marker in the data
// partition's log, written through the node's own listener, and the
// coordinator describing it CompleteCommit.
func TestTransactionCommitWritesMarkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNode(t, testConfig(t, t.TempDir()))
	testutil.Eventually(t, 10*time.Second, n.Ready)
	_, b := brokerClient(t, n)
	createTopic(t, ctx, b, "orders", 2, 1)
	createTransactionStateTopic(t, ctx, n, 1)

	commitTransaction(t, ctx, n, "checkout-1", []txn.TopicPartition{{Topic: "orders", Partition: 1}},
		func(txn.TopicPartition) *Node { return n })

	// The metrics say so: one commit, nothing open, a load that took
	// some time, and no records behind the last stable offset.
	m := scrape(t, n)
	for name, want := range map[string]float64{
		"fjord_transactions_committed_total": 1,
		"fjord_transactions_aborted_total":   0,
		"fjord_transactions_ongoing":         0,
	} {
		if got, ok := m.Value(name); !ok || got != want {
			t.Errorf("%s = %v (reported %v), want %v", name, got, ok, want)
		}
	}
	if got, ok := m.Value("fjord_transaction_coordinator_load_seconds"); !ok || got <= 0 {
		t.Errorf("fjord_transaction_coordinator_load_seconds = %v (reported %v), want a load's time", got, ok)
	}
	if got, ok := m.Value("fjord_partition_last_stable_lag_records", "topic=orders", "partition=1"); !ok || got != 0 {
		t.Errorf("fjord_partition_last_stable_lag_records{orders-1} = %v (reported %v), want 0", got, ok)
	}
}

// The same on three nodes: the coordinator is the leader of the id's
// __transaction_state partition, and its markers reach the leader of
// every partition of the transaction, two of them on other nodes,
// through the peer clients.
func TestClusterTransactionCommitWritesMarkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startCluster(t, 3)
	_, b := brokerClient(t, nodes[0])
	createTopic(t, ctx, b, "orders", -1, -1, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	createTransactionStateTopic(t, ctx, nodes[0], 3)

	const id = "checkout-1"
	byID := func(id int32) *Node { return nodes[id-1] }
	leaderOf := func(tp txn.TopicPartition) *Node {
		var leader int32 = -1
		testutil.Eventually(t, 10*time.Second, func() error {
			t := nodes[0].ctrl.Image().Topics[tp.Topic]
			if leader = t.Partitions[tp.Partition].Leader; leader < 0 {
				return fmt.Errorf("%s-%d has no leader", tp.Topic, tp.Partition)
			}
			return nil
		})
		return byID(leader)
	}
	coordinator := leaderOf(txn.TopicPartition{Topic: metadata.TransactionStateTopic, Partition: txn.PartitionFor(id, txnstatetopic.DefaultPartitions)})
	var parts []txn.TopicPartition
	for p := range int32(3) {
		parts = append(parts, txn.TopicPartition{Topic: "orders", Partition: p})
	}
	commitTransaction(t, ctx, coordinator, id, parts, leaderOf)
}

// createTransactionStateTopic creates __transaction_state through n's
// control plane, as FindCoordinator does on a transactional id's first
// lookup.
func createTransactionStateTopic(t *testing.T, ctx context.Context, n *Node, rf int16) {
	t.Helper()
	res := n.control.CreateTopics(ctx, []controlplane.CreateTopic{txnstatetopic.Spec(txnstatetopic.DefaultPartitions, rf)}, false)
	if err := res[0].Err; err != nil {
		t.Fatalf("creating %s: %v", metadata.TransactionStateTopic, err)
	}
}

// commitTransaction runs transaction id on coordinator's transaction
// coordinator (InitProducerId, AddPartitionsToTxn of parts, a
// transactional batch to each, EndTxn commit) and checks that each
// partition's leader has the commit marker, at the coordinator epoch,
// and that the transaction is described CompleteCommit.
func commitTransaction(t *testing.T, ctx context.Context, coordinator *Node, id string, parts []txn.TopicPartition, leaderOf func(txn.TopicPartition) *Node) {
	t.Helper()
	coord := coordinator.txns
	var (
		pid   int64
		epoch int16
	)
	// NOT_COORDINATOR until the loader has loaded the id's partition
	// (COORDINATOR_LOAD_IN_PROGRESS while it does).
	testutil.Eventually(t, 20*time.Second, func() error {
		var err error
		pid, epoch, err = coord.InitProducerID(ctx, id, 60_000, -1, -1)
		return err
	})
	if err := coord.AddPartitionsToTxn(ctx, id, pid, epoch, parts, false); err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	for _, tp := range parts {
		opts := record.DefaultBatchOptions()
		opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, epoch, 0
		bld := record.NewBuilder(opts)
		bld.Add([]byte("k"), []byte("v"), nil, time.Now().UnixMilli())
		batch, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaderOf(tp).replicas.Append(ctx, tp.Topic, tp.Partition, batch, replica.AcksAll, 10*time.Second); err != nil {
			t.Fatalf("transactional batch to %s-%d: %v", tp.Topic, tp.Partition, err)
		}
	}
	if _, _, err := coord.EndTxn(ctx, id, pid, epoch, true, false); err != nil {
		t.Fatalf("EndTxn: %v", err)
	}

	// EndTxn answers once the PrepareCommit record is written; the
	// markers follow, and the CompleteCommit record once they are all
	// written.
	testutil.Eventually(t, 20*time.Second, func() error {
		d := coord.DescribeTransactions([]string{id})[0]
		if d.Err != nil || d.State != txn.StateCompleteCommit {
			return fmt.Errorf("transaction %+v, want CompleteCommit", d)
		}
		return nil
	})
	statePartition := txn.PartitionFor(id, txnstatetopic.DefaultPartitions)
	coordinatorEpoch := coordinator.ctrl.Image().Topics[metadata.TransactionStateTopic].Partitions[statePartition].LeaderEpoch
	for _, tp := range parts {
		leader := leaderOf(tp)
		if err := commitMarkerIn(logBytes(t, leader, tp.Topic, tp.Partition), pid, epoch, coordinatorEpoch); err != nil {
			t.Errorf("%s-%d on node %d: %v", tp.Topic, tp.Partition, leader.cfg.NodeID, err)
		}
		p, _ := leader.replicas.Partition(tp.Topic, tp.Partition)
		if lso, leo := p.Log().LastStableOffset(), p.Log().LogEndOffset(); lso != leo {
			t.Errorf("%s-%d: last stable offset %d, log end %d: the transaction still holds it", tp.Topic, tp.Partition, lso, leo)
		}
	}
}

// commitMarkerIn finds, in a log's batches, producer pid's commit marker
// at epoch and coordinatorEpoch.
func commitMarkerIn(log []byte, pid int64, epoch int16, coordinatorEpoch int32) error {
	for len(log) > 0 {
		h, err := record.ParseHeader(log)
		if err != nil {
			return err
		}
		batch := log[:h.Size()]
		log = log[h.Size():]
		if !h.IsControl() || h.ProducerID != pid {
			continue
		}
		recs, err := record.Records(batch)
		if err != nil {
			return err
		}
		typ, ce, err := record.ParseEndTxnMarker(&recs[0])
		if err != nil {
			return err
		}
		if typ != record.ControlCommit || h.ProducerEpoch != epoch || ce != coordinatorEpoch {
			return fmt.Errorf("marker %v at producer epoch %d, coordinator epoch %d; want a commit at %d, %d",
				typ, h.ProducerEpoch, ce, epoch, coordinatorEpoch)
		}
		return nil
	}
	return errors.New("no marker of the transaction's producer")
}
