package kafkaserver

// InitProducerId: v0-5
//
// Hands an idempotent producer a producer id never handed out before,
// with epoch 0, from blocks the controller commits to the metadata log
// (txn.ProducerIDManager), so ids are never reused, even after a restart.
//
// With a transactional id the request goes to the transaction
// coordinator (Config.Transactions, internal/txn), which this node must
// be for the id (else NOT_COORDINATOR, which the client answers with
// FindCoordinator): it bumps the id's epoch (fencing an older session's
// producer, and aborting its open transaction first), or hands a new id
// a producer id. The timeout must be positive and within
// transaction.max.timeout.ms (INVALID_TRANSACTION_TIMEOUT). An empty,
// non-null id is INVALID_REQUEST, as in Kafka. A node that runs no
// coordinator answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which is not
// retriable, so clients fail at once with a clear error.
//
// KIP-360 (v3+): a producer that sends its current id and epoch wants its
// epoch bumped after UNKNOWN_PRODUCER_ID or a sequence error. For a
// non-transactional producer Kafka answers that with a fresh producer id
// and epoch 0, and so does Fjord: the new id starts with no sequence
// state on any partition, which is what the client needs. Sending only
// one of the two is INVALID_REQUEST, as in Kafka. A transactional
// producer's are checked by the coordinator.
//
// PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH below v4, as Kafka
// does. v5 adds nothing the coordinator answers differently
// (TRANSACTION_ABORTABLE belongs to Transactions V2); v6 (KIP-939,
// two-phase commit) is not served.
//
// Errors from the controller (NOT_CONTROLLER, REQUEST_TIMED_OUT while a
// block is committed) are answered with their codes, which clients retry.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleInitProducerID(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(req.version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1

	fail := func(err error) (kmsg.Response, func(), error) {
		resp.ErrorCode = s.errorCodeLogged(err, "InitProducerId")
		return resp, nil, nil
	}
	if req.version >= 3 && (r.ProducerID == -1) != (r.ProducerEpoch == -1) {
		return fail(invalidRequest("producer id %d with epoch %d: give both or neither", r.ProducerID, r.ProducerEpoch))
	}
	switch {
	case r.TransactionalID != nil && *r.TransactionalID == "":
		return fail(invalidRequest("empty transactional id"))
	case r.TransactionalID != nil && !s.allowedTxnID(req, acl.OperationWrite, *r.TransactionalID):
		return fail(kerr.TransactionalIDAuthorizationFailed)
	case r.TransactionalID == nil && !s.mayWriteIdempotently(req):
		return fail(kerr.ClusterAuthorizationFailed)
	case r.TransactionalID != nil && s.cfg.Transactions == nil:
		s.log.Info("kafkaserver: refused InitProducerId with a transactional id: this node runs no transaction coordinator",
			"transactional_id", *r.TransactionalID)
		return fail(kerr.TransactionalIDAuthorizationFailed)
	case r.TransactionalID != nil:
		expectedID, expectedEpoch := int64(-1), int16(-1)
		if req.version >= 3 {
			expectedID, expectedEpoch = r.ProducerID, r.ProducerEpoch
		}
		id, epoch, err := s.cfg.Transactions.InitProducerID(ctx, *r.TransactionalID, r.TransactionTimeoutMillis, expectedID, expectedEpoch)
		if err != nil {
			return fail(txn.ErrorForVersion(err, kmsg.InitProducerID, req.version))
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
		return resp, nil, nil
	}

	id, epoch, err := s.producerIDs.InitProducerID(ctx)
	if err != nil {
		return fail(err)
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil, nil
}
