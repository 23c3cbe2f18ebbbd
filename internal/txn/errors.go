package txn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Expected conditions. Every error a request method returns is one of the
// kerr values below, never wrapped, so the protocol edge answers it with
// its .Code (after ErrorForVersion); the comment says when each is
// returned. The last block holds the errors no client sees.
var (
	// ErrInvalidRequest: an empty transactional id, or an expected
	// producer id and epoch of which only one is -1 (InitProducerId).
	ErrInvalidRequest = kerr.InvalidRequest
	// ErrNotCoordinator: the id's __transaction_state partition is not
	// loaded here (never loaded, unloaded, or its load failed), or an
	// append found this node no longer leads it.
	ErrNotCoordinator = kerr.NotCoordinator
	// ErrCoordinatorLoadInProgress: the id's partition is being loaded
	// (ListTransactions: any partition is); or a new producer id could not
	// be fetched (Kafka's answer when its block is used up).
	ErrCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress
	// ErrCoordinatorNotAvailable: the coordinator is closed, or an append
	// failed for lack of replicas or time.
	ErrCoordinatorNotAvailable = kerr.CoordinatorNotAvailable
	// ErrInvalidTransactionTimeout: an InitProducerId timeout not in
	// (0, MaxTransactionTimeout].
	ErrInvalidTransactionTimeout = kerr.InvalidTransactionTimeout
	// ErrConcurrentTransactions: a transition of the id is in flight
	// (its record being written, or its markers being sent), or the
	// previous transaction is still being completed. Clients retry.
	ErrConcurrentTransactions = kerr.ConcurrentTransactions
	// ErrProducerFenced: the request's epoch is not the id's (KIP-588);
	// a newer producer with the same transactional id has taken over.
	// Old request versions answer ErrInvalidProducerEpoch instead
	// (ErrorForVersion).
	ErrProducerFenced = kerr.ProducerFenced
	// ErrInvalidProducerEpoch is ErrProducerFenced for request versions
	// before KIP-588.
	ErrInvalidProducerEpoch = kerr.InvalidProducerEpoch
	// ErrInvalidProducerIDMapping: the id is unknown here, or the
	// request's producer id is not the id's.
	ErrInvalidProducerIDMapping = kerr.InvalidProducerIDMapping
	// ErrInvalidTxnState: EndTxn asked for what the transaction's state
	// does not allow (commit of an aborted or empty transaction, abort of
	// a committed one, ...).
	ErrInvalidTxnState = kerr.InvalidTxnState
	// ErrTransactionAbortable: verify-only AddPartitionsToTxn of a
	// partition not in the ongoing transaction (KIP-890 part 1).
	ErrTransactionAbortable = kerr.TransactionAbortable
	// ErrTransactionalIDNotFound: DescribeTransactions of an id this
	// coordinator does not have.
	ErrTransactionalIDNotFound = kerr.TransactionalIDNotFound
	// ErrInvalidRegularExpression: a ListTransactions id pattern that
	// does not compile (RE2).
	ErrInvalidRegularExpression = kerr.InvalidRegularExpression
	// ErrUnknownServerError: a record too large for __transaction_state
	// (a transaction with very many partitions), Kafka's answer too; or
	// an epoch that cannot be fenced any further.
	ErrUnknownServerError = kerr.UnknownServerError

	// ErrPartitionDeleted is a MarkerSender's result for a partition
	// its metadata no longer has: the topic was deleted, so its marker
	// is not needed and the partition counts as done.
	ErrPartitionDeleted = errors.New("txn: the marker's partition no longer exists")
	// ErrLoadSuperseded: Load's partition was unloaded, loaded again or
	// the coordinator closed before the replay finished; what was
	// replayed is dropped.
	ErrLoadSuperseded = errors.New("txn: partition unloaded while it was loading")
	// ErrMalformedRecord: a __transaction_state record that did not
	// decode, or holds values no coordinator writes. Load fails with it
	// (wrapped with the id) rather than serve state rebuilt around a hole.
	ErrMalformedRecord = errors.New("txn: malformed __transaction_state record")
	// ErrUnknownRecordVersion: a __transaction_state key or value of a
	// version this coordinator does not read, wrapped with the version.
	// Load skips such keys (as Kafka does) and fails on such values.
	ErrUnknownRecordVersion = errors.New("txn: unknown __transaction_state record version")
	// ErrClosed: Load on a closed coordinator.
	ErrClosed = errors.New("txn: coordinator closed")
)

// ErrorForVersion returns err as a request of API key and version may
// carry it: PRODUCER_FENCED (KIP-588) is INVALID_PRODUCER_EPOCH before
// InitProducerId v4 and AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
// v2, as Kafka answers them (C§4.3). Other errors are returned unchanged.
func ErrorForVersion(err error, key kmsg.Key, version int16) error {
	if err != ErrProducerFenced {
		return err
	}
	var firstFenced int16
	switch key {
	case kmsg.InitProducerID:
		firstFenced = 4
	case kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn:
		firstFenced = 2
	default:
		return err
	}
	if version < firstFenced {
		return ErrInvalidProducerEpoch
	}
	return err
}

// mapAppendError turns a Log.Append error into the error a request
// answers, as Kafka's TransactionStateManager does (C§2.4; see Log).
func mapAppendError(err error) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		if errors.Is(err, context.DeadlineExceeded) {
			ke = kerr.RequestTimedOut
		} else {
			// Canceled (an unload or Close), an I/O failure, anything
			// unclassified: retriable, after looking the coordinator up
			// again.
			return ErrCoordinatorNotAvailable
		}
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return ErrCoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return ErrNotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return ErrUnknownServerError
	}
	return ke
}
