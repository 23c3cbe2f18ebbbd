package kafkaserver

// InitProducerId: v0-4
//
// Hands an idempotent producer a producer id never handed out before,
// with epoch 0, from blocks the controller commits to the metadata log
// (txn.ProducerIDManager), so ids are never reused, even after a restart.
//
// Transactions come in a later issue: a request with a transactional id
// is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which is not
// retriable, so franz-go and librdkafka fail the transactional producer
// at once with a clear error instead of retrying forever (an empty,
// non-null id is INVALID_REQUEST, as in Kafka). In practice transactional
// clients stop earlier: they look for their coordinator with
// FindCoordinator, which Fjord does not serve yet.
//
// KIP-360 (v3+): a producer that sends its current id and epoch wants its
// epoch bumped after UNKNOWN_PRODUCER_ID or a sequence error. For a
// non-transactional producer Kafka answers that with a fresh producer id
// and epoch 0, and so does Fjord: the new id starts with no sequence
// state on any partition, which is what the client needs. Sending only
// one of the two is INVALID_REQUEST, as in Kafka.
//
// Errors from the controller (NOT_CONTROLLER, REQUEST_TIMED_OUT while a
// block is committed) are answered with their codes, which clients retry.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	switch {
	case r.TransactionalID != nil && *r.TransactionalID == "":
		return fail(invalidRequest("empty transactional id"))
	case r.TransactionalID != nil:
		s.log.Info("kafkaserver: refused InitProducerId with a transactional id: transactions are not supported yet",
			"transactional_id", *r.TransactionalID)
		return fail(kerr.TransactionalIDAuthorizationFailed)
	}
	if req.version >= 3 && (r.ProducerID == -1) != (r.ProducerEpoch == -1) {
		return fail(invalidRequest("producer id %d with epoch %d: give both or neither", r.ProducerID, r.ProducerEpoch))
	}

	id, epoch, err := s.producerIDs.InitProducerID(ctx)
	if err != nil {
		return fail(err)
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil, nil
}
