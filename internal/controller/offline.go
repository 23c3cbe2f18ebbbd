package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Offline replicas: Kafka's log-dir failure handling, per replica
// (DESIGN.md section 25). A write or fsync of a partition's log that
// fails (EIO, ENOSPC) leaves the log refusing writes on that node until
// its process is replaced, which reopens and recovers it. Its node tells
// the active controller (ReportOfflineReplicas, sent until its own image
// shows the answer), and the controller commits, in one batch:
//
//   - an OfflineReplicaRecord per partition, naming the broker at its
//     registration's epoch (a report from a process since replaced is
//     STALE_BROKER_EPOCH: the new process has recovered the log);
//   - for each, the PartitionRecord a fence would write for that one
//     partition (removeReplica): the broker out of the ISR, and where it
//     led, the first other ISR member in replica order that is eligible
//     elected, leader epoch + 1. As with a fence, the last ISR member
//     stays in the ISR and the partition has no leader: it alone is known
//     to hold every committed record, and its process's restart (which
//     clears the mark) brings them back; a topic that allows unclean
//     elections elects from the other replicas meanwhile (unclean.go).
//
// From then on, until the broker registers as another process, it is
// never elected for the partition and never let back into its ISR:
// eligibleLeader (every election: fence.go, elect.go's preferred and
// requested ones, reassign.go's completion and cancel, unclean.go),
// planUnfence, and AlterPartition's expansion (INELIGIBLE_REPLICA) all
// ask img.ReplicaOffline, and metadata.Image.Apply refuses a record that
// breaks it.
//
// Kafka's KRaft brokers report failed log directories in their
// heartbeats (BrokerHeartbeat's OfflineLogDirs, KIP-858), and its
// controller moves the partitions of those directories the same way
// (ReplicationControlManager's handling of offline directories). Fjord
// has one directory per node, so a directory failing would take every
// replica at once; the unit that fails here is one partition's log, and
// a request of its own carries them (see ReportOfflineReplicas).

// ReportOfflineReplicas implements controlplane.Client (see its doc): it
// commits planOfflineReplicas's batch, and nothing when the image has
// every replica named offline already, or none it can act on.
func (c *Controller) ReportOfflineReplicas(ctx context.Context, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) error {
	if err := checkOfflineReport(partitions); err != nil {
		return err
	}
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	defer a.proposeMu.Unlock()
	recs, err := planOfflineReplicas(img, broker, brokerEpoch, partitions)
	if err != nil || len(recs) == 0 {
		return err
	}
	start := c.clock.Now()
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return err
	}
	marked := 0
	for _, r := range recs {
		if _, ok := r.(metadata.OfflineReplicaRecord); ok {
			marked++
		}
	}
	c.stats.offlineReplicas.Add(int64(marked))
	elected, leaderless := c.countElections(img, recs)
	c.log.Warn("replicas offline: their logs failed on the broker, which leaves their ISRs and leaderships until it restarts",
		"broker", broker, "broker_epoch", brokerEpoch, "replicas", marked, "leaders_elected", elected,
		"partitions_without_leader", leaderless, "commit_time", c.clock.Now().Sub(start))
	return nil
}

// checkOfflineReport refuses a report that no Fjord node sends: too many
// partitions for one request, a zero topic id, a negative partition.
func checkOfflineReport(partitions []metadata.TopicIDPartition) error {
	if len(partitions) > controlplane.MaxReportedOfflineReplicas {
		return fmt.Errorf("%w: %d offline replicas in one report (at most %d)",
			controlplane.ErrInvalidRequest, len(partitions), controlplane.MaxReportedOfflineReplicas)
	}
	for _, p := range partitions {
		if p.TopicID.IsZero() || p.Partition < 0 {
			return fmt.Errorf("%w: offline replica of topic id %s partition %d", controlplane.ErrInvalidRequest, p.TopicID, p.Partition)
		}
	}
	return nil
}

// planOfflineReplicas returns the batch that marks broker's replicas of
// partitions offline (see the file comment): the OfflineReplicaRecords
// first, so that Apply checks every election of the batch against them,
// then the partitions' changes. A partition named twice, marked already,
// of a topic the image does not have (deleted since the log failed), or
// that the broker is not a replica of (reassigned away) is passed over:
// nothing is left to do for it, and a node's report may race any of
// those. The broker must be registered at brokerEpoch.
func planOfflineReplicas(img *metadata.Image, broker int32, brokerEpoch int64, partitions []metadata.TopicIDPartition) ([]metadata.Record, error) {
	if img.MetadataVersion < metadata.OfflineReplicasMetadataVersion {
		return nil, fmt.Errorf("%w: offline replicas need metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.OfflineReplicasMetadataVersion, img.MetadataVersion)
	}
	b, ok := img.Brokers[broker]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: broker %d", controlplane.ErrBrokerNotRegistered, broker)
	case b.Epoch != brokerEpoch:
		return nil, fmt.Errorf("%w: broker %d reports offline replicas at epoch %d, its registration's is %d",
			controlplane.ErrStaleBrokerEpoch, broker, brokerEpoch, b.Epoch)
	}
	var marks, changes []metadata.Record
	seen := make(map[metadata.TopicIDPartition]bool, len(partitions))
	for _, tp := range partitions {
		if seen[tp] {
			continue
		}
		seen[tp] = true
		t, ok := img.TopicsByID[tp.TopicID]
		if !ok {
			continue
		}
		p, ok := t.Partition(tp.Partition)
		if !ok || !slices.Contains(p.Replicas, broker) || img.ReplicaOffline(broker, tp.TopicID, tp.Partition) {
			continue
		}
		marks = append(marks, metadata.OfflineReplicaRecord{NodeID: broker, Epoch: brokerEpoch, TopicID: tp.TopicID, Partition: tp.Partition})
		if rec, changed := removeReplica(img, t, tp.Partition, broker); changed {
			changes = append(changes, rec)
		}
	}
	return append(marks, changes...), nil
}
