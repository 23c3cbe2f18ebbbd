package acl

import (
	"net/netip"
	"testing"
)

// request is one question to the Authorizer.
type request struct {
	principal string
	host      netip.Addr
	op        Operation
	rt        ResourceType
	name      string
}

func read(principal string, name string) request {
	return request{principal, host1, OperationRead, ResourceTopic, name}
}

// TestAuthorize pins one sentence of Kafka's authorization semantics per
// case. Reference: StandardAuthorizerData.authorize, findAclRule and
// findResult (metadata/src/main/java/org/apache/kafka/metadata/authorizer).
func TestAuthorize(t *testing.T) {
	topicFoo := literal(ResourceTopic, "foo")
	cases := []struct {
		name     string
		bindings []Binding
		cfg      Config
		req      request
		want     bool
		wantRule Rule
	}{
		// "If neither ALLOW nor DENY ACLs match, we return the default
		// result", which is DENIED unless allow.everyone.if.no.acl.found.
		{name: "no acl, default deny", req: read(alice, "foo"), want: false, wantRule: RuleNoACLFound},
		{name: "no acl, allow everyone", cfg: Config{AllowEveryoneIfNoACLFound: true}, req: read(alice, "foo"), want: true, wantRule: RuleNoACLFound},

		// "Superusers are authorized to do anything": before any ACL,
		// DENY ones included.
		{name: "super user beats deny all", cfg: Config{SuperUsers: []string{alice}},
			bindings: []Binding{deny(topicFoo, alice, star, OperationAll)},
			req:      read(alice, "foo"), want: true, wantRule: RuleSuperUser},
		{name: "super user without any acl", cfg: Config{SuperUsers: []string{alice}},
			req: request{alice, host1, OperationClusterAction, ResourceCluster, ClusterName}, want: true, wantRule: RuleSuperUser},
		// superUsers.contains(principal.toString()): a string match, so
		// "User:*" in super.users is not a wildcard.
		{name: "super users are not wildcards", cfg: Config{SuperUsers: []string{any_}},
			req: read(alice, "foo"), want: false, wantRule: RuleNoACLFound},

		// A LITERAL pattern matches exactly its name.
		{name: "literal allow", bindings: []Binding{allow(topicFoo, alice, star, OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "literal is not a prefix", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{deny(literal(ResourceTopic, "fo"), alice, star, OperationRead)},
			req:      read(alice, "foo"), want: true, wantRule: RuleNoACLFound},
		// The name "*" as LITERAL matches every resource of its type.
		{name: "literal wildcard name", bindings: []Binding{allow(literal(ResourceTopic, "*"), alice, star, OperationRead)},
			req: read(alice, "anything"), want: true, wantRule: RuleAllow},
		// ...of its type only.
		{name: "wildcard name is per resource type", bindings: []Binding{allow(literal(ResourceGroup, "*"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoACLFound},
		// A PREFIXED pattern matches names that start with it, itself included.
		{name: "prefixed matches longer name", bindings: []Binding{allow(prefixed(ResourceTopic, "fo"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "prefixed matches its own name", bindings: []Binding{allow(prefixed(ResourceTopic, "foo"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "prefixed does not match shorter name", bindings: []Binding{allow(prefixed(ResourceTopic, "food"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoACLFound},
		// PREFIXED "*" is an ordinary prefix: names starting with '*'.
		{name: "prefixed star is not a wildcard", bindings: []Binding{allow(prefixed(ResourceTopic, "*"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoACLFound},
		{name: "prefixed star matches star names", bindings: []Binding{allow(prefixed(ResourceTopic, "*"), alice, star, OperationRead)},
			req: read(alice, "*x"), want: true, wantRule: RuleAllow},

		// matchingPrincipals = {the caller, User:*}.
		{name: "other principal does not match", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(topicFoo, bob, star, OperationRead)},
			req:      read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "wildcard principal matches everyone", bindings: []Binding{allow(topicFoo, any_, star, OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "only User:* is a wildcard principal", bindings: []Binding{allow(topicFoo, "Group:*", star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "a non-User principal matches itself", bindings: []Binding{allow(topicFoo, "Group:*", star, OperationRead)},
			req: read("Group:*", "foo"), want: true, wantRule: RuleAllow},

		// acl.host is "*" or the client's address.
		{name: "host must match", bindings: []Binding{allow(topicFoo, alice, "10.0.0.2", OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "host matches", bindings: []Binding{allow(topicFoo, alice, "10.0.0.1", OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		// Java makes an IPv4-mapped client address an Inet4Address.
		{name: "ipv4-mapped client matches ipv4 acl", bindings: []Binding{allow(topicFoo, alice, "10.0.0.1", OperationRead)},
			req:  request{alice, netip.MustParseAddr("::ffff:10.0.0.1"), OperationRead, ResourceTopic, "foo"},
			want: true, wantRule: RuleAllow},
		// Fjord compares addresses: "::1" matches ::1 (Kafka compares with
		// "0:0:0:0:0:0:0:1" and would not).
		{name: "ipv6 compared as addresses", bindings: []Binding{allow(topicFoo, alice, "0:0:0:0:0:0:0:1", OperationRead)},
			req:  request{alice, netip.MustParseAddr("::1"), OperationRead, ResourceTopic, "foo"},
			want: true, wantRule: RuleAllow},
		{name: "no client address matches only star", bindings: []Binding{allow(topicFoo, alice, "10.0.0.1", OperationRead)},
			req:  request{alice, netip.Addr{}, OperationRead, ResourceTopic, "foo"},
			want: false, wantRule: RuleNoMatch},

		// "If any DENY ACLs match, the operation is denied, no matter how
		// many ALLOW ACLs match", wherever the DENY comes from.
		{name: "deny wins on the same pattern", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, alice, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleDeny},
		{name: "prefixed deny beats literal allow", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(prefixed(ResourceTopic, "f"), alice, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleDeny},
		{name: "wildcard deny beats literal allow", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(literal(ResourceTopic, "*"), any_, star, OperationRead)},
			req: read(alice, "foo"), want: false, wantRule: RuleDeny},
		{name: "deny for another principal does not apply", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, bob, star, OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "deny from another host does not apply", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, alice, "10.0.0.2", OperationRead)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},
		{name: "wildcard allow, principal deny", bindings: []Binding{allow(topicFoo, any_, star, OperationAll), deny(topicFoo, alice, star, OperationWrite)},
			req: request{alice, host1, OperationWrite, ResourceTopic, "foo"}, want: false, wantRule: RuleDeny},
		{name: "wildcard allow, principal deny, other op", bindings: []Binding{allow(topicFoo, any_, star, OperationAll), deny(topicFoo, alice, star, OperationWrite)},
			req: read(alice, "foo"), want: true, wantRule: RuleAllow},

		// "ACLs for various operations (READ, WRITE, DELETE, ALTER) imply
		// the presence of DESCRIBE."
		{name: "read implies describe", bindings: []Binding{allow(topicFoo, alice, star, OperationRead)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "write implies describe", bindings: []Binding{allow(topicFoo, alice, star, OperationWrite)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "delete implies describe", bindings: []Binding{allow(topicFoo, alice, star, OperationDelete)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "alter implies describe", bindings: []Binding{allow(topicFoo, alice, star, OperationAlter)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "create does not imply describe", bindings: []Binding{allow(topicFoo, alice, star, OperationCreate)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: false, wantRule: RuleNoMatch},
		{name: "alter configs does not imply describe", bindings: []Binding{allow(topicFoo, alice, star, OperationAlterConfigs)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: false, wantRule: RuleNoMatch},
		// "A similar rule applies to DESCRIBE_CONFIGS": ALTER_CONFIGS
		// implies it.
		{name: "alter configs implies describe configs", bindings: []Binding{allow(topicFoo, alice, star, OperationAlterConfigs)},
			req: request{alice, host1, OperationDescribeConfigs, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "alter does not imply describe configs", bindings: []Binding{allow(topicFoo, alice, star, OperationAlter)},
			req: request{alice, host1, OperationDescribeConfigs, ResourceTopic, "foo"}, want: false, wantRule: RuleNoMatch},
		// Implication runs one way: DESCRIBE does not allow READ.
		{name: "describe does not imply read", bindings: []Binding{allow(topicFoo, alice, star, OperationDescribe)},
			req: read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		// "But this rule only applies to ALLOW ACLs. So for example, a
		// DENY ACL for READ on a resource does not DENY describe."
		{name: "deny read does not deny describe", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, alice, star, OperationRead)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		{name: "deny alter configs does not deny describe configs", bindings: []Binding{allow(topicFoo, alice, star, OperationAlterConfigs), deny(topicFoo, alice, star, OperationAlterConfigs)},
			req: request{alice, host1, OperationDescribeConfigs, ResourceTopic, "foo"}, want: true, wantRule: RuleAllow},
		// ALL matches every operation, "if (acl.operation() != ALL)" being
		// checked before the permission: for ALLOW and DENY.
		{name: "allow all", bindings: []Binding{allow(literal(ResourceCluster, ClusterName), alice, star, OperationAll)},
			req: request{alice, host1, OperationIdempotentWrite, ResourceCluster, ClusterName}, want: true, wantRule: RuleAllow},
		{name: "deny all beats allow read", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, alice, star, OperationAll)},
			req: read(alice, "foo"), want: false, wantRule: RuleDeny},
		{name: "deny all denies describe", bindings: []Binding{allow(topicFoo, alice, star, OperationRead), deny(topicFoo, alice, star, OperationAll)},
			req: request{alice, host1, OperationDescribe, ResourceTopic, "foo"}, want: false, wantRule: RuleDeny},
		// An action for ALL itself only meets bindings for ALL (findResult
		// compares the operations).
		{name: "request for all needs an all binding", bindings: []Binding{allow(topicFoo, alice, star, OperationRead)},
			req: request{alice, host1, OperationAll, ResourceTopic, "foo"}, want: false, wantRule: RuleNoMatch},

		// hasResourceAcls: any ACL whose pattern matches the resource, for
		// any principal, host or operation, means "found": then no match
		// is DENY even with allow.everyone.if.no.acl.found.
		{name: "acl for another operation counts as found", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(topicFoo, alice, star, OperationWrite)},
			req:      read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "prefixed acl counts as found", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(prefixed(ResourceTopic, "f"), bob, star, OperationRead)},
			req:      read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "wildcard acl counts as found", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(literal(ResourceTopic, "*"), bob, star, OperationRead)},
			req:      read(alice, "foo"), want: false, wantRule: RuleNoMatch},
		{name: "acl on another name does not count", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(literal(ResourceTopic, "bar"), bob, star, OperationRead)},
			req:      read(alice, "foo"), want: true, wantRule: RuleNoACLFound},
		{name: "acl on another type does not count", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(literal(ResourceGroup, "foo"), bob, star, OperationRead)},
			req:      read(alice, "foo"), want: true, wantRule: RuleNoACLFound},
		{name: "acl from another host counts as found", cfg: Config{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(topicFoo, alice, "10.0.0.2", OperationRead)},
			req:      read(alice, "foo"), want: false, wantRule: RuleNoMatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAuthorizer(mustSet(t, c.bindings...), c.cfg)
			r := c.req
			d := a.Decide(r.principal, r.host, r.op, r.rt, r.name)
			if d.Allowed != c.want || d.Rule != c.wantRule {
				t.Fatalf("Decide = %v by %v, want %v by %v", d.Allowed, d.Rule, c.want, c.wantRule)
			}
			if got := a.Authorize(r.principal, r.host, r.op, r.rt, r.name); got != d.Allowed {
				t.Fatalf("Authorize = %v, Decide = %v", got, d.Allowed)
			}
			// The deciding binding is one of the bindings, for the rules
			// that have one.
			if d.Rule == RuleAllow || d.Rule == RuleDeny {
				if !a.Set().Contains(d.Binding) {
					t.Fatalf("Decide names %v, which is not in the set", d.Binding)
				}
				if (d.Rule == RuleDeny) != (d.Binding.Entry.Permission == PermissionDeny) {
					t.Fatalf("rule %v named by %v", d.Rule, d.Binding)
				}
			}
		})
	}
}

// TestAuthorizeAllowCanDeny pins the rule that makes "adding an ALLOW never
// denies an allowed request" false: with allow.everyone.if.no.acl.found,
// the first binding on a resource, even an ALLOW for someone else, takes
// the default away from everyone else.
func TestAuthorizeAllowCanDeny(t *testing.T) {
	cfg := Config{AllowEveryoneIfNoACLFound: true}
	before := NewAuthorizer(nil, cfg)
	after := NewAuthorizer(mustSet(t, allow(literal(ResourceTopic, "foo"), bob, star, OperationRead)), cfg)
	if !before.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") {
		t.Fatal("alice denied with no ACLs and allow.everyone.if.no.acl.found")
	}
	if after.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") {
		t.Fatal("alice still allowed after an ALLOW for bob on the topic")
	}
}

// TestAuthorizeByResourceType pins Kafka's default
// Authorizer.authorizeByResourceType (clients/.../server/authorizer/Authorizer.java),
// which KafkaApis.handleInitProducerIdRequest calls for WRITE on TOPIC.
func TestAuthorizeByResourceType(t *testing.T) {
	topic := func(name string) ResourcePattern { return literal(ResourceTopic, name) }
	prefix := func(name string) ResourcePattern { return prefixed(ResourceTopic, name) }
	w := OperationWrite
	cases := []struct {
		name     string
		bindings []Binding
		cfg      Config
		op       Operation
		want     bool
	}{
		// Step 1 authorizes "hardcode", so super users pass...
		{name: "super user", cfg: Config{SuperUsers: []string{alice}}, bindings: []Binding{deny(topic("*"), alice, star, w)}, op: w, want: true},
		// ...and so does allow.everyone.if.no.acl.found when no binding
		// matches "hardcode", even if the type has bindings for others.
		{name: "allow everyone via hardcode", cfg: Config{AllowEveryoneIfNoACLFound: true}, bindings: []Binding{allow(topic("t"), bob, star, w)}, op: w, want: true},
		{name: "no bindings", op: w, want: false},
		{name: "one literal allow", bindings: []Binding{allow(topic("t"), alice, star, w)}, op: w, want: true},
		{name: "one prefixed allow", bindings: []Binding{allow(prefix("t"), alice, star, w)}, op: w, want: true},
		{name: "all counts as the operation", bindings: []Binding{allow(topic("t"), alice, star, OperationAll)}, op: w, want: true},
		{name: "wildcard principal counts", bindings: []Binding{allow(topic("t"), any_, star, w)}, op: w, want: true},
		{name: "other principal does not count", bindings: []Binding{allow(topic("t"), bob, star, w)}, op: w, want: false},
		{name: "other host does not count", bindings: []Binding{allow(topic("t"), alice, "10.0.0.2", w)}, op: w, want: false},
		{name: "other type does not count", bindings: []Binding{allow(literal(ResourceTransactionalID, "t"), alice, star, w)}, op: w, want: false},
		// Step 2 has no implication: READ does not give DESCRIBE here...
		{name: "no implied describe in the scan", bindings: []Binding{allow(topic("t"), alice, star, OperationRead)}, op: OperationDescribe, want: false},
		// ...but step 1 does, when the binding matches "hardcode".
		{name: "implied describe via hardcode", bindings: []Binding{allow(topic("*"), alice, star, OperationRead)}, op: OperationDescribe, want: true},
		{name: "prefix of hardcode via step 1", bindings: []Binding{allow(prefix("hard"), alice, star, OperationRead)}, op: OperationDescribe, want: true},
		// "If wildcard deny exists, return deny directly."
		{name: "wildcard deny", bindings: []Binding{allow(topic("t"), alice, star, w), deny(topic("*"), any_, star, w)}, op: w, want: false},
		{name: "wildcard deny all", bindings: []Binding{allow(topic("t"), alice, star, w), deny(topic("*"), alice, star, OperationAll)}, op: w, want: false},
		// A wildcard allow wins over non-wildcard denies.
		{name: "wildcard allow beats prefixed deny", bindings: []Binding{allow(topic("*"), alice, star, w), deny(prefix("h"), alice, star, w), deny(prefix("t"), alice, star, w)}, op: w, want: true},
		// "For any literal allowed, if there's no dominant literal and
		// prefix denied, return allow."
		{name: "literal deny on the same name", bindings: []Binding{allow(topic("t"), alice, star, w), deny(topic("t"), alice, star, w)}, op: w, want: false},
		{name: "prefixed deny equal to the literal", bindings: []Binding{allow(topic("t"), alice, star, w), deny(prefix("t"), alice, star, w)}, op: w, want: false},
		{name: "prefixed deny dominates the literal", bindings: []Binding{allow(topic("tx"), alice, star, w), deny(prefix("t"), alice, star, w)}, op: w, want: false},
		{name: "longer prefixed deny does not dominate", bindings: []Binding{allow(topic("tx"), alice, star, w), deny(prefix("txy"), alice, star, w)}, op: w, want: true},
		{name: "one undominated literal is enough", bindings: []Binding{allow(topic("tx"), alice, star, w), deny(prefix("t"), alice, star, w), allow(topic("u"), alice, star, w)}, op: w, want: true},
		// "For any prefix allowed, if there's no dominant prefix denied,
		// return allow": a LITERAL deny does not stop a PREFIXED allow.
		{name: "literal deny does not stop prefixed allow", bindings: []Binding{allow(prefix("tx"), alice, star, w), deny(topic("tx"), alice, star, w)}, op: w, want: true},
		{name: "prefixed deny dominates prefixed allow", bindings: []Binding{allow(prefix("tx"), alice, star, w), deny(prefix("t"), alice, star, w)}, op: w, want: false},
		{name: "deny for another principal does not count", bindings: []Binding{allow(topic("t"), alice, star, w), deny(prefix("t"), bob, star, w)}, op: w, want: true},
		{name: "deny for another operation does not count", bindings: []Binding{allow(topic("t"), alice, star, w), deny(prefix("t"), alice, star, OperationRead)}, op: w, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAuthorizer(mustSet(t, c.bindings...), c.cfg)
			if got := a.AuthorizeByResourceType(alice, host1, c.op, ResourceTopic); got != c.want {
				t.Fatalf("AuthorizeByResourceType = %v, want %v", got, c.want)
			}
		})
	}
}

// TestAuthorizedOperations: the bit field of supported operations allowed
// (AuthHelper.authorizedOperations), implication included.
func TestAuthorizedOperations(t *testing.T) {
	a := NewAuthorizer(mustSet(t, allow(literal(ResourceTopic, "foo"), alice, star, OperationRead)), Config{})
	got := a.AuthorizedOperations(alice, host1, ResourceTopic, "foo")
	want := int32(1<<OperationRead | 1<<OperationDescribe)
	if got != want {
		t.Fatalf("AuthorizedOperations = %b, want %b", got, want)
	}
	super := NewAuthorizer(nil, Config{SuperUsers: []string{alice}})
	var all int32
	for _, op := range SupportedOperations(ResourceCluster) {
		all |= 1 << op
	}
	if got := super.AuthorizedOperations(alice, host1, ResourceCluster, ClusterName); got != all {
		t.Fatalf("super user's cluster operations = %b, want %b", got, all)
	}
}

// TestAuthorizePanicsOnFilterValues: ANY and UNKNOWN are filter values; a
// handler passing one has a bug.
func TestAuthorizePanicsOnFilterValues(t *testing.T) {
	a := NewAuthorizer(nil, Config{})
	for _, c := range []struct {
		op Operation
		rt ResourceType
	}{{OperationAny, ResourceTopic}, {OperationUnknown, ResourceTopic}, {OperationRead, ResourceAny}, {OperationRead, ResourceUnknown}, {Operation(99), ResourceTopic}, {OperationRead, ResourceType(-3)}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Authorize(%v, %v) did not panic", c.op, c.rt)
				}
			}()
			a.Authorize(alice, host1, c.op, c.rt, "foo")
		}()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AuthorizeByResourceType(%v, %v) did not panic", c.op, c.rt)
				}
			}()
			a.AuthorizeByResourceType(alice, host1, c.op, c.rt)
		}()
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers(" User:admin ;;User:CN=a,O=b; ")
	if err != nil || len(got) != 2 || got[0] != "User:admin" || got[1] != "User:CN=a,O=b" {
		t.Fatalf("ParseSuperUsers = %q, %v", got, err)
	}
	if _, err := ParseSuperUsers("User:a,admin"); err != nil {
		t.Fatalf("commas are part of a principal: %v", err)
	}
	if _, err := ParseSuperUsers("User:a;admin"); err == nil {
		t.Fatal("a principal without a colon was accepted")
	}
}

func TestWithSet(t *testing.T) {
	a := NewAuthorizer(nil, Config{SuperUsers: []string{bob}})
	b := a.WithSet(mustSet(t, allow(literal(ResourceTopic, "foo"), alice, star, OperationRead)))
	if a.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") || !b.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") {
		t.Fatal("WithSet did not swap only the bindings")
	}
	if !b.Authorize(bob, host2, OperationAlter, ResourceCluster, ClusterName) {
		t.Fatal("WithSet lost the super users")
	}
}
