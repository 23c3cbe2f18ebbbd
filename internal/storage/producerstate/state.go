// Package producerstate keeps one partition log's idempotent-producer
// state (Kafka's ProducerStateManager): for each producer id, its epoch and
// the last five batches it wrote. That is what lets the log recognise a
// retried batch and answer with the offsets it was first written at, and
// refuse a batch that skips or repeats sequence numbers or comes from a
// fenced epoch. It also defines the snapshot file that lets a reopened log
// rebuild the state without reading the whole log (snapshot.go).
//
// The rules for a batch a client produces (Check), with lastSeq the last
// sequence number of the producer's newest batch:
//
//   - same epoch and the same sequence range as one of the producer's last
//     five batches: a duplicate; nothing is written and the original
//     batch's offsets are the answer;
//   - an epoch older than the producer's: ErrInvalidProducerEpoch;
//   - a newer epoch must start at sequence 0, and the same epoch must go on
//     at lastSeq+1 (after MaxInt32 comes 0); anything else is
//     ErrOutOfOrderSequence. A producer the log does not know may start
//     anywhere (KIP-360): its state may be gone for good reasons.
//
// Batches already in the log (replicated from a leader, or read back when
// the state is rebuilt) are applied with Update, which never refuses one:
// the log is the truth. Transaction markers are applied with UpdateMarker
// (txn.go, which keeps the open transactions). A leader that verifies
// transactions (KIP-890 part 1) checks with CheckVerified, Check plus the
// verification guard VerificationGuard handed out (verify.go).
//
// Kafka accepts any sequence from a producer it does not know (KIP-360),
// so that a producer whose state was lost to retention or expiration can go
// on; Fjord's contract asks for sequence 0, and producers whose batches
// were deleted are kept until they expire for the same reason.
//
// A State is not safe for concurrent use: the log's appender owns it.
package producerstate

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fjordmq/fjord/internal/record"
)

// Errors Check returns; the storage package re-exports them beside its
// other sentinels.
var (
	// ErrOutOfOrderSequence: a batch whose first sequence number does not
	// follow the producer's last one. OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: a batch from an epoch older than the
	// producer's newest (a fenced producer). INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrInvalidTxnState: a batch that does not fit the producer's
	// transaction: a non-transactional one while it has a transaction
	// open on the partition, or (CheckVerified) a transactional one that
	// would open one without the producer's verification guard.
	// INVALID_TXN_STATE.
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrCoordinatorFenced: a transaction marker from a coordinator epoch
	// older than the last this partition took for the producer.
	// TRANSACTION_COORDINATOR_FENCED.
	ErrCoordinatorFenced = errors.New("transaction coordinator fenced")
)

// MaxBatches is how many of a producer's newest batches are remembered
// (Kafka's NUM_BATCHES_TO_RETAIN): a producer has at most five requests in
// flight with idempotence on, so any retry is of one of these.
const MaxBatches = 5

// Batch is what the state remembers of one batch.
type Batch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
}

// Entry is one producer's state.
type Entry struct {
	Epoch int16
	// Batches are the producer's newest batches in this epoch, oldest
	// first, at most MaxBatches. Empty after an epoch bump by a marker.
	Batches []Batch
	// LastTimestamp is the max timestamp of the producer's newest batch.
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// marker here (-1: none yet).
	CoordinatorEpoch int32
	// TxnFirstOffset is the first offset of the producer's open
	// transaction on this partition (-1: none).
	TxnFirstOffset int64
}

// entry is Entry without a slice per producer.
type entry struct {
	epoch         int16
	n             uint8
	batches       [MaxBatches]Batch // batches[:n], oldest first
	lastTimestamp int64
	// coordinatorEpoch is the last marker's (-1: none) and txnFirstOffset
	// the open transaction's first offset (-1: none; when set, the
	// producer is in State.ongoing).
	coordinatorEpoch int32
	txnFirstOffset   int64
	// lastSeenMs is when this log last saw a batch of the producer, by
	// the broker's clock (see RemoveExpired). Not in snapshots: a loaded
	// producer counts as seen when it is loaded.
	lastSeenMs int64
}

func (e *entry) export() Entry {
	return Entry{Epoch: e.epoch, Batches: slices.Clone(e.batches[:e.n]), LastTimestamp: e.lastTimestamp,
		CoordinatorEpoch: e.coordinatorEpoch, TxnFirstOffset: e.txnFirstOffset}
}

// newEntry is a producer first seen at epoch.
func newEntry(epoch int16) *entry {
	return &entry{epoch: epoch, coordinatorEpoch: -1, txnFirstOffset: -1}
}

func (e *entry) add(b Batch) {
	if int(e.n) == MaxBatches {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
}

// setEpoch moves the producer to epoch; a new epoch starts with no
// batches, so its first must be sequence 0 and no older batch can match
// it as a duplicate.
func (e *entry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n = 0
	}
}

func (e *entry) duplicateOf(epoch int16, first, last int32) (Batch, bool) {
	if epoch != e.epoch {
		return Batch{}, false
	}
	for _, b := range e.batches[:e.n] {
		if b.FirstSeq == first && b.LastSeq == last {
			return b, true
		}
	}
	return Batch{}, false
}

// State is the producer state of one log.
type State struct {
	producers map[int64]*entry
	// ongoing maps each producer with an open transaction to the
	// transaction's first offset. Invariant: exactly the producers whose
	// entry has txnFirstOffset >= 0, with that offset.
	ongoing map[int64]int64
	// decided are the transactions completed whose marker the high
	// watermark has not passed yet (Kafka's unreplicated transactions),
	// in marker order: until it has, they still hold the last stable
	// offset (txn.go). Snapshots keep their producer, first offset and
	// marker offset, which is all that is used of them.
	decided []CompletedTxn
	// txnGen counts the changes to ongoing and decided, so that a reader
	// of Unstable knows when its copy is stale.
	txnGen uint64
	// verifying are the leader's verification entries (verify.go), by
	// producer id; nil until the first. Not in snapshots. Invariant:
	// every guard in it is unique and not 0.
	verifying map[int64]verification
}

// New returns an empty state.
func New() *State { return &State{producers: map[int64]*entry{}, ongoing: map[int64]int64{}} }

// Len returns the number of producers.
func (s *State) Len() int { return len(s.producers) }

// Get returns a copy of producer pid's state.
func (s *State) Get(pid int64) (Entry, bool) {
	e, ok := s.producers[pid]
	if !ok {
		return Entry{}, false
	}
	return e.export(), true
}

// All returns a copy of every producer's state.
func (s *State) All() map[int64]Entry {
	out := make(map[int64]Entry, len(s.producers))
	for pid, e := range s.producers {
		out[pid] = e.export()
	}
	return out
}

// Clone returns a deep copy.
func (s *State) Clone() *State {
	c := &State{producers: make(map[int64]*entry, len(s.producers)), ongoing: maps.Clone(s.ongoing), decided: slices.Clone(s.decided), txnGen: s.txnGen,
		verifying: maps.Clone(s.verifying)}
	for pid, e := range s.producers {
		cp := *e
		c.producers[pid] = &cp
	}
	return c
}

// LastSeq returns the last sequence number of a batch starting at base
// with lastOffsetDelta more records. Sequence numbers wrap from MaxInt32
// to 0, as Kafka's producers number them.
func LastSeq(base, lastOffsetDelta int32) int32 {
	if base < 0 || lastOffsetDelta < 0 {
		return base // no sequence: nothing to wrap
	}
	return int32((int64(base) + int64(lastOffsetDelta)) % (math.MaxInt32 + 1))
}

// inSequence reports whether next follows last.
func inSequence(last, next int32) bool {
	return int64(next) == (int64(last)+1)%(math.MaxInt32+1)
}

// Duplicate describes the batches a retried produce already wrote.
type Duplicate struct {
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
}

// pending is what an earlier batch of the same Check call left for its
// producer.
type pending struct {
	pid     int64
	epoch   int16
	lastSeq int32
	// txnOpen: the producer has a transaction open here after the batch.
	txnOpen bool
}

// Check checks the batches of one produce, in order, each against the
// state as the batches before it would leave it; it changes nothing. It
// returns dup=true when the produce is a retry of batches already written
// (see Duplicate), an error wrapping ErrOutOfOrderSequence or
// ErrInvalidProducerEpoch when a batch breaks the rules, and otherwise
// nothing: Update each batch once it is written.
//
// A non-transactional batch from a producer with a transaction open here
// is ErrInvalidTxnState (a duplicate is answered first, as Kafka does).
// Check does not verify transactions (KIP-890): a transactional batch
// opens its producer's transaction unasked; CheckVerified does.
//
// Batches without a producer id are not checked. A duplicate is only
// answered as one when every batch of the produce is a duplicate and they
// were written one after another (a retried produce): the answer to an
// append is one offset range for all of its batches, written together, so
// a produce that mixes new batches with written ones has no answer that is
// true for both and is refused as out of order. Kafka's clients never send
// one: a produce request carries one batch per partition.
func (s *State) Check(hdrs []record.Header) (dup Duplicate, isDup bool, err error) {
	return s.check(hdrs, false, 0)
}

// check is Check and, with verify, CheckVerified (verify.go) with guard.
func (s *State) check(hdrs []record.Header, verify bool, guard uint64) (dup Duplicate, isDup bool, err error) {
	var (
		seen  []pending // a few at most: batches of one produce
		ndups int
	)
	for i := range hdrs {
		h := &hdrs[i]
		if !h.HasProducerID() {
			continue
		}
		pid, epoch, first := h.ProducerID, h.ProducerEpoch, h.BaseSequence
		last := LastSeq(first, h.LastOffsetDelta)
		j := slices.IndexFunc(seen, func(p pending) bool { return p.pid == pid })
		e := s.producers[pid]
		// The producer as the batches before this one leave it; known is
		// false for a producer this partition does not know, which may
		// start at any sequence, as in Kafka (KIP-360): its state can be
		// gone for good reasons (retention or DeleteRecords removed its
		// batches, producer.id.expiration.ms passed), and refusing it
		// would wedge a live producer on OUT_OF_ORDER_SEQUENCE_NUMBER
		// forever. Deduplication across such a loss is impossible
		// anyway; within the state kept, it is exact.
		var (
			known, hasLast, txnOpen bool
			curEpoch                int16
			lastSeq                 int32 = -1
		)
		switch {
		case j >= 0:
			// An earlier batch of this produce moved the producer on.
			p := seen[j]
			known, curEpoch, lastSeq, hasLast, txnOpen = true, p.epoch, p.lastSeq, true, p.txnOpen
		case e != nil:
			if b, ok := e.duplicateOf(epoch, first, last); ok {
				if ndups > 0 && b.FirstOffset != dup.LastOffset+1 {
					return Duplicate{}, false, fmt.Errorf("%w: producer %d: retried batches at offsets %d.. and %d.. were not written together",
						ErrOutOfOrderSequence, pid, dup.FirstOffset, b.FirstOffset)
				}
				if ndups == 0 {
					dup = Duplicate{FirstOffset: b.FirstOffset, MaxTimestamp: b.MaxTimestamp}
				}
				dup.LastOffset = b.LastOffset
				dup.MaxTimestamp = max(dup.MaxTimestamp, b.MaxTimestamp)
				ndups++
				continue
			}
			if e.txnFirstOffset >= 0 && !h.IsTransactional() {
				return Duplicate{}, false, fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction from offset %d is open",
					ErrInvalidTxnState, pid, e.txnFirstOffset)
			}
			known, curEpoch, hasLast, txnOpen = true, e.epoch, e.n > 0, e.txnFirstOffset >= 0
			if hasLast {
				lastSeq = e.batches[e.n-1].LastSeq
			}
		}
		opens := h.IsTransactional() && !h.IsControl() && !(txnOpen && curEpoch == epoch)
		if verify && opens {
			// Kafka's order: the fenced epoch first, so that a stale
			// producer gets the error it recovers from, then the guard,
			// then the sequence.
			if known && epoch < curEpoch {
				return Duplicate{}, false, fmt.Errorf("%w: producer %d epoch %d, older than its epoch %d on this partition",
					ErrInvalidProducerEpoch, pid, epoch, curEpoch)
			}
			if !s.verified(pid, guard) {
				return Duplicate{}, false, fmt.Errorf("%w: producer %d epoch %d: the partition was not verified as part of the producer's transaction (record was not part of an ongoing transaction)",
					ErrInvalidTxnState, pid, epoch)
			}
		}
		if known {
			if err := checkNext(pid, curEpoch, lastSeq, hasLast, epoch, first); err != nil {
				return Duplicate{}, false, err
			}
		}
		// Update opens a transaction at a transactional batch and keeps
		// it open across epochs until a marker.
		p := pending{pid, epoch, last, txnOpen || opens}
		if j >= 0 {
			seen[j] = p
		} else {
			seen = append(seen, p)
		}
	}
	if ndups == 0 {
		return Duplicate{}, false, nil
	}
	if ndups < len(hdrs) {
		return Duplicate{}, false, fmt.Errorf("%w: a produce of %d batches holds %d already written (at offsets %d..%d) beside new ones",
			ErrOutOfOrderSequence, len(hdrs), ndups, dup.FirstOffset, dup.LastOffset)
	}
	return dup, true, nil
}

// CheckCoordinator is Check for batches a coordinator writes on a
// producer's behalf (storage.Log.AppendAsCoordinator): each producer's
// epoch may not be older than its latest here (ErrInvalidProducerEpoch),
// and a non-transactional batch may not come while its transaction is
// open (ErrInvalidTxnState); sequences are not the producer's, so they
// are neither checked nor used to find duplicates. With verify, a
// transactional batch that would open its producer's transaction here is
// refused unless guard is the producer's verification guard, as
// CheckVerified refuses a produce's (the group coordinator verifies a
// TxnOffsetCommit as a partition leader verifies a produce).
func (s *State) CheckCoordinator(hdrs []record.Header, verify bool, guard uint64) error {
	for i := range hdrs {
		h := &hdrs[i]
		if !h.HasProducerID() {
			continue
		}
		e := s.producers[h.ProducerID]
		if e != nil && h.ProducerEpoch < e.epoch {
			return fmt.Errorf("%w: producer %d epoch %d, older than its epoch %d on this partition",
				ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
		if e != nil && e.txnFirstOffset >= 0 && !h.IsTransactional() {
			return fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction from offset %d is open",
				ErrInvalidTxnState, h.ProducerID, e.txnFirstOffset)
		}
		open := e != nil && e.txnFirstOffset >= 0 && e.epoch == h.ProducerEpoch
		if verify && h.IsTransactional() && !h.IsControl() && !open && !s.verified(h.ProducerID, guard) {
			return fmt.Errorf("%w: producer %d epoch %d: the partition was not verified as part of the producer's transaction (record was not part of an ongoing transaction)",
				ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch)
		}
	}
	return nil
}

// checkNext applies the epoch and sequence rules to a batch of
// (epoch, first) from producer pid, whose state has curEpoch and, when
// hasLast, lastSeq.
func checkNext(pid int64, curEpoch int16, lastSeq int32, hasLast bool, epoch int16, first int32) error {
	switch {
	case epoch < curEpoch:
		return fmt.Errorf("%w: producer %d epoch %d, older than its epoch %d on this partition",
			ErrInvalidProducerEpoch, pid, epoch, curEpoch)
	case epoch > curEpoch || !hasLast:
		if first != 0 {
			return fmt.Errorf("%w: producer %d epoch %d starts at sequence %d, not 0",
				ErrOutOfOrderSequence, pid, epoch, first)
		}
	case !inSequence(lastSeq, first):
		return fmt.Errorf("%w: producer %d epoch %d: sequence %d, expected %d",
			ErrOutOfOrderSequence, pid, epoch, first, (int64(lastSeq)+1)%(math.MaxInt32+1))
	}
	return nil
}

// Update applies a batch written to the log, offsets assigned: appended
// after Check, replicated from a leader, or read back while rebuilding.
// It never refuses a batch. nowMs is the broker's clock: when the batch
// was written, or when it was read back. A transactional batch of a
// producer with no transaction open here opens one at its base offset.
// A transaction marker goes to UpdateMarker; a control batch given here
// (one without its marker record: the cleaner emptied it) only moves the
// producer's epoch and timestamps.
func (s *State) Update(h record.Header, nowMs int64) {
	if !h.HasProducerID() {
		return
	}
	e := s.touch(h, nowMs)
	if h.IsTransactional() {
		// Any transactional batch clears the producer's verification, as
		// Kafka's does, not only one that opens a transaction: after it,
		// the producer's transaction is open here at the batch's epoch,
		// and a guard taken before it answered for the state before.
		s.clearVerification(h.ProducerID)
	}
	if h.IsControl() {
		return
	}
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = h.BaseOffset
		s.ongoing[h.ProducerID] = h.BaseOffset
		s.txnGen++
	}
	e.add(Batch{
		FirstSeq:     h.BaseSequence,
		LastSeq:      LastSeq(h.BaseSequence, h.LastOffsetDelta),
		FirstOffset:  h.BaseOffset,
		LastOffset:   h.LastOffset(),
		MaxTimestamp: h.MaxTimestamp,
	})
}

// touch returns the entry of h's producer, made if new, at h's epoch
// and seen now.
func (s *State) touch(h record.Header, nowMs int64) *entry {
	e := s.producers[h.ProducerID]
	if e == nil {
		e = newEntry(h.ProducerEpoch)
		s.producers[h.ProducerID] = e
	}
	e.setEpoch(h.ProducerEpoch)
	e.lastTimestamp = h.MaxTimestamp
	e.lastSeenMs = nowMs
	return e
}

// RemoveExpired forgets the producers this log has not seen a batch from
// for expirationMs (Kafka's producer.id.expiration.ms), and returns how
// many it forgot. Without it the state would grow with every producer that
// ever wrote to the partition. A producer with a transaction open here
// never expires: its transaction holds the last stable offset until a
// marker ends it, and the marker needs its first offset.
//
// Kafka measures from the newest batch's timestamp, which is the
// producer's clock under CreateTime: a producer that sends old timestamps
// (a mirror replaying history) would be expired at every pass and lose
// its deduplication. So this measures by the broker's clock, from when the producer was last seen (or loaded, after a
// restart: the later, so never early).
//
// Verification entries (verify.go) not asked for in expirationMs go too,
// as in Kafka; they are not counted.
func (s *State) RemoveExpired(nowMs, expirationMs int64) int {
	s.removeExpiredVerifications(nowMs, expirationMs)
	n := 0
	for pid, e := range s.producers {
		if e.txnFirstOffset < 0 && nowMs-e.lastSeenMs >= expirationMs {
			delete(s.producers, pid)
			n++
		}
	}
	return n
}

// sortedIDs returns the producer ids in ascending order.
func (s *State) sortedIDs() []int64 {
	return slices.Sorted(maps.Keys(s.producers))
}
