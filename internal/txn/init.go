package txn

// InitProducerId with a transactional id (C§4)
//
// Starts a producer session for a transactional id: the first one gets a
// new producer id at epoch 0; each later one the same id at the next
// epoch (a new id once the epoch is exhausted), which fences every older
// session of it. A session whose predecessor left a transaction Ongoing
// first has it aborted at a bumped epoch, and is told
// CONCURRENT_TRANSACTIONS until the abort completes; its retry then gets
// the epoch after that (a takeover costs two epochs, as in Kafka).
//
// KIP-360 (InitProducerId v3+): a producer recovering from an error sends
// the producer id and epoch it has. It gets the next epoch if it sent the
// current one; the same answer again if it sent the last one (a retry of
// a bump whose answer was lost, also across a producer id rotation and a
// coordinator failover, since Fjord persists the last epoch); and
// PRODUCER_FENCED for anything older.
//
// Checks, in order: an empty id or only one of expected id and epoch
// (INVALID_REQUEST); the timeout in (0, MaxTransactionTimeout]
// (INVALID_TRANSACTION_TIMEOUT); the partition loaded here (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS); a transition in flight
// (CONCURRENT_TRANSACTIONS); an implausible expected producer id
// (PRODUCER_FENCED); Prepare* (CONCURRENT_TRANSACTIONS); then by state.

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// InitProducerID returns the producer id and epoch of a new session of
// transactionalID (C§4.4). expectedProducerID and expectedEpoch are
// KIP-360's, -1 and -1 for a fresh initTransactions. ctx bounds only the
// wait for a new producer id; the record is written whatever becomes of
// the caller, bounded by the transaction timeout.
//
// Errors: see the file comment; and the append's (Log).
func (c *Coordinator) InitProducerID(ctx context.Context, transactionalID string, transactionTimeoutMs int32, expectedProducerID int64, expectedEpoch int16) (producerID int64, epoch int16, err error) {
	switch {
	case transactionalID == "" || len(transactionalID) > MaxTransactionalIDBytes:
		return -1, -1, ErrInvalidRequest
	case (expectedProducerID == -1) != (expectedEpoch == -1):
		return -1, -1, ErrInvalidRequest
	case transactionTimeoutMs <= 0 || time.Duration(transactionTimeoutMs)*time.Millisecond > c.cfg.MaxTransactionTimeout:
		return -1, -1, ErrInvalidTransactionTimeout
	}
	// spare is a producer id fetched for a new id or a rotation and not
	// used yet. Ids are fetched with no lock held; one the decision no
	// longer needs when it is retaken is abandoned, which is harmless.
	spare := int64(-1)
	for {
		ps, m, err := c.lockMetadata(transactionalID)
		if err != nil {
			return -1, -1, err
		}
		if m == nil {
			if spare == -1 {
				if spare, err = c.newProducerID(ctx, transactionalID); err != nil {
					return -1, -1, err
				}
			}
			_, used, err := c.insertMetadata(ps, transactionalID, spare, transactionTimeoutMs)
			if err != nil {
				return -1, -1, err
			}
			if used {
				spare = -1
			}
			continue
		}

		d := c.decideInitLocked(m, transactionTimeoutMs, expectedProducerID, expectedEpoch, spare)
		if d.needProducerID {
			m.mu.Unlock()
			if spare, err = c.newProducerID(ctx, transactionalID); err != nil {
				return -1, -1, err
			}
			continue
		}
		if d.err != nil {
			m.mu.Unlock()
			return -1, -1, d.err
		}
		next := d.next
		m.mu.pending = next
		m.mu.Unlock()

		var applied func()
		if d.fence {
			applied = func() { c.startCompletionLocked(m) }
		}
		if err := c.commitTransit(m, next, false, applied); err != nil {
			c.forgetIfNeverWritten(m)
			return -1, -1, err
		}
		if d.fence {
			// The old session's transaction is being aborted; this one
			// retries and gets its epoch once the abort is complete.
			return -1, -1, ErrConcurrentTransactions
		}
		return next.producerID, next.producerEpoch, nil
	}
}

// initDecision is what InitProducerId does with an id's state.
type initDecision struct {
	next           *transit // the transition to write
	fence          bool     // next is the abort of a fenced session's transaction
	needProducerID bool     // a rotation, and no spare producer id: fetch one and decide again
	err            error
}

// decideInitLocked is the decision of C§4.2 on m's state. spare is a
// fetched producer id (-1: none) for a rotation.
// REQUIRES: m.mu held.
func (c *Coordinator) decideInitLocked(m *transactionMetadata, timeoutMs int32, expectedPID int64, expectedEpoch int16, spare int64) initDecision {
	cur := m.mu.cur
	expected := expectedPID != -1
	if m.mu.pending != nil {
		return initDecision{err: ErrConcurrentTransactions}
	}
	// Plausible: a new id (epoch -1: e.g. a producer whose id expired
	// recovering with its old one), the current producer id (its epoch is
	// checked below), or the id before a rotation with the exhausted
	// epoch it had (a retry of the rotation).
	if expected && cur.producerEpoch != -1 && expectedPID != cur.producerID &&
		!(expectedPID == cur.prevProducerID && epochExhausted(expectedEpoch, c.maxEpoch)) {
		return initDecision{err: ErrProducerFenced}
	}
	now := c.nowMs()
	switch cur.state {
	case StatePrepareCommit, StatePrepareAbort:
		return initDecision{err: ErrConcurrentTransactions}
	case StateOngoing:
		next, err := c.fenceAndAbort(m.transactionalID, cur, now)
		if err != nil {
			return initDecision{err: err}
		}
		return initDecision{next: &next, fence: true}
	case StateEmpty, StateCompleteCommit, StateCompleteAbort:
		var next transit
		// An exhausted epoch is never bumped again: the session gets a
		// new producer id at epoch 0, also on a retry (a client must never
		// hold an epoch it cannot end a V2 transaction with). A stale
		// expected epoch is still a zombie's.
		stale := expected && expectedEpoch != cur.producerEpoch && expectedEpoch != cur.lastProducerEpoch
		if epochExhausted(cur.producerEpoch, c.maxEpoch) && !stale {
			if spare == -1 {
				return initDecision{needProducerID: true}
			}
			next = cur.rotateProducerID(spare, timeoutMs, expected && expectedEpoch == cur.producerEpoch, now)
		} else {
			var err error
			if next, err = cur.incrementEpoch(timeoutMs, expectedEpoch, c.maxEpoch, now); err != nil {
				return initDecision{err: err}
			}
		}
		checkTransition(m.transactionalID, cur, next)
		return initDecision{next: &next}
	default:
		panic(fmt.Sprintf("txn: transactional id %q in state %v", m.transactionalID, cur.state))
	}
}

// fenceAndAbort is the coordinator's abort of cur's Ongoing transaction
// (C§7.5): the fence's epoch bump and the PrepareAbort in one transition,
// at the cluster's transaction version. Only the PrepareAbort is
// written, so a fence whose record fails changes nothing (KAFKA-9666).
func (c *Coordinator) fenceAndAbort(id string, cur transit, nowMs int64) (transit, error) {
	fenced, err := cur.fenceEpoch(c.maxEpoch, nowMs)
	if err != nil {
		return transit{}, err
	}
	checkTransition(id, cur, fenced)
	next := fenced.prepareAbortOrCommit(StatePrepareAbort, c.clusterTransactionVersion(), endFence, -1, c.maxEpoch, nowMs)
	checkTransition(id, fenced, next)
	return next, nil
}

// clusterTransactionVersion is Config.TransactionVersion, as a level
// this coordinator knows.
func (c *Coordinator) clusterTransactionVersion() int16 {
	return min(max(c.cfg.TransactionVersion, transactionV0), transactionV2)
}

// newProducerID fetches a producer id for transactionalID. A failure is
// COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer when no id is at hand, and
// one every client retries.
func (c *Coordinator) newProducerID(ctx context.Context, transactionalID string) (int64, error) {
	pid, _, err := c.pids.InitProducerID(ctx)
	if err != nil {
		c.logger.Warn("txn: fetching a producer id failed",
			slog.String("transactional_id", transactionalID), slog.Any("err", err))
		return -1, ErrCoordinatorLoadInProgress
	}
	return pid, nil
}

// forgetIfNeverWritten removes m if its first record was never written
// (its Empty record at epoch 0 failed), so memory holds nothing the log
// does not (Kafka keeps it at epoch -1: KAFKA-14880).
func (c *Coordinator) forgetIfNeverWritten(m *transactionMetadata) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.removed && m.mu.pending == nil && m.mu.cur.producerEpoch == -1 {
		c.removeLocked(m)
	}
}
