package kafkaserver

// Metadata: v0-12
//
// Answers brokers, cluster id, controller id and the requested topics
// from one metadata image.
//
// Which topics: v0 has no null array, so an empty list means all topics;
// from v1 a null list means all and an empty one none. From v10 a topic
// may be named by id (name null): an unknown id is UNKNOWN_TOPIC_ID, an
// unknown name UNKNOWN_TOPIC_OR_PARTITION, a name Kafka would refuse
// INVALID_TOPIC_EXCEPTION.
//
// Auto-creation (auto.create.topics.enable): an unknown, valid name is
// created with the defaults (num.partitions, default.replication.factor)
// when the server allows it and the client does (v4+
// AllowAutoTopicCreation; before v4 clients always allowed it). The
// controller answers only once the topic is in this node's image and
// its logs exist, so the answer carries the new topic and the client can
// produce at once. A create that loses a race to another is answered from
// the image; if the topic is still not there, LEADER_NOT_AVAILABLE tells
// the client to retry. Internal topics (metadata.IsInternalTopic) are
// never auto-created: their owners create them with their own settings.
//
// Authorization (authz.go): a topic named is answered only to a
// principal that may DESCRIBE it, else TOPIC_AUTHORIZATION_FAILED, before
// its existence is looked at (a topic named by a known id is refused
// without its name); auto-creating one needs CREATE on the cluster or
// the topic too. Every-topic requests list only the topics the principal
// may describe. KIP-430's authorized operations are filled when asked.
//
// Per partition: leader and leader epoch, replicas, ISR, and offline
// replicas (replicas on brokers not registered or fenced, and replicas
// whose log failed: metadata.Image.ReplicaOffline). A partition with no
// leader, or whose leader is not registered, is LEADER_NOT_AVAILABLE.
//
// Controller id: the active controller if it is a registered broker,
// else this node. Clients send admin requests (CreateTopics, ...) to the
// controller id; every broker serves them by proposing through the
// controller, so any live broker is a right answer (Kafka's KRaft brokers
// also answer with a broker, not the controller).

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleMetadata(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.MetadataRequest)
	resp := body.ResponseKind().(*kmsg.MetadataResponse)
	img := s.image()

	for _, id := range img.BrokerIDs() {
		b, _ := img.Broker(id)
		if b.Fenced {
			continue // as Kafka: clients are told of live brokers only
		}
		host, port, ok := req.endpoint(b)
		if !ok {
			continue // as Kafka: a broker without this listener is not one this client can reach
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.NodeID, host, port
		if b.Rack != "" {
			rack := b.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	if img.ClusterID != "" {
		clusterID := img.ClusterID
		resp.ClusterID = &clusterID
	}
	resp.ControllerID = s.advertisedControllerID(img)

	// KIP-430: the cluster's operations only when asked (v8-10) and
	// the principal may describe the cluster; Kafka's "not asked" is
	// math.MinInt32.
	resp.AuthorizedOperations = notAskedOperations
	if body.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if s.allowedCluster(req, acl.OperationDescribe) {
			resp.AuthorizedOperations = s.authorizedOperations(req, acl.ResourceCluster, acl.ClusterName)
		}
	}
	// describe finishes a topic's answer with its authorized operations
	// when asked.
	describe := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		mt.AuthorizedOperations = notAskedOperations
		if body.IncludeTopicAuthorizedOperations && mt.Topic != nil {
			mt.AuthorizedOperations = s.authorizedOperations(req, acl.ResourceTopic, *mt.Topic)
		}
		return mt
	}

	all := body.Topics == nil || (req.version == 0 && len(body.Topics) == 0)
	if all {
		// Every topic the principal may describe; the others are left
		// out unmentioned (Kafka logs no denial for them either).
		for _, name := range img.TopicNames() {
			if !s.allowedQuiet(req, acl.OperationDescribe, acl.ResourceTopic, name) {
				continue
			}
			t, _ := img.Topic(name)
			resp.Topics = append(resp.Topics, describe(metadataTopic(img, t)))
		}
		return resp, nil, nil
	}

	allowCreate := s.cfg.AutoCreateTopics && (req.version < 4 || body.AllowAutoTopicCreation)
	var toCreate []string
	// pending: the answer indexes of each topic to auto-create.
	pending := make(map[string][]int)
	describable := s.authzByName(req, acl.OperationDescribe, acl.ResourceTopic)
	mayDescribe := describable.allowed
	for _, rt := range body.Topics {
		if rt.Topic == nil {
			// Ids are not secret: an unknown one is UNKNOWN_TOPIC_ID
			// for anyone; a known one the principal may not describe
			// is refused without its name.
			id := metadata.UUID(rt.TopicID)
			t, ok := lookupTopicID(img, id)
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			switch {
			case !ok:
				mt.ErrorCode = kerr.UnknownTopicID.Code
			case !mayDescribe(t.Name):
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			default:
				mt = describe(metadataTopic(img, t))
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.IsInternal = metadata.IsInternalTopic(name)
		// Authorization before existence: a topic the principal may not
		// describe is refused whether or not it exists.
		if !mayDescribe(name) {
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t, ok := lookupTopic(img, name); ok {
			resp.Topics = append(resp.Topics, describe(metadataTopic(img, t)))
			continue
		}
		switch {
		case metadata.ValidateTopicName(name) != nil:
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case allowCreate && !metadata.IsInternalTopic(name):
			if _, dup := pending[name]; dup {
				pending[name] = append(pending[name], len(resp.Topics))
				break
			}
			// Auto-creation is a create: CLUSTER CREATE allows every
			// topic, else TOPIC CREATE on this one.
			if !s.mayCreateTopic(req, name) {
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			toCreate = append(toCreate, name)
			pending[name] = append(pending[name], len(resp.Topics))
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, describe(mt))
	}
	if len(toCreate) > 0 {
		created := s.autoCreateTopics(ctx, toCreate, "Metadata")
		// The image after the creates, for the brokers of new replicas
		// (they are the same brokers, but read them from one image).
		img = s.image()
		for name, idx := range pending {
			for _, i := range idx {
				r := created[name]
				if r.topic != nil {
					resp.Topics[i] = describe(metadataTopic(img, r.topic))
				} else {
					resp.Topics[i].ErrorCode = r.code
				}
			}
		}
	}
	return resp, nil, nil
}

// metadataTopic describes t from img.
func metadataTopic(img *metadata.Image, t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = metadata.IsInternalTopic(t.Name)
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for i := range t.Partitions {
		p := &t.Partitions[i]
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = nonNil(p.Replicas)
		mp.ISR = nonNil(p.ISR)
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if b, ok := img.Broker(r); !ok || b.Fenced || img.ReplicaOffline(r, t.ID, int32(i)) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if b, ok := img.Broker(p.Leader); p.Leader < 0 || !ok || b.Fenced {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// nonNil is s, or an empty slice for nil: arrays and bytes Kafka never
// answers null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// advertisedControllerID is the controller id clients are told (see the
// file comment).
func (s *Server) advertisedControllerID(img *metadata.Image) int32 {
	if id := s.controller.ControllerID(); id >= 0 {
		if _, ok := img.Broker(id); ok {
			return id
		}
	}
	return s.cfg.NodeID
}

// autoCreated is the outcome of auto-creating one topic: the topic, or
// the error code to answer with.
type autoCreated struct {
	topic *metadata.Topic
	code  int16
}

// autoCreateTopics creates the given unknown topics with the defaults, in
// one controller call, and returns each one's outcome by name. what names
// the API for the log line.
func (s *Server) autoCreateTopics(ctx context.Context, names []string, what string) map[string]autoCreated {
	out := make(map[string]autoCreated, len(names))
	reqs := make([]controlplane.CreateTopic, 0, len(names))
	for _, name := range names {
		if err := metadata.ValidateTopicName(name); err != nil {
			out[name] = autoCreated{code: kerr.InvalidTopicException.Code}
			continue
		}
		reqs = append(reqs, controlplane.CreateTopic{Name: name, NumPartitions: -1, ReplicationFactor: -1})
	}
	if len(reqs) == 0 {
		return out
	}
	results := s.controller.CreateTopics(ctx, reqs, false)
	for i, r := range results {
		if i >= len(reqs) {
			break
		}
		name := reqs[i].Name
		switch {
		case r.Err == nil && r.Topic != nil:
			s.log.Info("kafkaserver: auto-created topic", slog.String("topic", name),
				slog.Int("partitions", len(r.Topic.Partitions)), slog.String("api", what))
			out[name] = autoCreated{topic: r.Topic}
		case r.Err == nil || errors.Is(r.Err, controlplane.ErrTopicExists):
			// Created by someone else first (or answered without the
			// topic): take it from the image if it is there yet.
			if t, ok := s.topicByName(name); ok {
				out[name] = autoCreated{topic: t}
			} else {
				out[name] = autoCreated{code: kerr.LeaderNotAvailable.Code}
			}
		case errors.Is(r.Err, controlplane.ErrInvalidTopic):
			out[name] = autoCreated{code: kerr.InvalidTopicException.Code}
		default:
			code, known := classify(r.Err)
			if r := kerr.ErrorForCode(code); !known || kerrRetriable(r) {
				// Not controller, timed out, shutting down: the
				// topic may appear on retry.
				code = kerr.LeaderNotAvailable.Code
			}
			s.log.Warn("kafkaserver: auto-creating topic failed", slog.String("topic", name),
				slog.String("api", what), slog.Any("err", r.Err))
			out[name] = autoCreated{code: code}
		}
	}
	for _, r := range reqs {
		if _, ok := out[r.Name]; !ok {
			// The controller answered fewer results than asked: a
			// bug there, but the client still gets a retriable answer.
			out[r.Name] = autoCreated{code: kerr.LeaderNotAvailable.Code}
		}
	}
	return out
}

// kerrRetriable reports whether err is a retriable Kafka error.
func kerrRetriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}
