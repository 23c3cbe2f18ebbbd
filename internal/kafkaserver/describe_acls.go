package kafkaserver

// DescribeAcls: v0-3
//
// Answers the bindings one filter matches (acl.Set.Matching) from this
// node's image, grouped by resource pattern as Kafka's
// DescribeAclsResponse.aclsResources does: one resource per pattern,
// with its entries. The response has one error, for the whole request,
// in order (apis_acl.go): SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster, the
// version-0 pattern rule (UNSUPPORTED_VERSION), then
// acl.ValidateFilter (INVALID_REQUEST for an unknown code). The answer
// is at most every binding stored (metadata.MaxACLs), whatever was asked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

func handleDescribeACLs(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	resp.SetVersion(req.version)
	f, err := describeACLsFilter(s, req, r)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.aclErrorAndMessage(err, "DescribeAcls")
		return resp, nil, nil
	}
	resp.Resources = aclResources(s.image().ACLs.Matching(f))
	return resp, nil, nil
}

// describeACLsFilter checks a DescribeAcls in order and returns its
// filter.
func describeACLsFilter(s *Server, req *request, r *kmsg.DescribeACLsRequest) (acl.Filter, error) {
	if err := s.aclRequestError(req, acl.OperationDescribe); err != nil {
		return acl.Filter{}, err
	}
	pt, err := checkVersion0Pattern(req.version, r.ResourcePatternType)
	if err != nil {
		return acl.Filter{}, err
	}
	f := acl.Filter{
		ResourceType: r.ResourceType, Name: r.ResourceName, PatternType: pt,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	}
	return f, acl.ValidateFilter(f)
}

// aclResources groups bindings by pattern. acl.Set.Matching sorts by
// pattern first, so each pattern's bindings are adjacent.
func aclResources(bindings []acl.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for i, b := range bindings {
		if i == 0 || b.Pattern != bindings[i-1].Pattern {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.Pattern.Type, b.Pattern.Name, b.Pattern.PatternType
			out = append(out, res)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = b.Entry.Principal, b.Entry.Host, b.Entry.Operation, b.Entry.Permission
		res := &out[len(out)-1]
		res.ACLs = append(res.ACLs, e)
	}
	return out
}
