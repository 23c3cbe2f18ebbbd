package replica

import (
	"fmt"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// Offline replicas: Kafka's log-dir failure handling, for one partition
// (DESIGN.md section 25). When a write or fsync of a partition's log
// fails (EIO, ENOSPC), storage marks the log failed (storage.Log.Failed):
// it refuses every write from then on, since the page cache may have
// dropped what the disk never got, and only a restart, which reopens and
// recovers the log, makes it writable again. This node's replica of the
// partition is then offline, and stays so until the process restarts:
//
//   - as a leader it answers produce, consumer fetches, follower
//     fetches, ListOffsets, OffsetForLeaderEpoch and DeleteRecords
//     KAFKA_STORAGE_ERROR (checkLeaderLocked), after the leadership
//     check, so once the image names another leader clients hear
//     NOT_LEADER_OR_FOLLOWER and go there; the requests parked on it
//     (acks=all produces waiting for the high watermark, long polls) are
//     woken and answered the same; it asks for no ISR change (isr.go);
//   - as a follower it fetches no more into the log (fetcher.go) and
//     serves no consumer;
//   - the node is told (Options.LogFailed) and reports the replica to
//     the active controller, which takes it out of the ISR and elects
//     another leader (controller/offline.go), and never lets it back
//     while this process lives.
//
// Nothing acknowledged is lost on the way: a write is acknowledged at
// acks=all only once the high watermark passes it, that is once every
// ISR member holds it (under flush.policy=ack, on disk), and the new
// leader is an ISR member. A write whose fsync failed here was never
// acknowledged (its producer heard KAFKA_STORAGE_ERROR and retries at the
// new leader, where the idempotent producer's sequence keeps it once).
//
// Threads: storage calls logFailed on the goroutine that met the error,
// holding the log's locks, so it only starts takeOffline on a goroutine
// of its own; ApplyImage calls noteFailedLogs for logs that failed before
// their partition was in the table (while it was being opened).

// logFailed is storage.Manager.OnLogFailure's handler: tp's log failed.
func (m *Manager) logFailed(tp storage.TopicPartition, err error) {
	m.goBackground(func() {
		if p := m.table.Load().partitions[tp]; p != nil {
			m.takeOffline(p, err)
		}
		// Not in the table: a stray log, or a partition ApplyImage is
		// opening, whose noteFailedLogs will find it.
	})
}

// noteFailedLogs takes offline the partitions of table whose logs failed
// and that nobody has noted yet: their logs failed while ApplyImage was
// opening them, before its table had them, or before this manager
// registered its handler with storage.
// REQUIRES: m.applyMu held, table stored.
func (m *Manager) noteFailedLogs(table *partitionTable) {
	for _, p := range table.partitions {
		if p.log.Failed() && !p.offlineNoted.Load() {
			m.goBackground(func() { m.takeOffline(p, nil) })
		}
	}
}

// takeOffline does what a replica going offline needs beyond the log's
// own refusals (see the file comment), once per partition: it wakes
// the requests parked on it, so each looks again and is answered, and
// tells the node, which reports it to the controller.
func (m *Manager) takeOffline(p *Partition, err error) {
	if !p.log.Failed() || !p.offlineNoted.CompareAndSwap(false, true) {
		return
	}
	p.notifyAll()
	p.mu.RLock()
	leader, epoch := p.mu.leader, p.mu.leaderEpoch
	p.mu.RUnlock()
	attrs := []any{"partition", p.String(), "topic_id", p.topicID.String(), "leader", leader, "leader_epoch", epoch}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	m.log.Error("replica offline: its log failed; it takes no writes, serves no reads and copies nothing until this node restarts, "+
		"and the controller is told to move its ISR place and leadership", attrs...)
	if f := m.opts.LogFailed; f != nil {
		f(p.topic, p.topicID, p.partition)
	}
}

// offlineError is KAFKA_STORAGE_ERROR while p's log is failed, else nil.
func (p *Partition) offlineError() error {
	if !p.log.Failed() {
		return nil
	}
	return fmt.Errorf("%w: %s: this replica's log failed; it is offline until the node restarts", ErrStorage, p)
}

// OfflineReplicas returns the partitions this node hosts whose log
// failed, for the node to report to the controller. A partition ApplyImage
// is opening right now shows up once its table is stored (the node is
// told then: Options.LogFailed).
func (m *Manager) OfflineReplicas() []metadata.TopicIDPartition {
	var out []metadata.TopicIDPartition
	for _, p := range m.table.Load().partitions {
		if p.log.Failed() {
			out = append(out, metadata.TopicIDPartition{TopicID: p.topicID, Partition: p.partition})
		}
	}
	return out
}
