package acl

import "strings"

// Filter selects bindings for DescribeAcls and DeleteAcls (Kafka's
// AclBindingFilter: a ResourcePatternFilter and an
// AccessControlEntryFilter). The nil-able fields are the wire's nullable
// strings, so kmsg's *string fields pass straight in.
type Filter struct {
	// ResourceType: ANY matches every type.
	ResourceType ResourceType
	// Name: nil matches every name. Otherwise see PatternType.
	Name *string
	// PatternType: ANY matches every pattern type, and Name then matches
	// the pattern's name exactly. LITERAL or PREFIXED matches only that
	// type, names exactly. MATCH matches the patterns that would match a
	// resource called Name: the LITERAL Name, the LITERAL "*", and every
	// PREFIXED pattern Name starts with.
	PatternType PatternType
	// Principal and Host: nil matches any; otherwise the binding's string
	// exactly. "User:*" here matches bindings for the wildcard principal
	// only, not every binding; likewise "*" for hosts.
	Principal *string
	Host      *string
	// Operation: ANY matches every operation; otherwise exactly, with no
	// implication (a filter for DESCRIBE does not match a READ binding,
	// and one for ALL matches only ALL bindings).
	Operation Operation
	// Permission: ANY matches both.
	Permission Permission
}

// FilterFor returns the filter that matches exactly b (Kafka's
// AclBinding.toFilter), e.g. to delete one binding.
func FilterFor(b Binding) Filter {
	name, principal, host := b.Pattern.Name, b.Entry.Principal, b.Entry.Host
	return Filter{
		ResourceType: b.Pattern.Type,
		Name:         &name,
		PatternType:  b.Pattern.PatternType,
		Principal:    &principal,
		Host:         &host,
		Operation:    b.Entry.Operation,
		Permission:   b.Entry.Permission,
	}
}

// ValidateFilter checks a DescribeAcls or DeleteAcls filter as Kafka does:
// no field is UNKNOWN (or a code Kafka does not know, which Kafka reads as
// UNKNOWN). Everything else is a valid filter, including ones that match
// nothing. The error wraps ErrInvalidFilter (INVALID_REQUEST).
//
// Kafka refuses UNKNOWN when it parses the request
// (DescribeAclsRequest.normalizeAndValidate, DeleteAclsRequest's) and again
// in AclControlManager.validateFilter. The version 0 rule of both requests
// (pattern type ANY read as LITERAL, anything but LITERAL refused with
// UNSUPPORTED_VERSION) is the protocol layer's: see APIS.md.
func ValidateFilter(f Filter) error {
	if f.ResourceType != ResourceAny && !concreteResourceType(f.ResourceType) {
		return refuse(ErrInvalidFilter, "resource type %s (code %d)", f.ResourceType, int8(f.ResourceType))
	}
	if f.PatternType < PatternAny || f.PatternType > PatternPrefixed {
		return refuse(ErrInvalidFilter, "pattern type %s (code %d)", f.PatternType, int8(f.PatternType))
	}
	if f.Operation != OperationAny && !concreteOperation(f.Operation) {
		return refuse(ErrInvalidFilter, "operation %s (code %d)", f.Operation, int8(f.Operation))
	}
	if f.Permission < PermissionAny || f.Permission > PermissionAllow {
		return refuse(ErrInvalidFilter, "permission type %s (code %d)", f.Permission, int8(f.Permission))
	}
	return nil
}

// Matches reports whether f selects b, exactly as Kafka's
// AclBindingFilter.matches (ResourcePatternFilter.matches and
// AccessControlEntryFilter.matches).
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b.Pattern) && f.matchesEntry(b.Entry)
}

func (f Filter) matchesPattern(p ResourcePattern) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != p.Type {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != p.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.PatternType == PatternAny || f.PatternType == p.PatternType {
		return name == p.Name
	}
	// MATCH: the patterns that would match a resource called name.
	switch p.PatternType {
	case PatternLiteral:
		return name == p.Name || p.Name == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(name, p.Name)
	}
	// Kafka throws IllegalArgumentException here; a Set never holds such
	// a pattern (Validate), so a caller's stray binding just does not
	// match.
	return false
}

func (f Filter) matchesEntry(e Entry) bool {
	if f.Principal != nil && *f.Principal != e.Principal {
		return false
	}
	if f.Host != nil && *f.Host != e.Host {
		return false
	}
	if f.Operation != OperationAny && f.Operation != e.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == e.Permission
}
