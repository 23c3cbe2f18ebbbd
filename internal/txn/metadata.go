package txn

import (
	"context"
	"sync"
)

// transactionMetadata is one transactional id's state on this coordinator
// (Kafka's TransactionMetadata): its committed values and the transition
// in flight, if any.
type transactionMetadata struct {
	transactionalID string
	// partition is the incarnation of the __transaction_state partition
	// this metadata was loaded or created in. Immutable: a reload makes
	// new metadata.
	partition *txnPartition

	mu struct {
		sync.Mutex
		// cur is the last transit committed to the log (for a new id
		// whose first record is being written: its values at epoch -1).
		cur transit
		// pending is the transition in flight: its record is being
		// appended, or (a Complete*) its markers are being written. At
		// most one. Only the goroutine that set it may clear or change
		// it; other goroutines only compare it with nil.
		pending *transit
		// awaitingMarkers is what DescribeTransactions shows of a
		// Prepare* transaction: the partitions whose markers are not
		// written yet (Kafka's shrinking partition set). Nil when no
		// markers are being sent.
		awaitingMarkers []TopicPartition
		// removed: the id is gone from its partition (expired, its first
		// record failed, or the partition was unloaded). A request that
		// finds it removed looks the id up again.
		removed bool
	}
}

// txnPartition is one incarnation of a __transaction_state partition on
// this node: from a Load to the next Load or Unload of the partition.
type txnPartition struct {
	partition int32
	// coordinatorEpoch is the partition's leader epoch given to Load,
	// carried by every marker.
	coordinatorEpoch int32
	// ctx ends when this incarnation ends (Unload, a new Load, Close):
	// its appends and marker sends stop.
	ctx    context.Context
	cancel context.CancelFunc
	// appends counts the Log.Append calls under way for this
	// incarnation. Add is called only under Coordinator.mu while the
	// incarnation owns the partition, so once it is replaced, Wait sees
	// every append that will ever be counted.
	appends sync.WaitGroup

	// Guarded by Coordinator.mu.
	loading bool
	txns    map[string]*transactionMetadata
}

func newTxnPartition(parent context.Context, p, coordinatorEpoch int32) *txnPartition {
	ps := &txnPartition{partition: p, coordinatorEpoch: coordinatorEpoch, loading: true}
	ps.ctx, ps.cancel = context.WithCancel(parent)
	return ps
}

// newTransactionMetadata returns metadata holding cur, in ps.
func newTransactionMetadata(id string, ps *txnPartition, cur transit) *transactionMetadata {
	m := &transactionMetadata{transactionalID: id, partition: ps}
	m.mu.cur = cur
	return m
}
