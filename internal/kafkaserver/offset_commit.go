package kafkaserver

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/group"
)

// OffsetCommit: v0-9
//
// Commits go to the coordinator, which checks a member's generation (or
// takes a simple consumer's commit: generation -1 and no member id, v0's
// only form) and writes them to __consumer_offsets before answering. A
// topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION
// here, as Kafka answers, and never reaches the coordinator, so nothing is
// stored for it. Per version: v1 adds a per-partition commit timestamp,
// which retention counts from, and v2-4 a retention time, after which
// the offsets expire whatever the group's state (stored as Kafka does, as
// value v1 with its expiry); -1 in either is the default, now and
// offsets.retention.minutes, and from v5 offsets expire only by the
// group's rules (KIP-211). v6 adds a leader epoch; v7 group.instance.id.
// v10 (topic ids) is not served.
func handleOffsetCommit(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.OffsetCommitRequest)
	resp := body.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.CommitRequest{
		Group:      body.Group,
		MemberID:   body.MemberID,
		InstanceID: body.InstanceID,
		Generation: body.Generation,
	}
	if req.version == 0 {
		cr.Generation = -1
	}
	if req.version >= 2 && req.version <= 4 && body.RetentionTimeMillis > 0 {
		cr.Retention = time.Duration(body.RetentionTimeMillis) * time.Millisecond
	}
	codes := make([][]int16, len(body.Topics))
	var where [][2]int // cr.Offsets[k] answers body.Topics[where[k][0]].Partitions[where[k][1]]
	img := s.image()
	for i, t := range body.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		mt, topicOK := lookupTopic(img, t.Topic)
		for j, p := range t.Partitions {
			if !topicOK || !partitionExists(mt, p.Partition) {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			oc := group.OffsetCommit{
				TopicPartition: group.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Offset:         p.Offset,
				LeaderEpoch:    -1,
				Metadata:       p.Metadata,
			}
			if req.version >= 6 {
				oc.LeaderEpoch = p.LeaderEpoch
			}
			if req.version == 1 && p.Timestamp >= 0 {
				oc.CommitTime = time.UnixMilli(p.Timestamp)
			}
			cr.Offsets = append(cr.Offsets, oc)
			where = append(where, [2]int{i, j})
		}
	}
	if len(cr.Offsets) > 0 {
		var err error
		var partErrs []error
		if s.groups == nil {
			err = kerr.CoordinatorNotAvailable
		} else {
			err, partErrs = s.groups.CommitOffsets(ctx, cr)
		}
		for k, w := range where {
			e := err
			if e == nil && k < len(partErrs) {
				e = partErrs[k]
			}
			codes[w[0]][w[1]] = s.errorCodeLogged(e, "OffsetCommit", "group", body.Group)
		}
	}
	for i, t := range body.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}
