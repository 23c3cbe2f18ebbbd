package timeline

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value falls in the bucket whose range holds it, buckets are in
// the order of their values, and none is wider than 1/16 of its lowest
// value (the 3.1% resolution the doc promises).
func TestBucketIndexAndRange(t *testing.T) {
	values := []uint64{maxLatencyMicros, maxLatencyMicros - 1, 1 << 31, 1<<31 - 1}
	for v := range uint64(70_000) {
		values = append(values, v)
	}
	random := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		values = append(values, random.Uint64N(maxLatencyMicros+1))
	}
	for _, v := range values {
		index := bucketIndex(v)
		if index < 0 || index >= bucketCount {
			t.Fatalf("bucketIndex(%d) = %d, outside [0, %d)", v, index, bucketCount)
		}
		low, width := bucketRange(index)
		if v < low || v >= low+width {
			t.Fatalf("bucketIndex(%d) = %d, whose range is [%d, %d)", v, index, low, low+width)
		}
		if width > 1 && width > low/subBuckets {
			t.Fatalf("bucket %d is [%d, %d): wider than 1/%d of its low", index, low, low+width, subBuckets)
		}
	}
	for index := 1; index < bucketCount; index++ {
		low, _ := bucketRange(index)
		prevLow, prevWidth := bucketRange(index - 1)
		if prevLow+prevWidth != low {
			t.Fatalf("bucket %d ends at %d, bucket %d begins at %d", index-1, prevLow+prevWidth, index, low)
		}
	}
	if got := bucketIndex(maxLatencyMicros); got != bucketCount-1 {
		t.Errorf("the last bucket is %d, bucketCount %d", got, bucketCount)
	}
}

// quantileMs agrees with the exact nearest-rank quantile of the values
// recorded, within the buckets' resolution, and the maximum is exact.
func TestQuantileWithinResolution(t *testing.T) {
	random := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 10, 99, 100, 101, 1000, 20_000} {
		var h latencyHistogram
		values := make([]int64, n)
		for i := range values {
			// Log-uniform from 1 µs to 100 s: every bucket width.
			values[i] = int64(math.Pow(10, 8*random.Float64()))
			h.record(values[i])
		}
		slices.Sort(values)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			rank := int(math.Ceil(q * float64(n)))
			exact := float64(values[max(rank, 1)-1]) / microsPerMs
			got := h.quantileMs(q)
			if math.Abs(got-exact) > exact/32+0.0005 {
				t.Errorf("n=%d: quantileMs(%v) = %v, exact %v: beyond 1/32", n, q, got, exact)
			}
		}
		if got, want := h.maxMs(), float64(values[n-1])/microsPerMs; got != want {
			t.Errorf("n=%d: maxMs = %v, want %v exactly", n, got, want)
		}
		if got := h.total(); got != uint64(n) {
			t.Errorf("n=%d: total = %d", n, got)
		}
	}
}

func TestHistogramClampsAndWidens(t *testing.T) {
	var h latencyHistogram
	if got := h.quantileMs(0.5); got != 0 {
		t.Errorf("empty quantileMs = %v, want 0", got)
	}
	h.record(5_000)          // 5 ms
	h.record(-7)             // a clock stepped back: 0
	h.record(10_000_000_000) // ~2.8 hours: one hour
	h.record(40)
	if got := h.total(); got != 4 {
		t.Fatalf("total = %d, want 4", got)
	}
	if got := h.quantileMs(0.25); got != 0 {
		t.Errorf("lowest = %v ms, want 0 (the negative latency)", got)
	}
	if got, want := h.maxMs(), float64(maxLatencyMicros)/microsPerMs; got != want {
		t.Errorf("max = %v ms, want the hour %v", got, want)
	}
	if int(h.first) != 0 || int(h.first)+len(h.counts) != bucketCount || cap(h.counts) > bucketCount {
		t.Errorf("counts cover [%d, %d) with cap %d; want [0, %d), no more", h.first, int(h.first)+len(h.counts), cap(h.counts), bucketCount)
	}
}

// A counter saturates rather than wrap to zero.
func TestHistogramCounterSaturates(t *testing.T) {
	var h latencyHistogram
	h.record(100)
	h.counts[0] = math.MaxUint32
	h.record(100)
	if h.counts[0] != math.MaxUint32 {
		t.Errorf("counter = %d after saturating, want %d", h.counts[0], uint32(math.MaxUint32))
	}
}
