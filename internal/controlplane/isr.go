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
}

// PartitionState is a partition's state as committed.
type PartitionState struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// AlterPartition's refusals, in the order the controller checks them
// (Kafka's): each is retriable for the leader only after its image has
// moved on (a new broker epoch, leader epoch or partition epoch).
var (
	ErrStaleBrokerEpoch     = kerr.StaleBrokerEpoch
	ErrFencedLeaderEpoch    = kerr.FencedLeaderEpoch
	ErrInvalidUpdateVersion = kerr.InvalidUpdateVersion
	ErrIneligibleReplica    = kerr.IneligibleReplica
	ErrNotLeader            = kerr.NotLeaderForPartition
)
