package timeline

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

var testStart = time.Unix(1_700_000_000, 0)

// at returns the time seconds after testStart.
func at(seconds float64) time.Time {
	return testStart.Add(time.Duration(seconds * float64(time.Second)))
}

// event is one call on a timeline, for the tables.
type event func(*Timeline)

func ack(ackedAt, latencyMs float64) event {
	return func(tl *Timeline) {
		acked := at(ackedAt)
		tl.Ack(acked.Add(-time.Duration(latencyMs*float64(time.Millisecond))), acked)
	}
}

func failure(s float64) event { return func(tl *Timeline) { tl.Failure(at(s)) } }

func errorOf(series string, s float64) event {
	return func(tl *Timeline) { tl.Error(series, at(s)) }
}

func fault(start, end float64) event {
	return func(tl *Timeline) { tl.Fault(Fault{Kind: "kill", Start: start, End: end}) }
}

// closeMs says whether a latency is the expected one within the
// histogram's resolution (1/32, and the microsecond).
func closeMs(got, want float64) bool {
	return math.Abs(got-want) <= want/32+0.001
}

// emptySeconds returns seconds 0 to n-1 with no events.
func emptySeconds(n int) []Second {
	seconds := make([]Second, n)
	for i := range seconds {
		seconds[i].Second = i
	}
	return seconds
}

func TestSeconds(t *testing.T) {
	hundredAcks := make([]event, 100)
	for i := range hundredAcks {
		hundredAcks[i] = ack(0.5, float64(i+1)) // 1 ms to 100 ms
	}
	for _, tc := range []struct {
		name   string
		events []event
		want   []Second
	}{
		{name: "nothing", want: []Second{}},
		{
			name:   "one acknowledgement",
			events: []event{ack(0.5, 10)},
			want:   []Second{{Second: 0, Acknowledged: 1, P50Ms: 10, P99Ms: 10, MaxMs: 10}},
		},
		{
			name:   "counted in the second it was acknowledged, not sent",
			events: []event{ack(1.2, 300)}, // sent at 0.9
			want:   []Second{{Second: 0}, {Second: 1, Acknowledged: 1, P50Ms: 300, P99Ms: 300, MaxMs: 300}},
		},
		{
			name:   "events before the start count in second 0",
			events: []event{ack(-3, 1), failure(-1), errorOf("reader", -0.5), ack(0.2, 1)},
			want:   []Second{{Second: 0, Acknowledged: 2, Failed: 1, Errors: map[string]int64{"reader": 1}, P50Ms: 1, P99Ms: 1, MaxMs: 1}},
		},
		{
			name:   "seconds without events in the middle are zeros",
			events: []event{ack(0.5, 2), failure(3.5)},
			want:   []Second{{Second: 0, Acknowledged: 1, P50Ms: 2, P99Ms: 2, MaxMs: 2}, {Second: 1}, {Second: 2}, {Second: 3, Failed: 1}},
		},
		{
			name:   "a negative latency counts as zero",
			events: []event{ack(0.5, -20), ack(0.6, -1)},
			want:   []Second{{Second: 0, Acknowledged: 2}},
		},
		{
			name:   "a latency beyond an hour counts as an hour",
			events: []event{ack(7300, 2*3600*1000)},
			want: append(emptySeconds(7300), Second{
				Second: 7300, Acknowledged: 1, P50Ms: 3600 * 1000, P99Ms: 3600 * 1000, MaxMs: 3600 * 1000,
			}),
		},
		{
			name:   "percentiles of a second",
			events: hundredAcks,
			want:   []Second{{Second: 0, Acknowledged: 100, P50Ms: 50, P99Ms: 99, MaxMs: 100}},
		},
		{
			name: "errors by series, failures apart",
			events: []event{
				errorOf("reader", 0.1), errorOf("reader", 0.9), errorOf("group", 0.2), failure(0.3),
				errorOf("reader", 1.5), errorOf("http", 2.5),
			},
			want: []Second{
				{Second: 0, Failed: 1, Errors: map[string]int64{"reader": 2, "group": 1}},
				{Second: 1, Errors: map[string]int64{"reader": 1}},
				{Second: 2, Errors: map[string]int64{"http": 1}},
			},
		},
		{
			name:   "a fault beyond the events extends the seconds to its end",
			events: []event{ack(0.5, 1), fault(2, 4.2)},
			want:   []Second{{Second: 0, Acknowledged: 1, P50Ms: 1, P99Ms: 1, MaxMs: 1}, {Second: 1}, {Second: 2}, {Second: 3}, {Second: 4}},
		},
		{
			name:   "a fault ending on a second's edge ends before it",
			events: []event{fault(1, 3)},
			want:   []Second{{Second: 0}, {Second: 1}, {Second: 2}},
		},
		{
			name:   "a fault ending before it starts is clamped to its start",
			events: []event{fault(3.5, 1)},
			want:   []Second{{Second: 0}, {Second: 1}, {Second: 2}, {Second: 3}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := New(testStart)
			for _, e := range tc.events {
				e(tl)
			}
			got := tl.Seconds()
			if len(got) != len(tc.want) {
				t.Fatalf("%d seconds, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, want := range tc.want {
				g := got[i]
				if g.Second != want.Second || g.Acknowledged != want.Acknowledged || g.Failed != want.Failed ||
					!maps.Equal(g.Errors, want.Errors) ||
					!closeMs(g.P50Ms, want.P50Ms) || !closeMs(g.P99Ms, want.P99Ms) || g.MaxMs != want.MaxMs {
					t.Errorf("second %d = %+v, want %+v", i, g, want)
				}
			}
		})
	}
}

func TestClampFault(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct{ start, end, wantStart, wantEnd float64 }{
		{1, 2, 1, 2},
		{2, 1, 2, 2},
		{-5, 3, 0, 3},
		{-5, -1, 0, 0},
		{nan, 4, 0, 4},
		{4, nan, 4, 4},
		{4, inf, 4, maxSeconds},
		{inf, inf, maxSeconds, maxSeconds},
		{math.Inf(-1), 1, 0, 1},
	} {
		got := clampFault(Fault{Start: tc.start, End: tc.end})
		if got.Start != tc.wantStart || got.End != tc.wantEnd {
			t.Errorf("clampFault(%v, %v) = %v, %v; want %v, %v", tc.start, tc.end, got.Start, got.End, tc.wantStart, tc.wantEnd)
		}
	}
}

// An event far beyond the start (a clock stepped a year ahead) counts in
// the last second allowed rather than growing the timeline to it.
func TestEventsBeyondMaxSecondsCountInTheLast(t *testing.T) {
	tl := New(testStart)
	tl.Failure(testStart.Add(365 * 24 * time.Hour))
	seconds := tl.Seconds()
	if len(seconds) != maxSeconds || seconds[maxSeconds-1].Failed != 1 {
		t.Errorf("%d seconds, last %+v; want %d, the failure in the last", len(seconds), seconds[len(seconds)-1], maxSeconds)
	}
}

// Past maxSeries-1 names, the error series count together as
// otherSeries, so that a caller naming series by error text cannot grow
// the timeline without bound.
func TestErrorSeriesAreBounded(t *testing.T) {
	tl := New(testStart)
	for i := range 100 {
		tl.Error(fmt.Sprintf("error %d", i), at(0.5))
	}
	errors := tl.Seconds()[0].Errors
	if len(errors) != maxSeries {
		t.Errorf("%d series, want %d", len(errors), maxSeries)
	}
	if got, want := errors[otherSeries], int64(100-(maxSeries-1)); got != want {
		t.Errorf("%s counted %d, want %d", otherSeries, got, want)
	}
}

// Many goroutines record at once while others read and draw: every
// event is counted once (run with -race for the rest).
func TestConcurrentUse(t *testing.T) {
	const goroutines, perGoroutine = 8, 2000
	tl := New(testStart)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				s := float64((g*perGoroutine+i)%10) + 0.5
				tl.Ack(at(s-0.01), at(s))
				tl.Failure(at(s))
				tl.Error([]string{"reader", "group"}[i%2], at(s))
				if i%500 == 0 {
					tl.Fault(Fault{Kind: "pause", Label: fmt.Sprintf("pause %d", g), Start: s, End: s + 1})
				}
			}
		})
	}
	dir := t.TempDir()
	wg.Go(func() {
		for range 20 {
			tl.Seconds()
		}
	})
	wg.Go(func() {
		if err := tl.WritePNG(filepath.Join(dir, "during.png"), "while recording"); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()

	var acknowledged, failed, errors int64
	for _, s := range tl.Seconds() {
		acknowledged += s.Acknowledged
		failed += s.Failed
		for _, n := range s.Errors {
			errors += n
		}
		if s.Acknowledged > 0 && !closeMs(s.P50Ms, 10) {
			t.Errorf("second %d: p50 %v ms, want 10", s.Second, s.P50Ms)
		}
	}
	const events = goroutines * perGoroutine
	if acknowledged != events || failed != events || errors != events {
		t.Errorf("counted %d acknowledged, %d failed, %d errors; want %d each", acknowledged, failed, errors, events)
	}
	if err := tl.WritePNG(filepath.Join(dir, "after.png"), "after"); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, filepath.Join(dir, "after.png"))
}

// footprintBytes returns the bytes the per-second storage holds.
func (t *Timeline) footprintBytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := cap(t.mu.seconds) * int(unsafe.Sizeof(bucket{}))
	for i := range t.mu.seconds {
		n += 8*cap(t.mu.seconds[i].errors) + 4*cap(t.mu.seconds[i].latency.counts)
	}
	return n
}

// recordSpread records n acknowledgements over 100 seconds, their
// latencies spread over 1 ms to 1 s the same way whatever n: each
// second's first two are the extremes, so that every second's buckets
// cover the same range.
func recordSpread(tl *Timeline, n int) {
	perSecond := n / 100
	for i := range n {
		acked := testStart.Add(time.Duration(i) * (100 * time.Second / time.Duration(n)))
		var latency time.Duration
		switch i % perSecond {
		case 0:
			latency = time.Millisecond
		case 1:
			latency = time.Second
		default:
			latency = time.Millisecond + time.Duration((i*7919)%1000)*time.Millisecond
		}
		tl.Ack(acked.Add(-latency), acked)
	}
}

// The per-second storage depends on the spread of the latencies, not on
// how many there are: 2,000,000 acknowledgements over 100 seconds take
// what 20,000 take, where keeping the samples would take 16 MB more.
func TestStorageDoesNotGrowWithTheCount(t *testing.T) {
	heapAfter := func(n int) (footprint int, heap uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tl := New(testStart)
		recordSpread(tl, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		footprint = tl.footprintBytes()
		runtime.KeepAlive(tl)
		return footprint, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	}
	fewFootprint, fewHeap := heapAfter(20_000)
	manyFootprint, manyHeap := heapAfter(2_000_000)
	t.Logf("20,000 acknowledgements: %d bytes of buckets, heap +%d; 2,000,000: %d bytes, heap +%d",
		fewFootprint, fewHeap, manyFootprint, manyHeap)
	if manyFootprint > fewFootprint {
		t.Errorf("the buckets grew from %d to %d bytes with 100 times the acknowledgements", fewFootprint, manyFootprint)
	}
	// Some slack for what the runtime allocates meanwhile; samples
	// would be 8 bytes each.
	if manyHeap > fewHeap+1<<20 {
		t.Errorf("the heap grew %d bytes for 2,000,000 acknowledgements, %d for 20,000", manyHeap, fewHeap)
	}
	if perSecond := manyFootprint / 100; perSecond > 2048 {
		t.Errorf("%d bytes a second, want at most 2 KiB", perSecond)
	}
}

// Once a second has seen its range of latencies, recording in it
// allocates nothing.
func TestAckDoesNotAllocateInASecondSeen(t *testing.T) {
	tl := New(testStart)
	recordSpread(tl, 100_000)
	sent, acked := at(50.1), at(50.6)
	if allocs := testing.AllocsPerRun(1000, func() { tl.Ack(sent, acked) }); allocs != 0 {
		t.Errorf("Ack allocates %v times per call", allocs)
	}
}

func BenchmarkAck(b *testing.B) {
	tl := New(testStart)
	recordSpread(tl, 100_000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			acked := testStart.Add(time.Duration(i%100_000) * time.Millisecond)
			tl.Ack(acked.Add(-time.Duration(i%997)*time.Millisecond), acked)
			i++
		}
	})
}
