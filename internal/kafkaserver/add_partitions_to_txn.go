package kafkaserver

// AddPartitionsToTxn: v0-3
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
// v4-5 (KIP-890: a partition leader's batched, verify-only requests) are
// not served: Fjord's leaders do not ask yet, and no client sends them.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleAddPartitionsToTxn(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AddPartitionsToTxnRequest)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.SetVersion(req.version)

	// Each named partition's own checks; a partition named twice is
	// added once and answered under each name.
	img := s.image()
	var tps []txn.TopicPartition
	seen := map[txn.TopicPartition]bool{}
	failed := false
	for _, rt := range r.Topics {
		ot := kmsg.NewAddPartitionsToTxnResponseTopic()
		ot.Topic = rt.Topic
		t, known := lookupTopic(img, rt.Topic)
		for _, p := range rt.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			op.Partition = p
			var perr error
			switch {
			case !known:
				perr = kerr.UnknownTopicOrPartition
			case metadata.IsInternalTopic(rt.Topic):
				perr = kerr.TopicAuthorizationFailed
			default:
				if _, ok := lookupPartition(t, p); !ok {
					perr = kerr.UnknownTopicOrPartition
				}
			}
			if perr != nil {
				op.ErrorCode, failed = perr.(*kerr.Error).Code, true
			} else if tp := (txn.TopicPartition{Topic: rt.Topic, Partition: p}); !seen[tp] {
				seen[tp] = true
				tps = append(tps, tp)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	answerAll := func(code int16, keepOwn bool) {
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if op := &resp.Topics[ti].Partitions[pi]; !keepOwn || op.ErrorCode == 0 {
					op.ErrorCode = code
				}
			}
		}
	}
	if failed {
		answerAll(kerr.OperationNotAttempted.Code, true)
		return resp, nil, nil
	}

	var err error
	switch {
	case s.cfg.Transactions == nil:
		err = kerr.CoordinatorNotAvailable
	case r.TransactionalID == "":
		err = invalidRequest("empty transactional id")
	case len(tps) > 0:
		err = s.cfg.Transactions.AddPartitionsToTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tps, false)
		err = txn.ErrorForVersion(err, kmsg.AddPartitionsToTxn, req.version)
	}
	if err != nil {
		answerAll(s.errorCodeLogged(err, "AddPartitionsToTxn", "transactional_id", r.TransactionalID), false)
	}
	return resp, nil, nil
}
