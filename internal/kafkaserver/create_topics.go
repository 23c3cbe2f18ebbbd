package kafkaserver

// CreateTopics: v0-7
//
// Creates topics through the controller; the answer comes once the
// topics are committed to the metadata log and this node's partitions
// exist, so a produce right after succeeds.
//
// Per topic, in request order:
//   - a name given more than once in the request is refused for every
//     occurrence with INVALID_REQUEST, and the response names it once
//     (Kafka's answer: the response is keyed by name);
//   - NumPartitions/ReplicationFactor of -1 take the node's defaults from
//     v4 (KIP-464); below v4 they are INVALID_REQUEST unless the topic
//     gives ReplicaAssignment, which needs both to be -1 in every version;
//   - ReplicaAssignment must name each partition 0..n-1 exactly once
//     (INVALID_REPLICA_ASSIGNMENT);
//   - an internal topic's name (metadata.IsInternalTopic) is
//     INVALID_REQUEST: its owner creates it (FindCoordinator, or the HTTP
//     gateway as Config.InternalClientID);
//   - the topic name (INVALID_TOPIC_EXCEPTION) and every config
//     (INVALID_CONFIG naming the value and what is allowed) are checked
//     here and again by the controller when it commits.
//
// ValidateOnly (v1+) runs every check, the controller's included, and
// creates nothing. v1+ answers carry an error message; v5+ describe the
// created topic (partitions, replication factor, every topic config with
// its source, as DescribeConfigs would); v7 adds the topic id.
// TimeoutMillis bounds the wait for the commit (REQUEST_TIMED_OUT after;
// the topic may still be created, as in Kafka).
//
// Authorization (ControllerApis.createTopics): CREATE on the cluster
// allows every topic; without it, each distinct name needs CREATE on the
// topic, checked after the duplicate check and before any other, so a
// denied topic is TOPIC_AUTHORIZATION_FAILED whether or not it exists or
// is valid, is never sent to the controller and costs no mutation quota.
// ValidateOnly is authorized alike. A created (or validated) topic whose
// configs the principal may not DESCRIBE_CONFIGS is answered with its id
// only: no partitions, replication factor or configs, and v5+'s
// ConfigErrorCode TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleCreateTopics(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(req.version)

	counts := make(map[string]int, len(r.Topics))
	for i := range r.Topics {
		counts[r.Topics[i].Topic]++
	}

	// results[i] answers r.Topics[i]; duplicates after the first are
	// dropped from the response at the end.
	results := make([]kmsg.CreateTopicsResponseTopic, len(r.Topics))
	errs := make([]error, len(r.Topics))
	var toCreate []controlplane.CreateTopic
	var toCreateIdx []int
	mq := s.mutationQuotaFor(req, 6, req.version >= 1 && r.ValidateOnly)
	creatable := s.authzByName(req, acl.OperationCreate, acl.ResourceTopic).orCluster(acl.OperationCreate)
	for i := range r.Topics {
		t := &r.Topics[i]
		results[i] = kmsg.NewCreateTopicsResponseTopic()
		results[i].Topic = t.Topic
		if counts[t.Topic] > 1 {
			errs[i] = invalidRequest("topic %q appears %d times in the request", t.Topic, counts[t.Topic])
			continue
		}
		if !creatable.allowed(t.Topic) {
			errs[i] = authzError(acl.ResourceTopic)
			continue
		}
		ct, err := createTopicFromRequest(s.image(), req.version, t, s.internalClient(req))
		if err == nil {
			err = mq.admit(s, req, createdPartitions(ct))
		}
		if err != nil {
			errs[i] = err
			continue
		}
		toCreate = append(toCreate, ct)
		toCreateIdx = append(toCreateIdx, i)
	}

	if len(toCreate) > 0 {
		cctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
		created := s.controller.CreateTopics(cctx, toCreate, req.version >= 1 && r.ValidateOnly)
		cancel()
		if len(created) != len(toCreate) {
			panic(fmt.Sprintf("controller answered %d of %d topics", len(created), len(toCreate)))
		}
		for j, res := range created {
			i := toCreateIdx[j]
			if res.Err != nil {
				errs[i] = res.Err
				continue
			}
			// Kafka decides this without logging a denial
			// (logIfDenied=false): the topic was created; only its
			// description is withheld.
			if s.allowedQuiet(req, acl.OperationDescribeConfigs, acl.ResourceTopic, results[i].Topic) {
				fillCreatedTopic(s.image(), &results[i], res.Topic)
			} else if res.Topic != nil {
				results[i].TopicID = res.Topic.ID
				results[i].ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			}
		}
	}

	answered := make(map[string]bool, len(r.Topics))
	for i := range results {
		if answered[results[i].Topic] {
			continue
		}
		answered[results[i].Topic] = true
		if errs[i] != nil {
			results[i].ErrorCode, results[i].ErrorMessage = s.errorAndMessage(errs[i], "CreateTopics", "topic", results[i].Topic)
			results[i].TopicID = [16]byte{}
			results[i].NumPartitions, results[i].ReplicationFactor = -1, -1
			results[i].Configs = nil
		}
		resp.Topics = append(resp.Topics, results[i])
	}
	return resp, nil, nil
}

// createTopicFromRequest checks one requested topic and turns it into the
// controller's form. internal: the request is from one of Fjord's own
// clients (Config.InternalClientID), which may create internal topics.
func createTopicFromRequest(img *metadata.Image, version int16, t *kmsg.CreateTopicsRequestTopic, internal bool) (controlplane.CreateTopic, error) {
	ct := controlplane.CreateTopic{
		Name:              t.Topic,
		NumPartitions:     t.NumPartitions,
		ReplicationFactor: t.ReplicationFactor,
	}
	if err := metadata.ValidateTopicName(t.Topic); err != nil {
		return ct, err
	}
	if metadata.IsInternalTopic(t.Topic) && !internal {
		// Its owner creates it with its own settings (the group
		// coordinator hashes groups over a fixed partition count).
		return ct, invalidRequest("topic %q is internal to Fjord: the node creates it when it is first needed", t.Topic)
	}

	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return ct, invalidRequest("topic %q: NumPartitions and ReplicationFactor must be -1 when ReplicaAssignment is given (got %d and %d)",
				t.Topic, t.NumPartitions, t.ReplicationFactor)
		}
		assignments, err := replicaAssignments(t)
		if err != nil {
			return ct, err
		}
		ct.Assignments = assignments
	} else {
		if version < 4 && (t.NumPartitions == -1 || t.ReplicationFactor == -1) {
			return ct, invalidRequest("topic %q: default partitions or replication factor (-1) need CreateTopics v4+; this request is v%d",
				t.Topic, version)
		}
		if t.NumPartitions == 0 || t.NumPartitions < -1 {
			return ct, fmt.Errorf("%w: topic %q: %d partitions; give at least 1, or -1 for the default",
				kerr.InvalidPartitions, t.Topic, t.NumPartitions)
		}
		if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
			return ct, fmt.Errorf("%w: topic %q: replication factor %d; give at least 1, or -1 for the default",
				kerr.InvalidReplicationFactor, t.Topic, t.ReplicationFactor)
		}
	}

	if len(t.Configs) > 0 {
		ct.Configs = make(map[string]string, len(t.Configs))
	}
	for _, c := range t.Configs {
		if _, dup := ct.Configs[c.Name]; dup {
			return ct, invalidRequest("topic %q: config %q given more than once", t.Topic, c.Name)
		}
		if c.Value == nil {
			return ct, fmt.Errorf("%w: topic %q: config %q has a null value", kerr.InvalidConfig, t.Topic, c.Name)
		}
		if err := img.ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return ct, err
		}
		ct.Configs[c.Name] = *c.Value
	}
	return ct, nil
}

// replicaAssignments turns a request's per-partition replica lists into
// the controller's slice indexed by partition, refusing gaps, repeats
// and ragged replica counts.
func replicaAssignments(t *kmsg.CreateTopicsRequestTopic) ([][]int32, error) {
	out := make([][]int32, len(t.ReplicaAssignment))
	for _, a := range t.ReplicaAssignment {
		if a.Partition < 0 || int(a.Partition) >= len(out) {
			return nil, fmt.Errorf("%w: topic %q: partition %d in an assignment of %d partitions; partitions must be numbered 0..%d",
				kerr.InvalidReplicaAssignment, t.Topic, a.Partition, len(out), len(out)-1)
		}
		if out[a.Partition] != nil {
			return nil, fmt.Errorf("%w: topic %q: partition %d assigned twice", kerr.InvalidReplicaAssignment, t.Topic, a.Partition)
		}
		if len(a.Replicas) == 0 {
			return nil, fmt.Errorf("%w: topic %q: partition %d has no replicas", kerr.InvalidReplicaAssignment, t.Topic, a.Partition)
		}
		out[a.Partition] = slices.Clone(a.Replicas)
	}
	for p := range out {
		if len(out[p]) != len(out[0]) {
			return nil, fmt.Errorf("%w: topic %q: partition %d has %d replicas, partition 0 has %d; every partition needs the same number",
				kerr.InvalidReplicaAssignment, t.Topic, p, len(out[p]), len(out[0]))
		}
	}
	return out, nil
}

// fillCreatedTopic describes a created (or validated) topic in the
// fields v5+ carry; older versions do not encode them.
func fillCreatedTopic(img *metadata.Image, rt *kmsg.CreateTopicsResponseTopic, t *metadata.Topic) {
	if t == nil {
		return
	}
	rt.TopicID = t.ID
	rt.NumPartitions = int32(len(t.Partitions))
	rt.ReplicationFactor = -1
	if len(t.Partitions) > 0 {
		rt.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
	}
	for _, e := range topicConfigEntries(img, t, nil) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.name
		c.Value = strp(e.value)
		c.Source = int8(e.source)
		rt.Configs = append(rt.Configs, c)
	}
}
