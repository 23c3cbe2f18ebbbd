package kafkaserver

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5
//
// Each group's state, protocol and members, with each member's metadata
// and assignment as the client encoded them (tools decode the consumer
// protocol's). Authorized operations (v3+) are not computed: there is no
// authorization yet, so the answer is Kafka's "not requested" value,
// math.MinInt32, whether asked for or not. v4+ answer group.instance.id.
func handleDescribeGroups(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.DescribeGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range body.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = g
		rg.AuthorizedOperations = math.MinInt32
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
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
