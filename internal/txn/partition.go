package txn

import (
	"cmp"
	"slices"

	"github.com/fjordmq/fjord/internal/group"
)

// PartitionFor is Kafka's placement of a transactional id on
// __transaction_state (TransactionStateManager.partitionFor):
// abs(javaStringHashCode(id)) % partitions, with Kafka's Utils.abs and
// Java's String.hashCode over UTF-16 code units. It is the same function
// as a group's placement on __consumer_offsets, so it is group's.
// partitions must be positive (it panics otherwise).
func PartitionFor(transactionalID string, partitions int32) int32 {
	return group.PartitionFor(transactionalID, partitions)
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTopicPartitions(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// partitionSet returns tps sorted and without duplicates, in a new
// slice (nil when empty). A transaction's partitions are kept this way,
// and never changed in place: transits share them.
func partitionSet(tps []TopicPartition) []TopicPartition {
	if len(tps) == 0 {
		return nil
	}
	out := slices.Clone(tps)
	slices.SortFunc(out, compareTopicPartitions)
	return slices.Compact(out)
}

// unionPartitions is a ∪ b, both sets as partitionSet makes them, in a
// new slice.
func unionPartitions(a, b []TopicPartition) []TopicPartition {
	return partitionSet(append(slices.Clone(a), b...))
}

// containsAll reports whether set (sorted) holds every partition of tps.
func containsAll(set, tps []TopicPartition) bool {
	for _, tp := range tps {
		if !containsPartition(set, tp) {
			return false
		}
	}
	return true
}

func containsPartition(set []TopicPartition, tp TopicPartition) bool {
	_, found := slices.BinarySearchFunc(set, tp, compareTopicPartitions)
	return found
}
