package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

// fjord acl: Kafka's ACLs (issue 20, slice 3) over CreateAcls,
// DescribeAcls and DeleteAcls, with kafka-acls.sh's option names
// (--allow-principal, --operation, --topic, --resource-pattern-type,
// --producer, --consumer, ...), so that an operator's habits and scripts
// carry over; `acl add` is its --add, `acl list` its --list, `acl delete`
// its --remove.
//
// The flags become internal/acl's Bindings (add) and Filters (list,
// delete), checked here with the node's own rules (acl.Validate,
// acl.ValidateFilter) and kafka-acls.sh's (an operation the resource type
// does not support, --consumer without --group, ...) before anything is
// sent; the requests are kmsg's, built from them field for field (the acl
// enums are kmsg's). kadm's ACLBuilder was weighed and set aside: it applies
// one set of operations to every resource, so --producer (WRITE, DESCRIBE
// and CREATE on topics, WRITE and DESCRIBE on transactional ids) takes a
// builder per resource type; it has no USER resource; and a filter for a
// principal's bindings of either permission is two filters in it.
//
// Where delete departs from kafka-acls.sh --remove, on purpose: without
// --operation it deletes every operation of the principals given (Kafka's
// tool defaults --operation to All and so deletes only ALL bindings, while
// its --remove without a principal deletes every operation: the two
// readings of "no --operation" disagree there, and here they do not);
// without --allow-host it deletes the principal's bindings from every
// host, not only from "*"; --allow-host without --allow-principal is
// refused (Kafka's tool then deletes every ACL on the resource); and a
// delete that matches nothing fails, as user and quota deletes do, so a
// mistyped name does not pass for done.

// One add makes at most controlplane.MaxACLCreations bindings, one delete
// sends at most controlplane.MaxACLFilters filters (the node's bounds on
// one request, refused here in the flags' words), and one list sends at
// most as many DescribeAcls: far above any real grant (a consumer of 20
// topics for 10 principals is 410), they keep a shell loop gone wrong
// from multiplying principals, hosts, resources and operations into
// millions.

func newACLCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and delete ACLs (Kafka's kafka-acls.sh)",
		Long: `ACLs (Kafka's): who may do which operation on which resource, kept in the
metadata log so every node enforces the same. An ACL binds a resource
pattern (a topic, group, transactional id, the cluster, ...: its name, or
with --resource-pattern-type prefixed every name that starts with it) to a
principal (User:alice), a host ("*" or an IP address), an operation (Read,
Write, ..., All) and a permission (allow or deny; a deny wins).

The options are kafka-acls.sh's: add is its --add, list its --list, delete
its --remove.

An ACL on a resource takes it from everyone the resource's ACLs do not
allow, allow.everyone.if.no.acl.found notwithstanding (Kafka's rule). So
the first ACL on the cluster (--cluster, --idempotent) takes Alter and
Describe on it, and with them fjord acl itself, from every principal but
the super users (fjord serve --super-users) and those it allows.

  fjord acl add --allow-principal User:alice --operation Read --operation Describe --topic orders
  fjord acl add --allow-principal User:etl --producer --topic logs- --resource-pattern-type prefixed
  fjord acl add --allow-principal User:bob --consumer --topic orders --group billing
  fjord acl list --topic orders
  fjord acl delete --allow-principal User:alice --topic orders --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newACLAddCommand(&o),
		newACLListCommand(&o),
		newACLDeleteCommand(&o),
	)
	return cmd
}

const aclResourcesHelp = `Resources (each repeatable): --topic NAME, --group NAME, --transactional-id
NAME, --cluster, --delegation-token ID, --user-principal PRINCIPAL (the
user resource of CreateTokens and DescribeTokens). A name "*" with the
literal pattern type is every resource of its type.`

const aclOperationsHelp = `Operations (Kafka's names, any case): Read, Write, Create, Delete, Alter,
Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite,
CreateTokens, DescribeTokens, All. An operation the resource type does not
support (Write on a group, Read on the cluster) is refused, as
kafka-acls.sh refuses it.`

func newACLAddCommand(o *clientOptions) *cobra.Command {
	var (
		e        aclEntryFlags
		r        aclResourceFlags
		bindings []acl.Binding
	)
	cmd := &cobra.Command{
		Use:   "add (--allow-principal P | --deny-principal P)... RESOURCES [--operation OP]... [--producer | --consumer]",
		Short: "Add ACLs (kafka-acls.sh --add)",
		Long: `Add an ACL for every combination of principal, host, operation and
resource given (kafka-acls.sh --add). An ACL that already exists is
answered as added, as Kafka answers it.

--allow-principal and --deny-principal (repeatable) say who: Type:Name,
e.g. User:alice, or User:* for every principal. --allow-host and
--deny-host (repeatable; default "*", every host) say from which client
addresses. --operation (repeatable) defaults to All, as in kafka-acls.sh.

The conveniences, instead of --operation:
  --producer    Write, Describe and Create on the topics (needs --topic);
                Write and Describe on the transactional ids; with
                --idempotent, IdempotentWrite on the cluster
  --consumer    Read and Describe on the topics, Read on the groups (needs
                --topic and --group)

` + aclResourcesHelp + `

` + aclOperationsHelp + `

--resource-pattern-type is literal (the default: the name exactly) or
prefixed (every name that starts with it). The cluster's pattern is
always the literal kafka-cluster.`,
		Args: cobra.NoArgs,
		// Bad input fails before the command connects.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			bindings, err = aclAddBindings(&e, &r)
			return err
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, _ *kadm.Client, _ []string) error {
			return createACLs(ctx, cmd, cl, bindings)
		}),
	}
	f := cmd.Flags()
	e.add(f, true)
	r.add(f, acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed)
	return cmd
}

func newACLListCommand(o *clientOptions) *cobra.Command {
	var (
		r          aclResourceFlags
		principals []string
		output     string
		filters    []acl.Filter
	)
	cmd := &cobra.Command{
		Use:   "list [RESOURCES] [--principal P]...",
		Short: "List ACLs (kafka-acls.sh --list)",
		Long: `List the ACLs of the resources given, or every ACL (kafka-acls.sh --list).

--resource-pattern-type chooses which patterns of the named resources:
  any       (the default) the literal and the prefixed pattern of exactly
            the names given
  match     every pattern that applies to a resource of that name: its
            literal pattern, the literal "*", and each prefixed pattern
            the name starts with
  literal, prefixed   only patterns of that type
--principal (repeatable) lists only the ACLs of those principals.

` + aclResourcesHelp + `

The text is kafka-acls.sh's: per resource pattern

  Current ACLs for resource ` + "`ResourcePattern(resourceType=TOPIC, name=logs-, patternType=PREFIXED)`" + `:
  	(principal=User:etl, host=*, operation=WRITE, permissionType=ALLOW)

with a name, principal or host that could be misread (space, quote,
parenthesis, control character) in double quotes. -o json is one document:

  {"acls": [{"resource_type": "TOPIC", "resource_name": "logs-",
             "pattern_type": "PREFIXED", "principal": "User:etl",
             "host": "*", "operation": "WRITE", "permission_type": "ALLOW"}]}

sorted by resource type, name and pattern type, then principal, host,
operation and permission; "acls" is [] when there is none.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			filters, err = aclListFilters(&r, principals)
			return err
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, _ *kadm.Client, _ []string) error {
			found, err := describeACLs(ctx, cl, filters)
			if err != nil {
				return fmt.Errorf("listing ACLs: %w", err)
			}
			return printResult(cmd, output, newACLReport(found))
		}),
	}
	f := cmd.Flags()
	r.add(f, acl.PatternAny, acl.PatternAny, acl.PatternMatch, acl.PatternLiteral, acl.PatternPrefixed)
	f.Var(&aclPrincipalsFlag{p: &principals}, "principal", "list only the ACLs of this principal, Type:Name (repeatable)")
	addOutputFlag(cmd, &output)
	return cmd
}

func newACLDeleteCommand(o *clientOptions) *cobra.Command {
	var (
		e       aclEntryFlags
		r       aclResourceFlags
		force   bool
		filters []acl.Filter
	)
	cmd := &cobra.Command{
		Use:   "delete RESOURCES [(--allow-principal P | --deny-principal P)...] [--operation OP]... [--force]",
		Short: "Delete ACLs (kafka-acls.sh --remove)",
		Long: `Delete the ACLs the options select (kafka-acls.sh --remove): they are the
options of add, read as filters.

  no principal      every principal's ACLs on the resources, allow and deny
  --allow-principal that principal's allow ACLs (--deny-principal: deny)
  --allow-host      only those from that host (default: from any host)
  no --operation    every operation (--producer, --consumer: their
                    operations)

A resource is required: delete never deletes every ACL at once.
--resource-pattern-type is literal by default; prefixed, any (both
patterns of exactly the name) and match (every pattern that applies to
the name: the literal "*" and the prefixes it starts with too; use it with
care) select wider.

The ACLs that match are printed and must be confirmed with y on stdin;
--force deletes without asking (as kafka-acls.sh --force). What was deleted
is printed. Nothing matching is an error: a mistyped name must not pass for
done.

` + aclResourcesHelp + `

` + aclOperationsHelp,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			filters, err = aclDeleteFilters(&e, &r)
			return err
		},
		// Not clientRun: the confirmation waits for a person, which the
		// requests' timeout must not cover.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			connectCtx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			cl, err := o.connect(connectCtx)
			if err != nil {
				return err
			}
			defer cl.Close()
			return deleteACLs(cmd, cl, filters, force)
		},
	}
	f := cmd.Flags()
	e.add(f, false)
	r.add(f, acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed, acl.PatternAny, acl.PatternMatch)
	addBoolFlag(f, &force, "force", false, "delete without asking for confirmation")
	return cmd
}

// ---- Flags ----

// aclEntryFlags are add's and delete's: who, from where, what.
type aclEntryFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []acl.Operation
	producer, consumer, idempotent  bool
}

func (e *aclEntryFlags) add(f *pflag.FlagSet, adding bool) {
	verb := "deletes the ACLs of"
	if adding {
		verb = "allows"
	}
	f.Var(&aclPrincipalsFlag{p: &e.allowPrincipals}, "allow-principal", "principal Type:Name (e.g. User:alice, User:* for every one) it "+verb+" (repeatable)")
	if adding {
		verb = "denies"
	} else {
		verb = "deletes the deny ACLs of"
	}
	f.Var(&aclPrincipalsFlag{p: &e.denyPrincipals}, "deny-principal", "principal Type:Name it "+verb+" (repeatable)")
	hostDefault := `default "*": every host`
	if !adding {
		hostDefault = "default: any host"
	}
	f.Var(&aclHostsFlag{p: &e.allowHosts}, "allow-host", `client address of --allow-principal: "*" or an IP address (repeatable; `+hostDefault+")")
	f.Var(&aclHostsFlag{p: &e.denyHosts}, "deny-host", `client address of --deny-principal: "*" or an IP address (repeatable; `+hostDefault+")")
	opDefault := "default: All"
	if !adding {
		opDefault = "default: every operation"
	}
	f.Var(&aclOperationsFlag{p: &e.operations}, "operation", "operation, Kafka's name in any case: Read, Write, Describe, ..., All (repeatable; "+opDefault+")")
	addBoolFlag(f, &e.producer, "producer", false, "the producer's operations: Write, Describe, Create on the topics; Write, Describe on the transactional ids")
	addBoolFlag(f, &e.idempotent, "idempotent", false, "with --producer: IdempotentWrite on the cluster too")
	addBoolFlag(f, &e.consumer, "consumer", false, "the consumer's operations: Read, Describe on the topics; Read on the groups")
}

// aclResourceFlags are the resource options of all three commands.
type aclResourceFlags struct {
	topics, groups, transactionalIDs []string
	delegationTokens, users          []string
	cluster                          bool
	patternType                      acl.PatternType
}

func (r *aclResourceFlags) add(f *pflag.FlagSet, def acl.PatternType, allowed ...acl.PatternType) {
	f.Var(&aclNamesFlag{p: &r.topics}, "topic", "topic name, or prefix (repeatable)")
	f.Var(&aclNamesFlag{p: &r.groups}, "group", "consumer group id, or prefix (repeatable)")
	f.Var(&aclNamesFlag{p: &r.transactionalIDs}, "transactional-id", "transactional id, or prefix (repeatable)")
	f.Var(&aclNamesFlag{p: &r.delegationTokens}, "delegation-token", "delegation token id (repeatable)")
	f.Var(&aclPrincipalsFlag{p: &r.users}, "user-principal", "user resource, Type:Name, of CreateTokens and DescribeTokens (repeatable)")
	addBoolFlag(f, &r.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	var names []string
	for _, pt := range allowed {
		names = append(names, strings.ToLower(pt.String()))
	}
	f.Var(newACLPatternFlag(&r.patternType, def, allowed...), "resource-pattern-type",
		"how the resource names match: "+strings.Join(names, ", "))
}

// patterns are the resource patterns given, in flag order by type. The
// cluster is always the literal kafka-cluster (kafka-acls.sh's
// ClusterResourceFilter), whatever --resource-pattern-type says.
func (r *aclResourceFlags) patterns() []acl.ResourcePattern {
	var out []acl.ResourcePattern
	for _, g := range []struct {
		t     acl.ResourceType
		names []string
	}{
		{acl.ResourceTopic, r.topics},
		{acl.ResourceGroup, r.groups},
		{acl.ResourceTransactionalID, r.transactionalIDs},
		{acl.ResourceDelegationToken, r.delegationTokens},
		{acl.ResourceUser, r.users},
	} {
		for _, n := range g.names {
			out = append(out, acl.ResourcePattern{Type: g.t, Name: n, PatternType: r.patternType})
		}
	}
	if r.cluster {
		out = append(out, acl.ResourcePattern{Type: acl.ResourceCluster, Name: acl.ClusterName, PatternType: acl.PatternLiteral})
	}
	return out
}

func (r *aclResourceFlags) none() bool { return len(r.patterns()) == 0 }

// aclNamesFlag is a repeatable resource name: not empty, UTF-8, within
// the node's bound. Any other byte is allowed, as the node allows it (a
// group id may be anything); output quotes what could be misread.
type aclNamesFlag struct{ p *[]string }

func (f *aclNamesFlag) String() string { return strings.Join(*f.p, ",") }
func (f *aclNamesFlag) Type() string   { return "name" }

func (f *aclNamesFlag) Set(s string) error {
	switch {
	case s == "":
		return errors.New("the name is empty")
	case len(s) > acl.MaxNameBytes:
		return fmt.Errorf("a name of %d bytes (at most %d)", len(s), acl.MaxNameBytes)
	case !utf8.ValidString(s):
		return errors.New("the name is not valid UTF-8")
	}
	*f.p = append(*f.p, s)
	return nil
}

// aclPrincipalsFlag is a repeatable principal, Type:Name.
type aclPrincipalsFlag struct{ p *[]string }

func (f *aclPrincipalsFlag) String() string { return strings.Join(*f.p, ",") }
func (f *aclPrincipalsFlag) Type() string   { return "Type:Name" }

func (f *aclPrincipalsFlag) Set(s string) error {
	if err := checkACLPrincipal(s); err != nil {
		return err
	}
	*f.p = append(*f.p, s)
	return nil
}

// checkACLPrincipal applies the node's rule (acl.Validate): Type:Name with
// both parts, split at the first colon (User:CN=a:b is user CN=a:b).
func checkACLPrincipal(s string) error {
	switch typ, name, ok := acl.ParsePrincipal(s); {
	case len(s) > acl.MaxPrincipalBytes:
		return fmt.Errorf("a principal of %d bytes (at most %d)", len(s), acl.MaxPrincipalBytes)
	case !utf8.ValidString(s):
		return errors.New("the principal is not valid UTF-8")
	case !ok || typ == "" || name == "":
		return errors.New("want Type:Name, e.g. User:alice (User:* for every principal)")
	}
	return nil
}

// aclHostsFlag is a repeatable host: "*" or an IP address. Kafka's tool
// takes a host name too, which its broker stores and never matches (it
// compares client addresses); the node refuses it, and so does this.
type aclHostsFlag struct{ p *[]string }

func (f *aclHostsFlag) String() string { return strings.Join(*f.p, ",") }
func (f *aclHostsFlag) Type() string   { return "host" }

func (f *aclHostsFlag) Set(s string) error {
	if s != acl.WildcardHost {
		if _, err := netip.ParseAddr(s); err != nil || len(s) > acl.MaxHostBytes {
			return errors.New(`allowed: "*" or an IP address (ACLs match client addresses, not host names)`)
		}
	}
	*f.p = append(*f.p, s)
	return nil
}

// aclOperations are the operations by Kafka's names (AclOperation's, as
// kafka-acls.sh takes them), in its help's order.
var aclOperations = []struct {
	name string
	op   acl.Operation
}{
	{"Read", acl.OperationRead},
	{"Write", acl.OperationWrite},
	{"Create", acl.OperationCreate},
	{"Delete", acl.OperationDelete},
	{"Alter", acl.OperationAlter},
	{"Describe", acl.OperationDescribe},
	{"ClusterAction", acl.OperationClusterAction},
	{"DescribeConfigs", acl.OperationDescribeConfigs},
	{"AlterConfigs", acl.OperationAlterConfigs},
	{"IdempotentWrite", acl.OperationIdempotentWrite},
	{"CreateTokens", acl.OperationCreateTokens},
	{"DescribeTokens", acl.OperationDescribeTokens},
	{"All", acl.OperationAll},
}

// parseACLOperation reads an operation in any case, with or without
// underscores (Read, READ, DescribeConfigs, DESCRIBE_CONFIGS). Any is not
// one: it is the filter of "no --operation" in delete.
func parseACLOperation(s string) (acl.Operation, bool) {
	key := strings.ReplaceAll(s, "_", "")
	for _, o := range aclOperations {
		if strings.EqualFold(key, o.name) {
			return o.op, true
		}
	}
	return acl.OperationUnknown, false
}

// aclOperationName is op's Kafka name (Write, ClusterAction).
func aclOperationName(op acl.Operation) string {
	for _, o := range aclOperations {
		if o.op == op {
			return o.name
		}
	}
	return op.String()
}

// aclOperationsFlag is a repeatable --operation.
type aclOperationsFlag struct{ p *[]acl.Operation }

func (f *aclOperationsFlag) Type() string { return "operation" }

func (f *aclOperationsFlag) String() string {
	var names []string
	for _, op := range *f.p {
		names = append(names, aclOperationName(op))
	}
	return strings.Join(names, ",")
}

func (f *aclOperationsFlag) Set(s string) error {
	op, ok := parseACLOperation(strings.TrimSpace(s))
	if !ok {
		var names []string
		for _, o := range aclOperations {
			names = append(names, o.name)
		}
		return fmt.Errorf("allowed: %s (any case)", strings.Join(names, ", "))
	}
	if !slices.Contains(*f.p, op) {
		*f.p = append(*f.p, op)
	}
	return nil
}

// aclPatternFlag is --resource-pattern-type, any case (Kafka's
// PatternType.fromString).
type aclPatternFlag struct {
	p       *acl.PatternType
	allowed []acl.PatternType
}

func newACLPatternFlag(p *acl.PatternType, def acl.PatternType, allowed ...acl.PatternType) *aclPatternFlag {
	*p = def
	return &aclPatternFlag{p: p, allowed: allowed}
}

func (f *aclPatternFlag) String() string { return strings.ToLower(f.p.String()) }
func (f *aclPatternFlag) Type() string   { return "type" }

func (f *aclPatternFlag) Set(s string) error {
	var names []string
	for _, pt := range f.allowed {
		if strings.EqualFold(strings.TrimSpace(s), pt.String()) {
			*f.p = pt
			return nil
		}
		names = append(names, strings.ToLower(pt.String()))
	}
	return fmt.Errorf("allowed: %s", strings.Join(names, ", "))
}

// ---- From flags to bindings and filters (pure) ----

// aclGrant is one resource pattern with the operations the flags give on
// it.
type aclGrant struct {
	pattern acl.ResourcePattern
	ops     []acl.Operation
}

// aclGrants turns the resource and operation flags into what applies to
// each resource: --producer's and --consumer's operations per resource
// type, or --operation on every resource. defaultOp is what no
// --operation means (All for add, Any for delete). It refuses what
// kafka-acls.sh refuses, and a few combinations its tool silently ignores
// (--operation, --group or --cluster beside --producer), which would not
// do what they say.
func aclGrants(e *aclEntryFlags, r *aclResourceFlags, defaultOp acl.Operation) ([]aclGrant, error) {
	if r.none() {
		return nil, errors.New("give a resource: --topic, --group, --transactional-id, --cluster, --delegation-token or --user-principal")
	}
	if e.idempotent && !e.producer {
		return nil, errors.New("--idempotent goes with --producer")
	}
	if !e.producer && !e.consumer {
		ops := e.operations
		if len(ops) == 0 {
			ops = []acl.Operation{defaultOp}
		}
		var grants []aclGrant
		for _, p := range r.patterns() {
			if err := checkACLOperations(p.Type, ops); err != nil {
				return nil, err
			}
			grants = append(grants, aclGrant{pattern: p, ops: ops})
		}
		return grants, nil
	}

	switch {
	case len(e.operations) > 0:
		return nil, errors.New("--operation does not go with --producer or --consumer: they choose the operations")
	case len(r.delegationTokens) > 0 || len(r.users) > 0:
		return nil, errors.New("--delegation-token and --user-principal do not go with --producer or --consumer")
	case r.cluster:
		return nil, errors.New("--cluster does not go with --producer or --consumer (--producer --idempotent grants IdempotentWrite on the cluster)")
	case e.consumer && (len(r.topics) == 0 || len(r.groups) == 0):
		return nil, errors.New("--consumer needs a --topic and a --group")
	case e.consumer && !e.producer && len(r.transactionalIDs) > 0:
		return nil, errors.New("--transactional-id goes with --producer, not --consumer alone")
	case e.producer && len(r.topics) == 0:
		return nil, errors.New("--producer needs a --topic")
	case e.producer && !e.consumer && len(r.groups) > 0:
		return nil, errors.New("--group goes with --consumer: --producer grants nothing on groups")
	}
	var topicOps []acl.Operation
	if e.producer {
		topicOps = append(topicOps, acl.OperationWrite, acl.OperationDescribe, acl.OperationCreate)
	}
	if e.consumer {
		topicOps = append(topicOps, acl.OperationRead)
		if !e.producer {
			topicOps = append(topicOps, acl.OperationDescribe)
		}
	}
	var grants []aclGrant
	for _, p := range r.patterns() {
		switch p.Type {
		case acl.ResourceTopic:
			grants = append(grants, aclGrant{p, topicOps})
		case acl.ResourceGroup:
			grants = append(grants, aclGrant{p, []acl.Operation{acl.OperationRead}})
		case acl.ResourceTransactionalID:
			grants = append(grants, aclGrant{p, []acl.Operation{acl.OperationWrite, acl.OperationDescribe}})
		}
	}
	if e.idempotent {
		cluster := acl.ResourcePattern{Type: acl.ResourceCluster, Name: acl.ClusterName, PatternType: acl.PatternLiteral}
		grants = append(grants, aclGrant{cluster, []acl.Operation{acl.OperationIdempotentWrite}})
	}
	return grants, nil
}

// checkACLOperations refuses an operation the resource type does not
// support (acl.SupportedOperations, and All), as kafka-acls.sh does: the
// node would store it, and it would never be checked.
func checkACLOperations(rt acl.ResourceType, ops []acl.Operation) error {
	supported := append(acl.SupportedOperations(rt), acl.OperationAll)
	for _, op := range ops {
		if op == acl.OperationAny || slices.Contains(supported, op) {
			continue
		}
		var names []string
		for _, o := range supported {
			names = append(names, aclOperationName(o))
		}
		noun := aclResourceNoun(rt)
		return fmt.Errorf("--operation %s does not apply to a %s (allowed on a %s: %s)", aclOperationName(op), noun, noun, strings.Join(names, ", "))
	}
	return nil
}

// aclResourceNoun names a resource type in messages.
func aclResourceNoun(rt acl.ResourceType) string {
	return strings.ReplaceAll(strings.ToLower(rt.String()), "_", " ")
}

// aclAddBindings is every binding add makes: for each resource, each
// operation, and each allowed principal and host (ALLOW) and denied
// principal and host (DENY), without duplicates, each one the node would
// accept.
func aclAddBindings(e *aclEntryFlags, r *aclResourceFlags) ([]acl.Binding, error) {
	if err := checkACLPrincipalFlags(e); err != nil {
		return nil, err
	}
	if len(e.allowPrincipals)+len(e.denyPrincipals) == 0 {
		return nil, errors.New("give --allow-principal or --deny-principal (Type:Name, e.g. User:alice)")
	}
	grants, err := aclGrants(e, r, acl.OperationAll)
	if err != nil {
		return nil, err
	}
	var out []acl.Binding
	seen := map[acl.Binding]bool{}
	for _, g := range grants {
		for _, side := range aclSides(e) {
			hosts := side.hosts
			if len(hosts) == 0 {
				hosts = []string{acl.WildcardHost}
			}
			for _, op := range g.ops {
				for _, p := range side.principals {
					for _, h := range hosts {
						b := acl.Binding{Pattern: g.pattern, Entry: acl.Entry{Principal: p, Host: h, Operation: op, Permission: side.permission}}
						if seen[b] {
							continue
						}
						if err := acl.Validate(b); err != nil {
							return nil, err
						}
						if len(out) == controlplane.MaxACLCreations {
							return nil, fmt.Errorf("these options make more than %d ACLs (principals x hosts x operations x resources): add them in parts", controlplane.MaxACLCreations)
						}
						seen[b] = true
						out = append(out, b)
					}
				}
			}
		}
	}
	return out, nil
}

// aclSide is the allow or the deny half of the entry flags.
type aclSide struct {
	principals, hosts []string
	permission        acl.Permission
}

func aclSides(e *aclEntryFlags) []aclSide {
	return []aclSide{
		{e.allowPrincipals, e.allowHosts, acl.PermissionAllow},
		{e.denyPrincipals, e.denyHosts, acl.PermissionDeny},
	}
}

// checkACLPrincipalFlags refuses hosts without their principals: add
// would make nothing of them, and Kafka's --remove reads them as "every
// ACL on the resource".
func checkACLPrincipalFlags(e *aclEntryFlags) error {
	switch {
	case len(e.allowHosts) > 0 && len(e.allowPrincipals) == 0:
		return errors.New("--allow-host needs --allow-principal")
	case len(e.denyHosts) > 0 && len(e.denyPrincipals) == 0:
		return errors.New("--deny-host needs --deny-principal")
	}
	return nil
}

// aclDeleteFilters are delete's filters: for each resource and
// operation, one per principal and host given (nil host: any), or with
// no principal one for every principal, host and permission.
func aclDeleteFilters(e *aclEntryFlags, r *aclResourceFlags) ([]acl.Filter, error) {
	if err := checkACLPrincipalFlags(e); err != nil {
		return nil, err
	}
	grants, err := aclGrants(e, r, acl.OperationAny)
	if err != nil {
		return nil, err
	}
	var out []acl.Filter
	add := func(f acl.Filter) error {
		if len(out) == controlplane.MaxACLFilters {
			return fmt.Errorf("these options make more than %d filters (principals x hosts x operations x resources): delete in parts", controlplane.MaxACLFilters)
		}
		out = append(out, f)
		return nil
	}
	anyPrincipal := len(e.allowPrincipals)+len(e.denyPrincipals) == 0
	for _, g := range grants {
		for _, op := range g.ops {
			base := acl.Filter{ResourceType: g.pattern.Type, Name: kmsg.StringPtr(g.pattern.Name), PatternType: g.pattern.PatternType, Operation: op, Permission: acl.PermissionAny}
			if anyPrincipal {
				if err := add(base); err != nil {
					return nil, err
				}
				continue
			}
			for _, side := range aclSides(e) {
				hosts := []*string{nil}
				if len(side.hosts) > 0 {
					hosts = hosts[:0]
					for _, h := range side.hosts {
						hosts = append(hosts, kmsg.StringPtr(h))
					}
				}
				for _, p := range side.principals {
					for _, h := range hosts {
						f := base
						f.Principal, f.Host, f.Permission = kmsg.StringPtr(p), h, side.permission
						if err := add(f); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	for _, f := range out {
		if err := acl.ValidateFilter(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// aclListFilters are list's filters: each resource (none: every one)
// for each principal (none: every one).
func aclListFilters(r *aclResourceFlags, principals []string) ([]acl.Filter, error) {
	patterns := r.patterns()
	var resources []acl.Filter
	for _, p := range patterns {
		resources = append(resources, acl.Filter{ResourceType: p.Type, Name: kmsg.StringPtr(p.Name), PatternType: p.PatternType})
	}
	if len(resources) == 0 {
		resources = []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: r.patternType}}
	}
	whos := []*string{nil}
	if len(principals) > 0 {
		whos = whos[:0]
		for _, p := range principals {
			whos = append(whos, kmsg.StringPtr(p))
		}
	}
	if n := len(resources) * len(whos); n > controlplane.MaxACLFilters {
		return nil, fmt.Errorf("these options make %d filters (resources x principals; at most %d): list in parts", n, controlplane.MaxACLFilters)
	}
	var out []acl.Filter
	for _, res := range resources {
		for _, who := range whos {
			f := res
			f.Principal, f.Operation, f.Permission = who, acl.OperationAny, acl.PermissionAny
			if err := acl.ValidateFilter(f); err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// ---- Requests ----

// createACLs sends one CreateAcls with every binding, prints those the
// node created, and fails naming each it refused.
func createACLs(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, bindings []acl.Binding) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("adding ACLs: %w", err)
	}
	if len(resp.Results) != len(bindings) {
		return fmt.Errorf("adding ACLs: the node answered %d results for %d ACLs", len(resp.Results), len(bindings))
	}
	var created []acl.Binding
	var failed []aclFailure
	for i, res := range resp.Results {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			failed = append(failed, aclFailure{bindings[i], aclKafkaError(err, res.ErrorMessage)})
			continue
		}
		created = append(created, bindings[i])
	}
	if err := printACLGroups(cmd.OutOrStdout(), "Adding ACLs for resource", created); err != nil {
		return err
	}
	return aclFailuresError(cmd.ErrOrStderr(), "added", len(bindings), failed)
}

// describeACLs sends one DescribeAcls per filter (the request takes one)
// and returns the union of the bindings they match, sorted.
func describeACLs(ctx context.Context, cl *kgo.Client, filters []acl.Filter) ([]acl.Binding, error) {
	seen := map[acl.Binding]bool{}
	var out []acl.Binding
	for _, f := range filters {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.Name, f.PatternType
		req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, aclKafkaError(err, resp.ErrorMessage)
		}
		for _, res := range resp.Resources {
			for _, a := range res.ACLs {
				b := acl.Binding{
					Pattern: acl.ResourcePattern{Type: res.ResourceType, Name: res.ResourceName, PatternType: res.ResourcePatternType},
					Entry:   acl.Entry{Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType},
				}
				if !seen[b] {
					seen[b] = true
					out = append(out, b)
				}
			}
		}
	}
	slices.SortFunc(out, cmpACLBinding)
	return out, nil
}

// deleteACLs shows what the filters match and asks (unless force), then
// sends one DeleteAcls with every filter and prints what the node
// deleted. The preview is what matched a moment before: what the node
// answers is what was deleted, and that is printed.
func deleteACLs(cmd *cobra.Command, cl *kgo.Client, filters []acl.Filter, force bool) error {
	if !force {
		ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
		matched, err := describeACLs(ctx, cl, filters)
		cancel()
		if err != nil {
			return fmt.Errorf("finding the ACLs to delete: %w", err)
		}
		if len(matched) == 0 {
			return errors.New("no ACL matches; nothing deleted")
		}
		if err := printACLGroups(cmd.OutOrStdout(), "ACLs to delete for resource", matched); err != nil {
			return err
		}
		yes, err := confirm(cmd, fmt.Sprintf("Delete %s? (y/n) ", aclCount(len(matched))))
		if err != nil {
			return err
		}
		if !yes {
			return errors.New("not confirmed; nothing deleted (--force deletes without asking)")
		}
	}

	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range filters {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName, d.ResourcePatternType = f.ResourceType, f.Name, f.PatternType
		d.Principal, d.Host, d.Operation, d.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		req.Filters = append(req.Filters, d)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("deleting ACLs: %w", err)
	}
	if len(resp.Results) != len(filters) {
		return fmt.Errorf("deleting ACLs: the node answered %d results for %d filters", len(resp.Results), len(filters))
	}
	seen := map[acl.Binding]bool{}
	var deleted []acl.Binding
	var failed []aclFailure
	var filterErrs []error
	for _, res := range resp.Results {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			filterErrs = append(filterErrs, aclKafkaError(err, res.ErrorMessage))
			continue
		}
		for _, m := range res.MatchingACLs {
			b := acl.Binding{
				Pattern: acl.ResourcePattern{Type: m.ResourceType, Name: m.ResourceName, PatternType: m.ResourcePatternType},
				Entry:   acl.Entry{Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType},
			}
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
				failed = append(failed, aclFailure{b, aclKafkaError(err, m.ErrorMessage)})
				continue
			}
			if !seen[b] {
				seen[b] = true
				deleted = append(deleted, b)
			}
		}
	}
	slices.SortFunc(deleted, cmpACLBinding)
	if err := printACLGroups(cmd.OutOrStdout(), "Deleted ACLs for resource", deleted); err != nil {
		return err
	}
	if len(filterErrs) > 0 {
		// A filter's error is the same for each (authorization, security
		// disabled): one says it.
		return fmt.Errorf("deleting ACLs: %d of %d filters failed: %w", len(filterErrs), len(filters), filterErrs[0])
	}
	if len(failed) > 0 {
		return aclFailuresError(cmd.ErrOrStderr(), "deleted", len(deleted)+len(failed), failed)
	}
	if len(deleted) == 0 {
		return errors.New("no ACL matches; nothing deleted")
	}
	return nil
}

// aclFailure is a binding the node refused, and why.
type aclFailure struct {
	binding acl.Binding
	err     error
}

// aclFailuresError is nil without failures. When every one of total
// failed for the same reason (the node has no authorizer, the caller may
// not alter the cluster) it is that reason, in one line; otherwise each
// failed binding is one line on stderr, and the error counts them.
func aclFailuresError(stderr io.Writer, verb string, total int, failed []aclFailure) error {
	if len(failed) == 0 {
		return nil
	}
	same := true
	for _, f := range failed[1:] {
		same = same && f.err.Error() == failed[0].err.Error()
	}
	if len(failed) == total && same {
		return fmt.Errorf("no ACL %s: %w", verb, failed[0].err)
	}
	for _, f := range failed {
		fmt.Fprintf(stderr, "fjord: not %s: %s %s: %v\n", verb, formatACLPattern(f.binding.Pattern), formatACLEntry(f.binding.Entry), f.err)
	}
	return fmt.Errorf("%d of %s not %s", len(failed), aclCount(total), verb)
}

// aclKafkaError is kafkaError, with what to do about SECURITY_DISABLED.
func aclKafkaError(err error, message *string) error {
	if message != nil {
		err = kafkaError(err, *message)
	}
	if errors.Is(err, kerr.SecurityDisabled) {
		return fmt.Errorf("%w (the node runs without an authorizer, so it keeps no ACLs)", err)
	}
	return err
}

func aclCount(n int) string {
	if n == 1 {
		return "1 ACL"
	}
	return fmt.Sprintf("%d ACLs", n)
}

// confirm asks question on stderr and reads one line from stdin: y or
// yes (any case) is yes; anything else, or no line at all, is no.
func confirm(cmd *cobra.Command, question string) (bool, error) {
	fmt.Fprint(cmd.ErrOrStderr(), question)
	// A bounded line: the answer is a word, and stdin may be anything.
	line, err := bufio.NewReaderSize(io.LimitReader(cmd.InOrStdin(), 64), 64).ReadString('\n')
	if !strings.HasSuffix(line, "\n") || !isTerminal(cmd.InOrStdin()) {
		// Nothing echoed a line end (a pipe, a file, /dev/null, an
		// answer cut short): end the question's line.
		fmt.Fprintln(cmd.ErrOrStderr())
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer from stdin: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// isTerminal reports whether r is a terminal, which echoes what is typed
// (a character device: /dev/null is one too, which only the missing line
// end tells apart).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ---- Output ----

// cmpACLBinding orders bindings for output: resource type, name, pattern
// type, then principal, host, operation, permission.
func cmpACLBinding(a, b acl.Binding) int {
	return cmp.Or(
		cmp.Compare(a.Pattern.Type, b.Pattern.Type),
		strings.Compare(a.Pattern.Name, b.Pattern.Name),
		cmp.Compare(a.Pattern.PatternType, b.Pattern.PatternType),
		strings.Compare(a.Entry.Principal, b.Entry.Principal),
		strings.Compare(a.Entry.Host, b.Entry.Host),
		cmp.Compare(a.Entry.Operation, b.Entry.Operation),
		cmp.Compare(a.Entry.Permission, b.Entry.Permission),
	)
}

// printACLGroups prints sorted bindings as kafka-acls.sh does: a header
// per resource pattern, then each entry indented by a tab; a blank line
// between patterns.
func printACLGroups(out io.Writer, header string, bindings []acl.Binding) error {
	w := bufio.NewWriter(out)
	for i, b := range bindings {
		if i == 0 || b.Pattern != bindings[i-1].Pattern {
			if i > 0 {
				w.WriteString("\n")
			}
			fmt.Fprintf(w, "%s `%s`:\n", header, formatACLPattern(b.Pattern))
		}
		fmt.Fprintf(w, "\t%s\n", formatACLEntry(b.Entry))
	}
	return w.Flush()
}

// formatACLPattern is Kafka's ResourcePattern.toString.
func formatACLPattern(p acl.ResourcePattern) string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", p.Type, aclText(p.Name), p.PatternType)
}

// formatACLEntry is Kafka's AccessControlEntry.toString.
func formatACLEntry(e acl.Entry) string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", aclText(e.Principal), aclText(e.Host), e.Operation, e.Permission)
}

// aclText is a name, principal or host as the text output shows it: as
// it is, or quoted (in full) when it could be misread: empty, not UTF-8,
// with a space or a control character (which could fake a line of
// output), or with a quote, backquote or parenthesis (which could fake the
// end of a field). A DN's commas and equals signs stay, as Kafka prints
// them (User:CN=alice,O=example).
func aclText(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, "\"`()") ||
		strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsGraphic(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// aclReport is acl list's result; -o json prints it as is.
type aclReport struct {
	ACLs []aclJSON `json:"acls"`
}

type aclJSON struct {
	ResourceType   string `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    string `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      string `json:"operation"`
	PermissionType string `json:"permission_type"`

	binding acl.Binding
}

func newACLReport(bindings []acl.Binding) aclReport {
	r := aclReport{ACLs: []aclJSON{}}
	for _, b := range bindings {
		r.ACLs = append(r.ACLs, aclJSON{
			ResourceType: b.Pattern.Type.String(), ResourceName: b.Pattern.Name, PatternType: b.Pattern.PatternType.String(),
			Principal: b.Entry.Principal, Host: b.Entry.Host, Operation: b.Entry.Operation.String(), PermissionType: b.Entry.Permission.String(),
			binding: b,
		})
	}
	return r
}

func (r aclReport) printText(out io.Writer) error {
	if len(r.ACLs) == 0 {
		_, err := fmt.Fprintln(out, "No ACLs.")
		return err
	}
	bindings := make([]acl.Binding, len(r.ACLs))
	for i, a := range r.ACLs {
		bindings[i] = a.binding
	}
	return printACLGroups(out, "Current ACLs for resource", bindings)
}
