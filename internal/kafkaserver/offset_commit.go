package kafkaserver

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
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
//
// Authorization (APIS.md), before anything reaches the coordinator:
// READ on the group for the whole request (every partition answered
// GROUP_AUTHORIZATION_FAILED, nothing committed), then READ on each
// topic, decided once per distinct topic and before its existence: a
// denied topic's partitions are TOPIC_AUTHORIZATION_FAILED whether or
// not it exists, and the other topics' offsets are committed.
func handleOffsetCommit(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.OffsetCommitRequest)
	resp := body.ResponseKind().(*kmsg.OffsetCommitResponse)
	if !s.allowedGroup(req, acl.OperationRead, body.Group) {
		for _, t := range body.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.GroupAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, nil
	}
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
	topics := make([][]group.OffsetCommit, len(body.Topics))
	for i, t := range body.Topics {
		for _, p := range t.Partitions {
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
			topics[i] = append(topics[i], oc)
		}
	}
	plan := planAuthorizedCommit(s.image(), topics, true, s.authzByName(req, acl.OperationRead, acl.ResourceTopic))
	cr.Offsets = plan.offsets
	if len(cr.Offsets) > 0 {
		var err error
		var partErrs []error
		if s.groups == nil {
			err = kerr.CoordinatorNotAvailable
		} else {
			err, partErrs = s.groups.CommitOffsets(ctx, cr)
		}
		plan.answer(err, partErrs, func(e error) int16 {
			return s.errorCodeLogged(e, "OffsetCommit", "group", body.Group)
		})
	}
	for i, t := range body.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, plan.codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// commitPlan is a commit request's partitions on their way to the group
// coordinator and back, shared by OffsetCommit and TxnOffsetCommit: the
// two differ in how a partition's fields become a group.OffsetCommit,
// not in which partitions are asked or how the answers come back.
type commitPlan struct {
	// codes answers the request's partitions in its order: codes[i][j]
	// is topic i's partition j.
	codes [][]int16
	// offsets are the ones the coordinator is asked to commit, in the
	// request's order; offsets[k] answers codes[where[k][0]][where[k][1]].
	// Invariant: len(where) == len(offsets).
	offsets []group.OffsetCommit
	where   [][2]int
}

// planCommit lays out a commit of topics, each topic's offsets in the
// request's order. A topic or partition img does not have is
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers, and never reaches the
// coordinator, so nothing is stored for it. With checkPartitions false
// every partition goes to offsets unchecked: the request failed as a
// whole, and its error, not UNKNOWN_TOPIC_OR_PARTITION, is every
// partition's answer.
func planCommit(img *metadata.Image, topics [][]group.OffsetCommit, checkPartitions bool) commitPlan {
	return planAuthorizedCommit(img, topics, checkPartitions, nil)
}

// planAuthorizedCommit is planCommit with each topic's authorization
// (READ, for OffsetCommit and TxnOffsetCommit): a topic topicRead denies
// is TOPIC_AUTHORIZATION_FAILED on every partition and never reaches the
// coordinator, decided before the topic's existence, so a caller cannot
// tell a topic it may not read from one that does not exist. The denial
// holds with checkPartitions false too: a partition the caller may not
// commit is refused for that, not for the request's error. nil:
// every topic is allowed.
func planAuthorizedCommit(img *metadata.Image, topics [][]group.OffsetCommit, checkPartitions bool, topicRead *nameAuthz) commitPlan {
	p := commitPlan{codes: make([][]int16, len(topics))}
	for i, offsets := range topics {
		p.codes[i] = make([]int16, len(offsets))
		for j, oc := range offsets {
			if topicRead != nil && !topicRead.allowed(oc.Topic) {
				p.codes[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if checkPartitions {
				if mt, ok := lookupTopic(img, oc.Topic); !ok || !partitionExists(mt, oc.Partition) {
					p.codes[i][j] = kerr.UnknownTopicOrPartition.Code
					continue
				}
			}
			p.offsets = append(p.offsets, oc)
			p.where = append(p.where, [2]int{i, j})
		}
	}
	return p
}

// answer sets the codes of the partitions in offsets: err's when the
// commit failed as a whole, else each one's own of partErrs, which is in
// offsets' order; a partition past partErrs' end is answered code(nil).
func (p *commitPlan) answer(err error, partErrs []error, code func(error) int16) {
	for k, w := range p.where {
		e := err
		if e == nil && k < len(partErrs) {
			e = partErrs[k]
		}
		p.codes[w[0]][w[1]] = code(e)
	}
}
