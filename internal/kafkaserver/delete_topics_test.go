package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
)

func TestDeleteTopicsV0ByName(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("gone", adminLeaderPartitions(0), nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"gone", "never"}
	req.TimeoutMillis = 5000
	resp := adminCall[*kmsg.DeleteTopicsResponse](t, f, req, 0)
	if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "gone" || *resp.Topics[1].Topic != "never" {
		t.Fatalf("topics %+v", resp.Topics)
	}
	adminWantCode(t, "gone", resp.Topics[0].ErrorCode, nil)
	adminWantCode(t, "never", resp.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)
	if resp.Topics[1].ErrorMessage != nil {
		t.Fatal("v0 carries no message")
	}
	if _, ok := f.ctrl.Image().Topics["gone"]; ok {
		t.Fatal("topic not deleted")
	}
}

func TestDeleteTopicsV6ByNameAndID(t *testing.T) {
	f := newAdminFixture(t)
	byName := f.ctrl.addTopic("by-name", adminLeaderPartitions(0), nil)
	byID := f.ctrl.addTopic("by-id", adminLeaderPartitions(0), nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	add := func(name *string, id metadata.UUID) {
		e := kmsg.NewDeleteTopicsRequestTopic()
		e.Topic, e.TopicID = name, id
		req.Topics = append(req.Topics, e)
	}
	add(strp("by-name"), metadata.UUID{})
	add(nil, byID.ID)
	add(nil, metadata.UUID{0xde, 0xad})
	add(strp("both"), metadata.UUID{1})
	resp := adminCall[*kmsg.DeleteTopicsResponse](t, f, req, 6)

	if len(resp.Topics) != 4 {
		t.Fatalf("%d answers, want 4", len(resp.Topics))
	}
	r0, r1, r2, r3 := resp.Topics[0], resp.Topics[1], resp.Topics[2], resp.Topics[3]
	adminWantCode(t, "by name", r0.ErrorCode, nil)
	if *r0.Topic != "by-name" || r0.TopicID != byName.ID {
		t.Fatalf("by name: answered %v %x, want the name and its id", r0.Topic, r0.TopicID)
	}
	adminWantCode(t, "by id", r1.ErrorCode, nil)
	if r1.Topic == nil || *r1.Topic != "by-id" || r1.TopicID != byID.ID {
		t.Fatalf("by id: answered %v %x, want the resolved name and the id", r1.Topic, r1.TopicID)
	}
	adminWantCode(t, "unknown id", r2.ErrorCode, kerr.UnknownTopicID)
	if r2.Topic != nil {
		t.Fatalf("unknown id answered with name %q", *r2.Topic)
	}
	adminWantCode(t, "name and id", r3.ErrorCode, kerr.InvalidRequest)
	if r3.ErrorMessage == nil || !strings.Contains(*r3.ErrorMessage, "one or the other") {
		t.Fatalf("message %s", adminMsg(r3.ErrorMessage))
	}
	if len(f.ctrl.Image().Topics) != 0 {
		t.Fatalf("topics left: %v", f.ctrl.Image().TopicNames())
	}
}

// A topic named twice, even once by name and once by id, is refused for
// both entries and not deleted.
func TestDeleteTopicsDuplicates(t *testing.T) {
	f := newAdminFixture(t)
	tp := f.ctrl.addTopic("twice", adminLeaderPartitions(0), nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	for _, e := range []kmsg.DeleteTopicsRequestTopic{{Topic: strp("twice")}, {TopicID: tp.ID}} {
		req.Topics = append(req.Topics, e)
	}
	resp := adminCall[*kmsg.DeleteTopicsResponse](t, f, req, 6)
	for i, rt := range resp.Topics {
		adminWantCode(t, "entry", rt.ErrorCode, kerr.InvalidRequest)
		if rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, `"twice"`) {
			t.Fatalf("entry %d message %s should name the topic", i, adminMsg(rt.ErrorMessage))
		}
	}
	if _, ok := f.ctrl.Image().Topics["twice"]; !ok {
		t.Fatal("a duplicated topic was deleted")
	}
	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("controller called: %v", calls)
	}

	req = kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"twice", "twice"}
	old := adminCall[*kmsg.DeleteTopicsResponse](t, f, req, 5)
	for _, rt := range old.Topics {
		adminWantCode(t, "v5 entry", rt.ErrorCode, kerr.InvalidRequest)
	}
}

func TestDeleteTopicsTimeout(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("slow", adminLeaderPartitions(0), nil)
	f.ctrl.blockUntilDone = true
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"slow"}
	req.TimeoutMillis = 20
	resp := adminCall[*kmsg.DeleteTopicsResponse](t, f, req, 3)
	adminWantCode(t, "slow", resp.Topics[0].ErrorCode, kerr.RequestTimedOut)
}
