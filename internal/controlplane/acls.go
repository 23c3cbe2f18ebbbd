package controlplane

import (
	"context"
	"fmt"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// ACLs changes ACL bindings (Kafka's CreateAcls and DeleteAcls, whose
// semantics are internal/acl's and its APIS.md). It is part of Client.
type ACLs interface {
	// CreateACLs adds bindings and answers each: errs[i] answers
	// bindings[i]. nil means the binding is there now, added by this
	// call or before (Kafka answers an existing binding with success
	// and writes nothing; a binding given twice is added once). A
	// binding acl.Validate refuses gets its error (INVALID_REQUEST);
	// one past metadata.MaxACLs bindings ErrInvalidRequest; every binding
	// of a log below metadata.ACLMetadataVersion kerr.UnsupportedVersion,
	// and of a request of more than MaxACLCreations bindings
	// ErrInvalidRequest. The bindings added are committed together in
	// one batch. err is the whole request's (ErrNotController,
	// ErrTimedOut): then errs is nil. The slice is only read.
	CreateACLs(ctx context.Context, bindings []acl.Binding) (errs []error, err error)
	// DeleteACLs removes the bindings each filter matches
	// (acl.Set.Matching) and answers each: deletions[i] answers
	// filters[i]. All filters apply to the same image and are committed
	// together, as Kafka's controller does: a binding two filters match
	// is removed once and listed under both. A filter acl.ValidateFilter
	// refuses gets its error (INVALID_REQUEST) and removes nothing; every
	// filter of a log below metadata.ACLMetadataVersion
	// kerr.UnsupportedVersion, of a request of more than MaxACLFilters
	// filters ErrInvalidRequest, and of one whose filters together list
	// more than MaxACLDeletionMatches bindings ErrInvalidRequest
	// (nothing is removed). err is the whole request's, as CreateACLs's.
	// The slice is only read; the answer's bindings are the caller's.
	DeleteACLs(ctx context.Context, filters []acl.Filter) (deletions []ACLDeletion, err error)
}

// ACLDeletion answers one filter of a DeleteACLs: the bindings it
// matched, which are removed, or its refusal (then Deleted is empty).
type ACLDeletion struct {
	Deleted []acl.Binding
	Err     error
}

// Bounds on one request. Each request is one metadata batch, and each
// binding of it a record: a thousand is many times what an
// administrator's tool sends at once (kafka-acls sends one binding per
// principal, host and operation named), and a larger request is refused
// whole before anything is looked at.
const (
	MaxACLCreations = 1000
	MaxACLFilters   = 1000
	// MaxACLDeletionMatches bounds the bindings one DeleteACLs lists
	// across its filters (a binding matched by two counts twice): every
	// binding of a full image, listed twice over. Without it a thousand
	// filters that each match every binding would make an answer of a
	// hundred million bindings, in the controller's memory and then on
	// the wire, out of a request of a few kilobytes.
	MaxACLDeletionMatches = 2 * metadata.MaxACLs
)

// CheckACLCreations applies the rules of a CreateAcls that need no
// image: the bound on the request (whole: an error for every binding,
// and tooMany true), then acl.Validate per binding. errs[i] answers
// bindings[i]; nil ones may go to the controller, which checks again
// against its image. The Kafka edge answers with it before forwarding.
func CheckACLCreations(bindings []acl.Binding) (errs []error, tooMany bool) {
	errs = make([]error, len(bindings))
	if len(bindings) > MaxACLCreations {
		err := fmt.Errorf("%w: %d ACL creations in one request (at most %d)", ErrInvalidRequest, len(bindings), MaxACLCreations)
		for i := range errs {
			errs[i] = err
		}
		return errs, true
	}
	for i, b := range bindings {
		errs[i] = acl.Validate(b)
	}
	return errs, false
}

// CheckACLFilters is CheckACLCreations for a DeleteAcls: the bound on
// its filters, then acl.ValidateFilter per filter.
func CheckACLFilters(filters []acl.Filter) (errs []error, tooMany bool) {
	errs = make([]error, len(filters))
	if len(filters) > MaxACLFilters {
		err := fmt.Errorf("%w: %d ACL filters in one request (at most %d)", ErrInvalidRequest, len(filters), MaxACLFilters)
		for i := range errs {
			errs[i] = err
		}
		return errs, true
	}
	for i, f := range filters {
		errs[i] = acl.ValidateFilter(f)
	}
	return errs, false
}
