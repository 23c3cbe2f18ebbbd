package kafkaserver

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// ListGroups: v0-5
//
// The groups this node coordinates; while some of its __consumer_offsets
// partitions are still loading, those it has, with
// COORDINATOR_LOAD_IN_PROGRESS. v4+ filter by state (KIP-518; Kafka
// matches state names case-insensitively); v5+ by type (KIP-848): every
// group here is "classic", so a filter without "classic" lists none.
//
// Authorization (APIS.md): a caller with DESCRIBE on the cluster sees
// every group; any other only the groups it may DESCRIBE, the rest left
// out without an error. Both checks are quiet (not counted or logged as
// denials): they shape a listing, they refuse nothing asked for, as
// Kafka's logIfDenied=false.
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
	var describe *nameAuthz
	if !s.allowedQuiet(req, acl.OperationDescribe, acl.ResourceCluster, acl.ClusterName) {
		describe = s.authzFilterByName(req, acl.OperationDescribe, acl.ResourceGroup)
	}
	for _, g := range listed {
		if describe != nil && !describe.allowed(g.Group) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, g.State, "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, nil
}
