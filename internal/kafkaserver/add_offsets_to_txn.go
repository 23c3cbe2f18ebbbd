package kafkaserver

// AddOffsetsToTxn: v0-4
//
// A transactional producer that is about to commit a consumer group's
// offsets in its transaction (TxnOffsetCommit) first adds the group's
// __consumer_offsets partition to the transaction, so the coordinator
// sends that partition a marker too: the commit marker is what makes the
// offsets visible (internal/group, CompleteTxn). The coordinator adds it
// as AddPartitionsToTxn v0-3 adds a partition, with the same errors;
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2. v4 only adds
// TRANSACTION_ABORTABLE to what may be answered.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleAddOffsetsToTxn(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AddOffsetsToTxnRequest)
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.SetVersion(req.version)
	var err error
	switch {
	case s.cfg.Transactions == nil:
		err = kerr.CoordinatorNotAvailable
	case r.TransactionalID == "":
		err = invalidRequest("empty transactional id")
	case r.Group == "":
		err = kerr.InvalidGroupID
	case !s.allowedTxnID(req, acl.OperationWrite, r.TransactionalID):
		// WRITE on the transactional id, then READ on the group, in
		// Kafka's order.
		err = kerr.TransactionalIDAuthorizationFailed
	case !s.allowedGroup(req, acl.OperationRead, r.Group):
		err = kerr.GroupAuthorizationFailed
	default:
		err = s.cfg.Transactions.AddOffsetsToTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group)
		err = txn.ErrorForVersion(err, kmsg.AddOffsetsToTxn, req.version)
	}
	if err != nil {
		resp.ErrorCode = s.errorCodeLogged(err, "AddOffsetsToTxn", "transactional_id", r.TransactionalID, "group", r.Group)
	}
	return resp, nil, nil
}
