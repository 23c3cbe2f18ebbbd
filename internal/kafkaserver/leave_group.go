package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// LeaveGroup: v0-5
//
// v0-2 name one member, whose error is the answer's; v3+ (KIP-345) name
// a batch, by member id or group.instance.id, each answered on its own,
// with the answer's error for the group as a whole (an unknown group,
// not this coordinator's). v5 adds a reason per member.
//
// Authorization (APIS.md): READ on the group, for the whole request,
// before the coordinator sees it: a denied caller removes no member,
// and is answered GROUP_AUTHORIZATION_FAILED for the group with no
// members listed (Kafka's error response).
func handleLeaveGroup(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.LeaveGroupRequest)
	resp := body.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !s.allowedGroup(req, acl.OperationRead, body.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	if s.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	var members []group.LeaveMember
	if req.version < 3 {
		members = []group.LeaveMember{{MemberID: body.MemberID}}
	} else {
		for _, m := range body.Members {
			lm := group.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
			if m.Reason != nil {
				lm.Reason = *m.Reason
			}
			members = append(members, lm)
		}
	}
	err, memberErrs := s.groups.LeaveGroup(ctx, body.Group, members)
	resp.ErrorCode = s.errorCodeLogged(err, "LeaveGroup", "group", body.Group)
	if req.version < 3 {
		if err == nil && len(memberErrs) == 1 {
			resp.ErrorCode = s.errorCodeLogged(memberErrs[0], "LeaveGroup", "group", body.Group)
		}
		return resp, nil, nil
	}
	if err != nil {
		return resp, nil, nil
	}
	for i, m := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		if i < len(memberErrs) {
			rm.ErrorCode = s.errorCodeLogged(memberErrs[i], "LeaveGroup", "group", body.Group)
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil, nil
}
