package txnstatetopic

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
	"github.com/fjordmq/fjord/internal/txn"
)

// The transaction state topic is Kafka's (C§2.1): its name, compacted
// (an id's latest record is its state), min.insync.replicas 2 but never
// above the replication, small segments, no unclean election; and the
// configs are ones the controller accepts for an internal topic.
func TestSpec(t *testing.T) {
	// The table node assembles (node/topicconfigs.go).
	img := metadata.Empty(topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), controller.TopicConfigs(), metadata.KafkaTopicConfigs()))
	for _, tc := range []struct {
		rf      int16
		minISR  string
		hasMISR bool
	}{
		{rf: 3, minISR: "2", hasMISR: true},
		{rf: 5, minISR: "2", hasMISR: true},
		{rf: 2, minISR: "2", hasMISR: true},
		{rf: 1, minISR: "1", hasMISR: true}, // a cluster of one: 2 would refuse every write
		{rf: -1},                            // the controller's default replication: its default
	} {
		s := Spec(DefaultPartitions, tc.rf)
		if s.Name != "__transaction_state" || s.NumPartitions != 50 || s.ReplicationFactor != tc.rf {
			t.Fatalf("rf %d: spec %+v", tc.rf, s)
		}
		want := map[string]string{
			"cleanup.policy":                 "compact",
			"segment.bytes":                  "104857600",
			"unclean.leader.election.enable": "false",
		}
		if tc.hasMISR {
			want["min.insync.replicas"] = tc.minISR
		}
		if len(s.Configs) != len(want) {
			t.Errorf("rf %d: configs %v, want %v", tc.rf, s.Configs, want)
		}
		for name, value := range want {
			if s.Configs[name] != value {
				t.Errorf("rf %d: %s=%q, want %q", tc.rf, name, s.Configs[name], value)
			}
		}
		for name, value := range s.Configs {
			if err := img.ValidateTopicConfig(name, value); err != nil {
				t.Errorf("rf %d: %s=%s: %v", tc.rf, name, value, err)
			}
		}
		if err := img.CheckInternalTopicConfigs(s.Name, nil, s.Configs); err != nil {
			t.Errorf("rf %d: the spec's own configs break the internal topic's rules: %v", tc.rf, err)
		}
	}
	if DefaultReplicationFactor != 3 {
		t.Errorf("DefaultReplicationFactor %d, want Kafka's 3", DefaultReplicationFactor)
	}
}

// Log writes an Append's records as one plain batch (no producer, not
// transactional, not a control batch, uncompressed), in order, stamped
// with the Log's clock; a nil value is a null value (the tombstone of an
// expired id), an empty one stays empty.
func TestLogBatch(t *testing.T) {
	recs := []txn.Record{
		{Key: []byte("k1"), Value: []byte("v1")},
		{Key: []byte("k2")}, // tombstone
		{Key: []byte("k3"), Value: []byte{}},
	}
	batch, err := buildBatch(recs, 1234)
	if err != nil {
		t.Fatal(err)
	}
	h, err := record.ParseHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	if h.Size() != len(batch) {
		t.Errorf("batch of %d bytes holds more than one batch (the first is %d)", len(batch), h.Size())
	}
	if h.IsControl() || h.IsTransactional() || h.HasProducerID() || h.Codec() != record.CodecNone || h.NumRecords != 3 {
		t.Errorf("header %+v: want 3 records in a plain uncompressed batch", h)
	}
	got, err := record.Records(batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		want := recs[i]
		if !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
			t.Errorf("record %d: key %q value %q (nil %v), want %q %q (nil %v)",
				i, r.Key, r.Value, r.Value == nil, want.Key, want.Value, want.Value == nil)
		}
		if r.Timestamp != 1234 {
			t.Errorf("record %d: timestamp %d, want 1234", i, r.Timestamp)
		}
	}
	// Nothing to write: no batch (a Builder refuses an empty one).
	if b, err := buildBatch(nil, 1); b != nil || err != nil {
		t.Errorf("no records: %d bytes, %v; want nothing", len(b), err)
	}
	// A caller that has given up writes nothing (there is no replica
	// manager here to write to).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewLog(nil, time.Now).Append(ctx, 0, recs); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with an ended ctx: %v, want context.Canceled before any write", err)
	}
}
