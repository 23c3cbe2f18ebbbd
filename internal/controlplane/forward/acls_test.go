package forward

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

var (
	fwdRead = acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceTopic, Name: "orders", PatternType: acl.PatternPrefixed},
		Entry:   acl.Entry{Principal: "User:alice", Host: "10.0.0.1", Operation: acl.OperationRead, Permission: acl.PermissionAllow},
	}
	fwdDeny = acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceGroup, Name: "g", PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: "User:bob", Host: acl.WildcardHost, Operation: acl.OperationAll, Permission: acl.PermissionDeny},
	}
)

func creationBinding(c kmsg.CreateACLsRequestCreation) acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: c.ResourceType, Name: c.ResourceName, PatternType: c.ResourcePatternType},
		Entry:   acl.Entry{Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType},
	}
}

func matchingACL(b acl.Binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName, m.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
	m.Principal, m.Host, m.Operation, m.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
	return m
}

// CreateACLs goes to the controller as Kafka's CreateAcls at v3 (the
// newest both serve: flexible, so its answer carries the offset tag)
// with every field of every binding; each creation's refusal comes back
// as its own error, by index, and the change is waited for at the tagged
// offset only when a binding went in. Without CreateACLsResponse in
// responseTags the wait would never find the offset, and a forwarded
// creation that succeeded would answer REQUEST_TIMED_OUT.
func TestCreateACLsForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.CreateACLsRequest)
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for _, c := range r.Creations {
			out := kmsg.NewCreateACLsResponseResult()
			if c.Principal == "User:bob" {
				out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("acl: invalid host")
			}
			resp.Results = append(resp.Results, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	errs, err := c.CreateACLs(t.Context(), []acl.Binding{fwdRead, fwdDeny})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], kerr.InvalidRequest) || !strings.Contains(errs[1].Error(), "acl: invalid host") {
		t.Fatalf("answers %v, want alice's created, bob's INVALID_REQUEST with the controller's message", errs)
	}
	if got := images.waitedFor(); !slices.Equal(got, []uint64{taggedOffset}) {
		t.Fatalf("waited for %v, want the tagged offset", got)
	}
	r := f.requests()[0].(*kmsg.CreateACLsRequest)
	if r.Version != 3 || len(r.Creations) != 2 || creationBinding(r.Creations[0]) != fwdRead || creationBinding(r.Creations[1]) != fwdDeny {
		t.Fatalf("sent v%d %+v", r.Version, r.Creations)
	}

	// Every creation refused: nothing to wait for.
	errs, err = c.CreateACLs(t.Context(), []acl.Binding{fwdDeny})
	if err != nil || len(errs) != 1 || errs[0] == nil || len(images.waitedFor()) != 1 {
		t.Fatalf("a refused change: %v %v, waited %v", err, errs, images.waitedFor())
	}
}

// DeleteACLs goes to the controller as Kafka's DeleteAcls with every
// field of every filter (null fields as null); each filter's bindings
// and refusal come back by index, and the change is waited for.
func TestDeleteACLsForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.DeleteACLsRequest)
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for _, rf := range r.Filters {
			out := kmsg.NewDeleteACLsResponseResult()
			switch {
			case rf.Operation == acl.OperationUnknown:
				out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("acl: invalid filter")
			case rf.Principal == nil:
				out.MatchingACLs = append(out.MatchingACLs, matchingACL(fwdRead), matchingACL(fwdDeny))
			default:
				out.MatchingACLs = append(out.MatchingACLs, matchingACL(fwdRead))
			}
			resp.Results = append(resp.Results, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	alice, orders := "User:alice", "orders"
	everything := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	alices := acl.Filter{ResourceType: acl.ResourceTopic, Name: &orders, PatternType: acl.PatternMatch, Principal: &alice, Operation: acl.OperationRead, Permission: acl.PermissionAllow}
	bad := everything
	bad.Operation = acl.OperationUnknown
	deletions, err := c.DeleteACLs(t.Context(), []acl.Filter{everything, alices, bad})
	if err != nil {
		t.Fatal(err)
	}
	if len(deletions) != 3 || !slices.Equal(deletions[0].Deleted, []acl.Binding{fwdRead, fwdDeny}) || deletions[0].Err != nil ||
		!slices.Equal(deletions[1].Deleted, []acl.Binding{fwdRead}) || deletions[1].Err != nil ||
		len(deletions[2].Deleted) != 0 || !errors.Is(deletions[2].Err, kerr.InvalidRequest) {
		t.Fatalf("deletions %+v", deletions)
	}
	if got := images.waitedFor(); !slices.Equal(got, []uint64{taggedOffset}) {
		t.Fatalf("waited for %v, want the tagged offset", got)
	}
	r := f.requests()[0].(*kmsg.DeleteACLsRequest)
	sent := r.Filters[1]
	if r.Version != 3 || len(r.Filters) != 3 || r.Filters[0].ResourceName != nil || r.Filters[0].Principal != nil || r.Filters[0].Host != nil ||
		sent.ResourceType != acl.ResourceTopic || *sent.ResourceName != "orders" || sent.ResourcePatternType != acl.PatternMatch ||
		*sent.Principal != alice || sent.Host != nil || sent.Operation != acl.OperationRead || sent.PermissionType != acl.PermissionAllow {
		t.Fatalf("sent v%d %+v", r.Version, r.Filters)
	}
}

// A controller whose answer does not fit the request (another count, a
// binding under a filter that does not match it) is not trusted: the
// call is REQUEST_TIMED_OUT (the change may be in), and not retried. A
// binding the controller could not delete fails its filter.
func TestACLsForwardedBadAnswers(t *testing.T) {
	everything := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	groups := everything
	groups.ResourceType = acl.ResourceGroup
	for name, answer := range map[string]func(kmsg.Request) kmsg.Response{
		"create: one result too many": func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
			resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.(*kmsg.CreateACLsRequest).Creations)+1)
			return resp
		},
		"delete: none": func(req kmsg.Request) kmsg.Response {
			return req.ResponseKind()
		},
		"delete: a binding the filter does not match": func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
			out := kmsg.NewDeleteACLsResponseResult()
			out.MatchingACLs = append(out.MatchingACLs, matchingACL(fwdRead)) // a topic, for a group filter
			resp.Results = append(resp.Results, out)
			return resp
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeController(t, answer)
			c, images, _ := newForwarder(t, f)
			var err error
			if strings.HasPrefix(name, "create") {
				_, err = c.CreateACLs(t.Context(), []acl.Binding{fwdRead})
			} else {
				_, err = c.DeleteACLs(t.Context(), []acl.Filter{groups})
			}
			if !errors.Is(err, controlplane.ErrTimedOut) || len(f.requests()) != 1 || len(images.waitedFor()) != 0 {
				t.Fatalf("%v after %d requests, waited %v; want REQUEST_TIMED_OUT after 1", err, len(f.requests()), images.waitedFor())
			}
		})
	}

	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		out := kmsg.NewDeleteACLsResponseResult()
		m := matchingACL(fwdDeny)
		m.ErrorCode, m.ErrorMessage = kerr.PolicyViolation.Code, kmsg.StringPtr("kept")
		out.MatchingACLs = append(out.MatchingACLs, m)
		resp.Results = append(resp.Results, out)
		return resp
	})
	c, _, _ := newForwarder(t, f)
	deletions, err := c.DeleteACLs(t.Context(), []acl.Filter{groups})
	if err != nil || len(deletions) != 1 || !errors.Is(deletions[0].Err, kerr.PolicyViolation) || len(deletions[0].Deleted) != 0 {
		t.Fatalf("a binding not deleted: %v %+v", err, deletions)
	}
}

// A controller that moved answers every entry NOT_CONTROLLER (Kafka's
// ACL responses have no top-level error): that is the request's, and it
// is sent again to find the controller, for both requests.
func TestACLsForwardRetries(t *testing.T) {
	var mu sync.Mutex
	n := map[int16]int{}
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		mu.Lock()
		n[req.Key()]++
		first := n[req.Key()] == 1
		mu.Unlock()
		code, msg := int16(0), (*string)(nil)
		if first {
			code, msg = kerr.NotController.Code, kmsg.StringPtr("moved")
		}
		switch r := req.(type) {
		case *kmsg.CreateACLsRequest:
			resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
			for range r.Creations {
				resp.Results = append(resp.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: msg})
			}
			return resp
		case *kmsg.DeleteACLsRequest:
			resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
			for range r.Filters {
				out := kmsg.NewDeleteACLsResponseResult()
				out.ErrorCode, out.ErrorMessage = code, msg
				if !first {
					out.MatchingACLs = append(out.MatchingACLs, matchingACL(fwdDeny))
				}
				resp.Results = append(resp.Results, out)
			}
			return resp
		}
		t.Errorf("unexpected %T", req)
		return nil
	})
	c, images, _ := newForwarder(t, f)
	errs, err := c.CreateACLs(t.Context(), []acl.Binding{fwdRead, fwdDeny})
	if err != nil || len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("create: %v %v, want both created", err, errs)
	}
	everything := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	deletions, err := c.DeleteACLs(t.Context(), []acl.Filter{everything})
	if err != nil || len(deletions) != 1 || !slices.Equal(deletions[0].Deleted, []acl.Binding{fwdDeny}) {
		t.Fatalf("delete: %v %+v", err, deletions)
	}
	if got := len(f.requests()); got != 4 {
		t.Errorf("%d requests, want 4 (each NOT_CONTROLLER once, then answered)", got)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{taggedOffset, taggedOffset}) {
		t.Errorf("waited for %v, want the tagged offset twice", w)
	}
}
