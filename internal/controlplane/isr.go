package controlplane

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// ISR is how a partition's leader changes its in-sync replica set: Kafka's
// AlterPartition (KIP-497), sent to the active controller, which checks
// it against the partition as the metadata log has it and commits the new
// ISR with the partition epoch moved on. The leader sends one request per
// partition at a time and applies the ISR only once the committed state
// reaches it (in the answer, and then in its image).
type ISR interface {
	AlterPartition(ctx context.Context, req AlterPartition) (PartitionState, error)
}

// AlterPartition asks for one partition's new ISR.
type AlterPartition struct {
	TopicID   metadata.UUID
	Partition int32
	// LeaderID and BrokerEpoch are the sending leader's: a request from
	// a process since replaced (another broker epoch) is refused.
	LeaderID    int32
	BrokerEpoch int64
	// LeaderEpoch and PartitionEpoch are the partition's state the
	// leader computed the new ISR from: a request computed from an
	// older state is refused.
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	// NewISRBrokerEpochs, when not nil, holds each NewISR member's
	// broker epoch as the leader last saw it in that follower's fetches
	// (KIP-903; -1: not known), one for each member in the same order.
	// A member whose registration has changed since (it restarted,
	// perhaps with an emptied disk) is refused, INELIGIBLE_REPLICA:
	// what the leader saw of it belonged to another process. nil skips
	// the check for every member.
	NewISRBrokerEpochs []int64
}

// PartitionState is a partition's state as committed.
type PartitionState struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// AlterPartition's refusals. The controller checks, in Kafka's order
// (ReplicationControlManager.alterPartition):
//
//  1. the sender's broker epoch is its registration's: ErrStaleBrokerEpoch;
//  2. the topic id exists: ErrUnknownTopicID; the partition:
//     ErrUnknownTopic (UNKNOWN_TOPIC_OR_PARTITION);
//  3. the leader or partition epoch is not ahead of the controller's:
//     ErrNotController (this controller is likely behind a newer one);
//  4. the leader epoch is not behind: ErrFencedLeaderEpoch;
//  5. the sender leads the partition: ErrInvalidRequest (Kafka's answer,
//     not NOT_LEADER_OR_FOLLOWER: only a broken leader sends it);
//  6. the partition epoch is not behind: ErrInvalidUpdateVersion;
//  7. the new ISR is distinct replicas of the partition and holds the
//     leader: ErrInvalidRequest;
//  8. every member is registered, with the broker epoch given:
//     ErrIneligibleReplica.
//
// Each of 1, 4 and 6 is retriable for the leader only after its image
// has moved on (a new broker epoch, leader epoch or partition epoch).
// ErrNotLeader is no answer of the controller's.
var (
	ErrStaleBrokerEpoch     = kerr.StaleBrokerEpoch
	ErrFencedLeaderEpoch    = kerr.FencedLeaderEpoch
	ErrInvalidUpdateVersion = kerr.InvalidUpdateVersion
	ErrIneligibleReplica    = kerr.IneligibleReplica
	ErrNotLeader            = kerr.NotLeaderForPartition
)
