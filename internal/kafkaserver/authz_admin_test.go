package kafkaserver

// Authorization of the admin APIs (authz_admin.go and the
// "Authorization" paragraph of each handler's file), against
// internal/acl/APIS.md: a denied principal gets Kafka's error and
// nothing happens (the fakes record every call a handler makes); an
// allowed one, a super user, a prefixed or wildcard binding get through;
// a deny beats an allow; a topic the principal may not see is answered
// TOPIC_AUTHORIZATION_FAILED whether or not it exists. With Config.ACL
// nil the handlers' own tests pin that nothing changed.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
)

const (
	authzAlice = "User:alice"
	authzAdmin = "User:admin" // testACLConfig's super user
	authzHost  = "10.0.0.1"
)

// authzController records the calls adminFakeController answers without
// recording (the quorum's), so a test can tell that a denied request
// never reached them.
type authzController struct{ *adminFakeController }

func (c *authzController) QuorumState() controlplane.QuorumState {
	_ = c.begin(context.Background(), "QuorumState")
	return c.adminFakeController.QuorumState()
}

func (c *authzController) AddVoter(ctx context.Context, id int32, addr string) error {
	if err := c.begin(ctx, "AddVoter"); err != nil {
		return err
	}
	return c.adminFakeController.AddVoter(ctx, id, addr)
}

func (c *authzController) RemoveVoter(ctx context.Context, id int32) error {
	if err := c.begin(ctx, "RemoveVoter"); err != nil {
		return err
	}
	return c.adminFakeController.RemoveVoter(ctx, id)
}

func (c *authzController) UnregisterBroker(ctx context.Context, id int32) error {
	if err := c.begin(ctx, "UnregisterBroker"); err != nil {
		return err
	}
	return c.adminFakeController.UnregisterBroker(ctx, id)
}

// authzReplicas counts ActiveProducers calls and answers none.
type authzReplicas struct {
	*adminFakeReplicas
	producerReads atomic.Int32
}

func (r *authzReplicas) ActiveProducers(string, int32) ([]replica.ActiveProducer, error) {
	r.producerReads.Add(1)
	return nil, nil
}

// authzFixture is an adminFixture whose server authorizes
// (testACLConfig: User:admin is a super user, no allow without a
// binding).
type authzFixture struct {
	*adminFixture
	recorded *authzReplicas
}

func newAuthzFixture(t *testing.T, bindings ...acl.Binding) *authzFixture {
	t.Helper()
	f := &authzFixture{adminFixture: &adminFixture{
		ctrl: newAdminFakeController(),
		reps: newAdminFakeReplicas(),
		pids: &adminFakeProducerIDs{next: 1000},
	}}
	f.recorded = &authzReplicas{adminFakeReplicas: f.reps}
	cfg := Config{NodeID: adminTestNodeID, AutoCreateTopics: true, TopicConfigs: testConfigs, ACL: testACLConfig()}
	f.s = New(cfg, &authzController{f.ctrl}, f.recorded, f.pids, nil)
	t.Cleanup(func() { f.s.Close() })
	f.bind(t, bindings...)
	return f
}

// bind replaces the image's bindings (later images keep them: the fake
// copies the image whole).
func (f *authzFixture) bind(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	f.ctrl.img = withBindings(t, f.ctrl.img, bindings...)
}

// change edits a copy of the fake's image (test setup).
func (f *authzFixture) change(edit func(img *metadata.Image)) {
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	next := f.ctrl.cloneImageLocked()
	edit(next)
	f.ctrl.img = next
}

// denials is fjord_kafka_authorization_denials_total.
func (f *authzFixture) denials(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := f.s.metrics.authzDenied.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// topicConfig is topic's override of config in the fake's image ("":
// none, or no such topic).
func (f *authzFixture) topicConfig(topic, config string) string {
	if t, ok := f.ctrl.Image().Topics[topic]; ok {
		return t.Configs[config]
	}
	return ""
}

func (f *authzFixture) calls(name string) int {
	n := 0
	for _, c := range f.ctrl.callLog() {
		if c == name {
			n++
		}
	}
	return n
}

// authzCall is adminCall from principal on a connection from authzHost.
func authzCall[R kmsg.Response](t *testing.T, f *authzFixture, principal string, body kmsg.Request, version int16) R {
	t.Helper()
	return callAs[R](t, f.s, principal, authzHost, body, version)
}

func aliceAllows(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return allowBinding(rt, acl.PatternLiteral, name, authzAlice, op)
}

func aliceDenied(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return denyBinding(rt, acl.PatternLiteral, name, authzAlice, op)
}

func aliceOnCluster(op acl.Operation) acl.Binding {
	return aliceAllows(acl.ResourceCluster, acl.ClusterName, op)
}

// authzScenario is who asks and which bindings there are, for an
// operation op on a resource: whether the request must be allowed.
type authzScenario struct {
	name      string
	principal string
	bindings  func(rt acl.ResourceType, name string, op acl.Operation) []acl.Binding
	allowed   bool
}

// authzScenarios are the rules every check must follow, whatever the API.
func authzScenarios(prefix string) []authzScenario {
	otherHost := func(b acl.Binding) acl.Binding { b.Entry.Host = "10.0.0.2"; return b }
	return []authzScenario{
		{"no binding", authzAlice, nil, false},
		{"literal allow", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{aliceAllows(rt, n, op)}
		}, true},
		{"prefixed allow", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{allowBinding(rt, acl.PatternPrefixed, prefix, authzAlice, op)}
		}, true},
		{"allow ALL", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{aliceAllows(rt, n, acl.OperationAll)}
		}, true},
		{"wildcard principal", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{allowBinding(rt, acl.PatternLiteral, n, acl.WildcardPrincipal, op)}
		}, true},
		{"deny beats allow", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{aliceAllows(rt, n, acl.OperationAll), denyBinding(rt, acl.PatternPrefixed, prefix, authzAlice, op)}
		}, false},
		{"another principal's allow", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{allowBinding(rt, acl.PatternLiteral, n, "User:bob", op)}
		}, false},
		{"another operation", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{aliceAllows(rt, n, acl.OperationIdempotentWrite)}
		}, false},
		{"another host", authzAlice, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{otherHost(aliceAllows(rt, n, op))}
		}, false},
		{"super user", authzAdmin, nil, true},
		{"super user despite a deny", authzAdmin, func(rt acl.ResourceType, n string, op acl.Operation) []acl.Binding {
			return []acl.Binding{denyBinding(rt, acl.PatternLiteral, n, authzAdmin, acl.OperationAll)}
		}, true},
	}
}

// clusterAPI is one API authorized on the cluster as a whole. call
// sends it as principal and returns the error codes that answer it and
// whether it reached what it reads or changes.
type clusterAPI struct {
	name  string
	op    acl.Operation
	setup func(t *testing.T, f *authzFixture)
	call  func(t *testing.T, f *authzFixture, principal string) (codes []int16, acted bool)
}

var clusterAPIs = []clusterAPI{
	{name: "ElectLeaders", op: acl.OperationAlter,
		setup: func(t *testing.T, f *authzFixture) { f.ctrl.addTopic("t", adminLeaderPartitions(0), nil) },
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrElectLeadersRequest()
			req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 0}}}
			resp := authzCall[*kmsg.ElectLeadersResponse](t, f, p, req, 2)
			codes := []int16{resp.ErrorCode}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					codes = append(codes, rp.ErrorCode)
				}
			}
			return codes, f.calls("ElectLeaders") > 0
		}},
	{name: "AlterPartitionReassignments", op: acl.OperationAlter,
		setup: func(t *testing.T, f *authzFixture) { f.ctrl.addTopic("t", adminLeaderPartitions(0), nil) },
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = "t"
			rt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{adminTestNodeID}}}
			req.Topics = append(req.Topics, rt)
			resp := authzCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, p, req, 0)
			codes := []int16{resp.ErrorCode}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					codes = append(codes, rp.ErrorCode)
				}
			}
			return codes, f.calls("AlterPartitionReassignments") > 0
		}},
	{name: "ListPartitionReassignments", op: acl.OperationDescribe,
		setup: func(t *testing.T, f *authzFixture) {
			f.ctrl.addTopic("t", []metadata.Partition{{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, Adding: []int32{2}}}, nil)
		},
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrListPartitionReassignmentsRequest()
			req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			resp := authzCall[*kmsg.ListPartitionReassignmentsResponse](t, f, p, req, 0)
			return []int16{resp.ErrorCode}, len(resp.Topics) > 0
		}},
	{name: "DescribeQuorum", op: acl.OperationDescribe,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrDescribeQuorumRequest()
			req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
			resp := authzCall[*kmsg.DescribeQuorumResponse](t, f, p, req, 2)
			return []int16{resp.ErrorCode}, f.calls("QuorumState") > 0 && len(resp.Topics) == 1
		}},
	{name: "AddRaftVoter", op: acl.OperationAlter,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrAddRaftVoterRequest()
			req.VoterID = 4
			resp := authzCall[*kmsg.AddRaftVoterResponse](t, f, p, req, 1)
			return []int16{resp.ErrorCode}, f.calls("AddVoter") > 0
		}},
	{name: "RemoveRaftVoter", op: acl.OperationAlter,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrRemoveRaftVoterRequest()
			req.VoterID = 4
			resp := authzCall[*kmsg.RemoveRaftVoterResponse](t, f, p, req, 0)
			return []int16{resp.ErrorCode}, f.calls("RemoveVoter") > 0
		}},
	{name: "UnregisterBroker", op: acl.OperationAlter,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrUnregisterBrokerRequest()
			req.BrokerID = 7
			resp := authzCall[*kmsg.UnregisterBrokerResponse](t, f, p, req, 0)
			return []int16{resp.ErrorCode}, f.calls("UnregisterBroker") > 0
		}},
	{name: "DescribeClientQuotas", op: acl.OperationDescribeConfigs,
		setup: func(t *testing.T, f *authzFixture) {
			f.change(func(img *metadata.Image) {
				img.ClientQuotas = map[metadata.QuotaEntity]map[string]float64{
					{User: metadata.Named("zed")}: {metadata.QuotaProducerByteRate: 1024},
				}
			})
		},
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			resp := authzCall[*kmsg.DescribeClientQuotasResponse](t, f, p, kmsg.NewPtrDescribeClientQuotasRequest(), 1)
			return []int16{resp.ErrorCode}, len(resp.Entries) > 0
		}},
	{name: "AlterClientQuotas", op: acl.OperationAlterConfigs,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrAlterClientQuotasRequest()
			req.Entries = []kmsg.AlterClientQuotasRequestEntry{
				quotaEntry([][2]*string{{strp(metadata.QuotaEntityUser), strp("zed")}}, quotaOp(metadata.QuotaProducerByteRate, 1024, false)),
				quotaEntry([][2]*string{{strp(metadata.QuotaEntityClientID), nil}}, quotaOp(metadata.QuotaProducerByteRate, 2048, false)),
			}
			resp := authzCall[*kmsg.AlterClientQuotasResponse](t, f, p, req, 1)
			var codes []int16
			for _, e := range resp.Entries {
				codes = append(codes, e.ErrorCode)
			}
			if len(codes) != 2 {
				t.Fatalf("%d entries answered, want 2", len(codes))
			}
			return codes, f.calls("AlterClientQuotas") > 0 && len(f.ctrl.Image().ClientQuotas) == 2
		}},
	{name: "DescribeUserScramCredentials", op: acl.OperationDescribe,
		setup: func(t *testing.T, f *authzFixture) {
			f.change(func(img *metadata.Image) {
				img.ScramCredentials = map[string]map[string]metadata.ScramCredential{
					"carol": {metadata.ScramSHA512: {Mechanism: metadata.ScramSHA512, Iterations: 8192}},
				}
			})
		},
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
			req.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "carol"}}
			resp := authzCall[*kmsg.DescribeUserSCRAMCredentialsResponse](t, f, p, req, 0)
			codes := []int16{resp.ErrorCode}
			described := false
			for _, r := range resp.Results {
				codes = append(codes, r.ErrorCode)
				described = described || len(r.CredentialInfos) > 0
			}
			return codes, described
		}},
	{name: "AlterUserScramCredentials", op: acl.OperationAlter,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			req.Upsertions = append(req.Upsertions, scramUp("carol"), scramUp("dave"), scramUp("carol"))
			resp := authzCall[*kmsg.AlterUserSCRAMCredentialsResponse](t, f, p, req, 0)
			var codes []int16
			for _, r := range resp.Results {
				codes = append(codes, r.ErrorCode)
			}
			if len(codes) != 2 {
				t.Fatalf("%d users answered, want carol and dave once each", len(codes))
			}
			return codes, f.calls("AlterScramCredentials") > 0
		}},
	{name: "DescribeLogDirs", op: acl.OperationDescribe,
		call: func(t *testing.T, f *authzFixture, p string) ([]int16, bool) {
			resp := authzCall[*kmsg.DescribeLogDirsResponse](t, f, p, kmsg.NewPtrDescribeLogDirsRequest(), 4)
			f.reps.mu.Lock()
			asked := f.reps.logDirsCalls > 0
			f.reps.mu.Unlock()
			return []int16{resp.ErrorCode}, asked && len(resp.Dirs) == 1
		}},
}

// Every API authorized on the cluster as a whole, under every scenario:
// denied, each of its answers is CLUSTER_AUTHORIZATION_FAILED and it
// reached nothing; allowed, none is and it did its work.
func TestAuthzClusterAPIs(t *testing.T) {
	for _, api := range clusterAPIs {
		for _, sc := range authzScenarios("kafka-cluster") {
			t.Run(api.name+"/"+sc.name, func(t *testing.T) {
				f := newAuthzFixture(t)
				if api.setup != nil {
					api.setup(t, f)
				}
				if sc.bindings != nil {
					f.bind(t, sc.bindings(acl.ResourceCluster, acl.ClusterName, api.op)...)
				}
				codes, acted := api.call(t, f, sc.principal)
				denied := slices.ContainsFunc(codes, func(c int16) bool { return c == kerr.ClusterAuthorizationFailed.Code })
				switch {
				case sc.allowed && (denied || !acted):
					t.Fatalf("allowed: codes %v, reached its work %v; want no CLUSTER_AUTHORIZATION_FAILED and the work done", codes, acted)
				case !sc.allowed && acted:
					t.Fatalf("denied, but it reached its work (codes %v)", codes)
				case !sc.allowed && (len(codes) == 0 || slices.ContainsFunc(codes, func(c int16) bool { return c != kerr.ClusterAuthorizationFailed.Code })):
					t.Fatalf("denied: codes %v, want every one CLUSTER_AUTHORIZATION_FAILED", codes)
				}
			})
		}
	}
}

// The whole-request refusals carry what Kafka's error responses do, and
// nothing else: no dirs, no topics, no entries.
func TestAuthzClusterAPIsDeniedAnswers(t *testing.T) {
	f := newAuthzFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)

	// DescribeLogDirs v0-2 have no error field: an empty answer.
	for _, v := range []int16{1, 4} {
		resp := authzCall[*kmsg.DescribeLogDirsResponse](t, f, authzAlice, kmsg.NewPtrDescribeLogDirsRequest(), v)
		want := kerr.ClusterAuthorizationFailed
		if v < 3 {
			want = nil
		}
		adminWantCode(t, "DescribeLogDirs", resp.ErrorCode, want)
		if len(resp.Dirs) != 0 {
			t.Fatalf("DescribeLogDirs v%d denied lists %d dirs", v, len(resp.Dirs))
		}
	}
	if f.reps.logDirsCalls != 0 {
		t.Fatal("a denied DescribeLogDirs read the log dirs")
	}

	// A denied DescribeQuorum is the top-level error alone.
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	if resp := authzCall[*kmsg.DescribeQuorumResponse](t, f, authzAlice, dq, 2); len(resp.Topics) != 0 || resp.ErrorMessage == nil {
		t.Fatalf("DescribeQuorum denied: %d topics, message %s", len(resp.Topics), adminMsg(resp.ErrorMessage))
	}

	// ElectLeaders v0 has no top-level field: the partitions carry it,
	// each once.
	el := kmsg.NewPtrElectLeadersRequest()
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 0, 1}}}
	resp := authzCall[*kmsg.ElectLeadersResponse](t, f, authzAlice, el, 0)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("ElectLeaders v0 denied: %+v, want t-0 and t-1 once each", resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		adminWantCode(t, "ElectLeaders v0 partition", p.ErrorCode, kerr.ClusterAuthorizationFailed)
	}

	// AddRaftVoter for another cluster, denied: authorization first.
	other := "another-cluster"
	add := kmsg.NewPtrAddRaftVoterRequest()
	add.ClusterID, add.VoterID = &other, 4
	adminWantCode(t, "AddRaftVoter, another cluster", authzCall[*kmsg.AddRaftVoterResponse](t, f, authzAlice, add, 1).ErrorCode, kerr.ClusterAuthorizationFailed)

	// Hostile quota and SCRAM requests are refused for authorization
	// before their bounds are looked at, each entry or user once.
	many := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for range maxScramAlterations + 1 {
		many.Upsertions = append(many.Upsertions, scramUp("same"))
	}
	sr := authzCall[*kmsg.AlterUserSCRAMCredentialsResponse](t, f, authzAlice, many, 0)
	if len(sr.Results) != 1 || sr.Results[0].User != "same" {
		t.Fatalf("AlterUserScramCredentials of one user %d times answered %d results", maxScramAlterations+1, len(sr.Results))
	}
	adminWantCode(t, "AlterUserScramCredentials", sr.Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	du := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	du.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "x"}, {Name: "x"}, {Name: strings.Repeat("y", 10_000)}}
	dr := authzCall[*kmsg.DescribeUserSCRAMCredentialsResponse](t, f, authzAlice, du, 0)
	adminWantCode(t, "DescribeUserScramCredentials", dr.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(dr.Results) != 3 {
		t.Fatalf("DescribeUserScramCredentials denied: %d results, want one per user named (Kafka's error response)", len(dr.Results))
	}
	for _, r := range dr.Results {
		adminWantCode(t, "DescribeUserScramCredentials result", r.ErrorCode, kerr.ClusterAuthorizationFailed)
		if len(r.CredentialInfos) != 0 {
			t.Fatal("a denied describe listed credentials")
		}
	}

	bad := kmsg.NewPtrDescribeClientQuotasRequest()
	bad.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "nonsense"}}
	adminWantCode(t, "DescribeClientQuotas, bad filter", authzCall[*kmsg.DescribeClientQuotasResponse](t, f, authzAlice, bad, 1).ErrorCode, kerr.ClusterAuthorizationFailed)

	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.ValidateOnly = true
	for range maxQuotaEntries + 1 {
		aq.Entries = append(aq.Entries, quotaEntry([][2]*string{{strp("nonsense"), nil}}))
	}
	for _, e := range authzCall[*kmsg.AlterClientQuotasResponse](t, f, authzAlice, aq, 1).Entries {
		adminWantCode(t, "AlterClientQuotas entry", e.ErrorCode, kerr.ClusterAuthorizationFailed)
	}

	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("denied requests reached the controller: %v", calls)
	}
}

// topicOutcome is what one topic's answer and the fakes say.
type topicOutcome struct {
	code  int16
	acted bool
}

// topicAPI is one API authorized per topic. call asks about topic as
// principal.
type topicAPI struct {
	name  string
	op    acl.Operation
	setup func(t *testing.T, f *authzFixture, topic string)
	call  func(t *testing.T, f *authzFixture, principal, topic string) topicOutcome
}

var topicAPIs = []topicAPI{
	{name: "CreateTopics", op: acl.OperationCreate,
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.CreateTopicsResponse](t, f, p, authzCreateTopicsReq(topic), 7)
			_, created := f.ctrl.Image().Topics[topic]
			return topicOutcome{resp.Topics[0].ErrorCode, created}
		}},
	{name: "DeleteTopics", op: acl.OperationDelete,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TopicNames = []string{topic}
			resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, p, req, 5)
			_, there := f.ctrl.Image().Topics[topic]
			return topicOutcome{resp.Topics[0].ErrorCode, f.calls("DeleteTopics") > 0 && !there}
		}},
	{name: "DeleteRecords", op: acl.OperationDelete,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
			f.reps.setLog(topic, 0, &adminFakeLog{hw: 10, leo: 10})
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.DeleteRecordsResponse](t, f, p, authzDeleteRecordsReq(topic, 5), 2)
			f.reps.mu.Lock()
			defer f.reps.mu.Unlock()
			return topicOutcome{resp.Topics[0].Partitions[0].ErrorCode, len(f.reps.deleteTimeouts) > 0}
		}},
	{name: "CreatePartitions", op: acl.OperationAlter,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.CreatePartitionsResponse](t, f, p, authzCreatePartitionsReq(topic, 2, false), 3)
			grown := false
			if tp, ok := f.ctrl.Image().Topics[topic]; ok {
				grown = len(tp.Partitions) == 2
			}
			return topicOutcome{resp.Topics[0].ErrorCode, grown}
		}},
	{name: "DescribeProducers", op: acl.OperationRead,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.DescribeProducersResponse](t, f, p, authzDescribeProducersReq(topic), 0)
			return topicOutcome{resp.Topics[0].Partitions[0].ErrorCode, f.recorded.producerReads.Load() > 0}
		}},
	{name: "DescribeConfigs", op: acl.OperationDescribeConfigs,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), map[string]string{"retention.ms": "1000"})
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.DescribeConfigsResponse](t, f, p, authzDescribeConfigsReq(kmsg.ConfigResourceTypeTopic, topic), 4)
			return topicOutcome{resp.Resources[0].ErrorCode, len(resp.Resources[0].Configs) > 0}
		}},
	{name: "AlterConfigs", op: acl.OperationAlterConfigs,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.AlterConfigsResponse](t, f, p, authzAlterConfigsReq(kmsg.ConfigResourceTypeTopic, topic, false), 2)
			return topicOutcome{resp.Resources[0].ErrorCode, f.topicConfig(topic, "retention.ms") == "1000"}
		}},
	{name: "IncrementalAlterConfigs", op: acl.OperationAlterConfigs,
		setup: func(t *testing.T, f *authzFixture, topic string) {
			f.ctrl.addTopic(topic, adminLeaderPartitions(0), nil)
		},
		call: func(t *testing.T, f *authzFixture, p, topic string) topicOutcome {
			resp := authzCall[*kmsg.IncrementalAlterConfigsResponse](t, f, p, authzIncrementalAlterReq(kmsg.ConfigResourceTypeTopic, topic, "retention.ms", "1000", false), 1)
			return topicOutcome{resp.Resources[0].ErrorCode, f.topicConfig(topic, "retention.ms") == "1000"}
		}},
}

func authzCreateTopicsReq(topics ...string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func authzDeleteRecordsReq(topic string, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: offset}}
	req.Topics = append(req.Topics, rt)
	return req
}

func authzCreatePartitionsReq(topic string, count int32, validateOnly bool) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics, req.ValidateOnly = append(req.Topics, rt), validateOnly
	return req
}

func authzDescribeProducersReq(topics ...string) *kmsg.DescribeProducersRequest {
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, n := range topics {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = n, []int32{0}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func authzDescribeConfigsReq(typ kmsg.ConfigResourceType, names ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range names {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, n
		req.Resources = append(req.Resources, rr)
	}
	return req
}

func authzAlterConfigsReq(typ kmsg.ConfigResourceType, name string, validateOnly bool) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	rr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: strp("1000")}}
	req.Resources, req.ValidateOnly = append(req.Resources, rr), validateOnly
	return req
}

func authzIncrementalAlterReq(typ kmsg.ConfigResourceType, name, config, value string, validateOnly bool) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = config, kmsg.IncrementalAlterConfigOpSet, strp(value)
	rr.Configs = append(rr.Configs, c)
	req.Resources, req.ValidateOnly = append(req.Resources, rr), validateOnly
	return req
}

// Every API authorized per topic, under every scenario, on a topic that
// exists (or, for CreateTopics, does not yet): denied, the topic is
// TOPIC_AUTHORIZATION_FAILED and untouched; allowed, the work is done.
func TestAuthzTopicAPIs(t *testing.T) {
	const topic = "team-orders"
	for _, api := range topicAPIs {
		for _, sc := range authzScenarios("team-") {
			t.Run(api.name+"/"+sc.name, func(t *testing.T) {
				f := newAuthzFixture(t)
				if api.setup != nil {
					api.setup(t, f, topic)
				}
				if sc.bindings != nil {
					f.bind(t, sc.bindings(acl.ResourceTopic, topic, api.op)...)
				}
				got := api.call(t, f, sc.principal, topic)
				switch {
				case sc.allowed && (got.code == kerr.TopicAuthorizationFailed.Code || !got.acted):
					t.Fatalf("allowed: code %s, did its work %v", codeName(got.code), got.acted)
				case !sc.allowed && (got.code != kerr.TopicAuthorizationFailed.Code || got.acted):
					t.Fatalf("denied: code %s, did its work %v; want TOPIC_AUTHORIZATION_FAILED and nothing done", codeName(got.code), got.acted)
				}
				if !sc.allowed {
					if calls := f.ctrl.callLog(); len(calls) != 0 {
						t.Fatalf("denied, but the controller was asked: %v", calls)
					}
				}
			})
		}
	}
}

// Authorization comes before existence: a topic the principal may not
// see is TOPIC_AUTHORIZATION_FAILED, as one that exists is, while an
// allowed principal learns it does not exist. Internal topics and
// invalid names are authorized like any other.
func TestAuthzTopicAPIsBeforeExistence(t *testing.T) {
	allowedCode := map[string]*kerr.Error{
		"DeleteTopics":            kerr.UnknownTopicOrPartition,
		"DeleteRecords":           kerr.UnknownTopicOrPartition,
		"CreatePartitions":        kerr.UnknownTopicOrPartition,
		"DescribeProducers":       kerr.UnknownTopicOrPartition,
		"DescribeConfigs":         kerr.UnknownTopicOrPartition,
		"AlterConfigs":            kerr.UnknownTopicOrPartition,
		"IncrementalAlterConfigs": kerr.UnknownTopicOrPartition,
	}
	for _, api := range topicAPIs {
		if allowedCode[api.name] == nil {
			continue
		}
		// Unknown, internal, invalid, far longer than any binding may
		// name, not UTF-8.
		for i, topic := range []string{"missing", "__consumer_offsets", "bad/name", strings.Repeat("x", 100_000), "\xff\xfe"} {
			t.Run(fmt.Sprintf("%s/%d", api.name, i), func(t *testing.T) {
				f := newAuthzFixture(t, aliceAllows(acl.ResourceTopic, "allowed-but-elsewhere", api.op))
				got := api.call(t, f, authzAlice, topic)
				adminWantCode(t, "denied", got.code, kerr.TopicAuthorizationFailed)
				if got.acted || len(f.ctrl.callLog()) != 0 {
					t.Fatalf("a denied request did work: %v", f.ctrl.callLog())
				}
			})
		}
		t.Run(api.name+"/allowed", func(t *testing.T) {
			f := newAuthzFixture(t, aliceAllows(acl.ResourceTopic, "missing", api.op))
			adminWantCode(t, "allowed, missing", api.call(t, f, authzAlice, "missing").code, allowedCode[api.name])
		})
	}
}

// A topic named many times is authorized once: one denial counted, every
// occurrence answered alike; distinct names each count.
func TestAuthzTopicsDecidedOncePerName(t *testing.T) {
	f := newAuthzFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)
	names := make([]string, 1000)
	for i := range names {
		names[i] = "t"
	}
	resp := authzCall[*kmsg.DescribeProducersResponse](t, f, authzAlice, authzDescribeProducersReq(names...), 0)
	for _, rt := range resp.Topics {
		adminWantCode(t, "t", rt.Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	}
	if got := f.denials(t); got != 1 {
		t.Fatalf("%v denials counted for one topic named 1000 times, want 1", got)
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	for range 3 {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "t"
		rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0}, {Partition: 1}}
		dr.Topics = append(dr.Topics, rt)
	}
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "u"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0}}
	dr.Topics = append(dr.Topics, rt)
	authzCall[*kmsg.DeleteRecordsResponse](t, f, authzAlice, dr, 2)
	if got := f.denials(t); got != 3 {
		t.Fatalf("%v denials after DeleteRecords naming t three times and u once, want 3", got)
	}

	dc := authzDescribeConfigsReq(kmsg.ConfigResourceTypeTopic, "t", "t", "v")
	dc.Resources = append(dc.Resources, authzDescribeConfigsReq(kmsg.ConfigResourceTypeBroker, "1", "").Resources...)
	dcr := authzCall[*kmsg.DescribeConfigsResponse](t, f, authzAlice, dc, 4)
	want := []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed}
	for i, r := range dcr.Resources {
		adminWantCode(t, r.ResourceName, r.ErrorCode, want[i])
	}
	// t, v, and the cluster once for both broker resources.
	if got := f.denials(t); got != 3+3 {
		t.Fatalf("%v denials after DescribeConfigs of t twice, v, and two broker resources, want 6", got)
	}
}

// CreateTopics: CREATE on the cluster allows every topic; otherwise each
// topic needs its own, and the others are created. Without
// DESCRIBE_CONFIGS a created topic is answered with its id only.
func TestAuthzCreateTopics(t *testing.T) {
	t.Run("cluster CREATE", func(t *testing.T) {
		f := newAuthzFixture(t, aliceOnCluster(acl.OperationCreate))
		resp := authzCall[*kmsg.CreateTopicsResponse](t, f, authzAlice, authzCreateTopicsReq("a", "b"), 7)
		for _, rt := range resp.Topics {
			adminWantCode(t, rt.Topic, rt.ErrorCode, nil)
			// No DESCRIBE_CONFIGS: the description is withheld.
			if rt.TopicID == ([16]byte{}) || rt.NumPartitions != -1 || rt.ReplicationFactor != -1 || len(rt.Configs) != 0 ||
				rt.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("%s: id %x partitions %d rf %d %d configs config error %d; want the id alone and TOPIC_AUTHORIZATION_FAILED",
					rt.Topic, rt.TopicID, rt.NumPartitions, rt.ReplicationFactor, len(rt.Configs), rt.ConfigErrorCode)
			}
		}
		if len(f.ctrl.Image().Topics) != 2 {
			t.Fatalf("topics %v", f.ctrl.Image().TopicNames())
		}
	})

	t.Run("per topic", func(t *testing.T) {
		f := newAuthzFixture(t,
			allowBinding(acl.ResourceTopic, acl.PatternPrefixed, "team-", authzAlice, acl.OperationCreate),
			aliceAllows(acl.ResourceTopic, "team-b", acl.OperationAlterConfigs), // implies DESCRIBE_CONFIGS
			aliceAllows(acl.ResourceTopic, "other", acl.OperationDescribeConfigs),
		)
		f.ctrl.addTopic("secret", adminLeaderPartitions(0), nil)
		resp := authzCall[*kmsg.CreateTopicsResponse](t, f, authzAlice, authzCreateTopicsReq("team-a", "other", "team-b", "secret", "team-a"), 7)
		got := map[string]kmsg.CreateTopicsResponseTopic{}
		for _, rt := range resp.Topics {
			got[rt.Topic] = rt
		}
		// A name given twice is refused for the request's shape first,
		// as Kafka does.
		adminWantCode(t, "team-a", got["team-a"].ErrorCode, kerr.InvalidRequest)
		adminWantCode(t, "other", got["other"].ErrorCode, kerr.TopicAuthorizationFailed)
		// An existing topic the principal may not create: not
		// TOPIC_ALREADY_EXISTS, which would say it is there.
		adminWantCode(t, "secret", got["secret"].ErrorCode, kerr.TopicAuthorizationFailed)
		b := got["team-b"]
		adminWantCode(t, "team-b", b.ErrorCode, nil)
		if b.ConfigErrorCode != 0 || b.NumPartitions != 1 || len(b.Configs) == 0 {
			t.Fatalf("team-b may be described: config error %d, %d partitions, %d configs", b.ConfigErrorCode, b.NumPartitions, len(b.Configs))
		}
		if names := f.ctrl.Image().TopicNames(); !slices.Equal(names, []string{"secret", "team-b"}) {
			t.Fatalf("topics %v, want secret and team-b", names)
		}
	})

	t.Run("validate only", func(t *testing.T) {
		f := newAuthzFixture(t, aliceAllows(acl.ResourceTopic, "ok", acl.OperationCreate))
		req := authzCreateTopicsReq("ok", "no")
		req.ValidateOnly = true
		resp := authzCall[*kmsg.CreateTopicsResponse](t, f, authzAlice, req, 7)
		adminWantCode(t, "ok", resp.Topics[0].ErrorCode, nil)
		adminWantCode(t, "no", resp.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)
		if f.calls("CreateTopics") != 1 || len(f.ctrl.Image().Topics) != 0 {
			t.Fatalf("validate only: calls %v, topics %v", f.ctrl.callLog(), f.ctrl.Image().TopicNames())
		}
		req = authzCreateTopicsReq("no")
		req.ValidateOnly = true
		authzCall[*kmsg.CreateTopicsResponse](t, f, authzAlice, req, 7)
		if f.calls("CreateTopics") != 1 {
			t.Fatal("a denied validate-only request reached the controller")
		}
	})

	// A denied topic is not charged to the controller mutation quota:
	// the allowed one after it, in a strict version, goes through.
	t.Run("mutation quota", func(t *testing.T) {
		f := newAuthzFixture(t, aliceAllows(acl.ResourceTopic, "ok", acl.OperationCreate))
		f.change(func(img *metadata.Image) {
			img.ClientQuotas = map[metadata.QuotaEntity]map[string]float64{
				{User: metadata.Named("alice")}: {metadata.QuotaControllerMutationRate: 1},
			}
		})
		req := authzCreateTopicsReq("no", "ok")
		for i := range req.Topics {
			req.Topics[i].NumPartitions = 20
		}
		resp := authzCall[*kmsg.CreateTopicsResponse](t, f, authzAlice, req, 7)
		adminWantCode(t, "no", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
		adminWantCode(t, "ok", resp.Topics[1].ErrorCode, nil)
	})
}

// DeleteTopics: by name, by id, and both; CLUSTER DELETE; who is told
// a topic's name or id.
func TestAuthzDeleteTopics(t *testing.T) {
	v6 := func(entries ...kmsg.DeleteTopicsRequestTopic) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Topics = entries
		return req
	}
	byName := func(n string) kmsg.DeleteTopicsRequestTopic { return kmsg.DeleteTopicsRequestTopic{Topic: strp(n)} }
	byID := func(id metadata.UUID) kmsg.DeleteTopicsRequestTopic {
		return kmsg.DeleteTopicsRequestTopic{TopicID: id}
	}

	t.Run("names", func(t *testing.T) {
		f := newAuthzFixture(t,
			aliceAllows(acl.ResourceTopic, "gone", acl.OperationDelete),
			aliceAllows(acl.ResourceTopic, "seen", acl.OperationDescribe),
			aliceAllows(acl.ResourceTopic, "ghost", acl.OperationDescribe),
		)
		for _, n := range []string{"gone", "seen", "hidden"} {
			f.ctrl.addTopic(n, adminLeaderPartitions(0), nil)
		}
		resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, v6(byName("gone"), byName("seen"), byName("hidden"), byName("ghost"), byName("nowhere")), 6)
		want := []*kerr.Error{nil, kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition, kerr.TopicAuthorizationFailed}
		for i, rt := range resp.Topics {
			adminWantCode(t, *rt.Topic, rt.ErrorCode, want[i])
		}
		if names := f.ctrl.Image().TopicNames(); !slices.Equal(names, []string{"hidden", "seen"}) {
			t.Fatalf("topics left %v", names)
		}
		if resp.Topics[2].TopicID != ([16]byte{}) {
			t.Fatalf("the id of a topic alice may not describe was answered: %x", resp.Topics[2].TopicID)
		}
	})

	t.Run("ids", func(t *testing.T) {
		f := newAuthzFixture(t,
			aliceAllows(acl.ResourceTopic, "gone", acl.OperationDelete),
			aliceAllows(acl.ResourceTopic, "seen", acl.OperationDescribe),
		)
		gone := f.ctrl.addTopic("gone", adminLeaderPartitions(0), nil)
		seen := f.ctrl.addTopic("seen", adminLeaderPartitions(0), nil)
		hidden := f.ctrl.addTopic("hidden", adminLeaderPartitions(0), nil)
		unknown := metadata.UUID{0xde, 0xad}
		resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, v6(byID(gone.ID), byID(seen.ID), byID(hidden.ID), byID(unknown)), 6)
		type answer struct {
			code *kerr.Error
			name *string
		}
		want := []answer{{nil, strp("gone")}, {kerr.TopicAuthorizationFailed, strp("seen")}, {kerr.TopicAuthorizationFailed, nil}, {kerr.UnknownTopicID, nil}}
		for i, rt := range resp.Topics {
			adminWantCode(t, "entry", rt.ErrorCode, want[i].code)
			if (rt.Topic == nil) != (want[i].name == nil) || (rt.Topic != nil && *rt.Topic != *want[i].name) {
				t.Fatalf("entry %d answered name %s, want %s", i, adminMsg(rt.Topic), adminMsg(want[i].name))
			}
		}
		if names := f.ctrl.Image().TopicNames(); !slices.Equal(names, []string{"hidden", "seen"}) {
			t.Fatalf("topics left %v", names)
		}
		// The unknown id is answered here: the controller is asked once,
		// for gone alone.
		if f.calls("DeleteTopicsByID") != 1 {
			t.Fatalf("calls %v", f.ctrl.callLog())
		}
	})

	// A name and an id of one topic: refused as a duplicate only when
	// both are authorized, else the answer would pair the id with the
	// name for one who may not see it.
	t.Run("name and id of one topic", func(t *testing.T) {
		f := newAuthzFixture(t, aliceAllows(acl.ResourceTopic, "mine", acl.OperationDelete))
		mine := f.ctrl.addTopic("mine", adminLeaderPartitions(0), nil)
		theirs := f.ctrl.addTopic("theirs", adminLeaderPartitions(0), nil)
		resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, v6(byName("mine"), byID(mine.ID), byName("theirs"), byID(theirs.ID)), 6)
		want := []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest, kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed}
		for i, rt := range resp.Topics {
			adminWantCode(t, "entry", rt.ErrorCode, want[i])
			if rt.ErrorMessage != nil && strings.Contains(*rt.ErrorMessage, "theirs") {
				t.Fatalf("entry %d message names the hidden topic: %s", i, *rt.ErrorMessage)
			}
		}
		if resp.Topics[3].Topic != nil {
			t.Fatalf("the hidden topic's id answered with its name %q", *resp.Topics[3].Topic)
		}
		if len(f.ctrl.Image().Topics) != 2 || len(f.ctrl.callLog()) != 0 {
			t.Fatalf("topics %v, calls %v", f.ctrl.Image().TopicNames(), f.ctrl.callLog())
		}
		// The same name twice says so whatever the bindings (Kafka).
		resp = authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, v6(byName("theirs"), byName("theirs")), 6)
		for _, rt := range resp.Topics {
			adminWantCode(t, "theirs twice", rt.ErrorCode, kerr.InvalidRequest)
		}
	})

	t.Run("cluster DELETE", func(t *testing.T) {
		f := newAuthzFixture(t, aliceOnCluster(acl.OperationDelete))
		a := f.ctrl.addTopic("a", adminLeaderPartitions(0), nil)
		f.ctrl.addTopic("b", adminLeaderPartitions(0), nil)
		resp := authzCall[*kmsg.DeleteTopicsResponse](t, f, authzAlice, v6(byID(a.ID), byName("b"), byName("nowhere")), 6)
		want := []*kerr.Error{nil, nil, kerr.UnknownTopicOrPartition}
		for i, rt := range resp.Topics {
			adminWantCode(t, "entry", rt.ErrorCode, want[i])
		}
		if len(f.ctrl.Image().Topics) != 0 {
			t.Fatalf("topics left %v", f.ctrl.Image().TopicNames())
		}
	})
}

// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs authorize
// each resource by its type: broker resources on the cluster, groups on
// the group; a type Kafka does not know is INVALID_REQUEST unchecked.
func TestAuthzConfigResources(t *testing.T) {
	f := newAuthzFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)
	groupType := kmsg.ConfigResourceTypeGroupConfig
	describe := func(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsResponseResource {
		req := authzDescribeConfigsReq(typ, name)
		req.Resources[0].ConfigNames = names
		return authzCall[*kmsg.DescribeConfigsResponse](t, f, authzAlice, req, 4).Resources[0]
	}
	// Denied: the cluster's for a broker (and log.dirs not read), the
	// group's for a group, broker loggers and client metrics are the
	// cluster's too; an unknown type is refused as such.
	for _, tc := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		want *kerr.Error
	}{
		{kmsg.ConfigResourceTypeBroker, "1", kerr.ClusterAuthorizationFailed},
		{kmsg.ConfigResourceTypeBroker, "", kerr.ClusterAuthorizationFailed},
		{kmsg.ConfigResourceTypeBrokerLogger, "1", kerr.ClusterAuthorizationFailed},
		{kmsg.ConfigResourceTypeClientMetrics, "m", kerr.ClusterAuthorizationFailed},
		{groupType, "g", kerr.GroupAuthorizationFailed},
		{kmsg.ConfigResourceType(99), "x", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeUnknown, "x", kerr.InvalidRequest},
	} {
		adminWantCode(t, "describe "+tc.typ.String(), describe(tc.typ, tc.name, "log.dirs").ErrorCode, tc.want)
		adminWantCode(t, "alter "+tc.typ.String(), authzCall[*kmsg.AlterConfigsResponse](t, f, authzAlice, authzAlterConfigsReq(tc.typ, tc.name, false), 2).Resources[0].ErrorCode, tc.want)
		adminWantCode(t, "incremental "+tc.typ.String(),
			authzCall[*kmsg.IncrementalAlterConfigsResponse](t, f, authzAlice, authzIncrementalAlterReq(tc.typ, tc.name, metadata.FreeSpaceWarnConfig, "10%", false), 1).Resources[0].ErrorCode, tc.want)
	}
	if f.reps.logDirsCalls != 0 || len(f.ctrl.callLog()) != 0 {
		t.Fatalf("denied: log dirs read %d times, calls %v", f.reps.logDirsCalls, f.ctrl.callLog())
	}

	// Allowed on the cluster: the broker's configs are described and
	// changed; the group is still refused, and the unsupported types
	// are now answered as unsupported.
	f.bind(t, aliceOnCluster(acl.OperationAlterConfigs), aliceAllows(acl.ResourceGroup, "g", acl.OperationAll))
	if r := describe(kmsg.ConfigResourceTypeBroker, "1", "log.dirs"); r.ErrorCode != 0 || len(r.Configs) != 1 {
		t.Fatalf("broker: code %d, %d configs; ALTER_CONFIGS implies DESCRIBE_CONFIGS", r.ErrorCode, len(r.Configs))
	}
	adminWantCode(t, "broker logger", describe(kmsg.ConfigResourceTypeBrokerLogger, "1").ErrorCode, kerr.InvalidRequest)
	adminWantCode(t, "group", describe(groupType, "g").ErrorCode, kerr.InvalidRequest)
	adminWantCode(t, "topic", describe(kmsg.ConfigResourceTypeTopic, "t").ErrorCode, kerr.TopicAuthorizationFailed)
	ir := authzCall[*kmsg.IncrementalAlterConfigsResponse](t, f, authzAlice, authzIncrementalAlterReq(kmsg.ConfigResourceTypeBroker, "", metadata.FreeSpaceWarnConfig, "10%", false), 1)
	adminWantCode(t, "incremental broker", ir.Resources[0].ErrorCode, nil)
	if f.calls("AlterBrokerConfigs") != 1 {
		t.Fatalf("calls %v", f.ctrl.callLog())
	}
	// The legacy API refuses broker configs, once authorized.
	adminWantCode(t, "legacy broker", authzCall[*kmsg.AlterConfigsResponse](t, f, authzAlice, authzAlterConfigsReq(kmsg.ConfigResourceTypeBroker, "1", false), 2).Resources[0].ErrorCode, kerr.InvalidRequest)

	// A resource named twice is refused for the request's shape,
	// whatever the bindings; validate-only is authorized alike.
	twice := authzAlterConfigsReq(kmsg.ConfigResourceTypeTopic, "t", true)
	twice.Resources = append(twice.Resources, twice.Resources[0])
	for _, r := range authzCall[*kmsg.AlterConfigsResponse](t, f, authzAlice, twice, 2).Resources {
		adminWantCode(t, "twice", r.ErrorCode, kerr.InvalidRequest)
	}
	adminWantCode(t, "validate only",
		authzCall[*kmsg.IncrementalAlterConfigsResponse](t, f, authzAlice, authzIncrementalAlterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "1000", true), 1).Resources[0].ErrorCode,
		kerr.TopicAuthorizationFailed)
	if f.calls("AlterConfigs") != 0 {
		t.Fatalf("a denied topic alteration reached the controller: %v", f.ctrl.callLog())
	}
}

// A denied CreatePartitions does not say whether the topic is keyed,
// internal, or already that large; validate-only is authorized alike.
func TestAuthzCreatePartitionsReveals(t *testing.T) {
	f := newAuthzFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)
	for _, req := range []*kmsg.CreatePartitionsRequest{
		authzCreatePartitionsReq("t", 1, false),                  // not larger
		authzCreatePartitionsReq("t", 2, true),                   // validate only
		authzCreatePartitionsReq("__consumer_offsets", 2, false), // internal
	} {
		resp := authzCall[*kmsg.CreatePartitionsResponse](t, f, authzAlice, req, 3)
		adminWantCode(t, req.Topics[0].Topic, resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	}
	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("calls %v", calls)
	}
}

// DescribeCluster refuses nothing; it reports what the principal may do
// on the cluster only when asked, and only to one that may DESCRIBE it.
func TestAuthzDescribeCluster(t *testing.T) {
	bit := func(ops ...acl.Operation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << uint(op)
		}
		return b
	}
	all := bit(acl.SupportedOperations(acl.ResourceCluster)...)
	for _, tc := range []struct {
		name      string
		principal string
		bindings  []acl.Binding
		want      int32
	}{
		{"no binding", authzAlice, nil, 0},
		{"DESCRIBE", authzAlice, []acl.Binding{aliceOnCluster(acl.OperationDescribe)}, bit(acl.OperationDescribe)},
		// ALTER implies DESCRIBE; the bit field lists both.
		{"ALTER", authzAlice, []acl.Binding{aliceOnCluster(acl.OperationAlter)}, bit(acl.OperationAlter, acl.OperationDescribe)},
		// Without DESCRIBE, the rest is not reported either.
		{"ALTER_CONFIGS but DESCRIBE denied", authzAlice, []acl.Binding{
			aliceOnCluster(acl.OperationAlterConfigs), aliceDenied(acl.ResourceCluster, acl.ClusterName, acl.OperationDescribe),
		}, 0},
		{"super user", authzAdmin, nil, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAuthzFixture(t, tc.bindings...)
			req := kmsg.NewPtrDescribeClusterRequest()
			resp := authzCall[*kmsg.DescribeClusterResponse](t, f, tc.principal, req, 2)
			if resp.ErrorCode != 0 || len(resp.Brokers) != 1 || resp.ClusterAuthorizedOperations != math.MinInt32 {
				t.Fatalf("not asked: code %d, %d brokers, operations %d; want the brokers and Kafka's 'not provided'",
					resp.ErrorCode, len(resp.Brokers), resp.ClusterAuthorizedOperations)
			}
			req.IncludeClusterAuthorizedOperations = true
			resp = authzCall[*kmsg.DescribeClusterResponse](t, f, tc.principal, req, 2)
			if resp.ErrorCode != 0 || len(resp.Brokers) != 1 || resp.ClusterAuthorizedOperations != tc.want {
				t.Fatalf("asked: code %d, %d brokers, operations %b; want %b", resp.ErrorCode, len(resp.Brokers), resp.ClusterAuthorizedOperations, tc.want)
			}
		})
	}

	// Authorization off: every operation the cluster supports, when
	// asked, as Kafka without an authorizer.
	f := newAdminFixture(t)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	if got := adminCall[*kmsg.DescribeClusterResponse](t, f, req, 0).ClusterAuthorizedOperations; got != all {
		t.Fatalf("authorization off: operations %b, want %b", got, all)
	}
	// A refused endpoint type answers before: "not provided".
	req.EndpointType = 2
	if got := adminCall[*kmsg.DescribeClusterResponse](t, f, req, 1).ClusterAuthorizedOperations; got != math.MinInt32 {
		t.Fatalf("refused endpoint type: operations %d", got)
	}
}
