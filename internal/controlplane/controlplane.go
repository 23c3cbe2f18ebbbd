// Package controlplane is the seam between the broker side of a node
// (kafkaserver, txn, the group coordinator's wiring in node) and the
// control plane: the Raft-replicated metadata log and the active
// controller that decides what goes into it (internal/controller).
//
// The broker side sees two things, and only through these interfaces:
//
//   - Images: the metadata image this node has applied, and a
//     subscription to each new one, in log order. Every node has one,
//     whether or not it votes.
//   - Client: the changes a broker asks the active controller for. A
//     change returns once it is committed and this node's image includes
//     it (read your writes): a topic created through any node can be
//     produced to on that node as soon as CreateTopics answers.
//
// *controller.Controller implements both for the node it runs on: its
// Client serves a change only while this node is the active controller.
// The broker side is given a forward.Client instead (package
// controlplane/forward), which serves a change through the local
// controller when it is active and otherwise sends it over the Kafka
// protocol to the node that is, then waits until this node's own image
// includes it. A partition's leader changes its ISR through a third
// interface, ISR (isr.go), which both implement the same way. Broker
// heartbeats join Client when they are built (DESIGN.md section 18).
// Nothing here imports the Raft library, so the broker side never
// depends on it.
//
// Threads: every method of both interfaces may be called from any
// goroutine at once. Images.Subscribe's callbacks run one at a time, in
// order, on the image publisher's goroutine: a callback must not call
// back into a Client (it would wait on the image it is being given).
package controlplane

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Images is the metadata image source.
type Images interface {
	// Image is the latest image published on this node (nil before the
	// first).
	Image() *metadata.Image
	// Subscribe calls fn with the current image and then with each new
	// one, in order, until cancel is called.
	Subscribe(fn func(*metadata.Image)) (cancel func())
	// AwaitImage returns once Image (and so every subscriber) has
	// reached metadata offset, or ctx ends (ErrTimedOut).
	AwaitImage(ctx context.Context, offset uint64) error
}

// Quorum describes the controller quorum as this node's Raft
// configuration has it.
type Quorum interface {
	// Voters is the node ids of the quorum's voters, ascending. A
	// broker-only node follows the metadata log without a vote: it is
	// one of QuorumState's Observers.
	Voters() []int32
	// QuorumState is the quorum as this node knows it, for
	// DescribeQuorum.
	QuorumState() QuorumState
	// AddVoter makes node id, an observer of the metadata log (at addr,
	// its controller address; "" for whatever it joined with), a voter;
	// RemoveVoter takes a voter out (KIP-853). Only the active
	// controller changes the quorum: elsewhere ErrNotController.
	AddVoter(ctx context.Context, id int32, addr string) error
	RemoveVoter(ctx context.Context, id int32) error
	// UnregisterBroker removes a broker that holds no replica and is
	// not a voter from the cluster, and a broker-only node from the
	// metadata log's configuration (Kafka's UnregisterBroker). Only the
	// active controller: elsewhere ErrNotController.
	UnregisterBroker(ctx context.Context, id int32) error
}

// QuorumState describes the controller quorum (DescribeQuorum).
type QuorumState struct {
	// Leader is the Raft leader, the active controller (-1: none known);
	// Epoch its term.
	Leader int32
	Epoch  int64
	// HighWatermark is the metadata log's commit index as this node
	// knows it.
	HighWatermark int64
	// Voters, ascending by id. LogEndOffset is known for this node only
	// (-1 for the others: the Raft library keeps no per-follower offsets
	// it would report).
	Voters []VoterState
	// Observers are the broker-only nodes that follow the metadata log
	// without a vote, ascending by id, known alike.
	Observers []VoterState
}

// VoterState is one voter of the quorum.
type VoterState struct {
	NodeID int32
	// LogEndOffset is how far the node has the metadata log: this
	// node's own log end, or, on the active controller, the offset the
	// node's last heartbeat said it had applied; -1 when not known.
	LogEndOffset int64
	// LastHeard is when that heartbeat came (zero: none this term, or
	// not the active controller).
	LastHeard time.Time
}

// Client asks the active controller for changes. Each method returns
// once the change is committed and in this node's image, or with an error
// below (a kerr value, wrapped with detail): ErrNotController and
// ErrTimedOut are retriable, the rest say what is wrong with the request.
type Client interface {
	// ControllerID is the node id of the active controller, -1 if none is
	// known.
	ControllerID() int32
	// CreateTopics creates topics (or, validateOnly, checks that they
	// could be); results answer topics in order.
	CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult
	// DeleteTopics deletes by name; errs[i] answers names[i].
	DeleteTopics(ctx context.Context, names []string) (errs []error)
	// DeleteTopicsByID deletes by id; it returns each topic's name ("" if
	// unknown) and error.
	DeleteTopicsByID(ctx context.Context, ids []metadata.UUID) (names []string, errs []error)
	// CreatePartitions grows topic to count partitions; assignments, when
	// given, place the new ones.
	CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error
	// AlterConfigs changes a topic's config overrides. replaceAll is the
	// legacy AlterConfigs API: the given set replaces every override.
	AlterConfigs(ctx context.Context, topic string, ops []ConfigOp, replaceAll, validateOnly bool) error
	// AlterBrokerConfigs changes dynamic broker configs
	// (metadata.DynamicBrokerConfigs): broker's own, or with broker -1
	// the cluster default. Set and Delete only.
	AlterBrokerConfigs(ctx context.Context, broker int32, ops []ConfigOp, validateOnly bool) error
	// AlterClientQuotas sets and removes client quotas (KIP-546), each
	// alteration checked and committed on its own: errs[i] answers
	// alts[i] (metadata.ErrInvalidQuota for a bad entity, key or value,
	// or past metadata.MaxClientQuotaEntities). err is the whole
	// request's (ErrNotController, ErrTimedOut).
	AlterClientQuotas(ctx context.Context, alts []QuotaAlteration, validateOnly bool) (errs []error, err error)
	// ScramCredentials alters SCRAM credentials (KIP-554; scram.go).
	ScramCredentials
	// ACLs creates and deletes ACL bindings (acls.go).
	ACLs
	// AllocateProducerIDs commits a new block of producer ids for nodeID
	// and returns it as [first, first+count).
	AllocateProducerIDs(ctx context.Context, nodeID int32) (first, count int64, err error)
	// RegisterBroker commits a broker's registration, on every start of
	// it (its host or port may have changed; its incarnation id is new)
	// and returns its broker epoch.
	RegisterBroker(ctx context.Context, b metadata.BrokerRecord) (brokerEpoch int64, err error)
	// BrokerHeartbeat renews a broker's session with the active
	// controller (in its memory only), and asks for its controlled
	// shutdown when the heartbeat says so.
	BrokerHeartbeat(ctx context.Context, hb Heartbeat) (HeartbeatAnswer, error)
	// ElectLeaders runs leader elections (Kafka's ElectLeaders). The
	// error is the whole request's (ErrNotController, ErrTimedOut);
	// each partition's outcome is in its result.
	ElectLeaders(ctx context.Context, req ElectLeaders) ([]ElectionResult, error)
	// AlterPartitionReassignments starts, replaces or cancels partition
	// reassignments (KIP-455). The error is the whole request's
	// (ErrNotController, ErrTimedOut); each partition's outcome is in its
	// result, in the order asked.
	AlterPartitionReassignments(ctx context.Context, reqs []Reassignment) ([]ReassignmentResult, error)
	// MarkTopicKeyed commits that the topic with id has keyed records
	// (metadata.TopicKeyedRecord), unless the image says so already:
	// then nothing is committed and the answer is nil. A leader's node
	// sends it after its first keyed append to the topic (DESIGN.md
	// section 24). ErrUnknownTopicID for an id no live topic has,
	// ErrInvalidRequest for the zero id.
	MarkTopicKeyed(ctx context.Context, id metadata.UUID) error
	// ReportOfflineReplicas commits that broker's replicas of
	// partitions are offline (their logs failed; DESIGN.md section 25):
	// a metadata.OfflineReplicaRecord for each, and in the same batch
	// the broker's removal from each one's ISR and, where it led, the
	// election of another ISR member, as a fence does. brokerEpoch must
	// be the broker's current registration's (ErrStaleBrokerEpoch);
	// ErrBrokerNotRegistered for a broker without one. Idempotent: a
	// partition marked already, of a topic since deleted, or that the
	// broker no longer holds a replica of is passed over, and a request
	// that changes nothing commits nothing. ErrInvalidRequest for more
	// than MaxReportedOfflineReplicas partitions, a zero topic id or a
	// negative partition.
	ReportOfflineReplicas(ctx context.Context, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) error
}

// MaxReportedOfflineReplicas bounds one ReportOfflineReplicas: the
// records it commits (an OfflineReplicaRecord and a PartitionRecord per
// partition) stay one metadata entry of a size the controller's other
// batches have. A node with more offline replicas reports them in
// several requests.
const MaxReportedOfflineReplicas = 1000

// Reassignment is one partition of an AlterPartitionReassignments
// request: Replicas is the partition's target replica list, in order
// (its first the preferred leader); nil cancels the reassignment in
// progress.
type Reassignment struct {
	TopicPartition
	Replicas []int32
}

// ReassignmentResult is one partition's outcome: Err is nil when the
// reassignment was started, replaced, completed at once or cancelled;
// else ErrUnknownTopic, ErrInvalidReplicaAssignment,
// ErrNoReassignmentInProgress (a cancel with none), ErrInvalidRequest
// (a partition named twice), or the error that kept it from committing.
type ReassignmentResult struct {
	TopicPartition
	Err error
}

// ElectionType is ElectLeaders' kind of election (Kafka's numbers).
type ElectionType int8

const (
	// ElectPreferred makes a partition's preferred replica (its first)
	// its leader, when that replica is in the ISR and in service.
	ElectPreferred ElectionType = 0
	// ElectUnclean gives a leader to a partition that has none: an ISR
	// member in service if there is one, else the live replica whose
	// log reaches furthest, whatever the topic's
	// unclean.leader.election.enable says. Records only the ISR held
	// are lost.
	ElectUnclean ElectionType = 1
)

func (t ElectionType) String() string {
	switch t {
	case ElectPreferred:
		return "preferred"
	case ElectUnclean:
		return "unclean"
	}
	return "election type " + strconv.Itoa(int(t))
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectLeaders is one ElectLeaders request.
type ElectLeaders struct {
	Type ElectionType
	// Partitions are the partitions to elect, each once. Nil is every
	// partition, and then the results leave out those that need no
	// election (as Kafka's controller does).
	Partitions []TopicPartition
}

// ElectionResult is one partition's outcome: Err is nil when a leader
// was elected, else ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable, ErrUnknownTopic, or the error that kept
// the election from committing.
type ElectionResult struct {
	TopicPartition
	Err error
}

// Heartbeat is one broker heartbeat (Kafka's BrokerHeartbeat request).
type Heartbeat struct {
	NodeID int32
	// BrokerEpoch is the broker's current registration's.
	BrokerEpoch int64
	// MetadataOffset is the metadata offset the broker's image is at: a
	// fenced broker is unfenced once that reaches its registration.
	MetadataOffset uint64
	// WantShutDown asks for a controlled shutdown: the controller moves
	// the broker's leaderships and ISR places to other brokers and
	// answers ShouldShutDown once it leads nothing.
	WantShutDown bool
}

// HeartbeatAnswer is the active controller's answer to a Heartbeat that
// renewed the session (with a nil error, or ErrBrokerFenced).
type HeartbeatAnswer struct {
	// ShouldShutDown: the broker asked to shut down and leads no
	// partition any more (or is fenced): it may stop now.
	ShouldShutDown bool
}

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
	// the image's TopicConfigs (node's one table).
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
	// ErrDuplicateBrokerRegistration: the node id is registered by
	// another live process (another incarnation).
	ErrDuplicateBrokerRegistration = kerr.DuplicateBrokerRegistration
	// ErrInconsistentClusterID: the request names another cluster.
	ErrInconsistentClusterID = kerr.InconsistentClusterID
	// ErrBrokerNotRegistered: a heartbeat from, or an unregister of, a
	// node id with no registration.
	ErrBrokerNotRegistered = kerr.BrokerIDNotRegistered
	// ErrElectionNotNeeded: the partition already has the leader the
	// election would give it.
	ErrElectionNotNeeded = kerr.ElectionNotNeeded
	// ErrPreferredLeaderNotAvailable: the preferred replica is out of
	// the ISR, fenced, or shutting down.
	ErrPreferredLeaderNotAvailable = kerr.PreferredLeaderNotAvailable
	// ErrEligibleLeadersNotAvailable: no live replica could be elected.
	ErrEligibleLeadersNotAvailable = kerr.EligibleLeadersNotAvailable
	// ErrDuplicateVoter: the node is a voter of the quorum already.
	ErrDuplicateVoter = kerr.DuplicateVoter
	// ErrVoterNotFound: the node is not a voter of the quorum.
	ErrVoterNotFound = kerr.VoterNotFound
	// ErrNoReassignmentInProgress: a cancel of a partition that is not
	// being reassigned.
	ErrNoReassignmentInProgress = kerr.NoReassignmentInProgress
)

// ErrBrokerFenced answers a heartbeat that renewed the session of a
// broker the controller holds fenced (BrokerHeartbeat's IsFenced on the
// wire, not an error code): the heartbeat counted, but the broker must
// not act as a leader on its say-so (node/lease.go), since its image may
// not show yet what the fence moved away from it.
var ErrBrokerFenced = errors.New("broker is fenced")
