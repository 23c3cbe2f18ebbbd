package controlplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/acl"
)

// The image-free checks the Kafka edge and the controller share: the
// bound refuses a request whole, each entry with the same
// INVALID_REQUEST, before any entry is looked at; within it, each entry
// gets acl's own verdict.
func TestCheckACLRequests(t *testing.T) {
	good := acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceTopic, Name: "t", PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: "User:a", Host: acl.WildcardHost, Operation: acl.OperationRead, Permission: acl.PermissionAllow},
	}
	bad := good
	bad.Entry.Host = "not-an-address"
	errs, tooMany := CheckACLCreations([]acl.Binding{good, bad})
	if tooMany || errs[0] != nil || !errors.Is(errs[1], acl.ErrInvalidHost) {
		t.Fatalf("creations: %v %v", errs, tooMany)
	}
	if errs, tooMany := CheckACLCreations(nil); tooMany || len(errs) != 0 {
		t.Fatalf("no creations: %v %v", errs, tooMany)
	}
	many := make([]acl.Binding, MaxACLCreations+1)
	for i := range many {
		many[i] = good
	}
	if errs, tooMany := CheckACLCreations(many[:MaxACLCreations]); tooMany || errs[MaxACLCreations-1] != nil {
		t.Fatalf("%d creations: %v", MaxACLCreations, tooMany)
	}
	errs, tooMany = CheckACLCreations(many)
	if !tooMany || len(errs) != len(many) {
		t.Fatalf("too many creations: %d answers, %v", len(errs), tooMany)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "1001 ACL creations in one request (at most 1000)") {
			t.Fatalf("too many creations: %v", err)
		}
	}

	everything := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	unknown := everything
	unknown.Permission = acl.PermissionUnknown
	errs, tooMany = CheckACLFilters([]acl.Filter{everything, unknown})
	if tooMany || errs[0] != nil || !errors.Is(errs[1], acl.ErrInvalidFilter) {
		t.Fatalf("filters: %v %v", errs, tooMany)
	}
	filters := make([]acl.Filter, MaxACLFilters+1)
	errs, tooMany = CheckACLFilters(filters)
	if !tooMany || len(errs) != len(filters) || !errors.Is(errs[MaxACLFilters], ErrInvalidRequest) || !strings.Contains(errs[0].Error(), "1001 ACL filters") {
		t.Fatalf("too many filters: %v %v", errs[0], tooMany)
	}
}
