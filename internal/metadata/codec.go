package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Encoding. A record is a JSON envelope
//
//	{"type": "topic", "data": {"name": "orders", "id": "0f3c...-..."}}
//
// and a batch (one Raft log entry: records committed together) is a JSON
// array of envelopes. JSON rather than a binary format because the
// metadata log is small and rarely written, and a dump of it should be
// readable; decoding ignores unknown fields and zero-fills missing ones, so
// records can grow fields without a version bump.

type envelope struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Encode encodes one record.
func Encode(r Record) ([]byte, error) {
	if name, ok := recordType(r); !ok {
		return nil, fmt.Errorf("metadata: encode %s record", name)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("metadata: encode %s record: %w", r.Type(), err)
	}
	return json.Marshal(envelope{Type: r.Type(), Data: data})
}

// Decode decodes one record, as a value (TopicRecord, not *TopicRecord).
// An unknown type is an error (wrapping ErrDecode): a node must not skip
// a change it does not understand.
func Decode(b []byte) (Record, error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("%w: record: %v", ErrDecode, err)
	}
	return decodeEnvelope(env)
}

func decodeEnvelope(env envelope) (Record, error) {
	var (
		r   Record
		err error
	)
	switch env.Type {
	case ClusterIDRecord{}.Type():
		r, err = decodeData[ClusterIDRecord](env.Data)
	case MetadataVersionRecord{}.Type():
		r, err = decodeData[MetadataVersionRecord](env.Data)
	case BrokerRecord{}.Type():
		r, err = decodeData[BrokerRecord](env.Data)
	case TopicRecord{}.Type():
		r, err = decodeData[TopicRecord](env.Data)
	case PartitionRecord{}.Type():
		r, err = decodeData[PartitionRecord](env.Data)
	case ConfigRecord{}.Type():
		r, err = decodeData[ConfigRecord](env.Data)
	case RemoveTopicRecord{}.Type():
		r, err = decodeData[RemoveTopicRecord](env.Data)
	case ProducerIDsRecord{}.Type():
		r, err = decodeData[ProducerIDsRecord](env.Data)
	case FenceBrokerRecord{}.Type():
		r, err = decodeData[FenceBrokerRecord](env.Data)
	case UnfenceBrokerRecord{}.Type():
		r, err = decodeData[UnfenceBrokerRecord](env.Data)
	case ControlledShutdownRecord{}.Type():
		r, err = decodeData[ControlledShutdownRecord](env.Data)
	case ReassignmentRecord{}.Type():
		r, err = decodeData[ReassignmentRecord](env.Data)
	case BrokerConfigRecord{}.Type():
		r, err = decodeData[BrokerConfigRecord](env.Data)
	case UnregisterBrokerRecord{}.Type():
		r, err = decodeData[UnregisterBrokerRecord](env.Data)
	case TopicKeyedRecord{}.Type():
		r, err = decodeData[TopicKeyedRecord](env.Data)
	case OfflineReplicaRecord{}.Type():
		r, err = decodeData[OfflineReplicaRecord](env.Data)
	case ClientQuotaRecord{}.Type():
		r, err = decodeData[ClientQuotaRecord](env.Data)
	case ScramCredentialRecord{}.Type():
		r, err = decodeData[ScramCredentialRecord](env.Data)
	case RemoveScramCredentialRecord{}.Type():
		r, err = decodeData[RemoveScramCredentialRecord](env.Data)
	case ACLRecord{}.Type():
		r, err = decodeData[ACLRecord](env.Data)
	case RemoveACLRecord{}.Type():
		r, err = decodeData[RemoveACLRecord](env.Data)
	default:
		return nil, fmt.Errorf("%w: unknown record type %q", ErrDecode, env.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s record: %v", ErrDecode, env.Type, err)
	}
	return r, nil
}

func decodeData[T Record](data json.RawMessage) (Record, error) {
	var v T
	if len(data) == 0 {
		return nil, fmt.Errorf("missing data")
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// EncodeBatch encodes records committed together (one Raft log entry).
func EncodeBatch(recs []Record) ([]byte, error) {
	envs := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		b, err := Encode(r)
		if err != nil {
			return nil, err
		}
		envs[i] = b
	}
	return json.Marshal(envs)
}

// DecodeBatch decodes what EncodeBatch encoded.
func DecodeBatch(b []byte) ([]Record, error) {
	var envs []envelope
	if err := json.Unmarshal(b, &envs); err != nil {
		return nil, fmt.Errorf("%w: batch: %v", ErrDecode, err)
	}
	if envs == nil {
		return nil, fmt.Errorf("%w: batch is not an array", ErrDecode)
	}
	recs := make([]Record, len(envs))
	for i, env := range envs {
		r, err := decodeEnvelope(env)
		if err != nil {
			return nil, fmt.Errorf("batch record %d: %w", i, err)
		}
		recs[i] = r
	}
	return recs, nil
}

// Image snapshot (a Raft snapshot's contents):
//
//	{"version": 1, "offset": N, "cluster_id": "...",
//	 "brokers": [BrokerRecord...]           // by node id
//	 "topics": [{"name", "id",
//	             "partitions": [{"replicas","isr","leader","leader_epoch",
//	                             "partition_epoch"}...],
//	             "configs": {name: value},
//	             "keyed": true}...],               // by name; keyed omitted when false
//	 "next_producer_id": N,
//	 "offline_replicas": {"<broker>": [{"topic_id", "partition"}...]}}  // omitted when none
//
// Lists are sorted so the same image always encodes to the same bytes.
// DecodeImage rebuilds the image by applying the equivalent records to the
// empty image, so a snapshot is held to exactly the invariants of the log;
// what those records cannot carry (a broker's epoch, a partition's epoch,
// which a creation sets to 0) is restored from the snapshot after.
// A snapshot written before partition epochs existed has none, and 0 is
// right for it: no record changed a partition after its creation then.

const imageSnapshotVersion = 1

type imageSnapshot struct {
	Version   int    `json:"version"`
	Offset    uint64 `json:"offset"`
	ClusterID string `json:"cluster_id"`
	// MetadataVersion is omitted by snapshots from before it existed.
	MetadataVersion int32           `json:"metadata_version,omitempty"`
	Brokers         []BrokerRecord  `json:"brokers"`
	Topics          []topicSnapshot `json:"topics"`
	NextProducerID  int64           `json:"next_producer_id"`
	// BrokerConfigs are the dynamic broker configs by broker id (-1:
	// the cluster default), omitted when there is none.
	BrokerConfigs map[int32]map[string]string `json:"broker_configs,omitempty"`
	// OfflineReplicas are the brokers' offline replicas by broker id,
	// each list sorted by topic id and partition; omitted when there is
	// none, so snapshots of logs before OfflineReplicasMetadataVersion
	// are unchanged.
	OfflineReplicas map[int32][]TopicIDPartition `json:"offline_replicas,omitempty"`
	// ClientQuotas are the client quotas, one record's worth each,
	// sorted; omitted when there is none.
	ClientQuotas []ClientQuotaRecord `json:"client_quotas,omitempty"`
	// ScramCredentials are the SCRAM credentials, one record's worth
	// each, sorted by user and mechanism; omitted when there is none.
	ScramCredentials []ScramCredentialRecord `json:"scram_credentials,omitempty"`
	// ACLs are the ACL bindings, one record's worth each, in
	// acl.Set.Bindings order; omitted when there is none.
	ACLs []ACLRecord `json:"acls,omitempty"`
}

type topicSnapshot struct {
	Name       string              `json:"name"`
	ID         UUID                `json:"id"`
	Partitions []partitionSnapshot `json:"partitions"`
	Configs    map[string]string   `json:"configs,omitempty"`
	// Keyed is omitted when false, so snapshots of logs before
	// KeyedTopicsMetadataVersion are unchanged.
	Keyed bool `json:"keyed,omitempty"`
}

type partitionSnapshot struct {
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Adding         []int32 `json:"adding,omitempty"`
	Removing       []int32 `json:"removing,omitempty"`
}

// EncodeImage encodes img for a Raft snapshot.
func EncodeImage(img *Image) ([]byte, error) {
	s := imageSnapshot{
		Version:         imageSnapshotVersion,
		Offset:          img.Offset,
		ClusterID:       img.ClusterID,
		MetadataVersion: img.MetadataVersion,
		Brokers:         []BrokerRecord{},
		Topics:          []topicSnapshot{},
		NextProducerID:  img.NextProducerID,
		BrokerConfigs:   img.BrokerConfigs,
		ClientQuotas:    clientQuotaRecords(img.ClientQuotas),
	}
	s.ScramCredentials = scramCredentialRecords(img.ScramCredentials)
	s.ACLs = aclRecords(img.ACLs)
	for _, id := range img.BrokerIDs() {
		b := img.Brokers[id]
		s.Brokers = append(s.Brokers, BrokerRecord{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Listeners: b.Listeners, Rack: b.Rack,
			IncarnationID: b.IncarnationID, Epoch: b.Epoch, Fenced: b.Fenced, ShuttingDown: b.ShuttingDown})
		if replicas := img.OfflineReplicas[id]; len(replicas) > 0 {
			if s.OfflineReplicas == nil {
				s.OfflineReplicas = map[int32][]TopicIDPartition{}
			}
			s.OfflineReplicas[id] = slices.SortedFunc(maps.Keys(replicas), compareTopicIDPartitions)
		}
	}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		ts := topicSnapshot{Name: t.Name, ID: t.ID, Partitions: make([]partitionSnapshot, len(t.Partitions)), Configs: t.Configs, Keyed: t.Keyed}
		for i, p := range t.Partitions {
			ts.Partitions[i] = partitionSnapshot{Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, Adding: p.Adding, Removing: p.Removing}
		}
		s.Topics = append(s.Topics, ts)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("metadata: encode image: %w", err)
	}
	return buf.Bytes(), nil
}

// compareTopicIDPartitions orders by topic id, then partition.
func compareTopicIDPartitions(a, b TopicIDPartition) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// DecodeImage decodes an image snapshot, checking every invariant Apply
// checks (errors wrap ErrDecode, and ErrBadRecord for a broken invariant),
// with configs as the image's TopicConfigs (see Empty).
func DecodeImage(b []byte, configs *topicconfig.Table) (*Image, error) {
	var s imageSnapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: image: %v", ErrDecode, err)
	}
	if s.Version != imageSnapshotVersion {
		return nil, fmt.Errorf("%w: image snapshot version %d (want %d)", ErrDecode, s.Version, imageSnapshotVersion)
	}
	if s.NextProducerID < 0 {
		return nil, fmt.Errorf("%w: image: next producer id %d < 0", ErrDecode, s.NextProducerID)
	}
	var recs []Record
	if s.ClusterID != "" {
		recs = append(recs, ClusterIDRecord{ClusterID: s.ClusterID})
	}
	if s.MetadataVersion != 0 {
		recs = append(recs, MetadataVersionRecord{Version: s.MetadataVersion})
	}
	for i, br := range s.Brokers {
		if i > 0 && s.Brokers[i-1].NodeID >= br.NodeID {
			return nil, fmt.Errorf("%w: image: brokers not sorted by distinct node id", ErrDecode)
		}
		recs = append(recs, br)
		if !br.Fenced && s.MetadataVersion >= FencingMetadataVersion {
			// The registration above starts fenced; its epoch is, for
			// now, the snapshot's offset (restored below).
			recs = append(recs, UnfenceBrokerRecord{NodeID: br.NodeID, Epoch: int64(s.Offset)})
		}
	}
	for _, ts := range s.Topics {
		recs = append(recs, TopicRecord{Name: ts.Name, ID: ts.ID})
		for p, ps := range ts.Partitions {
			if ps.PartitionEpoch < 0 {
				return nil, fmt.Errorf("%w: image: topic %q partition %d: partition epoch %d < 0", ErrDecode, ts.Name, p, ps.PartitionEpoch)
			}
			recs = append(recs, PartitionRecord{
				TopicID: ts.ID, Partition: int32(p),
				Replicas: ps.Replicas, ISR: ps.ISR, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			})
			if len(ps.Adding) > 0 || len(ps.Removing) > 0 {
				recs = append(recs, ReassignmentRecord{TopicID: ts.ID, Partition: int32(p), Adding: ps.Adding, Removing: ps.Removing})
			}
		}
		names := make([]string, 0, len(ts.Configs))
		for n := range ts.Configs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			v := ts.Configs[n]
			recs = append(recs, ConfigRecord{TopicID: ts.ID, Name: n, Value: &v})
		}
		if ts.Keyed {
			recs = append(recs, TopicKeyedRecord{TopicID: ts.ID})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.OfflineReplicas)) {
		for _, r := range s.OfflineReplicas[id] {
			// The broker's epoch is the snapshot's offset until it is
			// restored below, as for the unfence above.
			recs = append(recs, OfflineReplicaRecord{NodeID: id, Epoch: int64(s.Offset), TopicID: r.TopicID, Partition: r.Partition})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.BrokerConfigs)) {
		for _, n := range slices.Sorted(maps.Keys(s.BrokerConfigs[id])) {
			v := s.BrokerConfigs[id][n]
			recs = append(recs, BrokerConfigRecord{Broker: id, Name: n, Value: &v})
		}
	}
	for _, q := range s.ClientQuotas {
		recs = append(recs, q)
	}
	for _, c := range s.ScramCredentials {
		recs = append(recs, c)
	}
	for _, a := range s.ACLs {
		recs = append(recs, a)
	}
	img, err := applyRecords(Empty(configs), s.Offset, recs)
	if err != nil {
		return nil, fmt.Errorf("%w: image: %w", ErrDecode, err)
	}
	for _, br := range s.Brokers {
		// Applying the snapshot's records gave every broker the
		// snapshot's offset; its epoch is its registration's.
		b := img.Brokers[br.NodeID]
		b.Epoch, b.Fenced, b.ShuttingDown = br.Epoch, br.Fenced, br.ShuttingDown
		img.Brokers[br.NodeID] = b
	}
	for _, ts := range s.Topics {
		// The topics are this decode's own (applyRecords built them), so
		// their partitions can be set in place.
		parts := img.TopicsByID[ts.ID].Partitions
		for p, ps := range ts.Partitions {
			parts[p].PartitionEpoch = ps.PartitionEpoch
		}
	}
	img.Offset = s.Offset
	img.NextProducerID = s.NextProducerID
	return img, nil
}
