// Package timeline records what happened during a fault-injection run,
// second by second, and draws it: the faults against the throughput, the
// acknowledgement latency and the errors, so that a reader sees what each
// fault did to the clients (`fjord verify` writes one with its report).
//
// A Timeline is fed by the run as it goes: Ack for every acknowledged
// write, Failure for every failed one, Error for every error of another
// client (a reader, a consumer group), Fault for every fault once it is
// healed. It keeps, per second since the start, counts and a compact
// latency histogram (latency.go), never the samples: a second takes
// about a kilobyte whether it saw ten acknowledgements or a million.
//
// The PNG (WritePNG, plot.go, faults.go), 12 x 10 inches at 100 DPI like
// the bench's, stacks three panels over the same x axis, seconds since
// the start, each with its legend to its right:
//
//	+---------------------------------------------+-----------------+
//	| kill 2            split [1] | [2 3]         | acknowledged    |
//	| ======            ===========               | failed          |
//	|                                             | fault families  |
//	|   writes acknowledged and failed per second |                 |
//	+---------------------------------------------+-----------------+
//	|   acknowledgement latency p50, p99, max,    | p50, p99, max   |
//	|   ms on a log axis                          |                 |
//	+---------------------------------------------+-----------------+
//	|   errors per second by series, failed       | series, totals  |
//	|   writes among them                         |                 |
//	+---------------------------------------------+-----------------+
//
// Every fault is a translucent span across the three panels, coloured by
// its family (process, network, disk, other), so its effect can be
// followed downwards. Its label stands at the top of the first panel,
// over a bar in the family's colour from its start to its end, in lanes:
// a label goes in the highest lane where it overlaps no other, so faults
// that overlap in time stay readable and the bar says which span is
// which. The legends stand to the right of the panels, where they cover
// no data.
//
// Threads: every method may be called from any goroutine at once (the
// producers' callbacks call Ack and Failure); one mutex guards the
// buckets, held for a few tens of nanoseconds an event.
package timeline

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Fault is one fault of a run, drawn as a shaded span across every panel
// with its label.
type Fault struct {
	// Kind is what was done: "kill", "pause", "restart", "kill-all"
	// (process faults), "isolate", "split", "bridge", "cut", "delay"
	// (network faults), "torn-write", "bit-flip" (disk faults). Any other
	// string is drawn in the colour of other faults.
	Kind string
	// Label is short, e.g. "kill 2" or "split [1] | [2 3]"; empty, the
	// Kind stands for it.
	Label string
	// Start and End are seconds since the run's start: when the fault was
	// injected and when it was healed. Fault clamps them rather than
	// refuse them (a report with a slightly wrong span beats no report):
	// a negative or NaN Start is 0, an End below Start or NaN is Start (a
	// fault of no duration, drawn as a thin span), and both are at most
	// a week (maxSeconds). An End beyond the last event extends the
	// timeline to it.
	Start, End float64
}

// Second summarizes one second of a run.
type Second struct {
	// Second is the second, since the start, that this summarizes: events
	// at Second <= t < Second+1.
	Second int
	// Acknowledged and Failed count the writes acknowledged and failed
	// in this second.
	Acknowledged, Failed int64
	// Errors counts the errors by series; nil when there were none. The
	// caller owns the map.
	Errors map[string]int64
	// P50Ms, P99Ms and MaxMs are the latencies, in milliseconds, of the
	// writes acknowledged in this second: the percentiles within 3.1%,
	// the maximum exact to the microsecond. Zero when none was.
	P50Ms, P99Ms, MaxMs float64
}

const (
	// maxSeconds bounds the timeline, and with it the memory a wrong
	// timestamp could take (a clock stepped a year ahead): an event
	// later than a week after the start counts in the week's last
	// second. A week of empty seconds is 40 MiB.
	maxSeconds = 7 * 24 * 3600
	// maxSeries bounds the error series: a caller that named a series by
	// its error's text would otherwise grow every second's counters
	// without bound, and draw a line per message. The series past the
	// first maxSeries-1 names are counted together as otherSeries.
	maxSeries   = 16
	otherSeries = "(other series)"
)

// Timeline records a run's events per second since its start. The zero
// value is not usable; call New.
type Timeline struct {
	start time.Time
	mu    struct {
		sync.Mutex
		// seconds[i] holds the events of second i since start.
		// Invariant: len(seconds) <= maxSeconds.
		seconds []bucket
		// series are the error series' names in the order first seen;
		// seriesIndex maps a name to its index in series.
		// Invariant: len(series) <= maxSeries.
		series      []string
		seriesIndex map[string]int
		faults      []Fault
	}
}

// bucket is one second's events.
type bucket struct {
	acknowledged, failed int64
	// errors[i] counts the errors of series i; nil until the second has
	// one, and no longer than the series known at its last error.
	errors  []int64
	latency latencyHistogram
}

// New returns an empty timeline whose second 0 begins at start.
func New(start time.Time) *Timeline {
	t := &Timeline{start: start}
	t.mu.seriesIndex = make(map[string]int)
	return t
}

// secondOf returns the index of the second holding at. Events before the
// start count in second 0; those past maxSeconds in the last second.
func (t *Timeline) secondOf(at time.Time) int {
	since := at.Sub(t.start)
	if since < 0 {
		return 0
	}
	return int(min(since/time.Second, maxSeconds-1))
}

// bucketLocked returns second's bucket, extending the timeline to it.
// REQUIRES: t.mu held.
func (t *Timeline) bucketLocked(second int) *bucket {
	if n := second + 1 - len(t.mu.seconds); n > 0 {
		t.mu.seconds = append(t.mu.seconds, make([]bucket, n)...)
	}
	return &t.mu.seconds[second]
}

// Ack records one acknowledged write, sent at sent and acknowledged at
// acked. It counts in the second of its acknowledgement, with latency
// acked-sent (a negative one, from a clock stepped back, counts as 0).
func (t *Timeline) Ack(sent, acked time.Time) {
	second := t.secondOf(acked)
	micros := acked.Sub(sent).Microseconds()
	t.mu.Lock()
	b := t.bucketLocked(second)
	b.acknowledged++
	b.latency.record(micros)
	t.mu.Unlock()
}

// Failure records one write that failed at at.
func (t *Timeline) Failure(at time.Time) {
	second := t.secondOf(at)
	t.mu.Lock()
	t.bucketLocked(second).failed++
	t.mu.Unlock()
}

// Error records one error of the named series ("reader", "group", ...)
// at at. Series are meant to be a handful of fixed names; past
// maxSeries-1 of them, the others count together (see maxSeries).
func (t *Timeline) Error(series string, at time.Time) {
	second := t.secondOf(at)
	t.mu.Lock()
	defer t.mu.Unlock()
	index := t.seriesLocked(series)
	b := t.bucketLocked(second)
	if n := index + 1 - len(b.errors); n > 0 {
		b.errors = append(b.errors, make([]int64, n)...)
	}
	b.errors[index]++
}

// seriesLocked returns the index of the named error series, adding it.
// REQUIRES: t.mu held.
func (t *Timeline) seriesLocked(name string) int {
	if index, ok := t.mu.seriesIndex[name]; ok {
		return index
	}
	if len(t.mu.series) >= maxSeries-1 {
		if index, ok := t.mu.seriesIndex[otherSeries]; ok {
			return index
		}
		name = otherSeries
	}
	t.mu.seriesIndex[name] = len(t.mu.series)
	t.mu.series = append(t.mu.series, name)
	return len(t.mu.series) - 1
}

// Fault records one fault's span, clamped as Fault's doc says.
func (t *Timeline) Fault(f Fault) {
	f = clampFault(f)
	t.mu.Lock()
	t.mu.faults = append(t.mu.faults, f)
	t.mu.Unlock()
}

// clampFault returns f with Start and End within [0, maxSeconds] and
// End >= Start.
func clampFault(f Fault) Fault {
	if math.IsNaN(f.Start) {
		f.Start = 0
	}
	f.Start = min(max(f.Start, 0), maxSeconds)
	if math.IsNaN(f.End) || f.End < f.Start {
		f.End = f.Start
	}
	f.End = min(f.End, maxSeconds)
	return f
}

// Seconds returns one summary per second, from second 0 to the last
// second with an event or, if later, the one in which the last fault
// ended. Seconds without events are present, with zeros.
func (t *Timeline) Seconds() []Second {
	seconds, _ := t.snapshot()
	return seconds
}

// snapshot returns the seconds (as Seconds) and a copy of the faults,
// sorted by start, taken under one lock so that they agree.
func (t *Timeline) snapshot() ([]Second, []Fault) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.mu.seconds)
	for _, f := range t.mu.faults {
		// A fault ending at 65.0 ends with second 64; at 65.3, in 65.
		n = max(n, int(math.Ceil(f.End)))
	}
	seconds := make([]Second, n)
	for i := range seconds {
		seconds[i].Second = i
		if i >= len(t.mu.seconds) {
			continue
		}
		b := &t.mu.seconds[i]
		seconds[i].Acknowledged, seconds[i].Failed = b.acknowledged, b.failed
		for index, count := range b.errors {
			if count == 0 {
				continue
			}
			if seconds[i].Errors == nil {
				seconds[i].Errors = make(map[string]int64, len(b.errors))
			}
			seconds[i].Errors[t.mu.series[index]] = count
		}
		if b.acknowledged > 0 {
			seconds[i].P50Ms = b.latency.quantileMs(0.50)
			seconds[i].P99Ms = b.latency.quantileMs(0.99)
			seconds[i].MaxMs = b.latency.maxMs()
		}
	}
	faults := append([]Fault(nil), t.mu.faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	return seconds, faults
}
