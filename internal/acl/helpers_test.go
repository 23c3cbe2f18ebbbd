package acl

import "net/netip"

// Short constructors so that a table row reads like the ACL it is.

func literal(rt ResourceType, name string) ResourcePattern {
	return ResourcePattern{Type: rt, Name: name, PatternType: PatternLiteral}
}

func prefixed(rt ResourceType, name string) ResourcePattern {
	return ResourcePattern{Type: rt, Name: name, PatternType: PatternPrefixed}
}

func allow(p ResourcePattern, principal, host string, op Operation) Binding {
	return Binding{Pattern: p, Entry: Entry{Principal: principal, Host: host, Operation: op, Permission: PermissionAllow}}
}

func deny(p ResourcePattern, principal, host string, op Operation) Binding {
	return Binding{Pattern: p, Entry: Entry{Principal: principal, Host: host, Operation: op, Permission: PermissionDeny}}
}

func strp(s string) *string { return &s }

const (
	alice = "User:alice"
	bob   = "User:bob"
	any_  = WildcardPrincipal
	star  = WildcardHost
)

var (
	host1 = netip.MustParseAddr("10.0.0.1")
	host2 = netip.MustParseAddr("10.0.0.2")
)

// fataler is what mustSet needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustSet(t fataler, bindings ...Binding) *Set {
	t.Helper()
	s, err := NewSet(bindings)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	return s
}
