package kafkaserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

// aclCreation is the CreateAcls entry for b.
func aclCreation(b acl.Binding) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
	c.Principal, c.Host, c.Operation, c.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
	return c
}

func createACLsReq(bindings ...acl.Binding) *kmsg.CreateACLsRequest {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		req.Creations = append(req.Creations, aclCreation(b))
	}
	return req
}

// aclWant is one entry's expected answer: a code (nil: none) and words
// its message must have.
type aclWant struct {
	code *kerr.Error
	msg  string
}

func checkACLEntry(t *testing.T, what string, code int16, msg *string, w aclWant) {
	t.Helper()
	adminWantCode(t, what, code, w.code)
	if w.code != nil && (msg == nil || !strings.Contains(*msg, w.msg)) {
		t.Errorf("%s: message %s, want %q", what, adminMsg(msg), w.msg)
	}
	if msg != nil && len(*msg) > maxACLMessageBytes+len("...") {
		t.Errorf("%s: a message of %d bytes", what, len(*msg))
	}
}

func checkCreateACLsResults(t *testing.T, resp *kmsg.CreateACLsResponse, want []aclWant) {
	t.Helper()
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(resp.Results), len(want))
	}
	for i, w := range want {
		checkACLEntry(t, "creation "+string(rune('0'+i%10)), resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage, w)
	}
}

var (
	aclAliceReads    = allowBinding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OperationRead)
	aclBobWritesLogs = allowBinding(acl.ResourceTopic, acl.PatternPrefixed, "logs-", "User:bob", acl.OperationWrite)
	aclCarolJoins    = allowBinding(acl.ResourceGroup, acl.PatternLiteral, "*", "User:carol", acl.OperationRead)
	aclDenyMallory   = acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceCluster, Name: acl.ClusterName, PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: "User:mallory", Host: "10.0.0.66", Operation: acl.OperationAll, Permission: acl.PermissionDeny},
	}
)

func aclWithEntry(b acl.Binding, change func(*acl.Binding)) acl.Binding {
	change(&b)
	return b
}

// Reference: Kafka's AclApis.handleCreateAcls and
// AclControlManager.createAcls. Each creation is answered by index: the
// good ones are added (once, however often named, and an existing one
// is success), each refused one gets INVALID_REQUEST with what was
// wrong, and nothing refused reaches the image; at every version.
func TestCreateACLs(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.setBindings(t, aclCarolJoins)
	huge := strings.Repeat("n", 1<<20)
	resp := aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(
		aclAliceReads,
		aclBobWritesLogs,
		aclCarolJoins, // there already
		aclAliceReads, // twice in one request
		aclDenyMallory,
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Type, b.Pattern.Name = acl.ResourceCluster, "*" }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Type = acl.ResourceUnknown }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Type = acl.ResourceAny }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Type = 42 }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternMatch }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternUnknown }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Operation = acl.OperationAny }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Permission = acl.PermissionAny }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Name = "" }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Principal = "alice" }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Host = "client.example.com" }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Name = huge }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.Type, b.Pattern.Name = acl.ResourceCluster, huge[:acl.MaxNameBytes] }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Principal = "User:\xff\xfe" }),
	), 3)
	checkCreateACLsResults(t, resp, []aclWant{
		{}, {}, {}, {}, {},
		{kerr.InvalidRequest, "the only valid name for the CLUSTER resource"},
		{kerr.InvalidRequest, "invalid resource type"},
		{kerr.InvalidRequest, "invalid resource type"},
		{kerr.InvalidRequest, "invalid resource type"},
		{kerr.InvalidRequest, "invalid pattern type"},
		{kerr.InvalidRequest, "invalid pattern type"},
		{kerr.InvalidRequest, "invalid operation"},
		{kerr.InvalidRequest, "invalid permission type"},
		{kerr.InvalidRequest, "empty resource name"},
		{kerr.InvalidRequest, "invalid principal"},
		{kerr.InvalidRequest, "invalid host"},
		{kerr.InvalidRequest, "resource name is 1048576 bytes"},
		{kerr.InvalidRequest, "CLUSTER"}, // quotes the name: cut short
		{kerr.InvalidRequest, "UTF-8"},
	})
	set := f.ctrl.Image().ACLs
	if set.Len() != 4 || !set.Contains(aclAliceReads) || !set.Contains(aclBobWritesLogs) || !set.Contains(aclCarolJoins) || !set.Contains(aclDenyMallory) {
		t.Fatalf("image holds %v", set.Bindings())
	}
	if calls := f.ctrl.callLog(); !slices.Equal(calls, []string{"CreateACLs"}) {
		t.Fatalf("controller calls %v, want one CreateACLs", calls)
	}

	// Every version, LITERAL and (from v1) PREFIXED alike.
	for v := int16(0); v <= 3; v++ {
		b := allowBinding(acl.ResourceTransactionalID, acl.PatternLiteral, "txn-"+string(rune('0'+v)), "User:dave", acl.OperationWrite)
		bindings := []acl.Binding{b}
		if v > 0 {
			bindings = append(bindings, aclWithEntry(b, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternPrefixed }))
		}
		resp := aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(bindings...), v)
		checkCreateACLsResults(t, resp, make([]aclWant, len(bindings)))
		for _, b := range bindings {
			if !f.ctrl.Image().ACLs.Contains(b) {
				t.Fatalf("v%d: %s not added", v, b)
			}
		}
	}
	// An empty request asks the controller nothing.
	before := len(f.ctrl.callLog())
	checkCreateACLsResults(t, aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(), 3), nil)
	if len(f.ctrl.callLog()) != before {
		t.Fatal("an empty request reached the controller")
	}
}

// Version 0 knows no pattern types: a creation that is not LITERAL is
// UNSUPPORTED_VERSION (CreateAclsRequest.validate), even where acl's
// rules would refuse it too, and is not sent; on the wire a v0
// creation always decodes as LITERAL.
func TestCreateACLsVersion0(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	resp := aclHandlerDirect(t, f, "User:admin", createACLsReq(
		aclBobWritesLogs,
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternMatch }),
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternPrefixed; b.Entry.Host = "nope" }),
		aclAliceReads,
		aclWithEntry(aclAliceReads, func(b *acl.Binding) { b.Entry.Host = "nope" }),
	), 0).(*kmsg.CreateACLsResponse)
	checkCreateACLsResults(t, resp, []aclWant{
		{kerr.UnsupportedVersion, "version 0 only supports LITERAL"},
		{kerr.UnsupportedVersion, "version 0 only supports LITERAL"},
		{kerr.UnsupportedVersion, "version 0 only supports LITERAL"},
		{},
		{kerr.InvalidRequest, "invalid host"},
	})
	if set := f.ctrl.Image().ACLs; set.Len() != 1 || !set.Contains(aclAliceReads) {
		t.Fatalf("image holds %v", set.Bindings())
	}
	// The prefixed binding sent at v0 over the wire arrives LITERAL.
	resp = aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(aclBobWritesLogs), 0)
	checkCreateACLsResults(t, resp, []aclWant{{}})
	literal := aclWithEntry(aclBobWritesLogs, func(b *acl.Binding) { b.Pattern.PatternType = acl.PatternLiteral })
	if set := f.ctrl.Image().ACLs; !set.Contains(literal) || set.Contains(aclBobWritesLogs) {
		t.Fatalf("image holds %v", set.Bindings())
	}
}

// Reference: Kafka's AclApis (authorizeClusterOperation ALTER; no
// authorizer: SECURITY_DISABLED). Every creation is refused alike, and
// the controller is not asked.
func TestCreateACLsAuthorization(t *testing.T) {
	alterCluster := allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationAlter)
	for _, c := range []struct {
		name      string
		cfg       *ACLConfig
		principal string
		bindings  []acl.Binding
		want      *kerr.Error
		msg       string
	}{
		{"authorization off", nil, "User:admin", nil, kerr.SecurityDisabled, "no authorizer is configured"},
		{"no binding", testACLConfig(), "User:alice", nil, kerr.ClusterAuthorizationFailed, "ALTER on the cluster is denied to User:alice"},
		{"describe only", testACLConfig(), "User:alice", []acl.Binding{allowBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationDescribe)}, kerr.ClusterAuthorizationFailed, "denied"},
		{"alter on a topic", testACLConfig(), "User:alice", []acl.Binding{allowBinding(acl.ResourceTopic, acl.PatternLiteral, "*", "User:alice", acl.OperationAll)}, kerr.ClusterAuthorizationFailed, "denied"},
		{"allowed and denied", testACLConfig(), "User:alice", []acl.Binding{alterCluster, denyBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:alice", acl.OperationAll)}, kerr.ClusterAuthorizationFailed, "denied"},
		{"another's binding", testACLConfig(), "User:bob", []acl.Binding{alterCluster}, kerr.ClusterAuthorizationFailed, "denied to User:bob"},
		{"allowed", testACLConfig(), "User:alice", []acl.Binding{alterCluster}, nil, ""},
		{"allowed all", testACLConfig(), "User:alice", []acl.Binding{allowBinding(acl.ResourceCluster, acl.PatternPrefixed, acl.ClusterName, "User:*", acl.OperationAll)}, nil, ""},
		{"super user", testACLConfig(), "User:admin", []acl.Binding{denyBinding(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, "User:admin", acl.OperationAll)}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newACLFixture(t, c.cfg)
			f.ctrl.setBindings(t, c.bindings...)
			for v := int16(0); v <= 3; v++ {
				resp := aclCall[*kmsg.CreateACLsResponse](t, f, c.principal, createACLsReq(aclAliceReads, aclCarolJoins), v)
				checkCreateACLsResults(t, resp, []aclWant{{c.want, c.msg}, {c.want, c.msg}})
			}
			if asked := len(f.ctrl.callLog()) > 0; asked != (c.want == nil) {
				t.Fatalf("controller asked: %v", asked)
			}
			if c.want != nil && f.ctrl.Image().ACLs.Contains(aclAliceReads) {
				t.Fatal("a refused request changed the bindings")
			}
		})
	}
}

// Hostile sizes: more than MaxACLCreations creations are refused whole,
// each INVALID_REQUEST but with the message on the first only (a
// million tiny creations are not answered with a million sentences),
// before the controller is asked; a denied request of that size is
// answered the same way. MaxACLCreations is accepted.
func TestCreateACLsBounds(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	many := make([]acl.Binding, controlplane.MaxACLCreations+1)
	for i := range many {
		many[i] = allowBinding(acl.ResourceTopic, acl.PatternLiteral, "t", "User:u"+strings.Repeat("x", i%7), acl.OperationRead)
	}
	for _, c := range []struct {
		principal string
		want      *kerr.Error
		msg       string
	}{
		{"User:admin", kerr.InvalidRequest, "1001 ACL creations in one request (at most 1000)"},
		{"User:alice", kerr.ClusterAuthorizationFailed, "denied"},
	} {
		resp := aclCall[*kmsg.CreateACLsResponse](t, f, c.principal, createACLsReq(many...), 3)
		if len(resp.Results) != len(many) {
			t.Fatalf("%d results for %d creations", len(resp.Results), len(many))
		}
		checkACLEntry(t, c.principal+" first", resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage, aclWant{c.want, c.msg})
		for i, r := range resp.Results[1:] {
			if r.ErrorCode != c.want.Code || r.ErrorMessage != nil {
				t.Fatalf("%s: result %d: %d %s, want code %d and no message", c.principal, i+1, r.ErrorCode, adminMsg(r.ErrorMessage), c.want.Code)
			}
		}
	}
	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("the controller was asked %v", calls)
	}
	resp := aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(many[:controlplane.MaxACLCreations]...), 3)
	checkCreateACLsResults(t, resp, make([]aclWant, controlplane.MaxACLCreations))
	if n := f.ctrl.Image().ACLs.Len(); n != 7 {
		t.Fatalf("%d bindings, want the 7 distinct ones", n)
	}
}

// A controller that cannot answer leaves each creation sent its error
// (NOT_CONTROLLER: the client retries), each refused one its own.
func TestCreateACLsControllerFails(t *testing.T) {
	f := newACLFixture(t, testACLConfig())
	f.ctrl.fail = kerr.NotController
	resp := aclCall[*kmsg.CreateACLsResponse](t, f, "User:admin", createACLsReq(aclAliceReads, aclWithEntry(aclCarolJoins, func(b *acl.Binding) { b.Entry.Host = "x" })), 3)
	checkCreateACLsResults(t, resp, []aclWant{{kerr.NotController, ""}, {kerr.InvalidRequest, "invalid host"}})
}

// franz-go's admin client creates, describes and deletes bindings over
// TCP, negotiating the versions from ApiVersions, and reads the answers
// as it expects; a principal without the cluster bindings hears
// CLUSTER_AUTHORIZATION_FAILED in each client call.
func TestACLsWithFranzGo(t *testing.T) {
	// A plain TCP connection is User:ANONYMOUS: here a super user.
	f := newACLFixture(t, &ACLConfig{Config: acl.Config{SuperUsers: []string{Anonymous.String()}}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(serveACLFixture(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	b := kadm.NewACLs().Allow("User:alice", "User:bob").Topics("orders", "payments").
		Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 8 {
		t.Fatalf("%d creations answered, want 8", len(created))
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("creating %s on %s: %v %s", c.Principal, c.Name, c.Err, c.ErrMessage)
		}
	}
	if n := f.ctrl.Image().ACLs.Len(); n != 8 {
		t.Fatalf("%d bindings after creating 8", n)
	}
	pre := kadm.NewACLs().Deny("User:mallory").Groups("team-").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed)
	if created, err := adm.CreateACLs(ctx, pre); err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("creating a prefixed deny: %v %+v", err, created)
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 4 {
		t.Fatalf("describing alice's: %+v", described)
	}
	for _, d := range described[0].Described {
		if d.Principal != "User:alice" || d.Host != "*" || d.Type != kmsg.ACLResourceTypeTopic || d.Pattern != kadm.ACLPatternLiteral {
			t.Fatalf("described %+v", d)
		}
	}
	matched, err := adm.DescribeACLs(ctx, kadm.NewACLs().Groups("team-blue").Deny().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil || len(matched) != 1 || len(matched[0].Described) != 1 || matched[0].Described[0].Name != "team-" {
		t.Fatalf("describing what matches group team-blue: %v %+v", err, matched)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 4 {
		t.Fatalf("deleting orders' bindings: %+v", deleted)
	}
	if n := f.ctrl.Image().ACLs.Len(); n != 5 {
		t.Fatalf("%d bindings after deleting 4 of 9", n)
	}

	// Without the cluster bindings each call is refused.
	denied := newACLFixture(t, testACLConfig())
	dcl, err := kgo.NewClient(kgo.SeedBrokers(serveACLFixture(t, denied)))
	if err != nil {
		t.Fatal(err)
	}
	defer dcl.Close()
	dadm := kadm.NewClient(dcl)
	if created, err := dadm.CreateACLs(ctx, b); err != nil || len(created) != 8 || created[0].Err != kerr.ClusterAuthorizationFailed {
		t.Fatalf("create as ANONYMOUS: %v %+v", err, created)
	}
	if described, err := dadm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err != nil ||
		len(described) != 1 || described[0].Err != kerr.ClusterAuthorizationFailed {
		t.Fatalf("describe as ANONYMOUS: %v %+v", err, described)
	}
	if deleted, err := dadm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err != nil ||
		len(deleted) != 1 || deleted[0].Err != kerr.ClusterAuthorizationFailed {
		t.Fatalf("delete as ANONYMOUS: %v %+v", err, deleted)
	}
}

// FuzzACLHandlers feeds arbitrary bodies to CreateAcls, DescribeAcls and
// DeleteAcls, at every version, from a super user with authorization on.
// Invariants: a body kmsg decodes never panics a handler; the answer
// encodes and decodes at the version; CreateAcls and DeleteAcls answer
// every entry, in order; no message is longer than its bound; and the
// image only ever holds bindings acl.Validate accepts.
func FuzzACLHandlers(f *testing.F) {
	seeds := []kmsg.Request{
		createACLsReq(aclAliceReads, aclBobWritesLogs, aclWithEntry(aclCarolJoins, func(b *acl.Binding) { b.Entry.Host = "x" })),
		aclDescribeAll(),
		aclDescribeWith(func(r *kmsg.DescribeACLsRequest) {
			r.ResourcePatternType = acl.PatternMatch
			r.ResourceName = strp("orders")
		}),
		aclDeleteACLsSeed(),
	}
	for _, req := range seeds {
		for v := int16(0); v <= 3; v++ {
			req.SetVersion(v)
			f.Add(uint8(req.Key()-29), uint8(v), req.AppendTo(nil))
		}
	}
	fx := newACLFixture(f, testACLConfig())
	f.Fuzz(func(t *testing.T, keyIdx, version uint8, body []byte) {
		key, v := 29+int16(keyIdx%3), int16(version%4)
		req := kmsg.RequestForKey(key)
		req.SetVersion(v)
		if req.ReadFrom(body) != nil {
			return
		}
		resp, _, err := apis[key].handle(context.Background(), fx.s, &request{key: key, version: v, body: req, conn: testConnAs(t, "User:admin", "10.0.0.1")})
		if err != nil {
			t.Fatalf("handler error %v", err)
		}
		resp.SetVersion(v)
		back := req.ResponseKind()
		back.SetVersion(v)
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("answer does not decode: %v", err)
		}
		short := func(m *string) {
			if m != nil && len(*m) > maxACLMessageBytes+len("...") {
				t.Fatalf("a message of %d bytes", len(*m))
			}
		}
		switch r := resp.(type) {
		case *kmsg.CreateACLsResponse:
			if len(r.Results) != len(req.(*kmsg.CreateACLsRequest).Creations) {
				t.Fatalf("%d results for %d creations", len(r.Results), len(req.(*kmsg.CreateACLsRequest).Creations))
			}
			for _, x := range r.Results {
				short(x.ErrorMessage)
			}
		case *kmsg.DeleteACLsResponse:
			if len(r.Results) != len(req.(*kmsg.DeleteACLsRequest).Filters) {
				t.Fatalf("%d results for %d filters", len(r.Results), len(req.(*kmsg.DeleteACLsRequest).Filters))
			}
			for _, x := range r.Results {
				short(x.ErrorMessage)
			}
		case *kmsg.DescribeACLsResponse:
			short(r.ErrorMessage)
		}
		for _, b := range fx.ctrl.Image().ACLs.Bindings() {
			if err := acl.Validate(b); err != nil {
				t.Fatalf("the image holds %s: %v", b, err)
			}
		}
	})
}

func aclDeleteACLsSeed() *kmsg.DeleteACLsRequest {
	return deleteACLsReq(
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Principal = strp("User:alice") }),
		aclDeleteFilter(func(r *kmsg.DeleteACLsRequestFilter) { r.Operation = acl.OperationUnknown }),
	)
}
