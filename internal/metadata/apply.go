package metadata

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/fjordmq/fjord/internal/acl"
)

// Apply returns the image after recs, committed together at Raft index
// offset, or an error (wrapping ErrBadRecord) naming the first record that
// would break an invariant; then nothing of the batch is applied. Apply is
// pure: img is never modified, and the new image shares every topic the
// batch did not touch (copy-on-write), so readers of img are unaffected
// and applying a batch costs O(topics) map copying, not a deep copy.
//
// Rules, per record (the invariants of records.go, made checkable):
//   - offset > img.Offset: the metadata log only moves forward.
//   - ClusterIDRecord: non-empty; once set, only the same id again.
//   - MetadataVersionRecord: 1 up to KnownMetadataVersion (a newer one
//     wraps ErrUnknownVersion, and the node must stop: see
//     controller/fsm.go), never lower than before.
//   - BrokerRecord: node id >= 0, host non-empty, port 1..65535; from
//     FencingMetadataVersion the broker starts fenced.
//   - FenceBrokerRecord, UnfenceBrokerRecord: from
//     FencingMetadataVersion; a registered broker, at its current epoch.
//   - ControlledShutdownRecord: from ControlledShutdownMetadataVersion;
//     the same.
//   - TopicRecord: valid name, non-zero id, neither name nor id live;
//     by the end of the batch the topic has at least one partition.
//   - PartitionRecord: known topic id; partition number at most the
//     current count (equal appends, so partitions stay 0..n-1); replicas
//     non-empty, distinct, registered brokers; ISR distinct and a subset of
//     the replicas; leader -1 or an ISR member, and neither fenced nor in
//     controlled shutdown when the record makes it leader (such a broker
//     may stay a leader it was when the record changes something else:
//     the controller then ends that leadership in the fence's or the
//     shutdown's own batch); a broker whose replica of the partition is
//     offline neither made leader nor added to the ISR (it may stay
//     where it was, as a fenced broker may); leader epoch >= 0, never
//     lower than before, and higher whenever the leader changes; partition
//     epoch 0 for a new partition, and for a replacement the previous
//     one + 1 if the replicas, ISR (in order), leader or leader epoch
//     differ, else the previous one (a record that changes nothing does
//     not move it).
//   - ConfigRecord: known topic id; known config; a set value passes
//     the image's TopicConfigs (ValidateTopicConfig).
//   - RemoveTopicRecord: known topic id.
//   - TopicKeyedRecord: from KeyedTopicsMetadataVersion; known topic
//     id. On a topic marked already it changes nothing (accepted, not
//     refused: two nodes' first keyed appends may race to mark it).
//   - OfflineReplicaRecord: from OfflineReplicasMetadataVersion; a
//     registered broker at its current epoch; a live topic's partition.
//     A repeat changes nothing. A BrokerRecord of another incarnation
//     clears the broker's offline replicas; RemoveTopicRecord drops the
//     topic's.
//   - UnregisterBrokerRecord: from BrokerConfigMetadataVersion; a
//     registered broker at its current epoch that no partition names
//     among its replicas.
//   - BrokerConfigRecord: from BrokerConfigMetadataVersion; broker -1
//     or a registered one; a dynamic broker config
//     (ValidateBrokerConfig).
//   - ProducerIDsRecord: node id >= 0; NextProducerID grows.
//   - ScramCredentialRecord: from ScramMetadataVersion; a valid user
//     and credential (ValidateScramUser, ValidateScramCredential); a
//     new user only below MaxScramUsers. RemoveScramCredentialRecord:
//     from ScramMetadataVersion; a credential the user has.
//   - ACLRecord: from ACLMetadataVersion; a binding acl.Validate
//     accepts, not in the image yet, and only below MaxACLs bindings.
//     RemoveACLRecord: from ACLMetadataVersion; a binding in the image.
//
// Records may be values or non-nil pointers to them.
func (img *Image) Apply(offset uint64, recs ...Record) (*Image, error) {
	if offset <= img.Offset {
		return nil, fmt.Errorf("%w: offset %d is not after the image's offset %d", ErrBadRecord, offset, img.Offset)
	}
	next, err := applyRecords(img, offset, recs)
	if err != nil {
		return nil, err
	}
	next.Offset = offset
	return next, nil
}

func applyRecords(img *Image, offset uint64, recs []Record) (*Image, error) {
	d := draft{next: *img, offset: offset, owned: map[*Topic]bool{}, created: map[UUID]bool{}}
	for i, r := range recs {
		if err := d.apply(r); err != nil {
			name, _ := recordType(r)
			return nil, fmt.Errorf("%w: record %d (%s): %w", ErrBadRecord, i, name, err)
		}
	}
	for id := range d.created {
		if t, ok := d.next.TopicsByID[id]; ok && len(t.Partitions) == 0 {
			return nil, fmt.Errorf("%w: topic %q created without partitions", ErrBadRecord, t.Name)
		}
	}
	d.finishACLs()
	return &d.next, nil
}

// draft is the image being built by one Apply: a shallow copy of the old
// image whose maps and topics are copied the first time the batch changes
// them.
type draft struct {
	next Image
	// offset is the batch's metadata offset (a registration's broker
	// epoch).
	offset        uint64
	brokersCopied bool
	topicsCopied  bool
	// brokerConfigsCopied: the draft has its own BrokerConfigs map (the
	// per-broker maps in it are replaced whole, never edited).
	brokerConfigsCopied bool
	owned               map[*Topic]bool // topics cloned by this draft, safe to modify
	created             map[UUID]bool   // topics created by this batch
	// offlineCopied: the draft has its own OfflineReplicas map;
	// offlineOwned: the brokers whose map in it is the draft's own
	// (mutableOffline).
	offlineCopied bool
	offlineOwned  map[int32]bool
	// quotasCopied: the draft has its own ClientQuotas map (the
	// per-entity maps in it are replaced whole, never edited).
	quotasCopied bool
	// scramCopied: the draft has its own ScramCredentials map (the
	// per-user maps in it are replaced whole, never edited).
	scramCopied bool
	// acls: the batch's changes to the image's ACL bindings, nil until
	// its first ACL record; aclCount: the bindings it holds (acl.go).
	acls     *acl.Builder
	aclCount int
}

func (d *draft) apply(r Record) error {
	switch v := r.(type) {
	case ClusterIDRecord:
		return d.clusterID(v)
	case MetadataVersionRecord:
		return d.metadataVersion(v)
	case *MetadataVersionRecord:
		if v != nil {
			return d.metadataVersion(*v)
		}
	case *ClusterIDRecord:
		if v != nil {
			return d.clusterID(*v)
		}
	case BrokerRecord:
		return d.broker(v)
	case *BrokerRecord:
		if v != nil {
			return d.broker(*v)
		}
	case TopicRecord:
		return d.topic(v)
	case *TopicRecord:
		if v != nil {
			return d.topic(*v)
		}
	case PartitionRecord:
		return d.partition(v)
	case *PartitionRecord:
		if v != nil {
			return d.partition(*v)
		}
	case ConfigRecord:
		return d.config(v)
	case *ConfigRecord:
		if v != nil {
			return d.config(*v)
		}
	case TopicKeyedRecord:
		return d.topicKeyed(v)
	case *TopicKeyedRecord:
		if v != nil {
			return d.topicKeyed(*v)
		}
	case OfflineReplicaRecord:
		return d.offlineReplica(v)
	case *OfflineReplicaRecord:
		if v != nil {
			return d.offlineReplica(*v)
		}
	case RemoveTopicRecord:
		return d.removeTopic(v)
	case *RemoveTopicRecord:
		if v != nil {
			return d.removeTopic(*v)
		}
	case FenceBrokerRecord:
		return d.fence(v.NodeID, v.Epoch, true)
	case *FenceBrokerRecord:
		if v != nil {
			return d.fence(v.NodeID, v.Epoch, true)
		}
	case UnfenceBrokerRecord:
		return d.fence(v.NodeID, v.Epoch, false)
	case *UnfenceBrokerRecord:
		if v != nil {
			return d.fence(v.NodeID, v.Epoch, false)
		}
	case ControlledShutdownRecord:
		return d.controlledShutdown(v)
	case *ControlledShutdownRecord:
		if v != nil {
			return d.controlledShutdown(*v)
		}
	case ReassignmentRecord:
		return d.reassignment(v)
	case *ReassignmentRecord:
		if v != nil {
			return d.reassignment(*v)
		}
	case UnregisterBrokerRecord:
		return d.unregisterBroker(v)
	case *UnregisterBrokerRecord:
		if v != nil {
			return d.unregisterBroker(*v)
		}
	case ClientQuotaRecord:
		return d.clientQuota(v)
	case *ClientQuotaRecord:
		if v != nil {
			return d.clientQuota(*v)
		}
	case ScramCredentialRecord:
		return d.scramCredential(v)
	case *ScramCredentialRecord:
		if v != nil {
			return d.scramCredential(*v)
		}
	case RemoveScramCredentialRecord:
		return d.removeScramCredential(v)
	case *RemoveScramCredentialRecord:
		if v != nil {
			return d.removeScramCredential(*v)
		}
	case ACLRecord:
		return d.addACL(v)
	case *ACLRecord:
		if v != nil {
			return d.addACL(*v)
		}
	case RemoveACLRecord:
		return d.removeACL(v)
	case *RemoveACLRecord:
		if v != nil {
			return d.removeACL(*v)
		}
	case BrokerConfigRecord:
		return d.brokerConfig(v)
	case *BrokerConfigRecord:
		if v != nil {
			return d.brokerConfig(*v)
		}
	case ProducerIDsRecord:
		return d.producerIDs(v)
	case *ProducerIDsRecord:
		if v != nil {
			return d.producerIDs(*v)
		}
	default:
		if r == nil {
			return fmt.Errorf("nil record")
		}
		return fmt.Errorf("unknown record type %T", r)
	}
	return fmt.Errorf("nil %T", r)
}

func (d *draft) metadataVersion(r MetadataVersionRecord) error {
	switch {
	case r.Version > KnownMetadataVersion:
		return fmt.Errorf("%w: the metadata log is at version %d, this node knows versions up to %d: run a newer Fjord on it",
			ErrUnknownVersion, r.Version, KnownMetadataVersion)
	case r.Version < 1 || r.Version < d.next.MetadataVersion:
		return fmt.Errorf("metadata version %d (the log is at %d; versions start at 1 and never go back)", r.Version, d.next.MetadataVersion)
	}
	d.next.MetadataVersion = r.Version
	return nil
}

func (d *draft) clusterID(r ClusterIDRecord) error {
	switch {
	case r.ClusterID == "":
		return fmt.Errorf("empty cluster id")
	case d.next.ClusterID != "" && d.next.ClusterID != r.ClusterID:
		return fmt.Errorf("cluster id is %q, cannot change to %q", d.next.ClusterID, r.ClusterID)
	}
	d.next.ClusterID = r.ClusterID
	return nil
}

func (d *draft) broker(r BrokerRecord) error {
	switch {
	case r.NodeID < 0:
		return fmt.Errorf("node id %d < 0", r.NodeID)
	case r.Host == "":
		return fmt.Errorf("broker %d: empty host", r.NodeID)
	case r.Port < 1 || r.Port > 65535:
		return fmt.Errorf("broker %d: port %d outside 1..65535", r.NodeID, r.Port)
	}
	// Refused here too, not only where a node reads --rack, so a
	// registration that arrives any other way (a remote one, a log
	// replayed) builds the same image.
	if err := ValidateRack(r.Rack); err != nil {
		return fmt.Errorf("broker %d: %w", r.NodeID, err)
	}
	if err := d.checkListeners(r); err != nil {
		return err
	}
	if !d.brokersCopied {
		d.next.Brokers = cloneMap(d.next.Brokers)
		d.brokersCopied = true
	}
	old, ok := d.next.Brokers[r.NodeID]
	if !ok || old.IncarnationID.IsZero() || old.IncarnationID != r.IncarnationID {
		// Another process has reopened and recovered the logs that
		// failed. The same process registering again (a retry whose
		// first answer was lost) keeps its offline replicas: its failed
		// logs are still the failed ones.
		d.dropOfflineReplicas(r.NodeID)
	}
	d.next.Brokers[r.NodeID] = Broker{NodeID: r.NodeID, Host: r.Host, Port: r.Port, Listeners: slices.Clone(r.Listeners), Rack: r.Rack,
		IncarnationID: r.IncarnationID, Epoch: int64(d.offset),
		Fenced: d.next.MetadataVersion >= FencingMetadataVersion}
	return nil
}

// checkListeners checks a registration's named listeners: from
// ListenersMetadataVersion, each named once, with a host and a port, and
// the inter-broker endpoint (Host, Port) among them.
func (d *draft) checkListeners(r BrokerRecord) error {
	if len(r.Listeners) == 0 {
		return nil
	}
	if d.next.MetadataVersion < ListenersMetadataVersion {
		return fmt.Errorf("broker %d: named listeners need metadata version %d; the log is at %d", r.NodeID, ListenersMetadataVersion, d.next.MetadataVersion)
	}
	if len(r.Listeners) > MaxBrokerListeners {
		return fmt.Errorf("broker %d: %d listeners (at most %d)", r.NodeID, len(r.Listeners), MaxBrokerListeners)
	}
	inter := false
	for i, l := range r.Listeners {
		switch {
		case l.Name == "" || len(l.Name) > 64:
			return fmt.Errorf("broker %d: listener name %q (want 1 to 64 bytes)", r.NodeID, l.Name)
		case l.Host == "" || len(l.Host) > 255:
			return fmt.Errorf("broker %d: listener %s host %q (want 1 to 255 bytes)", r.NodeID, l.Name, l.Host)
		case l.Port < 1 || l.Port > 65535:
			return fmt.Errorf("broker %d: listener %s port %d outside 1..65535", r.NodeID, l.Name, l.Port)
		case l.SecurityProtocol < 0 || l.SecurityProtocol > 3:
			return fmt.Errorf("broker %d: listener %s security protocol %d (want 0 to 3)", r.NodeID, l.Name, l.SecurityProtocol)
		}
		for _, other := range r.Listeners[:i] {
			if other.Name == l.Name {
				return fmt.Errorf("broker %d: listener %s named twice", r.NodeID, l.Name)
			}
		}
		inter = inter || (l.Host == r.Host && l.Port == r.Port)
	}
	if !inter {
		return fmt.Errorf("broker %d: inter-broker endpoint %s:%d is none of its listeners", r.NodeID, r.Host, r.Port)
	}
	return nil
}

// fence sets a broker's fenced state (FenceBrokerRecord,
// UnfenceBrokerRecord).
func (d *draft) fence(id int32, epoch int64, fenced bool) error {
	b, ok := d.next.Brokers[id]
	switch {
	case d.next.MetadataVersion < FencingMetadataVersion:
		return fmt.Errorf("broker fencing needs metadata version %d; the log is at %d", FencingMetadataVersion, d.next.MetadataVersion)
	case !ok:
		return fmt.Errorf("broker %d is not registered", id)
	case b.Epoch != epoch:
		return fmt.Errorf("broker %d: epoch %d is not its registration's (%d)", id, epoch, b.Epoch)
	}
	if !d.brokersCopied {
		d.next.Brokers = cloneMap(d.next.Brokers)
		d.brokersCopied = true
	}
	b.Fenced = fenced
	d.next.Brokers[id] = b
	return nil
}

// controlledShutdown puts a broker in controlled shutdown
// (ControlledShutdownRecord).
func (d *draft) controlledShutdown(r ControlledShutdownRecord) error {
	b, ok := d.next.Brokers[r.NodeID]
	switch {
	case d.next.MetadataVersion < ControlledShutdownMetadataVersion:
		return fmt.Errorf("controlled shutdown needs metadata version %d; the log is at %d", ControlledShutdownMetadataVersion, d.next.MetadataVersion)
	case !ok:
		return fmt.Errorf("broker %d is not registered", r.NodeID)
	case b.Epoch != r.Epoch:
		return fmt.Errorf("broker %d: epoch %d is not its registration's (%d)", r.NodeID, r.Epoch, b.Epoch)
	}
	if !d.brokersCopied {
		d.next.Brokers = cloneMap(d.next.Brokers)
		d.brokersCopied = true
	}
	b.ShuttingDown = true
	d.next.Brokers[r.NodeID] = b
	return nil
}

func (d *draft) topic(r TopicRecord) error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	if r.ID.IsZero() {
		return fmt.Errorf("topic %q: zero topic id", r.Name)
	}
	if _, ok := d.next.Topics[r.Name]; ok {
		return fmt.Errorf("topic %q already exists", r.Name)
	}
	if t, ok := d.next.TopicsByID[r.ID]; ok {
		return fmt.Errorf("topic id %s already belongs to topic %q", r.ID, t.Name)
	}
	d.copyTopics()
	t := &Topic{Name: r.Name, ID: r.ID, Partitions: []Partition{}, Configs: map[string]string{}}
	d.next.Topics[t.Name] = t
	d.next.TopicsByID[t.ID] = t
	d.owned[t] = true
	d.created[t.ID] = true
	return nil
}

func (d *draft) partition(r PartitionRecord) error {
	t, ok := d.next.TopicsByID[r.TopicID]
	if !ok {
		return fmt.Errorf("unknown topic id %s", r.TopicID)
	}
	if r.Partition < 0 || int(r.Partition) > len(t.Partitions) {
		return fmt.Errorf("topic %q: partition %d is not in 0..%d", t.Name, r.Partition, len(t.Partitions))
	}
	if len(r.Replicas) == 0 {
		return fmt.Errorf("topic %q partition %d: no replicas", t.Name, r.Partition)
	}
	for i, b := range r.Replicas {
		if _, ok := d.next.Brokers[b]; !ok {
			return fmt.Errorf("topic %q partition %d: replica %d is not a registered broker", t.Name, r.Partition, b)
		}
		if indexOf(r.Replicas[:i], b) >= 0 {
			return fmt.Errorf("topic %q partition %d: replica %d listed twice", t.Name, r.Partition, b)
		}
	}
	for i, b := range r.ISR {
		if indexOf(r.Replicas, b) < 0 {
			return fmt.Errorf("topic %q partition %d: ISR member %d is not a replica", t.Name, r.Partition, b)
		}
		if indexOf(r.ISR[:i], b) >= 0 {
			return fmt.Errorf("topic %q partition %d: ISR member %d listed twice", t.Name, r.Partition, b)
		}
	}
	if r.Leader != -1 && indexOf(r.ISR, r.Leader) < 0 {
		return fmt.Errorf("topic %q partition %d: leader %d is not in the ISR", t.Name, r.Partition, r.Leader)
	}
	if b := d.next.Brokers[r.Leader]; r.Leader != -1 && !b.Active() {
		if int(r.Partition) == len(t.Partitions) || t.Partitions[r.Partition].Leader != r.Leader || t.Partitions[r.Partition].LeaderEpoch != r.LeaderEpoch {
			state := "fenced"
			if !b.Fenced {
				state = "in controlled shutdown"
			}
			return fmt.Errorf("topic %q partition %d: leader %d is %s", t.Name, r.Partition, r.Leader, state)
		}
	}
	if err := d.checkOfflineReplicas(t, r); err != nil {
		return err
	}
	if r.LeaderEpoch < 0 {
		return fmt.Errorf("topic %q partition %d: leader epoch %d < 0", t.Name, r.Partition, r.LeaderEpoch)
	}
	if int(r.Partition) == len(t.Partitions) {
		if r.PartitionEpoch != 0 {
			return fmt.Errorf("topic %q partition %d: created with partition epoch %d, not 0", t.Name, r.Partition, r.PartitionEpoch)
		}
	} else {
		old := t.Partitions[r.Partition]
		if r.LeaderEpoch < old.LeaderEpoch {
			return fmt.Errorf("topic %q partition %d: leader epoch %d is below %d", t.Name, r.Partition, r.LeaderEpoch, old.LeaderEpoch)
		}
		if r.Leader != old.Leader && r.LeaderEpoch == old.LeaderEpoch {
			return fmt.Errorf("topic %q partition %d: leader %d -> %d without a new leader epoch (%d)", t.Name, r.Partition, old.Leader, r.Leader, r.LeaderEpoch)
		}
		// Exactly one step per change: a proposer that skipped or
		// repeated a number would let two states share an epoch, and an
		// AlterPartition computed from one would pass against the other.
		switch changed := partitionChanged(old, r); {
		case changed && r.PartitionEpoch != old.PartitionEpoch+1:
			return fmt.Errorf("topic %q partition %d: partition epoch %d for a change, want %d (one past %d)",
				t.Name, r.Partition, r.PartitionEpoch, old.PartitionEpoch+1, old.PartitionEpoch)
		case !changed && r.PartitionEpoch != old.PartitionEpoch:
			return fmt.Errorf("topic %q partition %d: partition epoch %d for an unchanged state, want %d",
				t.Name, r.Partition, r.PartitionEpoch, old.PartitionEpoch)
		}
	}
	var adding, removing []int32
	if int(r.Partition) < len(t.Partitions) {
		if old := &t.Partitions[r.Partition]; old.Reassigning() {
			// The replicas stay as they are until the reassignment ends
			// (ReassignmentRecord): its Adding and Removing name them.
			if !slices.Equal(old.Replicas, r.Replicas) {
				return fmt.Errorf("topic %q partition %d: replicas %v -> %v while a reassignment is in progress", t.Name, r.Partition, old.Replicas, r.Replicas)
			}
			adding, removing = old.Adding, old.Removing
		}
	}
	t = d.mutableTopic(t)
	p := Partition{
		Replicas:       append(make([]int32, 0, len(r.Replicas)), r.Replicas...),
		ISR:            append(make([]int32, 0, len(r.ISR)), r.ISR...),
		Leader:         r.Leader,
		LeaderEpoch:    r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch,
		Adding:         adding,
		Removing:       removing,
	}
	if int(r.Partition) == len(t.Partitions) {
		t.Partitions = append(t.Partitions, p)
	} else {
		t.Partitions[r.Partition] = p
	}
	return nil
}

// partitionChanged reports whether r gives partition old another
// replica list, ISR (order counts, as in Kafka), leader or leader epoch.
func partitionChanged(old Partition, r PartitionRecord) bool {
	return !slices.Equal(old.Replicas, r.Replicas) || !slices.Equal(old.ISR, r.ISR) ||
		old.Leader != r.Leader || old.LeaderEpoch != r.LeaderEpoch
}

// requireVersion refuses, in a log below metadata version v, a record
// that needs it; what names what the record does.
func (d *draft) requireVersion(v int32, what string) error {
	if d.next.MetadataVersion < v {
		return fmt.Errorf("%s needs metadata version %d; the log is at %d", what, v, d.next.MetadataVersion)
	}
	return nil
}

// liveTopic is the topic with id, or an error naming the id.
func (d *draft) liveTopic(id UUID) (*Topic, error) {
	t, ok := d.next.TopicsByID[id]
	if !ok {
		return nil, fmt.Errorf("unknown topic id %s", id)
	}
	return t, nil
}

func (d *draft) reassignment(r ReassignmentRecord) error {
	if err := d.requireVersion(ReassignmentMetadataVersion, "partition reassignment"); err != nil {
		return err
	}
	t, err := d.liveTopic(r.TopicID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("topic %q: partition %d is not in 0..%d", t.Name, r.Partition, len(t.Partitions)-1)
	}
	old := &t.Partitions[r.Partition]
	starting := len(r.Adding) > 0 || len(r.Removing) > 0
	if starting && old.Reassigning() {
		return fmt.Errorf("topic %q partition %d: a reassignment is in progress already (adding %v, removing %v)", t.Name, r.Partition, old.Adding, old.Removing)
	}
	if !starting && !old.Reassigning() {
		return fmt.Errorf("topic %q partition %d: no reassignment in progress to end", t.Name, r.Partition)
	}
	for _, set := range [][]int32{r.Adding, r.Removing} {
		for i, b := range set {
			if indexOf(old.Replicas, b) < 0 {
				return fmt.Errorf("topic %q partition %d: reassigned replica %d is not among the replicas %v", t.Name, r.Partition, b, old.Replicas)
			}
			if indexOf(set[:i], b) >= 0 {
				return fmt.Errorf("topic %q partition %d: reassigned replica %d listed twice", t.Name, r.Partition, b)
			}
		}
	}
	for _, b := range r.Adding {
		if indexOf(r.Removing, b) >= 0 {
			return fmt.Errorf("topic %q partition %d: replica %d both added and removed", t.Name, r.Partition, b)
		}
	}
	if len(r.Removing) == len(old.Replicas) {
		return fmt.Errorf("topic %q partition %d: a reassignment cannot remove every replica", t.Name, r.Partition)
	}
	t = d.mutableTopic(t)
	p := &t.Partitions[r.Partition]
	p.Adding = slices.Clone(r.Adding)
	p.Removing = slices.Clone(r.Removing)
	if starting {
		d.next.Reassignments++
	} else {
		d.next.Reassignments--
	}
	return nil
}

func (d *draft) config(r ConfigRecord) error {
	t, ok := d.next.TopicsByID[r.TopicID]
	if !ok {
		return fmt.Errorf("unknown topic id %s", r.TopicID)
	}
	if r.Value == nil {
		if _, ok := d.next.LookupTopicConfig(r.Name); !ok {
			return fmt.Errorf("topic %q: unknown config %q", t.Name, r.Name)
		}
	} else if err := d.next.ValidateTopicConfig(r.Name, *r.Value); err != nil {
		return fmt.Errorf("topic %q: %w", t.Name, err)
	}
	t = d.mutableTopic(t)
	if r.Value == nil {
		delete(t.Configs, r.Name)
	} else {
		t.Configs[r.Name] = *r.Value
	}
	return nil
}

func (d *draft) unregisterBroker(r UnregisterBrokerRecord) error {
	b, ok := d.next.Brokers[r.NodeID]
	switch {
	case d.next.MetadataVersion < BrokerConfigMetadataVersion:
		return fmt.Errorf("unregistering a broker needs metadata version %d; the log is at %d", BrokerConfigMetadataVersion, d.next.MetadataVersion)
	case !ok:
		return fmt.Errorf("broker %d is not registered", r.NodeID)
	case b.Epoch != r.Epoch:
		return fmt.Errorf("broker %d is at epoch %d, not %d", r.NodeID, b.Epoch, r.Epoch)
	}
	if n, first := d.next.ReplicasOn(r.NodeID); n > 0 {
		return fmt.Errorf("broker %d still holds replicas of %d partitions (%s among them)", r.NodeID, n, first)
	}
	if !d.brokersCopied {
		d.next.Brokers = cloneMap(d.next.Brokers)
		d.brokersCopied = true
	}
	delete(d.next.Brokers, r.NodeID)
	d.dropOfflineReplicas(r.NodeID)
	if _, ok := d.next.BrokerConfigs[r.NodeID]; ok {
		if !d.brokerConfigsCopied {
			d.next.BrokerConfigs = cloneMap(d.next.BrokerConfigs)
			d.brokerConfigsCopied = true
		}
		delete(d.next.BrokerConfigs, r.NodeID)
	}
	return nil
}

func (d *draft) brokerConfig(r BrokerConfigRecord) error {
	if d.next.MetadataVersion < BrokerConfigMetadataVersion {
		return fmt.Errorf("dynamic broker configs need metadata version %d; the log is at %d", BrokerConfigMetadataVersion, d.next.MetadataVersion)
	}
	if _, ok := d.next.Brokers[r.Broker]; !ok && r.Broker != -1 {
		return fmt.Errorf("broker config %q for broker %d, which is not registered", r.Name, r.Broker)
	}
	if r.Value != nil {
		if err := ValidateBrokerConfig(r.Name, *r.Value); err != nil {
			return err
		}
	} else if _, ok := DynamicBrokerConfigs[r.Name]; !ok {
		return fmt.Errorf("%q is not a dynamic broker config", r.Name)
	}
	if !d.brokerConfigsCopied {
		d.next.BrokerConfigs = cloneMap(d.next.BrokerConfigs)
		d.brokerConfigsCopied = true
	}
	cfg := cloneMap(d.next.BrokerConfigs[r.Broker])
	if r.Value == nil {
		delete(cfg, r.Name)
	} else {
		cfg[r.Name] = *r.Value
	}
	if len(cfg) == 0 {
		delete(d.next.BrokerConfigs, r.Broker)
	} else {
		d.next.BrokerConfigs[r.Broker] = cfg
	}
	return nil
}

// topicKeyed marks a topic as having keyed records (TopicKeyedRecord).
func (d *draft) topicKeyed(r TopicKeyedRecord) error {
	if err := d.requireVersion(KeyedTopicsMetadataVersion, "marking a topic keyed"); err != nil {
		return err
	}
	t, err := d.liveTopic(r.TopicID)
	if err != nil || t.Keyed {
		return err
	}
	d.mutableTopic(t).Keyed = true
	return nil
}

func (d *draft) removeTopic(r RemoveTopicRecord) error {
	t, ok := d.next.TopicsByID[r.TopicID]
	if !ok {
		return fmt.Errorf("unknown topic id %s", r.TopicID)
	}
	for i := range t.Partitions {
		if t.Partitions[i].Reassigning() {
			d.next.Reassignments--
		}
	}
	d.forgetOfflineReplicas(t.ID)
	d.copyTopics()
	delete(d.next.Topics, t.Name)
	delete(d.next.TopicsByID, t.ID)
	delete(d.created, t.ID)
	return nil
}

func (d *draft) producerIDs(r ProducerIDsRecord) error {
	switch {
	case r.NodeID < 0:
		return fmt.Errorf("node id %d < 0", r.NodeID)
	case r.NextProducerID <= d.next.NextProducerID:
		return fmt.Errorf("next producer id %d does not grow past %d", r.NextProducerID, d.next.NextProducerID)
	}
	d.next.NextProducerID = r.NextProducerID
	return nil
}

// offlineReplica marks a broker's replica offline (OfflineReplicaRecord).
func (d *draft) offlineReplica(r OfflineReplicaRecord) error {
	if err := d.requireVersion(OfflineReplicasMetadataVersion, "an offline replica"); err != nil {
		return err
	}
	b, ok := d.next.Brokers[r.NodeID]
	switch {
	case !ok:
		return fmt.Errorf("broker %d is not registered", r.NodeID)
	case b.Epoch != r.Epoch:
		return fmt.Errorf("broker %d: epoch %d is not its registration's (%d)", r.NodeID, r.Epoch, b.Epoch)
	}
	t, err := d.liveTopic(r.TopicID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("topic %q: partition %d is not in 0..%d", t.Name, r.Partition, len(t.Partitions)-1)
	}
	key := TopicIDPartition{TopicID: r.TopicID, Partition: r.Partition}
	if _, ok := d.next.OfflineReplicas[r.NodeID][key]; ok {
		return nil
	}
	d.mutableOffline(r.NodeID)[key] = struct{}{}
	return nil
}

// mutableOffline returns the draft's own map of broker id's offline
// replicas, copying the image's the first time this batch changes it:
// a batch marking a thousand partitions copies it once, not a thousand
// times.
func (d *draft) mutableOffline(id int32) map[TopicIDPartition]struct{} {
	if !d.offlineCopied {
		d.next.OfflineReplicas = cloneMap(d.next.OfflineReplicas)
		d.offlineCopied = true
	}
	if d.offlineOwned == nil {
		d.offlineOwned = map[int32]bool{}
	}
	m := d.next.OfflineReplicas[id]
	if !d.offlineOwned[id] || m == nil {
		m = cloneMap(m)
		d.next.OfflineReplicas[id] = m
		d.offlineOwned[id] = true
	}
	return m
}

// dropOfflineReplicas forgets broker id's offline replicas (a new
// registration, or none).
func (d *draft) dropOfflineReplicas(id int32) {
	if _, ok := d.next.OfflineReplicas[id]; !ok {
		return
	}
	if !d.offlineCopied {
		d.next.OfflineReplicas = cloneMap(d.next.OfflineReplicas)
		d.offlineCopied = true
	}
	delete(d.next.OfflineReplicas, id)
	delete(d.offlineOwned, id)
	d.tidyOffline()
}

// tidyOffline makes OfflineReplicas nil when no broker has any, so
// images compare (and snapshots round-trip) the same however they got
// there.
func (d *draft) tidyOffline() {
	if len(d.next.OfflineReplicas) == 0 {
		d.next.OfflineReplicas = nil
		d.offlineCopied = false
	}
}

// forgetOfflineReplicas drops every broker's offline replicas of the
// topic with id (it is being removed), so the entries do not outlive it.
func (d *draft) forgetOfflineReplicas(id UUID) {
	for bid, replicas := range d.next.OfflineReplicas {
		for key := range replicas {
			if key.TopicID != id {
				continue
			}
			m := d.mutableOffline(bid)
			delete(m, key)
			if len(m) == 0 {
				d.dropOfflineReplicas(bid)
				break
			}
		}
	}
}

// checkOfflineReplicas refuses r when it makes a broker whose replica of
// the partition is offline its leader (a new leader or a new leader
// epoch) or adds it to the ISR.
func (d *draft) checkOfflineReplicas(t *Topic, r PartitionRecord) error {
	var old *Partition
	if int(r.Partition) < len(t.Partitions) {
		old = &t.Partitions[r.Partition]
	}
	if d.next.OfflineReplicas == nil {
		return nil
	}
	offline := func(b int32) bool {
		_, ok := d.next.OfflineReplicas[b][TopicIDPartition{TopicID: t.ID, Partition: r.Partition}]
		return ok
	}
	if r.Leader != -1 && offline(r.Leader) && (old == nil || old.Leader != r.Leader || old.LeaderEpoch != r.LeaderEpoch) {
		return fmt.Errorf("topic %q partition %d: leader %d's replica is offline", t.Name, r.Partition, r.Leader)
	}
	for _, b := range r.ISR {
		if offline(b) && (old == nil || indexOf(old.ISR, b) < 0) {
			return fmt.Errorf("topic %q partition %d: ISR member %d's replica is offline", t.Name, r.Partition, b)
		}
	}
	return nil
}

// copyTopics gives the draft its own topic maps (the topics in them are
// still shared until mutableTopic).
func (d *draft) copyTopics() {
	if d.topicsCopied {
		return
	}
	d.next.Topics = cloneMap(d.next.Topics)
	d.next.TopicsByID = cloneMap(d.next.TopicsByID)
	d.topicsCopied = true
}

// mutableTopic returns the draft's own copy of t, cloning it the first
// time this batch changes it. Partition slices inside are shared with the
// old copy: a Partition is replaced whole, never edited in place.
func (d *draft) mutableTopic(t *Topic) *Topic {
	if d.owned[t] {
		return t
	}
	c := &Topic{
		Name:       t.Name,
		ID:         t.ID,
		Partitions: append(make([]Partition, 0, len(t.Partitions)+1), t.Partitions...),
		Configs:    cloneMap(t.Configs),
		Keyed:      t.Keyed,
	}
	d.copyTopics()
	d.next.Topics[c.Name] = c
	d.next.TopicsByID[c.ID] = c
	d.owned[c] = true
	return c
}

// cloneMap copies m, returning an empty (never nil) map so drafts of an
// Image literal with nil maps can still be written.
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m)+1)
	maps.Copy(c, m)
	return c
}

// recordType names r's kind without calling Type on a nil pointer (which
// would panic: Type has value receivers).
func recordType(r Record) (name string, ok bool) {
	if r == nil {
		return "nil", false
	}
	if v := reflect.ValueOf(r); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Sprintf("nil %T", r), false
	}
	return r.Type(), true
}

func indexOf(s []int32, v int32) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
