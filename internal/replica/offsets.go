package replica

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// TimestampEarliestLocal is ListOffsets' EARLIEST_LOCAL_TIMESTAMP (-4,
// KIP-405): the first offset on local disk. Without tiered storage that
// is the log start offset.
const TimestampEarliestLocal int64 = -4

// lastFetchable is the offset a consumer at the isolation level may read
// up to (exclusive): Kafka's lastFetchableOffset.
func (p *Partition) lastFetchable(isolation Isolation) int64 {
	switch isolation {
	case IsolationLogEnd:
		return p.log.LogEndOffset()
	case IsolationTxnCommitted:
		return p.log.LastStableOffset()
	default:
		return p.log.HighWatermark()
	}
}

// ListOffset answers ListOffsets for one partition; see
// kafkaserver.Replicas. Offsets found by timestamp (and the max-timestamp
// record) at or past what the isolation level may read are not
// returned, as Kafka does: a consumer must not be told of records it
// cannot fetch yet.
func (m *Manager) ListOffset(topic string, partition int32, currentLeaderEpoch int32, timestamp int64, isolation Isolation) (OffsetAndTimestamp, error) {
	none := OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return none, err
	}
	leaderEpoch, err := p.checkLeader(currentLeaderEpoch)
	if err != nil {
		return none, err
	}
	if err := p.checkLease(); err != nil {
		return none, err
	}
	epochOf := func(offset int64) int32 {
		if e, ok := p.log.LeaderEpochs().EpochForOffset(offset); ok {
			return e
		}
		return -1
	}
	bound := p.lastFetchable(isolation)
	// KIP-207: a new leader's high watermark starts where it was as a
	// follower, which may be below what the previous leader answered;
	// until it reaches the start of this leader epoch, answers that
	// depend on it are OFFSET_NOT_AVAILABLE (retriable) rather than an
	// offset that moved backwards. The earliest offset does not depend
	// on it. Replica reads (IsolationLogEnd) are bounded by the log end.
	notAvailable := func() error {
		if isolation == IsolationLogEnd {
			return nil
		}
		if start := p.epochStart(); start > p.log.HighWatermark() {
			return fmt.Errorf("%w: %s: the high watermark %d has not reached the start %d of leader epoch %d yet",
				ErrOffsetNotAvailable, p, p.log.HighWatermark(), start, leaderEpoch)
		}
		return nil
	}
	switch {
	case timestamp == TimestampEarliest || timestamp == TimestampEarliestLocal:
		start := p.log.LogStartOffset()
		return OffsetAndTimestamp{Offset: start, Timestamp: -1, LeaderEpoch: epochOf(start)}, nil
	case timestamp == TimestampLatest:
		if err := notAvailable(); err != nil {
			return none, err
		}
		// Kafka answers the current leader epoch here, not the epoch of
		// the last record: the offset is where the next one will go.
		return OffsetAndTimestamp{Offset: bound, Timestamp: -1, LeaderEpoch: leaderEpoch}, nil
	case timestamp == TimestampMaxTimestamp:
		offset, ts, found, err := p.log.MaxTimestamp()
		if err != nil {
			return none, fromLog(err)
		}
		if !found || offset >= bound {
			return none, nil
		}
		if err := notAvailable(); err != nil {
			return none, err
		}
		return OffsetAndTimestamp{Offset: offset, Timestamp: ts, LeaderEpoch: epochOf(offset)}, nil
	case timestamp < 0:
		// Other special values (LATEST_TIERED_TIMESTAMP, -5) ask about
		// tiered storage, which Fjord does not have: nothing is tiered.
		return none, nil
	default:
		offset, ts, found, err := p.log.OffsetForTimestamp(timestamp)
		if err != nil {
			return none, fromLog(err)
		}
		if !found || offset >= bound {
			return none, nil
		}
		if err := notAvailable(); err != nil {
			return none, err
		}
		return OffsetAndTimestamp{Offset: offset, Timestamp: ts, LeaderEpoch: epochOf(offset)}, nil
	}
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch; see
// kafkaserver.Replicas.
func (m *Manager) EndOffsetForEpoch(topic string, partition int32, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return -1, -1, err
	}
	if _, err := p.checkLeader(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	if err := p.checkLease(); err != nil {
		return -1, -1, err
	}
	e, end := p.log.LeaderEpochs().EndOffsetFor(epoch, p.log.LogEndOffset())
	return e, end, nil
}

// LogEnd reports how far this node's own replica of topic-partition
// reaches, whatever its role: the latest leader epoch in its history (-1
// for none) and its log end offset. The active controller asks every
// live replica before an unclean election, to elect the one that lost
// the least (see controller's unclean.go).
func (m *Manager) LogEnd(topic string, partition int32) (epoch int32, end int64, err error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return -1, -1, err
	}
	epoch, ok := p.log.LeaderEpochs().LatestEpoch()
	if !ok {
		epoch = -1
	}
	return epoch, p.log.LogEndOffset(), nil
}

// DeleteRecords moves the log start offset; see kafkaserver.Replicas.
// On one node the new start is final once the log has it; with
// followers, Kafka waits (up to timeout) for every replica's low
// watermark to pass it, which is why the signature carries ctx and
// timeout. They are unused until then.
func (m *Manager) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64, timeout time.Duration) (int64, error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return -1, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(-1); err != nil {
		return -1, err
	}
	if err := p.checkLease(); err != nil {
		return -1, err
	}
	hw := p.log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: delete records before %d, %s high watermark is %d", ErrOffsetOutOfRange, offset, p, hw)
	}
	start, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		return -1, fromLog(err)
	}
	return start, nil
}

// LogDirs describes the data directory and every partition log in it;
// see kafkaserver.Replicas. Total and usable bytes are -1 when the file
// system cannot say.
func (m *Manager) LogDirs() (string, int64, int64, []LogDirInfo) {
	total, usable := int64(-1), int64(-1)
	if m.opts.DataDir != "" {
		if t, u, err := DiskSpace(m.opts.DataDir); err == nil {
			total, usable = t, u
		} else {
			m.log.Warn("statfs of the data directory", "dir", m.opts.DataDir, "err", err)
		}
	}
	logs := m.opts.Storage.Logs()
	parts := make([]LogDirInfo, 0, len(logs))
	for tp, l := range logs {
		parts = append(parts, LogDirInfo{
			Topic:     tp.Topic,
			Partition: tp.Partition,
			Size:      l.Size(),
			// Kafka's offset lag of a current replica: how far its log
			// end is behind the high watermark, 0 on a leader.
			OffsetLag: max(l.HighWatermark()-l.LogEndOffset(), 0),
		})
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	return m.opts.DataDir, total, usable, parts
}

// Positions is where offsets stand in a partition this node leads,
// against its high watermark (DescribePositions: consumer lag in bytes
// and seconds, retention gaps).
type Positions struct {
	LogStartOffset   int64
	HighWatermark    int64
	LastStableOffset int64
	// LogEndOffset is read after MigratedTo: when MigratedTo is set, no
	// client append can follow, so the log end is final (see
	// Partition.mu.migratedTo).
	LogEndOffset int64
	// MigratedTo is the topic's migration destination once it has cut
	// over and this leader refuses produces, else "".
	MigratedTo string
	// Backlogs holds one entry per offset asked, in order.
	Backlogs []storage.Backlog
}

// DescribePositions answers where offsets stand in a partition this node
// leads: the log start, high watermark and last stable offset, and for
// each offset what a consumer there has yet to consume up to the high
// watermark.
func (m *Manager) DescribePositions(topic string, partition int32, offsets []int64) (Positions, error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return Positions{}, err
	}
	if _, err := p.checkLeader(-1); err != nil {
		return Positions{}, err
	}
	p.mu.RLock()
	migratedTo := p.mu.migratedTo
	p.mu.RUnlock()
	leo := p.log.LogEndOffset()
	// The high watermark first, the log start after: a retention pass in
	// between can only make the start newer, never past the bound.
	hw := p.log.HighWatermark()
	backlogs, err := p.log.Backlogs(offsets, hw)
	if err != nil {
		return Positions{}, fromLog(err)
	}
	return Positions{
		LogStartOffset:   p.log.LogStartOffset(),
		HighWatermark:    hw,
		LastStableOffset: p.log.LastStableOffset(),
		LogEndOffset:     leo,
		MigratedTo:       migratedTo,
		Backlogs:         backlogs,
	}, nil
}
