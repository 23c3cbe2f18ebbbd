package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partitioner places a record where its request asked (an explicit
// partition, carried in the record's context), else as a Kafka producer
// would: murmur2 of the key, sticky for records without one.
type partitioner struct{ def kgo.Partitioner }

func newPartitioner() kgo.Partitioner {
	return partitioner{def: kgo.StickyKeyPartitioner(nil)}
}

type explicitPartition struct{}

// withPartition marks r for partition p.
func withPartition(r *kgo.Record, p int32) {
	r.Context = context.WithValue(context.Background(), explicitPartition{}, p)
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return topicPartitioner{def: p.def.ForTopic(topic)}
}

type topicPartitioner struct{ def kgo.TopicPartitioner }

// RequiresConsistency: an explicit partition must not move; otherwise
// as the default decides (keyed records must not either).
func (t topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	if r.Context != nil {
		if _, ok := r.Context.Value(explicitPartition{}).(int32); ok {
			return true
		}
	}
	return t.def.RequiresConsistency(r)
}

// OnNewBatch keeps the default's stickiness for records without a key:
// it picks its next partition when a batch fills.
func (t topicPartitioner) OnNewBatch() {
	if nb, ok := t.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

// Partition returns an explicit partition even when it is past the n
// partitions the client knows of: franz-go then fails the record, where
// any other answer would put it in a partition the request did not ask
// for. awaitPartitions makes the client learn of new partitions first.
func (t topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil {
		if p, ok := r.Context.Value(explicitPartition{}).(int32); ok {
			return int(p)
		}
	}
	return t.def.Partition(r, n)
}

// awaitPartitions returns once cl knows of topic's partition n-1, so
// that a record naming a partition below n is placed there: franz-go
// learns of partitions added by CreatePartitions only at its next
// metadata refresh, and its partitioner is told only of those it knows.
// A topic cl has not loaded yet needs no wait, since its first produce
// loads it afresh.
func awaitPartitions(ctx context.Context, cl *kgo.Client, topic string, n int32) error {
	known := func(p int32) bool {
		leader, _, _ := cl.PartitionLeader(topic, p)
		return leader >= 0
	}
	if n <= 0 || known(n-1) || !known(0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, awaitPartitionsTimeout)
	defer cancel()
	tick := time.NewTicker(metadataMinAge)
	defer tick.Stop()
	for !known(n - 1) {
		cl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return fmt.Errorf("the producer has not learned of partition %d of %q: %w", n-1, topic, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
