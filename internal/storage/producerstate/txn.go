package producerstate

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fjordmq/fjord/internal/record"
)

// Transactions, as one partition sees them (Kafka's ProducerStateManager
// and ProducerAppendInfo; DESIGN.md section 23 has the rules and where
// they come from).
//
// A producer's transaction opens on this partition with its first
// transactional batch (Update) and ends with a transaction marker, a
// control batch the coordinator has the partition's leader write
// (UpdateMarker): a commit or an abort. Between the two its first offset
// holds the partition's last stable offset back: read_committed readers
// may not read past the first record of a transaction whose outcome is
// not known. After the marker, the transaction still holds it until the
// high watermark passes the marker (OnHighWatermark), so that no reader
// sees a transaction's records as committed before its commit is
// replicated. An aborted transaction is returned to the log, which
// indexes it for read_committed readers to skip (the transaction index).
//
// The leader checks a marker before it writes one (CheckMarker); a
// follower or a rebuild applies what the log holds.

// Marker is a transaction marker's content: what its control record says.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ParseMarker reads the marker of a control batch's first record. ok is
// false for a control record that is not a transaction marker.
func ParseMarker(r *record.Record) (m Marker, ok bool) {
	t, ce, err := record.ParseEndTxnMarker(r)
	if err != nil {
		return Marker{}, false
	}
	return Marker{Commit: t == record.ControlCommit, CoordinatorEpoch: ce}, true
}

// CompletedTxn is a transaction a marker ended.
type CompletedTxn struct {
	ProducerID int64
	// FirstOffset is the transaction's first offset on this partition,
	// LastOffset its marker's.
	FirstOffset, LastOffset int64
	Aborted                 bool
	// LastStableOffset is what an aborted transaction's index entry
	// records: the first offset of the earliest other transaction still
	// open at the marker (one that began below it), or LastOffset+1.
	// Every transaction the index records after this one began at or
	// past it, which lets a search stop early.
	LastStableOffset int64
}

// CheckMarker is the leader's check of a marker it is about to write for
// producer pid: a marker from an epoch older than the producer's, or, with
// strictEpoch (Transactions V2, whose markers carry the epoch the
// coordinator bumped), not newer than it, is ErrInvalidProducerEpoch; one
// from a coordinator epoch older than the producer's last marker's is
// ErrCoordinatorFenced. A producer this partition does not know passes.
//
// Under strictEpoch, a marker at the producer's epoch while it has no
// transaction open here is a resend (a new coordinator finishing a
// decided transaction, or a lost answer) and passes: it completes
// nothing. Refusing it left Kafka's coordinator unable to finish the
// transaction, and the producer answered CONCURRENT_TRANSACTIONS for
// good (KAFKA-19999).
func (s *State) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32, strictEpoch bool) error {
	e := s.producers[pid]
	if e == nil {
		return nil
	}
	resend := strictEpoch && epoch == e.epoch && e.txnFirstOffset < 0
	if epoch < e.epoch || strictEpoch && epoch == e.epoch && !resend {
		return fmt.Errorf("%w: a marker for producer %d at epoch %d, and the producer is at epoch %d here",
			ErrInvalidProducerEpoch, pid, epoch, e.epoch)
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: a marker for producer %d from coordinator epoch %d, after one from %d",
			ErrCoordinatorFenced, pid, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// UpdateMarker applies a transaction marker written to the log (h is its
// control batch's header, its offset assigned): the producer takes the
// marker's epoch (a new one clears its batch history) and coordinator
// epoch, and the transaction it had open here, if any, is completed and
// returned. It never refuses a marker. A marker for no open transaction
// (one whose producer wrote nothing here) completes nothing.
//
// The producer's verification entry goes, whatever the marker completes
// (verify.go): a coordinator's answer given before the marker was about
// the transaction the marker ended, and a produce of that transaction
// arriving after its abort marker must not open a new one here.
func (s *State) UpdateMarker(h record.Header, m Marker, nowMs int64) (CompletedTxn, bool) {
	if !h.HasProducerID() {
		return CompletedTxn{}, false
	}
	s.clearVerificationAtMarker(h.ProducerID, h.ProducerEpoch)
	e := s.touch(h, nowMs)
	e.coordinatorEpoch = m.CoordinatorEpoch
	if e.txnFirstOffset < 0 {
		return CompletedTxn{}, false
	}
	ct := CompletedTxn{ProducerID: h.ProducerID, FirstOffset: e.txnFirstOffset, LastOffset: h.BaseOffset,
		Aborted: !m.Commit, LastStableOffset: h.BaseOffset + 1}
	for pid, first := range s.ongoing {
		if pid != h.ProducerID && first < h.BaseOffset && first < ct.LastStableOffset {
			ct.LastStableOffset = first
		}
	}
	e.txnFirstOffset = -1
	delete(s.ongoing, h.ProducerID)
	s.decided = append(s.decided, ct)
	s.txnGen++
	return ct, true
}

// HasOngoingTransaction reports whether producer pid has a transaction
// open here at epoch.
func (s *State) HasOngoingTransaction(pid int64, epoch int16) bool {
	e := s.producers[pid]
	return e != nil && e.txnFirstOffset >= 0 && e.epoch == epoch
}

// FirstUnstableOffset is the least first offset of the transactions open
// here and of those decided whose marker the high watermark has not
// passed (OnHighWatermark); ok is false when there is none.
func (s *State) FirstUnstableOffset() (offset int64, ok bool) {
	for _, first := range s.ongoing {
		if !ok || first < offset {
			offset, ok = first, true
		}
	}
	for _, ct := range s.decided {
		if !ok || ct.FirstOffset < offset {
			offset, ok = ct.FirstOffset, true
		}
	}
	return offset, ok
}

// OnHighWatermark forgets the decided transactions whose marker lies
// below hw: they no longer hold the last stable offset.
func (s *State) OnHighWatermark(hw int64) {
	if n := len(s.decided); n > 0 {
		if s.decided = slices.DeleteFunc(s.decided, func(ct CompletedTxn) bool { return ct.LastOffset < hw }); len(s.decided) != n {
			s.txnGen++
		}
	}
}

// UnstableTxn is a transaction that holds the last stable offset: one
// open here (LastOffset -1), or one decided whose marker, at LastOffset,
// the high watermark had not passed when the state last heard of it.
type UnstableTxn struct {
	FirstOffset, LastOffset int64
}

// Unstable returns the transactions that hold the last stable offset,
// sorted by first offset (a copy), and the generation it is of: while
// TxnGeneration returns the same, the copy is current.
func (s *State) Unstable() ([]UnstableTxn, uint64) {
	out := make([]UnstableTxn, 0, len(s.ongoing)+len(s.decided))
	for _, first := range s.ongoing {
		out = append(out, UnstableTxn{FirstOffset: first, LastOffset: -1})
	}
	for _, ct := range s.decided {
		out = append(out, UnstableTxn{FirstOffset: ct.FirstOffset, LastOffset: ct.LastOffset})
	}
	slices.SortFunc(out, func(a, b UnstableTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, s.txnGen
}

// TxnGeneration changes whenever Unstable's answer may have.
func (s *State) TxnGeneration() uint64 { return s.txnGen }

// OngoingTransactions returns the open transactions' first offsets, by
// producer id (a copy).
func (s *State) OngoingTransactions() map[int64]int64 {
	out := make(map[int64]int64, len(s.ongoing))
	for pid, first := range s.ongoing {
		out[pid] = first
	}
	return out
}
