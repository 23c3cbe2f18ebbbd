package txn

// Markers and completion (C§7.4, C§8)
//
// Once a PrepareCommit or PrepareAbort record is committed, the
// transaction's Complete transition is made pending at once (so every
// request for the id answers CONCURRENT_TRANSACTIONS until it is
// written) and one goroutine writes the markers: the Prepare record's
// producer id and epoch, the partition's coordinator epoch, commit or
// abort and the transaction's version, to every partition of the
// transaction (also those of a transaction reloaded after a failover,
// whose markers may already be written: partitions accept a duplicate).
// Per partition, a MarkerSender result is:
//
//   - nil: written;
//   - ErrPartitionDeleted: the topic is gone; counts as written (Kafka:
//     "likely deleted");
//   - INVALID_PRODUCER_EPOCH: the partition has seen a newer epoch of
//     this producer, so holds no transaction of this one open; counts as
//     written (Kafka abandons the whole transaction instead, KAFKA-19999);
//   - UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT: counts as
//     written, as in Kafka;
//   - anything else (not the leader, timeouts, not enough replicas, a
//     transport error, TRANSACTION_COORDINATOR_FENCED, ...): sent again
//     after a backoff (MarkerRetryBackoff, doubling up to
//     MarkerRetryBackoffMax), forever: a Prepare* transaction has no
//     timeout, and a partition without a leader holds its producer up
//     until it has one again (as in Kafka). A fenced coordinator is
//     about to be unloaded, which ends the retries.
//
// When every partition is done, the Complete record is appended; if that
// fails it is retried after the same backoff, the transition still
// pending. The goroutine ends when the partition is unloaded (its
// successor's load sends the markers again) or the coordinator closes.

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// startCompletionLocked makes m's Complete transition pending and starts
// the goroutine that writes m's markers and then that transition.
// REQUIRES: m.mu held; m.mu.cur in PrepareCommit or PrepareAbort; no
// transition pending.
func (c *Coordinator) startCompletionLocked(m *transactionMetadata) {
	complete, marker := c.prepareCompletionLocked(m)
	c.goBackground(func() { c.completeTransaction(m, complete, marker) })
}

// prepareCompletionLocked is startCompletionLocked without starting the
// goroutine, for Load, which prepares every Prepare* transaction before
// anyone can reach it and starts them once the partition is published.
// REQUIRES: as startCompletionLocked.
func (c *Coordinator) prepareCompletionLocked(m *transactionMetadata) (*transit, Marker) {
	cur := m.mu.cur
	if !cur.state.isPrepare() || m.mu.pending != nil {
		panic(fmt.Sprintf("txn: transactional id %q: completing a %v transaction (pending %v)",
			m.transactionalID, cur.state, m.mu.pending != nil))
	}
	complete := cur.prepareComplete(c.nowMs())
	checkTransition(m.transactionalID, cur, complete)
	m.mu.pending = &complete
	m.mu.awaitingMarkers = cur.partitions
	return &complete, Marker{
		ProducerID:         cur.producerID,
		ProducerEpoch:      cur.producerEpoch,
		CoordinatorEpoch:   m.partition.coordinatorEpoch,
		Commit:             cur.state == StatePrepareCommit,
		TransactionVersion: int8(cur.clientTransactionVersion),
		Partitions:         cur.partitions,
	}
}

// completeTransaction writes marker to every partition and then m's
// pending Complete transition. It runs on its own goroutine, the only
// one that touches complete, and returns when the transition is written
// or m's partition is unloaded.
func (c *Coordinator) completeTransaction(m *transactionMetadata, complete *transit, marker Marker) {
	ps := m.partition
	backoff := c.cfg.MarkerRetryBackoff
	wait := func() bool {
		ok := c.sleep(ps.ctx, backoff)
		backoff = min(2*backoff, c.cfg.MarkerRetryBackoffMax)
		return ok
	}

	remaining := slices.Clone(marker.Partitions)
	for len(remaining) > 0 {
		if ps.ctx.Err() != nil {
			return
		}
		marker.Partitions = remaining
		results := c.markers.WriteTxnMarkers(ps.ctx, marker)
		if ps.ctx.Err() != nil {
			return // unloaded meanwhile: the next owner sends them again
		}
		if len(results) != len(remaining) {
			panic(fmt.Sprintf("txn: MarkerSender answered %d results for %d partitions", len(results), len(remaining)))
		}
		retry := []TopicPartition{} // non-nil: Describe shows none left
		for i, tp := range remaining {
			if !c.markerDone(m.transactionalID, marker, tp, results[i]) {
				retry = append(retry, tp)
			}
		}
		m.mu.Lock()
		if m.mu.pending == complete {
			m.mu.awaitingMarkers = retry
		}
		m.mu.Unlock()
		remaining = retry
		if len(remaining) > 0 && !wait() {
			return
		}
	}

	for {
		m.mu.Lock()
		if m.mu.removed || m.mu.pending != complete {
			m.mu.Unlock()
			return
		}
		// Only this goroutine reads or writes *complete.
		complete.lastUpdateMs = c.nowMs()
		m.mu.Unlock()
		err := c.commitTransit(m, complete, true, func() { m.mu.awaitingMarkers = nil })
		if err == nil {
			if complete.state == StateCompleteCommit {
				c.counts.committed.Add(1)
			} else {
				c.counts.aborted.Add(1)
			}
			return
		}
		if !c.owns(ps) {
			return
		}
		c.logger.Warn("txn: writing a transaction's completion failed; retrying",
			slog.String("transactional_id", m.transactionalID), slog.String("state", complete.state.String()),
			slog.Any("err", err))
		if !wait() {
			return
		}
	}
}

// markerDone reports whether a marker's result for tp means the
// partition needs no more marker (see the file comment).
func (c *Coordinator) markerDone(id string, marker Marker, tp TopicPartition, err error) bool {
	attrs := func() []any {
		return []any{
			slog.String("transactional_id", id), slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition)),
			slog.Int64("producer_id", marker.ProducerID), slog.Int("producer_epoch", int(marker.ProducerEpoch)),
			slog.Bool("commit", marker.Commit), slog.Any("err", err),
		}
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrPartitionDeleted):
		c.logger.Info("txn: no marker for a deleted partition", attrs()...)
		return true
	case errors.Is(err, kerr.InvalidProducerEpoch):
		c.logger.Warn("txn: partition has a newer producer epoch than the marker; counting it written", attrs()...)
		return true
	case errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
		c.logger.Warn("txn: partition cannot take the marker; counting it written", attrs()...)
		return true
	case isRetriableMarkerError(err):
		c.logger.Debug("txn: marker not written; retrying", attrs()...)
		return false
	default:
		c.logger.Warn("txn: marker refused; retrying", attrs()...)
		return false
	}
}

// isRetriableMarkerError: the results Kafka's marker handler retries
// (C§8.3), plus a dropped connection.
func isRetriableMarkerError(err error) bool {
	return slices.ContainsFunc([]*kerr.Error{
		kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.NetworkException,
	}, func(ke *kerr.Error) bool { return errors.Is(err, ke) })
}
