package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The four enums are kmsg's own types (aliases, not new types), so the
// protocol layer passes a request's fields straight through: the numbers
// are Kafka's wire codes, and kmsg's String gives Kafka's names (TOPIC,
// IDEMPOTENT_WRITE, ...). A code Kafka does not know is UNKNOWN in Kafka
// (ResourceType.fromCode and friends map every other code to UNKNOWN);
// here it is simply a value no rule accepts.
type (
	// ResourceType is what a pattern names: TOPIC, GROUP, CLUSTER, ...
	ResourceType = kmsg.ACLResourceType
	// PatternType says how a pattern's name matches resource names.
	PatternType = kmsg.ACLResourcePatternType
	// Operation is what a request does to a resource.
	Operation = kmsg.ACLOperation
	// Permission is ALLOW or DENY.
	Permission = kmsg.ACLPermissionType
)

// Resource types. Any and Unknown only appear in filters and in requests
// to refuse.
const (
	ResourceUnknown         = kmsg.ACLResourceTypeUnknown
	ResourceAny             = kmsg.ACLResourceTypeAny
	ResourceTopic           = kmsg.ACLResourceTypeTopic
	ResourceGroup           = kmsg.ACLResourceTypeGroup
	ResourceCluster         = kmsg.ACLResourceTypeCluster
	ResourceTransactionalID = kmsg.ACLResourceTypeTransactionalId
	ResourceDelegationToken = kmsg.ACLResourceTypeDelegationToken
	ResourceUser            = kmsg.ACLResourceTypeUser
)

// Pattern types. A binding is Literal or Prefixed; Any and Match are
// filter-only (Filter.PatternType).
const (
	PatternUnknown  = kmsg.ACLResourcePatternTypeUnknown
	PatternAny      = kmsg.ACLResourcePatternTypeAny
	PatternMatch    = kmsg.ACLResourcePatternTypeMatch
	PatternLiteral  = kmsg.ACLResourcePatternTypeLiteral
	PatternPrefixed = kmsg.ACLResourcePatternTypePrefixed
)

// Operations. All in a binding matches every operation, for ALLOW and for
// DENY alike; Any is filter-only.
const (
	OperationUnknown         = kmsg.ACLOperationUnknown
	OperationAny             = kmsg.ACLOperationAny
	OperationAll             = kmsg.ACLOperationAll
	OperationRead            = kmsg.ACLOperationRead
	OperationWrite           = kmsg.ACLOperationWrite
	OperationCreate          = kmsg.ACLOperationCreate
	OperationDelete          = kmsg.ACLOperationDelete
	OperationAlter           = kmsg.ACLOperationAlter
	OperationDescribe        = kmsg.ACLOperationDescribe
	OperationClusterAction   = kmsg.ACLOperationClusterAction
	OperationDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	OperationAlterConfigs    = kmsg.ACLOperationAlterConfigs
	OperationIdempotentWrite = kmsg.ACLOperationIdempotentWrite
	OperationCreateTokens    = kmsg.ACLOperationCreateTokens
	OperationDescribeTokens  = kmsg.ACLOperationDescribeTokens
)

// Permissions. Any is filter-only.
const (
	PermissionUnknown = kmsg.ACLPermissionTypeUnknown
	PermissionAny     = kmsg.ACLPermissionTypeAny
	PermissionDeny    = kmsg.ACLPermissionTypeDeny
	PermissionAllow   = kmsg.ACLPermissionTypeAllow
)

// Kafka's special names (ResourcePattern.WILDCARD_RESOURCE,
// StandardAuthorizerData.WILDCARD_PRINCIPAL and WILDCARD, Resource.CLUSTER_NAME).
const (
	// WildcardResource as a LITERAL name matches every resource of the
	// pattern's type. As a PREFIXED name it is an ordinary prefix: it
	// matches names that start with '*'.
	WildcardResource = "*"
	// WildcardPrincipal matches every principal. It is the only wildcard
	// principal: "Group:*" matches only a principal literally named so.
	WildcardPrincipal = "User:*"
	// WildcardHost matches every client address.
	WildcardHost = "*"
	// ClusterName is the one name the CLUSTER resource has.
	ClusterName = "kafka-cluster"
)

// ResourcePattern names the resources a binding applies to (Kafka's
// ResourcePattern).
type ResourcePattern struct {
	Type ResourceType
	// Name is the resource name (LITERAL, where "*" means every resource
	// of Type) or the prefix of the names it matches (PREFIXED).
	Name        string
	PatternType PatternType
}

// Entry says who may or may not do what from where (Kafka's
// AccessControlEntry).
type Entry struct {
	// Principal is a KafkaPrincipal as "Type:Name", e.g. "User:alice",
	// or WildcardPrincipal.
	Principal string
	// Host is WildcardHost or a client IP address literal.
	Host       string
	Operation  Operation
	Permission Permission
}

// Binding is one ACL: a pattern and an entry (Kafka's AclBinding).
//
// A Binding is its own identity. Kafka keeps bindings unique by value
// (AclControlManager.createAcls answers success for a binding that
// already exists and writes no record), so the value names exactly one
// stored ACL, and DeleteAcls removes the values its filter matched. Kafka
// also gives each ACL a random UUID for its metadata records; Fjord's
// records can carry the binding itself, which keeps this package free of
// a random source and of a second map from ids to bindings.
type Binding struct {
	Pattern ResourcePattern
	Entry   Entry
}

// String formats b the way Kafka's tools print an ACL, for logs and error
// messages.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%s:%s:%s, entry=%s %s %s from %s)",
		b.Pattern.Type, b.Pattern.PatternType, b.Pattern.Name,
		b.Entry.Principal, b.Entry.Permission, b.Entry.Operation, b.Entry.Host)
}

// ParsePrincipal splits "Type:Name" at the first colon, as Kafka's
// SecurityUtils.parseKafkaPrincipal does, so the name may itself contain
// colons ("User:CN=a:b"). ok is false when there is no colon.
func ParsePrincipal(s string) (principalType, name string, ok bool) {
	return strings.Cut(s, ":")
}

// cmpBinding orders bindings by resource type, pattern type, name, then
// entry: the order Set.Bindings and Set.Matching return, so the protocol
// layer can group a DescribeAcls answer by resource in one pass.
func cmpBinding(a, b Binding) int {
	if c := cmpInt(int(a.Pattern.Type), int(b.Pattern.Type)); c != 0 {
		return c
	}
	if c := cmpInt(int(a.Pattern.PatternType), int(b.Pattern.PatternType)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Pattern.Name, b.Pattern.Name); c != 0 {
		return c
	}
	return cmpEntry(a.Entry, b.Entry)
}

// cmpEntry orders entries by principal first, which is what lets a
// bucket find one principal's entries by binary search (index.go).
func cmpEntry(a, b Entry) int {
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	if c := cmpInt(int(a.Operation), int(b.Operation)); c != 0 {
		return c
	}
	return cmpInt(int(a.Permission), int(b.Permission))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
