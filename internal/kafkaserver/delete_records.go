package kafkaserver

// DeleteRecords: v0-2
//
// Moves partitions' log start offsets forward (KIP-107): records below
// the new low watermark are no longer readable, and segments wholly below
// it are deleted. Offset -1 means the high watermark (delete everything
// consumers can see). Per partition, in the common order: the topic and
// partition exist (UNKNOWN_TOPIC_OR_PARTITION), this node leads it
// (NOT_LEADER_FOR_PARTITION); an offset below -1 is OFFSET_OUT_OF_RANGE;
// the replica manager then refuses an offset above the high watermark
// (OFFSET_OUT_OF_RANGE) and waits, up to TimeoutMillis, for the new low
// watermark to hold on the partition's replicas. An internal topic is
// INVALID_TOPIC_EXCEPTION, as in Kafka. The answer is the new
// low watermark, -1 on error. All partitions share one deadline.
//
// Authorization: DELETE on the topic, each distinct name once, before
// anything else is checked: a denied topic's partitions are
// TOPIC_AUTHORIZATION_FAILED whether or not it exists (internal topics
// included), and its records are not touched.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleDeleteRecords(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.SetVersion(req.version)

	dctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
	defer cancel()
	img := s.image()
	deletable := s.authzByName(req, acl.OperationDelete, acl.ResourceTopic)
	system := s.systemTopicWrites(req) // and ALTER on the cluster for a system topic (authz_system.go)
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LowWatermark = -1
			err := func() error {
				if !deletable.allowed(t.Topic) || !system.allowed(t.Topic) {
					return authzError(acl.ResourceTopic)
				}
				if metadata.IsInternalTopic(t.Topic) {
					// As Kafka: moving the log start of
					// __consumer_offsets would drop groups' offsets.
					return metadata.InternalTopicError(t.Topic, "its records cannot be deleted")
				}
				if _, err := s.leaderPartition(img, t.Topic, p.Partition, -1); err != nil {
					return err
				}
				if p.Offset < -1 {
					return fmt.Errorf("%w: %s-%d: offset %d; give an offset >= 0, or -1 for the high watermark",
						kerr.OffsetOutOfRange, t.Topic, p.Partition, p.Offset)
				}
				low, err := s.replicas.DeleteRecords(dctx, t.Topic, p.Partition, p.Offset, remaining(dctx))
				if err != nil {
					return err
				}
				rp.LowWatermark = low
				return nil
			}()
			rp.ErrorCode, _ = s.errorAndMessage(err, "DeleteRecords", "topic", t.Topic, "partition", p.Partition)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// remaining is the time left before ctx's deadline, at least 1ms so a
// nearly spent deadline is not mistaken for "no timeout"; 0 when ctx has
// none (the request's TimeoutMillis was 0 or less, passed on as it was).
func remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(d), time.Millisecond)
}
