package kafkaserver

// DescribeConfigs: v0-4
//
// Topic resources (type 2) list every topic config Fjord knows
// (the image's TopicConfigs), or the subset named in ConfigNames when it
// is non-null (unknown names are left out, as in Kafka). Each entry is the
// topic's override with source DYNAMIC_TOPIC_CONFIG, or the default with
// source DEFAULT_CONFIG (IsDefault for v0 clients): for
// min.insync.replicas, the default for the topic's replication factor
// (2 from 3 replicas, else 1). No topic config is
// read-only or sensitive. Synonyms (v1+, when asked) list the override
// then the default, in Kafka's order of precedence; v3+ carry the config
// type and, when asked, its documentation. An invalid topic name is
// INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//
// Broker resources (type 4) named with this node's id list the dynamic
// broker configs (metadata.DynamicBrokerConfigs) that are set for it,
// its own or the cluster default, with Kafka's sources and synonyms and
// each config's type, then the few static settings this server really
// has, read-only with source STATIC_BROKER_CONFIG: they come from flags
// or the config file and cannot be changed at run time. An empty name
// asks for the cluster-wide dynamic broker defaults that are set. A
// dynamic config that is not set is not listed: its unset state is "no
// limit", which has no value to show. Another node's id is
// INVALID_REQUEST, as in Kafka (ask that node).
//
// Every other resource type (broker loggers, client metrics, groups) is
// INVALID_REQUEST naming the type.
//
// Authorization (Kafka's ConfigHelper), per resource and before anything
// else about it is checked: DESCRIBE_CONFIGS on the cluster for broker,
// broker logger and client metrics resources
// (CLUSTER_AUTHORIZATION_FAILED), on the topic for a topic
// (TOPIC_AUTHORIZATION_FAILED, whether or not it exists), on the group
// for a group (GROUP_AUTHORIZATION_FAILED). ALTER_CONFIGS implies
// DESCRIBE_CONFIGS (the authorizer's rule). A denied resource is
// answered with no configs, and a broker's log.dirs is not read. A type
// Kafka does not know is INVALID_REQUEST unchecked.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleDescribeConfigs(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(req.version)
	opts := describeOptions{
		synonyms: req.version >= 1 && r.IncludeSynonyms,
		docs:     req.version >= 3 && r.IncludeDocumentation,
	}
	img := s.image()
	describable := s.configAuthz(req, acl.OperationDescribeConfigs)
	for i := range r.Resources {
		rr := &r.Resources[i]
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType = rr.ResourceType
		out.ResourceName = rr.ResourceName

		var entries []configEntry
		err := describable.check(rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			entries, err = describeTopicConfigs(img, rr.ResourceName, rr.ConfigNames)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			entries, err = s.describeBrokerConfigs(rr.ResourceName, rr.ConfigNames)
		default:
			err = unsupportedResourceType(rr.ResourceType)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = s.errorAndMessage(err, "DescribeConfigs", "resource", rr.ResourceName)
		}
		for _, e := range entries {
			out.Configs = append(out.Configs, e.describe(opts))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}

// configEntry is one config as a resource has it.
type configEntry struct {
	name, value string
	source      kmsg.ConfigSource
	readOnly    bool
	typ         kmsg.ConfigType
	doc         string
	// synonyms, most preferred first, starting with the entry itself.
	synonyms []configSynonym
}

type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

type describeOptions struct{ synonyms, docs bool }

func (e configEntry) describe(opts describeOptions) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.name
	c.Value = strp(e.value)
	c.ReadOnly = e.readOnly
	c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	c.Source = e.source
	c.ConfigType = e.typ
	if opts.synonyms {
		for _, syn := range e.synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = syn.name, strp(syn.value), syn.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	if opts.docs && e.doc != "" {
		c.Documentation = strp(e.doc)
	}
	return c
}

// unsupportedResourceType refuses a config resource type Fjord does not
// keep configs for.
func unsupportedResourceType(t kmsg.ConfigResourceType) error {
	return invalidRequest("config resource type %s (%d) is not supported; Fjord serves topic (2) and broker (4) configs",
		t, int8(t))
}

func describeTopicConfigs(img *metadata.Image, name string, names []string) ([]configEntry, error) {
	if err := metadata.ValidateTopicName(name); err != nil {
		return nil, err
	}
	t, ok := lookupTopic(img, name)
	if !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, name)
	}
	return topicConfigEntries(img, t, names), nil
}

// topicConfigEntries describes t's configs in the order of the image's
// TopicConfigs (by name):
// all of them when names is nil, else those named (unknown names are
// skipped).
func topicConfigEntries(img *metadata.Image, t *metadata.Topic, names []string) []configEntry {
	var out []configEntry
	for _, def := range img.TopicConfigs.Defs() {
		if names != nil && !slices.Contains(names, def.Name) {
			continue
		}
		typ, err := kmsg.ParseConfigType(def.Type)
		if err != nil {
			typ = kmsg.ConfigTypeUnknown
		}
		// The default for this topic: min.insync.replicas' depends on
		// its replication factor, and is still a default.
		dflt := img.TopicConfigDefault(t, def.Name)
		e := configEntry{
			name:   def.Name,
			value:  dflt,
			source: kmsg.ConfigSourceDefaultConfig,
			typ:    typ,
			doc:    def.Doc,
		}
		defaultSyn := configSynonym{name: def.Name, value: dflt, source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := t.Configs[def.Name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
			e.synonyms = []configSynonym{{name: def.Name, value: v, source: kmsg.ConfigSourceDynamicTopicConfig}, defaultSyn}
		} else {
			e.synonyms = []configSynonym{defaultSyn}
		}
		out = append(out, e)
	}
	return out
}

// describeBrokerConfigs answers a broker resource. name is "" (the
// cluster-wide dynamic defaults) or a node id, which must be this
// node's. A dynamic config is listed only when it is set (there is no
// value meaning "unthrottled" to show otherwise).
func (s *Server) describeBrokerConfigs(name string, names []string) ([]configEntry, error) {
	want := func(n string) bool { return names == nil || slices.Contains(names, n) }
	img := s.image()
	if name == "" {
		var out []configEntry
		for _, n := range slices.Sorted(maps.Keys(img.BrokerConfigs[-1])) {
			if want(n) {
				out = append(out, dynamicBrokerEntry(img, -1, n))
			}
		}
		return out, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != s.cfg.NodeID {
		return nil, invalidRequest("broker resource %q: this is node %d; ask for %q, or \"\" for the cluster-wide defaults",
			name, s.cfg.NodeID, strconv.Itoa(int(s.cfg.NodeID)))
	}
	var out []configEntry
	for _, n := range slices.Sorted(maps.Keys(metadata.DynamicBrokerConfigs)) {
		if _, _, ok := img.BrokerConfig(s.cfg.NodeID, n); ok && want(n) {
			out = append(out, dynamicBrokerEntry(img, s.cfg.NodeID, n))
		}
	}
	// The free-space thresholds are dynamic, but have a static value
	// too (the node's flags), in force until a dynamic one is set.
	for _, st := range []struct{ name, v string }{
		{metadata.FreeSpaceWarnConfig, s.cfg.LogDirFreeSpaceWarn}, {metadata.FreeSpaceRefuseConfig, s.cfg.LogDirFreeSpaceRefuse},
	} {
		if _, _, ok := img.BrokerConfig(s.cfg.NodeID, st.name); ok || st.v == "" || !want(st.name) {
			continue
		}
		out = append(out, configEntry{
			name: st.name, value: st.v, source: kmsg.ConfigSourceStaticBrokerConfig, typ: kmsg.ConfigTypeString,
			doc:      metadata.DynamicBrokerConfigs[st.name].Doc,
			synonyms: []configSynonym{{name: st.name, value: st.v, source: kmsg.ConfigSourceStaticBrokerConfig}},
		})
	}
	add := func(n, v string, typ kmsg.ConfigType, doc string) {
		if !want(n) {
			return
		}
		out = append(out, configEntry{
			name: n, value: v, source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true, typ: typ, doc: doc,
			synonyms: []configSynonym{{name: n, value: v, source: kmsg.ConfigSourceStaticBrokerConfig}},
		})
	}
	nodeID := strconv.Itoa(int(s.cfg.NodeID))
	add("broker.id", nodeID, kmsg.ConfigTypeInt, "This node's id (--node-id).")
	add("node.id", nodeID, kmsg.ConfigTypeInt, "This node's id (--node-id).")
	add("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), kmsg.ConfigTypeBoolean,
		"Create a topic on produce or metadata requests for a topic that does not exist.")
	add("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxRequestBytes)), kmsg.ConfigTypeInt,
		"The largest request frame accepted; a larger one closes the connection.")
	add("connections.max.idle.ms", strconv.FormatInt(s.cfg.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong,
		"Idle connections are closed after this long.")
	if want("log.dirs") {
		// LogDirs walks every partition for sizes; only pay for it when
		// the client asked for the directory.
		dir, _, _, _ := s.replicas.LogDirs()
		add("log.dirs", dir, kmsg.ConfigTypeString, "The directory holding this node's partition logs (--data-dir).")
	}
	return out, nil
}

// dynamicBrokerEntry describes a dynamic broker config that is set for
// broker (-1: the cluster default), with its synonyms in Kafka's order
// of precedence: the broker's own value, then the default.
func dynamicBrokerEntry(img *metadata.Image, broker int32, name string) configEntry {
	v, fromDefault, _ := img.BrokerConfig(broker, name)
	def := metadata.DynamicBrokerConfigs[name]
	typ, _ := kmsg.ParseConfigType(def.Type) // every def names a Kafka type (TestDynamicBrokerConfigTypes)
	e := configEntry{name: name, value: v, source: kmsg.ConfigSourceDynamicBrokerConfig, typ: typ, doc: def.Doc}
	if fromDefault || broker == -1 {
		e.source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	if own, ok := img.BrokerConfigs[broker][name]; ok && broker >= 0 {
		e.synonyms = append(e.synonyms, configSynonym{name: name, value: own, source: kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if def, ok := img.BrokerConfigs[-1][name]; ok {
		e.synonyms = append(e.synonyms, configSynonym{name: name, value: def, source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	return e
}
