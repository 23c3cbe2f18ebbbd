package acl

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestValidate pins one rule per case. Reference: CreateAclsRequest.validate
// (UNKNOWN codes), AclApis.handleCreateAcls (CLUSTER name, empty name),
// AclControlManager.validateNewAcl (the enums); the rest are Fjord's and
// say why in Validate's doc.
func TestValidate(t *testing.T) {
	ok := allow(literal(ResourceTopic, "foo"), alice, star, OperationRead)
	with := func(f func(*Binding)) Binding { b := ok; f(&b); return b }
	cases := []struct {
		name string
		b    Binding
		want error // nil: accepted
	}{
		{name: "valid literal", b: ok},
		{name: "valid prefixed deny", b: deny(prefixed(ResourceGroup, "team-"), any_, "10.1.2.3", OperationAll)},
		{name: "valid ipv6 host", b: with(func(b *Binding) { b.Entry.Host = "fe80::1%eth0" })},
		{name: "valid ipv4-mapped host", b: with(func(b *Binding) { b.Entry.Host = "::ffff:10.0.0.1" })},
		{name: "principal name may hold colons", b: with(func(b *Binding) { b.Entry.Principal = "User:CN=a:b" })},
		{name: "literal star name", b: with(func(b *Binding) { b.Pattern.Name = "*" })},
		// Kafka does not check the operation against the resource type.
		{name: "operation not used by the type", b: allow(literal(ResourceCluster, ClusterName), alice, star, OperationRead)},
		{name: "every concrete type", b: allow(literal(ResourceUser, "User:bob"), alice, star, OperationCreateTokens)},

		// "Invalid resourceType": UNKNOWN, ANY, and codes Kafka reads as UNKNOWN.
		{name: "resource type any", b: with(func(b *Binding) { b.Pattern.Type = ResourceAny }), want: ErrInvalidResourceType},
		{name: "resource type unknown", b: with(func(b *Binding) { b.Pattern.Type = ResourceUnknown }), want: ErrInvalidResourceType},
		{name: "resource type out of range", b: with(func(b *Binding) { b.Pattern.Type = 8 }), want: ErrInvalidResourceType},
		{name: "resource type negative", b: with(func(b *Binding) { b.Pattern.Type = -1 }), want: ErrInvalidResourceType},
		// "Invalid patternType": only LITERAL and PREFIXED.
		{name: "pattern match", b: with(func(b *Binding) { b.Pattern.PatternType = PatternMatch }), want: ErrInvalidPatternType},
		{name: "pattern any", b: with(func(b *Binding) { b.Pattern.PatternType = PatternAny }), want: ErrInvalidPatternType},
		{name: "pattern unknown", b: with(func(b *Binding) { b.Pattern.PatternType = PatternUnknown }), want: ErrInvalidPatternType},
		{name: "pattern out of range", b: with(func(b *Binding) { b.Pattern.PatternType = 5 }), want: ErrInvalidPatternType},
		// "Invalid operation": UNKNOWN, ANY.
		{name: "operation any", b: with(func(b *Binding) { b.Entry.Operation = OperationAny }), want: ErrInvalidOperation},
		{name: "operation unknown", b: with(func(b *Binding) { b.Entry.Operation = OperationUnknown }), want: ErrInvalidOperation},
		{name: "operation out of range", b: with(func(b *Binding) { b.Entry.Operation = 15 }), want: ErrInvalidOperation},
		// "Invalid permissionType": only DENY and ALLOW.
		{name: "permission any", b: with(func(b *Binding) { b.Entry.Permission = PermissionAny }), want: ErrInvalidPermission},
		{name: "permission unknown", b: with(func(b *Binding) { b.Entry.Permission = PermissionUnknown }), want: ErrInvalidPermission},
		{name: "permission out of range", b: with(func(b *Binding) { b.Entry.Permission = 4 }), want: ErrInvalidPermission},
		// "The only valid name for the CLUSTER resource is kafka-cluster",
		// whatever the pattern type.
		{name: "cluster wildcard", b: allow(literal(ResourceCluster, "*"), alice, star, OperationAll), want: ErrInvalidClusterName},
		{name: "cluster other name", b: allow(literal(ResourceCluster, "kafka"), alice, star, OperationAll), want: ErrInvalidClusterName},
		{name: "cluster prefix of its name", b: allow(prefixed(ResourceCluster, "kafka"), alice, star, OperationAll), want: ErrInvalidClusterName},
		{name: "cluster prefixed full name", b: allow(prefixed(ResourceCluster, ClusterName), alice, star, OperationAll)},
		{name: "cluster empty name", b: allow(literal(ResourceCluster, ""), alice, star, OperationAll), want: ErrInvalidClusterName},
		// "Resource name should not be empty."
		{name: "empty name", b: with(func(b *Binding) { b.Pattern.Name = "" }), want: ErrEmptyResourceName},
		{name: "empty prefix", b: allow(prefixed(ResourceTopic, ""), alice, star, OperationRead), want: ErrEmptyResourceName},
		// Fjord: a principal is Type:Name.
		{name: "principal without colon", b: with(func(b *Binding) { b.Entry.Principal = "alice" }), want: ErrInvalidPrincipal},
		{name: "empty principal", b: with(func(b *Binding) { b.Entry.Principal = "" }), want: ErrInvalidPrincipal},
		{name: "principal without type", b: with(func(b *Binding) { b.Entry.Principal = ":alice" }), want: ErrInvalidPrincipal},
		{name: "principal without name", b: with(func(b *Binding) { b.Entry.Principal = "User:" }), want: ErrInvalidPrincipal},
		// Fjord: a host is "*" or an IP address.
		{name: "host name", b: with(func(b *Binding) { b.Entry.Host = "broker.example.com" }), want: ErrInvalidHost},
		{name: "empty host", b: with(func(b *Binding) { b.Entry.Host = "" }), want: ErrInvalidHost},
		{name: "cidr host", b: with(func(b *Binding) { b.Entry.Host = "10.0.0.0/8" }), want: ErrInvalidHost},
		// Fjord: bounds and UTF-8.
		{name: "name at the bound", b: with(func(b *Binding) { b.Pattern.Name = strings.Repeat("n", MaxNameBytes) })},
		{name: "name too long", b: with(func(b *Binding) { b.Pattern.Name = strings.Repeat("n", MaxNameBytes+1) }), want: ErrTooLong},
		{name: "principal too long", b: with(func(b *Binding) { b.Entry.Principal = "User:" + strings.Repeat("p", MaxPrincipalBytes) }), want: ErrTooLong},
		{name: "host too long", b: with(func(b *Binding) { b.Entry.Host = strings.Repeat("1", MaxHostBytes+1) }), want: ErrTooLong},
		{name: "name not utf8", b: with(func(b *Binding) { b.Pattern.Name = "a\xff" }), want: ErrNotUTF8},
		{name: "principal not utf8", b: with(func(b *Binding) { b.Entry.Principal = "User:\xc3" }), want: ErrNotUTF8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.b)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Validate(%v) = %v, want nil", c.b, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate(%v) = %v, want %v", c.b, err, c.want)
			}
			// Every refusal is INVALID_REQUEST at the protocol edge.
			if !errors.Is(err, kerr.InvalidRequest) || ErrorCode(err) != kerr.InvalidRequest.Code {
				t.Fatalf("Validate(%v) = %v: code %d, want INVALID_REQUEST", c.b, err, ErrorCode(err))
			}
		})
	}
}

func TestErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{ErrInvalidHost, kerr.InvalidRequest.Code},
		{ErrInvalidFilter, kerr.InvalidRequest.Code},
		{ErrSecurityDisabled, kerr.SecurityDisabled.Code},
		{errors.New("other"), kerr.UnknownServerError.Code},
	} {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
