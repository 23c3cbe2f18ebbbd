package kafkaserver

// DeleteAcls: v0-3
//
// Deletes the bindings each filter matches through the active
// controller, and answers each filter, by index, with what it deleted.
// In order (apis_acl.go): SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, both for
// every filter; more than controlplane.MaxACLFilters filters is
// INVALID_REQUEST for every one, and nothing is sent. Then per filter:
// the version-0 pattern rule (UNSUPPORTED_VERSION), acl.ValidateFilter
// (INVALID_REQUEST for an unknown code). The filters left go to the
// controller together, which applies them to one image and commits the
// removals in one batch: a binding two filters match is removed once and
// listed under both, as in Kafka. The answer lists at most
// controlplane.MaxACLDeletionMatches bindings (the controller refuses
// a request that would list more).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

func handleDeleteACLs(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DeleteACLsRequest)
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.SetVersion(req.version)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}

	whole := s.aclRequestError(req, acl.OperationAlter)
	var deletions []controlplane.ACLDeletion
	if whole == nil {
		filters := make([]acl.Filter, len(r.Filters))
		pts := make([]error, len(r.Filters)) // the version-0 rule's refusals
		for i, f := range r.Filters {
			var pt acl.PatternType
			pt, pts[i] = checkVersion0Pattern(req.version, f.ResourcePatternType)
			filters[i] = acl.Filter{
				ResourceType: f.ResourceType, Name: f.ResourceName, PatternType: pt,
				Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType,
			}
		}
		errs, tooMany := controlplane.CheckACLFilters(filters)
		if tooMany {
			whole = errs[0]
		} else {
			for i, err := range pts {
				if err != nil {
					errs[i] = err // before ValidateFilter's, as Kafka's parse
				}
			}
			deletions = s.deleteACLs(ctx, filters, errs)
		}
	}
	if whole != nil {
		refusal := s.refuseACLRequest(whole, "DeleteAcls", len(r.Filters), controlplane.MaxACLFilters)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = refusal.entry(i)
		}
		return resp, nil, nil
	}
	for i, d := range deletions {
		res := &resp.Results[i]
		res.ErrorCode, res.ErrorMessage = s.aclErrorAndMessage(d.Err, "DeleteAcls")
		if d.Err != nil {
			continue
		}
		res.MatchingACLs = make([]kmsg.DeleteACLsResponseResultMatchingACL, len(d.Deleted))
		for j, b := range d.Deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
			res.MatchingACLs[j] = m
		}
	}
	return resp, nil, nil
}

// deleteACLs sends the filters errs does not refuse to the controller
// and returns the answer for every filter: errs[i]'s refusal or the
// controller's deletion.
func (s *Server) deleteACLs(ctx context.Context, filters []acl.Filter, errs []error) []controlplane.ACLDeletion {
	out := make([]controlplane.ACLDeletion, len(filters))
	var (
		ask []acl.Filter
		at  []int // at[j]: the index in filters of ask[j]
	)
	for i, err := range errs {
		if err != nil {
			out[i].Err = err
			continue
		}
		ask = append(ask, filters[i])
		at = append(at, i)
	}
	if len(ask) == 0 {
		return out
	}
	answers, err := s.controller.DeleteACLs(ctx, ask)
	for j, i := range at {
		switch {
		case err != nil:
			out[i].Err = err
		case j < len(answers):
			out[i] = answers[j]
		default:
			out[i].Err = fmt.Errorf("kafkaserver: the controller answered %d ACL filters of %d", len(answers), len(ask))
		}
	}
	return out
}
