package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/history"
)

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	OriginatingBroker struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32        `json:"partition"`
			Leader    int32        `json:"leader"`
			Error     string       `json:"error"`
			Replicas  []kcatBroker `json:"replicas"`
			ISRs      []kcatBroker `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// kcatBroker is a replica or ISR member in `kcat -L -J`.
type kcatBroker struct {
	ID int32 `json:"id"`
}

// kcatIDs is the brokers' ids in order.
func kcatIDs(bs []kcatBroker) []int32 {
	ids := make([]int32, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	return ids
}

// kcatMessage is one line of `kcat -C -J`.
type kcatMessage struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
}

// kcatConsume reads the whole topic with `kcat -C -e -o beginning -J`
// (not -q, which would also silence the protocol errors runKcat watches for).
func kcatConsume(t *testing.T, b brokers, topic string, extra ...string) map[history.TopicPartition][]history.Record {
	t.Helper()
	ctx := testContext(t, time.Minute)
	args := append([]string{"-b", b.Brokers(), "-X", "broker.address.family=v4", "-C", "-t", topic, "-o", "beginning", "-e", "-J"}, extra...)
	out := runKcat(ctx, t, nil, args...)
	got := make(map[history.TopicPartition][]history.Record)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m kcatMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("kcat -C -J line %q: %v", sc.Text(), err)
		}
		r := history.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
		if m.Key != nil {
			r.Key = []byte(*m.Key)
		}
		if m.Payload != nil {
			r.Value = []byte(*m.Payload)
		}
		got[r.TopicPartition()] = append(got[r.TopicPartition()], r)
	}
	return got
}

// TestKcat: Debian's kcat (librdkafka 2.0 inside) lists the cluster's
// metadata, produces keyed lines, and consumes them back; franz-go reads
// the same log. On one node and on three, with three replicas of each
// partition.
func TestKcat(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	forEachTarget(t, testKcat)
}

func testKcat(t *testing.T, g target) {
	ctx := testContext(t, time.Minute)
	const partitions = 3
	topic := g.topic("kcat-lines")
	g.createTopic(ctx, t, topic, partitions)

	// Metadata: every node, each at its address; every partition on every
	// node (one replica per node, as createTopic checked), led by one of
	// them, all in sync (nothing has lagged yet).
	var md kcatMetadata
	out := runKcat(ctx, t, nil, "-b", g.Brokers(), "-X", "broker.address.family=v4", "-L", "-J")
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	want := make(map[int32]string)
	var nodeIDs []int32 // in order, as kcatIDs gives them
	for _, n := range g.nodes {
		want[n.ID()] = n.Brokers()
		nodeIDs = append(nodeIDs, n.ID())
	}
	listed := make(map[int32]string)
	for _, b := range md.Brokers {
		listed[b.ID] = b.Name
	}
	if len(md.Brokers) != len(want) || !maps.Equal(listed, want) {
		t.Fatalf("kcat -L brokers %+v, want %v (id: address)", md.Brokers, want)
	}
	found := false
	for _, tm := range md.Topics {
		if tm.Topic != topic {
			continue
		}
		found = true
		if tm.Error != "" || len(tm.Partitions) != partitions {
			t.Fatalf("kcat -L topic %s: error %q, %d partitions, want %d", topic, tm.Error, len(tm.Partitions), partitions)
		}
		for _, p := range tm.Partitions {
			if p.Error != "" || !slices.Contains(nodeIDs, p.Leader) ||
				!slices.Equal(kcatIDs(p.Replicas), nodeIDs) || !slices.Equal(kcatIDs(p.ISRs), nodeIDs) {
				t.Fatalf("kcat -L %s-%d: %+v, want nodes %v the replicas and the ISR, one of them leading", topic, p.Partition, p, nodeIDs)
			}
		}
	}
	if !found {
		t.Fatalf("kcat -L does not list %s: %s", topic, out)
	}

	// Produce keyed lines.
	checker := history.NewChecker()
	lines := scale(500, 20_000)
	var in bytes.Buffer
	for i := range lines {
		key := fmt.Sprintf("key-%02d", i%20)
		value := fmt.Sprintf("kcat line %05d", i)
		checker.Sent(topic, []byte(key), []byte(value))
		fmt.Fprintf(&in, "%s:%s\n", key, value)
	}
	runKcat(ctx, t, in.Bytes(), "-b", g.Brokers(), "-X", "broker.address.family=v4", "-P", "-t", topic, "-K", ":", "-X", "acks=all")

	// Consume them back: each line once, per-key order kept, offsets from 0.
	got := kcatConsume(t, g, topic)
	sum, err := checker.Verify(got)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Read != lines {
		t.Fatalf("kcat read back %d records, produced %d", sum.Read, lines)
	}
	for tp, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("%s: kcat read offset %d at position %d", tp, r.Offset, i)
			}
		}
	}
	// franz-go reads the same records at the same offsets.
	franz := readAll(ctx, t, g, topic)
	compareLogs(t, got, franz)
}
