package forward

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

// CreateACLs implements controlplane.Client with Kafka's CreateAcls,
// sent to the active controller at the newest version both sides serve
// (franz-go negotiates it; Fjord serves v0-3, flexible from v2, so the
// answer carries the metadata-offset tag).
func (c *Client) CreateACLs(ctx context.Context, bindings []acl.Binding) (errs []error, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		var err error
		errs, err = c.cfg.Local.CreateACLs(ctx, bindings)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrCreateACLsRequest()
		for _, b := range bindings {
			rc := kmsg.NewCreateACLsRequestCreation()
			rc.ResourceType, rc.ResourceName, rc.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
			rc.Principal, rc.Host, rc.Operation, rc.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
			req.Creations = append(req.Creations, rc)
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		// Kafka answers creations by index. A count that differs is a
		// controller that does not serve the request as this node
		// would: the change may or may not be in, as with a lost answer.
		results := resp.(*kmsg.CreateACLsResponse).Results
		if len(results) != len(bindings) {
			return fmt.Errorf("%w: the controller answered %d ACL creations of %d", controlplane.ErrTimedOut, len(results), len(bindings))
		}
		errs = make([]error, len(results))
		for i, r := range results {
			errs[i] = codeError(r.ErrorCode, r.ErrorMessage)
		}
		return c.settle(ctx, errs, offset)
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// DeleteACLs implements controlplane.Client with Kafka's DeleteAcls,
// sent to the active controller as CreateACLs is. A binding the answer
// lists under a filter that does not match it is a controller that does
// not serve the request as this node would (or answers another's), and
// is not trusted, as a wrong count is not.
func (c *Client) DeleteACLs(ctx context.Context, filters []acl.Filter) (deletions []controlplane.ACLDeletion, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		var err error
		deletions, err = c.cfg.Local.DeleteACLs(ctx, filters)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrDeleteACLsRequest()
		for _, f := range filters {
			rf := kmsg.NewDeleteACLsRequestFilter()
			rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = f.ResourceType, f.Name, f.PatternType
			rf.Principal, rf.Host, rf.Operation, rf.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
			req.Filters = append(req.Filters, rf)
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		results := resp.(*kmsg.DeleteACLsResponse).Results
		if len(results) != len(filters) {
			return fmt.Errorf("%w: the controller answered %d ACL filters of %d", controlplane.ErrTimedOut, len(results), len(filters))
		}
		deletions = make([]controlplane.ACLDeletion, len(results))
		errs := make([]error, len(results))
		for i, r := range results {
			d := &deletions[i]
			if d.Err = codeError(r.ErrorCode, r.ErrorMessage); d.Err != nil {
				errs[i] = d.Err
				continue
			}
			for _, m := range r.MatchingACLs {
				b := acl.Binding{
					Pattern: acl.ResourcePattern{Type: m.ResourceType, Name: m.ResourceName, PatternType: m.ResourcePatternType},
					Entry:   acl.Entry{Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType},
				}
				if !filters[i].Matches(b) {
					return fmt.Errorf("%w: the controller answered filter %d with a binding it does not match", controlplane.ErrTimedOut, i)
				}
				// Kafka's per-binding code: a binding the controller
				// could not delete. Fjord's never sets one; another's
				// failing one fails its filter.
				if err := codeError(m.ErrorCode, m.ErrorMessage); err != nil && d.Err == nil {
					d.Err = err
				}
				d.Deleted = append(d.Deleted, b)
			}
			if d.Err != nil {
				d.Deleted = nil
			}
			errs[i] = d.Err
		}
		return c.settle(ctx, errs, offset)
	})
	if err != nil {
		return nil, err
	}
	return deletions, nil
}

// settle ends a forwarded change whose entries the controller answered
// with errs, the request's answer tagged with offset. A node that is no
// longer the controller answers every entry NOT_CONTROLLER (Kafka's ACL
// responses have no top-level error): that is the request's, returned to
// be retried with the controller there is now. Otherwise the change is
// waited for in this node's image when an entry went in, so the caller
// reads its own write.
func (c *Client) settle(ctx context.Context, errs []error, offset uint64) error {
	changed, allRetriable := false, len(errs) > 0
	for _, err := range errs {
		changed = changed || err == nil
		allRetriable = allRetriable && retriable(err)
	}
	if allRetriable {
		return errs[0]
	}
	if !changed {
		return nil
	}
	return c.await(ctx, offset)
}
