package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// Heartbeat: v0-4
//
// Keeps a member's session alive and tells it when to rejoin
// (REBALANCE_IN_PROGRESS). v3+ carries group.instance.id.
//
// Authorization (APIS.md): READ on the group, for the whole request,
// before the coordinator sees it: a denied heartbeat keeps no session
// alive (GROUP_AUTHORIZATION_FAILED).
func handleHeartbeat(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.HeartbeatRequest)
	resp := body.ResponseKind().(*kmsg.HeartbeatResponse)
	if !s.allowedGroup(req, acl.OperationRead, body.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	if s.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	err := s.groups.Heartbeat(group.HeartbeatRequest{
		Group:      body.Group,
		MemberID:   body.MemberID,
		InstanceID: body.InstanceID,
		Generation: body.Generation,
	})
	resp.ErrorCode = s.errorCodeLogged(err, "Heartbeat", "group", body.Group)
	return resp, nil, nil
}
