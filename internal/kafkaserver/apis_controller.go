package kafkaserver

// controllerAPIs: the requests Fjord nodes send the active controller.
// In Kafka they go to a separate controller listener; a Fjord node has
// one listener, and these are served only while it is the active
// controller (NOT_CONTROLLER otherwise: the sender finds the controller
// again and retries). They are never forwarded.
//
// BrokerRegistration: v0-4
//
// A node registers its listener, rack and incarnation id on every start
// and gets its broker epoch, the offset of the registration in the
// metadata log. Refused, with nothing changed: another cluster's id
// (INCONSISTENT_CLUSTER_ID), a negative node id, a zero incarnation id,
// no PLAINTEXT listener or one without a host or port, a rack
// metadata.ValidateRack refuses, a node id that is not a voter of the
// controller quorum (INVALID_REGISTRATION). The features
// and log directories later versions carry are not used yet.
//
// Every request here needs CLUSTER_ACTION on the cluster (authz.go), as
// Kafka's controller asks: the sending node's principal must be a super
// user, or hold that binding. Without it, CLUSTER_AUTHORIZATION_FAILED.
//
// BrokerHeartbeat: v0-1
//
// Renews a node's session with the active controller (in its memory:
// controller/sessions.go). Served only to another Fjord node for itself
// (CLUSTER_AUTHORIZATION_FAILED otherwise), with its current broker
// epoch (STALE_BROKER_EPOCH) and a registration (BROKER_ID_NOT_REGISTERED).
// CurrentMetadataOffset is the image the node has applied, by which the
// controller unfences a new registration. The answer's IsFenced is the
// broker's state in this node's image; IsCaughtUp is true. WantShutdown
// starts the node's controlled shutdown, and ShouldShutdown answers it
// once the node leads nothing.
//
// AllocateProducerIds: v0
//
// Commits a block of producer ids for the sending node, which hands them
// to its InitProducerId callers. Served only to another Fjord node, named
// by its internal client id (controlplane.InternalClient) and sending
// its own node id (CLUSTER_AUTHORIZATION_FAILED otherwise, so an outside
// client cannot burn through ids), with its current broker epoch
// (STALE_BROKER_EPOCH: a request from a process since replaced).
//
// AlterPartition: v2-3, in alter_partition.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

var controllerAPIs = []api{
	{key: 62, minVersion: 0, maxVersion: 4, handle: handleBrokerRegistration, controlChange: true},
	{key: 56, minVersion: 2, maxVersion: 3, handle: handleAlterPartition, controlChange: true},
	{key: 63, minVersion: 0, maxVersion: 1, handle: handleBrokerHeartbeat, controlChange: true},
	{key: 67, minVersion: 0, maxVersion: 0, handle: handleAllocateProducerIDs, controlChange: true},
}

func handleBrokerRegistration(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.BrokerRegistrationRequest)
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	resp.SetVersion(req.version)
	resp.BrokerEpoch = -1

	var rec metadata.BrokerRecord
	err := errNodeNotAuthorized("BrokerRegistration", req)
	if s.allowedCluster(req, acl.OperationClusterAction) {
		rec, err = registrationFromRequest(s.image(), r)
	}
	if err == nil && !quorumMember(s.controller, r.BrokerID) {
		// Every node is a voter of the quorum or an observer of its
		// log (a broker-only node, which asked to be one first): a
		// registration for any other id is a mistake or a client
		// making up brokers, which placement would put replicas on.
		q := s.controller.QuorumState()
		err = fmt.Errorf("%w: broker %d is not a member of the controller quorum (voters %v, observers %v)",
			kerr.InvalidRegistration, r.BrokerID, s.controller.Voters(), nodeIDs(q.Observers))
	}
	if err == nil {
		resp.BrokerEpoch, err = s.controller.RegisterBroker(controlplane.LocalOnly(ctx), rec)
	}
	if err != nil {
		resp.BrokerEpoch = -1
		resp.ErrorCode = s.errorCodeLogged(err, "BrokerRegistration", "node", r.BrokerID)
		s.log.Info("kafkaserver: broker registration refused", "node", r.BrokerID, "err", err)
	}
	return resp, nil, nil
}

// quorumMember reports whether id is a voter or an observer of the
// quorum q describes.
func quorumMember(q controlplane.Quorum, id int32) bool {
	return slices.Contains(q.Voters(), id) || slices.Contains(nodeIDs(q.QuorumState().Observers), id)
}

func nodeIDs(vs []controlplane.VoterState) []int32 {
	ids := make([]int32, len(vs))
	for i, v := range vs {
		ids[i] = v.NodeID
	}
	return ids
}

// registrationFromRequest checks a BrokerRegistration and turns it into
// the record the controller commits.
func registrationFromRequest(img *metadata.Image, r *kmsg.BrokerRegistrationRequest) (metadata.BrokerRecord, error) {
	rec := metadata.BrokerRecord{NodeID: r.BrokerID, IncarnationID: r.IncarnationID}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: broker %d: %s", kerr.InvalidRegistration, r.BrokerID, fmt.Sprintf(format, args...))
	}
	switch {
	case img.ClusterID == "" || r.ClusterID != img.ClusterID:
		return rec, fmt.Errorf("%w: broker %d registers with cluster %q; this is cluster %q",
			controlplane.ErrInconsistentClusterID, r.BrokerID, r.ClusterID, img.ClusterID)
	case r.BrokerID < 0:
		return rec, invalid("node id below 0")
	case r.IncarnationID == [16]byte{}:
		return rec, invalid("no incarnation id")
	case len(r.Listeners) > 16:
		return rec, invalid("%d listeners (at most 16)", len(r.Listeners))
	}
	// The first listener is the inter-broker one (Fjord's registering
	// nodes send it first; a node of one listener sends only it).
	if len(r.Listeners) == 0 {
		return rec, invalid("no listeners")
	}
	for i, l := range r.Listeners {
		if len(l.Name) == 0 || len(l.Name) > 64 || len(l.Host) > 255 {
			return rec, invalid("listener %q host of %d bytes (want a name of 1 to 64 bytes and a host of at most 255)", l.Name, len(l.Host))
		}
		if l.Host == "" || l.Port == 0 {
			return rec, invalid("listener %s %q port %d (want a host and a port 1..65535)", l.Name, l.Host, l.Port)
		}
		if l.SecurityProtocol < 0 || l.SecurityProtocol > 3 {
			return rec, invalid("listener %s security protocol %d (want 0 to 3)", l.Name, l.SecurityProtocol)
		}
		if slices.ContainsFunc(rec.Listeners, func(e metadata.Endpoint) bool { return e.Name == l.Name }) {
			return rec, invalid("listener %s named twice", l.Name)
		}
		if i == 0 {
			rec.Host, rec.Port = l.Host, int32(l.Port)
		}
		rec.Listeners = append(rec.Listeners, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: l.SecurityProtocol})
	}
	if r.Rack != nil {
		if err := metadata.ValidateRack(*r.Rack); err != nil {
			return rec, invalid("%v", err)
		}
		rec.Rack = *r.Rack
	}
	return rec, nil
}

func handleAllocateProducerIDs(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AllocateProducerIDsRequest)
	resp := kmsg.NewPtrAllocateProducerIDsResponse()
	resp.SetVersion(req.version)
	resp.ProducerIDStart, resp.ProducerIDLen = -1, 0

	fail := func(err error) (kmsg.Response, func(), error) {
		resp.ErrorCode = s.errorCodeLogged(err, "AllocateProducerIds", "node", r.BrokerID)
		return resp, nil, nil
	}
	img := s.image()
	node, ok := s.internalPeer(req)
	switch b, registered := img.Brokers[r.BrokerID]; {
	case !ok || node != r.BrokerID:
		return fail(fmt.Errorf("%w: AllocateProducerIds is for Fjord nodes asking for their own ids (broker %d)",
			kerr.ClusterAuthorizationFailed, r.BrokerID))
	case !s.allowedCluster(req, acl.OperationClusterAction):
		return fail(errNodeNotAuthorized("AllocateProducerIds", req))
	case !registered || b.Epoch != r.BrokerEpoch:
		return fail(fmt.Errorf("%w: broker %d epoch %d is not its current one", kerr.StaleBrokerEpoch, r.BrokerID, r.BrokerEpoch))
	}
	first, count, err := s.controller.AllocateProducerIDs(controlplane.LocalOnly(ctx), r.BrokerID)
	if err != nil {
		return fail(err)
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, int32(count)
	return resp, nil, nil
}

func handleBrokerHeartbeat(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.BrokerHeartbeatRequest)
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.SetVersion(req.version)
	var (
		ans controlplane.HeartbeatAnswer
		err error
	)
	_, registered := s.image().Brokers[r.BrokerID]
	switch node, ok := s.internalPeer(req); {
	case !ok && !registered:
		// A node's client id is recognised by its registration, so an
		// unregistered node (fjord cluster drain) is not; it is told what
		// happened, as the controller would tell it, and stops its
		// heartbeats instead of retrying them for good. Whether a broker
		// id is registered is no secret: Metadata lists the brokers.
		err = fmt.Errorf("%w: broker %d", controlplane.ErrBrokerNotRegistered, r.BrokerID)
	case !ok || node != r.BrokerID:
		err = fmt.Errorf("%w: BrokerHeartbeat is for Fjord nodes renewing their own sessions (broker %d)",
			kerr.ClusterAuthorizationFailed, r.BrokerID)
	case !s.allowedCluster(req, acl.OperationClusterAction):
		err = errNodeNotAuthorized("BrokerHeartbeat", req)
	case r.CurrentMetadataOffset < 0:
		err = fmt.Errorf("%w: BrokerHeartbeat with metadata offset %d", kerr.InvalidRequest, r.CurrentMetadataOffset)
	default:
		ans, err = s.controller.BrokerHeartbeat(controlplane.LocalOnly(ctx), controlplane.Heartbeat{
			NodeID: r.BrokerID, BrokerEpoch: r.BrokerEpoch, MetadataOffset: uint64(r.CurrentMetadataOffset), WantShutDown: r.WantShutdown})
	}
	resp.ShouldShutdown = ans.ShouldShutDown
	switch {
	case errors.Is(err, controlplane.ErrBrokerFenced):
		// Counted, and the broker told it is fenced (Kafka's field):
		// the forwarding client turns it back into ErrBrokerFenced.
		resp.IsCaughtUp, resp.IsFenced = true, true
		return resp, nil, nil
	case err != nil:
		resp.ErrorCode = s.errorCodeLogged(err, "BrokerHeartbeat", "node", r.BrokerID)
		return resp, nil, nil
	}
	// IsFenced defaults to true in Kafka's schema (and in kmsg's
	// Default): an answer for an unfenced broker must clear it.
	resp.IsCaughtUp, resp.IsFenced = true, false
	return resp, nil, nil
}
