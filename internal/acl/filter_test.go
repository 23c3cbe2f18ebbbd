package acl

import (
	"errors"
	"testing"
)

// anyFilter matches every binding (Kafka's AclBindingFilter.ANY).
func anyFilter() Filter {
	return Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OperationAny, Permission: PermissionAny}
}

// TestFilterMatches pins Kafka's ResourcePatternFilter.matches and
// AccessControlEntryFilter.matches, one sentence per case.
func TestFilterMatches(t *testing.T) {
	fooRead := allow(literal(ResourceTopic, "foo"), alice, star, OperationRead)
	starRead := allow(literal(ResourceTopic, "*"), alice, star, OperationRead)
	foPrefix := allow(prefixed(ResourceTopic, "fo"), alice, star, OperationRead)
	fooPrefix := allow(prefixed(ResourceTopic, "foo"), alice, star, OperationRead)
	foodPrefix := allow(prefixed(ResourceTopic, "food"), alice, star, OperationRead)
	with := func(f func(*Filter)) Filter { x := anyFilter(); f(&x); return x }
	cases := []struct {
		name   string
		filter Filter
		b      Binding
		want   bool
	}{
		{name: "any matches all", filter: anyFilter(), b: foPrefix, want: true},
		// Resource type: ANY ignores it, anything else must be equal.
		{name: "type equal", filter: with(func(f *Filter) { f.ResourceType = ResourceTopic }), b: fooRead, want: true},
		{name: "type differs", filter: with(func(f *Filter) { f.ResourceType = ResourceGroup }), b: fooRead, want: false},
		// Pattern type ANY: the name, if given, exactly; any pattern type.
		{name: "any pattern, exact name, literal", filter: with(func(f *Filter) { f.Name = strp("foo") }), b: fooRead, want: true},
		{name: "any pattern, exact name, prefixed", filter: with(func(f *Filter) { f.Name = strp("foo") }), b: fooPrefix, want: true},
		{name: "any pattern does not expand prefixes", filter: with(func(f *Filter) { f.Name = strp("foo") }), b: foPrefix, want: false},
		{name: "any pattern does not expand the wildcard", filter: with(func(f *Filter) { f.Name = strp("foo") }), b: starRead, want: false},
		// A name of "*" with a non-MATCH pattern type matches only
		// wildcard patterns (ResourcePatternFilter's doc).
		{name: "star name matches only the wildcard", filter: with(func(f *Filter) { f.Name = strp("*") }), b: fooRead, want: false},
		{name: "star name matches the wildcard", filter: with(func(f *Filter) { f.Name = strp("*") }), b: starRead, want: true},
		// LITERAL / PREFIXED: that pattern type only.
		{name: "literal filter, literal binding", filter: with(func(f *Filter) { f.PatternType = PatternLiteral }), b: fooRead, want: true},
		{name: "literal filter, prefixed binding", filter: with(func(f *Filter) { f.PatternType = PatternLiteral }), b: fooPrefix, want: false},
		{name: "prefixed filter, exact name", filter: with(func(f *Filter) { f.PatternType = PatternPrefixed; f.Name = strp("fo") }), b: foPrefix, want: true},
		{name: "prefixed filter does not expand", filter: with(func(f *Filter) { f.PatternType = PatternPrefixed; f.Name = strp("foo") }), b: foPrefix, want: false},
		// MATCH: "the filter will match patterns that would match the
		// supplied name, including a matching prefixed and wildcards patterns".
		{name: "match, literal same name", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo") }), b: fooRead, want: true},
		{name: "match, literal wildcard", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo") }), b: starRead, want: true},
		{name: "match, shorter prefix", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo") }), b: foPrefix, want: true},
		{name: "match, equal prefix", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo") }), b: fooPrefix, want: true},
		{name: "match, longer prefix", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo") }), b: foodPrefix, want: false},
		{name: "match, other literal", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("fo") }), b: fooRead, want: false},
		{name: "match without a name matches all", filter: with(func(f *Filter) { f.PatternType = PatternMatch }), b: foodPrefix, want: true},
		{name: "match respects the type", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("foo"); f.ResourceType = ResourceGroup }), b: fooRead, want: false},
		// Entry: nil is any; otherwise exact, "User:*" and "*" included.
		{name: "principal equal", filter: with(func(f *Filter) { f.Principal = strp(alice) }), b: fooRead, want: true},
		{name: "principal differs", filter: with(func(f *Filter) { f.Principal = strp(bob) }), b: fooRead, want: false},
		{name: "wildcard principal filter is literal", filter: with(func(f *Filter) { f.Principal = strp(any_) }), b: fooRead, want: false},
		{name: "host equal", filter: with(func(f *Filter) { f.Host = strp(star) }), b: fooRead, want: true},
		{name: "host differs", filter: with(func(f *Filter) { f.Host = strp("10.0.0.1") }), b: fooRead, want: false},
		// Operation: ANY, else exactly; no implication, ALL only ALL.
		{name: "operation equal", filter: with(func(f *Filter) { f.Operation = OperationRead }), b: fooRead, want: true},
		{name: "describe filter does not match read", filter: with(func(f *Filter) { f.Operation = OperationDescribe }), b: fooRead, want: false},
		{name: "all filter does not match read", filter: with(func(f *Filter) { f.Operation = OperationAll }), b: fooRead, want: false},
		{name: "all filter matches all", filter: with(func(f *Filter) { f.Operation = OperationAll }), b: allow(literal(ResourceTopic, "foo"), alice, star, OperationAll), want: true},
		{name: "permission equal", filter: with(func(f *Filter) { f.Permission = PermissionAllow }), b: fooRead, want: true},
		{name: "permission differs", filter: with(func(f *Filter) { f.Permission = PermissionDeny }), b: fooRead, want: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.filter.Matches(c.b); got != c.want {
				t.Fatalf("Matches(%v) = %v, want %v", c.b, got, c.want)
			}
			// Set.Matching agrees, through its lookups.
			got := mustSet(t, c.b).Matching(c.filter)
			if (len(got) == 1) != c.want {
				t.Fatalf("Set.Matching = %v, want match %v", got, c.want)
			}
		})
	}
}

// TestValidateFilter: only UNKNOWN (and codes Kafka reads as UNKNOWN) is
// refused (AclControlManager.validateFilter, the requests' parse).
func TestValidateFilter(t *testing.T) {
	with := func(f func(*Filter)) Filter { x := anyFilter(); f(&x); return x }
	cases := []struct {
		name   string
		filter Filter
		ok     bool
	}{
		{name: "any", filter: anyFilter(), ok: true},
		{name: "match", filter: with(func(f *Filter) { f.PatternType = PatternMatch; f.Name = strp("x") }), ok: true},
		{name: "exact binding", filter: FilterFor(allow(literal(ResourceTopic, "foo"), alice, star, OperationAll)), ok: true},
		{name: "unknown resource type", filter: with(func(f *Filter) { f.ResourceType = ResourceUnknown })},
		{name: "out of range resource type", filter: with(func(f *Filter) { f.ResourceType = 9 })},
		{name: "unknown pattern type", filter: with(func(f *Filter) { f.PatternType = PatternUnknown })},
		{name: "out of range pattern type", filter: with(func(f *Filter) { f.PatternType = -2 })},
		{name: "unknown operation", filter: with(func(f *Filter) { f.Operation = OperationUnknown })},
		{name: "out of range operation", filter: with(func(f *Filter) { f.Operation = 20 })},
		{name: "unknown permission", filter: with(func(f *Filter) { f.Permission = PermissionUnknown })},
		{name: "out of range permission", filter: with(func(f *Filter) { f.Permission = 7 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateFilter(c.filter)
			if c.ok != (err == nil) {
				t.Fatalf("ValidateFilter = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidFilter) {
				t.Fatalf("ValidateFilter = %v, want ErrInvalidFilter", err)
			}
		})
	}
}
