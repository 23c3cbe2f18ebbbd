package replica

import (
	"context"
	"fmt"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// The produce path (DESIGN.md section 10), from the point kafkaserver has
// decoded a partition's records:
//
//  1. acks is 0, 1 or -1; the partition is here and this node leads it.
//  2. acks=all with fewer ISR members than min.insync.replicas is refused
//     before anything is written (NOT_ENOUGH_REPLICAS).
//  3. Log.Append validates every batch, applies producer state
//     (idempotence) and writes, stamping the leader epoch. p.mu is held
//     shared across it, so the epoch cannot change under the append.
//  4. Under flush.policy=ack, acks=1 and acks=all wait for Log.Flush to
//     cover the batch: concurrent producers share one fsync (group
//     commit, in storage). acks=0 leaves the flush to a background
//     flusher. Under interval the background flush is storage's.
//  5. The high watermark rule runs; acks=all then waits until the high
//     watermark passes the batch (Kafka's delayed produce), the timeout,
//     or ctx, whichever comes first, and is answered NOT_LEADER if the
//     leader epoch it was written in ends first (produceDone).

// Append appends records to a partition this node leads and waits for
// acks: StartAppend, then Wait.
func (m *Manager) Append(ctx context.Context, topic string, partition int32, records []byte, acks Acks, timeout time.Duration) (AppendResult, error) {
	pending, err := m.StartAppend(topic, partition, records, acks)
	if err != nil {
		return AppendResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}, err
	}
	return pending.Wait(ctx, timeout)
}

// Pending is an append that is in the log (steps 1-3 done) and not yet
// acknowledged.
type Pending interface {
	// Wait completes steps 4 and 5: it returns once acks is satisfied,
	// timeout passes (ErrRequestTimedOut) or ctx ends. Call it once.
	Wait(ctx context.Context, timeout time.Duration) (AppendResult, error)
	// Records is how many records the append wrote: 0 for an
	// idempotent producer's retry of batches already written.
	Records() int64
}

// StartAppend does steps 1-3 and returns without waiting for anything
// but the write. The split is for the protocol server: a connection's
// produce requests must reach the log in the order they were sent (an
// idempotent producer pipelines several and checks their sequence), yet
// their fsync and high-watermark waits should overlap, so one fsync can
// acknowledge them all. So the server starts a connection's appends one
// request at a time and waits for them concurrently.
func (m *Manager) StartAppend(topic string, partition int32, records []byte, acks Acks) (Pending, error) {
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return nil, fmt.Errorf("%w: acks=%d (allowed: 0, 1, -1)", ErrInvalidRequiredAcks, acks)
	}
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return nil, err
	}
	info, epoch, err := p.appendAsLeader(records, acks)
	if err != nil {
		return nil, p.logError(err)
	}
	pa := &pendingAppend{
		p:     p,
		acks:  acks,
		epoch: epoch,
		res: AppendResult{
			BaseOffset:     info.FirstOffset,
			LogAppendTime:  info.LogAppendTime,
			LogStartOffset: p.log.LogStartOffset(),
		},
		// For a duplicate (an idempotent producer's retry) nothing was
		// written and FirstOffset/LastOffset are the original batch's.
		// The original may still be waiting for its own flush, so the
		// retry waits for the same offsets as if it had been written
		// now: it must not be acknowledged before the original could be.
		next: info.LastOffset + 1,
		// A leader gives every record, control records included, the
		// next offset, so the span is the count.
		written: info.LastOffset - info.FirstOffset + 1,
	}
	if isDuplicate(info) {
		pa.written = 0
	} else {
		p.notifyAppend()
	}
	if acks == AcksNone {
		// Nobody waits for an acks=0 append, so it makes its records
		// visible here: by a background flush under flush.policy=ack,
		// at once under interval.
		if p.log.Config().FlushPolicy == storage.FlushAck {
			p.flushAsync(pa.next)
		} else {
			p.maybeAdvanceHighWatermark()
		}
	}
	return pa, nil
}

// pendingAppend is the replica manager's Pending.
type pendingAppend struct {
	p    *Partition
	acks Acks
	// epoch is the leader epoch the append was written in.
	epoch int32
	res   AppendResult
	next  int64 // the offset after the append's last record
	// written is the records appended (Records).
	written int64
}

func (pa *pendingAppend) Records() int64 { return pa.written }

func (pa *pendingAppend) Wait(ctx context.Context, timeout time.Duration) (AppendResult, error) {
	failed := AppendResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
	p := pa.p
	if pa.acks == AcksNone {
		return pa.res, nil
	}
	if p.log.Config().FlushPolicy == storage.FlushAck {
		if err := p.log.Flush(pa.next); err != nil {
			return failed, p.logError(err)
		}
	}
	p.maybeAdvanceHighWatermark()
	if pa.acks != AcksAll {
		return pa.res, nil
	}
	if err := p.waitForHighWatermark(ctx, pa.next, pa.epoch, timeout); err != nil {
		return failed, err
	}
	return pa.res, nil
}

// isDuplicate reports whether Log.Append found the batch to be a retry of
// one it already has.
func isDuplicate(info storage.AppendInfo) bool { return info.Duplicate }

// appendAsLeader checks leadership and min.insync.replicas and appends,
// under p.mu shared so the epoch stamped, and returned, is the current
// one.
func (p *Partition) appendAsLeader(records []byte, acks Acks) (storage.AppendInfo, int32, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(-1); err != nil {
		return storage.AppendInfo{}, -1, err
	}
	if err := p.checkLease(); err != nil {
		return storage.AppendInfo{}, -1, err
	}
	if acks == AcksAll && len(p.mu.isr) < p.mu.minInsync {
		return storage.AppendInfo{}, -1, fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicas, p, len(p.mu.isr), p.mu.minInsync)
	}
	info, err := p.log.Append(records, p.mu.leaderEpoch)
	return info, p.mu.leaderEpoch, err
}

// produceDone is the delayed produce's completion test: done once the
// high watermark has reached next, or at once with an error if the
// partition was deleted or this node lost its leadership while waiting,
// even if it leads again: the write was made in leader epoch epoch, and
// in a later one the offsets below the high watermark may hold another
// leader's records (this node followed it meanwhile, or its image
// skipped that epoch). The client retries; an idempotent producer's
// retry of a write that survived is answered with its original offset.
// Kafka also answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
// below min.insync.replicas meanwhile: the records are in the log, but
// not with the redundancy asked for. Fjord answers it as soon as the ISR
// is below, since its high watermark then stays put.
func (p *Partition) produceDone(next int64, epoch int32) (bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(-1); err != nil {
		return true, err
	}
	if p.mu.leaderEpoch != epoch {
		return true, fmt.Errorf("%w: %s: written in leader epoch %d, which ended (now %d) before the write was committed",
			ErrNotLeader, p, epoch, p.mu.leaderEpoch)
	}
	if len(p.mu.isr) < p.mu.minInsync {
		// The high watermark does not move below min.insync.replicas
		// (maybeAdvanceHighWatermarkLocked): waiting would only time out.
		return true, fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicasAfterAppend, p, len(p.mu.isr), p.mu.minInsync)
	}
	return p.log.HighWatermark() >= next, nil
}

// waitForHighWatermark parks an acks=all produce until the high watermark
// reaches next. It is woken by high-watermark moves and leadership
// changes only (see Partition.wait), never by polling.
func (p *Partition) waitForHighWatermark(ctx context.Context, next int64, epoch int32, timeout time.Duration) error {
	if done, err := p.produceDone(next, epoch); done {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: %s: high watermark %d has not reached %d", ErrRequestTimedOut, p, p.log.HighWatermark(), next)
	}
	w := newWaiter(false)
	p.addWaiter(w)
	defer p.removeWaiter(w)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Checked after registering, so an advance between the first
		// check and addWaiter is not missed.
		if done, err := p.produceDone(next, epoch); done {
			return err
		}
		select {
		case <-w.ch: // the high watermark moved or leadership changed: look again
		case <-timer.C: // the produce's timeout: the records stay in the log, unacknowledged
			if done, err := p.produceDone(next, epoch); done {
				return err
			}
			return fmt.Errorf("%w: %s: high watermark %d has not reached %d after %v",
				ErrRequestTimedOut, p, p.log.HighWatermark(), next, timeout)
		case <-ctx.Done(): // the connection closed or the server is stopping
			return fmt.Errorf("%w: %w", ErrRequestTimedOut, ctx.Err())
		}
	}
}
