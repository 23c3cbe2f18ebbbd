package main

import "errors"

// Errors of the peer bench.
var (
	// errUsage is a bad command line.
	errUsage = errors.New("usage: go run . WORKLOAD [--out DIR] [--duration D] [--warmup D] [--dir DIR] [--replicas N] [--sync default|always|DURATION] [--max-pending N] [--consumer pull|push] [--read-ahead N]")
	// errTmpfs is a store directory in memory, which would flatter the
	// peer against Fjord on disk.
	errTmpfs = errors.New("store directory is on tmpfs (memory), not a disk")
	// errBadSync is a --sync value that is not default, always or a
	// duration.
	errBadSync = errors.New("bad --sync")
	// errServerNotReady is a server process that did not report its URL.
	errServerNotReady = errors.New("nats server not ready")
	// errNoJetStream is a server that started without JetStream.
	errNoJetStream = errors.New("nats server started without JetStream")
	// errBadConsumer is a consumer kind other than pull and push.
	errBadConsumer = errors.New("bad --consumer (want pull or push)")
	// errBadReplicas is a replica count JetStream does not take.
	errBadReplicas = errors.New("bad replicas")
	// errBadPartitions is a partition count or number out of range.
	errBadPartitions = errors.New("bad partitions")
	// errUnknownTopic is a producer or consumer of a topic that
	// CreateTopics did not create.
	errUnknownTopic = errors.New("topic not created by this driver")
)
