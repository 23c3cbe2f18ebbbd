package controller

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// This file is the controller's surface as the broker side sees it. Every
// change goes through the Raft log and returns once committed and applied
// to this node's image and published to its subscribers, so a caller that
// reads the image (or produces to a new topic) right after sees the
// change: create, delete and config changes are linearizable.

// CreateTopic asks for one topic.
type CreateTopic struct {
	Name string
	// NumPartitions: -1 takes num.partitions (default 1).
	NumPartitions int32
	// ReplicationFactor: -1 takes default.replication.factor
	// (min(3, brokers)).
	ReplicationFactor int16
	// Assignments, if set, gives each partition's replicas explicitly
	// (NumPartitions and ReplicationFactor must then be -1).
	Assignments [][]int32
	// Configs are topic config overrides; each is validated against
	// metadata.TopicConfigDefs.
	Configs map[string]string
}

// CreateTopicResult answers one CreateTopic, in request order. On success
// (or a successful validate-only call) Topic is the created topic (or what
// would have been created).
type CreateTopicResult struct {
	Err   error
	Topic *metadata.Topic
}

// ConfigOpType is IncrementalAlterConfigs' operation.
type ConfigOpType int8

const (
	ConfigSet      ConfigOpType = 0
	ConfigDelete   ConfigOpType = 1
	ConfigAppend   ConfigOpType = 2 // list configs (cleanup.policy)
	ConfigSubtract ConfigOpType = 3
)

// ConfigOp is one config change.
type ConfigOp struct {
	Name  string
	Op    ConfigOpType
	Value *string
}

// Expected conditions, each the Kafka error it is answered with (wrapped
// with detail, matched with errors.Is).
var (
	ErrTopicExists              = kerr.TopicAlreadyExists
	ErrInvalidTopic             = kerr.InvalidTopicException
	ErrUnknownTopic             = kerr.UnknownTopicOrPartition
	ErrUnknownTopicID           = kerr.UnknownTopicID
	ErrInvalidPartitions        = kerr.InvalidPartitions
	ErrInvalidReplicationFactor = kerr.InvalidReplicationFactor
	ErrInvalidReplicaAssignment = kerr.InvalidReplicaAssignment
	ErrInvalidConfig            = kerr.InvalidConfig
	ErrInvalidRequest           = kerr.InvalidRequest
	ErrNotController            = kerr.NotController
	ErrTimedOut                 = kerr.RequestTimedOut
)
