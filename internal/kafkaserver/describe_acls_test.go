package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// aclDescribeAll is the DescribeAcls filter that matches every binding.
func aclDescribeAll() *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = acl.ResourceAny, acl.PatternAny
	req.Operation, req.PermissionType = acl.OperationAny, acl.PermissionAny
	return req
}

func aclDescribeWith(change func(*kmsg.DescribeACLsRequest)) *kmsg.DescribeACLsRequest {
	req := aclDescribeAll()
	change(req)
	return req
}

// aclDescribed flattens an answer's resources back to bindings,
// failing on a resource with no entries or a pattern listed twice
// (Kafka groups each pattern's entries in one resource).
func aclDescribed(t *testing.T, resp *kmsg.DescribeACLsResponse) []acl.Binding {
	t.Helper()
	var out []acl.Binding
	seen := map[acl.ResourcePattern]bool{}
	for _, r := range resp.Resources {
		p := acl.ResourcePattern{Type: r.ResourceType, Name: r.ResourceName, PatternType: r.ResourcePatternType}
		if seen[p] || len(r.ACLs) == 0 {
			t.Fatalf("resource %+v listed twice or empty", p)
		}
		seen[p] = true
		for _, e := range r.ACLs {
			out = append(out, acl.Binding{Pattern: p, Entry: acl.Entry{Principal: e.Principal, Host: e.Host, Operation: e.Operation, Permission: e.PermissionType}})
		}
	}
	return out
}

func aclWantBindings(t *testing.T, what string, got []acl.Binding, want ...acl.Binding) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bindings %v, want %v", what, len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: binding %d is %s, want %s (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// Reference: Kafka's AclApis.handleDescribeAcls and
// DescribeAclsResponse.aclsResources. The bindings a filter matches come
// from the image grouped by pattern, in acl.Set order (type, pattern
// type, name, entry), at every version.
func TestDescribeACLs(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	aliceWrites := allowBinding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OperationWrite)
	wildcard := allowBinding(acl.ResourceTopic, acl.PatternLiteral, "*", "User:*", acl.OperationDescribe)
	f.ctrl.setBindings(t, aclAliceReads, aliceWrites, aclBobWritesLogs, aclCarolJoins, aclDenyMallory, wildcard)

	all := aclCall[*kmsg.DescribeACLsResponse](t, f, "User:admin", aclDescribeAll(), 3)
	adminWantCode(t, "describe all", all.ErrorCode, nil)
	if len(all.Resources) != 5 {
		t.Fatalf("%d resources, want 5 (orders' two bindings in one)", len(all.Resources))
	}
	aclWantBindings(t, "describe all", aclDescribed(t, all), f.ctrl.Image().ACLs.Bindings()...)

	for _, c := range []struct {
		name string
		req  *kmsg.DescribeACLsRequest
		want []acl.Binding
	}{
		{"by principal", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.Principal = strp("User:alice") }), []acl.Binding{aclAliceReads, aliceWrites}},
		{"the wildcard principal only", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.Principal = strp("User:*") }), []acl.Binding{wildcard}},
		{"by host", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.Host = strp("10.0.0.66") }), []acl.Binding{aclDenyMallory}},
		{"by operation, no implication", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.Operation = acl.OperationDescribe }), []acl.Binding{wildcard}},
		{"by permission", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.PermissionType = acl.PermissionDeny }), []acl.Binding{aclDenyMallory}},
		{"by type", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.ResourceType = acl.ResourceGroup }), []acl.Binding{aclCarolJoins}},
		{"literal name", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) {
			r.ResourceName, r.ResourcePatternType = strp("orders"), acl.PatternLiteral
		}), []acl.Binding{aclAliceReads, aliceWrites}},
		{"prefixed name exactly", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) {
			r.ResourceName, r.ResourcePatternType = strp("logs-"), acl.PatternPrefixed
		}), []acl.Binding{aclBobWritesLogs}},
		{"what matches a topic", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) {
			r.ResourceType, r.ResourceName, r.ResourcePatternType = acl.ResourceTopic, strp("logs-eu"), acl.PatternMatch
		}), []acl.Binding{wildcard, aclBobWritesLogs}},
		// A v1 string holds at most 32767 bytes.
		{"nothing", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.ResourceName = strp(strings.Repeat("x", 30_000)) }), nil},
	} {
		for v := int16(1); v <= 3; v++ {
			resp := aclCall[*kmsg.DescribeACLsResponse](t, f, "User:admin", c.req, v)
			adminWantCode(t, c.name, resp.ErrorCode, nil)
			aclWantBindings(t, c.name, aclDescribed(t, resp), c.want...)
		}
	}
}

// Version 0 knows no pattern types (DescribeAclsRequest's
// normalizeAndValidate): ANY is read as LITERAL, anything else but
// LITERAL is UNSUPPORTED_VERSION, before the filter's other checks; on
// the wire a v0 request decodes as LITERAL.
func TestDescribeACLsVersion0(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.setBindings(t, aclAliceReads, aclBobWritesLogs, aclCarolJoins)
	resp := aclHandlerDirect(t, f, "User:admin", aclDescribeAll(), 0).(*kmsg.DescribeACLsResponse)
	adminWantCode(t, "v0 ANY", resp.ErrorCode, nil)
	aclWantBindings(t, "v0 ANY", aclDescribed(t, resp), aclAliceReads, aclCarolJoins)
	for _, pt := range []acl.PatternType{acl.PatternPrefixed, acl.PatternMatch, acl.PatternUnknown, 9} {
		resp := aclHandlerDirect(t, f, "User:admin", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) {
			r.ResourcePatternType, r.Operation = pt, acl.OperationUnknown
		}), 0).(*kmsg.DescribeACLsResponse)
		checkACLEntry(t, "v0 "+pt.String(), resp.ErrorCode, resp.ErrorMessage, aclWant{kerr.UnsupportedVersion, "version 0 only supports LITERAL"})
		if len(resp.Resources) != 0 {
			t.Fatalf("v0 %s: answered %v", pt, resp.Resources)
		}
	}
	wire := aclCall[*kmsg.DescribeACLsResponse](t, f, "User:admin", aclDescribeWith(func(r *kmsg.DescribeACLsRequest) { r.ResourcePatternType = acl.PatternPrefixed }), 0)
	adminWantCode(t, "v0 on the wire", wire.ErrorCode, nil)
	aclWantBindings(t, "v0 on the wire", aclDescribed(t, wire), aclAliceReads, aclCarolJoins)
}

// Malformed filters (an UNKNOWN or unheard-of code in any field) are
// INVALID_REQUEST for the request; authorization comes first, and
// without an authorizer every request is SECURITY_DISABLED.
func TestDescribeACLsRefusals(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.setBindings(t, aclAliceReads, allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:auditor", acl.OperationDescribe),
		allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:operator", acl.OperationAlter))
	for _, c := range []struct {
		name   string
		change func(*kmsg.DescribeACLsRequest)
	}{
		{"unknown resource type", func(r *kmsg.DescribeACLsRequest) { r.ResourceType = acl.ResourceUnknown }},
		{"unheard-of resource type", func(r *kmsg.DescribeACLsRequest) { r.ResourceType = 99 }},
		{"unknown pattern type", func(r *kmsg.DescribeACLsRequest) { r.ResourcePatternType = acl.PatternUnknown }},
		{"negative pattern type", func(r *kmsg.DescribeACLsRequest) { r.ResourcePatternType = -3 }},
		{"unknown operation", func(r *kmsg.DescribeACLsRequest) { r.Operation = acl.OperationUnknown }},
		{"unheard-of operation", func(r *kmsg.DescribeACLsRequest) { r.Operation = 100 }},
		{"unknown permission", func(r *kmsg.DescribeACLsRequest) { r.PermissionType = acl.PermissionUnknown }},
	} {
		resp := aclCall[*kmsg.DescribeACLsResponse](t, f, "User:admin", aclDescribeWith(c.change), 3)
		checkACLEntry(t, c.name, resp.ErrorCode, resp.ErrorMessage, aclWant{kerr.InvalidRequest, "invalid filter"})
		if len(resp.Resources) != 0 {
			t.Fatalf("%s: answered %v", c.name, resp.Resources)
		}
		// Authorization before the request's shape.
		denied := aclCall[*kmsg.DescribeACLsResponse](t, f, "User:alice", aclDescribeWith(c.change), 3)
		adminWantCode(t, c.name+" as alice", denied.ErrorCode, kerr.ClusterAuthorizationFailed)
	}

	for _, c := range []struct {
		principal string
		want      *kerr.Error
	}{
		{"User:alice", kerr.ClusterAuthorizationFailed}, // a topic binding only
		{"User:nobody", kerr.ClusterAuthorizationFailed},
		{"User:auditor", nil},
		{"User:operator", nil}, // ALTER implies DESCRIBE
		{"User:admin", nil},
	} {
		for v := int16(0); v <= 3; v++ {
			resp := aclCall[*kmsg.DescribeACLsResponse](t, f, c.principal, aclDescribeAll(), v)
			adminWantCode(t, c.principal, resp.ErrorCode, c.want)
			if (len(resp.Resources) > 0) != (c.want == nil) {
				t.Fatalf("%s v%d: %d resources", c.principal, v, len(resp.Resources))
			}
		}
	}

	off := newACLFixture(t, nil)
	off.ctrl.setBindings(t, aclAliceReads)
	for v := int16(0); v <= 3; v++ {
		resp := aclCall[*kmsg.DescribeACLsResponse](t, off, "User:alice", aclDescribeAll(), v)
		checkACLEntry(t, "authorization off", resp.ErrorCode, resp.ErrorMessage, aclWant{kerr.SecurityDisabled, "no authorizer"})
		if len(resp.Resources) != 0 {
			t.Fatal("a node without an authorizer described bindings")
		}
	}
	// An image without bindings answers none.
	empty := newACLFixture(t, testACLConfig())
	resp := aclCall[*kmsg.DescribeACLsResponse](t, empty, "User:admin", aclDescribeAll(), 3)
	if resp.ErrorCode != 0 || len(resp.Resources) != 0 {
		t.Fatalf("no bindings: %d %v", resp.ErrorCode, resp.Resources)
	}
}
