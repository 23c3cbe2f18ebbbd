package kafkaserver

// AlterPartitionReassignments: v0
//
// Starts, replaces or cancels partition reassignments (KIP-455) through
// the active controller, from any node. Each partition names its target
// replica list, in order (its first the preferred leader), or null to
// cancel the reassignment in progress; the controller moves the
// partition there without going below its replication factor
// (controller/reassign.go).
//
// Per partition, in request order, before the controller is asked: a
// topic or partition named again later in the request is INVALID_REQUEST
// for the repeats (the first is served); an unknown topic or partition,
// a negative one included, is UNKNOWN_TOPIC_OR_PARTITION; a target that
// is empty, names a broker twice, a negative id or a broker this node's
// image has not registered is INVALID_REPLICA_ASSIGNMENT. Only the rest
// is sent, and the controller checks again against its own image when it
// commits (this one may be a moment old), answering as well
// NO_REASSIGNMENT_IN_PROGRESS for a cancel with none, and
// INVALID_REPLICA_ASSIGNMENT for a cancel that would leave no in-sync
// replica. The checks here also keep a hostile replica list (millions
// of ids in a 100 MB request) from reaching the controller: each list is
// walked once, and one that gets past has at most one entry per
// registered broker.
//
// An error of the whole request (NOT_CONTROLLER after the retries,
// REQUEST_TIMED_OUT) is the top-level ErrorCode and every sent
// partition's error, as Kafka's error response gives it. TimeoutMillis
// bounds the wait for the commit. The answer mirrors the request: one
// topic entry per request topic entry, its partitions in request order.
//
// Authorization: ALTER on the cluster, before anything else. Denied, the
// whole request is refused as above (the top-level ErrorCode and every
// partition's, in request order, CLUSTER_AUTHORIZATION_FAILED), nothing
// is checked and the controller is not asked.
//
// v1 (KIP-860, Kafka 4.1: AllowReplicationFactorChange) is not served:
// Kafka 4.0 serves v0 alone; kadm and Sarama send v0 to a v0 broker,
// and Kafka's admin client refuses to send a request that forbids a
// replication factor change to one (UnsupportedVersionException), so
// that guard is never silently dropped by Fjord.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleAlterPartitionReassignments(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.SetVersion(req.version)

	// errs[i][j] is the answer to r.Topics[i].Partitions[j]; sent[k] is
	// where the k-th partition asked of the controller sits.
	type position struct{ topic, partition int }
	img := s.image()
	denied := s.clusterDenied(req, acl.OperationAlter)
	if denied != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(denied, "AlterPartitionReassignments")
	}
	errs := make([][]error, len(r.Topics))
	var asked []controlplane.Reassignment
	var sent []position
	topicsSeen := make(map[string]bool, len(r.Topics))
	partitionsSeen := map[controlplane.TopicPartition]bool{}
	for i := range r.Topics {
		t := &r.Topics[i]
		errs[i] = make([]error, len(t.Partitions))
		topicRepeated := topicsSeen[t.Topic]
		topicsSeen[t.Topic] = true
		for j := range t.Partitions {
			p := &t.Partitions[j]
			tp := controlplane.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			var err error
			switch {
			case denied != nil:
				err = denied
			case topicRepeated:
				err = invalidRequest("topic %q is named more than once in the request; give each of its partitions in one entry", t.Topic)
			case partitionsSeen[tp]:
				err = invalidRequest("%s-%d is named more than once in the request", t.Topic, p.Partition)
			default:
				err = checkReassignment(img, tp, p.Replicas)
			}
			partitionsSeen[tp] = true
			if err != nil {
				errs[i][j] = err
				continue
			}
			asked = append(asked, controlplane.Reassignment{TopicPartition: tp, Replicas: p.Replicas})
			sent = append(sent, position{i, j})
		}
	}

	if len(asked) > 0 {
		cctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
		results, err := s.controller.AlterPartitionReassignments(cctx, asked)
		cancel()
		if err == nil && len(results) != len(asked) {
			err = fmt.Errorf("%w: the controller answered %d partitions of %d", kerr.UnknownServerError, len(results), len(asked))
		}
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "AlterPartitionReassignments", "partitions", len(asked))
		}
		for k, at := range sent {
			switch {
			case err != nil:
				errs[at.topic][at.partition] = err
			case results[k].TopicPartition != asked[k].TopicPartition:
				errs[at.topic][at.partition] = fmt.Errorf("%w: the controller answered %s-%d in the place of %s-%d",
					kerr.UnknownServerError, results[k].Topic, results[k].Partition, asked[k].Topic, asked[k].Partition)
			default:
				errs[at.topic][at.partition] = results[k].Err
			}
		}
	}

	resp.Topics = make([]kmsg.AlterPartitionAssignmentsResponseTopic, 0, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, 0, len(t.Partitions))
		for j := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = t.Partitions[j].Partition
			if err := errs[i][j]; err != nil {
				rp.ErrorCode, rp.ErrorMessage = s.errorAndMessage(err, "AlterPartitionReassignments", "topic", t.Topic, "partition", rp.Partition)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// checkReassignment checks one partition of a request against img, in
// the order every handler validates: the topic, the partition, then the
// target (nil: a cancel, whose check is the controller's, since whether
// a reassignment is in progress is state this image may not have yet).
// The target is walked once: a negative id, a broker img has not
// registered, or one named twice, each at the first entry that is one;
// so a list that passes has at most one entry per registered broker.
func checkReassignment(img *metadata.Image, tp controlplane.TopicPartition, replicas []int32) error {
	t, ok := lookupTopic(img, tp.Topic)
	if !ok {
		return fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, tp.Topic)
	}
	if _, ok := lookupPartition(t, tp.Partition); !ok {
		return fmt.Errorf("%w: topic %q has no partition %d (it has %d)",
			kerr.UnknownTopicOrPartition, tp.Topic, tp.Partition, len(t.Partitions))
	}
	if replicas == nil {
		return nil
	}
	if len(replicas) == 0 {
		return fmt.Errorf("%w: %s-%d: the target replica list is empty (null cancels a reassignment in progress)",
			kerr.InvalidReplicaAssignment, tp.Topic, tp.Partition)
	}
	named := make(map[int32]bool, min(len(replicas), len(img.Brokers)))
	for _, b := range replicas {
		switch {
		case b < 0:
			return fmt.Errorf("%w: %s-%d: %d is not a broker id", kerr.InvalidReplicaAssignment, tp.Topic, tp.Partition, b)
		case named[b]:
			return fmt.Errorf("%w: %s-%d: broker %d is named more than once in the target replicas",
				kerr.InvalidReplicaAssignment, tp.Topic, tp.Partition, b)
		}
		if _, ok := img.Brokers[b]; !ok {
			return fmt.Errorf("%w: %s-%d: broker %d is not registered",
				kerr.InvalidReplicaAssignment, tp.Topic, tp.Partition, b)
		}
		named[b] = true
	}
	return nil
}
