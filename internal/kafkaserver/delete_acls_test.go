package kafkaserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

// aclDeleteFilter is a DeleteAcls filter matching everything but what
// change narrows.
func aclDeleteFilter(change func(*kmsg.DeleteACLsRequestFilter)) kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = acl.ResourceAny, acl.PatternAny
	f.Operation, f.PermissionType = acl.OperationAny, acl.PermissionAny
	change(&f)
	return f
}

func deleteACLsReq(filters ...kmsg.DeleteACLsRequestFilter) *kmsg.DeleteACLsRequest {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = filters
	return req
}

func aclMatched(r kmsg.DeleteACLsResponseResult) []acl.Binding {
	var out []acl.Binding
	for _, m := range r.MatchingACLs {
		out = append(out, acl.Binding{
			Pattern: acl.ResourcePattern{Type: m.ResourceType, Name: m.ResourceName, PatternType: m.ResourcePatternType},
			Entry:   acl.Entry{Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType},
		})
	}
	return out
}

// Reference: Kafka's AclApis.handleDeleteAcls and
// AclControlManager.deleteAcls. Each filter is answered by index with
// the bindings it matched, which are gone from the image; a binding two
// filters match is listed under both; a refused filter
// (INVALID_REQUEST) removes nothing while the others go ahead.
func TestDeleteACLs(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	aliceWrites := allowBinding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OperationWrite)
	f.ctrl.setBindings(t, aclAliceReads, aliceWrites, aclBobWritesLogs, aclCarolJoins, aclDenyMallory)
	resp := aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Principal = strp("User:alice") }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) {
			r.ResourceName = strp("orders")
			r.Operation = acl.OperationRead
		}),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.ResourceType = acl.ResourceUnknown }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.PermissionType = 7 }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Principal = strp("User:nobody") }),
		// Would delete everything, were it not refused.
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Operation = acl.OperationUnknown }),
	), 3)
	if len(resp.Results) != 6 {
		t.Fatalf("%d results for 6 filters", len(resp.Results))
	}
	for i, w := range []struct {
		want    aclWant
		deleted []acl.Binding
	}{
		{aclWant{}, []acl.Binding{aclAliceReads, aliceWrites}},
		{aclWant{}, []acl.Binding{aclAliceReads}},
		{aclWant{kerr.InvalidRequest, "invalid filter"}, nil},
		{aclWant{kerr.InvalidRequest, "invalid filter"}, nil},
		{aclWant{}, nil},
		{aclWant{kerr.InvalidRequest, "invalid filter"}, nil},
	} {
		r := resp.Results[i]
		checkACLEntry(t, "filter", r.ErrorCode, r.ErrorMessage, w.want)
		aclWantBindings(t, "filter", aclMatched(r), w.deleted...)
		for _, m := range r.MatchingACLs {
			if m.ErrorCode != 0 || m.ErrorMessage != nil {
				t.Fatalf("a matched binding with an error: %+v", m)
			}
		}
	}
	if got := f.ctrl.Image().ACLs.Bindings(); len(got) != 3 || slices.Contains(got, aclAliceReads) || slices.Contains(got, aliceWrites) {
		t.Fatalf("image holds %v", got)
	}

	// Every version; v0 answers without pattern types, LITERAL.
	for v := int16(0); v <= 3; v++ {
		b := allowBinding(acl.ResourceGroup, acl.PatternLiteral, "g"+string(rune('0'+v)), "User:erin", acl.OperationRead)
		f.ctrl.setBindings(t, append(f.ctrl.Image().ACLs.Bindings(), b)...)
		resp := aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) {
			r.Principal = strp("User:erin")
		})), v)
		checkACLEntry(t, "v"+string(rune('0'+v)), resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage, aclWant{})
		aclWantBindings(t, "v"+string(rune('0'+v)), aclMatched(resp.Results[0]), b)
		if f.ctrl.Image().ACLs.Contains(b) {
			t.Fatalf("v%d: %s not deleted", v, b)
		}
	}
	// Everything, then nothing left to match.
	all := aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(aclDeleteFilter(func(*kmsg.DeleteACLsRequestFilter) {})), 3)
	aclWantBindings(t, "delete all", aclMatched(all.Results[0]), aclBobWritesLogs, aclCarolJoins, aclDenyMallory)
	if f.ctrl.Image().ACLs != nil {
		t.Fatalf("bindings left: %v", f.ctrl.Image().ACLs.Bindings())
	}
	again := aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(aclDeleteFilter(func(*kmsg.DeleteACLsRequestFilter) {})), 3)
	if again.Results[0].ErrorCode != 0 || len(again.Results[0].MatchingACLs) != 0 {
		t.Fatalf("deleting from none: %+v", again.Results[0])
	}
}

// Version 0 filters (DeleteAclsRequest's normalizeAndValidate): ANY is
// read as LITERAL, anything else but LITERAL is UNSUPPORTED_VERSION for
// its filter, before the other checks; the other filters go ahead.
func TestDeleteACLsVersion0(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.setBindings(t, aclAliceReads, aclBobWritesLogs, aclCarolJoins)
	resp := aclHandlerDirect(t, f, "User:admin", deleteACLsReq(
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.ResourceType = acl.ResourceTopic }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.ResourcePatternType = acl.PatternPrefixed }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) {
			r.ResourcePatternType, r.Operation = acl.PatternMatch, acl.OperationUnknown
		}),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.ResourcePatternType = acl.PatternUnknown }),
	), 0).(*kmsg.DeleteACLsResponse)
	for i, w := range []aclWant{{}, {kerr.UnsupportedVersion, "version 0"}, {kerr.UnsupportedVersion, "version 0"}, {kerr.UnsupportedVersion, "version 0"}} {
		checkACLEntry(t, "v0 filter", resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage, w)
	}
	aclWantBindings(t, "v0 ANY as LITERAL", aclMatched(resp.Results[0]), aclAliceReads)
	if got := f.ctrl.Image().ACLs.Bindings(); !slices.Equal(got, []acl.Binding{aclBobWritesLogs, aclCarolJoins}) {
		t.Fatalf("image holds %v, want the prefixed and the group binding kept", got)
	}
}

// Authorization (CLUSTER ALTER) and its absence refuse every filter
// alike; hostile sizes are refused whole before the controller is
// asked, the message on the first filter only; a controller that
// cannot answer leaves each filter sent its error. (The controller's
// bound on what one request lists is internal/controller's to test.)
func TestDeleteACLsRefusals(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.setBindings(t, aclAliceReads, allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:auditor", acl.OperationDescribe))
	filters := []kmsg.DeleteACLsRequestFilter{aclDeleteFilter(func(*kmsg.DeleteACLsRequestFilter) {}), aclDeleteFilter(func(*kmsg.DeleteACLsRequestFilter) {})}
	for _, principal := range []string{"User:alice", "User:auditor", "User:nobody"} {
		resp := aclCall[*kmsg.DeleteACLsResponse](t, f, principal, deleteACLsReq(filters...), 3)
		for _, r := range resp.Results {
			checkACLEntry(t, principal, r.ErrorCode, r.ErrorMessage, aclWant{kerr.ClusterAuthorizationFailed, "ALTER on the cluster is denied"})
			if len(r.MatchingACLs) != 0 {
				t.Fatalf("%s: a refused filter lists %v", principal, r.MatchingACLs)
			}
		}
	}
	off := newACLFixture(t, nil)
	off.ctrl.setBindings(t, aclAliceReads)
	resp := aclCall[*kmsg.DeleteACLsResponse](t, off, "User:admin", deleteACLsReq(filters...), 1)
	for _, r := range resp.Results {
		checkACLEntry(t, "authorization off", r.ErrorCode, r.ErrorMessage, aclWant{kerr.SecurityDisabled, "no authorizer"})
	}
	if len(f.ctrl.callLog()) != 0 || len(off.ctrl.callLog()) != 0 || off.ctrl.Image().ACLs.Len() != 1 {
		t.Fatal("a refused request reached the controller")
	}

	many := make([]kmsg.DeleteACLsRequestFilter, controlplane.MaxACLFilters+1)
	for i := range many {
		many[i] = aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Host = strp(strings.Repeat("h", i%5)) })
	}
	resp = aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(many...), 3)
	if len(resp.Results) != len(many) {
		t.Fatalf("%d results for %d filters", len(resp.Results), len(many))
	}
	checkACLEntry(t, "too many", resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage, aclWant{kerr.InvalidRequest, "1001 ACL filters in one request (at most 1000)"})
	for _, r := range resp.Results[1:] {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage != nil {
			t.Fatalf("a later filter: %d %s, want INVALID_REQUEST without a message", r.ErrorCode, adminMsg(r.ErrorMessage))
		}
	}
	if len(f.ctrl.callLog()) != 0 || f.ctrl.Image().ACLs.Len() != 2 {
		t.Fatal("too many filters reached the controller")
	}

	f.ctrl.fail = kerr.NotController
	resp = aclCall[*kmsg.DeleteACLsResponse](t, f, "User:admin", deleteACLsReq(filters[0], aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Operation = 77 })), 3)
	checkACLEntry(t, "not controller", resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage, aclWant{kerr.NotController, ""})
	checkACLEntry(t, "refused here", resp.Results[1].ErrorCode, resp.Results[1].ErrorMessage, aclWant{kerr.InvalidRequest, "invalid filter"})
}
