package acl

import (
	"fmt"
	"net/netip"
	"strings"
)

// Config is the broker's static authorizer configuration (Kafka's
// StandardAuthorizer.configure): it is not in the metadata log, so one
// Config is paired with each Set the metadata image brings.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything, DENY
	// bindings included. Compared as strings with the caller's principal:
	// "User:*" here makes only a principal named "*" a super user, not
	// everyone (Kafka: superUsers.contains(principal.toString())).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: allow a
	// request on a resource no binding's pattern matches at all. See
	// Authorizer.Decide for what "found" means.
	AllowEveryoneIfNoACLFound bool
}

// ParseSuperUsers parses the super.users config value as Kafka does
// (StandardAuthorizer.getConfiguredSuperUsers): principals separated by
// semicolons, not commas (a DN such as "User:CN=a,O=b" holds commas),
// each trimmed, empty ones skipped, and each must be "Type:Name".
func ParseSuperUsers(value string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(value, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if _, _, ok := ParsePrincipal(v); !ok {
			return nil, fmt.Errorf("acl: super.users: %q is not Type:Name (principals are separated by ';')", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// Authorizer answers whether a principal may do an operation on a
// resource: Kafka's StandardAuthorizer (KRaft) as a pure, immutable value.
// It is safe for concurrent use. A node keeps one per metadata image
// (WithSet) and hands it to request handlers.
type Authorizer struct {
	set          *Set
	superUsers   map[string]struct{}
	allowIfNoACL bool
}

// NewAuthorizer pairs a Set (nil: no bindings) with the configuration.
func NewAuthorizer(set *Set, cfg Config) *Authorizer {
	a := &Authorizer{set: set, superUsers: make(map[string]struct{}, len(cfg.SuperUsers)), allowIfNoACL: cfg.AllowEveryoneIfNoACLFound}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = struct{}{}
	}
	return a
}

// WithSet returns an Authorizer with a's configuration and set's
// bindings, in O(1): what a node does when a new metadata image arrives.
func (a *Authorizer) WithSet(set *Set) *Authorizer {
	c := *a
	c.set = set
	return &c
}

// Set returns the bindings a decides by.
func (a *Authorizer) Set() *Set { return a.set }

// Rule is why a Decision came out as it did (Kafka's MatchingRule,
// printed in its audit log).
type Rule uint8

const (
	// RuleNoACLFound: no binding's pattern matches the resource, and
	// allow.everyone.if.no.acl.found decided (Kafka's DefaultRule).
	RuleNoACLFound Rule = iota
	// RuleNoMatch: bindings exist for the resource but none is for this
	// principal, host and operation: denied, whatever
	// allow.everyone.if.no.acl.found says.
	RuleNoMatch
	// RuleAllow: an ALLOW binding matched and no DENY did.
	RuleAllow
	// RuleDeny: a DENY binding matched.
	RuleDeny
	// RuleSuperUser: the principal is a super user.
	RuleSuperUser
)

func (r Rule) String() string {
	switch r {
	case RuleNoACLFound:
		return "NoAclFound"
	case RuleNoMatch:
		return "NoMatchingAcl"
	case RuleAllow:
		return "MatchingAllowAcl"
	case RuleDeny:
		return "MatchingDenyAcl"
	case RuleSuperUser:
		return "SuperUser"
	}
	return fmt.Sprintf("Rule(%d)", r)
}

// Decision is Decide's answer.
type Decision struct {
	Allowed bool
	Rule    Rule
	// Binding is the binding that decided, for RuleAllow and RuleDeny
	// (one of them, when several match).
	Binding Binding
}

// Authorize reports whether principal, connected from host, may do op on
// the resource of type resourceType called name. See Decide.
func (a *Authorizer) Authorize(principal string, host netip.Addr, op Operation, resourceType ResourceType, name string) bool {
	rule, _, _ := a.decide(principal, host, op, resourceType, name)
	return rule == RuleAllow || rule == RuleSuperUser || (rule == RuleNoACLFound && a.allowIfNoACL)
}

// Decide is Authorize with its reason, for audit logs. The rules, from
// StandardAuthorizerData.authorize, findAclRule and findResult:
//
//   - A super user is allowed everything, before any binding is looked at.
//   - The bindings that apply to the resource are those of its type with a
//     LITERAL pattern of exactly its name, the LITERAL pattern "*", or a
//     PREFIXED pattern its name starts with.
//   - Of those, a binding matches the request when its principal is the
//     caller's or "User:*", its host is the caller's address or "*", and
//     its operation matches op:
//     ALL matches every operation, for ALLOW and DENY alike;
//     an ALLOW for READ, WRITE, DELETE or ALTER also allows DESCRIBE;
//     an ALLOW for ALTER_CONFIGS also allows DESCRIBE_CONFIGS;
//     a DENY denies only its own operation (or ALL): a DENY for READ does
//     not deny DESCRIBE, and a DENY for ALTER_CONFIGS does not deny
//     DESCRIBE_CONFIGS.
//   - A matching DENY wins over any number of matching ALLOWs.
//   - With no matching binding: if any binding applies to the resource
//     (of any principal, host, operation or permission), the request is
//     denied; only when none applies does allow.everyone.if.no.acl.found
//     decide. So one ALLOW for alice on a topic denies everyone else
//     that topic even with allow.everyone.if.no.acl.found=true.
//
// host is the client's address; an IPv4-mapped address counts as its
// IPv4 address, and the zero Addr matches only "*" hosts. Kafka compares
// the host as a string with Java's InetAddress.getHostAddress(), which
// writes IPv6 uncompressed ("0:0:0:0:0:0:0:1"), so in Kafka a binding for
// "::1" never matches; Fjord compares addresses, so it does.
//
// principal is the caller's KafkaPrincipal as "Type:Name" (its type
// holds no colon). op and resourceType must be concrete (not ANY or
// UNKNOWN): the protocol layer passes constants, so anything else is a
// bug, and Decide panics.
//
// Kafka also refuses every principal but super users until the broker has
// loaded the metadata log up to the high watermark it saw at startup
// (AuthorizerNotReadyException); that is the node's to enforce, by not
// serving requests with an Authorizer built before then.
func (a *Authorizer) Decide(principal string, host netip.Addr, op Operation, resourceType ResourceType, name string) Decision {
	rule, bk, i := a.decide(principal, host, op, resourceType, name)
	d := Decision{Rule: rule, Allowed: rule == RuleAllow || rule == RuleSuperUser || (rule == RuleNoACLFound && a.allowIfNoACL)}
	if bk != nil {
		d.Binding = Binding{Pattern: bk.pattern, Entry: bk.entries[i].Entry}
	}
	return d
}

// IsSuperUser reports whether principal is one of Config.SuperUsers.
func (a *Authorizer) IsSuperUser(principal string) bool {
	_, ok := a.superUsers[principal]
	return ok
}

// decide returns the rule and, for RuleAllow and RuleDeny, the bucket and
// index of the deciding entry.
func (a *Authorizer) decide(principal string, host netip.Addr, op Operation, rt ResourceType, name string) (Rule, *bucket, int) {
	if !concreteResourceType(rt) || !concreteOperation(op) {
		panic(fmt.Sprintf("acl: authorize %s on %s %q: operation and resource type must be concrete", op, rt, name))
	}
	if _, ok := a.superUsers[principal]; ok {
		return RuleSuperUser, nil, 0
	}
	t := a.set.typeIndex(rt)
	if t == nil {
		return RuleNoACLFound, nil, 0
	}
	s := search{principal: principal, host: host.Unmap(), op: op}
	// The order does not change the answer (any DENY wins); it only
	// lets a DENY on the exact name stop the search soonest.
	if bk := t.literal[name]; bk != nil && s.scan(bk) {
		return RuleDeny, s.bucket, s.index
	}
	for c := t.prefixesOf(name); ; {
		bk := c.next()
		if bk == nil {
			break
		}
		if s.scan(bk) {
			return RuleDeny, s.bucket, s.index
		}
	}
	if name != WildcardResource {
		if bk := t.literal[WildcardResource]; bk != nil && s.scan(bk) {
			return RuleDeny, s.bucket, s.index
		}
	}
	switch {
	case s.bucket != nil:
		return RuleAllow, s.bucket, s.index
	case s.found:
		return RuleNoMatch, nil, 0
	}
	return RuleNoACLFound, nil, 0
}

// search is one Decide's progress over the buckets that apply.
type search struct {
	principal string
	host      netip.Addr
	op        Operation
	// found: some bucket applied (Kafka's hasResourceAcls).
	found bool
	// bucket/index: the last matching entry. When scan reports a DENY
	// it is that DENY; otherwise, if set, a matching ALLOW.
	bucket *bucket
	index  int
}

// scan applies one bucket, reporting whether it holds a matching DENY.
func (s *search) scan(bk *bucket) bool {
	s.found = true
	if s.scanPrincipal(bk, s.principal) {
		return true
	}
	return s.principal != WildcardPrincipal && s.scanPrincipal(bk, WildcardPrincipal)
}

func (s *search) scanPrincipal(bk *bucket, principal string) bool {
	for i := bk.firstOf(principal); i < len(bk.entries) && bk.entries[i].Principal == principal; i++ {
		e := &bk.entries[i]
		if !e.anyHost && e.addr != s.host {
			continue
		}
		if !operationMatches(e.Operation, e.Permission, s.op) {
			continue
		}
		s.bucket, s.index = bk, i
		if e.Permission == PermissionDeny {
			return true
		}
	}
	return false
}

// operationMatches is Kafka's findResult's operation rule: implication
// (DESCRIBE from READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS from
// ALTER_CONFIGS) holds for ALLOW only, and ALL matches everything.
func operationMatches(bound Operation, perm Permission, op Operation) bool {
	if bound == OperationAll || bound == op {
		return true
	}
	if perm != PermissionAllow {
		return false
	}
	switch op {
	case OperationDescribe:
		return bound == OperationRead || bound == OperationWrite || bound == OperationDelete || bound == OperationAlter
	case OperationDescribeConfigs:
		return bound == OperationAlterConfigs
	}
	return false
}

// hardcodedName is the resource name Kafka's authorizeByResourceType
// first authorizes, literally "hardcode", so that super users (and
// allow.everyone.if.no.acl.found, and bindings that happen to match that
// name) pass before the scan.
const hardcodedName = "hardcode"

// AuthorizeByResourceType reports whether principal may do op on at least
// one resource of resourceType (KIP-679), exactly as Kafka's default
// Authorizer.authorizeByResourceType, which StandardAuthorizer keeps.
// Kafka calls it in one place: InitProducerId without a transactional id,
// when IDEMPOTENT_WRITE on the cluster is denied, asks it for WRITE on
// TOPIC.
//
//  1. If Authorize allows op on a resource called "hardcode", allowed.
//     That covers super users and allow.everyone.if.no.acl.found, and
//     also, as a quirk, bindings matching that name (a PREFIXED "hard",
//     an implied DESCRIBE) that step 2 would not count.
//  2. Otherwise only bindings of resourceType for the principal or
//     "User:*", from the host or "*", for exactly op or ALL (no
//     implication), count:
//     a DENY on LITERAL "*" denies;
//     else an ALLOW on LITERAL "*" allows;
//     else a LITERAL ALLOW allows unless a LITERAL DENY names the same
//     resource or a PREFIXED DENY is a prefix of (or equal to) its name;
//     a PREFIXED ALLOW allows unless a PREFIXED DENY is a prefix of (or
//     equal to) its prefix; a LITERAL DENY does not stop it.
//  3. Otherwise denied.
//
// It scans every binding of resourceType: it runs once per idempotent
// producer's InitProducerId, not per partition.
func (a *Authorizer) AuthorizeByResourceType(principal string, host netip.Addr, op Operation, resourceType ResourceType) bool {
	if !concreteResourceType(resourceType) || !concreteOperation(op) {
		panic(fmt.Sprintf("acl: authorize %s by resource type %s: operation and resource type must be concrete", op, resourceType))
	}
	if a.Authorize(principal, host, op, resourceType, hardcodedName) {
		return true
	}
	t := a.set.typeIndex(resourceType)
	if t == nil {
		return false
	}
	host = host.Unmap()
	counts := func(e *entry) bool {
		return (e.anyHost || e.addr == host) &&
			(e.Principal == principal || e.Principal == WildcardPrincipal) &&
			(e.Operation == op || e.Operation == OperationAll)
	}
	denyLiteral := map[string]bool{}
	denyPrefix := map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	for _, m := range []map[string]*bucket{t.literal, t.prefixed} {
		for _, bk := range m {
			for i := range bk.entries {
				e := &bk.entries[i]
				if !counts(e) {
					continue
				}
				name, literal := bk.pattern.Name, bk.pattern.PatternType == PatternLiteral
				switch {
				case e.Permission == PermissionDeny && literal && name == WildcardResource:
					return false
				case e.Permission == PermissionDeny && literal:
					denyLiteral[name] = true
				case e.Permission == PermissionDeny:
					denyPrefix[name] = true
				case literal && name == WildcardResource:
					wildcardAllow = true
				case literal:
					allowLiteral = append(allowLiteral, name)
				default:
					allowPrefix = append(allowPrefix, name)
				}
			}
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for n := 1; n <= len(name); n++ {
			if denyPrefix[name[:n]] {
				return true
			}
		}
		return false
	}
	for _, name := range allowLiteral {
		if !denyLiteral[name] && !dominated(name) {
			return true
		}
	}
	for _, name := range allowPrefix {
		if !dominated(name) {
			return true
		}
	}
	return false
}

// SupportedOperations lists the operations Kafka reports for a resource
// type in "authorized operations" bit fields (AclEntry.supportedOperations).
func SupportedOperations(rt ResourceType) []Operation {
	switch rt {
	case ResourceTopic:
		return []Operation{OperationRead, OperationWrite, OperationCreate, OperationDescribe, OperationDelete, OperationAlter, OperationDescribeConfigs, OperationAlterConfigs}
	case ResourceGroup:
		return []Operation{OperationRead, OperationDescribe, OperationDelete, OperationDescribeConfigs, OperationAlterConfigs}
	case ResourceCluster:
		return []Operation{OperationCreate, OperationClusterAction, OperationDescribeConfigs, OperationAlterConfigs, OperationIdempotentWrite, OperationAlter, OperationDescribe}
	case ResourceTransactionalID:
		return []Operation{OperationDescribe, OperationWrite}
	case ResourceDelegationToken:
		return []Operation{OperationDescribe}
	case ResourceUser:
		return []Operation{OperationCreateTokens, OperationDescribeTokens}
	}
	return nil
}

// AuthorizedOperations is the bit field Metadata (topic and cluster),
// DescribeGroups and DescribeCluster return when asked to include
// authorized operations: bit op set for each supported operation Authorize
// allows (Kafka's AuthHelper.authorizedOperations and Utils.to32BitField).
func (a *Authorizer) AuthorizedOperations(principal string, host netip.Addr, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}
