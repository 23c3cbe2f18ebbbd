package bench

import (
	"math"
	"testing"
)

func TestLatencyPercentiles(t *testing.T) {
	h := newLatencyHistogram()
	// 1 µs .. 10 ms in 1 µs steps: the p-th percentile is p% of 10 ms.
	for us := int64(1); us <= 10_000; us++ {
		recordNanos(h, us*1000+999) // sub-microsecond parts are dropped
	}
	l := summarizeLatency(h)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{{"p50", l.P50Ms, 5}, {"p90", l.P90Ms, 9}, {"p99", l.P99Ms, 9.9}, {"p99.9", l.P999Ms, 9.99}, {"max", l.MaxMs, 10}, {"mean", l.MeanMs, 5.0005}} {
		// Three significant digits: within 0.1%.
		if math.Abs(tc.got-tc.want) > tc.want*0.001 {
			t.Errorf("%s = %v ms, want %v within 0.1%%", tc.name, tc.got, tc.want)
		}
	}
	if l.Count != 10_000 {
		t.Errorf("count %d", l.Count)
	}
	// The curve rises, ends at 100% and the max, and is fine enough
	// to draw the tail.
	pts := l.Percentiles
	if len(pts) < 30 || pts[len(pts)-1].Percentile != 100 || pts[len(pts)-1].ValueMs != l.MaxMs {
		t.Fatalf("curve of %d points ending %+v", len(pts), pts[len(pts)-1])
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Percentile < pts[i-1].Percentile || pts[i].ValueMs < pts[i-1].ValueMs {
			t.Fatalf("curve falls at %d: %+v after %+v", i, pts[i], pts[i-1])
		}
	}
}

func TestLatencyOutOfRange(t *testing.T) {
	h := newLatencyHistogram()
	recordNanos(h, -5_000_000)  // the clock stepped back: zero
	recordNanos(h, 10*3600*1e9) // ten hours: the top of the range
	if h.TotalCount() != 2 || h.Min() != 0 {
		t.Errorf("count %d, min %d; every value must be counted, a negative one as 0", h.TotalCount(), h.Min())
	}
	if max := summarizeLatency(h).MaxMs; max < 3600*1000*0.999 {
		t.Errorf("max %v ms, want about an hour", max)
	}
	if l := summarizeLatency(newLatencyHistogram()); l.Count != 0 || l.Percentiles != nil {
		t.Errorf("empty histogram summarized as %+v", l)
	}
}

func TestLatencyRecorderMerge(t *testing.T) {
	a, b := newLatencyRecorder(), newLatencyRecorder()
	a.record(1e6)
	b.record(3e6)
	h := newLatencyHistogram()
	a.mergeInto(h)
	b.mergeInto(h)
	if h.TotalCount() != 2 || h.Max() < 2999 {
		t.Errorf("merged %d values, max %d µs", h.TotalCount(), h.Max())
	}
}
