package kafkaserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// FindCoordinator: v0-6
//
// A group's coordinator is the leader of its __consumer_offsets
// partition, abs(javaStringHashCode(group)) % partitions, as Kafka
// computes it (group.PartitionFor), so a client that computes it too (or
// a tool reading the topic) agrees with the answer. The topic is created
// on the first group lookup, compacted, with OffsetsTopicPartitions
// partitions and the replication the cluster allows; until its partition
// has a leader the answer is COORDINATOR_NOT_AVAILABLE, which clients
// retry.
//
// A transactional id's coordinator (key type 1) is found the same way on
// __transaction_state (txn.PartitionFor, TransactionTopicPartitions
// partitions, created on the first lookup with the replication the
// cluster allows and min.insync.replicas below it). A node that runs no
// transaction coordinator answers COORDINATOR_NOT_AVAILABLE, with a
// message saying why (v1+).
//
// It was advertised before groups existed because librdkafka reads its
// presence as a sign of a broker new enough for LZ4 (its feature map ties
// "lz4" to FindCoordinator v0).
//
// v4 (KIP-699) answers a list of keys; v0-3 one key. Key types other
// than group (0) and transaction (1) are INVALID_REQUEST. v6 (share
// groups, KIP-932) adds nothing a classic group uses.
//
// Authorization (APIS.md): DESCRIBE on the key's group or transactional
// id, per key, before anything else: a denied key is answered
// GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and creates no internal topic, so a caller cannot learn where a group
// it may not see lives, nor make the node create __consumer_offsets.
func handleFindCoordinator(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.FindCoordinatorRequest)
	resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
	// One check for every key: a request has one key type.
	var check *nameAuthz
	if rt, ok := coordinatorKeyResource(body.CoordinatorType); ok {
		check = s.authzByName(req, acl.OperationDescribe, rt)
	}
	find := func(key string) coordinatorAnswer {
		if check != nil && !check.allowed(key) {
			e := authzError(check.rt)
			return coordinatorError(e.Code, e.Description)
		}
		return s.onListener(req, s.findCoordinator(ctx, body.CoordinatorType, key))
	}
	if req.version >= 4 {
		for _, key := range body.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			a := find(key)
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = a.nodeID, a.host, a.port, a.code, a.msg
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil, nil
	}
	a := find(body.CoordinatorKey)
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = a.nodeID, a.host, a.port, a.code
	if req.version >= 1 {
		resp.ErrorMessage = a.msg
	}
	return resp, nil, nil
}

// coordinatorKeyResource is the resource a FindCoordinator key names:
// a group (key type 0) or a transactional id (1). Other key types are
// refused as invalid before any lookup, so they have none.
func coordinatorKeyResource(keyType int8) (acl.ResourceType, bool) {
	switch keyType {
	case 0:
		return acl.ResourceGroup, true
	case 1:
		return acl.ResourceTransactionalID, true
	}
	return acl.ResourceUnknown, false
}

// coordinatorAnswer is one key's answer.
type coordinatorAnswer struct {
	nodeID int32
	host   string
	port   int32
	code   int16
	msg    *string
}

// onListener gives a's coordinator's endpoint on the listener req came
// in on; a coordinator without that listener is not available to the
// client (Kafka answers the same).
func (s *Server) onListener(req *request, a coordinatorAnswer) coordinatorAnswer {
	if a.code != 0 {
		return a
	}
	b, ok := s.image().Broker(a.nodeID)
	if ok {
		a.host, a.port, ok = req.endpoint(b)
	}
	if !ok {
		return coordinatorError(kerr.CoordinatorNotAvailable.Code, "the coordinator has no listener of the name this connection came in on")
	}
	return a
}

func coordinatorError(code int16, msg string) coordinatorAnswer {
	return coordinatorAnswer{nodeID: -1, port: -1, code: code, msg: &msg}
}

func (s *Server) findCoordinator(ctx context.Context, keyType int8, key string) coordinatorAnswer {
	switch keyType {
	case 0: // group
	case 1:
		return s.findTransactionCoordinator(ctx, key)
	default:
		return coordinatorError(kerr.InvalidRequest.Code, "unknown coordinator key type: allowed 0 (group) and 1 (transaction)")
	}
	if s.groups == nil {
		return coordinatorError(kerr.CoordinatorNotAvailable.Code, "this node runs no group coordinator")
	}
	t, err := s.offsetsTopic(ctx)
	if err != nil {
		return coordinatorError(s.errorCodeLogged(err, "FindCoordinator: creating "+offsetsTopic), err.Error())
	}
	n := s.cfg.OffsetsTopicPartitions
	if int32(len(t.Partitions)) != n {
		// The coordinator hashes groups over n partitions; with another
		// count it would never own the group it is sent.
		s.log.Error("kafkaserver: __consumer_offsets has the wrong partition count for the group coordinator",
			"partitions", len(t.Partitions), "want", n)
		return coordinatorError(kerr.CoordinatorNotAvailable.Code,
			fmt.Sprintf("%s has %d partitions, the group coordinator %d", offsetsTopic, len(t.Partitions), n))
	}
	p := &t.Partitions[group.PartitionFor(key, n)]
	b, ok := s.image().Broker(p.Leader)
	if p.Leader < 0 || !ok {
		return coordinatorError(kerr.CoordinatorNotAvailable.Code, "the group's __consumer_offsets partition has no leader yet")
	}
	return coordinatorAnswer{nodeID: b.NodeID, host: b.Host, port: b.Port}
}

// offsetsTopic is Kafka's name for the topic of committed offsets and
// group metadata.
const offsetsTopic = metadata.ConsumerOffsetsTopic

// offsetsTopic returns __consumer_offsets, creating it first if this is
// the first group lookup. A create that loses a race to another is
// answered from the image.
func (s *Server) offsetsTopic(ctx context.Context) (*metadata.Topic, error) {
	if t, ok := lookupTopic(s.image(), offsetsTopic); ok {
		return t, nil
	}
	rf := s.cfg.OffsetsTopicReplicationFactor
	if n := int16(len(s.image().BrokerIDs())); n > 0 && rf > n {
		rf = n // "as the cluster allows"
	}
	res := s.controller.CreateTopics(ctx, []controlplane.CreateTopic{offsetstopic.Spec(s.cfg.OffsetsTopicPartitions, rf)}, false)
	if err := res[0].Err; err != nil && !errors.Is(err, controlplane.ErrTopicExists) {
		return nil, err
	}
	if t, ok := lookupTopic(s.image(), offsetsTopic); ok {
		return t, nil
	}
	return nil, kerr.CoordinatorNotAvailable
}

// findTransactionCoordinator answers key type 1: the leader of the
// transactional id's __transaction_state partition.
func (s *Server) findTransactionCoordinator(ctx context.Context, id string) coordinatorAnswer {
	if s.cfg.Transactions == nil {
		return coordinatorError(kerr.CoordinatorNotAvailable.Code, "this node runs no transaction coordinator")
	}
	if id == "" {
		return coordinatorError(kerr.InvalidRequest.Code, "empty transactional id")
	}
	t, err := s.transactionTopic(ctx)
	if err != nil {
		return coordinatorError(s.errorCodeLogged(err, "FindCoordinator: creating "+metadata.TransactionStateTopic), err.Error())
	}
	n := s.cfg.TransactionTopicPartitions
	if int32(len(t.Partitions)) != n {
		s.log.Error("kafkaserver: __transaction_state has the wrong partition count for the transaction coordinator",
			"partitions", len(t.Partitions), "want", n)
		return coordinatorError(kerr.CoordinatorNotAvailable.Code,
			fmt.Sprintf("%s has %d partitions, the transaction coordinator %d", metadata.TransactionStateTopic, len(t.Partitions), n))
	}
	p := &t.Partitions[txn.PartitionFor(id, n)]
	b, ok := s.image().Broker(p.Leader)
	if p.Leader < 0 || !ok {
		return coordinatorError(kerr.CoordinatorNotAvailable.Code, "the transactional id's __transaction_state partition has no leader yet")
	}
	return coordinatorAnswer{nodeID: b.NodeID, host: b.Host, port: b.Port}
}

// transactionTopic returns __transaction_state, creating it first if this
// is the first transactional id's lookup.
func (s *Server) transactionTopic(ctx context.Context) (*metadata.Topic, error) {
	if t, ok := lookupTopic(s.image(), metadata.TransactionStateTopic); ok {
		return t, nil
	}
	rf := s.cfg.TransactionTopicReplicationFactor
	if n := int16(len(s.image().BrokerIDs())); n > 0 && rf > n {
		rf = n // "as the cluster allows"
	}
	res := s.controller.CreateTopics(ctx, []controlplane.CreateTopic{txnstatetopic.Spec(s.cfg.TransactionTopicPartitions, rf)}, false)
	if err := res[0].Err; err != nil && !errors.Is(err, controlplane.ErrTopicExists) {
		return nil, err
	}
	if t, ok := lookupTopic(s.image(), metadata.TransactionStateTopic); ok {
		return t, nil
	}
	return nil, kerr.CoordinatorNotAvailable
}
