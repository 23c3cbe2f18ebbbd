package metadata

import (
	"slices"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Image is the cluster metadata at one point of the metadata log: the
// result of applying every record up to Offset, in order. An Image is
// immutable once published; Apply returns a new one that shares what did
// not change. Readers hold an *Image for as long as they like without
// locks.
type Image struct {
	// Offset is the Raft log index of the last record applied (0 for the
	// empty image).
	Offset    uint64
	ClusterID string
	// MetadataVersion is the log's metadata version
	// (MetadataVersionRecord); 0 before the first is committed.
	MetadataVersion int32
	Brokers         map[int32]Broker
	// Topics by name, and the same topics by id.
	Topics     map[string]*Topic
	TopicsByID map[UUID]*Topic
	// NextProducerID is the first producer id not yet handed out in a block.
	NextProducerID int64
	// Reassignments counts the partitions with a reassignment in
	// progress (Partition.Reassigning), so the controller's checks for
	// one to complete cost nothing when there is none.
	Reassignments int
	// BrokerConfigs are the dynamic broker configs (BrokerConfigRecord)
	// by broker id, -1 for the cluster default; nil when there is none.
	// Read them with BrokerConfig.
	BrokerConfigs map[int32]map[string]string
	// ClientQuotas are the client quotas (ClientQuotaRecord) by entity,
	// each entity's keys and values (quota.go). nil when there are none.
	ClientQuotas map[QuotaEntity]map[string]float64
	// ScramCredentials are the SCRAM credentials (ScramCredentialRecord)
	// by user, then mechanism (scram.go); nil when there are none. Read
	// them with ScramCredential.
	ScramCredentials map[string]map[string]ScramCredential
	// ACLs are the ACL bindings (ACLRecord; acl.go), nil when there are
	// none (a nil *acl.Set holds no binding).
	ACLs *acl.Set
	// OfflineReplicas are, by broker id, the partitions whose replica on
	// that broker is offline in its current registration
	// (OfflineReplicaRecord): the broker is never elected their leader
	// nor let into their ISR. nil when there is none (almost always);
	// a broker without any has no entry. The maps are shared with the
	// images after, so they are replaced, never edited. Read them with
	// ReplicaOffline.
	OfflineReplicas map[int32]map[TopicIDPartition]struct{}
	// TopicConfigs is every topic config the node knows (node builds it
	// from the owners' definitions; see KafkaTopicConfigs). Apply checks
	// config records with it, and it answers defaults. It is the node's
	// code, not metadata-log state: Empty sets it and every image applied
	// from that one shares it.
	TopicConfigs *topicconfig.Table
}

// Broker is a registered node.
type Broker struct {
	NodeID int32
	// Host and Port are the inter-broker listener (BrokerRecord).
	Host string
	Port int32
	// Listeners are the broker's named listeners; empty for a
	// registration that named none (then Host and Port serve all).
	// Shared between images: never modified.
	Listeners     []Endpoint
	Rack          string
	IncarnationID UUID
	// Epoch is the broker epoch: the metadata offset of the broker's
	// latest registration. It grows with every registration, so a
	// request carrying an older one comes from a process that has since
	// been replaced.
	Epoch int64
	// Fenced: the broker's session has lapsed, or it has not yet caught
	// up with the metadata log since it registered. A fenced broker
	// leads nothing and joins no ISR; it may stay the last member of an
	// ISR (the partition then has no leader until it returns).
	Fenced bool
	// ShuttingDown: the broker's process is in controlled shutdown
	// (ControlledShutdownRecord). Until it registers again it leads
	// nothing and joins no ISR, fenced or not; a new replica goes on it
	// only as a last resort, as on a fenced broker (the controller's
	// placeReplicas).
	ShuttingDown bool
}

// Active reports whether b may be elected leader, join an ISR or be
// the first choice for a new replica: it is neither fenced nor in
// controlled shutdown.
func (b Broker) Active() bool { return !b.Fenced && !b.ShuttingDown }

// Endpoint returns where clients of the listener named name dial b. A
// broker registered without named listeners serves every listener name
// at Host and Port; one with them has none for a name it lacks (Kafka
// leaves such a broker out of the answers of that listener).
func (b Broker) Endpoint(name string) (host string, port int32, ok bool) {
	if len(b.Listeners) == 0 {
		return b.Host, b.Port, true
	}
	for _, l := range b.Listeners {
		if l.Name == name {
			return l.Host, l.Port, true
		}
	}
	return "", 0, false
}

// ReplicaOffline reports whether broker's replica of partition of the
// topic with id is offline (OfflineReplicaRecord, in the broker's
// current registration).
func (img *Image) ReplicaOffline(broker int32, id UUID, partition int32) bool {
	if img.OfflineReplicas == nil {
		return false
	}
	_, offline := img.OfflineReplicas[broker][TopicIDPartition{TopicID: id, Partition: partition}]
	return offline
}

// Topic is one topic. Partitions[i] is partition i.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []Partition
	// Configs holds the topic's overrides only (name -> value); defaults
	// come from the image's TopicConfigs.
	Configs map[string]string
	// Keyed: a leader has appended a record with a key to the topic
	// (TopicKeyedRecord). Set once and kept for the topic's life, across
	// partition growth and config changes: adding partitions would move
	// those keys.
	Keyed bool
}

// Partition is one partition's replication state.
type Partition struct {
	Replicas    []int32
	ISR         []int32
	Leader      int32 // -1: no leader
	LeaderEpoch int32
	// PartitionEpoch counts the changes of Replicas, ISR, Leader and
	// LeaderEpoch since the partition was created (at 0). Unlike the
	// leader epoch it moves on with ISR changes too, so a leader's
	// AlterPartition computed from an older ISR is refused
	// (INVALID_UPDATE_VERSION) rather than undoing a change it has not
	// seen.
	PartitionEpoch int32
	// Adding and Removing describe a reassignment in progress (nil
	// both: none); see ReassignmentRecord.
	Adding, Removing []int32
}

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the replica list a reassignment in progress moves p to
// (Replicas without Removing), or Replicas when none is.
func (p Partition) Target() []int32 { return without(p.Replicas, p.Removing) }

// Original is the replica list p had before the reassignment in
// progress (Replicas without Adding), or Replicas when none is.
func (p Partition) Original() []int32 { return without(p.Replicas, p.Adding) }

// without returns list without the members of drop, in list's order
// (list itself when drop is empty).
func without(list, drop []int32) []int32 {
	if len(drop) == 0 {
		return list
	}
	out := make([]int32, 0, len(list))
	for _, r := range list {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}
