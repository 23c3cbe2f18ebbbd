package kafkaserver

// DescribeTransactions: v0 (KIP-664)
//
// The state of each transactional id this node coordinates, as the
// coordinator has it: state, timeout, start time (-1 when no transaction
// has begun since InitProducerId), producer id and epoch, and the
// partitions of the transaction (during Prepare*, those still awaiting
// their markers). An id on a partition this node does not lead is
// NOT_COORDINATOR; one it does not know, TRANSACTIONAL_ID_NOT_FOUND; an
// empty id, INVALID_REQUEST. Admin clients send each id to its
// coordinator (FindCoordinator key type 1), as `fjord txn` and Kafka's
// kafka-transactions.sh do.
//
// Authorization: DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and the transaction's topics
// the principal may not DESCRIBE are left out of its answer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

func handleDescribeTransactions(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	resp.SetVersion(req.version)
	answer := func(id string, err error) {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		st.ErrorCode = s.errorCodeLogged(err, "DescribeTransactions")
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	if s.cfg.Transactions == nil {
		for _, id := range r.TransactionalIDs {
			answer(id, kerr.CoordinatorNotAvailable)
		}
		return resp, nil, nil
	}
	// DESCRIBE on each id, before the coordinator is asked about it.
	idDescribe := s.authzByName(req, acl.OperationDescribe, acl.ResourceTransactionalID)
	var ids []string
	for _, id := range r.TransactionalIDs {
		if id != "" && idDescribe.allowed(id) {
			ids = append(ids, id)
		}
	}
	described := s.cfg.Transactions.DescribeTransactions(ids)
	next := 0
	// The transaction's topics the principal may not describe are left
	// out of its answer, as Kafka's are.
	topicDescribe := s.authzFilterByName(req, acl.OperationDescribe, acl.ResourceTopic)
	for _, id := range r.TransactionalIDs {
		if id == "" {
			answer(id, invalidRequest("empty transactional id"))
			continue
		}
		if !idDescribe.allowed(id) {
			answer(id, kerr.TransactionalIDAuthorizationFailed)
			continue
		}
		d := described[next]
		next++
		if d.Err != nil {
			answer(id, d.Err)
			continue
		}
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.State = d.TransactionalID, d.State.String()
		st.TimeoutMillis, st.StartTimestamp = d.TimeoutMs, d.StartTimeMs
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		for _, tp := range d.Partitions { // sorted by topic, then partition
			if !topicDescribe.allowed(tp.Topic) {
				continue
			}
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			last := &st.Topics[len(st.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, nil
}
