package txn

// AddPartitionsToTxn: coordinator side of v0-5 (C§5.3, C§5.4);
// AddOffsetsToTxn: v0-4 (C§6.1)
//
// Adds partitions to the producer's transaction, starting it (Ongoing)
// if there was none: the timeout counts from this first add. v0-3 come
// from clients (Transactions V1), v4+ from partition leaders: without
// VerifyOnly for a Produce v12+ or TxnOffsetCommit v5 batch (Transactions
// V2's implicit add, before the data is appended), with VerifyOnly for an
// older one (KIP-890 part 1: is the partition in the transaction?).
// AddOffsetsToTxn adds the consumer group's __consumer_offsets partition,
// always as V1 (only V1 clients send it).
//
// Checks, in order: an empty id (INVALID_REQUEST); the partition loaded
// here (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); an unknown id
// (INVALID_PRODUCER_ID_MAPPING); a transition in flight
// (CONCURRENT_TRANSACTIONS: checked first, KAFKA-18660); another producer
// id (INVALID_PRODUCER_ID_MAPPING); another epoch, older or newer
// (PRODUCER_FENCED); Prepare* (CONCURRENT_TRANSACTIONS). Then partitions
// all in the Ongoing transaction already are answered at once, with no
// write; others are written as an Ongoing record first.
//
// The coordinator's one error is every partition's: checks of single
// partitions (authorization, unknown topics, internal topics, and
// OPERATION_NOT_ATTEMPTED for the rest) are the protocol layer's, made
// before anything reaches here.

import (
	"context"
)

// AddPartitionsToTxn adds partitions to the transaction of
// transactionalID, whose producer is (producerID, producerEpoch). tv2:
// the request is a partition leader's v4+ (Transactions V2); false for a
// client's v0-3. A request whose ctx has ended starts no write; one that
// started is not cancelled by it.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, partitions []TopicPartition, tv2 bool) error {
	if transactionalID == "" || !validPartitions(partitions) {
		return ErrInvalidRequest
	}
	if ctx.Err() != nil {
		return ErrCoordinatorNotAvailable
	}
	_, m, err := c.lockMetadata(transactionalID)
	if err != nil {
		return err
	}
	if m == nil {
		return ErrInvalidProducerIDMapping
	}
	cur := m.mu.cur
	added := partitionSet(partitions)
	switch {
	case m.mu.pending != nil:
		err = ErrConcurrentTransactions
	case producerID != cur.producerID:
		err = ErrInvalidProducerIDMapping
	case producerEpoch != cur.producerEpoch:
		err = ErrProducerFenced
	case cur.state.isPrepare():
		err = ErrConcurrentTransactions
	}
	if err != nil || len(added) == 0 || (cur.state == StateOngoing && containsAll(cur.partitions, added)) {
		m.mu.Unlock()
		return err
	}
	tv := transactionV0
	if tv2 {
		tv = transactionV2
	}
	next := cur.addPartitions(added, tv, c.nowMs())
	checkTransition(m.transactionalID, cur, next)
	m.mu.pending = &next
	m.mu.Unlock()
	return c.commitTransit(m, &next, false, nil)
}

// AddOffsetsToTxn adds the __consumer_offsets partition of groupID
// (Config.OffsetsPartitionFor) to the transaction, as AddPartitionsToTxn
// v0-3 does, with the same errors.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, groupID string) error {
	tp := TopicPartition{Topic: ConsumerOffsetsTopic, Partition: c.cfg.OffsetsPartitionFor(groupID)}
	return c.AddPartitionsToTxn(ctx, transactionalID, producerID, producerEpoch, []TopicPartition{tp}, false)
}

// VerifyPartitionsInTxn answers, per partition of partitions (in order),
// whether it is in the Ongoing transaction of (producerID,
// producerEpoch): nil if it is, TRANSACTION_ABORTABLE if not. It writes
// nothing, and deliberately ignores a transition in flight: the
// partition's own check protects its append (C§5.4). Errors for all
// partitions alike: those of AddPartitionsToTxn's checks, except that a
// transition in flight is not one.
func (c *Coordinator) VerifyPartitionsInTxn(transactionalID string, producerID int64, producerEpoch int16, partitions []TopicPartition) []error {
	all := func(err error) []error {
		errs := make([]error, len(partitions))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if transactionalID == "" {
		return all(ErrInvalidRequest)
	}
	_, m, err := c.lockMetadata(transactionalID)
	if err != nil {
		return all(err)
	}
	if m == nil {
		return all(ErrInvalidProducerIDMapping)
	}
	defer m.mu.Unlock()
	cur := m.mu.cur
	switch {
	case producerID != cur.producerID:
		return all(ErrInvalidProducerIDMapping)
	case producerEpoch != cur.producerEpoch:
		return all(ErrProducerFenced)
	case cur.state.isPrepare():
		return all(ErrConcurrentTransactions)
	}
	errs := make([]error, len(partitions))
	for i, tp := range partitions {
		if cur.state != StateOngoing || !containsPartition(cur.partitions, tp) {
			errs[i] = ErrTransactionAbortable
		}
	}
	return errs
}

// validPartitions: every partition names a topic and a partition index
// a record can hold.
func validPartitions(tps []TopicPartition) bool {
	for _, tp := range tps {
		if tp.Topic == "" || tp.Partition < 0 {
			return false
		}
	}
	return true
}
