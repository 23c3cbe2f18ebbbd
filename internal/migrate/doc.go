// Package migrate moves a topic to a new topic with more partitions
// while keeping each key's order: `fjord topic migrate SRC DST
// --partitions N [--cutover]` (issue 18; DESIGN.md section 24).
//
// Adding partitions to a topic in place changes murmur2(key) mod count
// for most keys, so a key's later records land in another partition
// than its earlier ones and a consumer may see them out of order. A
// migration copies instead: every record of the source goes to the
// destination partition its key hashes to among N, in source order, and
// producers and consumer groups move over at one cutover.
//
// # Steps
//
// A migration is a sequence of steps (Step), each recorded in StateTopic
// before its work starts, and each safe to do again, so a run killed at
// any point is finished by the next run of the same command:
//
//  1. creating: the destination is created with the source's
//     replication factor and config overrides, closed to producers
//     (metadata.MigratingFromConfig: produces are answered
//     LEADER_NOT_AVAILABLE, which clients retry, except the copy's).
//  2. copying: a read_committed reader of the source and a
//     transactional producer (metadata.MigrationTransactionalID) copy a
//     chunk per transaction, the chunk's checkpoint in the same
//     transaction: after a crash the next run starts from the last
//     committed checkpoint and the destination holds every record
//     exactly once. Without --cutover the run stops once the copy has
//     caught up; run it again to catch up again.
//  3. cutover: the source is sealed (metadata.MigratedToConfig): its
//     leaders refuse produces (INVALID_TOPIC_EXCEPTION, naming the
//     destination), under the same lock as their appends, and say so in
//     DescribePositions v1 with their final log end; the copy drains
//     the rest. Producers are refused from here until step 4 ends: the
//     pause is the drain, since the copy had caught up before.
//  4. opening: the destination's MigratingFromConfig is removed and
//     the producers waiting on it get through.
//  5. groups: every consumer group with offsets on the source and none
//     on the destination gets destination offsets (Translate) once it
//     is empty (Kafka lets offsets be committed from outside a group
//     only then): its consumers read the source to its end (final once
//     sealed), commit, stop, and start again on the destination.
//  6. done.
//
// # State
//
// StateTopic ("__fjord_migrations") is a compacted topic with one
// partition, written only in the migrations' transactions. Keys:
//
//	'm' NUL source                the Migration (JSON): its step
//	'c' NUL source NUL %016d seq  a Checkpoint (JSON): per source
//	                              partition the next offset to copy,
//	                              per destination partition the offset
//	                              after the copy's last record
//
// Each checkpoint has its own key, so compaction keeps them all: they
// are the offset map that Translate moves groups with.
//
// # Limits
//
//   - Per-key order holds when each key was in one source partition
//     (the source was produced with key hashing and never grown with
//     remapped keys); records without a key keep their source
//     partition's order (source partition mod N).
//   - A group is moved at chunk granularity: it may see again up to one
//     chunk's records per destination partition (at-least-once).
//   - A transaction left open on the source at the seal holds the
//     cutover until it ends (its producer can no longer write, so its
//     coordinator aborts it after transaction.timeout.ms).
//   - Records the source's retention deletes before they are copied are
//     not copied.
package migrate
