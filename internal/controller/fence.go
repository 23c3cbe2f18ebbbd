package controller

import (
	"slices"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Fencing and elections, the decisions (pure: an image in, records out;
// sessions.go decides when). The rules are Kafka's KRaft controller's:
//
//   - Fencing a broker (its session lapsed) takes it out of every ISR it
//     is in and, for each partition it led, elects the first replica, in
//     replica order, that is in the remaining ISR and not fenced, with
//     the leader epoch + 1. A broker that is the last member of an ISR
//     stays in it, and the partition has no leader (-1, epoch + 1) until
//     that broker returns: it alone is known to hold every committed
//     record, so electing anyone else could lose acknowledged writes
//     (unless the topic allows it: unclean.go).
//   - A new registration of a broker (a new process) is a fence of the
//     old one, in the same batch: its log may have lost what was not
//     fsynced, so it must not keep an ISR place or a leadership the old
//     process held.
//   - Unfencing a broker (it heartbeats and has applied the metadata log
//     up to its registration) makes it the leader, epoch + 1, of every
//     partition that has none and keeps it in its ISR.
//   - A controlled shutdown (the broker's process asked to stop) moves
//     its leaderships and ISR places as a fence does, without fencing
//     it: it keeps serving, so the new leaders' followers, itself
//     included until it exits, lose nothing in flight. Until it registers
//     again it is never elected and never joins an ISR (Broker.Active).
//
// Every changed partition gets its partition epoch + 1; the broker's
// Fence/Unfence record comes first in the batch, so Apply sees each
// election made with the broker's new state.

// planFence returns the batch that fences broker id (at its current
// epoch), or nil when it is not registered or already fenced.
func planFence(img *metadata.Image, id int32) []metadata.Record {
	b, ok := img.Brokers[id]
	if !ok || b.Fenced {
		return nil
	}
	recs := []metadata.Record{metadata.FenceBrokerRecord{NodeID: id, Epoch: b.Epoch}}
	return append(recs, removeFromPartitions(img, id)...)
}

// planControlledShutdown returns the batch that puts broker id in
// controlled shutdown, or nil when it is not registered, fenced (it leads
// nothing and is in no ISR it could leave) or in controlled shutdown
// already.
func planControlledShutdown(img *metadata.Image, id int32) []metadata.Record {
	b, ok := img.Brokers[id]
	if !ok || b.Fenced || b.ShuttingDown || img.MetadataVersion < metadata.ControlledShutdownMetadataVersion {
		return nil
	}
	recs := []metadata.Record{metadata.ControlledShutdownRecord{NodeID: id, Epoch: b.Epoch}}
	return append(recs, removeFromPartitions(img, id)...)
}

// leadsAny reports whether broker id leads a partition in img.
func leadsAny(img *metadata.Image, id int32) bool {
	for _, t := range img.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Leader == id {
				return true
			}
		}
	}
	return false
}

// removeFromPartitions returns the PartitionRecords that take broker id
// out of every ISR and leadership it holds (see the file comment),
// electing from what remains. It treats id as fenced whatever the image
// says.
func removeFromPartitions(img *metadata.Image, id int32) []metadata.Record {
	var recs []metadata.Record
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if !slices.Contains(p.ISR, id) && p.Leader != id {
				continue
			}
			if rec, changed := removeReplica(img, t, int32(i), id); changed {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// removeReplica returns the PartitionRecord that takes broker id out of
// partition i of t: out of its ISR unless it is the last member, and, if
// it leads (or nobody does), another leader elected from what remains
// (-1 when none can be), leader epoch + 1 when the leader changes.
// changed is false when that changes nothing. A fence applies it to
// every partition of the broker, an offline replica (offline.go) to one.
func removeReplica(img *metadata.Image, t *metadata.Topic, i int32, id int32) (rec metadata.PartitionRecord, changed bool) {
	p := &t.Partitions[i]
	isr := p.ISR
	if len(isr) > 1 || !slices.Contains(isr, id) {
		isr = slices.DeleteFunc(slices.Clone(isr), func(m int32) bool { return m == id })
	}
	leader, epoch := p.Leader, p.LeaderEpoch
	if leader == id || leader == -1 {
		leader = electLeader(img, t.ID, i, p.Replicas, isr, id)
		if leader != p.Leader {
			epoch++
		}
	}
	rec = metadata.PartitionRecord{
		TopicID: t.ID, Partition: i, Replicas: p.Replicas, ISR: isr,
		Leader: leader, LeaderEpoch: epoch, PartitionEpoch: p.PartitionEpoch,
	}
	if slices.Equal(isr, p.ISR) && leader == p.Leader {
		return rec, false
	}
	rec.PartitionEpoch++
	return rec, true
}

// electLeader returns the first of replicas (the preferred order) that is
// in isr, is not except and may lead partition of the topic with id
// (eligibleLeader); -1 when there is none.
func electLeader(img *metadata.Image, id metadata.UUID, partition int32, replicas, isr []int32, except int32) int32 {
	for _, r := range replicas {
		if r != except && slices.Contains(isr, r) && eligibleLeader(img, id, partition, r) {
			return r
		}
	}
	return -1
}

// eligibleLeader reports whether broker may lead partition of the topic
// with id, or join its ISR: it is active in img (neither fenced nor in
// controlled shutdown) and its replica of the partition is not offline
// (its log failed: offline.go).
func eligibleLeader(img *metadata.Image, id metadata.UUID, partition int32, broker int32) bool {
	return activeBroker(img, broker) && !img.ReplicaOffline(broker, id, partition)
}

// planUnfence returns the batch that unfences broker id and elects it
// where a partition has no leader and id is in its ISR, or nil when it
// is not registered, not fenced, or in controlled shutdown (it is on its
// way out: its next registration starts afresh).
func planUnfence(img *metadata.Image, id int32) []metadata.Record {
	b, ok := img.Brokers[id]
	if !ok || !b.Fenced || b.ShuttingDown {
		return nil
	}
	recs := []metadata.Record{metadata.UnfenceBrokerRecord{NodeID: id, Epoch: b.Epoch}}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != -1 || !slices.Contains(p.ISR, id) || img.ReplicaOffline(id, t.ID, int32(i)) {
				// Led, not its to lead, or its replica's log failed
				// (it stays the last ISR member, leaderless, until a
				// new process of it registers: offline.go).
				continue
			}
			recs = append(recs, metadata.PartitionRecord{
				TopicID: t.ID, Partition: int32(i), Replicas: p.Replicas, ISR: p.ISR,
				Leader: id, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1,
			})
		}
	}
	return recs
}

// planRegistration returns the batch that registers b: the registration
// itself, preceded, when it replaces a process that is not fenced yet,
// by the partition changes that fence the old one (its ISR places and
// leaderships end with it).
func planRegistration(img *metadata.Image, b metadata.BrokerRecord) []metadata.Record {
	old, ok := img.Brokers[b.NodeID]
	if !ok || old.Fenced || img.MetadataVersion < metadata.FencingMetadataVersion ||
		(!old.IncarnationID.IsZero() && old.IncarnationID == b.IncarnationID) {
		// New, already fenced, a log without fencing, or a retry of the
		// same process's registration (which keeps what it holds: it is
		// the same process, and its log the same).
		return []metadata.Record{b}
	}
	return append(removeFromPartitions(img, b.NodeID), b)
}
