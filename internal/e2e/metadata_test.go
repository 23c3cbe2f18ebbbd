package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// clusterState is what a restart must keep: topics (ids, partitions,
// replicas), every topic config with its source, log start and end
// offsets, and the records.
type clusterState struct {
	Topics  map[string]topicState
	Configs map[string]map[string]string // topic -> config name -> "value (source)"
	Starts  map[string]map[int32]int64
	Ends    map[string]map[int32]int64
	Records map[history.TopicPartition][]string // "offset key=value"
}

type topicState struct {
	ID         kadm.TopicID
	Partitions int
	Replicas   map[int32][]int32
}

func captureState(ctx context.Context, t *testing.T, n *testcluster.Node) clusterState {
	t.Helper()
	adm := newAdmin(t, n)
	topics, err := adm.ListTopics(ctx)
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		t.Fatalf("listing topics: %v", err)
	}
	s := clusterState{
		Topics:  make(map[string]topicState),
		Configs: make(map[string]map[string]string),
		Starts:  make(map[string]map[int32]int64),
		Ends:    make(map[string]map[int32]int64),
	}
	names := topics.Names()
	sort.Strings(names)
	for _, name := range names {
		td := topics[name]
		ts := topicState{ID: td.ID, Partitions: len(td.Partitions), Replicas: make(map[int32][]int32)}
		for p, pd := range td.Partitions {
			ts.Replicas[p] = pd.Replicas
		}
		s.Topics[name] = ts
	}
	if len(names) == 0 {
		return s
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatalf("describing configs: %v", err)
	}
	for _, rc := range configs {
		if rc.Err != nil {
			t.Fatalf("describing configs of %s: %v", rc.Name, rc.Err)
		}
		m := make(map[string]string)
		for _, c := range rc.Configs {
			m[c.Key] = fmt.Sprintf("%s (%s)", c.MaybeValue(), c.Source)
		}
		s.Configs[rc.Name] = m
	}
	for _, list := range []struct {
		f   func(context.Context, ...string) (kadm.ListedOffsets, error)
		dst map[string]map[int32]int64
	}{{adm.ListStartOffsets, s.Starts}, {adm.ListEndOffsets, s.Ends}} {
		offsets, err := list.f(ctx, names...)
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			t.Fatalf("listing offsets: %v", err)
		}
		offsets.Each(func(o kadm.ListedOffset) {
			if list.dst[o.Topic] == nil {
				list.dst[o.Topic] = make(map[int32]int64)
			}
			list.dst[o.Topic][o.Partition] = o.Offset
		})
	}
	logs := readAll(ctx, t, n, names...)
	s.Records = make(map[history.TopicPartition][]string)
	for tp, recs := range logs {
		lines := []string{}
		for _, r := range recs {
			lines = append(lines, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
		}
		s.Records[tp] = lines
	}
	return s
}

// diffStates describes how two states differ, or returns "".
func diffStates(before, after clusterState) string {
	var out []string
	if !reflect.DeepEqual(before.Topics, after.Topics) {
		out = append(out, fmt.Sprintf("topics:\n  before %+v\n  after  %+v", before.Topics, after.Topics))
	}
	for topic, cfg := range before.Configs {
		for k, v := range cfg {
			if after.Configs[topic][k] != v {
				out = append(out, fmt.Sprintf("%s config %s: before %q, after %q", topic, k, v, after.Configs[topic][k]))
			}
		}
		for k, v := range after.Configs[topic] {
			if _, ok := cfg[k]; !ok {
				out = append(out, fmt.Sprintf("%s config %s: new after restart: %q", topic, k, v))
			}
		}
	}
	if !reflect.DeepEqual(before.Starts, after.Starts) {
		out = append(out, fmt.Sprintf("log start offsets: before %v, after %v", before.Starts, after.Starts))
	}
	if !reflect.DeepEqual(before.Ends, after.Ends) {
		out = append(out, fmt.Sprintf("end offsets: before %v, after %v", before.Ends, after.Ends))
	}
	if !reflect.DeepEqual(before.Records, after.Records) {
		for tp, recs := range before.Records {
			if !reflect.DeepEqual(recs, after.Records[tp]) {
				out = append(out, fmt.Sprintf("%s records: before %d, after %d", tp, len(recs), len(after.Records[tp])))
			}
		}
	}
	return strings.Join(out, "\n")
}

// requireTopicGone checks that every way a client can look at a topic
// says it does not exist, without creating it (kadm's metadata requests
// do not ask for auto-creation).
func requireTopicGone(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("metadata for %s: %v", topic, err)
	}
	if td, ok := topics[topic]; ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleted topic %s: metadata says %+v, want UNKNOWN_TOPIC_OR_PARTITION", topic, td)
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if all.Has(topic) {
		t.Fatalf("deleted topic %s is listed", topic)
	}
}

// TestMetadataSurvivesRestart: topics created with configs, configs
// altered, partitions added, many topics created and deleted, records
// produced; then a clean restart (SIGTERM) and a crash (SIGKILL) each
// leave topics, topic ids, configs, offsets and records as they were, and
// the deleted topic stays deleted. A topic created again under a deleted
// name starts empty.
func TestMetadataSurvivesRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testContext(t, 2*time.Minute)
	adm := newAdmin(t, n)

	createTopic(ctx, t, adm, "meta-a", 3, "retention.ms=3600000", "max.message.bytes=200000", "cleanup.policy=delete")
	createTopic(ctx, t, adm, "meta-b", 1, "flush.policy=interval", "message.timestamp.type=LogAppendTime")
	doomed := createTopic(ctx, t, adm, "meta-doomed", 2)

	// Many topic operations, so the metadata log has history to replay
	// (and to snapshot, when the controller's threshold is low enough).
	churn := scale(40, 400)
	for i := range churn {
		name := fmt.Sprintf("churn-%03d", i)
		createTopic(ctx, t, adm, name, 1)
		if i%2 == 0 {
			alterConfigs(ctx, t, adm, name, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr(fmt.Sprint(60000 + i))})
		}
		if i%5 != 0 {
			deleteTopic(ctx, t, adm, name)
		}
	}

	producer := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: "meta-a", Partition: int32(i % 3), Key: fmt.Appendf(nil, "a%d", i%7), Value: fmt.Appendf(nil, "a-%d", i)})
	}
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: "meta-b", Partition: 0, Key: fmt.Appendf(nil, "b%d", i), Value: fmt.Appendf(nil, "b-%d", i)})
	}
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "meta-doomed", Partition: int32(i % 2), Value: fmt.Appendf(nil, "doomed-%d", i)})
	}
	produceRecordsSync(ctx, t, producer, recs...)

	alterConfigs(ctx, t, adm, "meta-a",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("86400000")},
	)
	added, err := adm.CreatePartitions(ctx, 1, "meta-b")
	if err == nil {
		err = added.Error()
	}
	if err != nil {
		t.Fatalf("adding a partition to meta-b: %v", err)
	}
	eventually(t, 10*time.Second, func() error {
		topics, err := adm.ListTopics(ctx, "meta-b")
		if err != nil {
			return err
		}
		if got := len(topics["meta-b"].Partitions); got != 2 {
			return fmt.Errorf("meta-b has %d partitions after CreatePartitions", got)
		}
		return nil
	})
	// A new client: the producer's cached metadata may predate the new
	// partition, and a manual partition choice is checked against it.
	produceRecordsSync(ctx, t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())),
		&kgo.Record{Topic: "meta-b", Partition: 1, Value: []byte("b-new-partition")})
	deleteTopic(ctx, t, adm, "meta-doomed")
	requireTopicGone(ctx, t, adm, "meta-doomed")

	before := captureState(ctx, t, n)
	checkConfig := func(s clusterState, topic, name, want string) {
		t.Helper()
		if got := s.Configs[topic][name]; !strings.HasPrefix(got, want+" (") {
			t.Fatalf("%s %s = %q, want %q", topic, name, got, want)
		}
	}
	// The state captured is the state asked for (so comparing it across
	// restarts means something).
	checkConfig(before, "meta-a", "retention.ms", "7200000")
	checkConfig(before, "meta-a", "max.message.bytes", "1048588")
	checkConfig(before, "meta-a", "segment.ms", "86400000")
	checkConfig(before, "meta-b", "flush.policy", "interval")
	checkConfig(before, "meta-b", "message.timestamp.type", "LogAppendTime")
	if got := before.Topics["meta-b"].Partitions; got != 2 {
		t.Fatalf("meta-b has %d partitions, want 2", got)
	}
	if got := before.Ends["meta-a"]; !reflect.DeepEqual(got, map[int32]int64{0: 100, 1: 100, 2: 100}) {
		t.Fatalf("meta-a end offsets %v", got)
	}
	if want := churn/5 + 2; len(before.Topics) != want {
		t.Fatalf("%d topics before the restart, want %d: %v", len(before.Topics), want, before.Topics)
	}

	// A clean restart.
	n.Stop()
	n.Restart()
	after := captureState(ctx, t, n)
	if d := diffStates(before, after); d != "" {
		t.Fatalf("after SIGTERM and restart:\n%s", d)
	}
	requireTopicGone(ctx, t, adm, "meta-doomed")
	for p := range 2 {
		if _, err := os.Stat(filepath.Join(n.DataDir(), fmt.Sprintf("meta-doomed-%d", p))); err == nil {
			t.Fatalf("the deleted topic's log directory meta-doomed-%d is still in the data dir", p)
		}
	}

	// Records written after the restart continue the offsets.
	produceRecordsSync(ctx, t, producer, &kgo.Record{Topic: "meta-a", Partition: 0, Value: []byte("after-restart")})
	before = captureState(ctx, t, n)
	if got := before.Ends["meta-a"][0]; got != 101 {
		t.Fatalf("meta-a-0 end offset %d after one more record, want 101", got)
	}

	// A crash.
	n.Kill()
	n.Restart()
	after = captureState(ctx, t, n)
	if d := diffStates(before, after); d != "" {
		t.Fatalf("after SIGKILL and restart:\n%s", d)
	}
	requireTopicGone(ctx, t, adm, "meta-doomed")

	// The deleted name can be used again: a new topic, with a new id, and
	// none of the old records. (A fresh client: adm's cached metadata says
	// the topic does not exist, and franz-go would believe it for a while.)
	adm = newAdmin(t, n)
	again := createTopic(ctx, t, adm, "meta-doomed", 2)
	if again.ID == doomed.ID {
		t.Fatalf("recreated meta-doomed has the deleted topic's id %v", again.ID)
	}
	ends, err := adm.ListEndOffsets(ctx, "meta-doomed")
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("recreated meta-doomed-%d has end offset %d: the deleted topic's records came back", o.Partition, o.Offset)
		}
	})
}

func alterConfigs(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, ops ...kadm.AlterConfig) {
	t.Helper()
	resps, err := adm.AlterTopicConfigs(ctx, ops, topic)
	if err != nil {
		t.Fatalf("altering %s configs: %v", topic, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			t.Fatalf("altering %s configs %+v: %v %s", topic, ops, r.Err, r.ErrMessage)
		}
	}
}

func deleteTopic(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("deleting %s: %v %s", topic, err, resp.ErrMessage)
	}
}
