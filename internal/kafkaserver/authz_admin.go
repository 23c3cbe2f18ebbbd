package kafkaserver

// Authorization patterns the admin APIs share (authz.go is the core; the
// table of what each API checks is internal/acl/APIS.md).
//
// A request may name a topic or a config resource more than once; Kafka
// authorizes each distinct name once (AuthHelper.filterByAuthorized
// groups the names first), so a denial is counted once and every
// occurrence gets the same answer. nameAuthz (authz_names.go) and
// configAuthz keep the decisions of one request for that. They are made per request, used on
// its handler's goroutine only, and never outlive it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// configAuthz decides DESCRIBE_CONFIGS or ALTER_CONFIGS on the config
// resources of one DescribeConfigs, AlterConfigs or
// IncrementalAlterConfigs request (Kafka's ConfigHelper and
// ControllerApis.authorizeAlterResource).
type configAuthz struct {
	s   *Server
	req *request
	op  acl.Operation
	// decided is keyed by the ACL resource, so the cluster is decided
	// once for every broker resource of a request.
	decided map[aclResource]error
}

type aclResource struct {
	rt   acl.ResourceType
	name string
}

func (s *Server) configAuthz(req *request, op acl.Operation) *configAuthz {
	return &configAuthz{s: s, req: req, op: op}
}

// check returns nil when the operation is allowed on the config resource
// typ/name, else the denial's error: CLUSTER_AUTHORIZATION_FAILED for
// the resources that are the cluster's (broker, broker logger, client
// metrics), TOPIC_ or GROUP_AUTHORIZATION_FAILED for a topic's or a
// group's. A type Kafka does not know is not checked (nil): the handler
// refuses it with INVALID_REQUEST, as Kafka does before it authorizes.
func (a *configAuthz) check(typ kmsg.ConfigResourceType, name string) error {
	rt, resource, ok := configACLResource(typ, name)
	if !ok {
		return nil
	}
	k := aclResource{rt, resource}
	if err, done := a.decided[k]; done {
		return err
	}
	var err error
	if !a.s.allowed(a.req, a.op, rt, resource) {
		err = authzError(rt)
	}
	if a.decided == nil {
		a.decided = make(map[aclResource]error)
	}
	a.decided[k] = err
	return err
}

// configACLResource is the ACL resource a config resource is authorized
// on; ok is false for a config resource type with no rule.
func configACLResource(typ kmsg.ConfigResourceType, name string) (acl.ResourceType, string, bool) {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		return acl.ResourceCluster, acl.ClusterName, true
	case kmsg.ConfigResourceTypeTopic:
		return acl.ResourceTopic, name, true
	case kmsg.ConfigResourceTypeGroupConfig:
		return acl.ResourceGroup, name, true
	}
	return acl.ResourceUnknown, "", false
}

// clusterDenied returns nil when req's principal may do op on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED: the whole-request check
// of the cluster-wide admin APIs.
func (s *Server) clusterDenied(req *request, op acl.Operation) error {
	if s.allowedCluster(req, op) {
		return nil
	}
	return authzError(acl.ResourceCluster)
}
