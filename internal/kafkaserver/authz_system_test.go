package kafkaserver

// The system-topic rule (authz_system.go): the consumer policies topic
// needs ALTER on the cluster to be written and DESCRIBE_CONFIGS on the
// cluster to be read, in addition to its own ACLs; a denial is
// TOPIC_AUTHORIZATION_FAILED and does nothing. Regression tests for a
// WRITE grant on "*" (or on the prefix "__") that let any principal set
// any group's poison policy over Kafka, around the HTTP API's GROUP
// ALTER_CONFIGS check.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

const policiesTopic = metadata.ConsumerPoliciesTopic

// fetchFirst fetches partition 0 of each topic from offset 0 (Fetch v12,
// by name) and returns each topic's error code and whether records came.
func fetchFirst(t *testing.T, c *rawConn, topics ...string) (codes map[string]int16, records map[string]bool) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 12, -1, 1<<20, -1
	for _, topic := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	codes, records = map[string]int16{}, map[string]bool{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
		records[rt.Topic] = len(rt.Partitions[0].RecordBatches) > 0
	}
	return codes, records
}

// wantCodes fails t for each topic whose code in got is not want's.
func wantCodes(t *testing.T, what string, got, want map[string]int16) {
	t.Helper()
	for topic, code := range want {
		if got[topic] != code {
			t.Errorf("%s %s: error %s, want %s", what, topic, codeName(got[topic]), codeName(code))
		}
	}
}

// Produce and Fetch: WRITE and READ on every topic (a wildcard, or the
// prefix "__") do not reach the policies topic; the cluster rights do,
// each for its own direction; a super user needs none; other topics are
// unaffected.
func TestAuthzSystemTopicProduceFetch(t *testing.T) {
	h := aclHarness(t)
	h.ctrl.addTopic(policiesTopic, 1)
	h.ctrl.addTopic("orders", 1)
	denied, ok := kerr.TopicAuthorizationFailed.Code, int16(0)
	topicRights := func(pattern acl.PatternType, name, principal string) []acl.Binding {
		return []acl.Binding{
			allowBinding(acl.ResourceTopic, pattern, name, principal, acl.OperationWrite),
			allowBinding(acl.ResourceTopic, pattern, name, principal, acl.OperationRead),
			allowBinding(acl.ResourceTopic, pattern, name, principal, acl.OperationCreate),
		}
	}
	bindings := append(topicRights(acl.PatternLiteral, acl.WildcardResource, "User:alice"),
		topicRights(acl.PatternPrefixed, "__", "User:bob")...)
	h.setBindings(t, bindings...)
	alice, bob := h.as(t, "alice"), h.as(t, "bob")

	// The super user writes a policy record; it is readable by it.
	wantCodes(t, "admin produce to", produceTo(t, h.as(t, "admin"), policiesTopic), map[string]int16{policiesTopic: ok})
	if codes, recs := fetchFirst(t, h.as(t, "admin"), policiesTopic); codes[policiesTopic] != ok || !recs[policiesTopic] {
		t.Fatalf("admin fetch of %s: error %s, records %v", policiesTopic, codeName(codes[policiesTopic]), recs[policiesTopic])
	}

	for _, p := range []struct {
		name string
		c    *rawConn
	}{{"alice (\"*\")", alice}, {"bob (\"__\" prefix)", bob}} {
		wantCodes(t, p.name+" produce to", produceTo(t, p.c, policiesTopic), map[string]int16{policiesTopic: denied})
		codes, recs := fetchFirst(t, p.c, policiesTopic)
		wantCodes(t, p.name+" fetch of", codes, map[string]int16{policiesTopic: denied})
		if recs[policiesTopic] {
			t.Errorf("%s: a denied fetch returned the policies topic's records", p.name)
		}
	}
	if n := h.reps.logEnd(policiesTopic); n != 1 {
		t.Fatalf("%s log end %d after denied produces, want 1 (admin's record only)", policiesTopic, n)
	}
	// Other topics: the topic ACLs alone, as before.
	wantCodes(t, "alice produce to", produceTo(t, alice, "orders"), map[string]int16{"orders": ok})
	if codes, recs := fetchFirst(t, alice, "orders"); codes["orders"] != ok || !recs["orders"] {
		t.Errorf("alice fetch of orders: error %s, records %v", codeName(codes["orders"]), recs["orders"])
	}

	// ALTER on the cluster lets alice write, not read: ALTER does not
	// imply DESCRIBE_CONFIGS.
	h.setBindings(t, append(bindings, allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationAlter))...)
	wantCodes(t, "alice, cluster ALTER, produce to", produceTo(t, alice, policiesTopic), map[string]int16{policiesTopic: ok})
	codes, _ := fetchFirst(t, alice, policiesTopic)
	wantCodes(t, "alice, cluster ALTER, fetch of", codes, map[string]int16{policiesTopic: denied})

	// And DESCRIBE_CONFIGS lets her read it.
	h.setBindings(t, append(bindings,
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationAlter),
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationDescribeConfigs))...)
	codes, recs := fetchFirst(t, alice, policiesTopic)
	if codes[policiesTopic] != ok || !recs[policiesTopic] {
		t.Errorf("alice with the cluster rights: fetch error %s, records %v", codeName(codes[policiesTopic]), recs[policiesTopic])
	}
	if n := h.reps.logEnd(policiesTopic); n != 2 {
		t.Fatalf("%s log end %d, want 2 (admin's and alice's once allowed)", policiesTopic, n)
	}
	// The cluster rights give nothing without the topic's own: bob holds
	// both cluster rights but no binding on the topic.
	h.setBindings(t,
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:bob", acl.OperationAlter),
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:bob", acl.OperationDescribeConfigs))
	wantCodes(t, "bob, cluster rights only, produce to", produceTo(t, bob, policiesTopic), map[string]int16{policiesTopic: denied})
}

// A missing policies topic is not auto-created by a produce denied for
// want of the cluster right, though the principal may create topics.
func TestAuthzSystemTopicNotAutoCreated(t *testing.T) {
	h := aclHarness(t)
	h.setBindings(t,
		allowBinding(acl.ResourceTopic, acl.PatternLiteral, acl.WildcardResource, "User:alice", acl.OperationWrite),
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationCreate))
	alice := h.as(t, "alice")
	wantCodes(t, "alice produce to", produceTo(t, alice, policiesTopic, "fresh"),
		map[string]int16{policiesTopic: kerr.TopicAuthorizationFailed.Code, "fresh": 0})
	if _, ok := h.ctrl.Image().Topics[policiesTopic]; ok {
		t.Fatalf("a denied produce created %s", policiesTopic)
	}
}

// With authorization off (Config.ACL nil) the policies topic is a topic
// like any other.
func TestAuthzSystemTopicAuthorizationOff(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic(policiesTopic, 1)
	c := h.dial()
	wantCodes(t, "produce to", produceTo(t, c, policiesTopic), map[string]int16{policiesTopic: 0})
	if codes, recs := fetchFirst(t, c, policiesTopic); codes[policiesTopic] != 0 || !recs[policiesTopic] {
		t.Fatalf("fetch of %s: error %s, records %v", policiesTopic, codeName(codes[policiesTopic]), recs[policiesTopic])
	}
}

// The admin APIs that change a topic: the topic's own right on "*"
// (DELETE for DeleteTopics and DeleteRecords, ALTER for CreatePartitions,
// ALTER_CONFIGS for the config APIs) does not reach the policies topic,
// and nothing is done or asked of the controller; with ALTER on the
// cluster it does; a super user needs nothing; another topic under the
// same binding is unaffected.
func TestAuthzSystemTopicAdminAPIs(t *testing.T) {
	changes := map[string]bool{"DeleteTopics": true, "DeleteRecords": true, "CreatePartitions": true, "AlterConfigs": true, "IncrementalAlterConfigs": true}
	seen := 0
	for _, api := range topicAPIs {
		if !changes[api.name] {
			continue
		}
		seen++
		wildcard := allowBinding(acl.ResourceTopic, acl.PatternLiteral, acl.WildcardResource, authzAlice, api.op)
		for _, tc := range []struct {
			name      string
			principal string
			topic     string
			bindings  []acl.Binding
			allowed   bool
		}{
			{"topic right on *", authzAlice, policiesTopic, []acl.Binding{wildcard}, false},
			{"topic right on *, and cluster ALTER", authzAlice, policiesTopic, []acl.Binding{wildcard, aliceOnCluster(acl.OperationAlter)}, true},
			{"topic right on *, and cluster ALTER_CONFIGS", authzAlice, policiesTopic, []acl.Binding{wildcard, aliceOnCluster(acl.OperationAlterConfigs)}, false},
			{"cluster ALTER alone", authzAlice, policiesTopic, []acl.Binding{aliceOnCluster(acl.OperationAlter)}, false},
			{"super user", authzAdmin, policiesTopic, nil, true},
			{"other topic, topic right on *", authzAlice, "orders", []acl.Binding{wildcard}, true},
		} {
			t.Run(api.name+"/"+tc.name, func(t *testing.T) {
				f := newAuthzFixture(t, tc.bindings...)
				api.setup(t, f, tc.topic)
				got := api.call(t, f, tc.principal, tc.topic)
				switch {
				case tc.allowed && (got.code == kerr.TopicAuthorizationFailed.Code || !got.acted):
					t.Fatalf("allowed: code %s, did its work %v", codeName(got.code), got.acted)
				case !tc.allowed && (got.code != kerr.TopicAuthorizationFailed.Code || got.acted):
					t.Fatalf("denied: code %s, did its work %v; want TOPIC_AUTHORIZATION_FAILED and nothing done", codeName(got.code), got.acted)
				case !tc.allowed && len(f.ctrl.callLog()) != 0:
					t.Fatalf("denied, but the controller was asked: %v", f.ctrl.callLog())
				}
			})
		}
	}
	if seen != len(changes) {
		t.Fatalf("topicAPIs holds %d of the %d APIs that change a topic", seen, len(changes))
	}
}

// DeleteTopics: DELETE on the cluster, which allows deleting every
// topic, does not allow the policies topic without ALTER on the cluster.
func TestAuthzSystemTopicDeleteTopicsClusterDelete(t *testing.T) {
	f := newAuthzFixture(t, aliceOnCluster(acl.OperationDelete))
	f.ctrl.addTopic(policiesTopic, adminLeaderPartitions(0), nil)
	f.ctrl.addTopic("orders", adminLeaderPartitions(0), nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{policiesTopic, "orders"}
	resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, req, 5)
	adminWantCode(t, policiesTopic, resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	adminWantCode(t, "orders", resp.Topics[1].ErrorCode, nil)
	if _, ok := f.ctrl.Image().Topics[policiesTopic]; !ok {
		t.Fatalf("%s deleted with DELETE on the cluster but no ALTER", policiesTopic)
	}
}

// The cluster right is decided once per request, however often the
// request names the topic: one denial counted.
func TestAuthzSystemTopicDecidedOnce(t *testing.T) {
	f := newAuthzFixture(t, allowBinding(acl.ResourceTopic, acl.PatternLiteral, acl.WildcardResource, authzAlice, acl.OperationDelete))
	f.ctrl.addTopic(policiesTopic, adminLeaderPartitions(0), nil)
	f.reps.setLog(policiesTopic, 0, &adminFakeLog{hw: 10, leo: 10})
	req := kmsg.NewPtrDeleteRecordsRequest()
	for range 100 {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = policiesTopic
		rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 5}}
		req.Topics = append(req.Topics, rt)
	}
	resp := authzCall[*kmsg.DeleteRecordsResponse](t, f, authzAlice, req, 2)
	for _, rt := range resp.Topics {
		adminWantCode(t, rt.Topic, rt.Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	}
	if got := f.denials(t); got != 1 {
		t.Fatalf("%v denials for the policies topic named 100 times, want 1", got)
	}
}
