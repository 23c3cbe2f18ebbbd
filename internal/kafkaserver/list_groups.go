package kafkaserver

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
//
// The groups this node coordinates; while some of its __consumer_offsets
// partitions are still loading, those it has, with
// COORDINATOR_LOAD_IN_PROGRESS. v4+ filter by state (KIP-518; Kafka
// matches state names case-insensitively); v5+ by type (KIP-848): every
// group here is "classic", so a filter without "classic" lists none.
func handleListGroups(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.ListGroupsRequest)
	resp := body.ResponseKind().(*kmsg.ListGroupsResponse)
	if s.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	if req.version >= 5 && len(body.TypesFilter) > 0 &&
		!slices.ContainsFunc(body.TypesFilter, func(t string) bool { return strings.EqualFold(t, "classic") }) {
		return resp, nil, nil
	}
	var states []string
	if req.version >= 4 && len(body.StatesFilter) > 0 {
		states = body.StatesFilter
	}
	listed, err := s.groups.ListGroups(states)
	// COORDINATOR_LOAD_IN_PROGRESS beside the groups already loaded, as
	// Kafka answers: the admin client retries.
	resp.ErrorCode = s.errorCodeLogged(err, "ListGroups")
	for _, g := range listed {
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, g.State, "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
