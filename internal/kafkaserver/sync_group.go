package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// SyncGroup: v0-5
//
// The leader's assignments go to the coordinator, which answers every
// member with its own once the leader's have been written to
// __consumer_offsets; a follower's request waits for that. A member
// named twice in the leader's assignments gets the last one, as in
// Kafka. v3+ carries group.instance.id; v5+ the protocol type and name,
// which must be given and match the group's (INCONSISTENT_GROUP_PROTOCOL
// otherwise, as Kafka answers), and answers them.
//
// Authorization (APIS.md): READ on the group, for the whole request
// (GROUP_AUTHORIZATION_FAILED), after the v5 fields are checked, as
// Kafka orders them (a request missing them says nothing of the group),
// and before the coordinator sees it: a denied leader's assignments are
// not stored.
func handleSyncGroup(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.SyncGroupRequest)
	resp := body.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.MemberAssignment = []byte{}
	if req.version >= 5 && (body.ProtocolType == nil || body.Protocol == nil) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp, nil, nil
	}
	if !s.allowedGroup(req, acl.OperationRead, body.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	if s.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	sr := group.SyncRequest{
		Group:      body.Group,
		MemberID:   body.MemberID,
		InstanceID: body.InstanceID,
		Generation: body.Generation,
	}
	if req.version >= 5 {
		sr.ProtocolType, sr.Protocol = body.ProtocolType, body.Protocol
	}
	if len(body.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(body.GroupAssignment))
		for _, a := range body.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	res := s.groups.SyncGroup(ctx, sr)
	resp.ErrorCode = s.errorCodeLogged(res.Err, "SyncGroup", "group", body.Group)
	resp.MemberAssignment = res.Assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	if req.version >= 5 && res.Err == nil {
		pt, p := res.ProtocolType, res.Protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
	}
	return resp, nil, nil
}
