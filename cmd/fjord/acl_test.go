package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// fjord acl: the flags' rules without a node (parsing, refusals,
// bindings and filters, output), then one test against a node with an
// authorizer.

// parseACLFlags parses args with add's (or delete's) flags.
func parseACLFlags(t *testing.T, adding bool, args ...string) (*aclEntryFlags, *aclResourceFlags) {
	t.Helper()
	var e aclEntryFlags
	var r aclResourceFlags
	f := pflag.NewFlagSet("acl", pflag.ContinueOnError)
	e.add(f, adding)
	if adding {
		r.add(f, acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed)
	} else {
		r.add(f, acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed, acl.PatternAny, acl.PatternMatch)
	}
	if err := f.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return &e, &r
}

func binding(rt acl.ResourceType, name string, pt acl.PatternType, principal, host string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry:   acl.Entry{Principal: principal, Host: host, Operation: op, Permission: perm},
	}
}

// Reference: kafka-acls.sh --add. Every combination of principal, host,
// operation and resource, once; the conveniences' operations per
// resource type.
func TestACLAddBindings(t *testing.T) {
	const (
		lit, pre     = acl.PatternLiteral, acl.PatternPrefixed
		allow, deny  = acl.PermissionAllow, acl.PermissionDeny
		topic, group = acl.ResourceTopic, acl.ResourceGroup
		txn, cluster = acl.ResourceTransactionalID, acl.ResourceCluster
	)
	for _, c := range []struct {
		name string
		args []string
		want []acl.Binding
	}{
		{"operation defaults to All, host to *", []string{"--allow-principal", "User:alice", "--topic", "t"},
			[]acl.Binding{binding(topic, "t", lit, "User:alice", "*", acl.OperationAll, allow)}},
		{"any case, underscores, duplicates collapse", []string{"--allow-principal", "User:alice", "--topic", "t",
			"--operation", "read", "--operation", "DESCRIBE_CONFIGS", "--operation", "Read", "--operation", "describeconfigs"},
			[]acl.Binding{
				binding(topic, "t", lit, "User:alice", "*", acl.OperationRead, allow),
				binding(topic, "t", lit, "User:alice", "*", acl.OperationDescribeConfigs, allow),
			}},
		{"allow and deny with their hosts, prefixed", []string{"--allow-principal", "User:a", "--deny-principal", "User:b",
			"--allow-host", "10.0.0.1", "--allow-host", "::1", "--deny-host", "*", "--operation", "Write",
			"--topic", "logs-", "--resource-pattern-type", "PREFIXED"},
			[]acl.Binding{
				binding(topic, "logs-", pre, "User:a", "10.0.0.1", acl.OperationWrite, allow),
				binding(topic, "logs-", pre, "User:a", "::1", acl.OperationWrite, allow),
				binding(topic, "logs-", pre, "User:b", "*", acl.OperationWrite, deny),
			}},
		{"the cluster is literal kafka-cluster", []string{"--deny-principal", "User:*", "--cluster", "--operation", "Alter", "--resource-pattern-type", "prefixed"},
			[]acl.Binding{binding(cluster, "kafka-cluster", lit, "User:*", "*", acl.OperationAlter, deny)}},
		{"a DN principal, split at the first colon", []string{"--allow-principal", "User:CN=a:b,O=x", "--group", "g", "--operation", "Read"},
			[]acl.Binding{binding(group, "g", lit, "User:CN=a:b,O=x", "*", acl.OperationRead, allow)}},
		{"producer with a transactional id and idempotence", []string{"--allow-principal", "User:p", "--producer", "--idempotent", "--topic", "t", "--transactional-id", "tx"},
			[]acl.Binding{
				binding(topic, "t", lit, "User:p", "*", acl.OperationWrite, allow),
				binding(topic, "t", lit, "User:p", "*", acl.OperationDescribe, allow),
				binding(topic, "t", lit, "User:p", "*", acl.OperationCreate, allow),
				binding(txn, "tx", lit, "User:p", "*", acl.OperationWrite, allow),
				binding(txn, "tx", lit, "User:p", "*", acl.OperationDescribe, allow),
				binding(cluster, "kafka-cluster", lit, "User:p", "*", acl.OperationIdempotentWrite, allow),
			}},
		{"consumer", []string{"--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g"},
			[]acl.Binding{
				binding(topic, "t", lit, "User:c", "*", acl.OperationRead, allow),
				binding(topic, "t", lit, "User:c", "*", acl.OperationDescribe, allow),
				binding(group, "g", lit, "User:c", "*", acl.OperationRead, allow),
			}},
		{"producer and consumer", []string{"--allow-principal", "User:pc", "--producer", "--consumer", "--topic", "t", "--group", "g"},
			[]acl.Binding{
				binding(topic, "t", lit, "User:pc", "*", acl.OperationWrite, allow),
				binding(topic, "t", lit, "User:pc", "*", acl.OperationDescribe, allow),
				binding(topic, "t", lit, "User:pc", "*", acl.OperationCreate, allow),
				binding(topic, "t", lit, "User:pc", "*", acl.OperationRead, allow),
				binding(group, "g", lit, "User:pc", "*", acl.OperationRead, allow),
			}},
	} {
		e, r := parseACLFlags(t, true, c.args...)
		got, err := aclAddBindings(e, r)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: bindings\n%v\nwant\n%v", c.name, got, c.want)
		}
	}
}

// Delete's filters: no principal is every principal, host and
// permission; no host is any host; no operation is every operation.
func TestACLDeleteFilters(t *testing.T) {
	name := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		args []string
		want []acl.Filter
	}{
		{"a resource alone", []string{"--topic", "t"},
			[]acl.Filter{{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternLiteral, Operation: acl.OperationAny, Permission: acl.PermissionAny}}},
		{"an operation for every principal", []string{"--group", "g", "--operation", "Read", "--resource-pattern-type", "match"},
			[]acl.Filter{{ResourceType: acl.ResourceGroup, Name: name("g"), PatternType: acl.PatternMatch, Operation: acl.OperationRead, Permission: acl.PermissionAny}}},
		{"principals, from any host or one", []string{"--topic", "t", "--allow-principal", "User:a", "--deny-principal", "User:b", "--deny-host", "10.1.1.1"},
			[]acl.Filter{
				{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternLiteral, Principal: name("User:a"), Operation: acl.OperationAny, Permission: acl.PermissionAllow},
				{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternLiteral, Principal: name("User:b"), Host: name("10.1.1.1"), Operation: acl.OperationAny, Permission: acl.PermissionDeny},
			}},
		{"consumer's operations", []string{"--consumer", "--topic", "t", "--group", "g", "--resource-pattern-type", "any"},
			[]acl.Filter{
				{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternAny, Operation: acl.OperationRead, Permission: acl.PermissionAny},
				{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternAny, Operation: acl.OperationDescribe, Permission: acl.PermissionAny},
				{ResourceType: acl.ResourceGroup, Name: name("g"), PatternType: acl.PatternAny, Operation: acl.OperationRead, Permission: acl.PermissionAny},
			}},
	} {
		e, r := parseACLFlags(t, false, c.args...)
		got, err := aclDeleteFilters(e, r)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.EqualFunc(got, c.want, filtersEqual) {
			t.Errorf("%s: filters\n%s\nwant\n%s", c.name, filtersText(got), filtersText(c.want))
		}
	}
}

// List's filters: every ACL without options; each resource for each
// principal.
func TestACLListFilters(t *testing.T) {
	name := func(s string) *string { return &s }
	got, err := aclListFilters(&aclResourceFlags{patternType: acl.PatternAny}, nil)
	want := []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}}
	if err != nil || !slices.EqualFunc(got, want, filtersEqual) {
		t.Fatalf("list with no options: %s, %v; want %s", filtersText(got), err, filtersText(want))
	}
	got, err = aclListFilters(&aclResourceFlags{topics: []string{"t"}, cluster: true, patternType: acl.PatternMatch}, []string{"User:a", "User:b"})
	want = []acl.Filter{
		{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternMatch, Principal: name("User:a"), Operation: acl.OperationAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceTopic, Name: name("t"), PatternType: acl.PatternMatch, Principal: name("User:b"), Operation: acl.OperationAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceCluster, Name: name("kafka-cluster"), PatternType: acl.PatternLiteral, Principal: name("User:a"), Operation: acl.OperationAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceCluster, Name: name("kafka-cluster"), PatternType: acl.PatternLiteral, Principal: name("User:b"), Operation: acl.OperationAny, Permission: acl.PermissionAny},
	}
	if err != nil || !slices.EqualFunc(got, want, filtersEqual) {
		t.Fatalf("list of a topic and the cluster for two principals: %s, %v; want %s", filtersText(got), err, filtersText(want))
	}
}

func filtersEqual(a, b acl.Filter) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ResourceType == b.ResourceType && eq(a.Name, b.Name) && a.PatternType == b.PatternType &&
		eq(a.Principal, b.Principal) && eq(a.Host, b.Host) && a.Operation == b.Operation && a.Permission == b.Permission
}

func filtersText(fs []acl.Filter) string {
	s := func(p *string) string {
		if p == nil {
			return "<any>"
		}
		return *p
	}
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s %s %s %s %s %s\n", f.ResourceType, s(f.Name), f.PatternType, s(f.Principal), s(f.Host), f.Operation, f.Permission)
	}
	return b.String()
}

// Bad input: one line each, refused before anything is sent (to a port
// nothing listens on: a check left to the node would fail there as
// "cannot reach").
func TestACLBadInput(t *testing.T) {
	nowhere := closedPort(t)
	long := strings.Repeat("n", acl.MaxNameBytes+1)
	var many []string
	for i := range 40 {
		many = append(many, "--allow-principal", fmt.Sprintf("User:u%d", i))
	}
	for i := range 30 {
		many = append(many, "--topic", fmt.Sprintf("t%d", i))
	}
	manyList := slices.Clone(many)
	for i, a := range manyList {
		if a == "--allow-principal" {
			manyList[i] = "--principal"
		}
	}
	for _, c := range []struct {
		want string
		args []string
	}{
		// Operations.
		{`invalid argument "Frobnicate" for "--operation" flag: allowed: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All (any case)`,
			[]string{"add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Frobnicate"}},
		{`invalid argument "Any" for "--operation" flag: allowed: Read`, []string{"delete", "--topic", "t", "--operation", "Any"}},
		{`invalid argument "" for "--operation" flag`, []string{"add", "--allow-principal", "User:a", "--topic", "t", "--operation", ""}},
		{"--operation Write does not apply to a group (allowed on a group: Read, Describe, Delete, DescribeConfigs, AlterConfigs, All)",
			[]string{"add", "--allow-principal", "User:a", "--group", "g", "--operation", "write"}},
		{"--operation Read does not apply to a cluster (allowed on a cluster: Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe, All)",
			[]string{"add", "--allow-principal", "User:a", "--cluster", "--operation", "Read"}},
		{"--operation Read does not apply to a transactional id", []string{"delete", "--transactional-id", "x", "--operation", "Read"}},
		{"--operation CreateTokens does not apply to a topic", []string{"add", "--allow-principal", "User:a", "--topic", "t", "--operation", "CreateTokens"}},
		// Principals and hosts.
		{"give --allow-principal or --deny-principal (Type:Name, e.g. User:alice)", []string{"add", "--topic", "t", "--operation", "Read"}},
		{`invalid argument "alice" for "--allow-principal" flag: want Type:Name, e.g. User:alice`, []string{"add", "--allow-principal", "alice", "--topic", "t"}},
		{`invalid argument ":alice" for "--deny-principal" flag: want Type:Name`, []string{"add", "--deny-principal", ":alice", "--topic", "t"}},
		{`invalid argument "User:" for "--principal" flag: want Type:Name`, []string{"list", "--principal", "User:"}},
		{`invalid argument "bob" for "--user-principal" flag: want Type:Name`, []string{"list", "--user-principal", "bob"}},
		{"a principal of 4102 bytes (at most 4096)", []string{"add", "--allow-principal", "User:" + strings.Repeat("p", 4097), "--topic", "t"}},
		{"the principal is not valid UTF-8", []string{"add", "--allow-principal", "User:\xff", "--topic", "t"}},
		{`invalid argument "broker1.example.com" for "--allow-host" flag: allowed: "*" or an IP address`, []string{"add", "--allow-principal", "User:a", "--allow-host", "broker1.example.com", "--topic", "t"}},
		{`for "--deny-host" flag: allowed: "*" or an IP address`, []string{"add", "--deny-principal", "User:a", "--deny-host", "10.0.0.1/8", "--topic", "t"}},
		{"--allow-host needs --allow-principal", []string{"add", "--deny-principal", "User:a", "--allow-host", "10.0.0.1", "--topic", "t"}},
		// Kafka's tool would delete every ACL on the topic.
		{"--deny-host needs --deny-principal", []string{"delete", "--deny-host", "10.0.0.1", "--topic", "t", "--force"}},
		// Resources.
		{"give a resource: --topic, --group, --transactional-id, --cluster, --delegation-token or --user-principal", []string{"add", "--allow-principal", "User:a", "--operation", "Read"}},
		{"give a resource", []string{"delete", "--allow-principal", "User:a", "--force"}},
		{`invalid argument "" for "--topic" flag: the name is empty`, []string{"add", "--allow-principal", "User:a", "--topic", ""}},
		{fmt.Sprintf(`invalid argument %q... (4097 bytes) for "--group" flag: a name of 4097 bytes (at most 4096)`, long[:maxQuotedValue]), []string{"add", "--allow-principal", "User:a", "--group", long}},
		{"the name is not valid UTF-8", []string{"list", "--transactional-id", "tx\xfe"}},
		{`invalid argument "any" for "--resource-pattern-type" flag: allowed: literal, prefixed`, []string{"add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"}},
		{`invalid argument "glob" for "--resource-pattern-type" flag: allowed: any, match, literal, prefixed`, []string{"list", "--resource-pattern-type", "glob"}},
		// The conveniences.
		{"--consumer needs a --topic and a --group", []string{"add", "--allow-principal", "User:a", "--consumer", "--topic", "t"}},
		{"--consumer needs a --topic and a --group", []string{"delete", "--consumer", "--group", "g", "--force"}},
		{"--producer needs a --topic", []string{"add", "--allow-principal", "User:a", "--producer", "--transactional-id", "x"}},
		{"--idempotent goes with --producer", []string{"add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"}},
		{"--operation does not go with --producer or --consumer", []string{"add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--operation", "Read"}},
		{"--group goes with --consumer", []string{"add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--group", "g"}},
		{"--cluster does not go with --producer or --consumer", []string{"add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g", "--cluster"}},
		{"--transactional-id goes with --producer, not --consumer alone", []string{"add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "x"}},
		{"unknown flag: --producer", []string{"list", "--producer"}},
		// Size: 40 principals on 30 topics with All is 1200 ACLs.
		{"these options make more than 1000 ACLs", append([]string{"add"}, many...)},
		{"these options make more than 1000 filters (principals x hosts x operations x resources): delete in parts", append([]string{"delete", "--force"}, many...)},
		{"these options make 1200 filters (resources x principals; at most 1000)", append([]string{"list"}, manyList...)},
		{"unknown flag: --add", []string{"--add"}},
	} {
		fails(t, c.want, append(append([]string{"acl"}, c.args...), "--brokers", nowhere)...)
	}
}

// The text is kafka-acls.sh's, grouped by resource pattern; a value that
// could fake a line or a field is quoted, a DN is not.
func TestACLText(t *testing.T) {
	hostile := "x`:\nCurrent ACLs for resource `ResourcePattern(resourceType=TOPIC, name=y, patternType=LITERAL)`:"
	bindings := []acl.Binding{
		binding(acl.ResourceGroup, "g", acl.PatternLiteral, "User:CN=alice,O=example", "*", acl.OperationRead, acl.PermissionAllow),
		binding(acl.ResourceTopic, "a-", acl.PatternPrefixed, "User:alice", "*", acl.OperationWrite, acl.PermissionAllow),
		binding(acl.ResourceTopic, "a-", acl.PatternPrefixed, "User:bob", "10.0.0.1", acl.OperationRead, acl.PermissionDeny),
		binding(acl.ResourceTopic, hostile, acl.PatternLiteral, "User:x, host=*, operation=ALL, permissionType=ALLOW) (principal=User:y", "*", acl.OperationAll, acl.PermissionAllow),
		binding(acl.ResourceTopic, "t\x00\u202e", acl.PatternLiteral, "User:a b", "*", acl.OperationIdempotentWrite, acl.PermissionDeny),
	}
	slices.SortFunc(bindings, cmpACLBinding)
	var out bytes.Buffer
	if err := newACLReport(bindings).printText(&out); err != nil {
		t.Fatal(err)
	}
	want := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=a-, patternType=PREFIXED)`:\n" +
		"\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n" +
		"\t(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=DENY)\n" +
		"\n" +
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=\"t\\x00\\u202e\", patternType=LITERAL)`:\n" +
		"\t(principal=\"User:a b\", host=*, operation=IDEMPOTENT_WRITE, permissionType=DENY)\n" +
		"\n" +
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=\"x`:\\nCurrent ACLs for resource `ResourcePattern(resourceType=TOPIC, name=y, patternType=LITERAL)`:\", patternType=LITERAL)`:\n" +
		"\t(principal=\"User:x, host=*, operation=ALL, permissionType=ALLOW) (principal=User:y\", host=*, operation=ALL, permissionType=ALLOW)\n" +
		"\n" +
		"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)`:\n" +
		"\t(principal=User:CN=alice,O=example, host=*, operation=READ, permissionType=ALLOW)\n"
	if out.String() != want {
		t.Fatalf("text:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := newACLReport(nil).printText(&out); err != nil || out.String() != "No ACLs.\n" {
		t.Fatalf("text with no ACLs: %q, %v", out.String(), err)
	}

	// JSON: the documented fields, the values as they are.
	out.Reset()
	if err := writeJSON(&out, newACLReport(bindings[:1])); err != nil {
		t.Fatal(err)
	}
	doc := decodeJSON(t, out.String())
	wantKeys(t, "list -o json", doc, "acls")
	got := wantKeys(t, "acls[0]", list(t, doc["acls"])[0], "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
	for k, v := range map[string]string{"resource_type": "TOPIC", "resource_name": "a-", "pattern_type": "PREFIXED", "principal": "User:alice", "host": "*", "operation": "WRITE", "permission_type": "ALLOW"} {
		if got[k] != v {
			t.Errorf("acls[0].%s = %v, want %q", k, got[k], v)
		}
	}
	out.Reset()
	if err := writeJSON(&out, newACLReport(nil)); err != nil || out.String() != "{\n  \"acls\": []\n}\n" {
		t.Fatalf("JSON with no ACLs: %q, %v", out.String(), err)
	}
}

// A refusal every binding got is one line; mixed outcomes name each
// failed binding on stderr.
func TestACLFailuresError(t *testing.T) {
	a := binding(acl.ResourceTopic, "t", acl.PatternLiteral, "User:a", "*", acl.OperationRead, acl.PermissionAllow)
	b := binding(acl.ResourceGroup, "g", acl.PatternLiteral, "User:a", "*", acl.OperationRead, acl.PermissionAllow)
	var stderr bytes.Buffer
	if err := aclFailuresError(&stderr, "added", 2, nil); err != nil {
		t.Fatalf("no failures: %v", err)
	}
	denied := aclKafkaError(kerr.ClusterAuthorizationFailed, nil)
	err := aclFailuresError(&stderr, "added", 2, []aclFailure{{a, denied}, {b, denied}})
	if err == nil || !errors.Is(err, kerr.ClusterAuthorizationFailed) || err.Error() != "no ACL added: "+kerr.ClusterAuthorizationFailed.Error() || stderr.Len() != 0 {
		t.Fatalf("all refused alike: %v; stderr %q", err, stderr.String())
	}
	disabled := aclKafkaError(kerr.SecurityDisabled, kmsg.StringPtr("no authorizer"))
	if !strings.Contains(disabled.Error(), "the node runs without an authorizer") || !errors.Is(disabled, kerr.SecurityDisabled) {
		t.Fatalf("SECURITY_DISABLED says %q", disabled)
	}
	err = aclFailuresError(&stderr, "deleted", 3, []aclFailure{{a, denied}, {b, disabled}})
	if err == nil || err.Error() != "2 of 3 ACLs not deleted" {
		t.Fatalf("mixed: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "fjord: not deleted: ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL) (principal=User:a, host=*, operation=READ, permissionType=ALLOW): CLUSTER_AUTHORIZATION_FAILED") ||
		!strings.Contains(lines[1], "resourceType=GROUP") || !strings.Contains(lines[1], "SECURITY_DISABLED") {
		t.Fatalf("mixed: stderr\n%s", stderr.String())
	}
}

// The confirmation is one bounded line: y or yes, in any case; anything
// else, nothing, or a flood is no.
func TestACLConfirm(t *testing.T) {
	for in, want := range map[string]bool{
		"y\n": true, "YES\n": true, " yes \r\n": true, "y": true,
		"": false, "\n": false, "n\n": false, "yes please\n": false, "no\ny\n": false,
		strings.Repeat("y", 1<<20): false,
	} {
		cmd := newACLCommand()
		stdin := strings.NewReader(in)
		var stderr bytes.Buffer
		cmd.SetIn(stdin)
		cmd.SetErr(&stderr)
		got, err := confirm(cmd, "Delete 2 ACLs? (y/n) ")
		if err != nil || got != want {
			t.Errorf("answer %.20q: %v, %v; want %v", in, got, err, want)
		}
		if stderr.String() != "Delete 2 ACLs? (y/n) \n" {
			t.Errorf("answer %.20q: stderr %q", in, stderr.String())
		}
		if read := len(in) - stdin.Len(); read > 64 {
			t.Errorf("answer %.20q: read %d bytes", in, read)
		}
	}
}

// Reference: kafka-acls.sh --add, --list and --remove, against the
// shared node. Its authorizer allows everyone on a resource no ACL names
// (no listener authenticates), so the ACLs here, which name only this
// test's topic prefix and group, leave other tests' resources alone;
// none is on the cluster, which would take CreateTopics from everyone.
func TestACLAddListDelete(t *testing.T) {
	prefix := topicName("acl") + "-"
	topic, group := prefix+"orders", prefix+"billing"
	t.Cleanup(func() { deleteTestACLs(t, topic, prefix, group) })
	pattern := func(rt, name, pt string) string {
		return fmt.Sprintf("`ResourcePattern(resourceType=%s, name=%s, patternType=%s)`:\n", rt, name, pt)
	}
	const (
		aliceWrite = "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
		bobRead    = "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n"
		bobDesc    = "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
		malloryNo  = "\t(principal=User:mallory, host=10.0.0.66, operation=READ, permissionType=DENY)\n"
	)
	prefixed := pattern("TOPIC", prefix, "PREFIXED")
	literal := pattern("TOPIC", topic, "LITERAL")
	groupLit := pattern("GROUP", group, "LITERAL")

	if r := ok(t, "", "acl", "list", "--topic", topic, "--resource-pattern-type", "match"); r.stdout != "No ACLs.\n" {
		t.Fatalf("list before any ACL:\n%s", r.stdout)
	}

	// Add: a prefixed allow, the consumer convenience, a deny from one
	// host.
	r := ok(t, "", "acl", "add", "--allow-principal", "User:alice", "--operation", "write", "--topic", prefix, "--resource-pattern-type", "prefixed")
	if want := "Adding ACLs for resource " + prefixed + aliceWrite; r.stdout != want {
		t.Fatalf("add printed\n%s\nwant\n%s", r.stdout, want)
	}
	r = ok(t, "", "acl", "add", "--allow-principal", "User:bob", "--consumer", "--topic", topic, "--group", group)
	if want := "Adding ACLs for resource " + literal + bobRead + bobDesc + "\nAdding ACLs for resource " + groupLit + bobRead; r.stdout != want {
		t.Fatalf("add --consumer printed\n%s\nwant\n%s", r.stdout, want)
	}
	ok(t, "", "acl", "add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.66", "--operation", "Read", "--topic", topic)
	// Adding one again is answered as added, and changes nothing.
	ok(t, "", "acl", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", prefix, "--resource-pattern-type", "prefixed")

	// List: match is every pattern that applies to the topic; the
	// default (any) is the exact name's patterns only.
	r = ok(t, "", "acl", "list", "--topic", topic, "--resource-pattern-type", "match")
	if want := "Current ACLs for resource " + prefixed + aliceWrite + "\nCurrent ACLs for resource " + literal + bobRead + bobDesc + malloryNo; r.stdout != want {
		t.Fatalf("list match printed\n%s\nwant\n%s", r.stdout, want)
	}
	r = ok(t, "", "acl", "list", "--topic", topic, "--group", group)
	if want := "Current ACLs for resource " + literal + bobRead + bobDesc + malloryNo + "\nCurrent ACLs for resource " + groupLit + bobRead; r.stdout != want {
		t.Fatalf("list printed\n%s\nwant\n%s", r.stdout, want)
	}
	// Every ACL (only this test's are on the node), and by principal.
	r = ok(t, "", "acl", "list")
	for _, want := range []string{prefixed + aliceWrite, literal + bobRead + bobDesc + malloryNo, groupLit + bobRead} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("list of every ACL does not show\n%s\nin\n%s", want, r.stdout)
		}
	}
	var bob aclReport
	if err := json.Unmarshal([]byte(ok(t, "", "acl", "list", "--principal", "User:bob", "-o", "json").stdout), &bob); err != nil {
		t.Fatal(err)
	}
	wantBob := []aclJSON{
		{ResourceType: "TOPIC", ResourceName: topic, PatternType: "LITERAL", Principal: "User:bob", Host: "*", Operation: "READ", PermissionType: "ALLOW"},
		{ResourceType: "TOPIC", ResourceName: topic, PatternType: "LITERAL", Principal: "User:bob", Host: "*", Operation: "DESCRIBE", PermissionType: "ALLOW"},
		{ResourceType: "GROUP", ResourceName: group, PatternType: "LITERAL", Principal: "User:bob", Host: "*", Operation: "READ", PermissionType: "ALLOW"},
	}
	if !slices.Equal(bob.ACLs, wantBob) {
		t.Fatalf("list --principal User:bob -o json = %+v, want %+v", bob.ACLs, wantBob)
	}

	// Delete asks: without a yes nothing is deleted.
	res := fjord(t, "n\n", "acl", "delete", "--deny-principal", "User:mallory", "--topic", topic, "--brokers", brokers(t))
	if res.code == 0 || !strings.Contains(res.stderr, "not confirmed; nothing deleted (--force deletes without asking)") ||
		res.stdout != "ACLs to delete for resource "+literal+malloryNo {
		t.Fatalf("delete answered n: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	r = ok(t, "y\n", "acl", "delete", "--deny-principal", "User:mallory", "--topic", topic)
	if want := "ACLs to delete for resource " + literal + malloryNo + "Deleted ACLs for resource " + literal + malloryNo; r.stdout != want {
		t.Fatalf("delete printed\n%s\nwant\n%s", r.stdout, want)
	}
	// The consumer's operations of one principal; then every principal's
	// on the prefix, without asking.
	r = ok(t, "", "acl", "delete", "--allow-principal", "User:bob", "--consumer", "--topic", topic, "--group", group, "--force")
	if want := "Deleted ACLs for resource " + literal + bobRead + bobDesc + "\nDeleted ACLs for resource " + groupLit + bobRead; r.stdout != want {
		t.Fatalf("delete --consumer printed\n%s\nwant\n%s", r.stdout, want)
	}
	r = ok(t, "", "acl", "delete", "--topic", prefix, "--resource-pattern-type", "prefixed", "--force")
	if want := "Deleted ACLs for resource " + prefixed + aliceWrite; r.stdout != want {
		t.Fatalf("delete of the prefix printed\n%s\nwant\n%s", r.stdout, want)
	}
	// Nothing left: a delete that matches nothing fails, asked or not.
	fails(t, "no ACL matches; nothing deleted", "acl", "delete", "--topic", prefix, "--resource-pattern-type", "any", "--brokers", brokers(t))
	fails(t, "no ACL matches; nothing deleted", "acl", "delete", "--topic", topic, "--resource-pattern-type", "match", "--force", "--brokers", brokers(t))
	if r := ok(t, "", "acl", "list", "--topic", topic, "--resource-pattern-type", "match"); r.stdout != "No ACLs.\n" {
		t.Fatalf("list after the deletes:\n%s", r.stdout)
	}
}

// deleteTestACLs deletes every ACL on the test's resources, with a client
// of the test's own rather than the commands under test.
func deleteTestACLs(t *testing.T, topic, prefix, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range []struct {
		rt   acl.ResourceType
		name string
	}{{acl.ResourceTopic, topic}, {acl.ResourceTopic, prefix}, {acl.ResourceGroup, group}} {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName, d.ResourcePatternType = f.rt, kmsg.StringPtr(f.name), acl.PatternAny
		d.Operation, d.PermissionType = acl.OperationAny, acl.PermissionAny
		req.Filters = append(req.Filters, d)
	}
	resp, err := req.RequestWith(ctx, rdClient(t))
	if err != nil {
		t.Fatalf("deleting the test's ACLs: %v", err)
	}
	for _, res := range resp.Results {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			t.Fatalf("deleting the test's ACLs: %v", err)
		}
	}
}
