package controller

import (
	"sync"
	"time"
)

// FailoverBuckets are the upper bounds, in seconds, of the failover
// histogram (fjord_controller_failover_seconds): around the 0.75 s
// default session, and far enough out to show a controller that was
// slow to act.
var FailoverBuckets = []float64{0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10, 30}

// failoverTimes is the time from the last sign of life this active
// controller had of a broker (its last heartbeat in this term, or the
// term's start) to the commit of the fence that moved its leaderships
// and ISR places: the part of a failover the controller sees.
type failoverTimes struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

func (f *failoverTimes) observe(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = make([]uint64, len(FailoverBuckets))
	}
	s := d.Seconds()
	for i, b := range FailoverBuckets {
		if s <= b {
			f.counts[i]++
			break
		}
	}
	f.sum += s
	f.count++
}

// FailoverHistogram is the failover times this node observed as the
// active controller since it started, in Prometheus' shape: cumulative
// counts per upper bound (FailoverBuckets), the sum in seconds and the
// count.
func (c *Controller) FailoverHistogram() (buckets map[float64]uint64, sum float64, count uint64) {
	f := &c.failovers
	f.mu.Lock()
	defer f.mu.Unlock()
	buckets = make(map[float64]uint64, len(FailoverBuckets))
	var cum uint64
	for i, b := range FailoverBuckets {
		if f.counts != nil {
			cum += f.counts[i]
		}
		buckets[b] = cum
	}
	return buckets, f.sum, f.count
}
