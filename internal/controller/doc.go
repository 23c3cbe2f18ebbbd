// Package controller is the control plane: a hashicorp/raft voter whose
// replicated log is the metadata log (package metadata), the state machine
// that applies it to images, and the operations that propose changes.
//
// One voter by default: on first start (no Raft state in Config.Dir) the
// node bootstraps a cluster with itself as the only voter, elects itself,
// and commits a random cluster id; on every start it (re-)registers its
// broker endpoint. Changes are proposed only on the leader (the active
// controller); elsewhere operations answer controlplane.ErrNotController.
//
// The broker side (kafkaserver, txn, node's wiring) reaches the controller
// only through package controlplane's interfaces, Images and Client,
// which *Controller implements; the types of its requests and its
// sentinel errors live there too, so nothing above this package imports
// the Raft library.
//
// On disk (Config.Dir, <data-dir>/metadata for a node):
//
//	raft.db      raft-boltdb/v2: the Raft log and stable store (term, vote)
//	snapshots/   raft's file snapshot store: metadata.EncodeImage documents
//
// One Raft entry is one metadata.EncodeBatch batch: a topic's TopicRecord,
// PartitionRecords and ConfigRecords commit together or not at all. Raft
// snapshots the image every SnapshotThreshold entries (checked every
// SnapshotInterval, or on SnapshotNow) and truncates the log behind it,
// keeping TrailingLogs entries.
//
// A change, end to end:
//
//	caller ── proposeMu ── validate against the applied image (plan.go, pure)
//	       ── raft.Apply(batch) ── commit (fsync in raft.db)
//	       ── FSM goroutine: Image.Apply -> applied image -> publisher queue
//	       ── publisher goroutine: every subscriber sees the image -> Image()
//	       ── caller returns
//
// so a change is visible to the broker side (the replica manager has
// opened a new topic's logs) before CreateTopics answers: create, delete
// and config changes are linearizable.
//
// Threads (who owns what):
//
//	caller goroutines   serialized by proposeMu: validation and proposing
//	raft goroutines     the Raft log, elections, replication, snapshots
//	FSM goroutine       (raft's) fsm.applied: applies entries, restores
//	                    snapshots; never blocks on subscribers
//	snapshot persist    (raft's) encodes an immutable image to snapshots/
//	publisher goroutine delivers images in order to subscribers; owns the
//	                    published image and published index
//
// Lock order: publisher.deliverMu -> publisher.mu (the only locks ever
// held together). A proposer holds proposeMu while it waits for the
// publisher to deliver its image, so a subscriber callback (run under
// deliverMu) must never propose or subscribe: that would wait on itself.
//
// Placement: replicas of partition p are RF consecutive registered brokers
// (sorted by id) from (hash(topic) + p) mod brokers, so replicas are
// distinct and leaders rotate; leader = first replica, ISR = replicas,
// leader epoch 0. Topic ids are random version-4 UUIDs, never zero and
// never a live topic's.
package controller
