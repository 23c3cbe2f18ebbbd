package txnstatetopic

// Verifier: the partition leader's question to a transaction's
// coordinator before a batch opens the producer's transaction on the
// partition (KIP-890 part 1; kafkaserver's produce_verify.go asks it).
//
// The coordinator is the leader of the transactional id's partition of
// __transaction_state in this node's latest image. When that is this
// node, its coordinator answers in process: the question is on the
// produce path of every transaction's first batch per partition, and a
// loopback round trip would add to each. Otherwise the coordinator's
// node is sent AddPartitionsToTxn v4, one verify-only transaction,
// through the peer clients (as Kafka's AddPartitionsToTxnManager sends
// it; Kafka batches the questions of many producers per coordinator,
// which a busy leader may want too).
//
// AddPartitionsToTxn is the same question asked as Transactions V2's
// implicit add (a Produce v12 or TxnOffsetCommit v5): the coordinator
// adds the partitions to the transaction, starting one if none is open.
//
// Results per partition, in order: nil when it is in the transaction,
// else the coordinator's error (TRANSACTION_ABORTABLE for one not in
// it); when the coordinator's node is unknown or the request fails, a
// COORDINATOR_NOT_AVAILABLE or NETWORK_EXCEPTION for all, which the
// produce answers as retriable.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/txn"
)

// LocalVerifier is this node's transaction coordinator's side of the
// question (txn.Coordinator's).
type LocalVerifier interface {
	VerifyPartitionsInTxn(transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition) []error
	AddPartitionsToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, partitions []txn.TopicPartition, tv2 bool) error
}

// Verifier asks the coordinator of a transactional id whether partitions
// are in its producer's ongoing transaction.
type Verifier struct {
	images     Images
	peers      *peers.Pool
	local      LocalVerifier
	nodeID     int32
	partitions int32 // of __transaction_state: where an id lives
}

// NewVerifier returns the Verifier of node nodeID, whose coordinator is
// local, over __transaction_state's partitions partitions.
func NewVerifier(images Images, pool *peers.Pool, local LocalVerifier, nodeID, partitions int32) *Verifier {
	return &Verifier{images: images, peers: pool, local: local, nodeID: nodeID, partitions: partitions}
}

// VerifyPartitionsInTxn answers per partition of parts (see the file
// comment).
func (v *Verifier) VerifyPartitionsInTxn(ctx context.Context, id string, producerID int64, epoch int16, parts []txn.TopicPartition) []error {
	return v.ask(ctx, id, producerID, epoch, parts, true)
}

// AddPartitionsToTxn adds parts to the transaction (see the file
// comment).
func (v *Verifier) AddPartitionsToTxn(ctx context.Context, id string, producerID int64, epoch int16, parts []txn.TopicPartition) []error {
	return v.ask(ctx, id, producerID, epoch, parts, false)
}

// ask is the question, verify-only or as an add.
func (v *Verifier) ask(ctx context.Context, id string, producerID int64, epoch int16, parts []txn.TopicPartition, verifyOnly bool) []error {
	all := func(err error) []error {
		errs := make([]error, len(parts))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	coordinator, err := v.coordinatorOf(id)
	if err != nil {
		return all(err)
	}
	if coordinator == v.nodeID {
		if verifyOnly {
			return v.local.VerifyPartitionsInTxn(id, producerID, epoch, parts)
		}
		return all(v.local.AddPartitionsToTxn(ctx, id, producerID, epoch, parts, true))
	}
	b, err := v.peers.Broker(coordinator)
	if err != nil {
		return all(fmt.Errorf("%w: node %d: %v", kerr.CoordinatorNotAvailable, coordinator, err))
	}
	resp, err := b.Request(ctx, verifyRequest(id, producerID, epoch, parts, verifyOnly))
	if err != nil {
		return all(fmt.Errorf("%w: AddPartitionsToTxn to node %d: %w", kerr.NetworkException, coordinator, err))
	}
	return verifyResults(resp.(*kmsg.AddPartitionsToTxnResponse), coordinator, id, parts)
}

// coordinatorOf is the node leading id's partition of
// __transaction_state in the latest image.
func (v *Verifier) coordinatorOf(id string) (int32, error) {
	img := v.images.Image()
	p := txn.PartitionFor(id, v.partitions)
	if img == nil {
		return -1, fmt.Errorf("%w: no metadata image yet", kerr.CoordinatorNotAvailable)
	}
	t, ok := img.Topics[metadata.TransactionStateTopic]
	if !ok || t == nil || int(p) >= len(t.Partitions) || t.Partitions[p].Leader < 0 {
		return -1, fmt.Errorf("%w: %s-%d has no leader", kerr.CoordinatorNotAvailable, metadata.TransactionStateTopic, p)
	}
	return t.Partitions[p].Leader, nil
}

// verifyRequest is AddPartitionsToTxn of one transaction, verify-only or
// an add, in the v4 form. The peer client sends the highest version both sides
// serve, 4 between Fjord nodes; a node serving only v0-3 would get a
// request without its transaction and refuse it (INVALID_REQUEST), never
// add the partitions.
func verifyRequest(id string, producerID int64, epoch int16, parts []txn.TopicPartition, verifyOnly bool) *kmsg.AddPartitionsToTxnRequest {
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, producerID, epoch, verifyOnly
	for _, t := range byTopic(parts) {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = t.topic, t.partitions
		rt.Topics = append(rt.Topics, tt)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{rt}
	return req
}

// verifyResults reads the answer of coordinator to verifyRequest: the
// request-level error for all, else each partition's code (nil for 0),
// or an error for a partition the answer lacks.
func verifyResults(resp *kmsg.AddPartitionsToTxnResponse, coordinator int32, id string, parts []txn.TopicPartition) []error {
	errs := make([]error, len(parts))
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	codes := map[txn.TopicPartition]int16{}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != id {
			continue
		}
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				codes[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for i, tp := range parts {
		code, ok := codes[tp]
		if !ok {
			errs[i] = fmt.Errorf("%w: node %d's AddPartitionsToTxn answer has no result for %s-%d", kerr.NetworkException, coordinator, tp.Topic, tp.Partition)
			continue
		}
		errs[i] = kerr.ErrorForCode(code)
	}
	return errs
}
