package offsetstopic

import (
	"reflect"
	"testing"

	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// The offsets topic is Kafka's: its name, compacted (a group's newest
// commit per partition is what must survive), with small segments so the
// cleaner gets to it, and the configs are ones the controller accepts.
func TestSpec(t *testing.T) {
	s := Spec(DefaultPartitions, 2)
	if s.Name != "__consumer_offsets" || s.NumPartitions != 50 || s.ReplicationFactor != 2 {
		t.Fatalf("spec %+v", s)
	}
	if s.Configs["cleanup.policy"] != "compact" {
		t.Errorf("cleanup.policy %q, want compact", s.Configs["cleanup.policy"])
	}
	// The table node assembles (node/topicconfigs.go).
	img := metadata.Empty(topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), metadata.KafkaTopicConfigs()))
	for name, value := range s.Configs {
		if err := img.ValidateTopicConfig(name, value); err != nil {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
	if err := img.CheckInternalTopicConfigs(s.Name, nil, s.Configs); err != nil {
		t.Errorf("the spec's own configs break the internal topic's rules: %v", err)
	}
}

// The replay hands the coordinator each record with its offset, a
// transaction's records with their producer, and a transaction marker
// as a Control record.
func TestReplayBatch(t *testing.T) {
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional, opts.BaseOffset = 9, 2, 0, true, 40
	b := record.NewBuilder(opts)
	b.Add([]byte("k1"), []byte("v1"), nil, 1)
	b.Add([]byte("k2"), nil, nil, 1)
	txnBatch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	plain := record.NewBuilder(record.DefaultBatchOptions())
	plain.Add([]byte("k3"), []byte("v3"), nil, 1)
	plainBatch, err := plain.Build()
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(plainBatch, 42)
	marker, err := record.EndTxnMarkerBatch(9, 2, 0, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(marker, 43)
	var got []group.Record
	for _, batch := range [][]byte{txnBatch, plainBatch, marker} {
		if _, err := replayBatch(batch, func(r group.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	want := []group.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Offset: 40, Transactional: true, ProducerID: 9},
		{Key: []byte("k2"), Offset: 41, Transactional: true, ProducerID: 9},
		{Key: []byte("k3"), Value: []byte("v3"), Offset: 42},
		{Offset: 43, Control: true, ProducerID: 9, Commit: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed\n%+v\nwant\n%+v", got, want)
	}
}
