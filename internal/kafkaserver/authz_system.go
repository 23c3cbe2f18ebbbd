package kafkaserver

// System topics: topics whose records steer the cluster for every client,
// so that a right on the topic alone must not be enough to change or
// read them. Today there is one, metadata.ConsumerPoliciesTopic, the
// consumer groups' poison policies and pauses (internal/poison).
//
// The rule, on the Kafka listeners: writing a system topic (Produce,
// DeleteRecords, DeleteTopics, CreatePartitions, AlterConfigs and
// IncrementalAlterConfigs of it) needs ALTER on the cluster, and reading
// it (Fetch by a consumer) DESCRIBE_CONFIGS on the cluster, in addition
// to what its own ACLs require (APIS.md's checks, made first). The
// cluster right is the gate, but the denial is the topic's:
// TOPIC_AUTHORIZATION_FAILED for that topic alone, as a client expects
// of a topic it may not use (the caller may well hold the topic's own
// ACLs; the audit log and the debug line name the CLUSTER operation that
// was missing). Only operators (super users, or principals granted the
// cluster rights) pass: the HTTP gateway, which acts as the node, and
// the CLI's `fjord group poison`/`resume` run by one. ListOffsets,
// Metadata and DescribeConfigs stay the topic's alone: they show where
// the topic ends and how it is configured, not any group's policy. With
// authorization off (Config.ACL nil) nothing is checked.
//
// Why: the topic is not internal (metadata.IsInternalTopic), since the
// CLI writes it as its user, so without this a WRITE grant on "*" or on
// the prefix "__" would let its holder set any group's policy, around
// the GROUP ALTER_CONFIGS check of PUT /v1/groups/{g}/poison/{t}: a
// dead-letter policy makes the gateway copy the victim group's records
// to a topic the attacker reads, a skip makes the group commit past
// records; and READ would show every group's policies. Rejected: making
// it an internal topic (the CLI could no longer write it, and Kafka lets
// anyone with READ read internal topics); checking GROUP ALTER_CONFIGS
// per record (the listener would decode poison's records, and a produce
// would be authorized by its contents); telling operators to add a DENY
// binding (every wildcard grant would have to remember it). ALTER and
// DESCRIBE_CONFIGS on the cluster are what Kafka asks of whoever changes
// or reads the cluster's shared settings.

import (
	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// isSystemTopic reports whether name is a system topic (see above),
// exactly: names are case sensitive and never trimmed.
func isSystemTopic(name string) bool {
	return name == metadata.ConsumerPoliciesTopic
}

// systemTopicAuthz decides, for one request, the cluster right that a
// system topic asks for: at most once, however often the request names
// the topic, so a denial is counted and audited once (as nameAuthz's).
// It belongs to the request's handler goroutine; it is not safe for
// concurrent use.
type systemTopicAuthz struct {
	s   *Server
	req *request
	op  acl.Operation // on the cluster
	// decided is set once the cluster right was asked; ok is its
	// answer.
	decided, ok bool
}

// systemTopicWrites is the check of a request that writes, deletes,
// grows or reconfigures topics: ALTER on the cluster for a system topic.
func (s *Server) systemTopicWrites(req *request) *systemTopicAuthz {
	return &systemTopicAuthz{s: s, req: req, op: acl.OperationAlter}
}

// systemTopicReads is the check of a consumer's Fetch: DESCRIBE_CONFIGS
// on the cluster for a system topic.
func (s *Server) systemTopicReads(req *request) *systemTopicAuthz {
	return &systemTopicAuthz{s: s, req: req, op: acl.OperationDescribeConfigs}
}

// allowed reports whether the request may go on with topic, as far as
// the system-topic rule goes: always for another topic, and for a system
// topic when authorization is off or the principal holds the cluster
// right. The caller still makes the topic's own checks; a false answer
// is refused with authzError(acl.ResourceTopic).
func (a *systemTopicAuthz) allowed(topic string) bool {
	if !isSystemTopic(topic) {
		return true
	}
	if !a.decided {
		a.decided, a.ok = true, a.s.allowedCluster(a.req, a.op)
	}
	return a.ok
}
