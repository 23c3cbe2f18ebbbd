// Package offsetstopic is the group coordinator's side of the node:
// __consumer_offsets as a topic (Spec, what FindCoordinator creates on
// the first group lookup), the coordinator's Log over the replica manager,
// and the Loader that hands the coordinator the partitions this node comes
// to lead, from each metadata image. The coordinator itself (package
// group) knows none of these: it sees a Log and Load/Unload calls, which
// its unit tests fake. node only wires them.
package offsetstopic

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/coordload"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
)

// Kafka's defaults for the offsets topic (offsets.topic.num.partitions,
// offsets.topic.replication.factor).
const (
	DefaultPartitions        = 50
	DefaultReplicationFactor = 3
	// segmentBytes is offsets.topic.segment.bytes: small segments so the
	// cleaner can compact the topic often.
	segmentBytes = "104857600"
)

// Spec is the CreateTopic of __consumer_offsets with partitions
// partitions, replicated rf times (at most the brokers there are:
// FindCoordinator passes what the cluster allows), compacted.
func Spec(partitions int32, rf int16) controlplane.CreateTopic {
	return controlplane.CreateTopic{
		Name:              metadata.ConsumerOffsetsTopic,
		NumPartitions:     partitions,
		ReplicationFactor: rf,
		Configs: map[string]string{
			"cleanup.policy": "compact",
			"segment.bytes":  segmentBytes,
		},
	}
}

// offsetsAppendTimeout bounds one write of the coordinator, as Kafka's
// offsets.commit.timeout.ms does.
const offsetsAppendTimeout = 5 * time.Second

// Log is group.Log over the replica manager: one batch per Append,
// acks=all, so a commit is acknowledged only once it is durable. The
// replica manager's errors are its sentinels, kerr values (a log failure
// is KAFKA_STORAGE_ERROR, a batch too large MESSAGE_TOO_LARGE, a log
// closed under the write NOT_LEADER_OR_FOLLOWER), which the coordinator
// maps to its answers as Kafka's GroupMetadataManager does (an assignment
// too large to write is UNKNOWN_SERVER_ERROR for SyncGroup,
// INVALID_COMMIT_OFFSET_SIZE for a commit); they pass as they are.
type Log struct {
	replicas *replica.Manager
	now      func() time.Time
}

// NewLog is the coordinator's Log over replicas, stamping batches with
// now's time.
func NewLog(replicas *replica.Manager, now func() time.Time) Log {
	return Log{replicas: replicas, now: now}
}

func (l Log) Append(ctx context.Context, p int32, recs []group.Record) error {
	batch, err := l.batch(record.DefaultBatchOptions(), recs)
	if err != nil {
		return err
	}
	_, err = l.replicas.Append(ctx, metadata.ConsumerOffsetsTopic, p, batch, replica.AcksAll, offsetsAppendTimeout)
	return err
}

// AppendTxn writes recs as a transactional batch of the producer, as
// Kafka's GroupMetadataManager writes a TxnOffsetCommit: base sequence 0,
// since the partition checks a coordinator's batches for the producer's
// epoch only (replica.Manager.AppendAsCoordinator).
func (l Log) AppendTxn(ctx context.Context, p int32, producerID int64, epoch int16, guard group.TxnGuard, recs []group.Record) error {
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = producerID, epoch, 0, true
	batch, err := l.batch(opts, recs)
	if err != nil {
		return err
	}
	_, err = l.replicas.AppendAsCoordinator(ctx, metadata.ConsumerOffsetsTopic, p, batch, offsetsAppendTimeout, guard.Verify, guard.Guard)
	return err
}

// batch is recs as one batch stamped with now.
func (l Log) batch(opts record.BatchOptions, recs []group.Record) ([]byte, error) {
	b := record.NewBuilder(opts)
	ts := l.now().UnixMilli()
	for _, r := range recs {
		b.Add(r.Key, r.Value, nil, ts)
	}
	return b.Build()
}

// Loader hands the coordinator the __consumer_offsets partitions this
// node leads: Load when it comes to lead one (or leads it in a new
// epoch), Unload when it stops (internal/coordload follows the images).
type Loader struct {
	*coordload.Loader
}

func NewLoader(coord *group.Coordinator, replicas *replica.Manager, nodeID int32, log *slog.Logger) *Loader {
	return &Loader{coordload.New(coordload.Config{
		Topic: metadata.ConsumerOffsetsTopic, NodeID: nodeID, Name: "group coordinator", Log: log,
		Load: func(ctx context.Context, p, _ int32) (int, error) {
			records := 0
			err := coord.Load(p, func(fn func(group.Record) error) error {
				return replicas.ScanLog(ctx, metadata.ConsumerOffsetsTopic, p, func(batch []byte) error {
					n, err := replayBatch(batch, fn)
					records += n
					return err
				})
			})
			return records, err
		},
		// The node is closing, or a newer leadership of the partition
		// started its own load.
		Quiet: func(err error) bool {
			return errors.Is(err, context.Canceled) || errors.Is(err, group.ErrLoadSuperseded)
		},
		Unload: coord.Unload,
	})}
}

// replayBatch passes each record of batch to fn and returns how many it
// passed, each with its offset and, in a transaction's batch, its
// producer. A transaction marker is passed as a Control record (no key
// or value); any other control batch (one the cleaner emptied of its
// marker) is no record of the coordinator's.
func replayBatch(batch []byte, fn func(group.Record) error) (int, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	recs, err := record.Records(batch)
	if err != nil {
		return 0, err
	}
	if h.IsControl() {
		if len(recs) == 0 {
			return 0, nil
		}
		m, ok := producerstate.ParseMarker(&recs[0])
		if !ok {
			return 0, nil
		}
		return 1, fn(group.Record{Offset: recs[0].Offset, Control: true,
			ProducerID: h.ProducerID, Commit: m.Commit})
	}
	for i, r := range recs {
		// The batch's buffer is reused for the next read.
		rec := group.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value),
			Offset: r.Offset}
		if h.IsTransactional() {
			rec.Transactional, rec.ProducerID = true, h.ProducerID
		}
		if err := fn(rec); err != nil {
			return i + 1, err
		}
	}
	return len(recs), nil
}
