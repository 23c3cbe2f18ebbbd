package kafkaserver

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// JoinGroup: v0-9
//
// The classic protocol's first step; the coordinator (internal/group)
// holds the request until the rebalance completes, so this handler's
// goroutine blocks, as a parked fetch does, and ends early when the
// connection closes. v0 and v1 stay served: Kafka 4.0.0 dropped them and
// kafka-go and kafka_ex broke (KAFKA-API.md). Version differences:
//
//   - v0 has no rebalance timeout: the session timeout is both (Kafka's
//     rule).
//   - v4+ (KIP-394): a member without an id is first answered
//     MEMBER_ID_REQUIRED with the id to rejoin with.
//   - v5+ carries group.instance.id (static membership, KIP-345).
//   - v7+ answers the protocol type; v8 adds a reason; v9 answers
//     SkipAssignment (KIP-814).
//
// The member's client host is its address as Kafka shows it ("/" and the
// IP), for DescribeGroups and `fjord group describe`.
//
// Authorization (APIS.md): READ on the group, for the whole request,
// before the coordinator sees it, so a denied join neither creates the
// group nor adds a member (GROUP_AUTHORIZATION_FAILED).
func handleJoinGroup(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.JoinGroupRequest)
	resp := body.ResponseKind().(*kmsg.JoinGroupResponse)
	empty := ""
	resp.Protocol, resp.Generation = &empty, -1 // non-null before v7
	if !s.allowedGroup(req, acl.OperationRead, body.Group) {
		joinGroupError(resp, req.version, kerr.GroupAuthorizationFailed)
		return resp, nil, nil
	}
	if s.groups == nil {
		joinGroupError(resp, req.version, kerr.CoordinatorNotAvailable)
		return resp, nil, nil
	}
	jr := group.JoinRequest{
		Group:                body.Group,
		MemberID:             body.MemberID,
		InstanceID:           body.InstanceID,
		ClientID:             clientIDOf(req),
		ClientHost:           clientHostOf(req),
		ProtocolType:         body.ProtocolType,
		SessionTimeout:       time.Duration(body.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(body.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: req.version >= 4,
		// v9+ can be told to skip the assignment (KIP-814).
		SupportsSkipAssignment: req.version >= 9,
	}
	if req.version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if body.Reason != nil {
		jr.Reason = *body.Reason
	}
	for _, p := range body.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	res := s.groups.JoinGroup(ctx, jr)
	resp.ErrorCode = s.errorCodeLogged(res.Err, "JoinGroup", "group", body.Group)
	resp.Generation = res.Generation
	resp.MemberID = res.MemberID
	resp.LeaderID = res.LeaderID
	resp.SkipAssignment = res.SkipAssignment
	protocol, protocolType := res.Protocol, res.ProtocolType
	switch {
	case req.version < 7:
		resp.Protocol = &protocol // not nullable before v7
	case res.Err == nil:
		resp.Protocol, resp.ProtocolType = &protocol, &protocolType
	default:
		resp.Protocol = nil // Kafka answers an error with no protocol
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil, nil
}

// joinGroupError makes resp the answer of a JoinGroup refused before
// the coordinator: the error, generation -1, no member, and from v7 a
// null protocol, as Kafka answers any error (JoinGroupRequest's error
// response); before v7 the protocol is not nullable and stays "".
func joinGroupError(resp *kmsg.JoinGroupResponse, version int16, err *kerr.Error) {
	resp.ErrorCode, resp.Generation = err.Code, -1
	if version >= 7 {
		resp.Protocol = nil
	}
}

// clientIDOf is the request header's client id ("" when null).
func clientIDOf(req *request) string {
	if req.clientID == nil {
		return ""
	}
	return *req.clientID
}

// clientHostOf is the client's address as Kafka reports it: "/" and the
// IP.
func clientHostOf(req *request) string {
	if req.conn == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(req.conn.remote)
	if err != nil {
		return "/" + req.conn.remote
	}
	return "/" + host
}
