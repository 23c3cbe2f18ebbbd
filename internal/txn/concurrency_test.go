package txn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Producers run transactions (V1 and V2, commits and aborts, takeovers)
// while the coordinator's partitions are unloaded and loaded again at
// new epochs underneath them. Run under -race it checks the locking;
// afterwards it checks that no two appends of one id overlapped and that,
// once everything has settled, memory holds exactly what the log's last
// record of each id says (nothing changed in memory that is not
// committed, nothing committed that memory missed).
func TestConcurrentRequestsLoadsAndUnloads(t *testing.T) {
	h := newHarness(t)
	const producers = 6
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		commits atomic.Int64
		// ended counts each producer's ended transactions: the loads
		// and unloads go on until every producer has ended one, so a
		// main goroutine that runs ahead of the producers (two busy
		// cores) cannot stop them before they did anything.
		ended [producers]atomic.Int64
	)
	for i := range producers {
		id := fmt.Sprintf("producer-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for !stop.Load() {
				pid, epoch, err := h.c.InitProducerID(ctx, id, testTimeoutMs, -1, -1)
				if err != nil {
					runtime.Gosched()
					continue
				}
				for range 3 {
					tps := []TopicPartition{tp("t", rng.Int32N(4)), tp("u", rng.Int32N(2))}
					if err := h.c.AddPartitionsToTxn(ctx, id, pid, epoch, tps, false); err != nil {
						break
					}
					tv2 := rng.IntN(2) == 0
					p, e, err := h.c.EndTxn(ctx, id, pid, epoch, rng.IntN(3) > 0, tv2)
					if err != nil {
						break
					}
					commits.Add(1)
					ended[i].Add(1)
					if tv2 {
						pid, epoch = p, e
					}
				}
			}
		}()
	}
	// A takeover now and then: a second session of a random id fences
	// whatever the first has Ongoing.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 2))
		for !stop.Load() {
			_, _, _ = h.c.InitProducerID(ctx, fmt.Sprintf("producer-%d", rng.IntN(producers)), testTimeoutMs, -1, -1)
			runtime.Gosched()
		}
	}()

	rng := rand.New(rand.NewPCG(7, 7))
	epoch := int32(testCoordinatorEpoch)
	allEnded := func() bool {
		for i := range ended {
			if ended[i].Load() == 0 {
				return false
			}
		}
		return true
	}
	// A bound on liveness only: a producer that never ends a
	// transaction in a minute is stuck.
	deadline := time.Now().Add(time.Minute)
	for n := 0; n < 150 || !allEnded(); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d loads, some producer has ended no transaction", n)
		}
		p := rng.Int32N(testPartitions)
		epoch++
		if rng.IntN(2) == 0 {
			h.c.Unload(p)
		}
		if err := h.c.Load(p, epoch, h.log.reader(p)); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()

	for i := range producers {
		h.waitCompleted(fmt.Sprintf("producer-%d", i))
	}
	for i := range producers {
		id := fmt.Sprintf("producer-%d", i)
		hist := h.log.history(t, id)
		if len(hist) == 0 {
			t.Fatalf("%s wrote nothing", id)
		}
		cur, pending := h.current(id)
		if last := hist[len(hist)-1]; pending || !reflect.DeepEqual(cur, last) {
			t.Fatalf("%s: memory %+v (pending %v), log's last record %+v", id, cur, pending, last)
		}
	}
	if n := h.log.overlapCount(); n != 0 {
		t.Fatalf("%d overlapping appends of one id", n)
	}
	if commits.Load() == 0 {
		t.Fatal("no transaction ended: the test exercised nothing")
	}
	t.Logf("%d transactions ended, %d appends", commits.Load(), h.log.appendCount())
}
