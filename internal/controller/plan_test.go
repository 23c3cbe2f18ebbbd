package controller

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func imageWithBrokers(t *testing.T, ids ...int32) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for _, id := range ids {
		recs = append(recs, metadata.BrokerRecord{NodeID: id, Host: "h", Port: 9092})
	}
	img, err := metadata.Empty(testConfigs).Apply(1, recs...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestCheckAssignments(t *testing.T) {
	img := imageWithBrokers(t, 1, 2, 3)
	tests := []struct {
		a    [][]int32
		rf   int
		want string // "" = ok
	}{
		{[][]int32{{1, 2}, {2, 3}}, 0, ""},
		{[][]int32{{3}}, 1, ""},
		{[][]int32{{1, 2}, {}}, 0, "partition 1 has no replicas"},
		{[][]int32{{1, 2}, {3}}, 0, "partition 1 has 1 replicas, others 2"},
		{[][]int32{{1}}, 2, "partition 0 has 1 replicas, others 2"},
		{[][]int32{{1, 9}}, 0, "broker 9 is not registered (brokers: [1 2 3])"},
		{[][]int32{{2, 2}}, 0, "lists broker 2 twice"},
	}
	for _, tc := range tests {
		_, err := checkAssignments(img, tc.a, tc.rf)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.a, err)
		case tc.want != "" && (err == nil || !errors.Is(err, controlplane.ErrInvalidReplicaAssignment) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want INVALID_REPLICA_ASSIGNMENT containing %q", tc.a, err, tc.want)
		}
	}
}

func TestPlanTopic(t *testing.T) {
	three := imageWithBrokers(t, 1, 2, 3)
	one := imageWithBrokers(t, 1)
	def := topicDefaults{numPartitions: 1, replicationFactor: -1}
	type want struct {
		partitions int
		rf         int
		configs    map[string]string
	}
	tests := []struct {
		name string
		img  *metadata.Image
		def  topicDefaults
		req  controlplane.CreateTopic
		want want
		err  error
		msg  string
	}{
		{"defaults on one broker", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1},
			want{1, 1, map[string]string{}}, nil, ""},
		// min.insync.replicas' default (2 from 3 replicas) is not
		// written as an override (TestCreateTopicsMinInsyncReplicas).
		{"default rf is 3", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: 4, ReplicationFactor: -1},
			want{4, 3, map[string]string{}}, nil, ""},
		{"num.partitions default", one, topicDefaults{numPartitions: 6}, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: 1},
			want{6, 1, map[string]string{}}, nil, ""},
		{"default.replication.factor", three, topicDefaults{numPartitions: 1, replicationFactor: 2}, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -1},
			want{1, 2, map[string]string{}}, nil, ""},
		{"default.replication.factor capped at the brokers", three, topicDefaults{numPartitions: 1, replicationFactor: 5}, controlplane.CreateTopic{Name: "t", NumPartitions: 2, ReplicationFactor: -1},
			want{2, 3, map[string]string{}}, nil, ""},
		{"default rf above one broker is capped", one, topicDefaults{replicationFactor: 2}, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -1},
			want{1, 1, map[string]string{}}, nil, ""},
		{"largest default rf", one, topicDefaults{replicationFactor: math.MaxInt16}, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -1},
			want{1, 1, map[string]string{}}, nil, ""},
		{"explicit min.insync kept", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "3"}},
			want{1, 3, map[string]string{"min.insync.replicas": "3"}}, nil, ""},
		{"min.insync above the replication factor", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "5"}},
			want{1, 1, map[string]string{"min.insync.replicas": "5"}}, nil, ""},
		{"largest min.insync", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "2147483647"}},
			want{1, 1, map[string]string{"min.insync.replicas": "2147483647"}}, nil, ""},
		{"assignments", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{3, 1}, {1, 2}}},
			want{2, 2, map[string]string{}}, nil, ""},
		{"configs", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}},
			want{1, 1, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}}, nil, ""},

		{"zero partitions", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 0, ReplicationFactor: 1}, want{}, controlplane.ErrInvalidPartitions, "0 partitions"},
		{"negative partitions", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: -2, ReplicationFactor: 1}, want{}, controlplane.ErrInvalidPartitions, "-2 partitions"},
		{"too many partitions", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: MaxPartitionsPerTopic + 1, ReplicationFactor: 1}, want{}, controlplane.ErrInvalidPartitions, "10001 partitions"},
		{"too many assignments", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: make([][]int32, MaxPartitionsPerTopic+1)}, want{}, controlplane.ErrInvalidPartitions, "10001 partitions"},
		{"rf above brokers", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 3}, want{}, controlplane.ErrInvalidReplicationFactor, "replication factor 3 is larger than the number of registered brokers (1"},
		{"explicit rf above brokers with a larger default", three, topicDefaults{replicationFactor: 5}, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 4}, want{}, controlplane.ErrInvalidReplicationFactor, "replication factor 4 is larger than the number of registered brokers (3"},
		{"largest explicit rf", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: math.MaxInt16}, want{}, controlplane.ErrInvalidReplicationFactor, "replication factor 32767 is larger"},
		{"negative rf", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -2}, want{}, controlplane.ErrInvalidReplicationFactor, "replication factor -2"},
		{"no brokers", imageWithBrokers(t), def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: -1}, want{}, controlplane.ErrInvalidReplicationFactor, "no live brokers"},
		{"rf zero", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 0}, want{}, controlplane.ErrInvalidReplicationFactor, "replication factor 0"},
		{"assignments with a count", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: 2, ReplicationFactor: -1, Assignments: [][]int32{{1}}}, want{}, controlplane.ErrInvalidRequest, "both must be -1"},
		{"assignments to unknown broker", three, def, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1}, {4}}}, want{}, controlplane.ErrInvalidReplicaAssignment, "broker 4"},
		{"unknown config", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention": "1"}}, want{}, controlplane.ErrInvalidConfig, `unknown topic config "retention"`},
		{"min.insync zero", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "0"}}, want{}, controlplane.ErrInvalidConfig, `min.insync.replicas="0"`},
		{"min.insync overflows", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "2147483648"}}, want{}, controlplane.ErrInvalidConfig, `min.insync.replicas="2147483648"`},
		{"min.insync not a number", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": " 2"}}, want{}, controlplane.ErrInvalidConfig, `min.insync.replicas=" 2"`},
		{"bad config value", one, def, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "a week"}}, want{}, controlplane.ErrInvalidConfig, `retention.ms="a week"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts, configs, err := planTopic(tc.img, tc.req, tc.def)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %v; want %v containing %q", err, tc.err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != tc.want.partitions {
				t.Fatalf("%d partitions, want %d", len(parts), tc.want.partitions)
			}
			for i, p := range parts {
				if len(p.Replicas) != tc.want.rf || !slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 {
					t.Fatalf("partition %d = %+v", i, p)
				}
			}
			if !reflect.DeepEqual(configs, tc.want.configs) {
				t.Fatalf("configs %v, want %v", configs, tc.want.configs)
			}
		})
	}
}

func TestPlanConfigs(t *testing.T) {
	s := func(v string) *string { return &v }
	cur := map[string]string{"retention.ms": "1000", "segment.bytes": "1048576"}
	tests := []struct {
		name       string
		cur        map[string]string
		ops        []controlplane.ConfigOp
		replaceAll bool
		want       map[string]string
		err        error
		msg        string
	}{
		{"set", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: s("5")}},
			false, map[string]string{"retention.ms": "5", "segment.bytes": "1048576"}, nil, ""},
		{"delete", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigDelete}},
			false, map[string]string{"segment.bytes": "1048576"}, nil, ""},
		{"delete what is not set", cur, []controlplane.ConfigOp{{Name: "flush.ms", Op: controlplane.ConfigDelete}},
			false, cur, nil, ""},
		{"append to the default", nil, []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigAppend, Value: s("compact")}},
			false, map[string]string{"cleanup.policy": "delete,compact"}, nil, ""},
		{"append present item", map[string]string{"cleanup.policy": "compact"}, []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigAppend, Value: s("compact")}},
			false, map[string]string{"cleanup.policy": "compact"}, nil, ""},
		{"subtract", map[string]string{"cleanup.policy": "compact,delete"}, []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigSubtract, Value: s("delete")}},
			false, map[string]string{"cleanup.policy": "compact"}, nil, ""},
		{"replace all", cur, []controlplane.ConfigOp{{Name: "flush.policy", Op: controlplane.ConfigSet, Value: s("interval")}},
			true, map[string]string{"flush.policy": "interval"}, nil, ""},
		{"replace all with nothing", cur, nil, true, map[string]string{}, nil, ""},

		{"subtract to empty", nil, []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigSubtract, Value: s("delete")}},
			false, nil, controlplane.ErrInvalidConfig, `cleanup.policy=""`},
		{"append to non-list", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigAppend, Value: s("1")}},
			false, nil, controlplane.ErrInvalidConfig, "not a list"},
		{"bad value", cur, []controlplane.ConfigOp{{Name: "segment.bytes", Op: controlplane.ConfigSet, Value: s("10")}},
			false, nil, controlplane.ErrInvalidConfig, `segment.bytes="10"`},
		{"append bad item", nil, []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigAppend, Value: s("archive")}},
			false, nil, controlplane.ErrInvalidConfig, `unknown policy "archive"`},
		{"unknown config", cur, []controlplane.ConfigOp{{Name: "retention", Op: controlplane.ConfigDelete}},
			false, nil, controlplane.ErrInvalidConfig, `unknown topic config "retention"`},
		{"set null", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet}},
			false, nil, controlplane.ErrInvalidConfig, "null value"},
		{"duplicate name", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: s("1")}, {Name: "retention.ms", Op: controlplane.ConfigDelete}},
			false, nil, controlplane.ErrInvalidRequest, "more than once"},
		{"unknown op", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: 9, Value: s("1")}},
			false, nil, controlplane.ErrInvalidRequest, "unknown operation 9"},
		{"replace all with a delete op", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigDelete}},
			true, nil, controlplane.ErrInvalidRequest, "only sets"},
		{"replace all with null", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet}},
			true, nil, controlplane.ErrInvalidConfig, "null value"},
		{"replace all bad value", cur, []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: s("x")}},
			true, nil, controlplane.ErrInvalidConfig, `retention.ms="x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.cur)
			got, err := planConfigs(metadata.Empty(testConfigs), tc.cur, tc.ops, tc.replaceAll)
			if fmt.Sprint(tc.cur) != before {
				t.Fatal("planConfigs modified the current overrides")
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %v; want %v containing %q", err, tc.err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConfigRecords(t *testing.T) {
	id := metadata.UUID{1}
	old := map[string]string{"a": "1", "b": "2", "c": "3"}
	new := map[string]string{"a": "1", "b": "20", "d": "4"}
	got := configRecords(id, old, new)
	v20, v4 := "20", "4"
	want := []metadata.Record{
		metadata.ConfigRecord{TopicID: id, Name: "b", Value: &v20},
		metadata.ConfigRecord{TopicID: id, Name: "c"},
		metadata.ConfigRecord{TopicID: id, Name: "d", Value: &v4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if len(configRecords(id, old, old)) != 0 {
		t.Fatal("no change gave records")
	}
}

func TestNewUUID(t *testing.T) {
	// A reader that yields all-zero bytes first, then a draw whose
	// base64 starts with '-', then a taken id, then a usable one.
	draws := [][]byte{
		make([]byte, 16),
		append([]byte{0xf8}, make([]byte, 15)...), // 111110 -> '-' in base64url
		{2, 15: 1},
		{3, 15: 1},
	}
	taken := metadata.UUID{2, 6: 0x40, 8: 0x80, 15: 1}
	n := 0
	read := func(b []byte) (int, error) {
		copy(b, draws[n])
		n++
		return len(b), nil
	}
	u, err := newUUID(read, func(x metadata.UUID) bool { return x == taken })
	if err != nil {
		t.Fatal(err)
	}
	// The all-zero draw becomes a valid v4 id once the version bits are
	// set, so it is the one returned.
	if n != 1 || u != (metadata.UUID{6: 0x40, 8: 0x80}) {
		t.Fatalf("got %s after %d draws", u, n)
	}
	n = 1
	u, err = newUUID(read, func(x metadata.UUID) bool { return x == taken })
	if err != nil || n != 4 || u != (metadata.UUID{3, 6: 0x40, 8: 0x80, 15: 1}) {
		t.Fatalf("got %s after %d draws (%v); want the 4th draw", u, n, err)
	}
	if u.IsZero() || u[6]>>4 != 4 || u[8]>>6 != 2 {
		t.Fatalf("%s is not a version 4 UUID", u)
	}
	_, err = newUUID(func(b []byte) (int, error) { return 0, errors.New("no entropy") }, func(metadata.UUID) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "no entropy") {
		t.Fatalf("read error: %v", err)
	}
	_, err = newUUID(func(b []byte) (int, error) { return len(b), nil }, func(metadata.UUID) bool { return true })
	if err == nil {
		t.Fatal("all ids taken, yet newUUID returned one")
	}
}

func TestCollisionKey(t *testing.T) {
	if collisionKey("a.b_c") != collisionKey("a_b.c") || collisionKey("ab") == collisionKey("a.b") {
		t.Fatal("collisionKey")
	}
}

// A topic created while one of three brokers is fenced (a rolling
// restart) still gets three replicas: the fenced broker's is out of the
// ISR and never the leader, and it joins once the broker is back.
func TestPlanTopicWithABrokerFenced(t *testing.T) {
	img := imageWithBrokers(t, 1, 2, 3)
	img, err := img.Apply(img.Offset+1, metadata.MetadataVersionRecord{Version: metadata.FencingMetadataVersion},
		metadata.FenceBrokerRecord{NodeID: 2, Epoch: img.Brokers[2].Epoch})
	if err != nil {
		t.Fatal(err)
	}
	parts, _, err := planTopic(img, controlplane.CreateTopic{Name: "t", NumPartitions: 4, ReplicationFactor: 3}, topicDefaults{})
	if err != nil {
		t.Fatalf("rf 3 with one of three brokers fenced: %v", err)
	}
	for p, part := range parts {
		if len(part.Replicas) != 3 || slices.Contains(part.ISR, 2) || len(part.ISR) != 2 || part.Leader == 2 || part.Leader != part.Replicas[0] {
			t.Errorf("partition %d: replicas %v, ISR %v, leader %d; want three replicas, broker 2 out of the ISR and not leading", p, part.Replicas, part.ISR, part.Leader)
		}
	}
	if _, _, err := planTopic(img, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 4}, topicDefaults{}); !errors.Is(err, controlplane.ErrInvalidReplicationFactor) ||
		!strings.Contains(err.Error(), "registered brokers (3, 2 of them live)") {
		t.Errorf("rf 4 on three brokers: %v, want INVALID_REPLICATION_FACTOR naming 3 registered, 2 live", err)
	}
}
