package producerstate

import (
	"fmt"
	"sync/atomic"

	"github.com/fjordmq/fjord/internal/record"
)

// Transaction verification (KIP-890 part 1), the partition's side
// (Kafka's VerificationStateEntry and VerificationGuard; the rules and
// their sources are in docs/kafka-transactions/partition.md, 5.1 and
// 5.2).
//
// Without it a partition opens a transaction for any transactional batch
// of a producer with none open here: from a client that skipped
// AddPartitionsToTxn, or a produce that arrives after its transaction's
// abort marker. No coordinator knows that transaction, so no marker ever
// ends it, and it holds the partition's last stable offset for good (a
// hanging transaction). So before the leader appends a batch that would
// open a producer's transaction, it asks the transaction coordinator
// whether the partition is in the producer's transaction, and only the
// batch of a request whose answer was yes is appended.
//
// An answer can be stale by the time the batch is appended: the
// transaction may have been aborted, its marker written here, and the
// next one begun, all during the round trip. So the leader takes a guard
// before it asks (VerificationGuard), and the batch is appended only if
// the producer's entry still holds that guard (CheckVerified). A marker,
// or a transactional batch, of the producer clears the entry (UpdateMarker,
// Update): the coordinator's yes was about the transaction before it.
// Guards are unique across the process, so a guard taken before a marker
// never matches the entry made after it (the ABA case).
//
// Verification entries are the leader's, in memory only: snapshots do
// not keep them, and a follower never makes one (only the leader's
// produce path calls VerificationGuard). A state rebuilt or replaced
// (truncation, a reopen) has none, so a verification in flight across it
// fails with ErrInvalidTxnState and the producer aborts, which is safe.
//
// Under Transactions V2 a marker at the entry's epoch does not clear it
// (Kafka's isV2NextTransactionStarted): the coordinator bumps the epoch
// when it ends a transaction, so the previous transaction's marker
// carries the epoch the next transaction's batches already use, and the
// next transaction's verification (its implicit add, which the
// coordinator holds off with CONCURRENT_TRANSACTIONS until those markers
// are written) can begin before that marker lands here. The next
// transaction's own end bumps the epoch again, so its marker still
// clears the entry.
//
// Not done here: Kafka's entry also keeps the lowest sequence number seen
// while verifying, to refuse a first batch that is not the transaction's
// first.

// lastVerificationGuard is the last guard handed out: guards count up
// from 1, so 0 (Kafka's VerificationGuard.SENTINEL) never verifies.
var lastVerificationGuard atomic.Uint64

// verification is a producer's verification entry (Kafka's
// VerificationStateEntry, less the lowest sequence).
type verification struct {
	guard uint64
	// epoch is the newest epoch the producer asked to verify at.
	epoch int16
	// timestampMs is when it last asked, by the broker's clock (see
	// RemoveExpired).
	timestampMs int64
	// supportsEpochBump: the producer is on Transactions V2 (Produce
	// v12+), whose markers carry the bumped epoch (see above).
	supportsEpochBump bool
}

// VerificationGuard starts the verification of a transactional batch of
// producer pid at epoch (Kafka's UnifiedLog.maybeStartTransactionVerification),
// as the leader does before it asks the transaction coordinator whether
// this partition is in the producer's transaction. nowMs is the broker's
// clock; supportsEpochBump says the producer is on Transactions V2.
//
//   - The producer has a transaction open here at epoch: the batch cannot
//     open one, so needed is false and the guard 0; nothing is asked.
//   - The producer's epoch here is newer than epoch: ErrInvalidProducerEpoch,
//     before any round trip (Kafka's trunk; 3.7-4.0 found it only at
//     the append).
//   - Otherwise the producer's verification entry's guard, made if it has
//     none, and needed is true. Asking again before the entry is cleared
//     answers the same guard: two requests of one producer may be
//     verifying at once, and the first to append opens the transaction
//     the second then joins without the guard.
func (s *State) VerificationGuard(pid int64, epoch int16, nowMs int64, supportsEpochBump bool) (guard uint64, needed bool, err error) {
	if e := s.producers[pid]; e != nil {
		if e.txnFirstOffset >= 0 && e.epoch == epoch {
			return 0, false, nil
		}
		if epoch < e.epoch {
			return 0, false, fmt.Errorf("%w: producer %d epoch %d, older than its epoch %d on this partition",
				ErrInvalidProducerEpoch, pid, epoch, e.epoch)
		}
	}
	v, ok := s.verifying[pid]
	if !ok {
		v = verification{guard: lastVerificationGuard.Add(1), epoch: epoch}
		if s.verifying == nil {
			s.verifying = map[int64]verification{}
		}
	}
	v.epoch = max(v.epoch, epoch)
	v.timestampMs = nowMs
	v.supportsEpochBump = v.supportsEpochBump || supportsEpochBump
	s.verifying[pid] = v
	return v.guard, true, nil
}

// CheckVerified is Check for a produce whose transactional batches were
// verified with guard (0: none was): a transactional batch that would
// open its producer's transaction here (one with no transaction open at
// the batch's epoch, counting the batches before it in hdrs) is refused
// with ErrInvalidTxnState unless guard is not 0 and is the producer's
// verification entry's guard. A duplicate is answered as Check answers
// it, before this check, as Kafka does: a retry of a transaction's first
// batch succeeds though its entry was cleared when it was written.
// Before the guard, a batch from an epoch older than the producer's is
// ErrInvalidProducerEpoch, so that a fenced producer gets the error it
// can act on.
func (s *State) CheckVerified(hdrs []record.Header, guard uint64) (dup Duplicate, isDup bool, err error) {
	return s.check(hdrs, true, guard)
}

// verified reports whether guard is producer pid's verification guard.
func (s *State) verified(pid int64, guard uint64) bool {
	v, ok := s.verifying[pid]
	return guard != 0 && ok && v.guard == guard
}

// clearVerification drops producer pid's verification entry: a batch or
// marker of its transaction was written, so a coordinator's answer given
// before it may be about a transaction that is over.
func (s *State) clearVerification(pid int64) {
	delete(s.verifying, pid)
}

// clearVerificationAtMarker is clearVerification for a marker of producer
// pid at epoch, except for a Transactions V2 entry at the marker's epoch:
// that marker ends the transaction before the one the entry verifies.
func (s *State) clearVerificationAtMarker(pid int64, epoch int16) {
	if v, ok := s.verifying[pid]; ok && v.supportsEpochBump && v.epoch == epoch {
		return
	}
	delete(s.verifying, pid)
}

// removeExpiredVerifications drops the verification entries not asked
// for in expirationMs: a leader whose produce never came back (the
// coordinator said no, the client went away) would keep them otherwise.
func (s *State) removeExpiredVerifications(nowMs, expirationMs int64) {
	for pid, v := range s.verifying {
		if nowMs-v.timestampMs >= expirationMs {
			delete(s.verifying, pid)
		}
	}
}
