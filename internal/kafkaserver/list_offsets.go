package kafkaserver

// ListOffsets: v0-8
//
// Answers, per partition, the offset for a timestamp:
//   - -2 (earliest): the log start offset;
//   - -1 (latest): the high watermark (read_uncommitted) or the last
//     stable offset (read_committed, v2+); a follower (ReplicaID >= 0)
//     gets the log end offset;
//   - -3 (max timestamp, KIP-734): the offset and timestamp of the record
//     with the largest timestamp;
//   - -4 (earliest local, KIP-405, v8): the log start offset, as Fjord
//     keeps every record locally;
//   - a timestamp >= 0: the first offset whose record timestamp is at or
//     after it, with that timestamp, or offset -1 when there is none.
//
// Any other negative timestamp is INVALID_REQUEST, and so is a
// topic-partition listed twice (every occurrence, as Kafka) and an
// isolation level other than 0 or 1. Then the common order: topic and
// partition exist, this node leads the partition, and (v4+) the client's
// current leader epoch is the partition's (FENCED_LEADER_EPOCH /
// UNKNOWN_LEADER_EPOCH); the lookup itself is the replica manager's.
//
// v0 answers in OldStyleOffsets, a list of at most MaxNumOffsets offsets.
// Kafka's v0 listed segment base offsets before the timestamp; Fjord
// answers with the one offset v1+ would give (none when it is -1), which
// is what v0 clients ask for in practice (MaxNumOffsets 1 with -1 or -2).
// v1+ answer one offset and its timestamp (-1 unless found by timestamp);
// v4+ also the leader epoch of the record at that offset.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/replica"
)

// timestampEarliestLocal is KIP-405's "earliest local" (ListOffsets v8+).
const timestampEarliestLocal int64 = -4

func handleListOffsets(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(req.version)

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

	isolation := replica.IsolationHighWatermark
	var isolationErr error
	if req.version >= 2 {
		switch r.IsolationLevel {
		case 0:
		case 1:
			isolation = replica.IsolationTxnCommitted
		default:
			isolationErr = invalidRequest("isolation level %d (want 0 read_uncommitted or 1 read_committed)", r.IsolationLevel)
		}
	}
	if r.ReplicaID >= 0 {
		isolation = replica.IsolationLogEnd
	}

	img := s.image()
	// DESCRIBE on each topic, before anything else about its
	// partitions.
	describable := s.authzByName(req, acl.OperationDescribe, acl.ResourceTopic)
	for _, t := range r.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			currentEpoch := int32(-1)
			if req.version >= 4 {
				currentEpoch = p.CurrentLeaderEpoch
			}
			err := func() error {
				if !describable.allowed(t.Topic) {
					return kerr.TopicAuthorizationFailed
				}
				if n := seen[tp{t.Topic, p.Partition}]; n > 1 {
					return invalidRequest("%s-%d listed %d times", t.Topic, p.Partition, n)
				}
				if isolationErr != nil {
					return isolationErr
				}
				timestamp := p.Timestamp
				switch {
				case timestamp >= 0, timestamp == replica.TimestampLatest,
					timestamp == replica.TimestampEarliest, timestamp == replica.TimestampMaxTimestamp:
				case timestamp == timestampEarliestLocal:
					timestamp = replica.TimestampEarliest
				default:
					return invalidRequest("timestamp %d: want >= 0, or -1 latest, -2 earliest, -3 max timestamp, -4 earliest local", timestamp)
				}
				if _, err := s.leaderPartition(img, t.Topic, p.Partition, currentEpoch); err != nil {
					return err
				}
				found, err := s.replicas.ListOffset(t.Topic, p.Partition, currentEpoch, timestamp, isolation)
				if err != nil {
					return err
				}
				if req.version == 0 {
					if found.Offset >= 0 && p.MaxNumOffsets > 0 {
						rp.OldStyleOffsets = []int64{found.Offset}
					}
					return nil
				}
				rp.Offset, rp.Timestamp, rp.LeaderEpoch = found.Offset, found.Timestamp, found.LeaderEpoch
				return nil
			}()
			if err != nil {
				rp.ErrorCode, _ = s.errorAndMessage(err, "ListOffsets",
					"partition", fmt.Sprintf("%s-%d", t.Topic, p.Partition))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}
