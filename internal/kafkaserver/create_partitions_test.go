package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createPartitionsReq(validateOnly bool, topics ...kmsg.CreatePartitionsRequestTopic) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = topics
	req.TimeoutMillis = 5000
	req.ValidateOnly = validateOnly
	return req
}

func growTo(topic string, count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	for _, a := range assignment {
		t.Assignment = append(t.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: a})
	}
	return t
}

func TestCreatePartitions(t *testing.T) {
	for _, version := range []int16{0, 3} {
		f := newAdminFixture(t)
		f.ctrl.addTopic("grow", adminLeaderPartitions(0), nil)
		resp := adminCall[*kmsg.CreatePartitionsResponse](t, f, createPartitionsReq(false,
			growTo("grow", 3, []int32{adminTestNodeID}, []int32{adminTestNodeID})), version)
		adminWantCode(t, "grow", resp.Topics[0].ErrorCode, nil)
		if n := len(f.ctrl.Image().Topics["grow"].Partitions); n != 3 {
			t.Fatalf("v%d: %d partitions, want 3", version, n)
		}
	}
}

func TestCreatePartitionsErrors(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("three", append(adminLeaderPartitions(0), append(adminLeaderPartitions(0), adminLeaderPartitions(0)...)...), nil)
	for _, tc := range []struct {
		name  string
		topic kmsg.CreatePartitionsRequestTopic
		want  *kerr.Error
		msg   string
	}{
		{"unknown topic", growTo("nope", 2), kerr.UnknownTopicOrPartition, "nope"},
		{"shrink", growTo("three", 2), kerr.InvalidPartitions, "has 3 partitions"},
		{"same count", growTo("three", 3), kerr.InvalidPartitions, "got 3"},
		{"assignment count", growTo("three", 5, []int32{adminTestNodeID}), kerr.InvalidReplicaAssignment, "1 assignments for 2"},
		{"unknown broker", growTo("three", 4, []int32{7}), kerr.InvalidReplicaAssignment, "broker 7"},
	} {
		resp := adminCall[*kmsg.CreatePartitionsResponse](t, f, createPartitionsReq(false, tc.topic), 3)
		adminWantCode(t, tc.name, resp.Topics[0].ErrorCode, tc.want)
		if m := resp.Topics[0].ErrorMessage; m == nil || !strings.Contains(*m, tc.msg) {
			t.Fatalf("%s: message %s should contain %q", tc.name, adminMsg(m), tc.msg)
		}
		// Fjord's words alone: kerr's stock text ("Number of partitions
		// is below 1.") is false of a shrink or a count too large.
		if m := *resp.Topics[0].ErrorMessage; strings.Contains(m, tc.want.Description) || strings.HasPrefix(m, tc.want.Message) {
			t.Errorf("%s: message %q repeats the code's name or stock description", tc.name, m)
		}
	}
	if n := len(f.ctrl.Image().Topics["three"].Partitions); n != 3 {
		t.Fatalf("failed requests changed the topic: %d partitions", n)
	}
}

func TestCreatePartitionsDuplicatesAndValidateOnly(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("a", adminLeaderPartitions(0), nil)
	f.ctrl.addTopic("b", adminLeaderPartitions(0), nil)
	resp := adminCall[*kmsg.CreatePartitionsResponse](t, f, createPartitionsReq(false,
		growTo("a", 2), growTo("b", 2), growTo("a", 3)), 1)
	adminWantCode(t, "a first", resp.Topics[0].ErrorCode, kerr.InvalidRequest)
	adminWantCode(t, "b", resp.Topics[1].ErrorCode, nil)
	adminWantCode(t, "a again", resp.Topics[2].ErrorCode, kerr.InvalidRequest)
	if n := len(f.ctrl.Image().Topics["a"].Partitions); n != 1 {
		t.Fatalf("duplicated topic grew to %d", n)
	}

	resp = adminCall[*kmsg.CreatePartitionsResponse](t, f, createPartitionsReq(true, growTo("a", 4)), 2)
	adminWantCode(t, "validate only", resp.Topics[0].ErrorCode, nil)
	if n := len(f.ctrl.Image().Topics["a"].Partitions); n != 1 {
		t.Fatalf("validate-only grew the topic to %d", n)
	}
	if calls := f.ctrl.callLog(); len(calls) != 2 {
		t.Fatalf("validate-only must still ask the controller; calls %v", calls)
	}
}
