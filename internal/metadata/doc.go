// Package metadata holds the cluster metadata log's records and the
// immutable image built from them.
//
// The controller commits every metadata change to its Raft log as a batch
// of records (records.go); one Raft entry is one batch, so a topic and its
// partitions appear together or not at all. Every node applies the batches
// in log order with Image.Apply, each giving a new *Image; brokers react to
// images, never to records.
//
// Records and the invariants Apply enforces (a batch that breaks one is
// refused whole, the image unchanged):
//
//	cluster_id    ClusterIDRecord    set once, never changed
//	broker        BrokerRecord       node id >= 0, host, port 1..65535;
//	                                 re-registration replaces the endpoint;
//	                                 starts fenced (metadata version 2)
//	fence_broker  FenceBrokerRecord  a registered broker at its epoch
//	unfence_broker UnfenceBrokerRecord  the same
//	controlled_shutdown ControlledShutdownRecord  the same (metadata
//	                                 version 3); until the broker registers
//	                                 again it is never made a leader
//	topic         TopicRecord        valid name; non-zero id; name and id
//	                                 not live; >= 1 partition by batch end
//	partition     PartitionRecord    known topic; numbered 0..n-1, never
//	                                 removed alone; replicas distinct and
//	                                 registered; ISR a subset; leader in the
//	                                 ISR or -1, never made a fenced
//	                                 broker; leader epoch never decreases
//	                                 and increases with every leader change
//	config        ConfigRecord       known topic and config; value valid
//	                                 (Image.ValidateTopicConfig); nil resets
//	remove_topic  RemoveTopicRecord  known topic; removes its partitions
//	unregister_broker UnregisterBrokerRecord  a registered broker at its
//	                                 epoch, named by no partition
//	                                 (metadata version 5)
//	broker_config BrokerConfigRecord  broker -1 (default) or registered;
//	                                 a dynamic broker config, value valid
//	                                 (metadata version 5); nil resets
//	producer_ids  ProducerIDsRecord  NextProducerID only grows, so blocks
//	                                 never overlap
//
// A topic id is never reused: the controller draws 16 random bytes and
// refuses one equal to a live id; Apply checks only live ids, since keeping
// every deleted id forever would grow the image without bound for a
// 2^-122 event.
//
// Images are copy-on-write: Apply copies the top-level maps and the topics
// the batch touches, and shares the rest with the previous image. A
// Partition's Replicas and ISR slices are never modified in place (a
// PartitionRecord replaces the whole Partition).
//
// Encoding (codec.go): records are JSON envelopes {"type","data"}, a batch
// a JSON array of them, an image snapshot one JSON document with sorted
// lists. DecodeImage rebuilds the image through Apply, so a snapshot is
// held to the same invariants as the log.
//
// Threads: none. Everything here is pure; an *Image may be read by any
// number of goroutines without locks, and must never be modified once it
// has been handed out.
package metadata
