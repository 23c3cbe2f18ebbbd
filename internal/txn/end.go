package txn

// EndTxn: v0-5 (C§7)
//
// Commits or aborts the producer's transaction: a PrepareCommit or
// PrepareAbort record is written and the client answered once it is
// committed, before any marker (the data becomes visible to
// read_committed consumers only once the markers land); the markers and
// the Complete record follow (markers.go). The path is the request's:
// v5 is Transactions V2, v0-4 V1 (C§7.1), whatever the cluster finalized.
//
// V1 (C§7.2), checks in order: another producer id
// (INVALID_PRODUCER_ID_MAPPING); another epoch (PRODUCER_FENCED, strict:
// KAFKA-9600); a transition in flight (CONCURRENT_TRANSACTIONS); then
//
//	state           commit                    abort
//	Ongoing         -> PrepareCommit          -> PrepareAbort
//	CompleteCommit  nil (a retry; no write)   INVALID_TXN_STATE
//	CompleteAbort   INVALID_TXN_STATE         nil (a retry; no write)
//	PrepareCommit   CONCURRENT_TRANSACTIONS   INVALID_TXN_STATE
//	PrepareAbort    INVALID_TXN_STATE         CONCURRENT_TRANSACTIONS
//	Empty           INVALID_TXN_STATE         INVALID_TXN_STATE
//
// at the transaction's epoch. The answer carries no producer id or epoch.
//
// V2 (C§7.3): every end bumps the epoch, so E is the id's epoch and e the
// request's; e = E-1 is a retry of an end whose answer was lost
// (retryOnEpochBump), as is the id before a rotation with the exhausted
// epoch while the id is at epoch 0 (retryOnOverflow). Checks in order: a
// transition in flight (CONCURRENT_TRANSACTIONS, first: KAFKA-18660);
// another producer id, unless retryOnOverflow (INVALID_PRODUCER_ID_MAPPING);
// an epoch not valid for the state (PRODUCER_FENCED: Ongoing and Empty
// need e = E; Prepare* a retry; Complete* a retry or e = E); then
//
//	state           abort, retry       abort, e = E        commit, retry      commit, e = E
//	Ongoing         -                  -> PrepareAbort     -                  -> PrepareCommit
//	Empty           -                  -> PrepareAbort (*) -                  INVALID_TXN_STATE
//	CompleteAbort   nil (from state)   -> PrepareAbort (*) INVALID_TXN_STATE  INVALID_TXN_STATE
//	CompleteCommit  INVALID_TXN_STATE  -> PrepareAbort (*) nil (from state)   INVALID_TXN_STATE
//	PrepareCommit   INVALID_TXN_STATE  -                   CONCURRENT_TRANS.  -
//	PrepareAbort    CONCURRENT_TRANS.  -                   INVALID_TXN_STATE  -
//
// (*) an abort of no partitions (an implicit add registered partitions
// whose data never landed, and the client cannot tell): no markers, the
// Complete follows at once. Each Prepare* is at epoch E+1; at an
// exhausted E it also carries a new producer id, which the Complete
// adopts at epoch 0. The answer is the producer id and epoch the
// Complete will have (a retry answered from the state: the current
// ones). While a Prepare* transaction is completing, every request for
// the id has a transition in flight, so is CONCURRENT_TRANSACTIONS (C§12.10).

import (
	"context"
)

// EndTxn commits (commit) or aborts the transaction of transactionalID,
// whose producer is (producerID, producerEpoch). tv2: the request is
// EndTxn v5. Its answer, for V2 only, is the producer id and epoch the
// producer continues with (-1, -1 for V1 and on error). ctx bounds only
// the wait for a new producer id; a request whose ctx has ended starts no
// write.
func (c *Coordinator) EndTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit, tv2 bool) (int64, int16, error) {
	if transactionalID == "" {
		return -1, -1, ErrInvalidRequest
	}
	spare := int64(-1) // a producer id fetched for a V2 end at an exhausted epoch
	for {
		if ctx.Err() != nil {
			return -1, -1, ErrCoordinatorNotAvailable
		}
		_, m, err := c.lockMetadata(transactionalID)
		if err != nil {
			return -1, -1, err
		}
		if m == nil {
			return -1, -1, ErrInvalidProducerIDMapping
		}
		var d endDecision
		if tv2 {
			d = c.decideEndV2Locked(m, producerID, producerEpoch, commit, spare)
		} else {
			d = c.decideEndV1Locked(m, producerID, producerEpoch, commit)
		}
		if d.needProducerID {
			m.mu.Unlock()
			if spare, err = c.newProducerID(ctx, transactionalID); err != nil {
				return -1, -1, err
			}
			continue
		}
		if d.err != nil || d.next == nil {
			m.mu.Unlock()
			if d.err != nil || !tv2 {
				return -1, -1, d.err
			}
			return d.producerID, d.producerEpoch, nil
		}
		next := d.next
		m.mu.pending = next
		m.mu.Unlock()
		if err := c.commitTransit(m, next, false, func() { c.startCompletionLocked(m) }); err != nil {
			return -1, -1, err
		}
		switch {
		case !tv2:
			return -1, -1, nil
		case next.nextProducerID != -1:
			return next.nextProducerID, 0, nil
		default:
			return next.producerID, next.producerEpoch, nil
		}
	}
}

// endDecision is what EndTxn does with an id's state: write next, or
// answer err, or (V2, next and err nil) answer a retry from the state.
type endDecision struct {
	next           *transit
	producerID     int64
	producerEpoch  int16
	needProducerID bool
	err            error
}

// decideEndV1Locked is C§7.2's decision. REQUIRES: m.mu held.
func (c *Coordinator) decideEndV1Locked(m *transactionMetadata, pid int64, epoch int16, commit bool) endDecision {
	cur := m.mu.cur
	switch {
	case pid != cur.producerID:
		return endDecision{err: ErrInvalidProducerIDMapping}
	case epoch != cur.producerEpoch:
		return endDecision{err: ErrProducerFenced}
	case m.mu.pending != nil:
		return endDecision{err: ErrConcurrentTransactions}
	}
	switch cur.state {
	case StateOngoing:
		next := cur.prepareAbortOrCommit(endTarget(commit), transactionV0, endClient, -1, c.maxEpoch, c.nowMs())
		checkTransition(m.transactionalID, cur, next)
		return endDecision{next: &next}
	case StateCompleteCommit, StateCompleteAbort:
		if commit == (cur.state == StateCompleteCommit) {
			return endDecision{} // a retry of an end that completed
		}
	case StatePrepareCommit, StatePrepareAbort:
		if commit == (cur.state == StatePrepareCommit) {
			return endDecision{err: ErrConcurrentTransactions}
		}
	}
	return endDecision{err: ErrInvalidTxnState}
}

// decideEndV2Locked is C§7.3's decision. spare is a fetched producer id
// (-1: none) for an end at an exhausted epoch. REQUIRES: m.mu held.
func (c *Coordinator) decideEndV2Locked(m *transactionMetadata, pid int64, epoch int16, commit bool, spare int64) endDecision {
	cur := m.mu.cur
	if m.mu.pending != nil {
		return endDecision{err: ErrConcurrentTransactions}
	}
	current, reqEpoch := int32(cur.producerEpoch), int32(epoch) // no int16 wrap in e+1
	retryOnEpochBump := current == reqEpoch+1
	retryOnOverflow := pid == cur.prevProducerID && reqEpoch == int32(c.maxEpoch)-1 && current == 0
	if pid != cur.producerID && !retryOnOverflow {
		return endDecision{err: ErrInvalidProducerIDMapping}
	}
	var validEpoch bool
	switch cur.state {
	case StateOngoing, StateEmpty:
		validEpoch = reqEpoch == current
	case StatePrepareCommit, StatePrepareAbort:
		validEpoch = retryOnEpochBump
	case StateCompleteCommit, StateCompleteAbort:
		validEpoch = retryOnEpochBump || retryOnOverflow || reqEpoch == current
	}
	if !validEpoch {
		return endDecision{err: ErrProducerFenced}
	}
	isRetry := retryOnEpochBump || retryOnOverflow

	kind := endClient
	switch cur.state {
	case StateOngoing:
	case StateEmpty, StateCompleteCommit, StateCompleteAbort:
		completed := cur.state != StateEmpty && commit == (cur.state == StateCompleteCommit)
		switch {
		case isRetry && completed:
			return endDecision{producerID: cur.producerID, producerEpoch: cur.producerEpoch}
		case isRetry || commit:
			return endDecision{err: ErrInvalidTxnState}
		}
		kind = endEmptyAbort
	case StatePrepareCommit, StatePrepareAbort:
		if commit == (cur.state == StatePrepareCommit) {
			return endDecision{err: ErrConcurrentTransactions}
		}
		return endDecision{err: ErrInvalidTxnState}
	}

	if cur.producerEpoch >= c.maxEpoch {
		// Clients never hold the last epoch (a rotation comes first);
		// a record that says otherwise cannot be bumped.
		return endDecision{err: ErrUnknownServerError}
	}
	nextPID := int64(-1)
	if epochExhausted(cur.producerEpoch, c.maxEpoch) {
		if spare == -1 {
			return endDecision{needProducerID: true}
		}
		nextPID = spare
	}
	next := cur.prepareAbortOrCommit(endTarget(commit), transactionV2, kind, nextPID, c.maxEpoch, c.nowMs())
	checkTransition(m.transactionalID, cur, next)
	return endDecision{next: &next}
}

func endTarget(commit bool) State {
	if commit {
		return StatePrepareCommit
	}
	return StatePrepareAbort
}
