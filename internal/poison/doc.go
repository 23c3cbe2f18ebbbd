// Package poison keeps what issue 18's poison-record contract needs every
// node to agree on: each consumer group's policy per topic (after how many
// failed attempts at one offset to pause the partition or quarantine the
// record in a dead-letter topic) and the partitions a group has paused
// (where, why, after how many attempts). DESIGN.md section 24, slice 3.
//
// # Where it lives, and why a topic
//
// Both live in one compacted topic, Topic ("__fjord_consumer_policies"),
// one record per policy and per pause, the newest record of a key being
// the truth (compaction keeps exactly that). A Store reads the whole
// topic when it opens and follows it afterwards, so the HTTP gateway of
// any node, and the CLI, hold every policy and pause locally, and a write
// survives the node that made it (acks=all, replicated like any topic).
//
// The plan in DESIGN.md put policies in the metadata log and pauses in
// __consumer_offsets. Neither fits what reads them. The metadata log is
// the controller's: the cluster's shape (brokers, topics, partitions),
// replayed into every node's image and validated by the controller; a
// policy is consumer-side state, read and acted on by the HTTP gateway's
// consumer instances, which are Kafka clients of the cluster with no path
// to propose metadata records. __consumer_offsets is partitioned by group
// and loaded only by the group's coordinator, so a gateway on another
// node would have to ask the coordinator for every describe and every
// consume. A small topic that each reader holds in full is what the
// gateway's idempotency index already is (internal/httpapi,
// idempotency.go), and this follows it: created by the first Store that
// opens, read to its end before use, followed after, written with
// acks=all by an idempotent producer.
//
// # Records
//
// Keys are binary, so that any group id Kafka allows (almost any string:
// separators, NUL, non-UTF-8) and any topic name encode without escaping,
// and no two (kind, group, topic, partition) share a key:
//
//	key    uint8 version (1)
//	       uint8 kind (1 policy, 2 pause)
//	       uint16 length, group (1 to 32767 bytes: a Kafka string's limit)
//	       uint16 length, topic (a valid Kafka topic name, 1 to 249 bytes)
//	       int32 partition (>= 0; pause only)
//	       nothing after: the kind decides the length exactly
//	value  JSON, {"version": 1, ...}:
//	       policy  "action" ("pause", "dlq"), "max_attempts" (1 to 1000),
//	               "dlq_topic" (omitted: <topic>.dlq)
//	       pause   "offset" (>= 0), "reason" (at most 1024 bytes of UTF-8),
//	               "attempts" (>= 0), "at_ms" (Unix ms), "skip" (omitted:
//	               false)
//	       null: a tombstone, removing the key's policy or pause
//
// All integers are big-endian. The names are in the key only: the value
// carries no copy that could disagree with it (or lose non-UTF-8 bytes
// to JSON).
//
// A record a Store cannot decode (another key version or kind, a value
// of another version, bad JSON, values Validate refuses, or over the size
// bounds: keys of at most maxKeyBytes, values of at most maxValueBytes) is
// skipped and counted (Store.Undecodable), never fatal: the topic is an
// ordinary one that any client may write (see Limits). A value that does
// not decode under a key that does removes that key's entry, as a
// tombstone would: the newest record of a key is its truth, and a Store
// opened after compaction sees only that record, so a following Store
// must not keep the older one either.
//
// # Consistency
//
// Every Store applies the topic's records in log order, so two Stores
// that have read to the same offset hold the same policies and pauses,
// and concurrent writers of one key are ordered by the log (the later
// one wins everywhere). A write returns once its own Store has read it
// back (read your writes); another Store sees it when its follower next
// fetches, normally within milliseconds. A decision that must see every
// earlier write, from any node, calls Sync first (Resume does).
//
// # Limits
//
// Topic is not one of metadata.InternalTopics (that list is exact and
// lives in internal/metadata): any client can write, reconfigure or
// delete it. Open repairs a cleanup.policy other than "compact" (a topic
// auto-created by a stray produce would otherwise delete policies after
// retention.ms); a deleted topic makes writes fail and Sync time out
// until a Store is opened again. The replication factor is decided when
// the topic is created (min(3, brokers then registered)): a Store opened
// while a cluster is still forming makes it under-replicated for good, so
// open the first one when it is first needed (a poison request), as the
// idempotency index is created by the first idempotent produce.
//
// Sync and read-your-writes count offsets read, so they rely on the last
// record below the high watermark being readable. Compaction keeps it
// (it never touches the active segment, which under cleanup.policy=compact
// always holds the newest batch); DeleteRecords up to the end is handled
// (start == end: nothing left to read), and transaction markers are read
// and counted. The Store reads uncommitted, so a transactional writer's
// aborted records would be applied like any: its own writes are not
// transactional, and no other writer has a reason to be.
package poison
