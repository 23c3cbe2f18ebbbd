package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/controlplane/forward"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Reporting offline replicas (DESIGN.md section 25): the replica
// manager tells the node when a partition's log fails
// (replica.Options.LogFailed), and the node reports the replica to the
// active controller (controlplane.Client.ReportOfflineReplicas, Fjord's
// own request when the controller is elsewhere), which takes this
// broker out of the partition's ISR and leadership.
//
// One goroutine does it, so reports never pile up: woken by each
// failure, it reports every replica the replica manager has offline
// (replica.Manager.OfflineReplicas) that this node's image does not
// show offline yet, for this node's registration, and that the image
// still puts on this node, and asks again, with backoff, until the image
// shows them all (a forwarded report returns once this node's image has
// its commit, so a success shows them at once). Reports are idempotent:
// the controller passes over what it has marked already. What is lost:
// nothing the image would not show; a node that stops before its report
// commits needs none, since its restart recovers the logs and its new
// registration clears the marks.

// Backoff between a report's attempts.
const (
	offlineRetryMin = 100 * time.Millisecond
	offlineRetryMax = 5 * time.Second
)

// offlineReporter reports this node's offline replicas. Threads: note
// may be called from any goroutine; run is the one goroutine that
// reports; close ends it and waits.
type offlineReporter struct {
	client interface {
		ReportOfflineReplicas(ctx context.Context, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) error
	}
	images interface{ Image() *metadata.Image }
	// replicas lists the offline replicas (the replica manager), set by
	// start.
	replicas interface {
		OfflineReplicas() []metadata.TopicIDPartition
	}
	nodeID      int32
	incarnation metadata.UUID
	log         *slog.Logger
	// retryMin and retryMax: offlineRetryMin and offlineRetryMax, shorter
	// in tests.
	retryMin, retryMax time.Duration

	kick chan struct{} // capacity 1: kicks while one is pending merge
	// ctx ends at close, ending the report in flight and the waits.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns; nil before start
}

func newOfflineReporter(client interface {
	ReportOfflineReplicas(ctx context.Context, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) error
}, images interface{ Image() *metadata.Image }, log *slog.Logger, nodeID int32, incarnation metadata.UUID) *offlineReporter {
	r := &offlineReporter{client: client, images: images, log: log, nodeID: nodeID, incarnation: incarnation,
		retryMin: offlineRetryMin, retryMax: offlineRetryMax, kick: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// note is replica.Options.LogFailed: a log of a partition this node
// hosts failed. It does not block.
func (r *offlineReporter) note(topic string, id metadata.UUID, partition int32) {
	select {
	case r.kick <- struct{}{}:
	default: // a report is due already; it will include this one
	}
}

// start starts the reporting goroutine over replicas' offline list.
func (r *offlineReporter) start(replicas interface {
	OfflineReplicas() []metadata.TopicIDPartition
}) {
	r.replicas = replicas
	r.done = make(chan struct{})
	go r.run()
}

// close ends the reporting and waits for its goroutine.
func (r *offlineReporter) close() {
	r.cancel()
	if r.done != nil {
		<-r.done
	}
}

// pending returns the offline replicas to report and this node's broker
// epoch; registered is false while the image has no registration of
// this process (a report needs its epoch).
func (r *offlineReporter) pending() (parts []metadata.TopicIDPartition, epoch int64, registered bool) {
	img := r.images.Image()
	if img == nil {
		return nil, 0, false
	}
	b, ok := img.Brokers[r.nodeID]
	if !ok || b.IncarnationID != r.incarnation {
		return nil, 0, false
	}
	for _, tp := range r.replicas.OfflineReplicas() {
		t, ok := img.TopicsByID[tp.TopicID]
		if !ok {
			continue // deleted: nothing to move
		}
		p, ok := t.Partition(tp.Partition)
		if !ok || !slices.Contains(p.Replicas, r.nodeID) || img.ReplicaOffline(r.nodeID, tp.TopicID, tp.Partition) {
			continue // moved off this node, or reported
		}
		parts = append(parts, tp)
	}
	return parts, b.Epoch, true
}

func (r *offlineReporter) run() {
	defer close(r.done)
	backoff := r.retryMin
	// reported is what the last successful report named: found pending
	// again at once, the image disagrees with the answer (it should
	// not), and the next report waits its backoff rather than spin.
	var reported []metadata.TopicIDPartition
	for attempt := 1; ; {
		parts, epoch, registered := r.pending()
		if registered && len(parts) > 0 && slices.Equal(parts, reported) {
			reported = nil
			if !clock.Sleep(r.ctx, backoff) {
				return
			}
			backoff = min(backoff*2, r.retryMax)
			continue
		}
		reported = nil
		if registered && len(parts) == 0 {
			// Nothing to report: wait for the next failure.
			attempt, backoff = 1, r.retryMin
			select {
			case <-r.kick: // a log failed
			case <-r.ctx.Done(): // the node is closing
				return
			}
			continue
		}
		if registered {
			err := r.report(epoch, parts)
			switch {
			case err == nil:
				r.log.Info("reported offline replicas to the controller", "replicas", len(parts), "broker_epoch", epoch)
				attempt, reported = 1, parts
				continue // the image shows them now: look again at once
			case r.ctx.Err() != nil:
				return
			case !errors.Is(err, controlplane.ErrNotController) && !errors.Is(err, controlplane.ErrTimedOut):
				r.log.Warn("could not report offline replicas to the controller; will ask again",
					"replicas", len(parts), "broker_epoch", epoch, "attempt", attempt, "err", err)
			}
			attempt++
		}
		// Not registered yet (its image comes), or the report failed.
		if !clock.Sleep(r.ctx, backoff) {
			return
		}
		backoff = min(backoff*2, r.retryMax)
	}
}

// report sends parts in requests of at most
// controlplane.MaxReportedOfflineReplicas, each bounded by the
// forwarding client's wait.
func (r *offlineReporter) report(epoch int64, parts []metadata.TopicIDPartition) error {
	for chunk := range slices.Chunk(parts, controlplane.MaxReportedOfflineReplicas) {
		ctx, cancel := context.WithTimeout(r.ctx, forward.DefaultMaxWait)
		err := r.client.ReportOfflineReplicas(ctx, r.nodeID, epoch, chunk)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
