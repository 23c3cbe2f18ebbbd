package httpapi

import (
	"context"

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

func (t topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil {
		if p, ok := r.Context.Value(explicitPartition{}).(int32); ok && int(p) < n {
			return int(p)
		}
	}
	return t.def.Partition(r, n)
}
