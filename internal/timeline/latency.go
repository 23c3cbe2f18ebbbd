package timeline

import (
	"math"
	"math/bits"
)

// latencyHistogram counts one second's acknowledgement latencies, in
// microseconds, in logarithmic buckets, so that a second of a million
// acknowledgements costs what a second of ten does.
//
// Bucket layout (HdrHistogram's, with 16 sub-buckets):
//
//	index  0..31            one bucket per microsecond, exact
//	index  32..47           [32, 64) µs in 16 buckets 2 µs wide
//	index  48..63           [64, 128) µs in 16 buckets 4 µs wide
//	...                     each further power of two: 16 buckets
//	index  458 (the last)   the one holding maxLatencyMicros (1 hour)
//
// A bucket is at most 1/16 of its lower bound wide, so the middle of a
// bucket is within 1/32 (3.1%) of any value in it. That is the
// resolution the plot can use: on a log axis of four decades across
// about 250 pixels, one pixel is a ratio of 3.7%.
//
// HdrHistogram itself (what the bench uses) was tried and left out for
// its size: from 1 µs to 1 hour it allocates every counter up front,
// whatever is recorded: 3,328 of 8 bytes (26 KiB) at 2 significant
// digits, 464 (3.6 KiB, and 3-6% resolution) at 1. Kept a second at a
// time, an 8-hour run would hold 730 MiB or 100 MiB. Here only the run of
// buckets between the lowest and the highest value seen is stored, as
// 4-byte counters: a second whose latencies span 1 ms to 100 ms uses
// about 110 counters (440 bytes), a kill's 1 ms to 10 s about 210 (850
// bytes), and no second more than 459 (1.8 KiB).
type latencyHistogram struct {
	// counts[i] is how many latencies fell in bucket first+i.
	// Invariant: first+cap(counts) <= bucketCount.
	counts []uint32
	first  int32
	// maxMicros is the highest latency recorded, exactly (not rounded to
	// its bucket), so that the plotted maximum is the true one.
	maxMicros uint32
}

const (
	subBucketBits = 4
	subBuckets    = 1 << subBucketBits
	// maxLatencyMicros is the highest latency told apart; a longer one
	// (an acknowledgement after an hour) counts as an hour.
	maxLatencyMicros = 3600 * 1_000_000
	microsPerMs      = 1000.0
)

// bucketCount is the number of buckets from 0 to maxLatencyMicros.
var bucketCount = bucketIndex(maxLatencyMicros) + 1

// bucketIndex returns the bucket holding micros. Below 2*subBuckets a
// value has a bucket of its own; above, a value 2^e <= micros < 2^(e+1)
// keeps its top subBucketBits+1 bits, and the bits shifted out say
// which power of two it was in.
func bucketIndex(micros uint64) int {
	shift := max(0, bits.Len64(micros)-1-subBucketBits)
	return shift*subBuckets + int(micros>>shift)
}

// bucketRange returns the lowest value of bucket index and how many
// consecutive values it holds.
func bucketRange(index int) (lowMicros, width uint64) {
	shift := max(0, index/subBuckets-1)
	mantissa := uint64(index - shift*subBuckets)
	return mantissa << shift, 1 << shift
}

// record counts one latency. A negative one (the clock stepped back
// between send and acknowledgement) counts as zero, and one beyond
// maxLatencyMicros as that, so that every acknowledgement is counted.
func (h *latencyHistogram) record(micros int64) {
	micros = min(max(micros, 0), maxLatencyMicros)
	index := int32(bucketIndex(uint64(micros)))
	if len(h.counts) == 0 {
		h.first = index
	}
	if index < h.first || index >= h.first+int32(len(h.counts)) {
		h.widen(index)
	}
	// Saturate rather than wrap: 4 billion acknowledgements in one second
	// is beyond any client, but clamping (events before the start all
	// count in second 0) could gather them.
	if c := &h.counts[index-h.first]; *c < math.MaxUint32 {
		*c++
	}
	h.maxMicros = max(h.maxMicros, uint32(micros))
}

// widen makes counts cover index. The room it leaves beyond index (a
// quarter more) is for the next values out, likely near; it is bounded
// by the last bucket so that no second holds more than bucketCount
// counters. Widening happens a few times per second at most, as the
// range of a second's latencies settles.
func (h *latencyHistogram) widen(index int32) {
	low, high := min(h.first, index), max(h.first+int32(len(h.counts)), index+1)
	if low == h.first && int(high-low) <= cap(h.counts) {
		// Counters past len were never written: still zero.
		h.counts = h.counts[:high-low]
		return
	}
	n := int(high - low)
	room := min(n+n/4+4, bucketCount-int(low))
	grown := make([]uint32, n, room)
	copy(grown[h.first-low:], h.counts)
	h.counts, h.first = grown, low
}

// total returns how many latencies were recorded (short of any that
// saturated a counter).
func (h *latencyHistogram) total() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += uint64(c)
	}
	return n
}

// quantileMs returns the latency, in milliseconds, below or at which
// the fraction q (0 < q <= 1) of the recorded latencies lie: the middle
// of the bucket holding the value of rank ceil(q*total) (the
// nearest-rank definition), never above the recorded maximum. Zero when
// nothing was recorded.
func (h *latencyHistogram) quantileMs(q float64) float64 {
	total := h.total()
	if total == 0 {
		return 0
	}
	rank := min(max(uint64(math.Ceil(q*float64(total))), 1), total)
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen < rank {
			continue
		}
		low, width := bucketRange(int(h.first) + i)
		middle := float64(low) + float64(width-1)/2
		return math.Min(middle, float64(h.maxMicros)) / microsPerMs
	}
	panic("unreachable: rank <= total")
}

// maxMs returns the highest latency recorded, in milliseconds.
func (h *latencyHistogram) maxMs() float64 {
	return float64(h.maxMicros) / microsPerMs
}
