package httpapi

// Authorization: each route asks, before it asks the cluster anything,
// what its Kafka equivalent asks (AUTHZ.md lists them, with the
// reasons), of the authorizer of the node's latest metadata image, with
// the caller's principal and address. Kafka's rules come with the
// authorizer: deny wins, super users pass, allow.everyone.if.no.acl.found.
// The route's own order keeps Kafka's other rule, authorization before
// existence: a topic the caller may not describe is 403 whether or not
// it exists, so a client cannot probe for names.
//
// A denial of what the caller asked for is answered 403, naming the
// operation and the resource and nothing more, and audited; a check that
// only filters what an answer lists (topics, groups, a group's offsets)
// leaves out quietly what the caller may not describe, as Kafka's
// Metadata and ListGroups do (logIfDenied=false).

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/metadata"
)

// need is one check: op on the resource of type rt called name.
type need struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string
}

func onTopic(op acl.Operation, topic string) need { return need{op, acl.ResourceTopic, topic} }
func onGroup(op acl.Operation, group string) need { return need{op, acl.ResourceGroup, group} }
func onCluster(op acl.Operation) need             { return need{op, acl.ResourceCluster, acl.ClusterName} }

// consumerNeeds is what a group member's requests need (JoinGroup,
// SyncGroup, Heartbeat, Fetch, OffsetCommit, LeaveGroup): READ on the
// group and on the topic.
func consumerNeeds(group, topic string) []need {
	return []need{onGroup(acl.OperationRead, group), onTopic(acl.OperationRead, topic)}
}

// errAuthorizerNotReady answers a request, from anyone but a super user,
// that came before the node's image had replayed the bindings committed
// before it started: deciding by an image that may lack a DENY would
// allow what the cluster forbids (the Kafka listener holds such requests
// instead; an HTTP client is told to come back).
var errAuthorizerNotReady = &apiError{status: http.StatusServiceUnavailable, code: "authorizer_not_ready",
	msg: "this node has not caught up with the cluster's ACLs yet; try again", retryAfter: time.Second}

// decide is whether c may do n, and why (the Rule, for the audit log).
// The error is errAuthorizerNotReady.
func (c *caller) decide(n need) (acl.Decision, error) {
	switch {
	case c.authorizer == nil:
		return acl.Decision{Allowed: true}, nil
	case !c.ready:
		if c.authorizer.IsSuperUser(c.principal) {
			return acl.Decision{Allowed: true, Rule: acl.RuleSuperUser}, nil
		}
		return acl.Decision{}, errAuthorizerNotReady
	}
	return c.authorizer.Decide(c.principal, c.host, n.op, n.rt, n.name), nil
}

// withGates is needs with, after each need on the poison-policy topic,
// the cluster right it also needs (systemTopicGate).
func withGates(needs []need) []need {
	out := make([]need, 0, len(needs)+1)
	for _, n := range needs {
		out = append(out, n)
		if gate, ok := systemTopicGate(n); ok {
			out = append(out, gate)
		}
	}
	return out
}

// systemTopicGate is the cluster right a need on the poison-policy
// topic also needs, as on the Kafka listeners
// (kafkaserver/authz_system.go): ALTER to change it, DESCRIBE_CONFIGS to
// read it. The topic holds every group's policies, and the gateway
// writes and reads it as the node, so the check is made here.
func systemTopicGate(n need) (need, bool) {
	if n.rt != acl.ResourceTopic || n.name != metadata.ConsumerPoliciesTopic {
		return need{}, false
	}
	switch n.op {
	case acl.OperationRead, acl.OperationDescribe, acl.OperationDescribeConfigs:
		return onCluster(acl.OperationDescribeConfigs), true
	}
	return onCluster(acl.OperationAlter), true
}

// mayQuietly reports whether c may do n, for a check that filters an
// answer: a denial is neither answered nor audited.
func (c *caller) mayQuietly(n need) (bool, error) {
	for _, n := range withGates([]need{n}) {
		if d, err := c.decide(n); err != nil || !d.Allowed {
			return false, err
		}
	}
	return true, nil
}

// authorize checks every need in order and answers the first denial
// (403, audited) or errAuthorizerNotReady; nil when all are allowed.
func (a *API) authorize(r *http.Request, needs ...need) error {
	c := callerOf(r)
	for _, n := range withGates(needs) {
		d, err := c.decide(n)
		if err != nil {
			return err
		}
		if !d.Allowed {
			return a.denied(c, n, d)
		}
	}
	return nil
}

// allowed is authorize that answers the request itself when it refuses.
func (a *API) allowed(w http.ResponseWriter, r *http.Request, needs ...need) bool {
	if err := a.authorize(r, needs...); err != nil {
		writeError(w, err)
		return false
	}
	return true
}

// allowedEither is allowed for a check Kafka makes in two steps: broad,
// asked quietly (CLUSTER CREATE, which most principals are not meant to
// have), else every narrow one in order (TOPIC CREATE; DeleteTopics'
// TOPIC DESCRIBE and DELETE), whose first denial is the one answered.
func (a *API) allowedEither(w http.ResponseWriter, r *http.Request, broad need, narrow ...need) bool {
	ok, err := callerOf(r).mayQuietly(broad)
	if err != nil {
		writeError(w, err)
		return false
	}
	return ok || a.allowed(w, r, narrow...)
}

// denied audits a denial and is its answer.
func (a *API) denied(c *caller, n need, d acl.Decision) *apiError {
	if a.guard != nil {
		a.guard.record(audit.Event{Kind: audit.KindAuthorization, Result: audit.ResultDenied, Principal: c.principal,
			Client: c.client, API: c.route, Operation: n.op.String(), ResourceType: n.rt.String(),
			Resource: clip(n.name, 256), Rule: d.Rule.String()})
	}
	return &apiError{status: http.StatusForbidden, code: "forbidden",
		msg: fmt.Sprintf("not authorized to %s %s %q", n.op.String(), strings.ToLower(n.rt.String()), clip(n.name, 256))}
}

// Protect wraps one of the node's own endpoints on the API's listener
// (/metrics, /readyz, which are open by default; /healthz has
// ProtectLiveness) so that it
// needs credentials, whether or not the node requires them of the API,
// and DESCRIBE on the cluster: what a monitoring principal is granted
// to read a Kafka cluster's state. The answers to a refusal are the
// API's JSON errors. Without Security it changes nothing.
func (a *API) Protect(route string, h http.Handler) http.Handler {
	if a.guard == nil {
		return h
	}
	return a.authenticated(route, true, func(w http.ResponseWriter, r *http.Request) {
		if a.allowed(w, r, onCluster(acl.OperationDescribe)) {
			h.ServeHTTP(w, r)
		}
	})
}

// ProtectLiveness wraps the node's liveness endpoint (/healthz) as
// Protect does, but needs a valid login only, no ACL: a liveness probe
// that Protect answered 503 while the node's authorizer catches up with
// the cluster's ACLs (after a restart) would have the node restarted
// again, and the answer ("the process serves HTTP") tells a logged-in
// principal nothing the API's own 401s and 503s do not.
func (a *API) ProtectLiveness(route string, h http.Handler) http.Handler {
	if a.guard == nil {
		return h
	}
	return a.authenticated(route, true, h.ServeHTTP)
}

// allowedToEnsure checks what making sure topic exists needs (a
// dead-letter topic, poison.go): nothing more when it exists, else
// CREATE on the cluster or the topic, as the CreateTopics that makes it.
// A lookup that fails for another reason asks for CREATE too: the
// creation must not go ahead unchecked because the answer was lost.
func (a *API) allowedToEnsure(w http.ResponseWriter, r *http.Request, topic string) bool {
	if _, err := a.topicPartitions(r.Context(), topic); err == nil {
		return true
	}
	return a.allowedEither(w, r, onCluster(acl.OperationCreate), onTopic(acl.OperationCreate, topic))
}

// ready answers 503 (errAuthorizerNotReady) and is false while the
// authorizer is not ready and c is not a super user: for routes that
// filter their answer, which would otherwise list nothing rather than
// say why.
func (a *API) ready(w http.ResponseWriter, c *caller) bool {
	if c.authorizer == nil || c.ready || c.authorizer.IsSuperUser(c.principal) {
		return true
	}
	writeError(w, errAuthorizerNotReady)
	return false
}
