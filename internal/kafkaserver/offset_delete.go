package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// OffsetDelete: v0
//
// Deletes a group's committed offsets for some partitions (KIP-496). The
// coordinator refuses a topic a current member is subscribed to
// (GROUP_SUBSCRIBED_TO_TOPIC, per partition). A topic or partition that
// does not exist is UNKNOWN_TOPIC_OR_PARTITION here, as for commits.
//
// Authorization (APIS.md), before the coordinator is asked: DELETE on
// the group for the whole request (GROUP_AUTHORIZATION_FAILED, no
// partitions listed, nothing deleted), then READ on each topic, each
// distinct topic decided once and before its existence: a denied
// topic's partitions are TOPIC_AUTHORIZATION_FAILED and keep their
// offsets; the others' are deleted.
func handleOffsetDelete(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.OffsetDeleteRequest)
	resp := body.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !s.allowedGroup(req, acl.OperationDelete, body.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, nil
	}
	if s.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, nil
	}
	img := s.image()
	read := s.authzByName(req, acl.OperationRead, acl.ResourceTopic)
	codes := make([][]int16, len(body.Topics))
	var parts []group.TopicPartition
	var where [][2]int
	for i, t := range body.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		// A topic listed with no partitions asks nothing and is
		// answered with none, so nothing is decided for it (as for a
		// commit's).
		if len(t.Partitions) > 0 && !read.allowed(t.Topic) {
			for j := range codes[i] {
				codes[i][j] = kerr.TopicAuthorizationFailed.Code
			}
			continue
		}
		mt, ok := lookupTopic(img, t.Topic)
		for j, p := range t.Partitions {
			if !ok || !partitionExists(mt, p.Partition) {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			parts = append(parts, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			where = append(where, [2]int{i, j})
		}
	}
	err, partErrs := s.groups.DeleteOffsets(ctx, body.Group, parts)
	resp.ErrorCode = s.errorCodeLogged(err, "OffsetDelete", "group", body.Group)
	if err != nil {
		return resp, nil, nil
	}
	for k, w := range where {
		if k < len(partErrs) {
			codes[w[0]][w[1]] = s.errorCodeLogged(partErrs[k], "OffsetDelete", "group", body.Group)
		}
	}
	for i, t := range body.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}
