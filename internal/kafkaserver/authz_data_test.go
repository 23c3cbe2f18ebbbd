package kafkaserver

// Authorization of the data path (Metadata, Produce, Fetch, ListOffsets,
// OffsetForLeaderEpoch, InitProducerId), the transactional APIs and the
// node-to-node APIs, over the wire: principals are SCRAM logins on a
// SASL_PLAINTEXT listener, as a real client's would be.

import (
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/sasl"
)

// aclUsers are the users of aclHarness, each with the password
// user+"-secret": admin is a super user, alice and bob are not.
var aclUsers = []string{"admin", "alice", "bob"}

// aclHarness is a wire harness with a SASL_PLAINTEXT (SCRAM-SHA-512)
// listener, the users aclUsers, and authorization on (testACLConfig:
// User:admin a super user, allow.everyone.if.no.acl.found off).
func aclHarness(t *testing.T, opts ...harnessOpt) *wireHarness {
	t.Helper()
	creds := staticCredentials{}
	for _, u := range aclUsers {
		c, err := sasl.NewCredential(sasl.ScramSHA512, u+"-secret", sasl.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[u+"/"+sasl.ScramSHA512] = c
	}
	srv, err := sasl.New(sasl.Config{Mechanisms: []string{sasl.ScramSHA512}, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	lc := ListenerConfig{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext, SASL: srv}
	return newWireHarness(t, append([]harnessOpt{withListener(lc), withACLs()}, opts...)...)
}

// as is a raw connection of h authenticated as user.
func (h *wireHarness) as(t *testing.T, user string) *rawConn {
	t.Helper()
	c := h.dialFor(t)
	scramAuthenticate(t, c, user, user+"-secret")
	return c
}

// setBindings replaces the bindings of h's image.
func (h *wireHarness) setBindings(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	h.ctrl.mu.Lock()
	defer h.ctrl.mu.Unlock()
	h.ctrl.img = withBindings(t, h.ctrl.img, bindings...)
}

// aliceBindings: alice may write (and create) topics prefixed "a-",
// read topic a-1, and is denied writing a-deny.
func aliceBindings() []acl.Binding {
	return []acl.Binding{
		allowBinding(acl.ResourceTopic, acl.PatternPrefixed, "a-", "User:alice", acl.OperationWrite),
		allowBinding(acl.ResourceTopic, acl.PatternPrefixed, "a-", "User:alice", acl.OperationCreate),
		allowBinding(acl.ResourceTopic, acl.PatternLiteral, "a-1", "User:alice", acl.OperationRead),
		denyBinding(acl.ResourceTopic, acl.PatternLiteral, "a-deny", "User:alice", acl.OperationWrite),
	}
}

// produceTo sends one batch to each topic's partition 0, acks=1, and
// returns each topic's error code.
func produceTo(t *testing.T, c *rawConn, topics ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
	for _, topic := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch(t, "v", 1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	return out
}

// metadataOf asks Metadata v12 for topics (nil: every topic) and returns
// each answered topic's error code by name.
func metadataOf(t *testing.T, c *rawConn, autoCreate bool, topics ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 12, autoCreate
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		out[*rt.Topic] = rt.ErrorCode
	}
	return out
}

func TestAuthzProduce(t *testing.T) {
	h := aclHarness(t)
	h.ctrl.addTopic("a-1", 1)
	h.ctrl.addTopic("a-deny", 1)
	h.ctrl.addTopic("b-1", 1)
	h.setBindings(t, aliceBindings()...)

	alice := h.as(t, "alice")
	got := produceTo(t, alice, "a-1", "b-1", "a-deny", "b-new", "a-new")
	want := map[string]int16{
		"a-1":    0,
		"b-1":    kerr.TopicAuthorizationFailed.Code,
		"a-deny": kerr.TopicAuthorizationFailed.Code, // deny beats the prefixed allow
		"b-new":  kerr.TopicAuthorizationFailed.Code, // before existence, and not created
		"a-new":  0,                                  // WRITE and CREATE on a-: auto-created
	}
	for topic, code := range want {
		if got[topic] != code {
			t.Errorf("alice produce to %s: error %d, want %d", topic, got[topic], code)
		}
	}
	if _, ok := h.ctrl.Image().Topics["b-new"]; ok {
		t.Error("a produce refused for b-new created the topic")
	}
	if n := h.reps.logEnd("b-1"); n != 0 {
		t.Errorf("b-1 has %d records after a refused produce", n)
	}

	// bob has no binding: everything refused, nothing created.
	bob := h.as(t, "bob")
	for topic, code := range produceTo(t, bob, "a-1", "c-new") {
		if code != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("bob produce to %s: error %d, want TOPIC_AUTHORIZATION_FAILED", topic, code)
		}
	}

	// The super user passes every check.
	for topic, code := range produceTo(t, h.as(t, "admin"), "b-1", "a-deny", "z-new") {
		if code != 0 {
			t.Errorf("admin produce to %s: error %d", topic, code)
		}
	}

	// A transactional produce needs WRITE on the id: alice has none.
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 5000, kmsg.StringPtr("tx")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "a-1"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch(t, "v", 1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	h.srv.cfg.Transactions = &scriptedTxns{}
	resp := alice.roundTrip(req).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional produce without WRITE on the id: error %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}
	if n := counterValue(t, h.srv.metrics.authzDenied); n == 0 {
		t.Error("fjord_kafka_authorization_denials_total stayed 0")
	}
}

func TestAuthzMetadata(t *testing.T) {
	h := aclHarness(t)
	for _, topic := range []string{"a-1", "a-2", "b-1"} {
		h.ctrl.addTopic(topic, 1)
	}
	h.setBindings(t, append(aliceBindings(),
		// DESCRIBE is implied by WRITE and READ; b-1's DENY of READ
		// does not deny DESCRIBE, which no binding grants bob anyway.
		denyBinding(acl.ResourceTopic, acl.PatternLiteral, "b-1", "User:alice", acl.OperationDescribe))...)
	alice := h.as(t, "alice")

	// Every topic: only those alice may describe, the others left out.
	all := metadataOf(t, alice, false)
	if len(all) != 2 || all["a-1"] != 0 || all["a-2"] != 0 {
		t.Errorf("alice's Metadata of every topic: %v, want a-1 and a-2", all)
	}
	if got := metadataOf(t, h.as(t, "bob"), false); len(got) != 0 {
		t.Errorf("bob's Metadata of every topic: %v, want none", got)
	}
	if got := metadataOf(t, h.as(t, "admin"), false); len(got) != 3 {
		t.Errorf("admin's Metadata of every topic: %v, want all three", got)
	}

	// Named: refused before existence; auto-creation needs CREATE.
	named := metadataOf(t, alice, true, "a-1", "b-1", "nope", "a-auto", "a-1")
	want := map[string]int16{
		"a-1":    0,
		"b-1":    kerr.TopicAuthorizationFailed.Code,
		"nope":   kerr.TopicAuthorizationFailed.Code,
		"a-auto": 0,
	}
	for topic, code := range want {
		if named[topic] != code {
			t.Errorf("alice's Metadata of %s: error %d, want %d", topic, named[topic], code)
		}
	}
	if _, ok := h.ctrl.Image().Topics["nope"]; ok {
		t.Error("a Metadata refused for nope created it")
	}
	if _, ok := h.ctrl.Image().Topics["a-auto"]; !ok {
		t.Error("alice's Metadata did not auto-create a-auto (CREATE on a-)")
	}

	// By id: an unknown id is UNKNOWN_TOPIC_ID for anyone; b-1's id is
	// refused without its name.
	b1 := h.ctrl.Image().Topics["b-1"]
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, id := range [][16]byte{b1.ID, {1, 2, 3}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := alice.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.Topics[0].Topic != nil || len(resp.Topics[0].Partitions) != 0 {
		t.Errorf("b-1 by id: %+v, want TOPIC_AUTHORIZATION_FAILED without a name", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("an unknown id: error %d, want UNKNOWN_TOPIC_ID", resp.Topics[1].ErrorCode)
	}
}

// KIP-430: authorized operations only when asked, and only the cluster's
// to a principal that may describe the cluster.
func TestAuthzMetadataAuthorizedOperations(t *testing.T) {
	h := aclHarness(t)
	h.ctrl.addTopic("a-1", 1)
	h.setBindings(t, aliceBindings()...)
	ask := func(c *rawConn, include bool) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 10
		req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = include, include
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("a-1")
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.MetadataResponse)
	}
	alice := h.as(t, "alice")
	if r := ask(alice, false); r.AuthorizedOperations != math.MinInt32 || r.Topics[0].AuthorizedOperations != math.MinInt32 {
		t.Errorf("not asked: cluster %d, topic %d; want %d for both", r.AuthorizedOperations, r.Topics[0].AuthorizedOperations, math.MinInt32)
	}
	r := ask(alice, true)
	if r.AuthorizedOperations != 0 {
		t.Errorf("alice may not describe the cluster: its operations are %b, want 0", r.AuthorizedOperations)
	}
	bits := func(ops ...acl.Operation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << op
		}
		return b
	}
	if want := bits(acl.OperationRead, acl.OperationWrite, acl.OperationCreate, acl.OperationDescribe); r.Topics[0].AuthorizedOperations != want {
		t.Errorf("alice's operations on a-1: %b, want %b", r.Topics[0].AuthorizedOperations, want)
	}
	admin := ask(h.as(t, "admin"), true)
	if admin.AuthorizedOperations == 0 || admin.AuthorizedOperations == math.MinInt32 {
		t.Errorf("admin's cluster operations: %b", admin.AuthorizedOperations)
	}
}

func TestAuthzFetchAndOffsets(t *testing.T) {
	h := aclHarness(t)
	a1 := h.ctrl.addTopic("a-1", 1)
	b1 := h.ctrl.addTopic("b-1", 1)
	h.setBindings(t, aliceBindings()...)
	alice := h.as(t, "alice")

	fetch := func(version int16, replicaID int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = version, replicaID, 1<<20, -1
		for _, topic := range []*struct {
			name string
			id   [16]byte
		}{{"a-1", a1.ID}, {"b-1", b1.ID}, {"nope", [16]byte{9}}} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic.name, topic.id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return alice.roundTrip(req).(*kmsg.FetchResponse)
	}
	// By name (v12): a-1 read, b-1 and the unknown topic refused alike.
	resp := fetch(12, -1)
	codes := []int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode, resp.Topics[2].Partitions[0].ErrorCode}
	if !slices.Equal(codes, []int16{0, kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code}) {
		t.Errorf("fetch v12 by name: codes %v, want [0 29 29]", codes)
	}
	// By id (v13): the unknown id is UNKNOWN_TOPIC_ID, b-1's refused.
	resp = fetch(13, -1)
	codes = []int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode, resp.Topics[2].Partitions[0].ErrorCode}
	if !slices.Equal(codes, []int16{0, kerr.TopicAuthorizationFailed.Code, kerr.UnknownTopicID.Code}) {
		t.Errorf("fetch v13 by id: codes %v, want [0 29 100]", codes)
	}
	// A follower's fetch from a principal that is not a node's.
	if resp := fetch(12, 1); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("a follower fetch from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}

	// ListOffsets: DESCRIBE per topic (alice's WRITE on a- implies it).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 7, -1
	for _, topic := range []string{"a-1", "b-1", "nope"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	lr := alice.roundTrip(lo).(*kmsg.ListOffsetsResponse)
	codes = []int16{lr.Topics[0].Partitions[0].ErrorCode, lr.Topics[1].Partitions[0].ErrorCode, lr.Topics[2].Partitions[0].ErrorCode}
	if !slices.Equal(codes, []int16{0, kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code}) {
		t.Errorf("ListOffsets: codes %v, want [0 29 29]", codes)
	}

	// OffsetForLeaderEpoch: DESCRIBE per topic without CLUSTER_ACTION.
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version, oe.ReplicaID = 4, -1
	for _, topic := range []string{"a-1", "b-1"} {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		oe.Topics = append(oe.Topics, rt)
	}
	or := alice.roundTrip(oe).(*kmsg.OffsetForLeaderEpochResponse)
	if c0, c1 := or.Topics[0].Partitions[0].ErrorCode, or.Topics[1].Partitions[0].ErrorCode; c0 != 0 || c1 != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetForLeaderEpoch: codes %d, %d; want 0, 29", c0, c1)
	}
}

func TestAuthzInitProducerID(t *testing.T) {
	h := aclHarness(t, withTransactions(&scriptedTxns{}))
	h.setBindings(t, append(aliceBindings(),
		allowBinding(acl.ResourceTransactionalID, acl.PatternLiteral, "alice-tx", "User:alice", acl.OperationWrite))...)
	init := func(c *rawConn, txnID *string) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, txnID, 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		return c.roundTrip(req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	alice, bob := h.as(t, "alice"), h.as(t, "bob")
	// Idempotent: WRITE on some topic is enough (KIP-679); bob has none.
	if code := init(alice, nil); code != 0 {
		t.Errorf("alice's idempotent InitProducerId: error %d", code)
	}
	if code := init(bob, nil); code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("bob's idempotent InitProducerId: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if code := init(alice, kmsg.StringPtr("alice-tx")); code != 0 {
		t.Errorf("alice's InitProducerId for alice-tx: error %d", code)
	}
	if code := init(alice, kmsg.StringPtr("other-tx")); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("alice's InitProducerId for other-tx: error %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}
}

func TestAuthzTransactions(t *testing.T) {
	f := &scriptedTxns{}
	h := aclHarness(t, withTransactions(f))
	h.ctrl.addTopic("a-1", 1)
	h.ctrl.addTopic("b-1", 1)
	h.setBindings(t, append(aliceBindings(),
		allowBinding(acl.ResourceTransactionalID, acl.PatternLiteral, "alice-tx", "User:alice", acl.OperationWrite),
		allowBinding(acl.ResourceGroup, acl.PatternLiteral, "g1", "User:alice", acl.OperationRead))...)
	alice := h.as(t, "alice")

	add := func(id string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, id, 7, 3
		for _, topic := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		resp := alice.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := add("other-tx", "a-1"); got["a-1"] != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn for other-tx: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", got)
	}
	got := add("alice-tx", "a-1", "b-1")
	if got["b-1"] != kerr.TopicAuthorizationFailed.Code || got["a-1"] != kerr.OperationNotAttempted.Code {
		t.Errorf("AddPartitionsToTxn with b-1 denied: %v, want b-1 29 and a-1 OPERATION_NOT_ATTEMPTED", got)
	}
	if got := add("alice-tx", "a-1"); got["a-1"] != 0 {
		t.Errorf("AddPartitionsToTxn of a-1: %v", got)
	}
	// v4 is the partition leaders' form: CLUSTER_ACTION.
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "alice-tx", 7, 3, true
	v4.Transactions = append(v4.Transactions, tx)
	if resp := alice.roundTrip(v4).(*kmsg.AddPartitionsToTxnResponse); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn v4 from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = 3, "alice-tx", 7, 3, "g2"
	if code := alice.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("AddOffsetsToTxn with group g2: error %d, want GROUP_AUTHORIZATION_FAILED", code)
	}
	ao.TransactionalID = "other-tx"
	if code := alice.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("AddOffsetsToTxn for other-tx: error %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch = 3, "other-tx", 7, 3
	if code := alice.roundTrip(end).(*kmsg.EndTxnResponse).ErrorCode; code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("EndTxn for other-tx: error %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}

	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.Version, toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch = 3, "alice-tx", "g2", 7, 3
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "a-1"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	toc.Topics = append(toc.Topics, rt)
	if code := alice.roundTrip(toc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("TxnOffsetCommit for group g2: error %d, want GROUP_AUTHORIZATION_FAILED", code)
	}

	// DescribeTransactions: DESCRIBE per id (WRITE implies it); the
	// transaction's topics alice may not describe are left out.
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"alice-tx", "known"}
	dr := alice.roundTrip(dt).(*kmsg.DescribeTransactionsResponse)
	if dr.TransactionStates[0].ErrorCode != kerr.TransactionalIDNotFound.Code || dr.TransactionStates[1].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("DescribeTransactions: codes %d, %d; want TRANSACTIONAL_ID_NOT_FOUND, TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
			dr.TransactionStates[0].ErrorCode, dr.TransactionStates[1].ErrorCode)
	}
	admin := h.as(t, "admin")
	if dr := admin.roundTrip(dt).(*kmsg.DescribeTransactionsResponse); len(dr.TransactionStates[1].Topics) != 2 {
		t.Errorf("admin's DescribeTransactions of known: topics %+v, want a and b", dr.TransactionStates[1].Topics)
	}
	h.setBindings(t, allowBinding(acl.ResourceTransactionalID, acl.PatternLiteral, "known", "User:alice", acl.OperationDescribe),
		allowBinding(acl.ResourceTopic, acl.PatternLiteral, "a", "User:alice", acl.OperationDescribe))
	dr = alice.roundTrip(dt).(*kmsg.DescribeTransactionsResponse)
	if ts := dr.TransactionStates[1].Topics; dr.TransactionStates[1].ErrorCode != 0 || len(ts) != 1 || ts[0].Topic != "a" {
		t.Errorf("alice's DescribeTransactions of known: %+v, want topic a only", dr.TransactionStates[1])
	}

	// ListTransactions lists only what the principal may describe.
	lt := kmsg.NewPtrListTransactionsRequest()
	if lr := h.as(t, "bob").roundTrip(lt).(*kmsg.ListTransactionsResponse); len(lr.TransactionStates) != 0 || lr.ErrorCode != 0 {
		t.Errorf("bob's ListTransactions: %+v, want none listed", lr)
	}
	if lr := alice.roundTrip(lt).(*kmsg.ListTransactionsResponse); len(lr.TransactionStates) != 1 {
		t.Errorf("alice's ListTransactions: %+v, want known", lr)
	}
}

// The node-to-node APIs need CLUSTER_ACTION even from a client that
// names itself a node (the client id is no secret).
func TestAuthzNodeAPIs(t *testing.T) {
	const internalID = "fjord-internal-test"
	h := aclHarness(t, withConfig(func(c *Config) { c.InternalClientID = internalID }))
	h.ctrl.addTopic("a-1", 1)
	h.setBindings(t, aliceBindings()...)
	asNode := func(user string) *rawConn {
		c := h.as(t, user)
		c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(internalID))
		return c
	}
	alice := asNode("alice")

	alloc := kmsg.NewPtrAllocateProducerIDsRequest()
	alloc.BrokerID, alloc.BrokerEpoch = 1, 0
	if code := alice.roundTrip(alloc).(*kmsg.AllocateProducerIDsResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AllocateProducerIds from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = 1, 0, 0
	if code := alice.roundTrip(hb).(*kmsg.BrokerHeartbeatResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("BrokerHeartbeat from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID = 2
	if code := alice.roundTrip(reg).(*kmsg.BrokerRegistrationResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("BrokerRegistration from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 7, 0, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "a-1", []int32{0}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	if code := alice.roundTrip(wm).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("WriteTxnMarkers from alice: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if n := h.reps.logEnd("a-1"); n != 0 {
		t.Errorf("a refused marker wrote %d records", n)
	}
	// The super user (as a node's principal is meant to be) passes the
	// authorization and reaches the API's own checks.
	if code := asNode("admin").roundTrip(wm).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code == kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("WriteTxnMarkers from admin: refused for authorization")
	}
}

// Until the node has caught up (ACLConfig.Ready), requests of anyone but
// a super user wait; then they are served by the caught-up bindings.
func TestAuthzWaitsUntilReady(t *testing.T) {
	var ready atomic.Bool
	h := aclHarness(t, withConfig(func(c *Config) {
		c.ACL.Ready = func(*metadata.Image) bool { return ready.Load() }
	}))
	h.ctrl.addTopic("a-1", 1)
	admin := h.as(t, "admin")
	if got := metadataOf(t, admin, false); len(got) != 1 {
		t.Fatalf("admin's Metadata before ready: %v", got)
	}

	alice := h.as(t, "alice")
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	corr := alice.send(req)
	answered := make(chan *kmsg.MetadataResponse, 1)
	go func() { answered <- alice.recv(req, corr).(*kmsg.MetadataResponse) }()
	// alice's request is parked while the node is not ready; the
	// bindings arrive, then readiness.
	select {
	case <-answered:
		t.Fatal("alice was answered before the node was ready")
	case <-time.After(100 * time.Millisecond):
	}
	h.setBindings(t, aliceBindings()...)
	ready.Store(true)
	select {
	case resp := <-answered:
		if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "a-1" {
			t.Errorf("alice's Metadata once ready: %+v", resp.Topics)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alice was not answered once the node was ready")
	}
}

// logEnd is the log end offset of topic's partition 0 (0 when nothing
// was ever appended).
func (r *memReplicas) logEnd(topic string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[memTP{topic, 0}]; p != nil {
		return p.next
	}
	return 0
}
