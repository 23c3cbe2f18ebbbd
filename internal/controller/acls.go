package controller

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// CreateACLs adds ACL bindings (Kafka's CreateAcls, as its
// AclControlManager.createAcls decides them) and commits every binding
// not there yet in one batch (controlplane.ACLs).
func (c *Controller) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	errs, recs := planCreateACLs(img, bindings)
	if len(recs) == 0 {
		return errs, nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return nil, err
	}
	c.log.Info("created ACL bindings", "asked", len(bindings), "added", len(recs))
	return errs, nil
}

// DeleteACLs removes the bindings filters match (Kafka's DeleteAcls, as
// AclControlManager.deleteAcls decides them), all in one batch
// (controlplane.ACLs).
func (c *Controller) DeleteACLs(ctx context.Context, filters []acl.Filter) ([]controlplane.ACLDeletion, error) {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	deletions, recs := planDeleteACLs(img, filters)
	if len(recs) == 0 {
		return deletions, nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return nil, err
	}
	c.log.Info("deleted ACL bindings", "filters", len(filters), "removed", len(recs))
	return deletions, nil
}

// aclVersionErr refuses ACL changes in a log below the version that has
// their records, as Kafka's controller does below its own.
func aclVersionErr(img *metadata.Image) error {
	if img.MetadataVersion < metadata.ACLMetadataVersion {
		return fmt.Errorf("%w: ACL bindings need metadata version %d; the log is at %d",
			kerr.UnsupportedVersion, metadata.ACLMetadataVersion, img.MetadataVersion)
	}
	return nil
}

// planCreateACLs decides a CreateAcls against img: an error per binding
// (nil: it is there once the records commit) and an ACLRecord for each
// binding neither in img nor earlier in the request.
//
// Kafka's rules, in its order: the request's shape (the bound, and
// acl.Validate per binding: controlplane.CheckACLCreations); then a
// binding already stored, or already added by this request, is success
// with no record. Fjord's own: the metadata version (refusing every
// binding of a request not refused whole for its size), and the bound on
// stored bindings, counting the new ones in request order, so the
// bindings past it are refused and those before it added.
func planCreateACLs(img *metadata.Image, bindings []acl.Binding) ([]error, []metadata.Record) {
	errs, tooMany := controlplane.CheckACLCreations(bindings)
	if tooMany {
		return errs, nil
	}
	if err := aclVersionErr(img); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil
	}
	var recs []metadata.Record
	added := map[acl.Binding]bool{}
	count := img.ACLs.Len()
	for i, b := range bindings {
		if errs[i] != nil || img.ACLs.Contains(b) || added[b] {
			continue
		}
		if count >= metadata.MaxACLs {
			errs[i] = fmt.Errorf("%w: %d ACL bindings exist already (at most %d); delete some first",
				controlplane.ErrInvalidRequest, count, metadata.MaxACLs)
			continue
		}
		count++
		added[b] = true
		recs = append(recs, metadata.NewACLRecord(b))
	}
	return errs, recs
}

// planDeleteACLs decides a DeleteAcls against img: per filter, the
// bindings it matches or its error, and a RemoveACLRecord for each
// binding some filter matched, once, in the order first matched. A
// request whose filters list more than
// controlplane.MaxACLDeletionMatches bindings in all is refused whole;
// the count stops there, so refusing costs no more than that.
func planDeleteACLs(img *metadata.Image, filters []acl.Filter) ([]controlplane.ACLDeletion, []metadata.Record) {
	errs, tooMany := controlplane.CheckACLFilters(filters)
	deletions := make([]controlplane.ACLDeletion, len(filters))
	refuseAll := func(err error) ([]controlplane.ACLDeletion, []metadata.Record) {
		for i := range deletions {
			deletions[i] = controlplane.ACLDeletion{Err: err}
		}
		return deletions, nil
	}
	if tooMany {
		return refuseAll(errs[0])
	}
	if err := aclVersionErr(img); err != nil {
		return refuseAll(err)
	}
	listed := 0
	for i, f := range filters {
		if errs[i] != nil {
			deletions[i].Err = errs[i]
			continue
		}
		matched := img.ACLs.Matching(f)
		if listed += len(matched); listed > controlplane.MaxACLDeletionMatches {
			return refuseAll(fmt.Errorf("%w: the filters match more than %d ACL bindings in all (a binding matched by two filters counts twice); delete them in smaller requests",
				controlplane.ErrInvalidRequest, controlplane.MaxACLDeletionMatches))
		}
		deletions[i].Deleted = matched
	}
	var recs []metadata.Record
	removed := map[acl.Binding]bool{}
	for _, d := range deletions {
		for _, b := range d.Deleted {
			if !removed[b] {
				removed[b] = true
				recs = append(recs, metadata.NewRemoveACLRecord(b))
			}
		}
	}
	return deletions, recs
}
