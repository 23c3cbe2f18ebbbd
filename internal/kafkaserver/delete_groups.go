package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Deletes empty groups and their committed offsets (tombstones in
// __consumer_offsets). A group with members is NON_EMPTY_GROUP; an
// unknown one GROUP_ID_NOT_FOUND.
func handleDeleteGroups(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.DeleteGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var errs []error
	if s.groups != nil && len(body.Groups) > 0 {
		errs = s.groups.DeleteGroups(ctx, body.Groups)
	}
	for i, g := range body.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		switch {
		case s.groups == nil:
			rg.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case i < len(errs):
			rg.ErrorCode = s.errorCodeLogged(errs[i], "DeleteGroups", "group", g)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
