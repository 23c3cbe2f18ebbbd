package bench

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestSeqSet(t *testing.T) {
	var s seqSet
	for _, c := range []int64{0, 1, 63, 64, chunkBits - 1, chunkBits, 5*chunkBits + 17} {
		if !s.add(c) {
			t.Errorf("first add of %d reported a duplicate", c)
		}
		if s.add(c) {
			t.Errorf("second add of %d was not a duplicate", c)
		}
	}
	if s.add(2) == false {
		t.Error("2 was never added")
	}
}

// Consumers of one subscription add to the same set at once; each
// counter is new exactly once.
func TestSeqSetConcurrent(t *testing.T) {
	var s seqSet
	const n = chunkBits + chunkBits/8 // across a chunk boundary
	var fresh, dup atomic.Int64
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every goroutine adds every counter, in different orders.
			for i := range int64(n) {
				c := i
				if g%2 == 1 {
					c = n - 1 - i
				}
				if s.add(c) {
					fresh.Add(1)
				} else {
					dup.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if fresh.Load() != n || dup.Load() != 2*n {
		t.Errorf("%d new and %d duplicates, want %d and %d", fresh.Load(), dup.Load(), n, 2*n)
	}
}
