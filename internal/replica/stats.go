package replica

// ReplicationStats is this node's replication at one moment, for the
// node's metrics (read at each scrape; nothing is kept for it).
type ReplicationStats struct {
	// Led is the partitions this node leads; UnderReplicated those of
	// them whose ISR is smaller than their replicas; UnderMinISR those
	// whose ISR is smaller than min.insync.replicas (acks=all refused).
	Led, UnderReplicated, UnderMinISR int
	// Following is the partitions this node copies from another leader.
	Following int
	// ISRShrinks and ISRExpands count the ISR changes this node's
	// requests committed as a leader, since it started.
	ISRShrinks, ISRExpands int64
	// FetchedBytes and FetchedBatches count what this node's fetchers
	// appended from leaders, since it started.
	FetchedBytes, FetchedBatches int64
	// ThrottledBytes is the part of FetchedBytes copied for replicas a
	// reassignment is adding here, the ones the reassignment throttle
	// (follower.replication.throttled.rate) holds back; ThrottleRate is
	// that rate now, 0 for none.
	ThrottledBytes, ThrottleRate int64
	// Truncations counts the times a follower's log was cut back to
	// where it stops agreeing with its leader's (a divergent tail, KIP-279),
	// and TruncatedRecords the offsets those cuts removed, since it
	// started.
	Truncations, TruncatedRecords int64
	// Offline is the partitions whose log on this node failed: offline
	// until the process restarts (offline.go), and counted neither as
	// led nor as followed.
	Offline int
}

// FollowerLag is what a leader knows of one follower of one partition.
type FollowerLag struct {
	Topic     string
	Partition int32
	Follower  int32
	// Records is the leader's log end offset less the follower's last
	// fetch offset; -1 when the follower has not fetched in this term.
	Records int64
}

// ReplicationStats reports the node's replication; lag, when not nil, is
// called with every follower of every partition this node leads.
func (m *Manager) ReplicationStats(lag func(FollowerLag)) ReplicationStats {
	s := ReplicationStats{
		ISRShrinks: m.stats.isrShrinks.Load(), ISRExpands: m.stats.isrExpands.Load(),
		FetchedBytes: m.stats.fetchedBytes.Load(), FetchedBatches: m.stats.fetchedBatches.Load(),
		ThrottledBytes: m.stats.throttledBytes.Load(), ThrottleRate: m.throttle.currentRate(),
		Truncations: m.stats.truncations.Load(), TruncatedRecords: m.stats.truncatedRecords.Load(),
	}
	for _, p := range m.table.Load().partitions {
		p.mu.RLock()
		leader, gone := p.mu.leader, p.mu.gone
		replicas, isr, minInsync := p.mu.replicas, p.mu.isr, p.mu.minInsync
		p.mu.RUnlock()
		switch {
		case gone != nil:
			continue
		case p.log.Failed():
			s.Offline++
			continue
		case leader < 0:
			continue
		case leader != m.opts.NodeID:
			s.Following++
			continue
		}
		s.Led++
		if len(isr) < len(replicas) {
			s.UnderReplicated++
		}
		if len(isr) < minInsync {
			s.UnderMinISR++
		}
		if lag == nil {
			continue
		}
		leo := p.log.LogEndOffset()
		for _, id := range replicas {
			if id == m.opts.NodeID {
				continue
			}
			l := FollowerLag{Topic: p.topic, Partition: p.partition, Follower: id, Records: -1}
			if o := p.followers.offset(id); o.known {
				l.Records = max(leo-o.offset, 0)
			}
			lag(l)
		}
	}
	return s
}
