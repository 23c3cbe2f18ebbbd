package kafkaserver

// ListTransactions: v0-2 (KIP-664, KIP-994, KIP-1152)
//
// The transactional ids this node coordinates that pass every filter
// given: states (names Kafka uses; unknown names are answered back in
// UnknownStateFilters and match nothing), producer ids, v1's duration
// (transactions started more than that many milliseconds ago; -1: any)
// and v2's pattern (RE2, matching the whole id; an invalid one is
// INVALID_REGULAR_EXPRESSION). Admin clients send it to every node and
// merge the answers. While a partition of __transaction_state this node
// leads is still loading, the answer is COORDINATOR_LOAD_IN_PROGRESS.
// Only the ids the principal may DESCRIBE are listed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleListTransactions(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.ListTransactionsRequest)
	resp := kmsg.NewPtrListTransactionsResponse()
	resp.SetVersion(req.version)
	if s.cfg.Transactions == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	f := txn.ListTransactionsFilter{States: r.StateFilters, ProducerIDs: r.ProducerIDFilters, DurationFilterMs: -1}
	if req.version >= 1 {
		f.DurationFilterMs = r.DurationFilterMillis
	}
	if req.version >= 2 && r.TransactionalIDPattern != nil {
		f.TransactionalIDPattern = *r.TransactionalIDPattern
	}
	listed, unknown, err := s.cfg.Transactions.ListTransactions(f)
	if err != nil {
		resp.ErrorCode = s.errorCodeLogged(err, "ListTransactions")
		return resp, nil, nil
	}
	resp.UnknownStateFilters = unknown
	// Only the ids the principal may DESCRIBE, the others left out
	// unmentioned.
	describe := s.authzFilterByName(req, acl.OperationDescribe, acl.ResourceTransactionalID)
	for _, l := range listed {
		if !describe.allowed(l.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, nil
}
