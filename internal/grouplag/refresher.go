package grouplag

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
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
	// LostTotal counts the records this node has seen this group lose
	// on this partition to retention (or DeleteRecords) since it began
	// coordinating the group: each gap once, grown as the log start
	// moves further past the same committed offset.
	LostTotal int64
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
// a fraction of its time; but never more than MaxInterval, since a
// refresh's duration can be a leader's timeout rather than work (a
// refresh that waited 5 s on a dead leader must not hold every group's
// lag 20 s old).
const (
	MinInterval    = time.Second
	MaxInterval    = 5 * time.Second
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

	// mu serializes refreshes, which own gaps.
	mu sync.Mutex
	// gaps is, per (group, partition) seen in the last refresh, the
	// records counted lost so far and the committed offset of the open
	// gap they belong to (-1 when none is open).
	gaps map[gapKey]gapCount
	// warnedAt is when leaders that did not answer were last logged.
	warnedAt time.Time
}

type gapKey struct {
	group string
	tp    TopicPartition
}

type gapCount struct {
	total     int64
	committed int64 // the open gap's committed offset, -1 for none
	counted   int64 // records of the open gap counted in total
}

// NewRefresher returns a Refresher over committed, asking the leaders
// leaderOf names through ask. leaderOf is called once per refresh, so it
// can read the latest metadata image.
func NewRefresher(committed Committed, leaderOf func() LeaderOf, ask Asker, now func() time.Time, log *slog.Logger) *Refresher {
	r := &Refresher{committed: committed, leaderOf: leaderOf, ask: ask, now: now, log: log, gaps: map[gapKey]gapCount{}}
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
		t.Reset(Interval(s.Took))
	}
}

// Interval is the wait after a refresh that took took.
func Interval(took time.Duration) time.Duration {
	return min(max(MinInterval, IntervalFactor*took), MaxInterval)
}

// unknownWarnEvery bounds the warnings about leaders that do not answer.
const unknownWarnEvery = time.Minute

// Refresh asks the leaders once, stores the snapshot and returns it.
func (r *Refresher) Refresh(ctx context.Context) *Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
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
		if firstErr != nil && ctx.Err() == nil && start.Sub(r.warnedAt) >= unknownWarnEvery {
			r.warnedAt = start
			r.log.Warn("consumer lag: some partitions' leaders did not answer; their lag is left out (fjord_consumer_group_lag_unknown)",
				slog.Int("unknown", s.Unknown), slog.Any("first_err", firstErr))
		}
		slices.SortFunc(s.Rows, func(a, b Row) int {
			return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	r.countGaps(s.Rows)
	s.Took = r.now().Sub(start)
	r.snap.Store(s)
	return s
}

// countGaps counts the records each row's group lost to retention: a
// gap (committed offset below the log start) is counted once, when first
// seen, and again only by what the log start moves further past the same
// committed offset; a new committed offset that is again below the log
// start is a new gap. Each new gap is logged once. Pairs no longer in
// rows (a deleted group or topic) are forgotten.
//
// What is seen is what the refreshes see: a group whose client resets
// and commits past a gap between two refreshes (a second or so apart)
// leaves no trace here. A stopped group, the usual victim, is always
// seen.
func (r *Refresher) countGaps(rows []Row) {
	seen := make(map[gapKey]gapCount, len(r.gaps))
	for i := range rows {
		row := &rows[i]
		k := gapKey{row.Group, TopicPartition{row.Topic, row.Partition}}
		g, ok := r.gaps[k]
		if !ok {
			g.committed = -1
		}
		switch {
		case row.Lost == 0:
			g.committed, g.counted = -1, 0
		case g.committed != row.Committed:
			g.committed, g.counted = row.Committed, row.Lost
			g.total += row.Lost
			r.log.Warn("consumer group fell behind retention: records were deleted before it read them",
				slog.String("group", row.Group), slog.String("topic", row.Topic), slog.Int("partition", int(row.Partition)),
				slog.Int64("committed_offset", row.Committed), slog.Int64("log_start_offset", row.LogStartOffset),
				slog.Int64("records_lost", row.Lost))
		case row.Lost > g.counted:
			g.total += row.Lost - g.counted
			g.counted = row.Lost
		}
		row.LostTotal = g.total
		seen[k] = g
	}
	r.gaps = seen
}
