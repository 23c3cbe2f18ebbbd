package grouplag

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Committed visits the committed offsets of the groups a node
// coordinates, one group at a time, until visit returns false
// (group.Coordinator.CommittedOffsets, adapted).
type Committed func(visit func(group string, offsets map[TopicPartition]int64) bool)

// Row is one group's lag on one partition in a Snapshot.
type Row struct {
	Group     string
	Topic     string
	Partition int32
	Committed int64
	// LogStartOffset and HighWatermark are the leader's when it answered.
	LogStartOffset int64
	HighWatermark  int64
	Lag
}

// Snapshot is the lag of every group a node coordinates, on every
// partition with a committed offset whose leader answered.
type Snapshot struct {
	// At is when the refresh that made it began.
	At time.Time
	// Took is how long that refresh took.
	Took time.Duration
	// Rows are sorted by group, topic and partition.
	Rows []Row
	// Unknown counts the (group, partition) pairs left out because the
	// partition's leader could not be asked or refused. Offsets committed
	// for partitions that do not exist (a deleted topic's) are left out
	// and not counted.
	Unknown int
}

// Refresh intervals: at least MinInterval between refreshes, and at
// least IntervalFactor times the last refresh's duration, so that on a
// node coordinating a great many groups refreshing never takes more than
// a fraction of its time.
const (
	MinInterval    = time.Second
	IntervalFactor = 4
	// askTimeout bounds one refresh's requests: a leader that does not
	// answer in time leaves its partitions unknown until the next.
	askTimeout = 5 * time.Second
)

// Refresher keeps a Snapshot of the lag of the groups a node
// coordinates, fresh to within a refresh interval.
type Refresher struct {
	committed Committed
	leaderOf  func() LeaderOf // the current image's leaders
	ask       Asker
	now       func() time.Time
	log       *slog.Logger

	snap atomic.Pointer[Snapshot]
}

// NewRefresher returns a Refresher over committed, asking the leaders
// leaderOf names through ask. leaderOf is called once per refresh, so it
// can read the latest metadata image.
func NewRefresher(committed Committed, leaderOf func() LeaderOf, ask Asker, now func() time.Time, log *slog.Logger) *Refresher {
	r := &Refresher{committed: committed, leaderOf: leaderOf, ask: ask, now: now, log: log}
	r.snap.Store(&Snapshot{})
	return r
}

// Snapshot returns the latest snapshot (empty before the first refresh
// ends). It is shared: do not change it.
func (r *Refresher) Snapshot() *Snapshot { return r.snap.Load() }

// Run refreshes until ctx ends.
func (r *Refresher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := r.Refresh(ctx)
		t.Reset(max(MinInterval, IntervalFactor*s.Took))
	}
}

// Refresh asks the leaders once, stores the snapshot and returns it.
func (r *Refresher) Refresh(ctx context.Context) *Snapshot {
	start := r.now()
	type commit struct {
		group  string
		tp     TopicPartition
		offset int64
	}
	var commits []commit
	// Each distinct offset once per partition: groups often stand at the
	// same place.
	distinct := map[TopicPartition]map[int64]struct{}{}
	r.committed(func(g string, offs map[TopicPartition]int64) bool {
		for tp, o := range offs {
			if o < 0 {
				continue // no position (a commit of -1): no lag to tell
			}
			commits = append(commits, commit{g, tp, o})
			if distinct[tp] == nil {
				distinct[tp] = map[int64]struct{}{}
			}
			distinct[tp][o] = struct{}{}
		}
		return true
	})
	offsets := make(map[TopicPartition][]int64, len(distinct))
	for tp, set := range distinct {
		offsets[tp] = slices.Collect(maps.Keys(set))
	}
	s := &Snapshot{At: start}
	if len(commits) > 0 {
		actx, cancel := context.WithTimeout(ctx, askTimeout)
		answers := Ask(actx, r.leaderOf(), r.ask, offsets, r.now)
		cancel()
		var firstErr error
		for _, c := range commits {
			a := answers[c.tp]
			if a != nil && errors.Is(a.Err, kerr.UnknownTopicOrPartition) {
				// The topic was deleted (or the partition never was):
				// there is nothing to lag behind.
				continue
			}
			if a == nil || a.Err != nil {
				s.Unknown++
				if firstErr == nil && a != nil {
					firstErr = a.Err
				}
				continue
			}
			s.Rows = append(s.Rows, Row{Group: c.group, Topic: c.tp.Topic, Partition: c.tp.Partition, Committed: c.offset,
				LogStartOffset: a.LogStartOffset, HighWatermark: a.HighWatermark, Lag: LagOf(c.offset, a)})
		}
		if firstErr != nil && ctx.Err() == nil {
			r.log.Debug("consumer lag: some partitions' leaders did not answer",
				slog.Int("unknown", s.Unknown), slog.Any("first_err", firstErr))
		}
		slices.SortFunc(s.Rows, func(a, b Row) int {
			return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	s.Took = r.now().Sub(start)
	r.snap.Store(s)
	return s
}
