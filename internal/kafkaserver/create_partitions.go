package kafkaserver

// CreatePartitions: v0-3
//
// Grows topics to Count partitions through the controller (partitions
// are never removed). Per topic, in request order: a topic named more
// than once is INVALID_REQUEST for every occurrence (as Kafka); an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a Count not above the
// current number of partitions is INVALID_PARTITIONS; an explicit
// Assignment must give one replica list per new partition
// (INVALID_REPLICA_ASSIGNMENT), and the controller checks the brokers and
// replica count when it commits. ValidateOnly checks everything and
// creates nothing. TimeoutMillis bounds the wait for each commit. An
// internal topic (metadata.IsInternalTopic) is INVALID_TOPIC_EXCEPTION:
// its partition count is fixed.
//
// Keyed topics (DESIGN.md section 24). Growing a topic that has keyed
// records (metadata.Topic.Keyed) moves keys to other partitions, so
// per-key order breaks across the change. Fjord's CLI asks to be refused
// then, with a tagged field of Fjord's on the topic's entry
// (fjordmsg.RefuseKeyedTag, v2+): on a topic this node's image says is
// keyed, that topic is answered INVALID_PARTITIONS saying why, with the
// same tag on the answer's entry, and nothing is forwarded. A tag whose
// value is not fjordmsg.RefuseKeyed is INVALID_REQUEST, checked first.
// Without the tag (every Kafka client) the topic grows as in Kafka, and a
// grow of a keyed topic, with or without Fjord's CLI, is logged at warn
// and counted (fjord_partitions_added_to_keyed_topics_total). The image
// is this node's: a topic whose first keyed record is not yet marked
// there (the mark is a metadata commit after that append) grows
// unrefused.
//
// Authorization (ControllerApis.createPartitions): ALTER on the topic,
// each distinct name once, after the duplicate check and before any
// other: a denied topic is TOPIC_AUTHORIZATION_FAILED whether or not it
// exists (internal and keyed topics included, so neither is revealed),
// costs no mutation quota and is not sent to the controller;
// ValidateOnly alike.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleCreatePartitions(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.SetVersion(req.version)

	counts := make(map[string]int, len(r.Topics))
	for _, t := range r.Topics {
		counts[t.Topic]++
	}
	cctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
	defer cancel()
	img := s.image()
	mq := s.mutationQuotaFor(req, 3, r.ValidateOnly)
	alterable := s.authzByName(req, acl.OperationAlter, acl.ResourceTopic)
	system := s.systemTopicWrites(req) // and ALTER on the cluster for a system topic (authz_system.go)
	for i := range r.Topics {
		t := &r.Topics[i]
		refusedKeyed := false
		err := func() error {
			refuseKeyed, err := fjordmsg.RefuseKeyedAsked(t)
			if err != nil {
				return invalidRequest("topic %q: %v", t.Topic, err)
			}
			if counts[t.Topic] > 1 {
				return invalidRequest("topic %q appears %d times in the request", t.Topic, counts[t.Topic])
			}
			if !alterable.allowed(t.Topic) || !system.allowed(t.Topic) {
				return authzError(acl.ResourceTopic)
			}
			assignments, err := checkCreatePartitions(img, t)
			if err != nil {
				return err
			}
			topic, _ := lookupTopic(img, t.Topic) // checkCreatePartitions found it
			if refuseKeyed && topic.Keyed {
				refusedKeyed = true
				return fmt.Errorf("%w: topic %q has keyed records: adding partitions changes the partition of existing keys "+
					"(a key's partition is murmur2(key) modulo the count), so records of one key would be in different partitions "+
					"before and after, and per-key order breaks; nothing changed", kerr.InvalidPartitions, t.Topic)
			}
			if err := mq.admit(s, req, int(t.Count)-len(topic.Partitions)); err != nil {
				return err
			}
			if err := s.controller.CreatePartitions(cctx, t.Topic, t.Count, assignments, r.ValidateOnly); err != nil || r.ValidateOnly {
				return err
			}
			if topic.Keyed {
				have := int32(len(topic.Partitions))
				s.log.Warn("kafkaserver: partitions added to a topic with keyed records; keys written before and after may be in different partitions, so per-key order breaks across this change",
					"topic", t.Topic, "from", have, "to", t.Count)
				s.metrics.partitionsAddedToKeyed(t.Topic, t.Count-have)
			}
			return nil
		}()
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = t.Topic
		out.ErrorCode, out.ErrorMessage = s.errorAndMessage(err, "CreatePartitions", "topic", t.Topic)
		if refusedKeyed {
			fjordmsg.SetRefusedKeyed(&out)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp, nil, nil
}

// checkCreatePartitions checks one topic's request against img and
// returns its explicit assignments (nil: the controller places them).
func checkCreatePartitions(img *metadata.Image, t *kmsg.CreatePartitionsRequestTopic) ([][]int32, error) {
	if err := metadata.ValidateTopicName(t.Topic); err != nil {
		return nil, err
	}
	if metadata.IsInternalTopic(t.Topic) {
		// The controller refuses it too; this answers before the
		// existence check, alike whether or not the topic exists yet.
		return nil, metadata.RefuseInternalPartitions(t.Topic)
	}
	topic, ok := lookupTopic(img, t.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, t.Topic)
	}
	have := int32(len(topic.Partitions))
	if t.Count <= have {
		return nil, fmt.Errorf("%w: topic %q has %d partitions; the new count must be larger, got %d",
			kerr.InvalidPartitions, t.Topic, have, t.Count)
	}
	if t.Assignment == nil {
		return nil, nil
	}
	if len(t.Assignment) != int(t.Count-have) {
		return nil, fmt.Errorf("%w: topic %q: %d assignments for %d new partitions (%d -> %d)",
			kerr.InvalidReplicaAssignment, t.Topic, len(t.Assignment), t.Count-have, have, t.Count)
	}
	out := make([][]int32, len(t.Assignment))
	for i, a := range t.Assignment {
		out[i] = slices.Clone(a.Replicas)
	}
	return out, nil
}
