package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// startGroupNode starts a node whose new groups rebalance as soon as their
// first member joins: Kafka's group.initial.rebalance.delay.ms of 3 s
// would add 3 s to every test that forms a group, and none of these tests
// is about that delay.
func startGroupNode(t *testing.T) *testcluster.Node {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{Args: []string{"--group-initial-rebalance-delay-ms", "0"}})
}

// endOffsets returns each partition's high watermark, failing the test
// if the node does not answer for every one of partitions.
func endOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	ends := make(map[int32]int64, partitions)
	for p := range partitions {
		o, ok := listed.Lookup(topic, p)
		if !ok {
			t.Fatalf("no end offset for %s-%d", topic, p)
		}
		ends[p] = o.Offset
	}
	return ends
}

// committedOffsets is OffsetFetch for every partition the group has
// committed, by topic and partition, as the node answers it.
func committedOffsets(ctx context.Context, adm *kadm.Client, group string) (map[history.TopicPartition]kadm.OffsetResponse, error) {
	resps, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	got := make(map[history.TopicPartition]kadm.OffsetResponse)
	resps.Each(func(o kadm.OffsetResponse) {
		got[history.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
	})
	return got, nil
}

// describeCommit shows one partition's answer to OffsetFetch.
func describeCommit(o kadm.OffsetResponse, ok bool) string {
	switch {
	case !ok:
		return "nothing"
	case o.Err != nil:
		return fmt.Sprintf("error %v", o.Err)
	}
	return fmt.Sprintf("offset %d (leader epoch %d, metadata %q)", o.At, o.LeaderEpoch, o.Metadata)
}

// describeGroup describes one group and fails the test if the node
// cannot.
func describeGroup(ctx context.Context, t *testing.T, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("describing group %s: %v", group, err)
	}
	d, ok := described[group]
	if !ok {
		t.Fatalf("describing group %s: no answer for it", group)
	}
	if d.Err != nil {
		t.Fatalf("describing group %s: %v %s", group, d.Err, d.ErrMessage)
	}
	return d
}

// memberAssignment is the partitions of topic that DescribeGroups says
// the member was assigned, sorted.
func memberAssignment(m kadm.DescribedGroupMember, topic string) []int32 {
	c, ok := m.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	var parts []int32
	for _, tp := range c.Topics {
		if tp.Topic == topic {
			parts = append(parts, tp.Partitions...)
		}
	}
	slices.Sort(parts)
	return parts
}

// sortedKeys returns m's partitions in order.
func sortedKeys[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
