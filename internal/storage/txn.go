package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
)

// Transactions, as a log keeps them (DESIGN.md section 23).
//
// The producer state (package producerstate) follows each producer's open
// transaction; the log applies every batch to it as it is written, and
// every transaction marker (a control batch) too: a marker that aborts a
// transaction indexes it in the segment that holds the marker (the
// transaction index, txnindex.go), for read_committed readers to skip its
// batches.
//
// The last stable offset (LSO) is where read_committed reads end: the
// first offset of the earliest transaction that is open, or decided but
// with its marker not yet below the high watermark; the high watermark
// when there is none. After each change under mu the log publishes the
// unstable transactions for LastStableOffset to read without a lock, since
// every fetch asks for it; the high watermark moves without mu, so a
// decided transaction is judged against the high watermark when read, and
// forgotten by the producer state at the next append.

// TxnMarker is a transaction marker a partition's leader writes for the
// transaction coordinator (WriteTxnMarkers).
type TxnMarker struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the coordinator's epoch on its transaction log
	// partition: a marker from an older one is fenced.
	CoordinatorEpoch int32
	Commit           bool
	// StrictEpoch is Transactions V2 (KIP-890), whose markers carry the
	// epoch the coordinator bumped for them: one not newer than the
	// producer's epoch here is refused.
	StrictEpoch bool
}

// AppendTxnMarker writes a transaction marker as the partition's leader:
// checked against the producer state (producerstate.State.CheckMarker:
// ErrInvalidProducerEpoch or ErrCoordinatorFenced, and nothing written),
// then appended as a control batch with the next offset and leaderEpoch.
// A marker for a producer with no transaction open here is written too,
// as Kafka does (the coordinator sends markers to every partition it
// added), and completes nothing.
func (l *Log) AppendTxnMarker(m TxnMarker, leaderEpoch int32) (AppendInfo, error) {
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return AppendInfo{}, fmt.Errorf("%w: a marker for producer %d at epoch %d", ErrInvalidBatch, m.ProducerID, m.ProducerEpoch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	if err := l.producers.CheckMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.StrictEpoch); err != nil {
		return AppendInfo{}, fmt.Errorf("%w (log %s)", err, l.name)
	}
	now := l.now().UnixMilli()
	b, err := record.EndTxnMarkerBatch(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, now)
	if err != nil {
		return AppendInfo{}, err
	}
	offset := l.leo.Load()
	record.SetBaseOffset(b, offset)
	record.SetPartitionLeaderEpoch(b, leaderEpoch)
	cfg := l.cfg.Load()
	if cfg.LogAppendTime {
		record.SetLogAppendTime(b, now)
	}
	h, err := record.ParseHeader(b)
	if err != nil {
		return AppendInfo{}, err
	}
	if err := l.maybeAssignEpochLocked(leaderEpoch, offset); err != nil {
		return AppendInfo{}, l.fail("leader epoch checkpoint", err)
	}
	if err := l.appendLocked(b, []record.Header{h}, cfg); err != nil {
		return AppendInfo{}, err
	}
	info := AppendInfo{FirstOffset: offset, LastOffset: offset, MaxTimestamp: now, LogAppendTime: -1, NumBatches: 1}
	if cfg.LogAppendTime {
		info.LogAppendTime = now
	}
	return info, nil
}

// TxnVerificationGuard starts the verification of a transactional batch
// of producer pid at epoch (KIP-890 part 1), as the leader does before it
// asks the transaction coordinator whether this partition is in the
// producer's transaction: needed is false (and guard 0) when the
// producer's transaction at epoch is open here already; otherwise guard
// is what AppendVerified must be given for a batch that opens it. An
// epoch older than the producer's here is ErrInvalidProducerEpoch
// (producerstate.State.VerificationGuard). supportsEpochBump: the
// producer is on Transactions V2.
func (l *Log) TxnVerificationGuard(pid int64, epoch int16, supportsEpochBump bool) (guard uint64, needed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return 0, false, err
	}
	guard, needed, err = l.producers.VerificationGuard(pid, epoch, l.now().UnixMilli(), supportsEpochBump)
	if err != nil {
		return 0, false, fmt.Errorf("%w (log %s)", err, l.name)
	}
	return guard, needed, nil
}

// AppendVerified is Append for a produce with a transactional id, whose
// transactional batches were verified with guard (0: none was needed, or
// none was asked): a batch that would open its producer's transaction
// here is refused with ErrInvalidTxnState, and nothing of data written,
// unless guard is still the producer's verification guard
// (producerstate.State.CheckVerified). A marker written since the guard
// was taken has cleared it: that is what refuses a produce that arrives
// after its transaction's abort marker.
func (l *Log) AppendVerified(data []byte, leaderEpoch int32, guard uint64) (AppendInfo, error) {
	return l.appendChecked(data, leaderEpoch, func(hdrs []record.Header) (producerstate.Duplicate, bool, error) {
		return l.producers.CheckVerified(hdrs, guard)
	})
}

// applyBatchLocked applies a batch of a producer, written to segment s, to
// the producer state. A marker that aborts a transaction indexes it in s.
// REQUIRES: l.mu held.
func (l *Log) applyBatchLocked(s *segment, h record.Header, b []byte, nowMs int64) error {
	if !h.IsControl() {
		l.producers.Update(h, nowMs)
		return nil
	}
	m, ok, err := controlMarker(b)
	if err != nil {
		return err
	}
	if !ok {
		// Not a transaction marker, or emptied by the cleaner.
		l.producers.Update(h, nowMs)
		return nil
	}
	ct, done := l.producers.UpdateMarker(h, m, nowMs)
	if !done || !ct.Aborted {
		return nil
	}
	return s.appendAbortedTxn(AbortedTxn{
		ProducerID:       ct.ProducerID,
		FirstOffset:      ct.FirstOffset,
		LastOffset:       ct.LastOffset,
		LastStableOffset: ct.LastStableOffset,
	})
}

// controlMarker reads the transaction marker in a control batch: ok is
// false when its first record is not one, or it has none.
func controlMarker(b []byte) (m producerstate.Marker, ok bool, err error) {
	err = record.ForEachRecord(b, func(r *record.Record) error {
		m, ok = producerstate.ParseMarker(r)
		return errStopIteration
	})
	if errors.Is(err, errStopIteration) {
		err = nil
	}
	return m, ok, err
}

// publishUnstableLocked publishes the producer state's unstable
// transactions if they changed since the last time, or always with
// force (the state was replaced).
// REQUIRES: l.mu held.
func (l *Log) publishUnstableLocked(force bool) {
	if !force && l.producers.TxnGeneration() == l.unstableGen && l.unstable.Load() != nil {
		return
	}
	u, gen := l.producers.Unstable()
	l.unstable.Store(&u)
	l.unstableGen = gen
}

// LastStableOffset returns the log's last stable offset: read_committed
// readers read below it. It is at most the high watermark, and at least
// the log start offset.
func (l *Log) LastStableOffset() int64 {
	// The high watermark first: the producer state forgets a decided
	// transaction only once the high watermark is past its marker, so a
	// list loaded after it holds every transaction this value needs.
	hw := l.highWatermark.Load()
	if u := l.unstable.Load(); u != nil {
		for _, t := range *u {
			if t.LastOffset >= 0 && t.LastOffset < hw {
				continue // decided, and its marker is replicated
			}
			return min(max(t.FirstOffset, l.logStartOffset.Load()), hw)
		}
	}
	return hw
}

// ReadCommitted is ReadRange for a read_committed reader: it reads below
// the last stable offset (and maxOffset), and answers in
// ReadResult.AbortedTxns the aborted transactions whose batches it may
// hold, for the reader to skip. A read at the last stable offset is empty,
// not out of range.
func (l *Log) ReadCommitted(buf []byte, offset int64, maxBytes int, maxOffset int64, minRangeBytes int) (ReadResult, error) {
	return l.read(buf, offset, maxBytes, maxOffset, minRangeBytes, true)
}

// AbortedTransactions returns the aborted transactions that overlap
// [fetchOffset, upperBound): those whose marker is at or past fetchOffset
// and whose first offset is below upperBound.
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64) ([]AbortedTxn, error) {
	if l.closed.Load() {
		return nil, ErrLogClosed
	}
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	return abortedTxns(*l.segments.Load(), fetchOffset, upperBound)
}

// abortedTxns searches the transaction indexes of segs, from the segment
// holding fetchOffset on (a marker follows its transaction's batches, so
// may be in any later segment), and stops at an entry whose last stable
// offset is at or past upperBound: every transaction indexed after it
// began at or past that (Kafka's TransactionIndex.collectAbortedTxns).
// REQUIRES: l.segLock held, so no segment's index is removed meanwhile.
func abortedTxns(segs []*segment, fetchOffset, upperBound int64) ([]AbortedTxn, error) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > fetchOffset }) - 1
	var out []AbortedTxn
	for _, s := range segs[max(i, 0):] {
		entries, err := s.abortedTxns()
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.LastOffset >= fetchOffset && e.FirstOffset < upperBound {
				out = append(out, e)
			}
			if e.LastStableOffset >= upperBound {
				return out, nil
			}
		}
	}
	return out, nil
}
