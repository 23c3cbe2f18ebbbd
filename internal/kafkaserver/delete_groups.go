package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// DeleteGroups: v0-2
//
// Deletes empty groups and their committed offsets (tombstones in
// __consumer_offsets). A group with members is NON_EMPTY_GROUP; an
// unknown one GROUP_ID_NOT_FOUND.
//
// Authorization (APIS.md): DELETE on each group, each distinct group
// decided once. A denied group is answered GROUP_AUTHORIZATION_FAILED
// whether or not it exists and is never handed to the coordinator, so
// nothing of it is deleted; the others are deleted as asked. Answers
// stay in the request's order (Kafka lists the denied groups last;
// clients match answers by name).
func handleDeleteGroups(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.DeleteGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DeleteGroupsResponse)
	del := s.authzByName(req, acl.OperationDelete, acl.ResourceGroup)
	// allowed[k] is the request index of the k-th group the coordinator
	// is asked to delete; errs[k] answers it.
	var allowed []int
	var names []string
	for i, g := range body.Groups {
		if del.allowed(g) {
			allowed = append(allowed, i)
			names = append(names, g)
		}
	}
	var errs []error
	if s.groups != nil && len(names) > 0 {
		errs = s.groups.DeleteGroups(ctx, names)
	}
	codes := make([]int16, len(body.Groups))
	for i := range codes {
		codes[i] = kerr.GroupAuthorizationFailed.Code
	}
	for k, i := range allowed {
		switch {
		case s.groups == nil:
			codes[i] = kerr.CoordinatorNotAvailable.Code
		case k < len(errs):
			codes[i] = s.errorCodeLogged(errs[k], "DeleteGroups", "group", body.Groups[i])
		default:
			codes[i] = 0
		}
	}
	for i, g := range body.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, codes[i]
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
