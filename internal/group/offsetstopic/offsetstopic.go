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
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
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
	b := record.NewBuilder(record.DefaultBatchOptions())
	ts := l.now().UnixMilli()
	for _, r := range recs {
		b.Add(r.Key, r.Value, nil, ts)
	}
	batch, err := b.Build()
	if err != nil {
		return err
	}
	_, err = l.replicas.Append(ctx, metadata.ConsumerOffsetsTopic, p, batch, replica.AcksAll, offsetsAppendTimeout)
	return err
}

// Loader hands the coordinator the __consumer_offsets partitions
// this node leads: Load when it comes to lead one (or leads it in a new
// epoch), Unload when it stops. Loads run off the publisher's goroutine,
// one partition at a time each, since replaying a partition reads its
// whole log.
type Loader struct {
	coord    *group.Coordinator
	replicas *replica.Manager
	nodeID   int32
	log      *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		// epochs[p] is the leader epoch partition p was (or is being)
		// loaded in.
		epochs map[int32]int32
	}
}

func NewLoader(coord *group.Coordinator, replicas *replica.Manager, nodeID int32, log *slog.Logger) *Loader {
	g := &Loader{coord: coord, replicas: replicas, nodeID: nodeID, log: log}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.mu.epochs = make(map[int32]int32)
	return g
}

// OnImage is a metadata image subscriber, registered after the replica
// manager's: by the time it runs, the image's logs are open.
func (g *Loader) OnImage(img *metadata.Image) {
	if img == nil {
		return
	}
	led := map[int32]int32{}
	if t, ok := img.Topics[metadata.ConsumerOffsetsTopic]; ok && t != nil {
		for i := range t.Partitions {
			if p := &t.Partitions[i]; p.Leader == g.nodeID {
				led[int32(i)] = p.LeaderEpoch
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range g.mu.epochs {
		if _, ok := led[p]; !ok {
			delete(g.mu.epochs, p)
			g.coord.Unload(p)
		}
	}
	var starts []int32
	for p, epoch := range led {
		if cur, ok := g.mu.epochs[p]; ok && cur == epoch {
			continue
		}
		g.mu.epochs[p] = epoch
		starts = append(starts, p)
	}
	if len(starts) == 0 {
		return
	}
	w := &loadWave{log: g.log, start: time.Now(), pending: len(starts)}
	for _, p := range starts {
		epoch := led[p]
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			w.done(g.load(p, epoch))
		}()
	}
}

// loadWave is the loads one image started: the first image after a
// start leads all 50 partitions of __consumer_offsets at once, and an
// operator wants one line saying the coordinator is ready, not fifty.
// Each partition's load is logged at debug level, a failure as an error.
type loadWave struct {
	log   *slog.Logger
	start time.Time

	mu      sync.Mutex
	pending int // loads not yet finished
	loaded  int // loads that finished with the partition's groups served
	records int
}

// done records the end of one load of the wave; the last one logs the
// summary.
func (w *loadWave) done(records int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending--
	if ok {
		w.loaded++
		w.records += records
	}
	if w.pending == 0 && w.loaded > 0 {
		w.log.Info("group coordinator loaded partitions", "topic", metadata.ConsumerOffsetsTopic, "partitions", w.loaded,
			"records", w.records, "took", time.Since(w.start).Round(time.Millisecond))
	}
}

// load replays partition p into the coordinator and reports how many
// records it read and whether the partition's groups are now served.
func (g *Loader) load(p, epoch int32) (int, bool) {
	start := time.Now()
	records := 0
	err := g.coord.Load(p, func(fn func(group.Record) error) error {
		return g.replicas.ScanLog(g.ctx, metadata.ConsumerOffsetsTopic, p, func(batch []byte) error {
			h, err := record.ParseHeader(batch)
			if err != nil {
				return err
			}
			if h.IsControl() {
				return nil // transaction markers: none are written yet
			}
			recs, err := record.Records(batch)
			if err != nil {
				return err
			}
			for _, r := range recs {
				records++
				// The batch's buffer is reused for the next read.
				if err := fn(group.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	switch {
	case err == nil:
		g.log.Debug("group coordinator loaded partition", "partition", p, "leader_epoch", epoch,
			"records", records, "took", time.Since(start).Round(time.Millisecond))
		return records, true
	case errors.Is(err, context.Canceled), errors.Is(err, group.ErrLoadSuperseded):
		// The node is closing, or a newer leadership of the partition
		// started its own load.
	default:
		// The partition's groups answer NOT_COORDINATOR until the next
		// metadata image tries again.
		g.log.Error("group coordinator could not load partition", "partition", p, "leader_epoch", epoch, "err", err)
		g.mu.Lock()
		if g.mu.epochs[p] == epoch {
			delete(g.mu.epochs, p)
		}
		g.mu.Unlock()
	}
	return records, false
}

// Close stops loads under way and waits for them.
func (g *Loader) Close() {
	g.cancel()
	g.wg.Wait()
}
