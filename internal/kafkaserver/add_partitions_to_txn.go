package kafkaserver

// AddPartitionsToTxn: v0-5
//
// A transactional producer names the partitions it is about to write in
// its transaction, before its first produce to each, so the coordinator
// knows where to send the markers. Checked here first, as Kafka's broker
// does, for every partition: the topic and partition exist
// (UNKNOWN_TOPIC_OR_PARTITION), and the topic is not internal
// (TOPIC_AUTHORIZATION_FAILED, Kafka's answer: a transaction reaches
// __consumer_offsets only through AddOffsetsToTxn). If any partition
// fails, nothing is added: the others are answered
// OPERATION_NOT_ATTEMPTED. Otherwise the coordinator adds them all or
// none, and its one error (CONCURRENT_TRANSACTIONS while it completes the
// previous transaction, PRODUCER_FENCED, INVALID_TXN_STATE, ...) is every
// partition's; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
//
// v4-5 (KIP-890) are the partition leaders' form: several transactions
// per request, each verify-only (is every partition in the producer's
// ongoing transaction? TRANSACTION_ABORTABLE per partition that is not;
// nothing is added; a Produce v0-11) or Transactions V2's implicit add
// (a Produce v12 or TxnOffsetCommit v5, which may add the group's
// __consumer_offsets partition; v5 only adds TRANSACTION_ABORTABLE to
// what may be answered). Fjord's leaders send them (produce_verify.go);
// clients send v0-3 (franz-go pins them, and Java's and librdkafka's stop
// there). v4-5 need CLUSTER_ACTION on the cluster (a node's principal;
// CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise); v0-3
// need WRITE on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise) and on each topic
// (its partitions TOPIC_AUTHORIZATION_FAILED, before existence; the
// others OPERATION_NOT_ATTEMPTED), as Kafka asks.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleAddPartitionsToTxn(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AddPartitionsToTxnRequest)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.SetVersion(req.version)
	if req.version < 4 {
		topics := make([]txnAddTopic, len(r.Topics))
		for i, t := range r.Topics {
			topics[i] = txnAddTopic{t.Topic, t.Partitions}
		}
		var codes [][]int16
		if s.allowedTxnID(req, acl.OperationWrite, r.TransactionalID) {
			codes = s.addPartitionsToTxn(ctx, req.version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, false, topics, s.authzByName(req, acl.OperationWrite, acl.ResourceTopic))
		} else {
			codes = make([][]int16, len(topics))
			for i, t := range topics {
				codes[i] = make([]int16, len(t.partitions))
				for j := range codes[i] {
					codes[i][j] = kerr.TransactionalIDAuthorizationFailed.Code
				}
			}
		}
		for i, t := range r.Topics {
			ot := kmsg.NewAddPartitionsToTxnResponseTopic()
			ot.Topic = t.Topic
			for j, p := range t.Partitions {
				op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				op.Partition, op.ErrorCode = p, codes[i][j]
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp, nil, nil
	}
	// v4+ is the partition leaders' (KIP-890): a node's principal.
	if !s.allowedCluster(req, acl.OperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil, nil
	}
	for _, rt := range r.Transactions {
		topics := make([]txnAddTopic, len(rt.Topics))
		for i, t := range rt.Topics {
			topics[i] = txnAddTopic{t.Topic, t.Partitions}
		}
		codes := s.addPartitionsToTxn(ctx, req.version, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly, topics, nil)
		ot := kmsg.NewAddPartitionsToTxnResponseTransaction()
		ot.TransactionalID = rt.TransactionalID
		for i, t := range rt.Topics {
			ott := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			ott.Topic = t.Topic
			for j, p := range t.Partitions {
				op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				op.Partition, op.ErrorCode = p, codes[i][j]
				ott.Partitions = append(ott.Partitions, op)
			}
			ot.Topics = append(ot.Topics, ott)
		}
		resp.Transactions = append(resp.Transactions, ot)
	}
	return resp, nil, nil
}

// txnAddTopic is one topic's partitions of an add, in the request's
// order.
type txnAddTopic struct {
	topic      string
	partitions []int32
}

// addPartitionsToTxn adds topics' partitions to the transaction of
// (producerID, producerEpoch) under id, or with verifyOnly asks whether
// they are in it, and answers a code per partition, codes[i][j] for
// topics[i].partitions[j]. The topics writable does not allow (nil: all
// are) are answered TOPIC_AUTHORIZATION_FAILED, before their existence
// is looked at, and fail the add as a partition's own error does.
func (s *Server) addPartitionsToTxn(ctx context.Context, version int16, id string, producerID int64, producerEpoch int16, verifyOnly bool, topics []txnAddTopic, writable *nameAuthz) [][]int16 {
	// Each named partition's own checks; a partition named twice is
	// added once and answered under each name.
	img := s.image()
	codes := make([][]int16, len(topics))
	var tps []txn.TopicPartition
	var at [][2]int // tps[k] answers codes[at[k][0]][at[k][1]]
	index := map[txn.TopicPartition]int{}
	failed := false
	for i, rt := range topics {
		codes[i] = make([]int16, len(rt.partitions))
		t, known := lookupTopic(img, rt.topic)
		for j, p := range rt.partitions {
			var perr error
			switch {
			case writable != nil && !writable.allowed(rt.topic):
				perr = kerr.TopicAuthorizationFailed
			case !known:
				perr = kerr.UnknownTopicOrPartition
			case metadata.IsInternalTopic(rt.topic) && !(version >= 4 && rt.topic == metadata.ConsumerOffsetsTopic):
				// A leader's v4+ may add a group's partition (a
				// TxnOffsetCommit v5); a client reaches it only
				// through AddOffsetsToTxn.
				perr = kerr.TopicAuthorizationFailed
			default:
				if _, ok := lookupPartition(t, p); !ok {
					perr = kerr.UnknownTopicOrPartition
				}
			}
			if perr != nil {
				codes[i][j], failed = perr.(*kerr.Error).Code, true
				continue
			}
			tp := txn.TopicPartition{Topic: rt.topic, Partition: p}
			if _, ok := index[tp]; !ok {
				index[tp] = len(tps)
				tps = append(tps, tp)
			}
			at = append(at, [2]int{i, j})
		}
	}
	answerAll := func(code int16, keepOwn bool) {
		for i := range codes {
			for j := range codes[i] {
				if !keepOwn || codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	if failed && !verifyOnly {
		answerAll(kerr.OperationNotAttempted.Code, true)
		return codes
	}

	var err error
	switch {
	case s.cfg.Transactions == nil:
		err = kerr.CoordinatorNotAvailable
	case id == "":
		err = invalidRequest("empty transactional id")
	case len(tps) > 0 && verifyOnly:
		errs := s.cfg.Transactions.VerifyPartitionsInTxn(id, producerID, producerEpoch, tps)
		for _, ij := range at {
			tp := txn.TopicPartition{Topic: topics[ij[0]].topic, Partition: topics[ij[0]].partitions[ij[1]]}
			if e := errs[index[tp]]; e != nil {
				codes[ij[0]][ij[1]] = s.errorCodeLogged(e, "AddPartitionsToTxn", "transactional_id", id)
			}
		}
		return codes
	case len(tps) > 0:
		// v4+ adds come from leaders, for Transactions V2 clients.
		err = s.cfg.Transactions.AddPartitionsToTxn(ctx, id, producerID, producerEpoch, tps, version >= 4)
		err = txn.ErrorForVersion(err, kmsg.AddPartitionsToTxn, version)
	}
	if err != nil {
		answerAll(s.errorCodeLogged(err, "AddPartitionsToTxn", "transactional_id", id), false)
	}
	return codes
}
