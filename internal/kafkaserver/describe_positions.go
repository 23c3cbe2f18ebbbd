package kafkaserver

// FjordDescribePositions (Fjord's key 10000): v0-1 (v1: the log end
// offset and the migration state, for `fjord topic migrate`)
//
// Fjord's own request (internal/fjordmsg): for offsets in partitions
// this node leads, where each stands against the high watermark (bytes
// to fetch, the first unconsumed record's timestamp), with the log
// start, high watermark and last stable offset. Group coordinators ask
// it for their groups' committed offsets (consumer lag in bytes and
// seconds, retention gaps); `fjord group describe` and the HTTP group
// view for one group's. Advertised only to clients that name themselves
// Fjord's (api_versions.go); served to anyone who may DESCRIBE the
// topics (TOPIC_AUTHORIZATION_FAILED otherwise), as ListOffsets is, since
// it tells no more than ListOffsets and Fetch do.
//
// Per partition, the admin handlers' order: the topic and partition
// exist, this node leads it; a partition listed twice is INVALID_REQUEST
// (every occurrence), and so is a negative offset. The answer keeps the
// request's order.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// fjordAPIs: Fjord's own requests (internal/fjordmsg).
var fjordAPIs = []api{
	{key: fjordmsg.DescribePositionsKey, minVersion: 0, maxVersion: 1, handle: handleDescribePositions},
	// mark_topic_keyed.go
	{key: fjordmsg.MarkTopicKeyedKey, minVersion: 0, maxVersion: 0, handle: handleMarkTopicKeyed, controlChange: true},
	// report_offline_replicas.go
	{key: fjordmsg.ReportOfflineReplicasKey, minVersion: 0, maxVersion: 0, handle: handleReportOfflineReplicas, controlChange: true},
}

func handleDescribePositions(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*fjordmsg.DescribePositionsRequest)
	resp := r.ResponseKind().(*fjordmsg.DescribePositionsResponse)
	type tp struct {
		topic     string
		partition int32
	}
	seen := make(map[tp]int)
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			seen[tp{t.Topic, p.Partition}]++
		}
	}
	img := s.image()
	// DESCRIBE on each topic, as ListOffsets asks: the answer tells
	// no more than ListOffsets and Fetch would.
	describable := s.authzByName(req, acl.OperationDescribe, acl.ResourceTopic)
	for _, t := range r.Topics {
		rt := fjordmsg.DescribePositionsResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := fjordmsg.DescribePositionsResponsePartition{Partition: p.Partition}
			err := func() error {
				if !describable.allowed(t.Topic) {
					return kerr.TopicAuthorizationFailed
				}
				if n := seen[tp{t.Topic, p.Partition}]; n > 1 {
					return invalidRequest("%s-%d listed %d times", t.Topic, p.Partition, n)
				}
				for _, o := range p.Offsets {
					if o < 0 {
						return invalidRequest("offset %d: want >= 0", o)
					}
				}
				if _, err := s.leaderPartition(img, t.Topic, p.Partition, -1); err != nil {
					return err
				}
				pos, err := s.replicas.DescribePositions(t.Topic, p.Partition, p.Offsets)
				if err != nil {
					return err
				}
				rp.LogStartOffset, rp.HighWatermark, rp.LastStableOffset = pos.LogStartOffset, pos.HighWatermark, pos.LastStableOffset
				rp.LogEndOffset, rp.MigratedTo = pos.LogEndOffset, pos.MigratedTo
				rp.Positions = make([]fjordmsg.Position, len(p.Offsets))
				for i, o := range p.Offsets {
					b := pos.Backlogs[i]
					rp.Positions[i] = fjordmsg.Position{Offset: o, Bytes: b.Bytes, Timestamp: b.Timestamp, DeleteAt: b.DeleteAt}
				}
				return nil
			}()
			if err != nil {
				rp.ErrorCode, _ = s.errorAndMessage(err, "FjordDescribePositions",
					"partition", fmt.Sprintf("%s-%d", t.Topic, p.Partition))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}
