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
//     A produce with a transactional id goes to Log.AppendVerified
//     instead, with the guard TxnVerificationGuard gave before the
//     coordinator was asked (KIP-890 part 1).
//  4. Under flush.policy=ack, acks=1 and acks=all wait for Log.Flush to
//     cover the batch: concurrent producers share one fsync (group
//     commit, in storage). acks=0 leaves the flush to a background
//     flusher. Under interval the background flush is storage's.
//  5. The high watermark rule runs; acks=all then waits until the high
//     watermark passes the batch (Kafka's delayed produce), the timeout,
//     or ctx, whichever comes first, and is answered NOT_LEADER if the
//     leader epoch it was written in ends first, or this node's leader
//     lease lapses (delayedProduceOutcome).

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
	return m.startWrite(topic, partition, acks, len(records), func(l *storage.Log, epoch int32) (storage.AppendInfo, error) {
		return l.Append(records, epoch)
	})
}

// TxnVerificationGuard starts the verification of a transactional batch
// of producer pid at epoch (KIP-890 part 1) on a partition this node
// leads, before the produce path asks the transaction coordinator whether
// the partition is in the producer's transaction: needed is false when
// the producer's transaction at epoch is open there already (nothing to
// ask); otherwise guard goes to StartAppendVerified once the coordinator
// has said yes (storage.Log.TxnVerificationGuard). Leadership is checked
// as for an append (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// the leader lease), so a node that cannot append does not make the
// coordinator round trip first.
func (m *Manager) TxnVerificationGuard(topic string, partition int32, pid int64, epoch int16, supportsEpochBump bool) (guard uint64, needed bool, err error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return 0, false, err
	}
	if guard, needed, err = p.txnVerificationGuard(pid, epoch, supportsEpochBump); err != nil {
		return 0, false, p.logError(err)
	}
	return guard, needed, nil
}

// txnVerificationGuard is TxnVerificationGuard under p.mu shared, as
// appendAsLeader writes: a guard is only taken from the log this node
// leads. It stays sound if leadership moves before the append: the append
// checks leadership again, and a marker replicated here meanwhile clears
// the guard (producerstate.State.UpdateMarker, on every path).
func (p *Partition) txnVerificationGuard(pid int64, epoch int16, supportsEpochBump bool) (uint64, bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(-1); err != nil {
		return 0, false, err
	}
	if err := p.checkLease(); err != nil {
		return 0, false, err
	}
	return p.log.TxnVerificationGuard(pid, epoch, supportsEpochBump)
}

// StartAppendVerified is StartAppend for a produce with a transactional
// id: a batch that would open its producer's transaction on the
// partition is refused with INVALID_TXN_STATE, nothing written, unless
// guard (from TxnVerificationGuard, the coordinator having said yes since)
// is still the partition's verification guard for the producer
// (storage.Log.AppendVerified). guard 0 is for a produce that needed no
// verification: its batches may join a transaction open there, never
// open one.
func (m *Manager) StartAppendVerified(topic string, partition int32, records []byte, acks Acks, guard uint64) (Pending, error) {
	return m.startWrite(topic, partition, acks, len(records), func(l *storage.Log, epoch int32) (storage.AppendInfo, error) {
		return l.AppendVerified(records, epoch, guard)
	})
}

// StartTxnMarker writes a transaction marker for the transaction
// coordinator (WriteTxnMarkers) to a partition this node leads, as an
// acks=all write, as Kafka's are: checked by the log against the
// producer's state first (ErrInvalidProducerEpoch, ErrCoordinatorFenced),
// and answered by Wait once the high watermark passes it. Until it does,
// the transaction still holds the last stable offset.
func (m *Manager) StartTxnMarker(topic string, partition int32, marker storage.TxnMarker) (Pending, error) {
	return m.startWrite(topic, partition, AcksAll, notClient, func(l *storage.Log, epoch int32) (storage.AppendInfo, error) {
		return l.AppendTxnMarker(marker, epoch)
	})
}

// AppendAsCoordinator appends records a coordinator of this node writes
// for a producer (the group coordinator's transactional offset commits)
// with acks=all, checked as storage.Log.AppendAsCoordinator says: the
// producer's epoch, not its sequence.
func (m *Manager) AppendAsCoordinator(ctx context.Context, topic string, partition int32, records []byte, timeout time.Duration, verify bool, guard uint64) (AppendResult, error) {
	pending, err := m.startWrite(topic, partition, AcksAll, notClient, func(l *storage.Log, epoch int32) (storage.AppendInfo, error) {
		return l.AppendAsCoordinator(records, epoch, verify, guard)
	})
	if err != nil {
		return AppendResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}, err
	}
	return pending.Wait(ctx, timeout)
}

// notClient is startWrite's clientBytes for a write that is not a
// client's: a transaction marker, or a coordinator's records.
const notClient = -1

// startWrite is StartAppend, StartAppendVerified, StartTxnMarker and
// AppendAsCoordinator: write appends to the log at the leader epoch it is
// given. clientBytes is the size of a client write (a producer's
// records), notClient for a transaction marker or a coordinator's. A
// client write is refused on a topic whose migration has cut over
// (markers still end the transactions left open there), and under disk
// pressure unless its topic is internal (diskpressure.go).
func (m *Manager) startWrite(topic string, partition int32, acks Acks, clientBytes int, write func(l *storage.Log, epoch int32) (storage.AppendInfo, error)) (Pending, error) {
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return nil, fmt.Errorf("%w: acks=%d (allowed: 0, 1, -1)", ErrInvalidRequiredAcks, acks)
	}
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return nil, err
	}
	// Read before appendAsLeader checks the lease: a lapse noted after
	// this read answers the write if it waits (lease.go), and one noted
	// before it had begun before the check, which then refuses the write
	// unless the lease has been renewed since.
	leaseLapses := m.leaseLapses.Load()
	info, epoch, err := p.appendAsLeader(acks, clientBytes, write)
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
		next:        info.LastOffset + 1,
		leaseLapses: leaseLapses,
		// A leader gives every record, control records included, the
		// next offset, so the span is the count.
		written: info.LastOffset - info.FirstOffset + 1,
	}
	if isDuplicate(info) {
		pa.written = 0
	} else {
		p.notifyAppend()
	}
	if info.Keyed {
		p.noteKeyed()
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

// pendingAppend is the replica manager's Pending, one allocation per
// produce. Its fields are laid out to fit the 64-byte size class (a
// produceWait embedded whole would pad it to 72, the 80-byte class).
type pendingAppend struct {
	p    *Partition
	acks Acks
	// epoch is the leader epoch the append was written in.
	epoch int32
	res   AppendResult
	next  int64 // the offset after the append's last record
	// leaseLapses is Manager.leaseLapses read before the append's lease
	// check (produceWait).
	leaseLapses uint64
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
	if err := p.waitForHighWatermark(ctx, produceWait{next: pa.next, epoch: pa.epoch, leaseLapses: pa.leaseLapses}, timeout); err != nil {
		return failed, err
	}
	return pa.res, nil
}

// isDuplicate reports whether Log.Append found the batch to be a retry of
// one it already has.
func isDuplicate(info storage.AppendInfo) bool { return info.Duplicate }

// noteKeyed tells Options.KeyedAppend, once in this Partition's life,
// that a leader append wrote a record with a key: the node marks the
// topic as having keyed records, which `fjord topic alter --partitions`
// reads (DESIGN.md section 24). Once, because every later keyed append
// says nothing new and the produce path must not pay for saying it; a
// lost mark (the node stopping first) is made again by the next
// process's first keyed append.
func (p *Partition) noteKeyed() {
	if p.keyedSeen.Load() || !p.keyedSeen.CompareAndSwap(false, true) {
		return
	}
	if f := p.m.opts.KeyedAppend; f != nil {
		f(p.topic, p.topicID)
	}
}

// appendAsLeader checks leadership and min.insync.replicas and writes,
// under p.mu shared so the epoch stamped, and returned, is the current
// one.
func (p *Partition) appendAsLeader(acks Acks, clientBytes int, write func(l *storage.Log, epoch int32) (storage.AppendInfo, error)) (storage.AppendInfo, int32, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(-1); err != nil {
		return storage.AppendInfo{}, -1, err
	}
	client := clientBytes != notClient
	if client && p.mu.migratedTo != "" {
		return storage.AppendInfo{}, -1, fmt.Errorf("%w: topic %s was migrated to %s (fjord topic migrate): produce to %s",
			ErrTopicMigrated, p.topic, p.mu.migratedTo, p.mu.migratedTo)
	}
	if err := p.checkLease(); err != nil {
		return storage.AppendInfo{}, -1, err
	}
	if acks == AcksAll && len(p.mu.isr) < p.mu.minInsync {
		return storage.AppendInfo{}, -1, fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicas, p, len(p.mu.isr), p.mu.minInsync)
	}
	// Last of the checks: a write refused for any other reason must not
	// draw on the disk's budget.
	if client && !p.internal {
		if err := p.m.disk.admit(clientBytes); err != nil {
			return storage.AppendInfo{}, -1, err
		}
	}
	info, err := write(p.log, p.mu.leaderEpoch)
	return info, p.mu.leaderEpoch, err
}

// produceWait is what an acks=all write waits under, fixed when it is
// made: its side of the delayed produce's completion rule.
type produceWait struct {
	// next is the offset after the write's last record: it is committed
	// once the high watermark reaches next.
	next int64
	// epoch is the leader epoch the write was made in.
	epoch int32
	// leaseLapses is Manager.leaseLapses as read before the write's
	// lease check.
	leaseLapses uint64
}

// produceState is the partition's side of the rule, as produceDone reads
// it under Partition.mu.
type produceState struct {
	// notLeader is checkLeaderLocked's answer: nil while the partition
	// exists and this node leads it.
	notLeader      error
	leaderEpoch    int32
	isr, minInsync int
	highWatermark  int64
	leaseLapses    uint64 // Manager.leaseLapses now
}

// delayedProduceOutcome is the delayed produce's completion rule (Kafka's
// DelayedProduce.tryComplete), pure: done, with the answer's error (nil:
// acknowledged), or not done yet. partition names the partition in the
// errors. In order:
//
//  1. The partition was deleted or this node no longer leads it: its
//     error.
//  2. The leader epoch the write was made in has ended, even if this
//     node leads again: NOT_LEADER_OR_FOLLOWER. In a later epoch the
//     offsets below the high watermark may hold another leader's
//     records (this node followed it meanwhile, or its image skipped
//     that epoch). The client retries; an idempotent producer's retry of
//     a write that survived is answered with its original offset.
//  3. The ISR is smaller than min.insync.replicas:
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND, the records in the log but not
//     with the redundancy asked for. Kafka answers it when the ISR shrank
//     meanwhile; Fjord as soon as the ISR is below, since its high
//     watermark then stays put (maybeAdvanceHighWatermarkLocked) and
//     waiting would only time out.
//  4. The high watermark has reached the write: acknowledged.
//  5. This node's leader lease lapsed after the write was made (a lapse
//     was noted since): NOT_LEADER_OR_FOLLOWER. A successor may have
//     been elected, so the high watermark may never reach the write
//     here; the client retries at the new leader now rather than after
//     its timeout (lease.go). After 4, not before: a committed write is
//     on every ISR member, any of which the controller may elect, so it
//     is acknowledged, lapse or not.
//  6. Otherwise: not done, wait.
func delayedProduceOutcome(w produceWait, s produceState, partition fmt.Stringer) (bool, error) {
	switch {
	case s.notLeader != nil:
		return true, s.notLeader
	case s.leaderEpoch != w.epoch:
		return true, fmt.Errorf("%w: %s: written in leader epoch %d, which ended (now %d) before the write was committed",
			ErrNotLeader, partition, w.epoch, s.leaderEpoch)
	case s.isr < s.minInsync:
		return true, fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicasAfterAppend, partition, s.isr, s.minInsync)
	case s.highWatermark >= w.next:
		return true, nil
	case s.leaseLapses != w.leaseLapses:
		return true, fmt.Errorf("%w: %s: this node's leader lease lapsed before the write was committed (high watermark %d, the write ends at %d), so another node may lead the partition now",
			ErrNotLeader, partition, s.highWatermark, w.next)
	default:
		return false, nil
	}
}

// produceDone reads the partition's state and applies
// delayedProduceOutcome to w.
func (p *Partition) produceDone(w produceWait) (bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return delayedProduceOutcome(w, produceState{
		notLeader:     p.checkLeaderLocked(-1),
		leaderEpoch:   p.mu.leaderEpoch,
		isr:           len(p.mu.isr),
		minInsync:     p.mu.minInsync,
		highWatermark: p.log.HighWatermark(),
		leaseLapses:   p.m.leaseLapses.Load(),
	}, p)
}

// waitForHighWatermark parks an acks=all produce until the high watermark
// reaches w.next, or the rule answers it otherwise. It is woken by
// high-watermark moves, leadership changes and lapses of the leader
// lease only (see Partition.wait), never by polling.
func (p *Partition) waitForHighWatermark(ctx context.Context, pw produceWait, timeout time.Duration) error {
	if done, err := p.produceDone(pw); done {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: %s: high watermark %d has not reached %d", ErrRequestTimedOut, p, p.log.HighWatermark(), pw.next)
	}
	w := newWaiter(false)
	p.addWaiter(w)
	defer p.removeWaiter(w)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Checked after registering, so an advance (or a lapse of the
		// lease) between the first check and addWaiter is not missed.
		if done, err := p.produceDone(pw); done {
			return err
		}
		select {
		case <-w.ch: // the high watermark moved, leadership changed or the lease lapsed: look again
		case <-timer.C: // the produce's timeout: the records stay in the log, unacknowledged
			if done, err := p.produceDone(pw); done {
				return err
			}
			return fmt.Errorf("%w: %s: high watermark %d has not reached %d after %v",
				ErrRequestTimedOut, p, p.log.HighWatermark(), pw.next, timeout)
		case <-ctx.Done(): // the connection closed or the server is stopping
			return fmt.Errorf("%w: %w", ErrRequestTimedOut, ctx.Err())
		}
	}
}
