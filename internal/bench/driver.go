// Package bench is Fjord's load generator, in the style of the
// OpenMessaging Benchmark: a workload (workload.go) runs producers and
// consumers through a Driver against a system, and the result
// (result.go) holds throughput, latency percentiles and the node's
// resource use, printed as a table, written as JSON and drawn as a PNG.
//
// The Driver seam lets the same workload, pacing and accounting run
// against Fjord (franz-go, kafkadriver.go) and against a peer system (NATS
// JetStream, in its own module under bench/nats so the main module does
// not depend on it).
package bench

import "context"

// Driver connects a workload to one system under test.
//
// Threads: CreateTopics and the constructors are called from the runner's
// goroutine before the run; each Producer and Consumer is then used by
// one goroutine of the runner, except for the done callbacks, which the
// driver calls from its own goroutines.
type Driver interface {
	// Name names the system in results ("fjord", "nats-jetstream").
	Name() string
	// Settings are the client settings that shape the numbers (acks,
	// linger, batch size, compression, idempotence, ...), printed with
	// every result so a figure is never quoted without them.
	Settings() map[string]string
	// CreateTopics creates each topic with the given partitions.
	CreateTopics(ctx context.Context, topics []string, partitions int) error
	NewProducer(ctx context.Context, topic string) (Producer, error)
	// NewConsumer reads the given partitions of topic directly (no
	// group), from the start of each partition.
	NewConsumer(ctx context.Context, topic string, partitions []int32) (Consumer, error)
	Close() error
}

// GroupDriver is a Driver whose consumers can also share a topic's
// partitions as members of a consumer group, as OMB's Kafka driver runs
// a subscription: the system assigns the partitions, and rebalances them
// as members come.
type GroupDriver interface {
	Driver
	// NewGroupConsumer joins consumer group group on topic; with no
	// committed offsets it starts at each partition's start. Its records
	// are delivered once each while the group's membership only grows
	// or shrinks cleanly (a revoked partition's progress is committed
	// before it moves).
	NewGroupConsumer(ctx context.Context, topic, group string) (Consumer, error)
}

// Producer sends records of one topic.
type Producer interface {
	// Send queues a record and returns without waiting for it to be
	// acknowledged; done is called exactly once, with nil when the system
	// acknowledged the record. key may be nil. value is not retained
	// after Send returns unless the driver copies it.
	Send(ctx context.Context, key, value []byte, done func(error))
	// Flush waits until every record sent so far is acknowledged or failed.
	Flush(ctx context.Context) error
	Close() error
}

// Consumer delivers the records of its partitions.
type Consumer interface {
	// Run calls fn for every record value received until ctx ends or a
	// fatal error; fn must not retain value. Run is called once.
	Run(ctx context.Context, fn func(value []byte)) error
	Close() error
}
