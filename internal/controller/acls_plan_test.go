package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// aclImage is a log at version where, from metadata version 11,
// bindings are stored.
func aclImage(t *testing.T, version int32, bindings ...acl.Binding) *metadata.Image {
	t.Helper()
	img, err := metadata.Empty(testConfigs).Apply(1, metadata.ClusterIDRecord{ClusterID: "c"}, metadata.MetadataVersionRecord{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	if len(bindings) == 0 {
		return img
	}
	recs := make([]metadata.Record, len(bindings))
	for i, b := range bindings {
		recs[i] = metadata.NewACLRecord(b)
	}
	if img, err = img.Apply(2, recs...); err != nil {
		t.Fatal(err)
	}
	return img
}

func topicBinding(name, principal string, op acl.Operation) acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceTopic, Name: name, PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow},
	}
}

// recordBindings are the bindings recs add (ACLRecord) or remove.
func recordBindings(t *testing.T, recs []metadata.Record) (added, removed []acl.Binding) {
	t.Helper()
	for _, r := range recs {
		switch r := r.(type) {
		case metadata.ACLRecord:
			added = append(added, r.Binding())
		case metadata.RemoveACLRecord:
			removed = append(removed, r.Binding())
		default:
			t.Fatalf("record %T", r)
		}
	}
	return added, removed
}

// Reference: Kafka's AclControlManager.createAcls. One answer per
// binding, by index; a record only for a good binding not stored and
// not added earlier in the request (an existing binding and a repeat
// are success without one); each refused binding gets acl.Validate's
// INVALID_REQUEST; and the records apply to the image planned against.
func TestPlanCreateACLs(t *testing.T) {
	stored := topicBinding("orders", "User:alice", acl.OperationRead)
	img := aclImage(t, metadata.ACLMetadataVersion, stored)
	good := topicBinding("orders", "User:bob", acl.OperationWrite)
	prefixed := good
	prefixed.Pattern.PatternType = acl.PatternPrefixed
	badHost := good
	badHost.Entry.Host = "example.com"
	anyType := good
	anyType.Pattern.Type = acl.ResourceAny
	errs, recs := planCreateACLs(img, []acl.Binding{good, stored, badHost, good, prefixed, anyType})
	for i, want := range []error{nil, nil, acl.ErrInvalidHost, nil, nil, acl.ErrInvalidResourceType} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("binding %d: %v, want %v", i, errs[i], want)
		}
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("%v is not INVALID_REQUEST", err)
		}
	}
	added, removed := recordBindings(t, recs)
	if !slices.Equal(added, []acl.Binding{good, prefixed}) || len(removed) != 0 {
		t.Fatalf("records add %v, remove %v; want bob's two", added, removed)
	}
	next, err := img.Apply(3, recs...)
	if err != nil || next.ACLs.Len() != 3 {
		t.Fatalf("applying the plan: %v, %d bindings", err, next.ACLs.Len())
	}
	// Nothing new: nothing to commit.
	if errs, recs := planCreateACLs(next, []acl.Binding{good, stored}); len(recs) != 0 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("creating what is stored: %v %v", errs, recs)
	}
	if errs, recs := planCreateACLs(next, nil); len(errs) != 0 || len(recs) != 0 {
		t.Fatalf("an empty request: %v %v", errs, recs)
	}
}

// Fjord's bounds on a CreateAcls: more than MaxACLCreations bindings is
// refused whole before any is looked at; past metadata.MaxACLs stored,
// the bindings beyond it are refused and those before added; a log below
// metadata version 11 refuses every binding UNSUPPORTED_VERSION.
func TestPlanCreateACLsBounds(t *testing.T) {
	img := aclImage(t, metadata.ACLMetadataVersion)
	many := make([]acl.Binding, controlplane.MaxACLCreations+1)
	for i := range many {
		many[i] = topicBinding(fmt.Sprint("t", i), "User:a", acl.OperationRead)
	}
	errs, recs := planCreateACLs(img, many)
	if len(recs) != 0 || len(errs) != len(many) {
		t.Fatalf("too many: %d records, %d answers", len(recs), len(errs))
	}
	for _, err := range errs {
		if !errors.Is(err, controlplane.ErrInvalidRequest) || !strings.Contains(err.Error(), "1001 ACL creations in one request (at most 1000)") {
			t.Fatalf("too many: %v", err)
		}
	}

	// Fill the image to two short of the bound.
	var recs2 []metadata.Record
	for i := range metadata.MaxACLs - 2 {
		recs2 = append(recs2, metadata.NewACLRecord(topicBinding(fmt.Sprint("t", i%1000), fmt.Sprint("User:u", i/1000), acl.OperationRead)))
	}
	full, err := img.Apply(3, recs2...)
	if err != nil {
		t.Fatal(err)
	}
	asked := []acl.Binding{
		topicBinding("x", "User:new", acl.OperationRead),
		topicBinding("t0", "User:u0", acl.OperationRead), // stored: no room needed
		topicBinding("y", "User:new", acl.OperationRead),
		topicBinding("z", "User:new", acl.OperationRead), // one past
		topicBinding("x", "User:new", acl.OperationRead), // a repeat of an added one
	}
	errs, recs = planCreateACLs(full, asked)
	added, _ := recordBindings(t, recs)
	if !slices.Equal(added, []acl.Binding{asked[0], asked[2]}) {
		t.Fatalf("added %v, want x and y", added)
	}
	for i, refused := range []bool{false, false, false, true, false} {
		if (errs[i] != nil) != refused || refused && (!errors.Is(errs[i], controlplane.ErrInvalidRequest) || !strings.Contains(errs[i].Error(), "at most 100000")) {
			t.Errorf("binding %d: %v, refused want %v", i, errs[i], refused)
		}
	}
	if _, err := full.Apply(4, recs...); err != nil {
		t.Fatalf("the plan at the bound does not apply: %v", err)
	}

	old := aclImage(t, metadata.ACLMetadataVersion-1)
	errs, recs = planCreateACLs(old, []acl.Binding{topicBinding("x", "User:a", acl.OperationRead), {}})
	if len(recs) != 0 {
		t.Fatalf("an old log: records %v", recs)
	}
	for _, err := range errs {
		if !errors.Is(err, kerr.UnsupportedVersion) || !strings.Contains(err.Error(), "metadata version 11") {
			t.Errorf("an old log: %v, want UNSUPPORTED_VERSION naming version 11", err)
		}
	}
}

// Reference: Kafka's AclControlManager.deleteAcls. Per filter, by
// index, the bindings it matches or its refusal; a binding two filters
// match is listed under both and removed once; the records apply to
// the image.
func TestPlanDeleteACLs(t *testing.T) {
	alice := topicBinding("orders", "User:alice", acl.OperationRead)
	bob := topicBinding("orders", "User:bob", acl.OperationRead)
	carol := topicBinding("payments", "User:carol", acl.OperationWrite)
	img := aclImage(t, metadata.ACLMetadataVersion, alice, bob, carol)
	name, principal := "orders", "User:alice"
	anyFilter := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	byName, byPrincipal, bad, none := anyFilter, anyFilter, anyFilter, anyFilter
	byName.Name = &name
	byPrincipal.Principal = &principal
	bad.Operation = acl.OperationUnknown
	none.Permission = acl.PermissionDeny
	deletions, recs := planDeleteACLs(img, []acl.Filter{byName, byPrincipal, bad, none})
	if len(deletions) != 4 {
		t.Fatalf("%d answers for 4 filters", len(deletions))
	}
	for i, want := range []struct {
		deleted []acl.Binding
		err     error
	}{
		{[]acl.Binding{alice, bob}, nil},
		{[]acl.Binding{alice}, nil},
		{nil, acl.ErrInvalidFilter},
		{nil, nil},
	} {
		d := deletions[i]
		if !slices.Equal(d.Deleted, want.deleted) || !errors.Is(d.Err, want.err) || (want.err == nil) != (d.Err == nil) {
			t.Errorf("filter %d: %v %v, want %v %v", i, d.Deleted, d.Err, want.deleted, want.err)
		}
	}
	_, removed := recordBindings(t, recs)
	if !slices.Equal(removed, []acl.Binding{alice, bob}) {
		t.Fatalf("removes %v, want alice's and bob's once each", removed)
	}
	next, err := img.Apply(3, recs...)
	if err != nil || next.ACLs.Len() != 1 || !next.ACLs.Contains(carol) {
		t.Fatalf("applying the plan: %v, %v", err, next.ACLs.Bindings())
	}
	// Matching nothing: nothing to commit.
	if deletions, recs := planDeleteACLs(next, []acl.Filter{byName}); len(recs) != 0 || len(deletions[0].Deleted) != 0 || deletions[0].Err != nil {
		t.Fatalf("deleting what is gone: %+v %v", deletions, recs)
	}
}

// Fjord's bounds on a DeleteAcls: more than MaxACLFilters filters, or
// filters that together list more than MaxACLDeletionMatches bindings,
// refuse every filter and remove nothing; a log below metadata version
// 11 refuses every filter UNSUPPORTED_VERSION.
func TestPlanDeleteACLsBounds(t *testing.T) {
	anyFilter := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	var bindings []acl.Binding
	for i := range 1000 {
		bindings = append(bindings, topicBinding(fmt.Sprint("t", i), "User:a", acl.OperationRead))
	}
	img := aclImage(t, metadata.ACLMetadataVersion, bindings...)
	for _, c := range []struct {
		filters int
		msg     string
	}{
		{controlplane.MaxACLFilters + 1, "1001 ACL filters in one request"},
		// Each matches all 1000: 201 of them list 201,000.
		{controlplane.MaxACLDeletionMatches/1000 + 1, "match more than 200000 ACL bindings"},
	} {
		deletions, recs := planDeleteACLs(img, slices.Repeat([]acl.Filter{anyFilter}, c.filters))
		if len(recs) != 0 || len(deletions) != c.filters {
			t.Fatalf("%d filters: %d records, %d answers", c.filters, len(recs), len(deletions))
		}
		for _, d := range deletions {
			if !errors.Is(d.Err, controlplane.ErrInvalidRequest) || !strings.Contains(d.Err.Error(), c.msg) || len(d.Deleted) != 0 {
				t.Fatalf("%d filters: %v (%d listed), want INVALID_REQUEST saying %q", c.filters, d.Err, len(d.Deleted), c.msg)
			}
		}
	}
	// At the bound: allowed, each binding removed once.
	deletions, recs := planDeleteACLs(img, slices.Repeat([]acl.Filter{anyFilter}, controlplane.MaxACLDeletionMatches/1000))
	if len(recs) != 1000 || len(deletions[0].Deleted) != 1000 || deletions[0].Err != nil {
		t.Fatalf("at the bound: %d records, first answer %d bindings, %v", len(recs), len(deletions[0].Deleted), deletions[0].Err)
	}

	deletions, recs = planDeleteACLs(aclImage(t, metadata.ACLMetadataVersion-1), []acl.Filter{anyFilter, {}})
	if len(recs) != 0 {
		t.Fatalf("an old log: records %v", recs)
	}
	for _, d := range deletions {
		if !errors.Is(d.Err, kerr.UnsupportedVersion) {
			t.Errorf("an old log: %v, want UNSUPPORTED_VERSION", d.Err)
		}
	}
}
