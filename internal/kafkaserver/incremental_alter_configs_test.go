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
	topic, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	const throttle = "follower.replication.throttled.rate"
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
		{"static broker config", incResource(broker, "1", incOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidConfig, "cannot be changed at run time"},
		{"Kafka's leader-side throttle", incResource(broker, "", incOp("leader.replication.throttled.rate", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidConfig, "follower.replication.throttled.rate"},
		{"unregistered broker", incResource(broker, "7", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "broker 7 is not registered"},
		{"negative broker", incResource(broker, "-1", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "want a broker id"},
		{"broker id with a leading zero", incResource(broker, "01", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "want a broker id"},
		{"broker id too large", incResource(broker, "4294967297", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "want a broker id"},
		{"hostile broker name", incResource(broker, strings.Repeat("\xff", 40000), incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidRequest, "..."},
		{"throttle zero", incResource(broker, "1", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("0"))), kerr.InvalidConfig, "at least 1"},
		{"throttle with a unit", incResource(broker, "", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("10MB"))), kerr.InvalidConfig, "whole number"},
		{"throttle null", incResource(broker, "", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, nil)), kerr.InvalidRequest, "null"},
		{"throttle appended", incResource(broker, "", incOp(throttle, kmsg.IncrementalAlterConfigOpAppend, strp("5"))), kerr.InvalidRequest, "want 0 SET or 1 DELETE"},
		{"throttle twice", incResource(broker, "", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("5")), incOp(throttle, kmsg.IncrementalAlterConfigOpDelete, nil)), kerr.InvalidRequest, "more than once"},
		{"max.connections zero", incResource(broker, "", incOp("max.connections", kmsg.IncrementalAlterConfigOpSet, strp("0"))), kerr.InvalidConfig, "from 1 to 2147483647"},
		{"max.connections over int32", incResource(broker, "1", incOp("max.connections", kmsg.IncrementalAlterConfigOpSet, strp("2147483648"))), kerr.InvalidConfig, "from 1 to 2147483647"},
		{"max.connections.per.ip negative", incResource(broker, "", incOp("max.connections.per.ip", kmsg.IncrementalAlterConfigOpSet, strp("-1"))), kerr.InvalidConfig, "from 0 to 2147483647"},
		{"max.connections.per.ip not a number", incResource(broker, "", incOp("max.connections.per.ip", kmsg.IncrementalAlterConfigOpSet, strp("many"))), kerr.InvalidConfig, "whole number"},
		{"overrides without a count", incResource(broker, "", incOp("max.connections.per.ip.overrides", kmsg.IncrementalAlterConfigOpSet, strp("1.2.3.4"))), kerr.InvalidConfig, "no count"},
		{"overrides with a host twice", incResource(broker, "", incOp("max.connections.per.ip.overrides", kmsg.IncrementalAlterConfigOpSet, strp("1.2.3.4:1,1.2.3.4:2"))), kerr.InvalidConfig, "more than once"},
		{"overrides too long", incResource(broker, "", incOp("max.connections.per.ip.overrides", kmsg.IncrementalAlterConfigOpSet, strp(strings.Repeat("1.2.3.4:1,", 10000)))), kerr.InvalidConfig, "at most 65536"},
		{"overrides appended", incResource(broker, "", incOp("max.connections.per.ip.overrides", kmsg.IncrementalAlterConfigOpAppend, strp("1.2.3.4:1"))), kerr.InvalidRequest, "want 0 SET or 1 DELETE"},
		{"Kafka's creation rate", incResource(broker, "", incOp("max.connection.creation.rate", kmsg.IncrementalAlterConfigOpSet, strp("5"))), kerr.InvalidConfig, "max.connections.per.ip"},
		{"a good one beside a bad one", incResource(broker, "",
			incOp("max.connections", kmsg.IncrementalAlterConfigOpSet, strp("100")),
			incOp("max.connections.per.ip", kmsg.IncrementalAlterConfigOpSet, strp("-5"))), kerr.InvalidConfig, "max.connections.per.ip=\"-5\""},
		{"replay budget zero", incResource(broker, "", incOp("replay.max.bytes.per.second", kmsg.IncrementalAlterConfigOpSet, strp("0"))), kerr.InvalidConfig, "at least 1"},
		{"replay tail negative", incResource(broker, "1", incOp("replay.tail.bytes", kmsg.IncrementalAlterConfigOpSet, strp("-1"))), kerr.InvalidConfig, "0 or more"},
		{"free space at 100%", incResource(broker, "", incOp("log.dir.free.space.refuse", kmsg.IncrementalAlterConfigOpSet, strp("100%"))), kerr.InvalidConfig, "below 100%"},
		{"free space negative", incResource(broker, "1", incOp("log.dir.free.space.warn", kmsg.IncrementalAlterConfigOpSet, strp("-5"))), kerr.InvalidConfig, "whole number of bytes"},
		{"free space absurd", incResource(broker, "1", incOp("log.dir.free.space.warn", kmsg.IncrementalAlterConfigOpSet, strp("9999999999999999999"))), kerr.InvalidConfig, "1 EiB"},
		{"free space hostile", incResource(broker, "", incOp("log.dir.free.space.refuse", kmsg.IncrementalAlterConfigOpSet, strp(strings.Repeat("9", 100000)))), kerr.InvalidConfig, "..."},
		{"free space above this node's disk", incResource(broker, "1", incOp("log.dir.free.space.refuse", kmsg.IncrementalAlterConfigOpSet, strp("2TiB"))), kerr.InvalidConfig, "could never be met"},
		{"free space default above the receiving node's disk", incResource(broker, "", incOp("log.dir.free.space.warn", kmsg.IncrementalAlterConfigOpSet, strp("1TiB"))), kerr.InvalidConfig, "could never be met"},
		{"free space appended", incResource(broker, "", incOp("log.dir.free.space.warn", kmsg.IncrementalAlterConfigOpAppend, strp("5%"))), kerr.InvalidRequest, "want 0 SET or 1 DELETE"},
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
			if got := f.ctrl.Image().BrokerConfigs; len(got) != 0 {
				t.Fatalf("broker configs changed to %v", got)
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

// The dynamic broker config: set for the cluster default ("") and for a
// broker by id, then deleted; the other topics' configs untouched.
func TestIncrementalAlterBrokerConfigs(t *testing.T) {
	broker := kmsg.ConfigResourceTypeBroker
	const throttle = "follower.replication.throttled.rate"
	f := newAdminFixture(t)
	resp := incAlter(t, f, 1, false,
		incResource(broker, "", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("1000"))),
		incResource(broker, "1", incOp(throttle, kmsg.IncrementalAlterConfigOpSet, strp("50"))))
	for _, r := range resp.Resources {
		adminWantCode(t, r.ResourceName, r.ErrorCode, nil)
	}
	img := f.ctrl.Image()
	if img.FollowerThrottleRate(1) != 50 || img.FollowerThrottleRate(2) != 1000 {
		t.Fatalf("rates %d and %d, want 50 (broker 1's own) and 1000 (the default)", img.FollowerThrottleRate(1), img.FollowerThrottleRate(2))
	}
	resp = incAlter(t, f, 1, false, incResource(broker, "1", incOp(throttle, kmsg.IncrementalAlterConfigOpDelete, nil)))
	adminWantCode(t, "delete", resp.Resources[0].ErrorCode, nil)
	if got := f.ctrl.Image().FollowerThrottleRate(1); got != 1000 {
		t.Fatalf("broker 1's rate after deleting its own: %d, want the default 1000", got)
	}
	// The legacy AlterConfigs still refuses broker resources, naming the
	// API that works.
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Resources = []kmsg.AlterConfigsRequestResource{alterResource(broker, "1", strp(throttle), strp("5"))}
	legacy := adminCall[*kmsg.AlterConfigsResponse](t, f, req, 1)
	adminWantCode(t, "legacy", legacy.Resources[0].ErrorCode, kerr.InvalidRequest)
	if m := legacy.Resources[0].ErrorMessage; m == nil || !strings.Contains(*m, "IncrementalAlterConfigs") {
		t.Fatalf("legacy AlterConfigs on a broker: %s, want it to name IncrementalAlterConfigs", adminMsg(m))
	}
}
