// Package controller is the control plane, in two parts:
//
//   - the quorum member (controller.go), which every voter runs: a
//     hashicorp/raft voter whose replicated log is the metadata log
//     (package metadata), the state machine that applies it to images,
//     and the publisher that hands images to the broker side;
//   - the active controller (active.go, ops.go, plan.go,
//     alter_partition.go), which only the Raft leader runs: it validates
//     changes against the applied image (plan.go and planAlterPartition
//     are pure) and proposes their records. It starts when Raft
//     makes the node leader and a Barrier has applied everything committed
//     before, and stops when leadership is lost.
//
// Open never waits for an election. On first start (no Raft state in
// Config.Dir) the node bootstraps the metadata log with Config.Voters (by
// default itself alone) and writes its quorum id, a hash of that voter
// list (quorumid.go); the first active controller commits a random
// cluster id. Every Raft connection opens with the dialer's quorum id,
// and a node refuses one from another quorum (join.go), so a voter list
// naming an address where another cluster's controller now listens
// cannot mix the two metadata logs. Brokers register their endpoint
// (RegisterBroker) on every start. Changes are made only by the active
// controller; elsewhere, and while there is none, operations answer
// controlplane.ErrNotController, which callers retry.
//
// The broker side (kafkaserver, txn, node's wiring) reaches the controller
// only through package controlplane's interfaces, Images, Client and ISR,
// which *Controller implements; the types of its requests and its
// sentinel errors live there too, so nothing above this package imports
// the Raft library.
//
// On disk (Config.Dir, <data-dir>/metadata for a node):
//
//	raft.db      raft-boltdb/v2: the Raft log and stable store (term, vote)
//	snapshots/   raft's file snapshot store: metadata.EncodeImage documents
//	quorum.id    the quorum id, 32 hex digits and a newline (quorumid.go)
//
// One Raft entry is one metadata.EncodeBatch batch: a topic's TopicRecord,
// PartitionRecords and ConfigRecords commit together or not at all. Raft
// snapshots the image every SnapshotThreshold entries (checked every
// SnapshotInterval, or on SnapshotNow) and truncates the log behind it,
// keeping TrailingLogs entries.
//
// A change, end to end:
//
//	caller ── active controller's proposeMu (beginChange)
//	       ── validate against the applied image (plan.go, pure)
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
//	caller goroutines   serialized by the active controller's proposeMu:
//	                    validation and proposing
//	leadership goroutine (watchLeadership) the only reader of LeaderCh:
//	                    starts the active controller (after a Barrier) and
//	                    stops it; commits the cluster id of a new log
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
// leader and partition epochs 0. After that only the partition's leader
// changes its ISR, by AlterPartition, each change one step of the
// partition epoch. Topic ids are random version-4 UUIDs, never zero and
// never a live topic's.
package controller
