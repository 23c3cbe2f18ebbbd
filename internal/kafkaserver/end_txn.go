package kafkaserver

// EndTxn: v0-5
//
// A transactional producer commits or aborts its transaction. The
// coordinator writes PrepareCommit or PrepareAbort to __transaction_state
// and answers once that is committed; the markers then go to every
// partition of the transaction, and until they are all written the id
// answers CONCURRENT_TRANSACTIONS, which clients retry. A retried EndTxn
// of a transaction already completed the same way is answered with
// success. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
//
// v0-4 are the Transactions V1 path (the producer keeps its epoch). v5 is
// Transactions V2 (KIP-890 part 2): the coordinator bumps the producer's
// epoch as it ends the transaction (a new producer id at an exhausted
// epoch), writes the markers at the bumped epoch, so a late batch or
// marker of the ended transaction is refused by every partition, and
// answers the producer id and epoch the producer continues with.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleEndTxn(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.EndTxnRequest)
	resp := kmsg.NewPtrEndTxnResponse()
	resp.SetVersion(req.version)
	var err error
	switch {
	case s.cfg.Transactions == nil:
		err = kerr.CoordinatorNotAvailable
	case r.TransactionalID == "":
		err = invalidRequest("empty transactional id")
	case !s.allowedTxnID(req, acl.OperationWrite, r.TransactionalID):
		err = kerr.TransactionalIDAuthorizationFailed
	default:
		var pid int64
		var epoch int16
		pid, epoch, err = s.cfg.Transactions.EndTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, req.version >= 5)
		err = txn.ErrorForVersion(err, kmsg.EndTxn, req.version)
		if err == nil && req.version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
		}
	}
	if err != nil {
		resp.ErrorCode = s.errorCodeLogged(err, "EndTxn", "transactional_id", r.TransactionalID)
	}
	return resp, nil, nil
}
