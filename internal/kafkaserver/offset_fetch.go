package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/group"
)

// OffsetFetch: v0-9
//
// A group's committed offsets: for the partitions named, or (v2+, topics
// null) every partition the group has committed. A partition with no
// commit answers offset -1, as Kafka does, and so does an unknown group.
// v0-7 ask for one group; v8+ (KIP-709) for many, each answered on its
// own. Where the coordinator fails (NOT_COORDINATOR, loading), v0-1,
// which have no group-level error, put its code on every partition, and
// v2+ answer it for the group. v5+ answer leader epochs; v7+ carry
// RequireStable (KIP-447): a partition with offsets committed in a
// transaction not yet decided answers UNSTABLE_OFFSET_COMMIT, which
// clients retry, instead of the offset before them.
//
// Authorization (APIS.md), per group and before the coordinator is
// asked: DESCRIBE on the group, a denied group answered
// GROUP_AUTHORIZATION_FAILED where a coordinator error would be (each
// group its own from v8, every partition in v0-1); then DESCRIBE on each
// topic. A listed topic the caller may not describe is answered
// TOPIC_AUTHORIZATION_FAILED (offset -1) on its partitions, after the
// others, as Kafka places them, whether or not it exists; with every
// topic asked (null) such topics are left out without a word, as
// Metadata leaves them out of a listing. Each distinct group and topic
// is decided once per request.
func handleOffsetFetch(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.OffsetFetchRequest)
	resp := body.ResponseKind().(*kmsg.OffsetFetchResponse)
	checks := offsetFetchChecks{
		group:  s.authzByName(req, acl.OperationDescribe, acl.ResourceGroup),
		topics: s.authzByName(req, acl.OperationDescribe, acl.ResourceTopic),
		listed: s.authzFilterByName(req, acl.OperationDescribe, acl.ResourceTopic),
	}
	if req.version >= 8 {
		for _, g := range body.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var parts []group.TopicPartition
			if g.Topics != nil {
				parts = []group.TopicPartition{}
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						parts = append(parts, group.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			offsets, err := s.groupOffsets(checks, g.Group, parts, body.RequireStable)
			rg.ErrorCode = s.errorCodeLogged(err, "OffsetFetch", "group", g.Group)
			if err == nil {
				for _, ts := range groupByTopic(offsets) {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = ts[0].Topic
					for _, o := range ts {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, metadataOrEmpty(o.Metadata)
						rp.ErrorCode = s.errorCodeLogged(o.Err, "OffsetFetch", "group", g.Group)
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, nil
	}

	var parts []group.TopicPartition
	if body.Topics != nil || req.version < 2 {
		parts = []group.TopicPartition{}
		for _, t := range body.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, group.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	offsets, err := s.groupOffsets(checks, body.Group, parts, body.RequireStable)
	code := s.errorCodeLogged(err, "OffsetFetch", "group", body.Group)
	if err != nil {
		if req.version >= 2 {
			resp.ErrorCode = code
			return resp, nil, nil
		}
		// v0-1: no group-level error; every partition carries it.
		offsets = offsets[:0]
		for _, tp := range parts {
			offsets = append(offsets, group.CommittedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1, Err: err})
		}
	}
	for _, ts := range groupByTopic(offsets) {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ts[0].Topic
		for _, o := range ts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, metadataOrEmpty(o.Metadata)
			rp.ErrorCode = s.errorCodeLogged(o.Err, "OffsetFetch", "group", body.Group)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// offsetFetchChecks are an OffsetFetch's authorization checks, shared
// by its groups so that each distinct name is decided once.
type offsetFetchChecks struct {
	group  *nameAuthz // DESCRIBE on each group
	topics *nameAuthz // DESCRIBE on each topic listed
	listed *nameAuthz // DESCRIBE on each topic of an all-topics answer, quietly
}

// groupOffsets is one group's answer: the committed offsets of parts
// (nil: every partition the group has committed), authorized as
// handleOffsetFetch says. A denied group is kerr.GroupAuthorizationFailed
// with no offsets, and the coordinator is not asked.
func (s *Server) groupOffsets(checks offsetFetchChecks, groupID string, parts []group.TopicPartition, requireStable bool) ([]group.CommittedOffset, error) {
	if !checks.group.allowed(groupID) {
		return nil, kerr.GroupAuthorizationFailed
	}
	if parts == nil {
		offsets, err := s.fetchOffsets(groupID, nil, requireStable)
		if err != nil {
			return offsets, err
		}
		visible := make([]group.CommittedOffset, 0, len(offsets))
		for _, o := range offsets {
			if checks.listed.allowed(o.Topic) {
				visible = append(visible, o)
			}
		}
		return visible, nil
	}
	// Non-nil even when every topic is denied: nil would ask the
	// coordinator for every partition of the group.
	allowed := make([]group.TopicPartition, 0, len(parts))
	var denied []group.CommittedOffset
	for _, tp := range parts {
		if checks.topics.allowed(tp.Topic) {
			allowed = append(allowed, tp)
			continue
		}
		denied = append(denied, group.CommittedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1, Err: kerr.TopicAuthorizationFailed})
	}
	offsets, err := s.fetchOffsets(groupID, allowed, requireStable)
	if err != nil {
		// The group's error alone, as Kafka answers it: the denied
		// topics are not listed beside it (v0-1 put it on every
		// partition asked, denied ones too).
		return offsets, err
	}
	return append(offsets, denied...), nil
}

func (s *Server) fetchOffsets(groupID string, parts []group.TopicPartition, requireStable bool) ([]group.CommittedOffset, error) {
	if s.groups == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	return s.groups.FetchOffsets(groupID, parts, requireStable)
}

// groupByTopic splits offsets into runs of one topic each, in the order
// the topics first appear.
func groupByTopic(offsets []group.CommittedOffset) [][]group.CommittedOffset {
	idx := map[string]int{}
	var out [][]group.CommittedOffset
	for _, o := range offsets {
		i, ok := idx[o.Topic]
		if !ok {
			i = len(out)
			idx[o.Topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

// metadataOrEmpty is a commit's metadata, "" when there is none: Kafka
// answers "" (its NO_METADATA), never null.
func metadataOrEmpty(m *string) *string {
	if m == nil {
		empty := ""
		return &empty
	}
	return m
}
