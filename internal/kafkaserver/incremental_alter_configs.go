package kafkaserver

// IncrementalAlterConfigs: v0-1
//
// Changes single topic configs (KIP-339): SET a value, DELETE an override
// (back to the default), APPEND to or SUBTRACT from a list config
// (cleanup.policy). The resource checks are AlterConfigs' (once per
// request, a topic that exists, or a broker). Then per config: a
// name given twice is INVALID_REQUEST (as Kafka), an unknown operation is
// INVALID_REQUEST, SET with a null value is INVALID_REQUEST, an unknown
// config name is INVALID_CONFIG, APPEND/SUBTRACT on a config that is not a
// list is INVALID_CONFIG, and a value that is not allowed (for APPEND and
// SUBTRACT, the comma-separated elements) is INVALID_CONFIG naming it.
// The controller applies the operations to the current overrides and
// checks the result when it commits (ValidateOnly: checks, changes
// nothing).
//
// A BROKER resource (named by a registered broker's id, or "" for the
// cluster default, Kafka's <default> entity) takes only the dynamic
// broker configs (metadata.DynamicBrokerConfigs), SET or DELETE: any
// other broker config is static and INVALID_CONFIG says so.
//
// Authorization is AlterConfigs' (alter_configs.go): ALTER_CONFIGS on the
// resource, the cluster's for a broker, after the duplicate check and
// before any other.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleIncrementalAlterConfigs(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.SetVersion(req.version)

	resources := make([]configAlteration, len(r.Resources))
	for i := range r.Resources {
		rr := &r.Resources[i]
		res := configAlteration{key: configResourceKey{rr.ResourceType, rr.ResourceName}}
		for _, c := range rr.Configs {
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
				res.ops = append(res.ops, func() (controlplane.ConfigOp, error) {
					op, err := brokerConfigOp(rr.ResourceName, c)
					if err == nil {
						err = s.checkFreeSpaceHere(rr.ResourceName, op)
					}
					return op, err
				})
			} else {
				res.ops = append(res.ops, func() (controlplane.ConfigOp, error) { return incrementalConfigOp(s.image(), rr.ResourceName, c) })
			}
			res.names = append(res.names, c.Name)
		}
		resources[i] = res
	}
	for i, err := range s.alterConfigResources(ctx, req, resources, false, r.ValidateOnly) {
		rr := &r.Resources[i]
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = s.errorAndMessage(err, "IncrementalAlterConfigs", "resource", rr.ResourceName)
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}

// brokerConfigOp checks one requested operation on a dynamic broker
// config: SET a valid value or DELETE; the lists' APPEND and SUBTRACT do
// not apply.
func brokerConfigOp(broker string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) (controlplane.ConfigOp, error) {
	op := controlplane.ConfigOp{Name: c.Name, Value: c.Value}
	if _, ok := metadata.DynamicBrokerConfigs[c.Name]; !ok {
		return op, fmt.Errorf("%w: broker %q: %q cannot be changed at run time (the dynamic broker configs are %s; set the others with flags, FJORD_* variables or the --config file and restart the node)",
			kerr.InvalidConfig, broker, truncateForMessage(c.Name), metadata.DynamicBrokerConfigNames())
	}
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		op.Op = controlplane.ConfigSet
		if c.Value == nil {
			return op, invalidRequest("broker %q: SET %q with a null value; use DELETE to remove it", broker, c.Name)
		}
		return op, metadata.ValidateBrokerConfig(c.Name, *c.Value)
	case kmsg.IncrementalAlterConfigOpDelete:
		op.Op, op.Value = controlplane.ConfigDelete, nil
		return op, nil
	}
	return op, invalidRequest("broker %q: config %q: operation %d is not allowed (want 0 SET or 1 DELETE)", broker, c.Name, int8(c.Op))
}

// checkFreeSpaceHere refuses a free-space threshold in bytes that this
// node's file system could never meet (at or above its size), when the
// threshold is this node's own or the cluster default. Only the node
// knows its disk: kadm and Kafka's tools send a broker's configs to that
// broker, so a per-broker threshold is checked where it applies; a
// cluster default is checked against the receiving node's disk alone.
func (s *Server) checkFreeSpaceHere(broker string, op controlplane.ConfigOp) error {
	if op.Op != controlplane.ConfigSet || (op.Name != metadata.FreeSpaceWarnConfig && op.Name != metadata.FreeSpaceRefuseConfig) ||
		(broker != "" && broker != strconv.Itoa(int(s.cfg.NodeID))) {
		return nil
	}
	f, err := metadata.ParseFreeSpace(*op.Value)
	if err != nil {
		return err // checked before; kept for safety
	}
	_, total, _, _ := s.replicas.LogDirs()
	return metadata.CheckFreeSpaceFits(op.Name, f, total)
}

// incrementalConfigOp checks one requested operation on topic's config
// and turns it into the controller's form.
func incrementalConfigOp(img *metadata.Image, topic string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) (controlplane.ConfigOp, error) {
	op := controlplane.ConfigOp{Name: c.Name, Value: c.Value}
	def, ok := img.LookupTopicConfig(c.Name)
	if !ok {
		return op, fmt.Errorf("%w: topic %q: unknown topic config %q", kerr.InvalidConfig, topic, c.Name)
	}
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		op.Op = controlplane.ConfigSet
		if c.Value == nil {
			return op, invalidRequest("topic %q: SET %q with a null value; use DELETE to return it to its default", topic, c.Name)
		}
		if err := img.ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return op, err
		}
	case kmsg.IncrementalAlterConfigOpDelete:
		op.Op = controlplane.ConfigDelete
		op.Value = nil
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		op.Op = controlplane.ConfigAppend
		if c.Op == kmsg.IncrementalAlterConfigOpSubtract {
			op.Op = controlplane.ConfigSubtract
		}
		if typ, _ := kmsg.ParseConfigType(def.Type); typ != kmsg.ConfigTypeList {
			return op, fmt.Errorf("%w: topic %q: %s on %q, which is not a list config",
				kerr.InvalidConfig, topic, c.Op, c.Name)
		}
		if c.Value == nil {
			return op, invalidRequest("topic %q: %s %q with a null value", topic, c.Op, c.Name)
		}
		// The value is a list of elements to add or remove; each must be
		// one the config allows, which is what validating it as a whole
		// list checks.
		if err := img.ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return op, err
		}
	default:
		return op, invalidRequest("topic %q: config %q: unknown operation %d (want 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)",
			topic, c.Name, int8(c.Op))
	}
	return op, nil
}
