package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestTopicDescribeMinInsyncReplicas, against a real node: a topic whose
// min.insync.replicas exceeds its replicas (Kafka allows it) shows the
// override and the partitions as under-min-isr, and still takes acks=1
// writes; deleting the override goes back to the default for one
// replica.
func TestTopicDescribeMinInsyncReplicas(t *testing.T) {
	topic := topicName("min-isr")
	ok(t, "", "topic", "create", topic, "--partitions", "2", "--config", "min.insync.replicas=2")
	r := ok(t, "", "topic", "describe", topic)
	if !strings.Contains(r.stdout, "Min in-sync replicas: 2 (topic)\n") || !strings.Contains(r.stdout, "Configs: min.insync.replicas=2\n") {
		t.Errorf("describe does not show the override:\n%s", r.stdout)
	}
	rows := describeRows(t, r.stdout)
	for p := range 2 {
		if f := rows[p]; len(f) != 8 || f[7] != "under-min-isr" {
			t.Errorf("partition %d row %v, want status under-min-isr:\n%s", p, f, r.stdout)
		}
	}
	doc := decodeJSON(t, ok(t, "", "topic", "describe", topic, "-o", "json").stdout)
	if number(t, doc["min_insync_replicas"]) != 2 || doc["min_insync_replicas_source"] != "topic" {
		t.Errorf("-o json: min_insync_replicas %v from %v, want 2 from topic", doc["min_insync_replicas"], doc["min_insync_replicas_source"])
	}
	for _, p := range list(t, doc["partitions"]) {
		if st := list(t, p.(map[string]any)["status"]); len(st) != 1 || st[0] != "under-min-isr" {
			t.Errorf("-o json: partition status %v, want [under-min-isr]", st)
		}
	}

	// acks=all would be refused with NOT_ENOUGH_REPLICAS, which the
	// client retries for its whole timeout (replica's
	// TestMinInsyncReplicas pins the refusal); acks=1 is not bound by
	// min.insync.replicas.
	ok(t, "x\n", "produce", topic, "--partition", "0", "--acks", "1")

	ok(t, "", "topic", "alter", topic, "--delete-config", "min.insync.replicas")
	r = ok(t, "", "topic", "describe", topic)
	if !strings.Contains(r.stdout, "Min in-sync replicas: 1 (default)\n") {
		t.Errorf("after deleting the override:\n%s", r.stdout)
	}
	if f := describeRows(t, r.stdout)[0]; len(f) != 8 || f[6] != "1" || f[7] != "ok" {
		t.Errorf("partition 0 row %v, want log end 1 and status ok", f)
	}
}

func TestPartitionStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		leader   int32
		replicas []int32
		isr      []int32
		offline  []int32
		minISR   int
		want     []string
	}{
		{"healthy", 1, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, 2, []string{}},
		{"one follower out", 1, []int32{1, 2, 3}, []int32{1, 3}, nil, 2, []string{"under-replicated"}},
		{"below min ISR", 1, []int32{1, 2, 3}, []int32{1}, nil, 2, []string{"under-min-isr", "under-replicated"}},
		{"no leader", -1, []int32{1, 2, 3}, []int32{1}, []int32{1, 2, 3}, 2,
			[]string{"offline", "under-min-isr", "under-replicated", "replica-offline"}},
		{"led by a follower", 2, []int32{1, 2, 3}, []int32{2, 3, 1}, nil, 2, []string{"leader-not-preferred"}},
		{"broker gone, still in sync", 1, []int32{1, 2}, []int32{1, 2}, []int32{2}, 1, []string{"replica-offline"}},
		{"min ISR above the replicas", 1, []int32{1}, []int32{1}, nil, 2, []string{"under-min-isr"}},
		{"min ISR not known", 1, []int32{1, 2}, []int32{1}, nil, 0, []string{"under-replicated"}},
		{"nothing known", -1, nil, nil, nil, 0, []string{"offline"}},
	} {
		if got := partitionStatus(tc.leader, tc.replicas, tc.isr, tc.offline, tc.minISR); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTopicDescribeText pins the text layout for a replicated topic,
// which one node cannot show: replicas with the preferred leader first,
// the ISR, the status column, and an offset that could not be listed.
func TestTopicDescribeText(t *testing.T) {
	off := func(v int64) *int64 { return &v }
	two := 2
	d := &topicDescription{
		Name: "orders", ID: "AAAAAAAAAAAAAAAAAAAAAA", ReplicationFactor: 3,
		MinInsyncReplicas: &two, MinInsyncReplicasSource: "default",
		Configs: map[string]string{"retention.ms": "1000"},
		Partitions: []partitionDescription{
			{Partition: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, OfflineReplicas: []int32{},
				Status: []string{}, LogStartOffset: off(0), LogEndOffset: off(10)},
			{Partition: 1, Leader: 3, LeaderEpoch: 7, Replicas: []int32{2, 3, 1}, ISR: []int32{3}, OfflineReplicas: []int32{2},
				Status: partitionStatus(3, []int32{2, 3, 1}, []int32{3}, []int32{2}, 2), LogStartOffset: off(5), LogEndOffset: off(9)},
			{Partition: 2, Leader: -1, LeaderEpoch: 2, Replicas: []int32{3, 1, 2}, ISR: []int32{}, OfflineReplicas: []int32{},
				Status: partitionStatus(-1, []int32{3, 1, 2}, nil, nil, 2), Error: "LEADER_NOT_AVAILABLE"},
		},
	}
	var buf bytes.Buffer
	if err := d.printText(&buf); err != nil {
		t.Fatal(err)
	}
	want := `Topic: orders
Topic ID: AAAAAAAAAAAAAAAAAAAAAA
Partitions: 3
Replication factor: 3
Min in-sync replicas: 2 (default)
Configs: retention.ms=1000
PARTITION  LEADER  EPOCH  REPLICAS  ISR    LOG-START  LOG-END  STATUS
0          1       4      1,2,3     1,2,3  0          10       ok
1          3       7      2,3,1     3      5          9        under-min-isr,under-replicated,replica-offline,leader-not-preferred
2          -1      2      3,1,2     none   error      error    offline,under-min-isr,under-replicated
partition 2: LEADER_NOT_AVAILABLE
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
