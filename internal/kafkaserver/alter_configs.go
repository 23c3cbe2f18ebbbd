package kafkaserver

// AlterConfigs: v0-2
//
// The legacy (pre-KIP-339) config change: the configs given for a topic
// replace all of its overrides; a config left out goes back to its
// default. Checks, per resource in request order: the resource appears
// once in the request (else INVALID_REQUEST for each occurrence, as
// Kafka), its type is topic (broker configs are refused with
// INVALID_REQUEST pointing to IncrementalAlterConfigs, the one that
// changes Fjord's dynamic broker configs; other types are
// INVALID_REQUEST naming the type), the
// topic name is valid and the topic exists, no config name repeats, no
// value is null (INVALID_REQUEST), and every name and value is a valid
// topic config (INVALID_CONFIG naming the value). Then the controller
// commits the change, or with ValidateOnly checks it and changes nothing.
//
// Authorization (ControllerApis.authorizeAlterResource), for this API and
// IncrementalAlterConfigs: after the duplicate check and before any other,
// ALTER_CONFIGS on the cluster for a broker, broker logger or client
// metrics resource (CLUSTER_AUTHORIZATION_FAILED), on the topic for a
// topic (TOPIC_AUTHORIZATION_FAILED, whether or not it exists), on the
// group for a group (GROUP_AUTHORIZATION_FAILED); ValidateOnly alike. A
// denied resource's configs are not looked at and the controller is not
// asked. A type Kafka does not know is INVALID_REQUEST unchecked. A
// system topic also needs ALTER on the cluster (authz_system.go).

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleAlterConfigs(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AlterConfigsRequest)
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.SetVersion(req.version)

	resources := make([]configAlteration, len(r.Resources))
	for i := range r.Resources {
		rr := &r.Resources[i]
		res := configAlteration{key: configResourceKey{rr.ResourceType, rr.ResourceName}}
		for _, c := range rr.Configs {
			res.ops = append(res.ops, func() (controlplane.ConfigOp, error) {
				if c.Value == nil {
					return controlplane.ConfigOp{}, invalidRequest("topic %q: config %q has a null value; leave it out to return it to its default",
						rr.ResourceName, c.Name)
				}
				if err := s.image().ValidateTopicConfig(c.Name, *c.Value); err != nil {
					return controlplane.ConfigOp{}, err
				}
				return controlplane.ConfigOp{Name: c.Name, Op: controlplane.ConfigSet, Value: c.Value}, nil
			})
			res.names = append(res.names, c.Name)
		}
		resources[i] = res
	}
	for i, err := range s.alterConfigResources(ctx, req, resources, true, r.ValidateOnly) {
		rr := &r.Resources[i]
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = s.errorAndMessage(err, "AlterConfigs", "resource", rr.ResourceName)
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}

// configAlteration is one resource of an AlterConfigs or
// IncrementalAlterConfigs request: its key, and per config its name and a
// check that turns it into the controller's operation.
type configAlteration struct {
	key   configResourceKey
	names []string
	ops   []func() (controlplane.ConfigOp, error)
}

// alterConfigResources applies what both alter APIs do per resource, in
// request order: the resource is named once in the request, req may
// ALTER_CONFIGS it, the resource checks (checkAlterResource), no config
// named twice, each config's own check, then the controller commits (or,
// with validateOnly, only checks). errs[i] answers resources[i].
func (s *Server) alterConfigResources(ctx context.Context, req *request, resources []configAlteration, replaceAll, validateOnly bool) (errs []error) {
	keys := make([]configResourceKey, len(resources))
	for i := range resources {
		keys[i] = resources[i].key
	}
	counts := countResources(keys)
	img := s.image()
	alterable := s.configAuthz(req, acl.OperationAlterConfigs)
	system := s.systemTopicWrites(req) // and ALTER on the cluster for a system topic (authz_system.go)
	errs = make([]error, len(resources))
	for i := range resources {
		res := &resources[i]
		errs[i] = func() error {
			if n := counts[res.key]; n > 1 {
				return invalidRequest("resource %s %q appears %d times in the request", res.key.typ, res.key.name, n)
			}
			if err := alterable.check(res.key.typ, res.key.name); err != nil {
				return err
			}
			if res.key.typ == kmsg.ConfigResourceTypeTopic && !system.allowed(res.key.name) {
				return authzError(acl.ResourceTopic)
			}
			broker, err := checkAlterResource(img, res.key, !replaceAll)
			if err != nil {
				return err
			}
			ops := make([]controlplane.ConfigOp, 0, len(res.ops))
			seen := make(map[string]bool, len(res.ops))
			for j, toOp := range res.ops {
				if seen[res.names[j]] {
					return invalidRequest("%s %q: config %q given more than once", resourceNoun(res.key.typ), res.key.name, res.names[j])
				}
				seen[res.names[j]] = true
				op, err := toOp()
				if err != nil {
					return err
				}
				ops = append(ops, op)
			}
			if res.key.typ == kmsg.ConfigResourceTypeBroker {
				return s.controller.AlterBrokerConfigs(ctx, broker, ops, validateOnly)
			}
			return s.controller.AlterConfigs(ctx, res.key.name, ops, replaceAll, validateOnly)
		}()
	}
	return errs
}

// configResourceKey names a config resource in an alter request.
type configResourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

func countResources(keys []configResourceKey) map[configResourceKey]int {
	counts := make(map[configResourceKey]int, len(keys))
	for _, k := range keys {
		counts[k]++
	}
	return counts
}

// checkAlterResource checks what both alter APIs check before the
// configs themselves: the resource is a topic that exists or, for
// IncrementalAlterConfigs (brokerOK), a broker: "" (the cluster default,
// broker -1) or a registered broker's id, which it returns.
func checkAlterResource(img *metadata.Image, k configResourceKey, brokerOK bool) (broker int32, err error) {
	switch k.typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker:
		if !brokerOK {
			return 0, invalidRequest("broker configs cannot be changed with the legacy AlterConfigs in Fjord: use IncrementalAlterConfigs for the dynamic ones (%s); set the others with flags, FJORD_* variables or the --config file and restart the node",
				metadata.DynamicBrokerConfigNames())
		}
		return brokerResource(img, k.name)
	default:
		return 0, unsupportedResourceType(k.typ)
	}
	if err := metadata.ValidateTopicName(k.name); err != nil {
		return 0, err
	}
	if _, ok := lookupTopic(img, k.name); !ok {
		return 0, fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, k.name)
	}
	return 0, nil
}

// brokerResource reads a BROKER resource's name: "" is the cluster
// default (-1), otherwise a registered broker's id in decimal.
func brokerResource(img *metadata.Image, name string) (int32, error) {
	if name == "" {
		return -1, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.Itoa(int(id)) != name {
		return 0, invalidRequest("broker resource %q: want a broker id, or an empty name for the cluster default", truncateForMessage(name))
	}
	if _, ok := img.Brokers[int32(id)]; !ok {
		return 0, invalidRequest("broker %d is not registered", id)
	}
	return int32(id), nil
}

func resourceNoun(typ kmsg.ConfigResourceType) string {
	if typ == kmsg.ConfigResourceTypeBroker {
		return "broker"
	}
	return "topic"
}

// truncateForMessage keeps an error message about a hostile name short.
func truncateForMessage(name string) string {
	const limit = 64
	if len(name) <= limit {
		return name
	}
	return name[:limit] + "..."
}
