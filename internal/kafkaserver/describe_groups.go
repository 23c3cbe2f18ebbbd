package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// DescribeGroups: v0-5
//
// Each group's state, protocol and members, with each member's metadata
// and assignment as the client encoded them (tools decode the consumer
// protocol's). v4+ answer group.instance.id.
//
// Authorization (APIS.md): DESCRIBE on each group, each distinct group
// decided once, before the coordinator is asked about it. A denied
// group is answered GROUP_AUTHORIZATION_FAILED with an empty state,
// protocol and member list (Kafka's DescribeGroupsResponse.groupError),
// whether or not it exists.
//
// Authorized operations (v3+, KIP-430): when the request includes them,
// a group answered without error carries the bit field of what the
// caller may do on it (every group operation when authorization is off,
// as Kafka without an authorizer); otherwise, and for a group answered
// with an error, Kafka's "not provided" (notAskedOperations).
func handleDescribeGroups(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.DescribeGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeGroupsResponse)
	describe := s.authzByName(req, acl.OperationDescribe, acl.ResourceGroup)
	includeOperations := req.version >= 3 && body.IncludeAuthorizedOperations
	for _, g := range body.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = g
		rg.AuthorizedOperations = notAskedOperations
		if !describe.allowed(g) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if s.groups == nil {
			rg.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := s.groups.DescribeGroup(g)
		rg.ErrorCode = s.errorCodeLogged(err, "DescribeGroups", "group", g)
		rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = nonNil(m.Metadata), nonNil(m.Assignment)

			rg.Members = append(rg.Members, rm)
		}
		if includeOperations && err == nil {
			rg.AuthorizedOperations = s.authorizedOperations(req, acl.ResourceGroup, g)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
