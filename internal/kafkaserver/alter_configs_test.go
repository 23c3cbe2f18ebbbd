package kafkaserver

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterResource(typ kmsg.ConfigResourceType, name string, kv ...*string) kmsg.AlterConfigsRequestResource {
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = *kv[i], kv[i+1]
		r.Configs = append(r.Configs, c)
	}
	return r
}

func alterConfigs(t *testing.T, f *adminFixture, version int16, validateOnly bool, rs ...kmsg.AlterConfigsRequestResource) *kmsg.AlterConfigsResponse {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Resources, req.ValidateOnly = rs, validateOnly
	return adminCall[*kmsg.AlterConfigsResponse](t, f, req, version)
}

// The legacy API replaces every override with the given set.
func TestAlterConfigsReplacesAll(t *testing.T) {
	for _, version := range []int16{0, 2} {
		f := newAdminFixture(t)
		f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000", "segment.bytes": "1048576"})
		resp := alterConfigs(t, f, version, false,
			alterResource(kmsg.ConfigResourceTypeTopic, "t", strp("cleanup.policy"), strp("compact,delete")))
		rr := resp.Resources[0]
		adminWantCode(t, "t", rr.ErrorCode, nil)
		if rr.ResourceName != "t" || rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			t.Fatalf("resource %v %q", rr.ResourceType, rr.ResourceName)
		}
		got := f.ctrl.Image().Topics["t"].Configs
		if !maps.Equal(got, map[string]string{"cleanup.policy": "compact,delete"}) {
			t.Fatalf("v%d: configs %v, want only the new set", version, got)
		}
	}
}

func TestAlterConfigsErrors(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000"})
	f.ctrl.addTopic("u", adminLeaderPartitions(0), nil)
	topic := kmsg.ConfigResourceTypeTopic
	resp := alterConfigs(t, f, 1, false,
		alterResource(topic, "t", strp("retention.ms"), strp("forever")),
		alterResource(topic, "missing", strp("retention.ms"), strp("1")),
		alterResource(topic, "u", strp("retention.ms"), nil),
		alterResource(topic, "u", strp("retention.ms"), strp("1")),
		alterResource(kmsg.ConfigResourceTypeBroker, "1", strp("log.retention.ms"), strp("1")),
		alterResource(kmsg.ConfigResourceTypeBrokerLogger, "1"),
	)
	for i, want := range []struct {
		code *kerr.Error
		msg  string
	}{
		{kerr.InvalidConfig, `"forever"`},
		{kerr.UnknownTopicOrPartition, "missing"},
		{kerr.InvalidRequest, "appears 2 times"},
		{kerr.InvalidRequest, "appears 2 times"},
		{kerr.InvalidRequest, "broker configs cannot be changed"},
		{kerr.InvalidRequest, "BROKER_LOGGER"},
	} {
		rr := resp.Resources[i]
		adminWantCode(t, rr.ResourceName, rr.ErrorCode, want.code)
		if rr.ErrorMessage == nil || !strings.Contains(*rr.ErrorMessage, want.msg) {
			t.Fatalf("resource %d: message %s should contain %q", i, adminMsg(rr.ErrorMessage), want.msg)
		}
	}
	if got := f.ctrl.Image().Topics["t"].Configs["retention.ms"]; got != "1000" {
		t.Fatalf("a refused change applied: retention.ms=%s", got)
	}

	resp = alterConfigs(t, f, 0, false, alterResource(topic, "u", strp("retention.ms"), nil))
	adminWantCode(t, "null value", resp.Resources[0].ErrorCode, kerr.InvalidRequest)
	resp = alterConfigs(t, f, 0, false, alterResource(topic, "u", strp("retention.ms"), strp("1"), strp("retention.ms"), strp("2")))
	adminWantCode(t, "repeated config", resp.Resources[0].ErrorCode, kerr.InvalidRequest)
	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("controller asked to apply refused changes: %v", calls)
	}
}

func TestAlterConfigsValidateOnly(t *testing.T) {
	f := newAdminFixture(t)
	f.ctrl.addTopic("t", adminLeaderPartitions(0), map[string]string{"retention.ms": "1000"})
	resp := alterConfigs(t, f, 2, true, alterResource(kmsg.ConfigResourceTypeTopic, "t", strp("retention.ms"), strp("5")))
	adminWantCode(t, "t", resp.Resources[0].ErrorCode, nil)
	if got := f.ctrl.Image().Topics["t"].Configs["retention.ms"]; got != "1000" {
		t.Fatalf("validate-only changed retention.ms to %s", got)
	}
	if calls := f.ctrl.callLog(); len(calls) != 1 {
		t.Fatalf("validate-only must still reach the controller's checks: %v", calls)
	}
}
