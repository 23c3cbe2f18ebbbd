package metadata

// The metadata log: every change to cluster metadata is one of these
// records, committed through the controller's Raft log and applied in log
// order to build the next Image. They are Fjord's own (not KRaft's wire
// schemas); each is encoded as a JSON envelope {"type": ..., "data": ...}
// by Encode, so a record written today still decodes after fields are
// added (unknown fields are ignored, missing ones take zero values).
//
// Invariants the controller keeps when it proposes records (Apply
// rejects a record that breaks them, so a bad proposal never reaches an
// image):
//   - a topic name maps to one live topic id, and a topic id is never reused;
//   - partitions of a topic are numbered 0..n-1 with no gaps; a partition
//     is never removed except with its topic;
//   - a partition's leader epoch only grows;
//   - a partition's partition epoch is 0 when it is created and moves on
//     by exactly one with every later change of its replicas, ISR, leader
//     or leader epoch, so it names one state of the partition: a leader's
//     AlterPartition says which state it computed its ISR from;
//   - producer id blocks never overlap: NextProducerID only grows.

// UUID is a topic id, as Kafka's: 16 random bytes, printed base64url in
// Kafka's tools and as hex-with-dashes here.
type UUID [16]byte

// Record is one metadata change.
type Record interface {
	// Type names the record kind in the encoded envelope.
	Type() string
}

// ClusterIDRecord fixes the cluster id. It is the first record of every
// metadata log and never changes.
type ClusterIDRecord struct {
	ClusterID string `json:"cluster_id"`
}

// MetadataVersionRecord sets the metadata version: which record types
// and fields the log may hold (KnownMetadataVersion). The first active
// controller of a log commits it with the cluster id; a later version is
// committed only when every node knows it (a later issue's upgrade
// path). A node whose code knows an older version refuses to apply it and
// stops, rather than build an image that differs from its peers'.
type MetadataVersionRecord struct {
	Version int32 `json:"version"`
}

// KnownMetadataVersion is the metadata version this code reads and
// writes. Version 1: topics, partitions (with partition epochs), configs,
// producer-id blocks, brokers (with incarnations and racks). Version 2
// adds broker fencing: a registration starts fenced, and
// FenceBrokerRecord and UnfenceBrokerRecord change it. (In a version 1
// log a registered broker is unfenced.) Version 3 adds controlled
// shutdown (ControlledShutdownRecord). Version 4 adds partition
// reassignment (ReassignmentRecord). Version 5 adds dynamic broker
// configs (BrokerConfigRecord) and unregistering a broker
// (UnregisterBrokerRecord). Version 6 adds marking a topic as having
// keyed records (TopicKeyedRecord). Version 7 adds offline replicas
// (OfflineReplicaRecord). Version 8 adds client quotas
// (ClientQuotaRecord). Version 9 adds a broker's named listeners
// (BrokerRecord.Listeners). Version 10 adds SCRAM credentials
// (ScramCredentialRecord, RemoveScramCredentialRecord). Version 11 adds
// ACL bindings (ACLRecord, RemoveACLRecord).
const KnownMetadataVersion int32 = 11

// FencingMetadataVersion is the first metadata version with broker
// fencing.
const FencingMetadataVersion int32 = 2

// ControlledShutdownMetadataVersion is the first metadata version with
// ControlledShutdownRecord.
const ControlledShutdownMetadataVersion int32 = 3

// ReassignmentMetadataVersion is the first metadata version with
// ReassignmentRecord.
const ReassignmentMetadataVersion int32 = 4

// BrokerConfigMetadataVersion is the first metadata version with
// BrokerConfigRecord and UnregisterBrokerRecord.
const BrokerConfigMetadataVersion int32 = 5

// KeyedTopicsMetadataVersion is the first metadata version with
// TopicKeyedRecord.
const KeyedTopicsMetadataVersion int32 = 6

// OfflineReplicasMetadataVersion is the first metadata version with
// OfflineReplicaRecord.
const OfflineReplicasMetadataVersion int32 = 7

// ListenersMetadataVersion is the first metadata version with
// BrokerRecord.Listeners.
const ListenersMetadataVersion int32 = 9

// BrokerRecord registers a broker (or re-registers it after a restart,
// with new endpoints).
type BrokerRecord struct {
	NodeID int32 `json:"node_id"`
	// Host and Port are the broker's inter-broker listener: where other
	// nodes' replication and forwarding dial it.
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Listeners are every listener the broker advertises, by name; the
	// inter-broker one is among them. Empty (a registration before
	// ListenersMetadataVersion): Host and Port, for every client.
	Listeners []Endpoint `json:"listeners,omitempty"`
	Rack      string     `json:"rack,omitempty"`
	// IncarnationID is drawn at random by each start of the broker
	// process (Kafka's incarnation id): a registration with another one
	// is a new process, with the same one a retry of the same.
	IncarnationID UUID `json:"incarnation_id,omitzero"`
	// Epoch is the broker epoch. In the metadata log it is not written:
	// a registration's epoch is the offset it commits at, which Apply
	// sets. Image snapshots carry it here.
	Epoch int64 `json:"epoch,omitempty"`
	// Fenced, like Epoch, is for image snapshots only: a registration
	// in the log always starts fenced (from FencingMetadataVersion).
	Fenced bool `json:"fenced,omitempty"`
	// ShuttingDown, too, is for image snapshots only: a registration is
	// a new process, never one in controlled shutdown.
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// Endpoint is one named listener of a broker, as clients of that
// listener are told to dial it.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	// SecurityProtocol is Kafka's id (0 PLAINTEXT, 1 SSL, 2
	// SASL_PLAINTEXT, 3 SASL_SSL).
	SecurityProtocol int16 `json:"security_protocol"`
}

// MaxBrokerListeners bounds a registration's listeners.
const MaxBrokerListeners = 16

// FenceBrokerRecord fences a broker (Kafka's FenceBrokerRecord): its
// session lapsed, so it may lead no partition and join no ISR. Epoch is
// the registration it fences: a record naming an older one (a process
// since replaced) is refused. The controller commits it in one batch with
// the PartitionRecords that take the broker out of every ISR and elect
// new leaders for what it led.
type FenceBrokerRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"`
}

// UnfenceBrokerRecord unfences a broker (Kafka's UnfenceBrokerRecord):
// it heartbeats and has applied the metadata log up to its own
// registration. It may then be elected and join ISRs.
type UnfenceBrokerRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"`
}

// ControlledShutdownRecord puts a broker in controlled shutdown (Kafka's
// BrokerRegistrationChangeRecord with InControlledShutdown): its process
// asked to stop. Like a fenced broker it may lead no partition, join no
// ISR and take a new replica only as a last resort, but it still serves (followers may fetch
// from it) until it exits. Epoch is the registration it names. The
// controller commits it in one batch with the PartitionRecords that move
// the broker's leaderships and ISR places to others; the broker's next
// registration (a new process) ends it.
type ControlledShutdownRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"`
}

// TopicRecord creates a topic. Its partitions follow as PartitionRecords
// in the same committed batch.
type TopicRecord struct {
	Name string `json:"name"`
	ID   UUID   `json:"id"`
}

// PartitionRecord creates a partition or replaces its state (replicas,
// leader, leader epoch, ISR). It carries the whole state rather than
// Kafka's PartitionChangeRecord delta: partitions are few, and a record
// that says everything can be checked on its own.
type PartitionRecord struct {
	TopicID     UUID    `json:"topic_id"`
	Partition   int32   `json:"partition"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Leader      int32   `json:"leader"` // -1: no leader
	LeaderEpoch int32   `json:"leader_epoch"`
	// PartitionEpoch is 0 for a new partition and the previous one + 1
	// for a replacement that changes anything (Kafka's partition epoch).
	// Logs written before it existed only ever created partitions, so
	// its absence (0) is right for them.
	PartitionEpoch int32 `json:"partition_epoch"`
}

// ConfigRecord sets (Value non-nil) or removes (Value nil, back to the
// default) one topic config.
type ConfigRecord struct {
	TopicID UUID    `json:"topic_id"`
	Name    string  `json:"name"`
	Value   *string `json:"value"`
}

// BrokerConfigRecord sets (Value non-nil) or removes (Value nil) a
// dynamic broker config, Kafka's ConfigRecord for a BROKER resource: for
// the registered broker Broker, or with Broker -1 for every broker (the
// cluster default, Kafka's resource named ""). A broker's own value wins
// over the default. Only the configs of DynamicBrokerConfigs may be set;
// every other broker setting is static (flags, FJORD_* variables, the
// config file).
type BrokerConfigRecord struct {
	Broker int32   `json:"broker"`
	Name   string  `json:"name"`
	Value  *string `json:"value"`
}

// UnregisterBrokerRecord removes a broker's registration (Kafka's
// UnregisterBroker, the end of a decommission): the broker, at the
// epoch given, holds no replica of any partition. Its dynamic broker
// configs go with it. A process of the same id that registers later is
// a new broker.
type UnregisterBrokerRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"`
}

// ReassignmentRecord starts (Adding or Removing non-empty) or ends (both
// empty) a reassignment of one partition (KIP-455). While one is in
// progress the partition's Replicas is the target's replicas, in the
// target's order, followed by the Removing ones; Adding are the
// target's replicas that were not replicas before. Both are subsets of
// Replicas, disjoint, and the replica set stays as it is until the
// reassignment ends: a start follows the PartitionRecord that widens
// the replicas, an end precedes the one that narrows them, in one batch.
// The other changes of the partition (ISR, leader) go on meanwhile with
// PartitionRecords that keep the replicas.
type ReassignmentRecord struct {
	TopicID   UUID    `json:"topic_id"`
	Partition int32   `json:"partition"`
	Adding    []int32 `json:"adding,omitempty"`
	Removing  []int32 `json:"removing,omitempty"`
}

// TopicKeyedRecord marks a topic as having keyed records: a leader of
// one of its partitions appended a record with a non-null key. It is
// committed once, the first time (a repeat changes nothing), and never
// undone while the topic lives: records already written keep their keys
// whatever comes later, and adding partitions moves keys to other
// partitions (murmur2 modulo the count), so `fjord topic alter
// --partitions` refuses on such a topic unless told to go ahead
// (DESIGN.md section 24). One record per topic rather than a flag in
// each broker's heartbeat: it is monotonic, and it costs the metadata log
// one entry per topic for ever.
type TopicKeyedRecord struct {
	TopicID UUID `json:"topic_id"`
}

// OfflineReplicaRecord says that broker NodeID, at its registration
// Epoch, holds partition Partition of topic TopicID on a log that failed
// (an fsync or write returned EIO or ENOSPC): the replica is offline
// until the broker's process is replaced, which reopens and recovers the
// log. Kafka's log-dir failure, for one partition: Fjord keeps one data
// directory per node, so the unit that fails is the replica, not a
// directory of them (Kafka marks the directory offline in the broker's
// registration, KIP-858).
//
// The controller commits it in one batch with the PartitionRecords that
// take the broker out of the partition's ISR and elect another leader
// where it led (as a fence does, for that partition only), and from then
// on never elects the broker for the partition nor lets it into the ISR.
// A registration of another incarnation of the broker (a new process)
// clears the broker's offline replicas; a retry of the same process's
// registration keeps them (its logs are the same failed ones). A repeat
// changes nothing. A record naming a partition the broker is not a
// replica of is accepted (the controller does not write one): the entry
// then only keeps the broker out if a reassignment adds it back.
type OfflineReplicaRecord struct {
	NodeID    int32 `json:"node_id"`
	Epoch     int64 `json:"epoch"`
	TopicID   UUID  `json:"topic_id"`
	Partition int32 `json:"partition"`
}

// TopicIDPartition names a partition by topic id (Kafka's
// TopicIdPartition): what outlives a topic's name.
type TopicIDPartition struct {
	TopicID   UUID  `json:"topic_id"`
	Partition int32 `json:"partition"`
}

// RemoveTopicRecord deletes a topic and all its partitions.
type RemoveTopicRecord struct {
	TopicID UUID `json:"topic_id"`
}

// ProducerIDsRecord hands the block [previous NextProducerID,
// NextProducerID) to NodeID, which gives its ids to InitProducerId callers.
type ProducerIDsRecord struct {
	NodeID         int32 `json:"node_id"`
	NextProducerID int64 `json:"next_producer_id"`
}

func (ClusterIDRecord) Type() string          { return "cluster_id" }
func (MetadataVersionRecord) Type() string    { return "metadata_version" }
func (BrokerRecord) Type() string             { return "broker" }
func (TopicRecord) Type() string              { return "topic" }
func (PartitionRecord) Type() string          { return "partition" }
func (ConfigRecord) Type() string             { return "config" }
func (RemoveTopicRecord) Type() string        { return "remove_topic" }
func (ProducerIDsRecord) Type() string        { return "producer_ids" }
func (FenceBrokerRecord) Type() string        { return "fence_broker" }
func (UnfenceBrokerRecord) Type() string      { return "unfence_broker" }
func (ControlledShutdownRecord) Type() string { return "controlled_shutdown" }
func (ReassignmentRecord) Type() string       { return "reassignment" }
func (BrokerConfigRecord) Type() string       { return "broker_config" }
func (UnregisterBrokerRecord) Type() string   { return "unregister_broker" }
func (TopicKeyedRecord) Type() string         { return "topic_keyed" }
func (OfflineReplicaRecord) Type() string     { return "offline_replica" }
func (ClientQuotaRecord) Type() string        { return "client_quota" }
