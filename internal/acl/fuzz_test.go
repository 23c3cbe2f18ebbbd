package acl

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzValidate feeds Validate arbitrary bindings, wire codes included.
// Invariants:
//   - Validate never panics, and refuses with INVALID_REQUEST only;
//   - a binding it accepts enters a Set, which then contains it, and the
//     filter made from it is valid and selects it;
//   - an accepted LITERAL binding decides a request that exactly fits it
//     (its own principal, host, operation and name): ALLOW allows, DENY
//     denies.
func FuzzValidate(f *testing.F) {
	f.Add(int8(ResourceTopic), int8(PatternLiteral), "foo", alice, "*", int8(OperationRead), int8(PermissionAllow))
	f.Add(int8(ResourceCluster), int8(PatternPrefixed), ClusterName, "User:*", "::1", int8(OperationAll), int8(PermissionDeny))
	f.Add(int8(0), int8(0), "", "", "", int8(0), int8(0))
	f.Add(int8(-1), int8(127), "*", ":", "fe80::1%eth0", int8(-128), int8(4))
	f.Add(int8(ResourceGroup), int8(PatternLiteral), strings.Repeat("g", MaxNameBytes), "User:"+strings.Repeat("p", MaxPrincipalBytes-5), "10.0.0.1", int8(OperationDescribe), int8(PermissionAllow))
	f.Add(int8(ResourceTopic), int8(PatternLiteral), "foo\xff\x00garbage", "User:a\xc3", "10.0.0.1\x00", int8(OperationWrite), int8(PermissionAllow))
	f.Fuzz(func(t *testing.T, rt, pt int8, name, principal, host string, op, perm int8) {
		b := Binding{
			Pattern: ResourcePattern{Type: ResourceType(rt), Name: name, PatternType: PatternType(pt)},
			Entry:   Entry{Principal: principal, Host: host, Operation: Operation(op), Permission: Permission(perm)},
		}
		err := Validate(b)
		if err != nil {
			if ErrorCode(err) != 42 {
				t.Fatalf("Validate(%v) = %v, code %d", b, err, ErrorCode(err))
			}
			return
		}
		s, err := NewSet([]Binding{b})
		if err != nil || !s.Contains(b) || s.Len() != 1 {
			t.Fatalf("accepted %v, but NewSet = %v, %v", b, s, err)
		}
		fl := FilterFor(b)
		if err := ValidateFilter(fl); err != nil || !fl.Matches(b) {
			t.Fatalf("FilterFor(%v): %v, matches %v", b, err, fl.Matches(b))
		}
		if b.Pattern.PatternType != PatternLiteral {
			return
		}
		addr := host1
		if host != WildcardHost {
			addr = netip.MustParseAddr(host)
		}
		got := NewAuthorizer(s, Config{}).Authorize(principal, addr, b.Entry.Operation, b.Pattern.Type, name)
		if want := b.Entry.Permission == PermissionAllow; got != want {
			t.Fatalf("binding %v decides its own request %v, want %v", b, got, want)
		}
	})
}
