package txn

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a transaction's state, numbered as Kafka writes it in
// __transaction_state (TransactionState; C§1.2).
type State int8

const (
	StateEmpty          State = 0 // no transaction: after InitProducerId
	StateOngoing        State = 1 // partitions added, not yet ended
	StatePrepareCommit  State = 2 // commit decided; markers being written
	StatePrepareAbort   State = 3 // abort decided; markers being written
	StateCompleteCommit State = 4 // every commit marker written
	StateCompleteAbort  State = 5 // every abort marker written
	// StateDead is only ever a pending state: the id is expiring and a
	// tombstone is being written. Never written as a value.
	StateDead State = 6
	// StatePrepareEpochFence is only ever an intermediate state of a
	// fence, immediately followed by PrepareAbort. Never written.
	StatePrepareEpochFence State = 7
)

// String is the state's name, as DescribeTransactions and
// ListTransactions answer it.
func (s State) String() string { return kmsg.TransactionState(s).String() }

// ParseState returns the state named name exactly (Kafka's
// TransactionState.fromName: ListTransactions' state filters are matched
// by exact name).
func ParseState(name string) (State, bool) {
	for s := StateEmpty; s <= StatePrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// validPrevious is Kafka's TransactionState.VALID_PREVIOUS_STATES
// (C§1.3): the states a transition to the key may start from. The
// check is against the current state, never a pending one. A PrepareAbort
// from Empty or Complete* is legal only under Transactions V2 (an abort
// of a transaction with no partitions; checkTransition enforces it).
var validPrevious = map[State][]State{
	StateEmpty:             {StateEmpty, StateCompleteCommit, StateCompleteAbort},
	StateOngoing:           {StateEmpty, StateOngoing, StateCompleteCommit, StateCompleteAbort},
	StatePrepareCommit:     {StateOngoing},
	StatePrepareAbort:      {StateOngoing, StatePrepareEpochFence, StateEmpty, StateCompleteCommit, StateCompleteAbort},
	StateCompleteCommit:    {StatePrepareCommit},
	StateCompleteAbort:     {StatePrepareAbort},
	StateDead:              {StateEmpty, StateCompleteCommit, StateCompleteAbort},
	StatePrepareEpochFence: {StateOngoing},
}

// canTransition reports whether a transition from one state to another
// is one of Kafka's.
func canTransition(from, to State) bool { return slices.Contains(validPrevious[to], from) }

// expirable: the states an idle id may be tombstoned from (C§2.6).
func (s State) expirable() bool {
	return s == StateEmpty || s == StateCompleteCommit || s == StateCompleteAbort
}

func (s State) isPrepare() bool { return s == StatePrepareCommit || s == StatePrepareAbort }

func (s State) isComplete() bool { return s == StateCompleteCommit || s == StateCompleteAbort }

// Transaction versions (C§11.1): the feature transaction.version's
// levels, as a transaction stores the one its client used.
const (
	transactionV0 int16 = 0
	transactionV2 int16 = 2
)

// transit is one complete set of a transaction's persisted values, what
// one __transaction_state record holds (Kafka's TxnTransitMetadata): a
// transaction's committed values are the last transit applied, and a
// transition in flight is a transit pending. Transits are values: every
// prepare method returns a new one, and partitions is never changed in
// place (transits share it).
type transit struct {
	producerID int64
	// prevProducerID is the producer id before the last transition
	// (each records the one it started from): after a rotation, the
	// old id, so a retry across it is recognised.
	prevProducerID int64
	// nextProducerID is, under Transactions V2, the id a Prepare*
	// transition at an exhausted epoch allocated, adopted at epoch 0 by
	// the Complete*; -1 otherwise.
	nextProducerID int64
	// producerEpoch: -1 only for a new id whose first record is being
	// written. Invariant: <= maxEpoch.
	producerEpoch int16
	// lastProducerEpoch is the epoch before the last bump, to recognise
	// a retried bump (KIP-360); -1 for none.
	lastProducerEpoch int16
	timeoutMs         int32
	state             State
	// partitions of the transaction, sorted, no duplicates (nil: none).
	// Invariant: nil in Empty, Complete* and Dead.
	partitions []TopicPartition
	// startMs is when the transaction's first partition was added (the
	// timeout counts from it); -1 after InitProducerId.
	startMs int64
	// lastUpdateMs is when the last transition was prepared
	// (expiration counts from it).
	lastUpdateMs int64
	// clientTransactionVersion is the version of the request that made
	// the last Ongoing or Prepare* transition: the markers' version.
	clientTransactionVersion int16
}

// epochExhausted reports whether epoch leaves no room for another
// session's bump: Kafka's isEpochExhausted, epoch >= Short.MAX_VALUE - 1
// (a bump to MAX stays possible for a fence or a V2 end).
func epochExhausted(epoch, maxEpoch int16) bool { return epoch >= maxEpoch-1 }

// newTransit is a new id's values before its first record: Empty at
// epoch -1 with producer id pid.
func newTransit(pid int64, timeoutMs int32, nowMs int64) transit {
	return transit{
		producerID:        pid,
		prevProducerID:    -1,
		nextProducerID:    -1,
		producerEpoch:     -1,
		lastProducerEpoch: -1,
		timeoutMs:         timeoutMs,
		state:             StateEmpty,
		startMs:           -1,
		lastUpdateMs:      nowMs,
	}
}

// base is t as the starting point of a transition at nowMs: the
// previous producer id becomes t's.
func (t transit) base(to State, nowMs int64) transit {
	n := t
	n.state = to
	n.prevProducerID = t.producerID
	n.lastUpdateMs = nowMs
	return n
}

// incrementEpoch is InitProducerId's bump of an id in Empty or Complete*
// (Kafka's prepareIncrementProducerEpoch, C§1.5). expectedEpoch is the
// KIP-360 epoch the client sent, -1 for none:
//   - none: epoch+1, no last epoch (a new session);
//   - the current epoch (or the id is new, at -1): epoch+1, remembering
//     the current one as the last;
//   - the last epoch: a retry of a bump whose answer was lost: no bump;
//   - anything else: a zombie's, ErrProducerFenced.
//
// The caller rotates the producer id instead when the epoch is exhausted
// and the client expects nothing or the current epoch.
func (t transit) incrementEpoch(timeoutMs int32, expectedEpoch int16, maxEpoch int16, nowMs int64) (transit, error) {
	n := t.base(StateEmpty, nowMs)
	switch {
	case expectedEpoch == -1:
		n.producerEpoch, n.lastProducerEpoch = t.producerEpoch+1, -1
	case t.producerEpoch == -1 || expectedEpoch == t.producerEpoch:
		n.producerEpoch, n.lastProducerEpoch = t.producerEpoch+1, t.producerEpoch
	case expectedEpoch == t.lastProducerEpoch:
		// A retry: answer the epoch the lost answer carried.
	default:
		return transit{}, ErrProducerFenced
	}
	if n.producerEpoch > maxEpoch || n.producerEpoch < 0 {
		panic(fmt.Sprintf("txn: epoch bump from %d to %d past the limit %d", t.producerEpoch, n.producerEpoch, maxEpoch))
	}
	n.timeoutMs = timeoutMs
	n.partitions = nil
	n.startMs = -1
	n.nextProducerID = -1
	return n, nil
}

// rotateProducerID is InitProducerId's move to a new producer id at
// epoch 0 when the epoch is exhausted (prepareProducerIdRotation).
// expected: the client sent the current epoch, which becomes the last
// epoch so a retry (with the old id and that epoch) is recognised.
func (t transit) rotateProducerID(newPID int64, timeoutMs int32, expected bool, nowMs int64) transit {
	n := t.base(StateEmpty, nowMs)
	n.producerID = newPID
	n.producerEpoch = 0
	n.lastProducerEpoch = -1
	if expected {
		n.lastProducerEpoch = t.producerEpoch
	}
	n.nextProducerID = -1
	n.timeoutMs = timeoutMs
	n.partitions = nil
	n.startMs = -1
	return n
}

// fenceEpoch is the first half of a fence (prepareFenceProducerEpoch):
// the Ongoing transaction's epoch+1, so whatever its producer sends next
// is stale. Only abortOrCommit(fence) may follow it.
func (t transit) fenceEpoch(maxEpoch int16, nowMs int64) (transit, error) {
	if t.producerEpoch >= maxEpoch {
		return transit{}, ErrUnknownServerError
	}
	n := t.base(StatePrepareEpochFence, nowMs)
	n.producerEpoch = t.producerEpoch + 1
	return n, nil
}

// addPartitions is AddPartitionsToTxn's move to Ongoing
// (prepareAddPartitions): the partitions join the set, and the
// transaction starts now if it was not Ongoing yet.
func (t transit) addPartitions(tps []TopicPartition, tv int16, nowMs int64) transit {
	n := t.base(StateOngoing, nowMs)
	n.partitions = unionPartitions(t.partitions, tps)
	if t.state != StateOngoing {
		n.startMs = nowMs
	}
	n.clientTransactionVersion = tv
	return n
}

// endKind says how a Prepare* transition comes about.
type endKind int8

const (
	endClient     endKind = iota // EndTxn from the client
	endFence                     // after fenceEpoch: a coordinator abort
	endEmptyAbort                // Transactions V2 abort of Empty or Complete*
)

// prepareAbortOrCommit is the move to PrepareCommit or PrepareAbort
// (prepareAbortOrCommit, C§1.5, C§7.2, C§7.3):
//   - V0/V1: the epoch stays; after a fence it is the fenced one, with
//     no last epoch;
//   - V2: epoch+1 with the current one as the last; after a fence, the
//     fence's bump is that one bump (KAFKA-19367);
//   - an empty abort starts its (empty) transaction now;
//   - nextPID (-1: none) is the producer id a V2 end at an exhausted
//     epoch moves to.
func (t transit) prepareAbortOrCommit(to State, tv int16, kind endKind, nextPID int64, maxEpoch int16, nowMs int64) transit {
	n := t.base(to, nowMs)
	switch {
	case tv >= transactionV2 && kind == endFence:
		n.lastProducerEpoch = t.producerEpoch - 1
	case tv >= transactionV2:
		n.producerEpoch = t.producerEpoch + 1
		n.lastProducerEpoch = t.producerEpoch
	case kind == endFence:
		n.lastProducerEpoch = -1
	}
	if n.producerEpoch > maxEpoch {
		panic(fmt.Sprintf("txn: end of a transaction at epoch %d past the limit %d", t.producerEpoch, maxEpoch))
	}
	if kind == endEmptyAbort {
		n.startMs = nowMs
	}
	n.nextProducerID = nextPID
	n.clientTransactionVersion = tv
	return n
}

// prepareComplete is the move from Prepare* to Complete* once every
// marker is written (prepareComplete): the partitions are done, and a V2
// transaction that ended at an exhausted epoch takes its next producer id
// at epoch 0 (the last epoch stays the one the client last knew).
func (t transit) prepareComplete(nowMs int64) transit {
	to := StateCompleteCommit
	if t.state == StatePrepareAbort {
		to = StateCompleteAbort
	}
	n := t.base(to, nowMs)
	if t.nextProducerID != -1 {
		n.producerID = t.nextProducerID
		n.producerEpoch = 0
	}
	n.nextProducerID = -1
	n.partitions = nil
	return n
}

// prepareDead is expiration's pending state.
func (t transit) prepareDead(nowMs int64) transit {
	n := t.base(StateDead, nowMs)
	n.partitions = nil
	return n
}

// checkTransition panics unless from -> to is a legal transition with
// the values Kafka's completeTransitionTo requires (C§1.3, C§1.4). The
// prepare methods above only build legal ones; this is the invariant
// written down where each transition is made.
func checkTransition(id string, from, to transit) {
	bad := func(why string) {
		panic(fmt.Sprintf("txn: transactional id %q: illegal transition %v -> %v: %s (pid %d->%d, epoch %d->%d, partitions %d->%d)",
			id, from.state, to.state, why, from.producerID, to.producerID, from.producerEpoch, to.producerEpoch,
			len(from.partitions), len(to.partitions)))
	}
	if !canTransition(from.state, to.state) {
		bad("not a legal transition")
	}
	if to.producerID < 0 || (to.producerEpoch < 0 && to.state != StateDead) {
		bad("negative producer id or epoch")
	}
	switch to.state {
	case StateEmpty:
		bumped := to.producerEpoch == from.producerEpoch+1 || to.producerEpoch == from.producerEpoch
		rotated := to.producerID != from.producerID && to.producerEpoch == 0
		if !bumped && !rotated {
			bad("epoch neither kept, bumped nor reset with a new producer id")
		}
		if len(to.partitions) != 0 || to.startMs != -1 {
			bad("Empty with partitions or a start time")
		}
	case StateOngoing:
		if to.producerID != from.producerID || to.producerEpoch != from.producerEpoch {
			bad("producer id or epoch changed")
		}
		if !containsAll(to.partitions, from.partitions) || to.timeoutMs != from.timeoutMs {
			bad("partitions lost or timeout changed")
		}
	case StatePrepareCommit, StatePrepareAbort:
		if to.producerID != from.producerID {
			bad("producer id changed")
		}
		if to.producerEpoch != from.producerEpoch &&
			!(to.producerEpoch == from.producerEpoch+1 && to.lastProducerEpoch == from.producerEpoch) {
			bad("epoch neither kept nor bumped by one")
		}
		if !slices.Equal(to.partitions, from.partitions) || to.timeoutMs != from.timeoutMs {
			bad("partitions or timeout changed")
		}
		if from.state != StateOngoing && from.state != StatePrepareEpochFence && to.clientTransactionVersion < transactionV2 {
			bad("an abort with no transaction before Transactions V2")
		}
	case StateCompleteCommit, StateCompleteAbort:
		same := to.producerID == from.producerID && to.producerEpoch == from.producerEpoch
		rotated := to.producerID == from.nextProducerID && to.producerEpoch == 0 && to.prevProducerID == from.producerID
		if !same && !rotated {
			bad("producer id or epoch changed")
		}
		if len(to.partitions) != 0 || to.timeoutMs != from.timeoutMs || to.startMs == -1 {
			bad("partitions left, timeout changed or no start time")
		}
	case StatePrepareEpochFence:
		if to.producerEpoch != from.producerEpoch+1 || to.producerID != from.producerID {
			bad("a fence bumps the epoch by one")
		}
	case StateDead:
		if len(to.partitions) != 0 {
			bad("Dead with partitions")
		}
	}
}
