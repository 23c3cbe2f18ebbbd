package kafkaserver

// CreateAcls: v0-3
//
// Adds ACL bindings through the active controller and answers each
// creation, by index. In order (apis_acl.go): SECURITY_DISABLED without
// an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on the
// cluster, both for every creation; more than
// controlplane.MaxACLCreations creations is INVALID_REQUEST for every
// one, and nothing is sent. Then per creation: version 0 takes only
// LITERAL patterns (UNSUPPORTED_VERSION), acl.Validate's rules
// (INVALID_REQUEST: unknown or filter-only codes, the CLUSTER name, an
// empty name, the principal, the host, lengths, UTF-8). The creations
// left go to the controller together, which adds the ones not there yet
// in one batch; a binding that exists is success and writes nothing, as
// in Kafka.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

func handleCreateACLs(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.CreateACLsRequest)
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.SetVersion(req.version)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}

	whole := s.aclRequestError(req, acl.OperationAlter)
	var errs []error
	if whole == nil {
		bindings := make([]acl.Binding, len(r.Creations))
		for i, c := range r.Creations {
			bindings[i] = acl.Binding{
				Pattern: acl.ResourcePattern{Type: c.ResourceType, Name: c.ResourceName, PatternType: c.ResourcePatternType},
				Entry:   acl.Entry{Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType},
			}
		}
		var tooMany bool
		if errs, tooMany = controlplane.CheckACLCreations(bindings); tooMany {
			whole = errs[0]
		} else {
			s.createACLs(ctx, req.version, bindings, errs)
		}
	}
	if whole != nil {
		refusal := s.refuseACLRequest(whole, "CreateAcls", len(r.Creations), controlplane.MaxACLCreations)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = refusal.entry(i)
		}
		return resp, nil, nil
	}
	for i, err := range errs {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = s.aclErrorAndMessage(err, "CreateAcls")
	}
	return resp, nil, nil
}

// createACLs sends the bindings errs does not refuse to the controller,
// after the version-0 rule, and puts its answers in errs.
func (s *Server) createACLs(ctx context.Context, version int16, bindings []acl.Binding, errs []error) {
	var (
		ask []acl.Binding
		at  []int // at[j]: the index in bindings of ask[j]
	)
	for i, b := range bindings {
		if version == 0 && b.Pattern.PatternType != acl.PatternLiteral {
			// CreateAclsRequest.validate, before the other rules.
			errs[i] = fmt.Errorf("%w: version 0 only supports LITERAL resource patterns, not %s", kerr.UnsupportedVersion, b.Pattern.PatternType)
		}
		if errs[i] == nil {
			ask = append(ask, b)
			at = append(at, i)
		}
	}
	if len(ask) == 0 {
		return
	}
	answers, err := s.controller.CreateACLs(ctx, ask)
	for j, i := range at {
		switch {
		case err != nil:
			errs[i] = err
		case j < len(answers):
			errs[i] = answers[j]
		default:
			// The controller answers every binding (forward checks a
			// remote one's count); one missing is a broken invariant
			// there, not the client's doing.
			errs[i] = fmt.Errorf("kafkaserver: the controller answered %d ACL creations of %d", len(answers), len(ask))
		}
	}
}
