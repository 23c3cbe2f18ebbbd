package controller_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Reference: Kafka's AclControlManager. CreateACLs commits the new
// bindings in one entry and nothing for bindings already there;
// DeleteACLs removes what its filters match, once, in one entry; the
// image authorizes by what was committed, and a controller reopened on
// the same log has the same bindings.
func TestCreateAndDeleteACLs(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	c := open(t, cfg)
	ctx := ctxT(t)
	if v := c.Image().MetadataVersion; v < metadata.ACLMetadataVersion {
		t.Fatalf("a new log is at metadata version %d, below the ACLs' %d", v, metadata.ACLMetadataVersion)
	}
	read := acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceTopic, Name: "orders", PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: "User:alice", Host: acl.WildcardHost, Operation: acl.OperationRead, Permission: acl.PermissionAllow},
	}
	write := read
	write.Pattern.PatternType, write.Entry.Operation = acl.PatternPrefixed, acl.OperationWrite
	deny := read
	deny.Entry.Host, deny.Entry.Permission = "10.9.9.9", acl.PermissionDeny
	bad := read
	bad.Entry.Principal = "alice"

	before := c.Image()
	errs, err := c.CreateACLs(ctx, []acl.Binding{read, write, bad, deny, read})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 5 || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], kerr.InvalidRequest) || errs[3] != nil || errs[4] != nil {
		t.Fatalf("answers %v, want all but the bad principal created", errs)
	}
	img := c.Image()
	if img.Offset != before.Offset+1 || img.ACLs.Len() != 3 {
		t.Fatalf("after creating: offset %d (was %d), %d bindings; want one entry with 3", img.Offset, before.Offset, img.ACLs.Len())
	}
	a := acl.NewAuthorizer(img.ACLs, acl.Config{})
	if !a.Authorize("User:alice", netip.MustParseAddr("10.0.0.1"), acl.OperationWrite, acl.ResourceTopic, "orders-eu") ||
		a.Authorize("User:alice", netip.MustParseAddr("10.9.9.9"), acl.OperationRead, acl.ResourceTopic, "orders") {
		t.Fatal("the image does not authorize by the committed bindings")
	}

	// Creating what exists commits nothing.
	if errs, err := c.CreateACLs(ctx, []acl.Binding{read, deny}); err != nil || errs[0] != nil || errs[1] != nil || c.Image() != img {
		t.Fatalf("creating existing bindings: %v %v, committed %v", err, errs, c.Image() != img)
	}

	alice := "User:alice"
	byPrincipal := acl.Filter{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Principal: &alice, Operation: acl.OperationAny, Permission: acl.PermissionAllow}
	literal := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternLiteral, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	deletions, err := c.DeleteACLs(ctx, []acl.Filter{byPrincipal, literal})
	if err != nil {
		t.Fatal(err)
	}
	if len(deletions) != 2 || !slices.Equal(deletions[0].Deleted, []acl.Binding{read, write}) || !slices.Equal(deletions[1].Deleted, []acl.Binding{read, deny}) {
		t.Fatalf("deletions %+v", deletions)
	}
	if got := c.Image(); got.Offset != img.Offset+1 || got.ACLs != nil {
		t.Fatalf("after deleting: offset %d (was %d), bindings %v", got.Offset, img.Offset, got.ACLs.Bindings())
	}
	// Deleting what is gone commits nothing.
	img = c.Image()
	if deletions, err := c.DeleteACLs(ctx, []acl.Filter{literal}); err != nil || len(deletions[0].Deleted) != 0 || c.Image() != img {
		t.Fatalf("deleting nothing: %v %+v, committed %v", err, deletions, c.Image() != img)
	}

	// The bindings are in the log: a controller reopened on it has them.
	if _, err := c.CreateACLs(ctx, []acl.Binding{write}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, cfg)
	if got := c.Image().ACLs.Bindings(); !slices.Equal(got, []acl.Binding{write}) {
		t.Fatalf("after reopening: %v", got)
	}
}
