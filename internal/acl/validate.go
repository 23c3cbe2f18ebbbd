package acl

import (
	"net/netip"
	"unicode/utf8"
)

// Bounds on a binding's strings, in bytes. Kafka has none beyond the
// wire's 32767 for a string; Fjord keeps every binding in every node's
// memory and in every metadata image, and a topic, group or transactional
// id is never kilobytes long, so a longer field is a mistake or an attack,
// not an ACL.
const (
	MaxNameBytes      = 4096
	MaxPrincipalBytes = 4096
	// MaxHostBytes: the longest IPv6 literal with an interface zone is
	// well under 100 bytes.
	MaxHostBytes = 255
)

// Validate checks a binding a client asks to create, as Kafka does for
// CreateAcls, and returns nil or an error wrapping one of the sentinels in
// errors.go (all INVALID_REQUEST). A Set only holds bindings Validate
// accepts.
//
// Kafka's rules, in the order its broker meets them:
//   - resource type, pattern type, operation and permission are not
//     UNKNOWN (CreateAclsRequest.validate, when the request is parsed);
//   - the CLUSTER resource is named "kafka-cluster", whatever the pattern
//     type (AclApis.handleCreateAcls; so LITERAL "*" on CLUSTER is refused,
//     and PREFIXED "kafka-cluster" accepted);
//   - the name is not empty (AclApis, and again AclControlManager);
//   - resource type not ANY, pattern LITERAL or PREFIXED, operation not
//     ANY, permission ALLOW or DENY (AclControlManager.validateNewAcl).
//
// Fjord's additions, for bindings Kafka stores but that can never do what
// their creator meant:
//   - the principal is "Type:Name" with both parts non-empty. Kafka's
//     controller stores any string, and StandardAcl.kafkaPrincipal then
//     throws IllegalStateException for a principal without a colon on every
//     authorization that reaches it, failing requests for that resource;
//   - the host is "*" or an IP address literal. Kafka compares the host as
//     a string with the client's address, so a host name is stored and
//     never matches;
//   - name, principal and host are valid UTF-8 (Kafka decodes the wire's
//     strings as UTF-8, replacing what is not, so what it stores is
//     always UTF-8) and within the Max*Bytes bounds.
//
// Kafka does not check that the operation applies to the resource type
// (READ on CLUSTER is accepted and never used; only the kafka-acls tool
// refuses it), and neither does Validate, so tools that work against Kafka
// work here.
func Validate(b Binding) error {
	p, e := b.Pattern, b.Entry
	if err := validateStrings(p.Name, e.Principal, e.Host); err != nil {
		return err
	}
	if !concreteResourceType(p.Type) {
		return refuse(ErrInvalidResourceType, "%s (code %d)", p.Type, int8(p.Type))
	}
	if p.PatternType != PatternLiteral && p.PatternType != PatternPrefixed {
		return refuse(ErrInvalidPatternType, "%s (code %d): a binding is LITERAL or PREFIXED", p.PatternType, int8(p.PatternType))
	}
	if !concreteOperation(e.Operation) {
		return refuse(ErrInvalidOperation, "%s (code %d)", e.Operation, int8(e.Operation))
	}
	if e.Permission != PermissionAllow && e.Permission != PermissionDeny {
		return refuse(ErrInvalidPermission, "%s (code %d)", e.Permission, int8(e.Permission))
	}
	if p.Type == ResourceCluster && p.Name != ClusterName {
		return refuse(ErrInvalidClusterName, "%q: the only valid name for the CLUSTER resource is %q", p.Name, ClusterName)
	}
	if p.Name == "" {
		return ErrEmptyResourceName
	}
	if typ, name, ok := ParsePrincipal(e.Principal); !ok || typ == "" || name == "" {
		return refuse(ErrInvalidPrincipal, "%q: expected Type:Name, e.g. User:alice", e.Principal)
	}
	if e.Host != WildcardHost {
		if _, err := netip.ParseAddr(e.Host); err != nil {
			return refuse(ErrInvalidHost, "%q: expected %q or an IP address", e.Host, WildcardHost)
		}
	}
	return nil
}

// validateStrings bounds the work the other checks do and refuses bytes
// Kafka could not have stored.
func validateStrings(name, principal, host string) error {
	switch {
	case len(name) > MaxNameBytes:
		return refuse(ErrTooLong, "resource name is %d bytes (allowed: at most %d)", len(name), MaxNameBytes)
	case len(principal) > MaxPrincipalBytes:
		return refuse(ErrTooLong, "principal is %d bytes (allowed: at most %d)", len(principal), MaxPrincipalBytes)
	case len(host) > MaxHostBytes:
		return refuse(ErrTooLong, "host is %d bytes (allowed: at most %d)", len(host), MaxHostBytes)
	case !utf8.ValidString(name):
		return refuse(ErrNotUTF8, "resource name %q", name)
	case !utf8.ValidString(principal):
		return refuse(ErrNotUTF8, "principal %q", principal)
	case !utf8.ValidString(host):
		return refuse(ErrNotUTF8, "host %q", host)
	}
	return nil
}

// concreteResourceType: a type a resource can have (TOPIC..USER).
func concreteResourceType(t ResourceType) bool {
	return t >= ResourceTopic && t <= ResourceUser
}

// concreteOperation: an operation a binding can have (ALL..DESCRIBE_TOKENS).
func concreteOperation(op Operation) bool {
	return op >= OperationAll && op <= OperationDescribeTokens
}
