package httpapi

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Retention gaps (issue 18): a consumer instance's position in a
// partition that is no longer inside the log. A consume answers, beside
// the records of the other partitions,
//
//	"gaps": [{"partition": 0, "reason": "behind_log_start", "position": null,
//	          "committed_offset": 2, "log_start_offset": 5, "log_end_offset": 8,
//	          "records_lost": 3}]
//
// always present, empty when there is none, so a client can rely on it.
//
//   - reason: behind_log_start (retention or a records deletion passed
//     the position: the usual case) or past_log_end (the log was
//     truncated below it, or the group committed an offset past the end
//     through the Kafka protocol, which the coordinator does not check).
//   - position: where the instance reads the partition next, when it
//     knows: it has read from the partition or been seeked since it was
//     given it. null otherwise: franz-go started it at the committed
//     offset.
//   - committed_offset: the group's, from its coordinator; null without
//     one.
//   - log_start_offset, log_end_offset: the log as it is now (the log end
//     is the high watermark, where "to": "latest" seeks).
//   - records_lost: behind the log start, how many records between the
//     group's committed offset and the log start are gone: what the
//     group loses, as issue 18's records-lost metric counts it. Records
//     the instance handed out but the group never committed are among
//     them (a restart would have read them again). Without a commit
//     below the log start, counted from the instance's position instead;
//     null when neither is known, and past the log end, where the
//     gateway cannot tell how many records the truncation took.
//
// Nothing is delivered from the partition while the gap stands, and its
// position is not moved: franz-go, with NoResetOffset, keeps fetching
// at the position and the broker keeps answering OFFSET_OUT_OF_RANGE.
// The gap ends with a seek of the partition (to earliest, latest, a time
// or an offset), or when the group takes the partition away; not when
// the log grows over a position past its end, since what is written
// there now is not what the position was after (notePoll). Records of
// the partition fetched before the gap was found come first: they are
// older than the position.
//
// Rejected: answering the whole consume 416 (what the gateway did
// before): one partition behind retention then stopped every other
// partition of the instance too. Resetting like a Kafka consumer's
// auto.offset.reset: the point is that the loss is said, and the
// client chooses.

// Reasons of a gap.
const (
	gapBehindLogStart = "behind_log_start"
	gapPastLogEnd     = "past_log_end"
)

// consumeGap is one partition's gap in a consume's answer.
type consumeGap struct {
	Partition       int32  `json:"partition"`
	Reason          string `json:"reason"`
	Position        *int64 `json:"position"`
	CommittedOffset *int64 `json:"committed_offset"`
	LogStartOffset  int64  `json:"log_start_offset"`
	LogEndOffset    int64  `json:"log_end_offset"`
	RecordsLost     *int64 `json:"records_lost"`
}

// gapOf describes partition p's gap from what is known of it: the
// reason, when an earlier consume decided it ("" otherwise), the
// instance's position and the group's committed offset (nil: not known),
// and the log's bounds. The broker said the position is outside the log;
// the position, or else the committed offset (where franz-go started),
// says on which side. When neither says (both unknown, or inside the log
// because the log moved since the fetch), behind the log start: the log
// start only grows, and truncations past a consumer are rare.
func gapOf(p int32, reason string, position, committed *int64, start, end int64) consumeGap {
	g := consumeGap{Partition: p, Reason: reason, Position: position, CommittedOffset: committed,
		LogStartOffset: start, LogEndOffset: end}
	if g.Reason == "" {
		g.Reason = gapBehindLogStart
		at := position
		if at == nil {
			at = committed
		}
		if at != nil && *at > end {
			g.Reason = gapPastLogEnd
		}
	}
	if g.Reason == gapPastLogEnd {
		return g
	}
	for _, from := range []*int64{committed, position} {
		if from != nil && *from < start {
			lost := start - *from
			g.RecordsLost = &lost
			break
		}
	}
	return g
}

// gapAt is what the instance knows of one of its gaps.
type gapAt struct {
	position *int64 // nil: not known
	reason   string // "": not decided yet
}

// describeGaps describes the gaps in at, in partition order. It asks the
// cluster for the log bounds and the group's committed offsets: a
// consume with gaps costs three requests more, one without costs none.
func (a *API) describeGaps(ctx context.Context, group, topic string, at map[int32]gapAt) ([]consumeGap, error) {
	bounds, err := a.logBounds(ctx, topic)
	if err != nil {
		return nil, err
	}
	committed, err := a.adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, unavailable(err)
	}
	parts := make([]int32, 0, len(at))
	for p := range at {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	gaps := make([]consumeGap, 0, len(parts))
	for _, p := range parts {
		start, end, err := bounds.of(p)
		if err != nil {
			return nil, err
		}
		var c *int64
		if o, ok := committed.Lookup(topic, p); ok {
			if o.Err != nil {
				return nil, kafkaError(o.Err)
			}
			if o.At >= 0 {
				c = &o.At
			}
		}
		gaps = append(gaps, gapOf(p, at[p].reason, at[p].position, c, start, end))
	}
	return gaps, nil
}

// notePoll records what a poll said of the instance's partitions and
// returns the records to hand out. Records put their partition's
// position past them; an OFFSET_OUT_OF_RANGE starts a gap. Records of a
// partition already in a gap are held back (dropped: the seek that ends
// the gap sets the position anyway): past the log end, the log can grow
// over the position, and what franz-go then fetches there is not what
// the group was after (a truncation replaced it), so the client chooses
// there too. Partitions no longer owned are not recorded: their records
// are dropped before delivery, and the next owner finds the gap itself.
func (in *instance) notePoll(records []*kgo.Record, outOfRange []int32) []*kgo.Record {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	kept := records[:0]
	for _, rec := range records {
		if _, held := in.gaps[rec.Partition]; held {
			continue
		}
		kept = append(kept, rec)
		if in.owned[rec.Partition] {
			// rec.Offset+1 is a lower bound: under read_committed the
			// cursor is also past the control records after it.
			in.positions[rec.Partition] = rec.Offset + 1
		}
	}
	// After the records: a poll brings a partition's records or its
	// error, and records fetched before the gap was found are older
	// than its position, so they go out first.
	for _, p := range outOfRange {
		if _, ok := in.gaps[p]; !ok && in.owned[p] {
			in.gaps[p] = ""
		}
	}
	return kept
}

// seeked records a seek of partition p to offset: the gap there, if
// any, ends, since the seek was checked to be inside the log.
func (in *instance) seeked(p int32, offset int64) {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	in.positions[p] = offset
	delete(in.gaps, p)
}

// gapsNow returns the instance's gaps.
func (in *instance) gapsNow() map[int32]gapAt {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	if len(in.gaps) == 0 {
		return nil
	}
	out := make(map[int32]gapAt, len(in.gaps))
	for p, reason := range in.gaps {
		at := gapAt{reason: reason}
		if pos, ok := in.positions[p]; ok {
			at.position = &pos
		}
		out[p] = at
	}
	return out
}

// decided keeps the reasons of gaps just described, so that a gap past
// the log end stays one after the log has grown over its position.
func (in *instance) decided(gaps []consumeGap) {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	for _, g := range gaps {
		if reason, ok := in.gaps[g.Partition]; ok && reason == "" {
			in.gaps[g.Partition] = g.Reason
		}
	}
}
