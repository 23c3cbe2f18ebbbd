package txn

import (
	"errors"
	"fmt"
	"log/slog"
)

// Load makes this node the coordinator of partition p's transactional
// ids, at coordinatorEpoch (the partition's leader epoch, which every
// marker carries): read calls fn with every record of the partition from
// its start to its end, in order, and replaying them rebuilds each id
// (the last record per id wins; a tombstone removes it). Until Load
// returns, requests for p's ids answer COORDINATOR_LOAD_IN_PROGRESS; if
// it fails, NOT_COORDINATOR. Every PrepareCommit or PrepareAbort
// transaction loaded has its Complete made pending before anyone can
// reach it, and its markers sent again to all of its partitions (some
// may have them already: partitions accept a duplicate), then its
// Complete record written (C§2.5). Ongoing transactions need nothing:
// the timeout aborts those their producers abandoned.
//
// Loading a partition already loaded (a new leader epoch) drops its
// state first (its markers stop; its requests answer NOT_COORDINATOR),
// and so does loading one unloaded before: either way Load waits for
// that incarnation's appends under way to end before it replays, so the
// replay sees every record it wrote (the log is the truth).
//
// Load fails with ErrMalformedRecord or ErrUnknownRecordVersion (wrapped,
// naming the id) for a value that does not decode, rather than serve
// state rebuilt around a hole; keys of an unknown version are skipped, as
// Kafka does. An id that does not belong on p (the partition count
// changed) fails it too.
//
// Threads: read runs on the caller's goroutine with no lock held; fn
// must be called from that goroutine. fn does not keep the record's
// slices.
func (c *Coordinator) Load(p int32, coordinatorEpoch int32, read func(fn func(Record) error) error) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	var previous []*txnPartition
	for _, old := range []*txnPartition{c.mu.partitions[p], c.mu.unloaded[p]} {
		if old != nil {
			previous = append(previous, old)
		}
	}
	delete(c.mu.unloaded, p)
	ps := newTxnPartition(c.ctx, p, coordinatorEpoch)
	c.mu.partitions[p] = ps
	c.mu.Unlock()
	for _, old := range previous {
		c.dropPartition(old)
		old.appends.Wait() // bounded: their contexts have ended
	}

	r := &replay{partition: p, partitions: c.cfg.TransactionPartitions, txns: make(map[string]transit)}
	err := read(r.apply)
	type completion struct {
		m        *transactionMetadata
		complete *transit
		marker   Marker
	}
	var (
		txns        map[string]*transactionMetadata
		completions []completion
	)
	if err == nil {
		txns = make(map[string]*transactionMetadata, len(r.txns))
		for id, t := range r.txns {
			m := newTransactionMetadata(id, ps, t)
			txns[id] = m
			if t.state.isPrepare() {
				m.mu.Lock()
				complete, marker := c.prepareCompletionLocked(m)
				m.mu.Unlock()
				completions = append(completions, completion{m, complete, marker})
			}
		}
	}

	c.mu.Lock()
	if c.mu.closed || c.mu.partitions[p] != ps {
		c.mu.Unlock()
		ps.cancel()
		return ErrLoadSuperseded
	}
	if err != nil {
		delete(c.mu.partitions, p)
		c.mu.Unlock()
		ps.cancel()
		return fmt.Errorf("txn: loading __transaction_state partition %d: %w", p, err)
	}
	ps.txns = txns
	ps.loading = false
	loaded := len(txns) // under the lock: requests add to the map once it is published
	c.mu.Unlock()

	for _, cm := range completions {
		c.goBackground(func() { c.completeTransaction(cm.m, cm.complete, cm.marker) })
	}
	// Debug, as group's: the node's loader logs one line for all the
	// partitions an image hands this node (txnstatetopic.Loader).
	c.logger.Debug("txn: partition loaded", slog.Int("partition", int(p)), slog.Int("coordinator_epoch", int(coordinatorEpoch)),
		slog.Int("transactional_ids", loaded), slog.Int("completing", len(completions)),
		slog.Int("skipped_records", r.skipped))
	return nil
}

// Unload stops this node coordinating partition p's ids (it no longer
// leads p): their state is dropped, their markers stop (the next leader
// sends them again), and requests for them answer NOT_COORDINATOR. A Load
// in progress for p fails with ErrLoadSuperseded. It does not wait for
// appends under way (a later Load of p does).
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	ps := c.mu.partitions[p]
	if ps != nil {
		delete(c.mu.partitions, p)
		c.mu.unloaded[p] = ps
	}
	c.mu.Unlock()
	if ps != nil {
		c.dropPartition(ps)
		c.logger.Info("txn: partition unloaded", slog.Int("partition", int(p)))
	}
}

// replay accumulates a partition's records: the last value per id wins,
// and a tombstone removes the id.
type replay struct {
	partition, partitions int32
	txns                  map[string]transit
	skipped               int // records of an unknown key version
}

func (r *replay) apply(rec Record) error {
	id, err := decodeTxnKey(rec.Key)
	switch {
	case errors.Is(err, ErrUnknownRecordVersion):
		// Not a transaction's record (Kafka skips these too).
		r.skipped++
		return nil
	case err != nil:
		return err
	}
	if p := PartitionFor(id, r.partitions); p != r.partition {
		return fmt.Errorf("transactional id %q belongs on partition %d of %d, not %d: was the partition count of __transaction_state changed?",
			id, p, r.partitions, r.partition)
	}
	if len(rec.Value) == 0 {
		delete(r.txns, id)
		return nil
	}
	t, err := decodeTxnValue(rec.Value)
	if err != nil {
		return fmt.Errorf("transactional id %q: %w", id, err)
	}
	r.txns[id] = t
	return nil
}
