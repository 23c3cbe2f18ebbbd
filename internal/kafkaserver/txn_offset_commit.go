package kafkaserver

// TxnOffsetCommit: v0-5
//
// A transactional producer commits a consumer group's offsets inside its
// transaction (KIP-98), after AddOffsetsToTxn added the group's
// partition. The group coordinator checks the member as KIP-447 has it
// (v3+: generation, member id and group.instance.id; a stale generation
// is ILLEGAL_GENERATION, so a zombie of a rebalance cannot commit) and
// writes the offsets as a transactional batch of the producer, whose
// epoch the partition checks (an older one is INVALID_PRODUCER_EPOCH,
// what a fenced producer gets). They stay pending, invisible to
// OffsetFetch, until the transaction's marker commits or aborts them
// (WriteTxnMarkers on __consumer_offsets); OffsetFetch with
// require_stable answers UNSTABLE_OFFSET_COMMIT for them meanwhile.
//
// Before the coordinator writes anything, the commit is verified with
// the transaction's coordinator as a produce is (KIP-890;
// verifyTxnOffsets): a commit whose group's partition is not in the
// producer's transaction is INVALID_TXN_STATE (TRANSACTION_ABORTABLE
// from v4) and writes nothing, so a late or stray commit cannot leave a
// transaction open on __consumer_offsets.
//
// Authorization, in Kafka's order: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), READ on
// the group (GROUP_AUTHORIZATION_FAILED), then READ on each topic
// (TOPIC_AUTHORIZATION_FAILED on its partitions, before existence).
//
// As OffsetCommit: a topic or partition that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator. v2 adds
// the leader epoch; v3 is flexible and adds the member fields; v4 only
// adds TRANSACTION_ABORTABLE to what may be answered. v5 is Transactions
// V2: the client sent no AddOffsetsToTxn, so the group's
// __consumer_offsets partition is first added to the transaction here
// (TxnVerifier.AddPartitionsToTxn, retried as a Produce v12's add is), and
// its error, if any, is every partition's.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/txn"
)

func handleTxnOffsetCommit(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.TxnOffsetCommitRequest)
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.SetVersion(req.version)
	cr := group.TxnCommitRequest{
		Group:         body.Group,
		ProducerID:    body.ProducerID,
		ProducerEpoch: body.ProducerEpoch,
		Generation:    -1,
	}
	if req.version >= 3 {
		cr.Generation, cr.MemberID, cr.InstanceID = body.Generation, body.MemberID, body.InstanceID
	}
	var requestErr error
	switch {
	case body.TransactionalID == "":
		requestErr = invalidRequest("empty transactional id")
	case body.Group == "":
		requestErr = kerr.InvalidGroupID
	case body.ProducerID < 0 || body.ProducerEpoch < 0:
		requestErr = invalidRequest("producer %d at epoch %d", body.ProducerID, body.ProducerEpoch)
	case !s.allowedTxnID(req, acl.OperationWrite, body.TransactionalID):
		requestErr = kerr.TransactionalIDAuthorizationFailed
	case !s.allowedGroup(req, acl.OperationRead, body.Group):
		requestErr = kerr.GroupAuthorizationFailed
	case s.groups == nil:
		requestErr = kerr.CoordinatorNotAvailable
	}
	topics := make([][]group.OffsetCommit, len(body.Topics))
	for i, t := range body.Topics {
		for _, p := range t.Partitions {
			oc := group.OffsetCommit{
				TopicPartition: group.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Offset:         p.Offset,
				LeaderEpoch:    -1,
				Metadata:       p.Metadata,
			}
			if req.version >= 2 {
				oc.LeaderEpoch = p.LeaderEpoch
			}
			topics[i] = append(topics[i], oc)
		}
	}
	var topicRead *nameAuthz
	if requestErr == nil {
		topicRead = s.authzByName(req, acl.OperationRead, acl.ResourceTopic)
	}
	plan := planAuthorizedCommit(s.image(), topics, requestErr == nil, topicRead)
	cr.Offsets = plan.offsets
	if len(cr.Offsets) > 0 && requestErr == nil {
		cr.Guard, requestErr = s.verifyTxnOffsets(ctx, req.version, body.TransactionalID, body.Group, body.ProducerID, body.ProducerEpoch)
	}
	if len(cr.Offsets) > 0 {
		err := requestErr
		var partErrs []error
		if err == nil {
			err, partErrs = s.groups.CommitTxnOffsets(ctx, cr)
		}
		if errors.Is(err, kerr.CoordinatorLoadInProgress) && req.version < 2 {
			// Kafka's rewrite: v0-1 clients do not know to retry it.
			err = kerr.CoordinatorNotAvailable
		}
		plan.answer(err, partErrs, func(e error) int16 {
			return s.errorCodeLogged(e, "TxnOffsetCommit", "group", body.Group, "transactional_id", body.TransactionalID)
		})
	}
	for i, t := range body.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, plan.codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// verifyTxnOffsets is a TxnOffsetCommit's transaction verification
// (KIP-890), as a produce's (produce_verify.go): unless the producer's
// transaction is open on the group's __consumer_offsets partition
// already, the partition's verification guard is taken and the
// transaction's coordinator asked, verify-only for v0-4 (the client
// added the partition with AddOffsetsToTxn), as the add itself for v5
// (Transactions V2: the client sent none). The group coordinator then
// writes the offsets only while the guard holds, so a commit that
// arrives after its transaction ended opens no transaction there. With
// no verifier, or verification turned off for v0-4, the commit is
// written unverified, as before Kafka 3.6 (a v5 still needs its add).
func (s *Server) verifyTxnOffsets(ctx context.Context, version int16, id, groupID string, producerID int64, epoch int16) (group.TxnGuard, error) {
	tv2 := version >= 5
	if s.cfg.TxnVerifier == nil || (!tv2 && s.cfg.TxnVerifyOnlyDisabled) {
		if tv2 {
			return group.TxnGuard{}, kerr.CoordinatorNotAvailable
		}
		return group.TxnGuard{}, nil
	}
	// The group coordinator's placement (FindCoordinator checks the
	// topic has that many partitions before it names a coordinator).
	n := s.cfg.OffsetsTopicPartitions
	if t, ok := lookupTopic(s.image(), metadata.ConsumerOffsetsTopic); !ok || int32(len(t.Partitions)) != n {
		return group.TxnGuard{}, kerr.CoordinatorNotAvailable
	}
	tp := txn.TopicPartition{Topic: metadata.ConsumerOffsetsTopic, Partition: group.PartitionFor(groupID, n)}
	guard, needed, err := s.replicas.TxnVerificationGuard(tp.Topic, tp.Partition, producerID, epoch, tv2)
	if err != nil {
		return group.TxnGuard{}, commitVerifyError(err)
	}
	if needed {
		vctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
		defer cancel()
		var verr error
		if tv2 {
			verr = s.addToTxn(vctx, id, producerID, epoch, []txn.TopicPartition{tp})[0]
		} else {
			verr = s.cfg.TxnVerifier.VerifyPartitionsInTxn(vctx, id, producerID, epoch, []txn.TopicPartition{tp})[0]
		}
		// TxnOffsetCommit v4 added TRANSACTION_ABORTABLE, as Produce v11
		// did: map as a produce of the version that knows it or not.
		produceVersion := int16(10)
		if version >= 4 {
			produceVersion = tv2Produce
		}
		if err := verifyError(verr, produceVersion); err != nil {
			return group.TxnGuard{}, commitVerifyError(err)
		}
	}
	return group.TxnGuard{Verify: true, Guard: guard}, nil
}

// commitVerifyError is a verification error as a commit answers it: a
// produce's retriable NOT_ENOUGH_REPLICAS is COORDINATOR_NOT_AVAILABLE,
// and the partition's leadership gone NOT_COORDINATOR, as Kafka's group
// coordinator normalizes them; clients retry both after finding the
// coordinator again.
func commitVerifyError(err error) error {
	switch {
	case errors.Is(err, kerr.NotEnoughReplicas):
		return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	return err
}
