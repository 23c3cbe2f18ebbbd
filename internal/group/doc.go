// Package group is Fjord's classic consumer group coordinator: Kafka's
// GroupCoordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete) over the partitions of __consumer_offsets
// this node leads.
// It knows nothing of the wire: internal/kafkaserver decodes requests into
// this package's types and answers its kerr errors by code.
//
// # Placement and ownership
//
// A group lives on partition PartitionFor(group, OffsetsPartitions) of
// __consumer_offsets, and its coordinator is that partition's leader. The
// node calls Load when this node becomes leader (the partition is replayed
// into memory; meanwhile requests answer COORDINATOR_LOAD_IN_PROGRESS) and
// Unload when it stops (groups dropped, parked requests answered
// NOT_COORDINATOR). Requests for a partition not loaded answer
// NOT_COORDINATOR.
//
// # The state machine
//
// Each group is in one of Kafka's five states:
//
//	+-------+ member joins  +--------------------+ all rejoined, or  +---------------------+
//	| Empty |-------------->| PreparingRebalance |------------------>| CompletingRebalance |
//	+-------+               +--------------------+ rebalance timeout +---------------------+
//	    ^                     |    ^         ^                          |             |
//	    |  join completes     |    |         |  member joins, leaves,   |             |
//	    +---------------------+    |         +--------------------------+             |
//	       with nobody left        |            new protocols, session                 | leader's
//	                               |            ends                                   | assignment
//	                               |                        +--------+                 | written
//	                               +------------------------| Stable |<----------------+
//	                                 member joins, leaves,  +--------+
//	                                 new protocols, session ends,
//	                                 leader rejoins
//
// Dead is entered from any state when the group is removed (its offsets
// all expired while Empty, DeleteGroups, Unload, Close). A removed group
// is gone from the coordinator; clients see Dead only as DescribeGroup's
// answer for a group the coordinator does not have.
//
// PreparingRebalance collects JoinGroups. It ends when every member has
// rejoined (and every id handed out with MEMBER_ID_REQUIRED has been used)
// or when the largest member rebalance timeout passes (KIP-62), which
// drops the dynamic members that did not rejoin; a group coming from Empty
// first waits InitialRebalanceDelay, extended while members keep arriving
// but never past the rebalance timeout (KIP-134). Completing the join
// starts the next generation, chooses the protocol (each member votes for
// its most preferred protocol among those all support), answers every
// parked join (the leader's with all members' metadata) and moves to
// CompletingRebalance, or to Empty if nobody is left.
//
// CompletingRebalance parks followers' SyncGroups until the leader's
// arrives; its assignments are written as the group's metadata record, and
// once that is committed every member gets its assignment and the group is
// Stable. Members that do not sync within the rebalance timeout are
// dropped and the group rebalances.
//
// Stable answers heartbeats, syncs (with the current assignment) and a
// follower's JoinGroup with unchanged protocols (the current generation,
// no rebalance). The leader's JoinGroup, a JoinGroup with new protocols
// (every second round of a KIP-429 cooperative rebalance), a new member,
// a LeaveGroup or an expired session start a rebalance.
//
// Static members (KIP-345) carry a group.instance.id. One that restarts
// rejoins with no member id and takes its old id's place, assignment and
// generation without a rebalance; the old id is fenced at once
// (FENCED_INSTANCE_ID). At a rebalance timeout static members are not
// dropped; only their session timeout removes them.
//
// # What is persisted, when
//
// Everything goes through Log.Append to the group's partition, in Kafka's
// own record schemas (see records.go), and nothing a client is told about
// is changed in memory before its records are committed:
//
//   - the group's metadata record (members, their subscriptions and
//     assignments, generation, leader, protocol): when the leader's
//     SyncGroup completes a rebalance (before any member is answered),
//     when a static member takes over its old id in a Stable group (before
//     it is answered), and when the group becomes Empty (in the
//     background; a failure there is only logged, as in Kafka);
//   - an offset record per partition on each commit, before it is answered
//     or visible to fetches; a transactional commit's records go in a
//     batch of its producer (Log.AppendTxn), below;
//   - tombstones for offsets and metadata on DeleteGroups, OffsetDelete and
//     retention, before anything is removed from memory.
//
// Groups in PreparingRebalance and CompletingRebalance are not persisted:
// a new coordinator loads the last Stable or Empty generation, and members
// mid-rebalance rejoin it.
//
// Retention (KIP-211): every RetentionCheckInterval, an Empty group's
// offsets expire OffsetsRetention after it became Empty (a group that
// never had members: after each offset's commit), and a Stable consumer
// group's offsets of topics no member subscribes to expire after their
// commit. An Empty group left without offsets is removed, its metadata
// tombstoned. Offsets committed with a retention time (OffsetCommit
// v2-v4) expire at their own expiry instead, as Kafka's did before
// KIP-211, and a v1 commit timestamp is the commit time retention counts
// from.
//
// # Transactional offset commits
//
// A transactional producer commits a group's offsets inside its
// transaction (TxnOffsetCommit, KIP-98; with the consumer's generation and
// member id since KIP-447). CommitTxnOffsets writes the ordinary offset
// records in a transactional batch of the producer; once that is
// committed the offsets are pending for the producer id: kept in the
// group, not answered by FetchOffsets, and a requireStable fetch
// (OffsetFetch v7+) answers UNSTABLE_OFFSET_COMMIT for their partitions,
// as it does while the batch is being written. The transaction
// coordinator ends the transaction with a marker on every partition it
// touched, the group's __consumer_offsets partition among them; once that
// marker is committed the node calls CompleteTxn, and the producer's
// pending offsets in every group of the partition become committed (a
// commit) or are dropped (an abort).
//
// A partition may hold a committed offset and a pending one; when the
// transaction commits, the offset whose record is later in the log wins:
// "txn commit, plain commit, marker" keeps the plain commit, "plain
// commit, txn commit, marker" the transaction's (Kafka compares the
// records' log offsets). Memory orders records by offset.position: the
// log offset for replayed records, and for appends since, a per-group
// counter that starts past the replay's end and counts each append's
// outcome as it is applied; the write turn applies one group's appends
// in the order they reached the log, so the two orders agree. A marker
// that lands while one of its producer's appends to the group is in
// flight (a coordinator-ended transaction; a client ends its own only
// after its commits are answered) is applied to that append's offsets
// when it is answered: the epoch check on the partition means the batch
// landed before the marker.
//
// Replay does the same from the log: transactional records pend per
// producer (a tombstone in such a batch drops that producer's pending
// offset), a marker completes its producer's pending offsets in every
// group with the same rule, using each record's offset, and offsets
// still pending at the end stay pending in the loaded groups (a group
// known only by them is loaded, Empty) for their marker to come through
// CompleteTxn. A marker reported while the partition is loading is
// queued and applied after the replay, before the groups are published;
// the replay may have read it already, and completing a producer with
// nothing pending does nothing.
//
// Pending offsets never expire and keep their group: it is not dropped as
// unused or removed by retention, and a committed offset of a partition
// with a pending one does not expire either (its tombstone would drop
// the pending one). DeleteGroups of an Empty group and OffsetDelete
// proceed as in Kafka: they tombstone every partition with an offset
// committed or pending, and a (non-transactional) tombstone drops the
// partition's pending offsets of every producer, in memory and at replay
// alike, so a later commit marker brings nothing back. Unload drops
// pending offsets with their groups; the next coordinator replays them.
//
// # Concurrency
//
// There is no coordinator goroutine. Who runs what:
//
//   - a request runs on its caller's goroutine (the connection's), under
//     its group's lock; JoinGroup and SyncGroup park on a channel that is
//     answered under that lock by whichever goroutine completes them;
//   - timers (sessions, rebalance and sync timeouts, the initial delay,
//     MEMBER_ID_REQUIRED ids, the retention check) run on Clock callbacks;
//   - group metadata writes whose outcome must not depend on the request
//     that caused them (the leader's SyncGroup, a static member's
//     takeover, becoming Empty) run on background goroutines;
//   - Load's replay runs on its caller's goroutine with no lock held;
//   - CompleteTxn runs on its caller's goroutine (the WriteTxnMarkers
//     handler's): it reads the partition's producer index under
//     Coordinator.mu, releases it, then takes each group's mutex in turn;
//     it never waits for a write turn.
//
// Close waits for the timers and background goroutines it admitted.
//
// Lock order: a group's write turn, then its mutex (group.mu), then the
// coordinator's map lock (Coordinator.mu, which also guards each
// partition's producer index and queued markers); never the reverse.
// group.mu is never held across Log.Append or Log.AppendTxn, so a group's
// heartbeats and timers carry on while its writes wait for replicas; the
// write turn, held from before a write's records are built until its
// outcome is applied, keeps one group's appends in the order its state
// changed (and gives offset.position its order).
//
// # Where Fjord differs from Kafka
//
//   - Protocol votes that tie go to the lexically smallest protocol name
//     (Kafka: hash-map order).
//   - A parked JoinGroup or SyncGroup superseded by another from the same
//     member is answered REBALANCE_IN_PROGRESS, and a member removed while
//     parked in SyncGroup is answered UNKNOWN_MEMBER_ID; Kafka leaves both
//     unanswered until the client times out.
//   - A static member presenting an id handed out with MEMBER_ID_REQUIRED
//     gets UNKNOWN_MEMBER_ID (Kafka fails an internal assertion).
//   - Deleting a group, expiring offsets and deleting offsets wait for
//     their tombstones to be committed (acks=all) before changing memory;
//     Kafka appends them with acks=0 and removes at once. A group a failed
//     request created and left empty is dropped at once rather than at the
//     next retention check.
//   - A commit's or delete's append is bounded by CommitTimeout (and
//     Close), not by its request: a client that goes away does not cancel
//     a write that may still land, so memory always learns its outcome.
//     A write that times out answers REQUEST_TIMED_OUT and may still
//     land: the usual ambiguity of a timed-out write.
//   - Describing an unknown group answers Dead with no error for every
//     version; DescribeGroups v6's GROUP_ID_NOT_FOUND is the server's to
//     derive from that.
//   - Transactional offset commits follow Kafka's old GroupCoordinator
//     for the request's checks (so a TxnOffsetCommit naming a member of
//     a group this coordinator does not know answers UNKNOWN_MEMBER_ID;
//     Kafka's current coordinator answers ILLEGAL_GENERATION) and its
//     current OffsetMetadataManager for the life of pending offsets
//     (tombstones drop them; retention waits for them), where the old
//     coordinator dropped them from memory on DeleteGroups and OffsetDelete
//     but brought them back at the next load.
//   - A marker landing while its producer's commit to the group is being
//     written completes that commit's offsets as soon as the write is
//     answered; Kafka's old coordinator dropped them (and failed an
//     assertion for a commit marker).
//   - requireStable answers UNSTABLE_OFFSET_COMMIT only for transactional
//     commits: a plain commit is invisible until written, so the fetch
//     answers the offset committed before it (Kafka's old coordinator
//     answered UNSTABLE_OFFSET_COMMIT while a plain commit was in flight).
//   - A retention time of 0 ms (OffsetCommit v2-v4) counts as none: Kafka
//     would expire the offsets at the next check. No known client sends
//     it.
package group
