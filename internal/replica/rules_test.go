package replica

import (
	"errors"
	"strconv"
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

func TestHighWatermark(t *testing.T) {
	leader := func(off int64) replicaOffset { return replicaOffset{nodeID: 1, offset: off, known: true} }
	follower := func(id int32, off int64) replicaOffset { return replicaOffset{nodeID: id, offset: off, known: true} }
	unknown := func(id int32) replicaOffset { return replicaOffset{nodeID: id} }
	cases := []struct {
		name      string
		current   int64
		leader    replicaOffset
		followers []replicaOffset
		want      int64
	}{
		{"single node: the leader's offset", 3, leader(10), nil, 10},
		{"never backwards", 12, leader(10), nil, 12},
		{"slowest ISR member", 0, leader(10), []replicaOffset{follower(2, 7), follower(3, 9)}, 7},
		{"follower ahead of the leader's flushed offset", 0, leader(5), []replicaOffset{follower(2, 9)}, 5},
		{"unknown follower holds it", 4, leader(10), []replicaOffset{follower(2, 9), unknown(3)}, 4},
		{"slowest member behind current", 8, leader(10), []replicaOffset{follower(2, 6)}, 8},
		{"empty log", 0, leader(0), nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := highWatermark(c.current, c.leader, c.followers)
			if got != c.want {
				t.Fatalf("highWatermark(%d, %+v, %+v) = %d, want %d", c.current, c.leader, c.followers, got, c.want)
			}
			if got < c.current {
				t.Fatalf("moved backwards: %d < %d", got, c.current)
			}
			if got > c.current && got > c.leader.offset {
				t.Fatalf("advanced past the leader: %d > %d", got, c.leader.offset)
			}
		})
	}
}

// Reference: KIP-320 (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
func TestCheckLeaderEpoch(t *testing.T) {
	cases := []struct {
		current, requested int32
		want               error
	}{
		{5, -1, nil},
		{5, 5, nil},
		{5, 4, ErrFencedLeaderEpoch},
		{5, 0, ErrFencedLeaderEpoch},
		{5, 6, ErrUnknownLeaderEpoch},
		{0, -1, nil},
	}
	for _, c := range cases {
		err := checkLeaderEpoch(c.current, c.requested)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("checkLeaderEpoch(%d, %d) = %v, want %v", c.current, c.requested, err, c.want)
		}
	}
}

func TestStorageConfig(t *testing.T) {
	base := storage.DefaultConfig()
	topic := &metadata.Topic{Name: "t", Configs: map[string]string{
		"segment.bytes":             "1048576",
		"segment.ms":                "60000",
		"index.interval.bytes":      "128",
		"max.message.bytes":         "2048",
		"flush.policy":              "interval",
		"flush.ms":                  "250",
		"retention.ms":              "-1",
		"retention.bytes":           "1000000",
		"cleanup.policy":            "compact,delete",
		"delete.retention.ms":       "1000",
		"min.cleanable.dirty.ratio": "0.25",
		"message.timestamp.type":    "LogAppendTime",
		// Not the log's: ignored here.
		"min.insync.replicas": "2",
		"compression.type":    "producer",
	}}
	got, err := storageConfig(base, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := storage.Config{
		SegmentBytes:           1 << 20,
		SegmentMs:              60000,
		IndexIntervalBytes:     128,
		MaxMessageBytes:        2048,
		FlushPolicy:            storage.FlushInterval,
		FlushMs:                250,
		RetentionMs:            -1,
		RetentionBytes:         1000000,
		CleanupPolicy:          storage.CleanupCompact | storage.CleanupDelete,
		DeleteRetentionMs:      1000,
		MinCleanableDirtyRatio: 0.25,
		LogAppendTime:          true,
	}
	if got != want {
		t.Fatalf("storageConfig:\n got %+v\nwant %+v", got, want)
	}

	// No overrides: the base, untouched.
	if got, err := storageConfig(base, &metadata.Topic{Name: "t"}); err != nil || got != base {
		t.Fatalf("no overrides: %+v, %v", got, err)
	}

	for name, value := range map[string]string{
		"segment.bytes":             "lots",
		"segment.ms":                "0",
		"flush.policy":              "sometimes",
		"cleanup.policy":            "shred",
		"message.timestamp.type":    "BrokerTime",
		"min.cleanable.dirty.ratio": "2",
		"max.message.bytes":         "99999999999",
	} {
		got, err := storageConfig(base, &metadata.Topic{Name: "t", Configs: map[string]string{name: value}})
		if !errors.Is(err, storage.ErrInvalidConfig) {
			t.Errorf("%s=%s: err %v, want ErrInvalidConfig", name, value, err)
		}
		if got != base {
			t.Errorf("%s=%s: returned %+v, want the base", name, value, got)
		}
	}
}

func TestMinInsyncReplicasConfig(t *testing.T) {
	if n, err := minInsyncReplicas(&metadata.Topic{Name: "t"}); n != 1 || err != nil {
		t.Fatalf("default: %d, %v", n, err)
	}
	// The default follows the replication factor: 2 from 3 replicas on.
	withReplicas := func(rf int, configs map[string]string) *metadata.Topic {
		reps := make([]int32, rf)
		for i := range reps {
			reps[i] = int32(i + 1)
		}
		return &metadata.Topic{Name: "t", Configs: configs, Partitions: []metadata.Partition{{Replicas: reps, ISR: reps, Leader: 1}}}
	}
	for rf, want := range map[int]int{1: 1, 2: 1, 3: 2, 5: 2, 32767: 2} {
		if n, err := minInsyncReplicas(withReplicas(rf, nil)); n != want || err != nil {
			t.Errorf("rf %d: %d, %v; want %d", rf, n, err, want)
		}
		if got := minInsyncReplicasConfig.DefaultFor(rf); got != strconv.Itoa(want) {
			t.Errorf("rf %d: the table's default %q, want %d", rf, got, want)
		}
	}
	// An override wins either way, also one above the replication
	// factor (allowed, as in Kafka: acks=all is then refused).
	if n, err := minInsyncReplicas(withReplicas(3, map[string]string{"min.insync.replicas": "1"})); n != 1 || err != nil {
		t.Errorf("rf 3 with an override of 1: %d, %v", n, err)
	}
	if n, err := minInsyncReplicas(withReplicas(1, map[string]string{"min.insync.replicas": "4"})); n != 4 || err != nil {
		t.Errorf("rf 1 with an override of 4: %d, %v", n, err)
	}
	// A bad override (the controller refuses them; a log written by
	// another version might not) falls back to the default, not to 1.
	if n, err := minInsyncReplicas(withReplicas(3, map[string]string{"min.insync.replicas": "x"})); n != 2 || err == nil {
		t.Errorf("rf 3 with a bad override: %d, %v; want 2 and an error", n, err)
	}
	if n, err := minInsyncReplicas(&metadata.Topic{Name: "t", Configs: map[string]string{"min.insync.replicas": "3"}}); n != 3 || err != nil {
		t.Fatalf("3: %d, %v", n, err)
	}
	for _, bad := range []string{"0", "-1", "two"} {
		if n, err := minInsyncReplicas(&metadata.Topic{Name: "t", Configs: map[string]string{"min.insync.replicas": bad}}); n != 1 || err == nil {
			t.Errorf("%q: %d, %v; want 1 and an error", bad, n, err)
		}
	}
}

func TestPartitionMetadataFormat(t *testing.T) {
	id := metadata.UUID{0x01, 0x02, 0xfe, 0xff, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0x80}
	data := encodePartitionMetadata(id)
	// Kafka's format: version line, then the id in base64url, no padding.
	if want := "version: 0\ntopic_id: AQL-_wkJCQkJCQkJCQkJgA\n"; string(data) != want {
		t.Fatalf("encoded %q, want %q", data, want)
	}
	got, err := parsePartitionMetadata(data)
	if err != nil || got != id {
		t.Fatalf("parse: %x, %v", got, err)
	}
	for _, bad := range []string{
		"",
		"version: 0\n",
		"topic_id: AQL-_wkJCQkJCQkJCQkJgA\n",
		"version: 1\ntopic_id: AQL-_wkJCQkJCQkJCQkJgA\n",
		"version: 0\ntopic_id: short\n",
		"version 0\n",
	} {
		if _, err := parsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}
