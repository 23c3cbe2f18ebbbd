package storage

import (
	"sort"

	"github.com/fjordmq/fjord/internal/record"
)

// Backlog is what a consumer positioned at an offset has yet to
// consume, up to a bound (the high watermark): the figures of consumer
// lag beyond the count of offsets.
type Backlog struct {
	// Bytes is the log's size from the batch holding the offset up to
	// the bound: what the consumer has yet to fetch, to a batch's
	// granularity.
	Bytes int64
	// Timestamp is the first timestamp (its append time on a
	// LogAppendTime batch) of the first data batch at or after the
	// offset and below the bound, or -1 when there is none: the consumer
	// has caught up. Transaction markers are skipped, as consumers skip
	// them.
	Timestamp int64
	// DeleteAt is when (Unix milliseconds) time retention (retention.ms)
	// may delete the segment holding the offset: retention.ms after the
	// largest timestamp of that segment and every older one, since
	// segments go oldest first. -1 when time retention does not apply
	// (retention.ms -1, a compacted-only topic) or nothing is left to
	// consume. The next retention check after it deletes the segment.
	DeleteAt int64
}

// maxMarkersSkipped bounds the control batches Backlogs steps over to
// find a data batch's timestamp; past it the marker's own timestamp
// stands in. Markers come one per transaction per partition, so a run
// of more than a few is rare.
const maxMarkersSkipped = 8

// Backlogs answers Backlog for each offset against bound (clamped to
// the log end), from the offset index and one batch header per offset:
// no record between is read, so it is cheap enough to run for every
// group's committed offset every few seconds. An offset below the log
// start is answered from the log start (the records between are gone;
// the caller compares with LogStartOffset).
func (l *Log) Backlogs(offsets []int64, bound int64) ([]Backlog, error) {
	if l.closed.Load() {
		return nil, ErrLogClosed
	}
	out := make([]Backlog, len(offsets))
	for i := range out {
		out[i].Timestamp, out[i].DeleteAt = -1, -1
	}
	cfg := l.cfg.Load()
	timeRetention := cfg.CleanupPolicy.Delete() && cfg.RetentionMs >= 0
	bound = min(bound, l.leo.Load())
	start := l.logStartOffset.Load()
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	segs := *l.segments.Load()
	if len(segs) == 0 {
		return out, nil
	}
	// Positions are counted across the whole log: before[i] is the size
	// of the segments before segs[i].
	before := make([]int64, len(segs)+1)
	for i, s := range segs {
		before[i+1] = before[i] + s.size.Load()
	}
	// at returns the log-wide position of the first batch whose last
	// offset is >= offset, its header, and the index of its segment
	// (ok=false past the last batch).
	at := func(offset int64) (pos int64, h record.Header, seg int, ok bool, err error) {
		i := max(sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > offset })-1, 0)
		for ; i < len(segs); i++ {
			p, h, err := segs[i].findBatch(offset)
			if err != nil {
				return 0, record.Header{}, 0, false, err
			}
			if p >= 0 {
				return before[i] + p, h, i, true, nil
			}
		}
		return before[len(segs)], record.Header{}, 0, false, nil
	}
	// deleteAt[i] is when time retention may delete segs[i]: the largest
	// timestamp of it and every older segment, plus retention.ms. Filled
	// as far as asked, once.
	var deleteAt []int64
	deleteAtOf := func(seg int) (int64, error) {
		for i := len(deleteAt); i <= seg; i++ {
			ts, err := segs[i].maxTimestamp()
			if err != nil {
				return 0, err
			}
			if i > 0 {
				ts = max(ts, deleteAt[i-1]-cfg.RetentionMs)
			}
			deleteAt = append(deleteAt, ts+cfg.RetentionMs)
		}
		return deleteAt[seg], nil
	}
	boundPos, _, _, _, err := at(bound)
	if err != nil {
		return nil, err
	}
	for i, o := range offsets {
		o = max(o, start)
		if o >= bound {
			continue
		}
		pos, h, seg, ok, err := at(o)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		out[i].Bytes = max(boundPos-pos, 0)
		if timeRetention {
			if out[i].DeleteAt, err = deleteAtOf(seg); err != nil {
				return nil, err
			}
		}
		for skipped := 0; h.IsControl() && skipped < maxMarkersSkipped; skipped++ {
			next := h.LastOffset() + 1
			if next >= bound {
				break
			}
			_, nh, _, found, err := at(next)
			if err != nil {
				return nil, err
			}
			if !found {
				break
			}
			h = nh
		}
		if h.IsControl() && h.LastOffset()+1 >= bound {
			continue // only markers are left: nothing to consume
		}
		if h.TimestampType() == record.LogAppendTime {
			out[i].Timestamp = h.MaxTimestamp
		} else {
			out[i].Timestamp = h.FirstTimestamp
		}
	}
	return out, nil
}

// RetentionDeadline is when (Unix milliseconds) time retention may
// delete the log's oldest segment: retention.ms after its largest
// timestamp. ok is false when time retention does not apply
// (retention.ms -1, a compacted-only topic) or the log is empty. The
// next retention check after it deletes the segment (a segment above
// the high watermark waits for it).
func (l *Log) RetentionDeadline() (deadlineMs int64, ok bool, err error) {
	cfg := l.cfg.Load()
	if !cfg.CleanupPolicy.Delete() || cfg.RetentionMs < 0 || l.closed.Load() {
		return 0, false, nil
	}
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	segs := *l.segments.Load()
	if len(segs) == 0 || segs[0].size.Load() == 0 {
		return 0, false, nil
	}
	ts, err := segs[0].maxTimestamp()
	if err != nil || ts < 0 {
		return 0, false, err
	}
	return ts + cfg.RetentionMs, true, nil
}
