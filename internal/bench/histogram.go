package bench

import (
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are HdrHistograms of microseconds from 1 µs to one hour with
// three significant digits: every recorded value is within 0.1% of the
// truth, in about 200 KiB per histogram, and recording costs a few
// nanoseconds, so every record is counted rather than a sample.
const (
	latencyLowestMicros  = 1
	latencyHighestMicros = 3600 * 1_000_000
	latencySigFigs       = 3
	// curveTicksPerHalf is how finely the percentile curve is reported:
	// points per halving of the distance to 100%, as HdrHistogram's
	// percentile output counts them.
	curveTicksPerHalf = 5
)

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyLowestMicros, latencyHighestMicros, latencySigFigs)
}

// recordNanos records a latency given in nanoseconds. A negative one
// (the wall clock stepped back between send and receive) counts as zero
// and one beyond the histogram's range as its highest value, so every
// record is counted.
func recordNanos(h *hdrhistogram.Histogram, nanos int64) {
	micros := nanos / 1000
	switch {
	case micros < 0:
		micros = 0
	case micros > latencyHighestMicros:
		micros = latencyHighestMicros
	}
	// In range by the clamps above, so RecordValue cannot fail.
	_ = h.RecordValue(micros)
}

// latencyRecorder is a histogram that several goroutines record into
// (a driver may complete sends from goroutines of its own).
type latencyRecorder struct {
	mu struct {
		sync.Mutex
		h *hdrhistogram.Histogram
	}
}

func newLatencyRecorder() *latencyRecorder {
	r := &latencyRecorder{}
	r.mu.h = newLatencyHistogram()
	return r
}

func (r *latencyRecorder) record(nanos int64) {
	r.mu.Lock()
	recordNanos(r.mu.h, nanos)
	r.mu.Unlock()
}

// mergeInto adds the recorded values to dst.
func (r *latencyRecorder) mergeInto(dst *hdrhistogram.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dst.Merge(r.mu.h)
}

// Latency summarizes one latency histogram, in milliseconds.
type Latency struct {
	// Count is the number of records measured.
	Count  int64   `json:"count"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
	MeanMs float64 `json:"meanMs"`
	// Percentiles is the percentile distribution (HdrHistogram's
	// percentile output: finer towards 100%), for the latency plot.
	Percentiles []PercentilePoint `json:"percentiles"`
}

// PercentilePoint is one point of a percentile distribution: Percentile
// percent of the records took at most ValueMs.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	ValueMs    float64 `json:"valueMs"`
}

const microsPerMs = 1000.0

// summarizeLatency reads the percentiles of h.
func summarizeLatency(h *hdrhistogram.Histogram) Latency {
	l := Latency{Count: h.TotalCount()}
	if l.Count == 0 {
		return l
	}
	ms := func(micros int64) float64 { return float64(micros) / microsPerMs }
	l.P50Ms = ms(h.ValueAtQuantile(50))
	l.P90Ms = ms(h.ValueAtQuantile(90))
	l.P99Ms = ms(h.ValueAtQuantile(99))
	l.P999Ms = ms(h.ValueAtQuantile(99.9))
	l.MaxMs = ms(h.Max())
	l.MeanMs = h.Mean() / microsPerMs
	for _, b := range h.CumulativeDistributionWithTicks(curveTicksPerHalf) {
		l.Percentiles = append(l.Percentiles, PercentilePoint{Percentile: b.Quantile, ValueMs: ms(b.ValueAt)})
	}
	return l
}
