// Package txn hands out producer ids and is Fjord's transaction
// coordinator: Kafka's TransactionCoordinator (InitProducerId with a
// transactional id, AddPartitionsToTxn and its KIP-890 verify-only form,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, the
// transaction timeout and transactional-id expiration) over the
// partitions of __transaction_state this node leads. It knows nothing of
// the wire: internal/kafkaserver decodes requests into this package's
// types and answers its kerr errors by code (ErrorForVersion downgrades
// PRODUCER_FENCED for old request versions). The rules it is built to,
// with their Kafka sources, are docs/kafka-transactions/coordinator.md
// ("C§n" below).
//
// # Producer ids
//
// Producer ids come in blocks that the controller commits to the metadata
// log (metadata.ProducerIDsRecord), so an id handed out once is never
// handed out again, by this node or any other, even after a restart: a
// restarted node asks for a fresh block and abandons what was left of its
// old one. Abandoned ids are harmless; reused ids would let two producers
// share sequence numbers and have one's batches dropped as the other's
// duplicates. ProducerIDManager serves both idempotent producers and the
// coordinator, which takes a new id for a new transactional id and when
// an id's epoch is exhausted.
//
// # Placement and ownership
//
// A transactional id lives on partition PartitionFor(id,
// TransactionPartitions) of __transaction_state, and its coordinator is
// that partition's leader. The node calls Load(p, leaderEpoch, read) when
// this node becomes leader: the partition is replayed into memory
// (meanwhile requests answer COORDINATOR_LOAD_IN_PROGRESS) and the leader
// epoch becomes the coordinator epoch every marker carries, which is what
// lets a partition refuse a deposed coordinator's late markers. Unload(p)
// drops the partition's state and stops its markers; requests for a
// partition not loaded answer NOT_COORDINATOR.
//
// # States
//
// Kafka's eight (State), moved between as Kafka moves them:
//
//	Empty --add--> Ongoing --EndTxn commit--> PrepareCommit --markers written--> CompleteCommit
//	                  |
//	                  +--EndTxn abort, timeout, fence--> PrepareAbort --markers written--> CompleteAbort
//
//	Ongoing                              --add-------------> Ongoing (more partitions)
//	Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty (next epoch, or a new producer id)
//	Empty, CompleteCommit, CompleteAbort --add-------------> Ongoing (the next transaction)
//	Empty, CompleteCommit, CompleteAbort --V2 EndTxn abort-> PrepareAbort (of no partitions)
//	Empty, CompleteCommit, CompleteAbort --expiration------> Dead (the id is removed)
//
// Dead is only ever a pending state: expiration tombstones the id and
// removes it. PrepareEpochFence is only ever an intermediate one: a fence
// (InitProducerId of a new session while the old one's transaction is
// Ongoing, or the transaction timeout) bumps the epoch and goes straight
// on to PrepareAbort, and only the PrepareAbort is written, so a fence
// never changes memory before its record is committed (KAFKA-9666) and
// no client request can slip in between the fence and the abort (C§14).
// The legal transitions are validPrevious (state.go); a transition the
// code would make against them panics.
//
// # What is persisted, when
//
// Every change is Kafka's two-step transition (C§1.4): under the
// transaction's lock the new values are built and made its pending
// transition; the record is appended to its partition (acks=all) with
// no lock held; once committed, and only if this node still owns the
// partition at the same incarnation, the values are applied. A failed
// append clears the pending transition and changes nothing. While a
// transition is pending, every other request for the id answers
// CONCURRENT_TRANSACTIONS, which all clients retry.
//
//   - InitProducerId: an Empty record with the new epoch (or new producer
//     id), before the client is answered. A new id is in memory, at epoch
//     -1, only while its first record is being written.
//   - AddPartitionsToTxn, AddOffsetsToTxn: an Ongoing record with the
//     partitions added (none if they were all in already).
//   - EndTxn, the timeout, a fence: a PrepareCommit or PrepareAbort
//     record; the client is answered once it is committed, before any
//     marker is written. Then the markers go to every partition of the
//     transaction (MarkerSender), retried until each is written, and the
//     CompleteCommit or CompleteAbort record follows; until it is
//     committed the id answers CONCURRENT_TRANSACTIONS. A new leader that
//     loads a Prepare* record sends every marker again.
//   - Expiration: a tombstone (null value) for an id idle in Empty or
//     Complete* for TransactionalIDExpiration.
//
// Records are Kafka's (kmsg TxnMetadataKey v0, TxnMetadataValue v1, see
// records.go), with the previous and next producer ids Kafka 4 defines
// as tagged fields and, in a tagged field of Fjord's own, the last
// producer epoch, which Kafka keeps only in memory. So a KIP-360 retry
// and a retry across a producer id rotation are recognised after a
// coordinator failover too, and a Prepare* record of an overflowing
// Transactions V2 transaction completes with its new producer id
// (KAFKA-20310).
//
// # Transactions V1 and V2
//
// The path is chosen per request, as Kafka does (C§11.1): EndTxn v5 and
// the AddPartitionsToTxn v4+ a partition leader sends for Produce v12+
// are Transactions V2 (KIP-890 part 2); everything older is V0/V1, which
// librdkafka, Sarama and older Java clients only ever use. The version is
// stored with the transaction and sent with its markers.
//
//   - V1: a producer keeps its epoch across transactions; EndTxn writes
//     the Prepare record at the transaction's epoch; a retried EndTxn of a
//     completed transaction is answered from its state.
//   - V2: every EndTxn bumps the epoch (the Prepare record carries E+1,
//     and so do the markers), so anything late from a finished
//     transaction carries a stale epoch; the response carries the new
//     producer id and epoch. A retried EndTxn (epoch E-1 after the bump)
//     is answered from the state with the current id and epoch. At an
//     exhausted epoch the Prepare record also carries a new producer id
//     (NextProducerID), which the Complete record adopts at epoch 0. An
//     abort is legal from Empty and Complete* (an implicit add that
//     registered partitions whose data never landed).
//
// Aborts the coordinator starts itself (timeout, fence) use the cluster's
// finalized version, Config.TransactionVersion, whatever the client used
// (C§7.5): one epoch bump either way.
//
// # Concurrency
//
// There is no coordinator goroutine. Who runs what:
//
//   - a request runs on its caller's goroutine, under its id's lock
//     (transactionMetadata.mu) while it decides, and with no lock while
//     its record is appended;
//   - the timeout and expiration checks run on Clock callbacks, and
//     append from there;
//   - each transaction being completed has one goroutine that sends its
//     markers, waits out its backoffs on the Clock and appends its
//     Complete record; it ends when the partition is unloaded;
//   - Load's replay runs on its caller's goroutine with no lock held.
//
// Lock order: a transaction's mu, then Coordinator.mu; never the reverse.
// Neither is held across Log.Append, MarkerSender.WriteTxnMarkers or a
// producer id fetch. Close waits for the marker goroutines and timer
// callbacks.
//
// # Where Fjord differs from Kafka
//
//   - The last producer epoch and the previous and next producer ids are
//     persisted (above).
//   - A marker a partition refuses with INVALID_PRODUCER_EPOCH counts as
//     written (the partition has moved past this producer epoch, so it
//     holds no transaction of it open); Kafka gives up on the whole
//     transaction and leaves it Prepare* until the next failover
//     (KAFKA-19999). Every other failure, TRANSACTION_COORDINATOR_FENCED
//     included, is retried with backoff until the partition is unloaded:
//     nothing leaves a Prepare* transaction with nobody to finish it.
//   - A new id whose first record fails to append is forgotten again
//     (Kafka keeps it at epoch -1, KAFKA-14880).
//   - A record of state Dead or PrepareEpochFence, which Kafka never
//     writes, fails the load, as does a value of an unknown version
//     (Kafka installs what it read so far). Keys of an unknown version
//     are skipped, as Kafka does.
//   - Values are always written as v1, whatever the finalized
//     transaction.version (Kafka writes v0 at TV0): v0 has no tagged
//     fields for what Fjord persists, and every Kafka since 3.5 reads v1.
//   - InitProducerId at an exhausted epoch answers a new producer id also
//     to a retry (the last epoch expected), so a client never holds an
//     epoch it cannot bump; with a stale expected epoch it answers
//     PRODUCER_FENCED (Kafka: an internal error).
//   - A new producer id could not be fetched: COORDINATOR_LOAD_IN_PROGRESS,
//     Kafka's answer when its block is used up.
//   - AddPartitionsToTxn with no partitions writes nothing.
//   - Markers are sent per transaction; batching the markers of many
//     transactions into one request per leader is the MarkerSender's
//     business.
package txn
