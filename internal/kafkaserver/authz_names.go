package kafkaserver

// Per-name authorization for requests that list resources: the topics
// of an OffsetCommit or a DeleteTopics, the groups of a DescribeGroups,
// the keys of a FindCoordinator. Kafka decides each distinct name once
// per request (AuthHelper.filterByAuthorized builds a set of the names
// first), so a client that names a topic a thousand times costs one
// decision, one denial counted and one log line, not a thousand. The
// answer per entry is the same either way; what the memo saves is the
// authorizer's work and the audit's noise.

import (
	"github.com/fjordmq/fjord/internal/acl"
)

// nameAuthz decides one operation on one resource type for the names a
// request lists, each distinct name once. It belongs to one request's
// handler goroutine; it is not safe for concurrent use.
//
// The memo lives as long as the request and holds at most one entry per
// distinct name in it, so its size is bounded by the request's (the
// connection's frame limit), whatever a client sends.
type nameAuthz struct {
	s   *Server
	req *request
	op  acl.Operation
	rt  acl.ResourceType
	// all allows every name: authorization is off, or the principal
	// holds a cluster-wide operation that covers every resource
	// (orCluster).
	all bool
	// quiet filters an answer instead of refusing what was asked: a
	// denial is neither counted nor logged (Server.allowedQuiet).
	quiet bool
	// decided memoizes each name's answer, made on first use.
	decided map[string]bool
}

// authzByName returns the per-name check of op on rt for req, denials
// counted and logged as refusals.
func (s *Server) authzByName(req *request, op acl.Operation, rt acl.ResourceType) *nameAuthz {
	return &nameAuthz{s: s, req: req, op: op, rt: rt, all: s.authorizer() == nil}
}

// authzFilterByName is authzByName for checks that leave out of an
// answer what the caller may not see (OffsetFetch of every topic):
// denials are not counted or logged, as Kafka's logIfDenied=false.
func (s *Server) authzFilterByName(req *request, op acl.Operation, rt acl.ResourceType) *nameAuthz {
	a := s.authzByName(req, op, rt)
	a.quiet = true
	return a
}

// orCluster lets clusterOp on the cluster allow every name (CreateTopics'
// CREATE, DeleteTopics' DELETE on the cluster). That check is quiet, as
// Kafka's (logIfDenied=false): without the cluster-wide right the
// principal may still hold the resource's, and only a denial of that
// refuses anything.
func (a *nameAuthz) orCluster(clusterOp acl.Operation) *nameAuthz {
	if !a.all {
		a.all = a.s.allowedQuiet(a.req, clusterOp, acl.ResourceCluster, acl.ClusterName)
	}
	return a
}

// allowed reports whether the request's principal may do the check's
// operation on the resource called name.
func (a *nameAuthz) allowed(name string) bool {
	if a.all {
		return true
	}
	if ok, seen := a.decided[name]; seen {
		return ok
	}
	var ok bool
	if a.quiet {
		ok = a.s.allowedQuiet(a.req, a.op, a.rt, name)
	} else {
		ok = a.s.allowed(a.req, a.op, a.rt, name)
	}
	if a.decided == nil {
		a.decided = make(map[string]bool)
	}
	a.decided[name] = ok
	return ok
}
