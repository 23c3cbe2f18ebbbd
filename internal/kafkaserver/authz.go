package kafkaserver

// Authorization: Kafka's ACLs (issue 20, slice 3) on every API.
//
// The bindings live in the metadata log (metadata.Image.ACLs), so every
// node decides from its own image, and a change reaches every node as
// its image does. The static part (super.users,
// allow.everyone.if.no.acl.found) is the node's configuration
// (Config.ACL). Each handler asks before it does any work, with the
// resource and operation internal/acl/APIS.md lists for its API (read
// from Kafka's KafkaApis and ControllerApis), and answers a denial with
// Kafka's error for the resource: TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Authorization comes before
// existence: a topic the caller may not describe is answered
// TOPIC_AUTHORIZATION_FAILED whether or not it exists, so a client
// cannot probe for names.
//
// The principal and host are the connection's (a TLS certificate's
// subject, a SASL login, or User:ANONYMOUS; the peer's address). A
// request a node forwards to the controller arrives as the forwarding
// node's principal, after the node authorized the client's: the nodes'
// own principal must be a super user (or hold the bindings), as in a
// Kafka cluster.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// ACLConfig turns authorization on (Config.ACL).
type ACLConfig struct {
	// Config is super.users and allow.everyone.if.no.acl.found.
	acl.Config
	// Ready reports whether img has replayed the metadata log far
	// enough to authorize by: at least to every binding committed
	// before this process started (Kafka opens its listeners only once
	// its authorizer has; StandardAuthorizer.start). Until it does, a
	// request from anyone but a super user waits (waitReady). Nil:
	// every image is.
	Ready func(img *metadata.Image) bool
}

// authzReadyWait bounds how long a request waits for the authorizer to
// be ready before its connection is closed (the client reconnects and
// asks again): a node that never catches up must not hold requests
// forever.
const authzReadyWait = 30 * time.Second

// errAuthorizerNotReady closes a connection whose request waited
// authzReadyWait for the node's metadata to catch up.
var errAuthorizerNotReady = errors.New("kafkaserver: the authorizer has not caught up with the metadata log")

// authzState pairs an image with the Authorizer over its bindings, so
// each image's Authorizer is made once (acl.Authorizer.WithSet is O(1),
// but not free of an allocation per request).
type authzState struct {
	img *metadata.Image
	a   *acl.Authorizer
}

// authorizer returns the Authorizer for the latest image, nil when
// authorization is off (every request is allowed).
func (s *Server) authorizer() *acl.Authorizer {
	if s.authzBase == nil {
		return nil
	}
	img := s.image()
	if st := s.authz.Load(); st != nil && st.img == img {
		return st.a
	}
	st := &authzState{img: img, a: s.authzBase.WithSet(img.ACLs)}
	s.authz.Store(st)
	return st.a
}

// Authorizer returns the Authorizer of the latest metadata image (nil
// when authorization is off), and whether it is ready (ACLConfig.Ready:
// the image has replayed the bindings committed before this process
// started). The HTTP API authorizes its routes with it, so they answer
// to the same bindings as the Kafka listeners; until ready, only super
// users may be allowed.
func (s *Server) Authorizer() (a *acl.Authorizer, ready bool) {
	a = s.authorizer()
	if a == nil || s.authzReady.Load() || s.cfg.ACL.Ready == nil {
		return a, true
	}
	if s.cfg.ACL.Ready(s.image()) {
		s.authzReady.Store(true)
		return a, true
	}
	return a, false
}

// principal is the request's principal as "Type:Name" (User:ANONYMOUS
// for a request that did not come on a connection, which only tests
// make).
func (req *request) principal() string {
	if req.conn == nil {
		return Anonymous.String()
	}
	return req.conn.Principal().String()
}

// host is the address the request's connection comes from (the zero
// Addr, which matches only "*" hosts, when it has none).
func (req *request) host() netip.Addr {
	if req.conn == nil {
		return netip.Addr{}
	}
	return req.conn.host
}

// remoteHost is the address of a connection's peer.
func remoteHost(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// allowed reports whether req's principal may do op on the resource of
// type rt called name. A denial is counted, and logged at debug.
func (s *Server) allowed(req *request, op acl.Operation, rt acl.ResourceType, name string) bool {
	a := s.authorizer()
	if a == nil {
		return true
	}
	d := a.Decide(req.principal(), req.host(), op, rt, name)
	if !d.Allowed {
		s.denied(req, op, rt, name, d)
	}
	return d.Allowed
}

// allowedQuiet is allowed without counting or logging a denial: for
// checks that filter what an answer lists (Metadata of every topic,
// ListGroups) rather than refuse what the client asked for, as Kafka's
// logIfDenied=false.
func (s *Server) allowedQuiet(req *request, op acl.Operation, rt acl.ResourceType, name string) bool {
	a := s.authorizer()
	if a == nil {
		return true
	}
	return a.Authorize(req.principal(), req.host(), op, rt, name)
}

// allowedCluster is allowed on the cluster resource.
func (s *Server) allowedCluster(req *request, op acl.Operation) bool {
	return s.allowed(req, op, acl.ResourceCluster, acl.ClusterName)
}

// allowedTopic is allowed on a topic.
func (s *Server) allowedTopic(req *request, op acl.Operation, topic string) bool {
	return s.allowed(req, op, acl.ResourceTopic, topic)
}

// allowedGroup is allowed on a group.
func (s *Server) allowedGroup(req *request, op acl.Operation, group string) bool {
	return s.allowed(req, op, acl.ResourceGroup, group)
}

// allowedTxnID is allowed on a transactional id.
func (s *Server) allowedTxnID(req *request, op acl.Operation, id string) bool {
	return s.allowed(req, op, acl.ResourceTransactionalID, id)
}

// authorizedOperations is the KIP-430 bit field of what req's principal
// may do on a resource, for Metadata, DescribeGroups and
// DescribeCluster; every supported operation when authorization is off.
func (s *Server) authorizedOperations(req *request, rt acl.ResourceType, name string) int32 {
	a := s.authorizer()
	if a == nil {
		a = allowAll
	}
	return a.AuthorizedOperations(req.principal(), req.host(), rt, name)
}

// notAskedOperations is KIP-430's authorized_operations of an answer
// whose request did not ask for them (Kafka's Integer.MIN_VALUE).
const notAskedOperations int32 = math.MinInt32

// mayCreateTopic reports whether req's principal may create the topic
// name: CREATE on the cluster allows every topic (asked quietly: most
// principals are not meant to have it), else CREATE on the topic.
func (s *Server) mayCreateTopic(req *request, name string) bool {
	return s.allowedQuiet(req, acl.OperationCreate, acl.ResourceCluster, acl.ClusterName) ||
		s.allowedTopic(req, acl.OperationCreate, name)
}

// mayWriteIdempotently reports whether req's principal may get a
// producer id without a transactional id: IDEMPOTENT_WRITE on the
// cluster, or (KIP-679) WRITE on some topic, asked as Kafka asks it
// (acl.Authorizer.AuthorizeByResourceType).
func (s *Server) mayWriteIdempotently(req *request) bool {
	a := s.authorizer()
	if a == nil {
		return true
	}
	p, host := req.principal(), req.host()
	if a.Authorize(p, host, acl.OperationIdempotentWrite, acl.ResourceCluster, acl.ClusterName) ||
		a.AuthorizeByResourceType(p, host, acl.OperationWrite, acl.ResourceTopic) {
		return true
	}
	s.denied(req, acl.OperationIdempotentWrite, acl.ResourceCluster, acl.ClusterName, acl.Decision{Rule: acl.RuleNoMatch})
	return false
}

// errNodeNotAuthorized refuses a node-to-node request (api names it)
// from a principal without CLUSTER_ACTION on the cluster: the sending
// node's own principal, which the operator must make a super user.
func errNodeNotAuthorized(api string, req *request) error {
	return fmt.Errorf("%w: %s needs CLUSTER_ACTION on the cluster, which %s does not have (make the nodes' principal a super user)",
		kerr.ClusterAuthorizationFailed, api, shortName(req.principal()))
}

// allowAll answers authorizedOperations when authorization is off.
var allowAll = acl.NewAuthorizer(nil, acl.Config{AllowEveryoneIfNoACLFound: true})

// denied counts a denial, records it in the audit log (audit.go) and
// logs it at debug.
func (s *Server) denied(req *request, op acl.Operation, rt acl.ResourceType, name string, d acl.Decision) {
	s.metrics.authzDenied.Inc()
	s.auditDenied(req, op, rt, name, d)
	if s.log.Enabled(context.Background(), -4) {
		remote := ""
		if req.conn != nil {
			remote = req.conn.remote
		}
		s.log.Debug("kafkaserver: request denied", "principal", req.principal(), "remote", remote,
			"operation", op.String(), "resource_type", rt.String(), "resource", shortName(name),
			"rule", d.Rule.String())
	}
}

// shortName cuts a client's name for a log line.
func shortName(s string) string {
	if len(s) > 256 {
		return s[:256] + "..."
	}
	return s
}

// authzError is the error of a denial on a resource of type rt.
func authzError(rt acl.ResourceType) *kerr.Error {
	switch rt {
	case acl.ResourceTopic:
		return kerr.TopicAuthorizationFailed
	case acl.ResourceGroup:
		return kerr.GroupAuthorizationFailed
	case acl.ResourceTransactionalID:
		return kerr.TransactionalIDAuthorizationFailed
	case acl.ResourceDelegationToken:
		return kerr.DelegationTokenAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// waitReady holds a request from anyone but a super user until the
// authorizer has caught up (ACLConfig.Ready), so that a node that has
// just started never decides by bindings it has not replayed yet. It
// returns errAuthorizerNotReady after authzReadyWait, and ctx's error
// when the connection closes first.
func (s *Server) waitReady(ctx context.Context, req *request) error {
	if s.authzReady.Load() || s.authzBase == nil || s.cfg.ACL.Ready == nil {
		return nil
	}
	switch req.key {
	case kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		// Authorized by nothing: the client must be able to
		// authenticate (and learn it must wait) meanwhile.
		return nil
	}
	if s.cfg.ACL.Ready(s.image()) {
		s.authzReady.Store(true)
		return nil
	}
	if s.authzBase.IsSuperUser(req.principal()) {
		return nil
	}
	deadline := time.NewTimer(authzReadyWait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return errAuthorizerNotReady
		case <-tick.C:
			if s.cfg.ACL.Ready(s.image()) {
				s.authzReady.Store(true)
				return nil
			}
		}
	}
}
