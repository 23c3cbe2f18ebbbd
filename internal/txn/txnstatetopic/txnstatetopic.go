// Package txnstatetopic is the transaction coordinator's side of the
// node: __transaction_state as a topic (Spec, what FindCoordinator
// creates on the first transactional id's lookup), the coordinator's Log
// over the replica manager, the Loader that hands the coordinator the
// partitions this node comes to lead, from each metadata image, and the
// MarkerSender that carries its WriteTxnMarkers to the leaders of a
// transaction's partitions (markers.go). The coordinator itself (package
// txn) knows none of these: it sees a Log, a MarkerSender and Load/Unload
// calls, which its unit tests fake. node only wires them.
//
// It mirrors internal/group/offsetstopic, the group coordinator's
// equivalent, rather than sharing code with it: the two loaders differ in
// the coordinator they drive (txn's Load takes the leader epoch as its
// coordinator epoch; group's takes none) and in what they log, and a
// shared "follow the leadership of an internal topic" type would be one
// more abstraction for about a hundred lines.
package txnstatetopic

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/coordload"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/txn"
)

// Kafka's defaults for the transaction state topic
// (transaction.state.log.num.partitions,
// transaction.state.log.replication.factor).
const (
	DefaultPartitions        = 50
	DefaultReplicationFactor = 3
	// minInsyncReplicas is transaction.state.log.min.isr.
	minInsyncReplicas = 2
	// segmentBytes is transaction.state.log.segment.bytes: small
	// segments so the cleaner can compact the topic often.
	segmentBytes = "104857600"
)

// Spec is the CreateTopic of __transaction_state with partitions
// partitions, replicated rf times (at most the brokers there are:
// FindCoordinator passes what the cluster allows), with Kafka's topic
// settings (C§2.1): compacted (an id's latest record is its state),
// min.insync.replicas 2, segment.bytes 100 MiB, and unclean leader
// election off whatever the cluster's default, since an unclean leader
// would forget committed transitions and let a fenced producer back in.
//
// min.insync.replicas is written as an override, as Kafka writes it, so
// a topic of two replicas takes its acks=all writes only with both
// (Fjord's own default for two replicas is 1), but never above rf: a
// cluster of one broker gets a topic of one replica, whose writes would
// otherwise always fail NOT_ENOUGH_REPLICAS. An rf of 0 or less (the
// controller's default replication) leaves it to the default for the
// replication the controller picks. Kafka's compression.type=uncompressed
// is not set: Fjord's only compression.type is "producer", and Log
// writes uncompressed batches.
func Spec(partitions int32, rf int16) controlplane.CreateTopic {
	configs := map[string]string{
		"cleanup.policy":                 "compact",
		"segment.bytes":                  segmentBytes,
		"unclean.leader.election.enable": "false",
	}
	if rf > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(min(minInsyncReplicas, int(rf)))
	}
	return controlplane.CreateTopic{
		Name:              metadata.TransactionStateTopic,
		NumPartitions:     partitions,
		ReplicationFactor: rf,
		Configs:           configs,
	}
}

// defaultAppendTimeout bounds the wait for the replicas of an Append
// whose ctx has no deadline: Kafka's request.timeout.ms. The coordinator
// gives every append a deadline (the transaction's timeout, as Kafka's
// TransactionStateManager waits), and that is the bound then.
const defaultAppendTimeout = 30 * time.Second

// Log is txn.Log over the replica manager: one batch per Append
// (uncompressed, not idempotent), acks=all, so a transition is
// acknowledged only once it is durable. A nil Value is written as a null
// value, a tombstone. The replica manager's errors are its sentinels,
// kerr values (a log failure is KAFKA_STORAGE_ERROR, a batch too large
// MESSAGE_TOO_LARGE, this node not leading NOT_LEADER_OR_FOLLOWER, the
// replicas too slow REQUEST_TIMED_OUT), which the coordinator maps to its
// answers as Kafka's TransactionStateManager does; they pass as they
// are.
type Log struct {
	replicas *replica.Manager
	now      func() time.Time
}

// NewLog is the coordinator's Log over replicas, stamping batches with
// now's time.
func NewLog(replicas *replica.Manager, now func() time.Time) Log {
	return Log{replicas: replicas, now: now}
}

func (l Log) Append(ctx context.Context, p int32, recs []txn.Record) error {
	batch, err := buildBatch(recs, l.now().UnixMilli())
	if err != nil || batch == nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// The caller has given up (its partition unloaded, or its
		// deadline passed): a record written now would be in the log
		// with the caller told it failed.
		return err
	}
	timeout := defaultAppendTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	_, err = l.replicas.Append(ctx, metadata.TransactionStateTopic, p, batch, replica.AcksAll, timeout)
	return err
}

// buildBatch is recs as one batch stamped ts; nil when there are none
// (nothing to write, so nothing can fail).
func buildBatch(recs []txn.Record, ts int64) ([]byte, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	b := record.NewBuilder(record.DefaultBatchOptions())
	for _, r := range recs {
		// record.Builder writes a nil value as null: the tombstone.
		b.Add(r.Key, r.Value, nil, ts)
	}
	return b.Build()
}

// scanner is the replica manager's ScanLog, a seam for the Loader's
// tests.
type scanner interface {
	ScanLog(ctx context.Context, topic string, partition int32, fn func(batch []byte) error) error
}

// coordinator is what the Loader drives: *txn.Coordinator.
type coordinator interface {
	Load(p int32, coordinatorEpoch int32, read func(fn func(txn.Record) error) error) error
	Unload(p int32)
}

// Loader hands the coordinator the __transaction_state partitions this
// node leads: Load when it comes to lead one (or leads it in a new
// leader epoch, which becomes the coordinator epoch its markers carry),
// Unload when it stops (internal/coordload follows the images).
type Loader struct {
	*coordload.Loader
}

// NewLoader returns the Loader of coord's partitions, replaying them from
// replicas' logs.
func NewLoader(coord *txn.Coordinator, replicas *replica.Manager, nodeID int32, log *slog.Logger) *Loader {
	return newLoader(coord, replicas, nodeID, log)
}

func newLoader(coord coordinator, logs scanner, nodeID int32, log *slog.Logger) *Loader {
	return &Loader{coordload.New(coordload.Config{
		Topic: metadata.TransactionStateTopic, NodeID: nodeID, Name: "transaction coordinator", Log: log,
		Load: func(ctx context.Context, p, epoch int32) (int, error) {
			records := 0
			err := coord.Load(p, epoch, func(fn func(txn.Record) error) error {
				return logs.ScanLog(ctx, metadata.TransactionStateTopic, p, func(batch []byte) error {
					n, err := replayBatch(batch, fn)
					records += n
					return err
				})
			})
			return records, err
		},
		// The node is closing, or a newer leadership of the partition
		// started its own load. Any other failure leaves the
		// partition's ids answering NOT_COORDINATOR until the next image
		// tries again.
		Quiet: func(err error) bool {
			return errors.Is(err, context.Canceled) || errors.Is(err, txn.ErrLoadSuperseded) || errors.Is(err, txn.ErrClosed)
		},
		Unload: coord.Unload,
	})}
}

// replayBatch passes each record of batch to fn as a txn.Record and
// returns how many it passed. Control batches are skipped: nothing
// writes transactions to __transaction_state, so it holds none, but a
// marker is no record of the coordinator's either way. The records alias
// batch, which ScanLog reuses for its next read; txn.Coordinator.Load
// does not keep them.
func replayBatch(batch []byte, fn func(txn.Record) error) (int, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	if h.IsControl() {
		return 0, nil
	}
	n := 0
	err = record.ForEachRecord(batch, func(r *record.Record) error {
		n++
		return fn(txn.Record{Key: r.Key, Value: r.Value})
	})
	return n, err
}
