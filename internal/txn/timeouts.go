package txn

// The transaction timeout and transactional-id expiration (C§9, C§2.6)
//
// Every AbortTimedOutTransactionCleanupInterval, each Ongoing transaction
// with no transition in flight whose first partition was added more than
// its timeout ago (the start, not the last activity: a busy transaction
// times out too) is aborted by the coordinator: its producer is fenced
// (epoch+1) and a PrepareAbort written at the cluster's transaction
// version, after which its markers and CompleteAbort follow as for any
// abort. The producer's next request at its old epoch is refused
// (PRODUCER_FENCED; a V2 EndTxn abort looks like a retry and is
// answered with the new epoch). Prepare* transactions never time out.
//
// Every RemoveExpiredTransactionalIDCleanupInterval, each id in Empty or
// Complete*, with no transition in flight, whose last transition is
// TransactionalIDExpiration old is tombstoned and, once the tombstone is
// committed, forgotten: its producer's next request gets
// INVALID_PRODUCER_ID_MAPPING, and its next InitProducerId a new producer
// id at epoch 0. Tombstones go in batches of at most
// maxTombstoneBatchBytes.
//
// Both run on Clock callbacks and append from there; the next check is
// armed when one ends.

import (
	"log/slog"
	"time"
)

func (c *Coordinator) runAbortTimedOut() {
	c.abortTimedOutTransactions()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed {
		c.mu.abortTimer = c.afterFunc(c.cfg.AbortTimedOutTransactionCleanupInterval, c.runAbortTimedOut)
	}
}

func (c *Coordinator) runExpire() {
	c.expireTransactionalIDs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed {
		c.mu.expireTimer = c.afterFunc(c.cfg.RemoveExpiredTransactionalIDCleanupInterval, c.runExpire)
	}
}

// abortTimedOutTransactions aborts every timed-out transaction of the
// loaded partitions, one after the other.
func (c *Coordinator) abortTimedOutTransactions() {
	txns, _ := c.loadedTransactions()
	for _, m := range txns {
		c.abortIfTimedOut(m)
	}
}

func (c *Coordinator) abortIfTimedOut(m *transactionMetadata) {
	m.mu.Lock()
	cur := m.mu.cur
	now := c.nowMs()
	if m.mu.removed || m.mu.pending != nil || cur.state != StateOngoing ||
		cur.startMs+int64(cur.timeoutMs) >= now {
		m.mu.Unlock()
		return
	}
	next, err := c.fenceAndAbort(m.transactionalID, cur, now)
	if err != nil {
		m.mu.Unlock()
		c.logger.Error("txn: cannot abort a timed-out transaction",
			slog.String("transactional_id", m.transactionalID), slog.Int("producer_epoch", int(cur.producerEpoch)),
			slog.Any("err", err))
		return
	}
	m.mu.pending = &next
	m.mu.Unlock()
	c.logger.Info("txn: aborting a timed-out transaction",
		slog.String("transactional_id", m.transactionalID), slog.Int64("producer_id", cur.producerID),
		slog.Int("fenced_epoch", int(next.producerEpoch)), slog.Int("partitions", len(cur.partitions)))
	if err := c.commitTransit(m, &next, false, func() { c.startCompletionLocked(m) }); err != nil {
		c.logger.Warn("txn: aborting a timed-out transaction failed; retrying at the next check",
			slog.String("transactional_id", m.transactionalID), slog.Any("err", err))
		return
	}
	c.counts.timedOut.Add(1)
}

// expireTransactionalIDs tombstones every expired id of the loaded
// partitions.
func (c *Coordinator) expireTransactionalIDs() {
	txns, _ := c.loadedTransactions()
	cutoff := c.clock.Now().Add(-c.cfg.TransactionalIDExpiration).UnixMilli()
	byPartition := make(map[*txnPartition][]*transactionMetadata)
	for _, m := range txns {
		m.mu.Lock()
		cur := m.mu.cur
		if !m.mu.removed && m.mu.pending == nil && cur.state.expirable() && cur.lastUpdateMs <= cutoff {
			dead := cur.prepareDead(c.nowMs())
			checkTransition(m.transactionalID, cur, dead)
			m.mu.pending = &dead
			byPartition[m.partition] = append(byPartition[m.partition], m)
		}
		m.mu.Unlock()
	}
	for ps, expired := range byPartition {
		for len(expired) > 0 {
			var recs []Record
			size, n := 0, 0
			for ; n < len(expired); n++ {
				rec := txnTombstone(expired[n].transactionalID)
				if n > 0 && size+len(rec.Key) > maxTombstoneBatchBytes {
					break
				}
				recs = append(recs, rec)
				size += len(rec.Key)
			}
			c.writeTombstones(ps, expired[:n], recs)
			expired = expired[n:]
		}
	}
}

// writeTombstones appends recs, the tombstones of batch (all of ps, each
// with its Dead transition pending), and forgets the ids once they are
// committed; on failure only their pending transitions are cleared and
// the next check tries again.
func (c *Coordinator) writeTombstones(ps *txnPartition, batch []*transactionMetadata, recs []Record) {
	ctx, done, err := c.beginAppend(ps, tombstoneAppendTimeout)
	if err == nil {
		err = c.log.Append(ctx, ps.partition, recs)
		done()
	}
	if err != nil {
		c.logger.Warn("txn: writing expired transactional ids failed; retrying at the next check",
			slog.Int("partition", int(ps.partition)), slog.Int("ids", len(batch)), slog.Any("err", err))
	}
	for _, m := range batch {
		m.mu.Lock()
		m.mu.pending = nil
		if err == nil && !m.mu.removed && c.owns(ps) {
			c.removeLocked(m)
			c.logger.Debug("txn: transactional id expired", slog.String("transactional_id", m.transactionalID),
				slog.Duration("idle", time.Duration(c.nowMs()-m.mu.cur.lastUpdateMs)*time.Millisecond))
		}
		m.mu.Unlock()
	}
}
