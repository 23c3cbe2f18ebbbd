package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createTopicReq(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], strp(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func createTopics(t *testing.T, f *adminFixture, version int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = topics
	req.TimeoutMillis = 5000
	req.ValidateOnly = validateOnly
	return adminCall[*kmsg.CreateTopicsResponse](t, f, req, version)
}

func TestCreateTopicsV0(t *testing.T) {
	f := newAdminFixture(t)
	resp := createTopics(t, f, 0, false, createTopicReq("orders", 3, 1, "retention.ms", "1000"))
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "orders" {
		t.Fatalf("topics %+v", resp.Topics)
	}
	rt := resp.Topics[0]
	adminWantCode(t, "orders", rt.ErrorCode, nil)
	if rt.ErrorMessage != nil || rt.NumPartitions != -1 || rt.Configs != nil {
		t.Fatalf("v0 carries no message, counts or configs: %+v", rt)
	}
	created, ok := f.ctrl.Image().Topics["orders"]
	if !ok || len(created.Partitions) != 3 || created.Configs["retention.ms"] != "1000" {
		t.Fatalf("image topic %+v", created)
	}
}

func TestCreateTopicsV7DescribesTheTopic(t *testing.T) {
	f := newAdminFixture(t)
	resp := createTopics(t, f, 7, false, createTopicReq("events", -1, -1, "cleanup.policy", "compact"))
	rt := resp.Topics[0]
	adminWantCode(t, "events", rt.ErrorCode, nil)
	created := f.ctrl.Image().Topics["events"]
	if rt.TopicID != created.ID {
		t.Fatalf("topic id %x, image has %x", rt.TopicID, created.ID)
	}
	if rt.NumPartitions != 1 || rt.ReplicationFactor != 1 {
		t.Fatalf("partitions %d rf %d, want the defaults 1 and 1", rt.NumPartitions, rt.ReplicationFactor)
	}
	if len(rt.Configs) != len(testConfigs.Defs()) {
		t.Fatalf("%d configs, want every one of %d", len(rt.Configs), len(testConfigs.Defs()))
	}
	for _, c := range rt.Configs {
		def, _ := testImage.LookupTopicConfig(c.Name)
		wantValue, wantSource := def.Default, kmsg.ConfigSourceDefaultConfig
		if c.Name == "cleanup.policy" {
			wantValue, wantSource = "compact", kmsg.ConfigSourceDynamicTopicConfig
		}
		if c.Value == nil || *c.Value != wantValue || c.Source != int8(wantSource) || c.ReadOnly || c.IsSensitive {
			t.Fatalf("config %s: value %v source %d read-only %v sensitive %v; want %q source %d, writable, not sensitive",
				c.Name, c.Value, c.Source, c.ReadOnly, c.IsSensitive, wantValue, wantSource)
		}
	}
}

// Kafka answers a name given twice with INVALID_REQUEST, creates
// neither, and names it once in the response.
func TestCreateTopicsDuplicateNames(t *testing.T) {
	f := newAdminFixture(t)
	resp := createTopics(t, f, 4, false,
		createTopicReq("dup", 1, 1), createTopicReq("solo", 1, 1), createTopicReq("dup", 2, 1))
	if len(resp.Topics) != 2 || resp.Topics[0].Topic != "dup" || resp.Topics[1].Topic != "solo" {
		t.Fatalf("want answers for dup then solo, got %+v", resp.Topics)
	}
	adminWantCode(t, "dup", resp.Topics[0].ErrorCode, kerr.InvalidRequest)
	if m := resp.Topics[0].ErrorMessage; m == nil || !strings.Contains(*m, "2 times") {
		t.Fatalf("message %s should say the name repeats", adminMsg(m))
	}
	adminWantCode(t, "solo", resp.Topics[1].ErrorCode, nil)
	if _, ok := f.ctrl.Image().Topics["dup"]; ok {
		t.Fatal("a duplicated topic was created")
	}
}

func TestCreateTopicsValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		topic   kmsg.CreateTopicsRequestTopic
		want    *kerr.Error
		msg     string // the message must contain this
	}{
		{"bad config value", 5, createTopicReq("a", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig, `"soon"`},
		{"unknown config", 5, createTopicReq("a", 1, 1, "retention.minutes", "5"), kerr.InvalidConfig, "retention.minutes"},
		{"compression other than producer", 5, createTopicReq("a", 1, 1, "compression.type", "gzip"), kerr.InvalidConfig, "gzip"},
		{"bad topic name", 5, createTopicReq("a/b", 1, 1), kerr.InvalidTopicException, "a/b"},
		{"dot", 5, createTopicReq(".", 1, 1), kerr.InvalidTopicException, ""},
		{"defaults below v4", 3, createTopicReq("a", -1, 1), kerr.InvalidRequest, "v4"},
		{"zero partitions", 5, createTopicReq("a", 0, 1), kerr.InvalidPartitions, "0 partitions"},
		{"zero replication", 5, createTopicReq("a", 1, 0), kerr.InvalidReplicationFactor, "replication factor 0"},
		{"more replicas than brokers", 5, createTopicReq("a", 1, 3), kerr.InvalidReplicationFactor, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAdminFixture(t)
			resp := createTopics(t, f, tc.version, false, tc.topic)
			rt := resp.Topics[0]
			adminWantCode(t, tc.name, rt.ErrorCode, tc.want)
			if rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, tc.msg) {
				t.Fatalf("message %s should contain %q", adminMsg(rt.ErrorMessage), tc.msg)
			}
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 || rt.Configs != nil || rt.TopicID != [16]byte{} {
				t.Fatalf("a failed topic describes nothing: %+v", rt)
			}
			if len(f.ctrl.Image().Topics) != 0 {
				t.Fatal("a topic was created")
			}
		})
	}
}

func TestCreateTopicsReplicaAssignment(t *testing.T) {
	assign := func(parts ...int32) kmsg.CreateTopicsRequestTopic {
		tr := createTopicReq("assigned", -1, -1)
		for _, p := range parts {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, []int32{adminTestNodeID}
			tr.ReplicaAssignment = append(tr.ReplicaAssignment, a)
		}
		return tr
	}
	f := newAdminFixture(t)
	resp := createTopics(t, f, 2, false, assign(1, 0))
	adminWantCode(t, "partitions 1, 0", resp.Topics[0].ErrorCode, nil)
	if n := len(f.ctrl.Image().Topics["assigned"].Partitions); n != 2 {
		t.Fatalf("%d partitions, want 2", n)
	}

	for _, tc := range []struct {
		name  string
		topic kmsg.CreateTopicsRequestTopic
		want  *kerr.Error
	}{
		{"gap", assign(0, 2), kerr.InvalidReplicaAssignment},
		{"repeat", assign(0, 0), kerr.InvalidReplicaAssignment},
		{"negative", assign(-1), kerr.InvalidReplicaAssignment},
		{"with a partition count", func() kmsg.CreateTopicsRequestTopic { a := assign(0); a.NumPartitions = 1; return a }(), kerr.InvalidRequest},
	} {
		f := newAdminFixture(t)
		resp := createTopics(t, f, 7, false, tc.topic)
		adminWantCode(t, tc.name, resp.Topics[0].ErrorCode, tc.want)
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	f := newAdminFixture(t)
	resp := createTopics(t, f, 5, true, createTopicReq("dry", 4, 1, "retention.ms", "1000"))
	rt := resp.Topics[0]
	adminWantCode(t, "dry", rt.ErrorCode, nil)
	if rt.NumPartitions != 4 || rt.ReplicationFactor != 1 {
		t.Fatalf("validate-only describes what would be created: partitions %d rf %d", rt.NumPartitions, rt.ReplicationFactor)
	}
	if _, ok := f.ctrl.Image().Topics["dry"]; ok {
		t.Fatal("validate-only created the topic")
	}
	// A validate-only call still runs the controller's checks.
	f.ctrl.addTopic("taken", adminLeaderPartitions(0), nil)
	resp = createTopics(t, f, 1, true, createTopicReq("taken", 1, 1))
	adminWantCode(t, "taken", resp.Topics[0].ErrorCode, kerr.TopicAlreadyExists)
}

func TestCreateTopicsControllerErrors(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("exists", adminLeaderPartitions(0), nil)
	resp := createTopics(t, f, 7, false, createTopicReq("exists", 1, 1))
	adminWantCode(t, "exists", resp.Topics[0].ErrorCode, kerr.TopicAlreadyExists)
	if m := resp.Topics[0].ErrorMessage; m == nil || !strings.Contains(*m, "exists") {
		t.Fatalf("message %s should name the topic", adminMsg(m))
	}

	f.ctrl.fail = kerr.NotController
	resp = createTopics(t, f, 7, false, createTopicReq("x", 1, 1))
	adminWantCode(t, "not controller", resp.Topics[0].ErrorCode, kerr.NotController)
}

// TimeoutMillis bounds the wait for the commit: past it the answer is
// REQUEST_TIMED_OUT, which clients retry.
func TestCreateTopicsTimeout(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.blockUntilDone = true
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{createTopicReq("slow", 1, 1)}
	req.TimeoutMillis = 20
	resp := adminCall[*kmsg.CreateTopicsResponse](t, f, req, 7)
	adminWantCode(t, "slow", resp.Topics[0].ErrorCode, kerr.RequestTimedOut)
}
