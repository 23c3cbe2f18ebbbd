// Package replica is the replica manager: the partitions this node hosts,
// built from metadata images, and the data-plane requests on them
// (produce, fetch, list offsets, offset for leader epoch, delete records,
// log dirs). It knows nothing of the wire format; kafkaserver calls it
// through the kafkaserver.Replicas interface. It is the error boundary of
// the data path: it turns storage's and record's errors into its own
// sentinels (errors.go), each a kerr value, so the layers above map
// errors to codes without knowing the storage layer.
//
// # Partitions
//
// A Partition holds its storage.Log and the replication state from the
// latest image: leader, leader epoch, replicas, ISR, min.insync.replicas.
// This node leads a partition when the image says Leader == NodeID.
// A partition led elsewhere answers NOT_LEADER_OR_FOLLOWER to clients
// and is copied from its leader by this node's fetcher for that leader
// (fetcher.go). As a leader, a partition keeps what it knows of each
// follower in its current term (followers.go) and asks the controller
// for ISR changes (isr.go). DESIGN.md section 19 has the protocol.
//
// # The high watermark rule
//
// The high watermark is the offset every ISR member (and every member an
// AlterPartition in flight adds) has reached, where a member's offset
// counts only what it has fsynced when the topic's flush.policy is ack
// (a follower's fetch offset is: it flushes before it fetches again),
// and everything appended under interval (whose durability is
// replication's). It does not move while the ISR is smaller than
// min.insync.replicas. On one node the ISR is the node, so the high
// watermark is the flushed log end offset under ack and the log end
// offset under interval. It never moves back. highWatermark is the pure
// rule; Partition.maybeAdvanceHighWatermarkLocked applies it, stores the
// result in the log (Log.SetHighWatermark, which storage checkpoints) and
// wakes the waiters. Advances are serialized on Partition.wait, so they
// are monotonic and a waiter that registered before re-checking cannot
// miss one.
//
// acks=0 answers after the append (the flush runs in the background
// under flush.policy=ack, so the records become visible); acks=1 after
// the append, and under ack after the group-committed flush; acks=all
// after the high watermark passes the batch (a delayed produce, bounded
// by the request timeout, and answered NOT_LEADER_OR_FOLLOWER sooner if
// leadership moves or the leader lease lapses), refused up front with
// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas.
//
// # Threads
//
//   - The metadata publisher (the controller's Subscribe callback) calls
//     ApplyImage, one image at a time, in order. It alone creates,
//     updates and retires Partitions and creates and deletes logs.
//   - Connection goroutines (kafkaserver, many at once, several per
//     connection with pipelining) call Append, Fetch, ListOffset,
//     EndOffsetForEpoch, DeleteRecords and LogDirs. They look partitions
//     up in a copy-on-write table without locks. Appends to one
//     partition serialize in storage (the log's appender lock); their
//     flushes share fsyncs (storage's group commit). A parked Fetch or
//     acks=all Append blocks its own goroutine on a channel, woken by
//     whichever goroutine moves the high watermark (or appends, for
//     log-end fetches), by ApplyImage/Close when leadership changes or
//     the partition goes, or by LeaseLapsed when the leader lease lapses;
//     never by a timer loop.
//   - The node's heartbeat goroutine calls LeaseLapsed when it sees the
//     leader lease lapse (lease.go): it counts the lapse and wakes the
//     produces and consumers' fetches parked on the partitions this
//     node leads, taking each one's mu (shared), then its wait.
//   - One background goroutine per partition at most flushes acks=0
//     appends under flush.policy=ack; Close waits for them.
//   - storage.Manager's own goroutines flush flush.policy=interval logs,
//     apply retention and write checkpoints (including the high
//     watermark this package stores in the log).
//   - One fetcher goroutine per leader this node follows (fetcher.go),
//     the only writer of the logs it copies; ApplyImage gives it its
//     partitions, Close stops it.
//   - One ISR loop (isr.go, when Options.ISR is set), and one goroutine
//     per AlterPartition in flight (at most one per partition).
//   - storage calls the log-failure handler on whichever goroutine met
//     the failure, holding the log's locks; it only starts a goroutine
//     of the manager's that takes the replica offline (offline.go:
//     wakes the partition's waiters, tells Options.LogFailed).
//
// # Lock order
//
//	Manager.applyMu -> Partition.mu -> Partition.followers -> Partition.wait -> storage.Log locks
//
// never the reverse: storage never calls up into this package, and no
// code here takes Partition.mu while holding Partition.wait. Appenders
// hold Partition.mu shared across Log.Append (so the epoch they stamp is
// current; Kafka's leaderIsrUpdateLock) but never across Log.Flush or a
// wait. ApplyImage takes Partition.mu exclusively, only for in-memory
// changes and Log.SetConfig; it deletes logs after releasing it.
package replica
