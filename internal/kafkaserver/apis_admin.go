package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// adminAPIs: topic administration, configs, offsets lookups and producer
// ids. Each handler lives in its own file, which opens with the versions
// it serves and how it behaves.
//
// Every per-partition handler here validates in the same order, and does
// the work last: the topic exists, the partition exists, this node leads
// it, the client's leader epoch (when it sent one) is the partition's.
// Per-topic handlers check request shape (duplicates, fields the version
// forbids), then the topic name, then existence, then configs, and only
// then ask the controller, which validates again at the point where the
// change is committed (the image a handler reads may be a moment old).
var adminAPIs = []api{
	{key: 2, minVersion: 0, maxVersion: 8, handle: handleListOffsets},
	{key: 19, minVersion: 0, maxVersion: 7, handle: handleCreateTopics, controlChange: true},
	{key: 20, minVersion: 0, maxVersion: 6, handle: handleDeleteTopics, controlChange: true},
	{key: 21, minVersion: 0, maxVersion: 2, handle: handleDeleteRecords},
	{key: 22, minVersion: 0, maxVersion: 5, handle: handleInitProducerID},
	{key: 23, minVersion: 0, maxVersion: 4, handle: handleOffsetForLeaderEpoch},
	{key: 32, minVersion: 0, maxVersion: 4, handle: handleDescribeConfigs},
	{key: 33, minVersion: 0, maxVersion: 2, handle: handleAlterConfigs, controlChange: true},
	{key: 35, minVersion: 0, maxVersion: 4, handle: handleDescribeLogDirs},
	{key: 37, minVersion: 0, maxVersion: 3, handle: handleCreatePartitions, controlChange: true},
	{key: 43, minVersion: 0, maxVersion: 2, handle: handleElectLeaders, controlChange: true},
	{key: 44, minVersion: 0, maxVersion: 1, handle: handleIncrementalAlterConfigs, controlChange: true},
	{key: 45, minVersion: 0, maxVersion: 0, handle: handleAlterPartitionReassignments, controlChange: true},
	{key: 46, minVersion: 0, maxVersion: 0, handle: handleListPartitionReassignments},
	{key: 48, minVersion: 0, maxVersion: 1, handle: handleDescribeClientQuotas},
	{key: 49, minVersion: 0, maxVersion: 1, handle: handleAlterClientQuotas, controlChange: true},
	{key: 50, minVersion: 0, maxVersion: 0, handle: handleDescribeUserSCRAMCredentials},
	{key: 51, minVersion: 0, maxVersion: 0, handle: handleAlterUserSCRAMCredentials, controlChange: true},
	{key: 55, minVersion: 0, maxVersion: 2, handle: handleDescribeQuorum},
	{key: 80, minVersion: 0, maxVersion: 1, handle: handleAddRaftVoter},
	{key: 81, minVersion: 0, maxVersion: 0, handle: handleRemoveRaftVoter},
	{key: 64, minVersion: 0, maxVersion: 0, handle: handleUnregisterBroker},
	{key: 60, minVersion: 0, maxVersion: 2, handle: handleDescribeCluster},
	{key: 61, minVersion: 0, maxVersion: 0, handle: handleDescribeProducers},
}

// leaderPartition checks, against img, that this node can answer for
// topic/partition as its leader: the topic and partition exist, this node
// leads the partition, and currentLeaderEpoch (-1: the client sent none)
// is the partition's epoch. A client epoch below ours is a client with
// old metadata (FENCED_LEADER_EPOCH); one above ours means this node has
// not seen the latest image yet (UNKNOWN_LEADER_EPOCH). Both are
// retriable: the client refreshes metadata and tries again.
//
// The replica manager checks leadership and epochs again against its own
// state when it does the work; this check answers from the same image
// the rest of the response comes from, with the same codes in the same
// order for every API.
func (s *Server) leaderPartition(img *metadata.Image, topic string, partition, currentLeaderEpoch int32) (*metadata.Partition, error) {
	t, ok := lookupTopic(img, topic)
	if !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, topic)
	}
	p, ok := lookupPartition(t, partition)
	if !ok {
		return nil, fmt.Errorf("%w: topic %q has no partition %d (it has %d)",
			kerr.UnknownTopicOrPartition, topic, partition, len(t.Partitions))
	}
	if p.Leader != s.cfg.NodeID {
		return nil, fmt.Errorf("%w: %s-%d is led by node %d, not %d",
			kerr.NotLeaderForPartition, topic, partition, p.Leader, s.cfg.NodeID)
	}
	switch {
	case currentLeaderEpoch < 0:
	case currentLeaderEpoch < p.LeaderEpoch:
		return nil, fmt.Errorf("%w: %s-%d: client epoch %d, leader epoch %d",
			kerr.FencedLeaderEpoch, topic, partition, currentLeaderEpoch, p.LeaderEpoch)
	case currentLeaderEpoch > p.LeaderEpoch:
		return nil, fmt.Errorf("%w: %s-%d: client epoch %d, leader epoch %d",
			kerr.UnknownLeaderEpoch, topic, partition, currentLeaderEpoch, p.LeaderEpoch)
	}
	return p, nil
}

// errorAndMessage answers err with its Kafka code and, for a known
// condition, its text (clientMessage), which clients show their users
// beside the code's name ("INVALID_CONFIG: retention.ms: \"soon\" is not
// a number"). An unclassified error is
// logged with where and answered UNKNOWN_SERVER_ERROR with no text: its
// detail is for the operator, not the client.
func (s *Server) errorAndMessage(err error, where string, attrs ...any) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	code := s.errorCodeLogged(err, where, attrs...)
	if code == kerr.UnknownServerError.Code {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			return code, nil
		}
	}
	msg := clientMessage(err)
	return code, &msg
}

// withRequestTimeout bounds ctx by a request's TimeoutMillis. Kafka's
// admin requests carry one: the longest the client will wait for the
// change to be committed before it gives up. When it passes, the
// controller call returns context.DeadlineExceeded, answered
// REQUEST_TIMED_OUT (the change may still commit, as in Kafka). A
// timeout of zero or less adds no bound: Fjord answers only after the
// change is committed, and the connection's context still ends the wait.
func withRequestTimeout(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	if timeoutMs <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
}

// strp returns a pointer to a copy of v, for kmsg's nullable strings.
func strp(v string) *string { return &v }

// invalidRequest builds an INVALID_REQUEST error with detail.
func invalidRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kerr.InvalidRequest}, args...)...)
}
