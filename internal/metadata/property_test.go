package metadata

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// genRecord draws records from small pools so that a good share are valid
// and the rest break an invariant in some way.
func genRecord(t *rapid.T) Record {
	ids := []UUID{{}, {1}, {2}, {3}}
	id := rapid.SampledFrom(ids).Draw(t, "id")
	brokers := rapid.SliceOfN(rapid.Int32Range(-1, 4), 0, 4).Draw(t, "replicas")
	switch rapid.IntRange(0, 7).Draw(t, "kind") {
	case 0:
		return ClusterIDRecord{ClusterID: rapid.SampledFrom([]string{"", "c1", "c2"}).Draw(t, "cluster")}
	case 1:
		return BrokerRecord{
			NodeID: rapid.Int32Range(-1, 4).Draw(t, "node"),
			Host:   rapid.SampledFrom([]string{"", "h"}).Draw(t, "host"),
			Port:   rapid.Int32Range(-1, 65536).Draw(t, "port"),
		}
	case 2:
		return TopicRecord{Name: rapid.SampledFrom([]string{"a", "b", "a.b", "bad name", ""}).Draw(t, "name"), ID: id}
	case 3:
		if rapid.Bool().Draw(t, "wellFormedPartition") {
			r := genPartition(t, id, rapid.Int32Range(0, 3).Draw(t, "partition"))
			// 0 is right for a creation and for an unchanged
			// replacement of a partition never changed, 1 for its
			// first change.
			r.PartitionEpoch = rapid.Int32Range(0, 2).Draw(t, "partitionEpoch")
			return &r
		}
		isr := brokers
		if len(brokers) > 0 {
			isr = brokers[:rapid.IntRange(0, len(brokers)).Draw(t, "isrLen")]
		}
		return &PartitionRecord{
			TopicID:        id,
			Partition:      rapid.Int32Range(-1, 3).Draw(t, "partition"),
			Replicas:       brokers,
			ISR:            isr,
			Leader:         rapid.Int32Range(-1, 4).Draw(t, "leader"),
			LeaderEpoch:    rapid.Int32Range(-1, 3).Draw(t, "epoch"),
			PartitionEpoch: rapid.Int32Range(-1, 2).Draw(t, "partitionEpoch"),
		}
	case 4:
		var v *string
		if rapid.Bool().Draw(t, "set") {
			s := rapid.SampledFrom([]string{"1", "-5", "compact", "delete", "x"}).Draw(t, "value")
			v = &s
		}
		return ConfigRecord{TopicID: id, Name: rapid.SampledFrom([]string{"retention.ms", "cleanup.policy", "nope"}).Draw(t, "config"), Value: v}
	case 5:
		return RemoveTopicRecord{TopicID: id}
	case 6:
		// Refused here (these logs stay below
		// KeyedTopicsMetadataVersion); TestTopicKeyedProperties
		// covers the accepted ones.
		return TopicKeyedRecord{TopicID: id}
	default:
		return ProducerIDsRecord{NodeID: rapid.Int32Range(-1, 2).Draw(t, "pnode"), NextProducerID: rapid.Int64Range(-1, 5000).Draw(t, "next")}
	}
}

// genPartition draws a mostly well-formed partition state: distinct
// replicas among brokers 0..2, ISR a prefix of them, leader the first ISR
// member or -1, partition epoch 0 (a creation's).
func genPartition(t *rapid.T, id UUID, p int32) PartitionRecord {
	perm := rapid.Permutation([]int32{0, 1, 2}).Draw(t, "perm")
	replicas := perm[:rapid.IntRange(1, 3).Draw(t, "rf")]
	isr := replicas[:rapid.IntRange(0, len(replicas)).Draw(t, "isr")]
	leader := int32(-1)
	if len(isr) > 0 && rapid.IntRange(0, 4).Draw(t, "leaderless") > 0 {
		leader = isr[0]
	}
	return PartitionRecord{TopicID: id, Partition: p, Replicas: replicas, ISR: isr, Leader: leader, LeaderEpoch: rapid.Int32Range(0, 3).Draw(t, "epoch")}
}

// genBatch draws either a well-formed topic creation (brokers 0..2, a
// topic and its partitions) or random records.
func genBatch(t *rapid.T) []Record {
	if rapid.IntRange(0, 2).Draw(t, "wellFormed") > 0 {
		return rapid.SliceOfN(rapid.Custom(genRecord), 0, 4).Draw(t, "batch")
	}
	var recs []Record
	for b := range int32(3) {
		recs = append(recs, BrokerRecord{NodeID: b, Host: "h", Port: 9092})
	}
	id := rapid.SampledFrom([]UUID{{1}, {2}, {3}}).Draw(t, "topicID")
	recs = append(recs, TopicRecord{Name: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "topic"), ID: id})
	for p := range int32(rapid.IntRange(1, 3).Draw(t, "partitions")) {
		recs = append(recs, genPartition(t, id, p))
	}
	return recs
}

// TestApplyProperties: on random batches Apply never panics; a refused
// batch wraps ErrBadRecord; the old image never changes; every image
// reached satisfies the invariants and survives EncodeImage/DecodeImage
// unchanged.
func TestApplyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		img := Empty(testConfigs)
		offset := uint64(0)
		for range rapid.IntRange(1, 30).Draw(t, "batches") {
			recs := genBatch(t)
			offset += uint64(rapid.IntRange(0, 2).Draw(t, "step"))
			next, ok := applyChecked(t, img, offset, recs)
			if !ok {
				continue
			}
			if err := checkInvariants(img, next); err != nil {
				t.Fatalf("after %+v: %v", recs, err)
			}
			checkSnapshot(t, next)
			img = next
		}
	})
}

// applyChecked applies recs to img at offset; ok is false when Apply
// refused them. It fails t if Apply changed img, or refused with an
// error that does not wrap ErrBadRecord.
func applyChecked(t *rapid.T, img *Image, offset uint64, recs []Record) (next *Image, ok bool) {
	before, err := EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	next, err = img.Apply(offset, recs...)
	if after, _ := EncodeImage(img); string(after) != string(before) {
		t.Fatalf("Apply changed the old image")
	}
	if err != nil && !errors.Is(err, ErrBadRecord) {
		t.Fatalf("error %v does not wrap ErrBadRecord", err)
	}
	return next, err == nil
}

// checkSnapshot fails t unless img survives EncodeImage and DecodeImage
// unchanged.
func checkSnapshot(t *rapid.T, img *Image) {
	b, err := EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(b, testConfigs)
	if err != nil {
		t.Fatalf("DecodeImage of a valid image: %v\n%s", err, b)
	}
	if !equalImages(back, img) {
		t.Fatalf("image round trip differs:\n%+v\n%+v", back, img)
	}
}

// checkInvariants checks next directly (not through Apply's code), and
// the rules that relate it to prev.
func checkInvariants(prev, next *Image) error {
	if next.Offset <= prev.Offset {
		return fmt.Errorf("offset %d after %d", next.Offset, prev.Offset)
	}
	if prev.ClusterID != "" && next.ClusterID != prev.ClusterID {
		return fmt.Errorf("cluster id changed")
	}
	if next.NextProducerID < prev.NextProducerID {
		return fmt.Errorf("next producer id went back")
	}
	if len(next.Topics) != len(next.TopicsByID) {
		return fmt.Errorf("%d topics by name, %d by id", len(next.Topics), len(next.TopicsByID))
	}
	for id, b := range next.Brokers {
		if b.NodeID != id || b.Host == "" || b.Port < 1 || b.Port > 65535 {
			return fmt.Errorf("broker %d = %+v", id, b)
		}
	}
	for name, tp := range next.Topics {
		if tp.Name != name || next.TopicsByID[tp.ID] != tp || tp.ID.IsZero() || ValidateTopicName(name) != nil {
			return fmt.Errorf("topic %q inconsistent", name)
		}
		if len(tp.Partitions) == 0 {
			return fmt.Errorf("topic %q has no partitions", name)
		}
		old, hadIt := prev.TopicsByID[tp.ID]
		if hadIt && len(tp.Partitions) < len(old.Partitions) {
			return fmt.Errorf("topic %q lost partitions", name)
		}
		for i, p := range tp.Partitions {
			if len(p.Replicas) == 0 {
				return fmt.Errorf("%s-%d: no replicas", name, i)
			}
			seen := map[int32]bool{}
			for _, r := range p.Replicas {
				if _, ok := next.Brokers[r]; !ok || seen[r] {
					return fmt.Errorf("%s-%d: replicas %v", name, i, p.Replicas)
				}
				seen[r] = true
			}
			inISR := map[int32]bool{}
			for _, r := range p.ISR {
				if !seen[r] || inISR[r] {
					return fmt.Errorf("%s-%d: ISR %v of %v", name, i, p.ISR, p.Replicas)
				}
				inISR[r] = true
			}
			if p.Leader != -1 && !inISR[p.Leader] {
				return fmt.Errorf("%s-%d: leader %d not in ISR", name, i, p.Leader)
			}
			if p.PartitionEpoch < 0 {
				return fmt.Errorf("%s-%d: partition epoch %d", name, i, p.PartitionEpoch)
			}
			if hadIt && i < len(old.Partitions) {
				op := old.Partitions[i]
				if p.LeaderEpoch < op.LeaderEpoch || (p.Leader != op.Leader && p.LeaderEpoch == op.LeaderEpoch) {
					return fmt.Errorf("%s-%d: leader %d epoch %d after leader %d epoch %d", name, i, p.Leader, p.LeaderEpoch, op.Leader, op.LeaderEpoch)
				}
				// A batch may change a partition more than once, so
				// only the direction is checked here; the step of one
				// per change is TestApplyRejects'.
				changed := !reflect.DeepEqual(p.Replicas, op.Replicas) || !reflect.DeepEqual(p.ISR, op.ISR) ||
					p.Leader != op.Leader || p.LeaderEpoch != op.LeaderEpoch
				if p.PartitionEpoch < op.PartitionEpoch || (changed && p.PartitionEpoch == op.PartitionEpoch) {
					return fmt.Errorf("%s-%d: partition epoch %d after %d (state changed: %v)", name, i, p.PartitionEpoch, op.PartitionEpoch, changed)
				}
			}
		}
		for k, v := range tp.Configs {
			if err := testImage.ValidateTopicConfig(k, v); err != nil {
				return err
			}
		}
		if tp.Keyed && next.MetadataVersion < KeyedTopicsMetadataVersion {
			return fmt.Errorf("topic %q keyed at metadata version %d", name, next.MetadataVersion)
		}
		if hadIt && old.Keyed && !tp.Keyed {
			return fmt.Errorf("topic %q lost its keyed mark", name)
		}
	}
	return nil
}
