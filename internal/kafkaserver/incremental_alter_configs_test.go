package kafkaserver

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func incOp(name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, op, value
	return c
}

func incResource(typ kmsg.ConfigResourceType, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = typ, name, ops
	return r
}

func incAlter(t *testing.T, f *adminFixture, version int16, validateOnly bool, rs ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsResponse {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources, req.ValidateOnly = rs, validateOnly
	return adminCall[*kmsg.IncrementalAlterConfigsResponse](t, f, req, version)
}

func TestIncrementalAlterConfigs(t *testing.T) {
	topic := kmsg.ConfigResourceTypeTopic
	for _, version := range []int16{0, 1} {
		f := newAdminFixture(t)
		f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000", "segment.bytes": "1048576"})
		resp := incAlter(t, f, version, false, incResource(topic, "t",
			incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("2000")),
			incOp("segment.bytes", kmsg.IncrementalAlterConfigOpDelete, nil),
			incOp("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, strp("compact")),
		))
		adminWantCode(t, "t", resp.Resources[0].ErrorCode, nil)
		got := f.ctrl.Image().Topics["t"].Configs
		want := map[string]string{"retention.ms": "2000", "cleanup.policy": "delete,compact"}
		if !maps.Equal(got, want) {
			t.Fatalf("v%d: configs %v, want %v (other overrides kept, deleted one gone)", version, got, want)
		}

		resp = incAlter(t, f, version, false, incResource(topic, "t",
			incOp("cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, strp("delete"))))
		adminWantCode(t, "subtract", resp.Resources[0].ErrorCode, nil)
		if got := f.ctrl.Image().Topics["t"].Configs["cleanup.policy"]; got != "compact" {
			t.Fatalf("v%d: cleanup.policy %q after subtract, want compact", version, got)
		}
	}
}

func TestIncrementalAlterConfigsErrors(t *testing.T) {
	topic := kmsg.ConfigResourceTypeTopic
	for _, tc := range []struct {
		name     string
		resource kmsg.IncrementalAlterConfigsRequestResource
		want     *kerr.Error
		msg      string
	}{
		{"bad value", incResource(topic, "t", incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("soon"))), kerr.InvalidConfig, `"soon"`},
		{"set null", incResource(topic, "t", incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil)), kerr.InvalidRequest, "null"},
		{"unknown name", incResource(topic, "t", incOp("retention.hours", kmsg.IncrementalAlterConfigOpDelete, nil)), kerr.InvalidConfig, "retention.hours"},
		{"append to non-list", incResource(topic, "t", incOp("retention.ms", kmsg.IncrementalAlterConfigOpAppend, strp("5"))), kerr.InvalidConfig, "not a list"},
		{"append bad element", incResource(topic, "t", incOp("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, strp("forever"))), kerr.InvalidConfig, "forever"},
		{"unknown op", incResource(topic, "t", incOp("retention.ms", kmsg.IncrementalAlterConfigOp(9), strp("5"))), kerr.InvalidRequest, "unknown operation 9"},
		{"repeated name", incResource(topic, "t",
			incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5")),
			incOp("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil)), kerr.InvalidRequest, "more than once"},
		{"unknown topic", incResource(topic, "nope", incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.UnknownTopicOrPartition, "nope"},
		{"invalid topic name", incResource(topic, "a b", incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidTopicException, "a b"},
		{"broker", incResource(kmsg.ConfigResourceTypeBroker, "1", incOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "broker configs cannot be changed"},
		{"group", incResource(kmsg.ConfigResourceTypeGroupConfig, "g"), kerr.InvalidRequest, "GROUP_CONFIG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAdminFixture(t)
			f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000"})
			resp := incAlter(t, f, 1, false, tc.resource)
			rr := resp.Resources[0]
			adminWantCode(t, tc.name, rr.ErrorCode, tc.want)
			if rr.ErrorMessage == nil || !strings.Contains(*rr.ErrorMessage, tc.msg) {
				t.Fatalf("message %s should contain %q", adminMsg(rr.ErrorMessage), tc.msg)
			}
			if calls := f.ctrl.callLog(); len(calls) != 0 {
				t.Fatalf("controller asked to apply a refused change: %v", calls)
			}
			if got := f.ctrl.Image().Topics["t"].Configs; !maps.Equal(got, map[string]string{"retention.ms": "1000"}) {
				t.Fatalf("configs changed to %v", got)
			}
		})
	}
}

func TestIncrementalAlterConfigsDuplicateResourceAndValidateOnly(t *testing.T) {
	topic := kmsg.ConfigResourceTypeTopic
	f := newAdminFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)
	set := incOp("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5"))
	resp := incAlter(t, f, 1, false, incResource(topic, "t", set), incResource(topic, "t", set))
	for _, rr := range resp.Resources {
		adminWantCode(t, "duplicate resource", rr.ErrorCode, kerr.InvalidRequest)
	}
	resp = incAlter(t, f, 0, true, incResource(topic, "t", set))
	adminWantCode(t, "validate only", resp.Resources[0].ErrorCode, nil)
	if got := f.ctrl.Image().Topics["t"].Configs; len(got) != 0 {
		t.Fatalf("validate-only changed configs to %v", got)
	}
}
