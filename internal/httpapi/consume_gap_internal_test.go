package httpapi

import (
	"fmt"
	"testing"
)

// gapOf, one case per sentence of its doc and consume_gap.go's
// records_lost.
func TestGapOf(t *testing.T) {
	at := func(v int64) *int64 { return &v }
	show := func(v *int64) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprint(*v)
	}
	for _, tc := range []struct {
		name                string
		reason              string // decided by an earlier consume
		position, committed *int64
		want                string // reason and records_lost
	}{
		{"committed below the start: counted from the commit", "", nil, at(2), "behind_log_start 8"},
		{"read past the commit: still from the commit", "", at(7), at(2), "behind_log_start 8"},
		{"no commit: from the position", "", at(7), nil, "behind_log_start 3"},
		{"seeked back below the start, commit inside: from the position", "", at(4), at(12), "behind_log_start 6"},
		{"nothing known", "", nil, nil, "behind_log_start null"},
		{"both inside the log (it moved since the fetch)", "", at(12), at(11), "behind_log_start null"},
		{"committed past the end", "", nil, at(1000), "past_log_end null"},
		{"position past the end, commit inside", "", at(30), at(12), "past_log_end null"},
		{"the position decides over the commit", "", at(4), at(1000), "behind_log_start 6"},
		{"past the end once, past the end after the log grew", gapPastLogEnd, nil, at(15), "past_log_end null"},
		{"behind the start once, counted", gapBehindLogStart, nil, at(2), "behind_log_start 8"},
	} {
		g := gapOf(3, tc.reason, tc.position, tc.committed, 10, 20)
		if got := g.Reason + " " + show(g.RecordsLost); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if g.Partition != 3 || g.LogStartOffset != 10 || g.LogEndOffset != 20 || g.Position != tc.position || g.CommittedOffset != tc.committed {
			t.Errorf("%s: %+v does not carry its inputs", tc.name, g)
		}
	}
}
