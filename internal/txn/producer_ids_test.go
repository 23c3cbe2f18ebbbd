package txn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeAllocator hands out consecutive blocks of blockSize ids, starting at
// start, like the controller does from metadata.Image.NextProducerID. It
// records how many calls overlap, so a test can prove only one fetch is
// ever in flight.
type fakeAllocator struct {
	blockSize int64

	// gate, if set, is received from before answering, so a test can
	// hold a fetch in flight.
	gate chan struct{}
	// errs are returned by the first len(errs) calls, in order (nil
	// entries answer normally).
	errs []error

	mu       sync.Mutex
	next     int64
	calls    int
	nodeIDs  []int32
	inFlight atomic.Int32
	maxInFl  atomic.Int32
}

func (a *fakeAllocator) AllocateProducerIDs(ctx context.Context, nodeID int32) (int64, int64, error) {
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	for {
		m := a.maxInFl.Load()
		if n <= m || a.maxInFl.CompareAndSwap(m, n) {
			break
		}
	}
	if a.gate != nil {
		select {
		case <-a.gate:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	call := a.calls
	a.calls++
	a.nodeIDs = append(a.nodeIDs, nodeID)
	if call < len(a.errs) && a.errs[call] != nil {
		return 0, 0, a.errs[call]
	}
	first := a.next
	a.next += a.blockSize
	return first, a.blockSize, nil
}

func (a *fakeAllocator) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

func TestProducerIDsBlockBoundaries(t *testing.T) {
	alloc := &fakeAllocator{blockSize: 3, next: 1000}
	m := NewProducerIDManager(alloc, 7)
	ctx := context.Background()

	if got := alloc.callCount(); got != 0 {
		t.Fatalf("allocator called %d times before the first InitProducerID", got)
	}
	for i, want := range []int64{1000, 1001, 1002, 1003, 1004, 1005, 1006} {
		id, epoch, err := m.InitProducerID(ctx)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if id != want || epoch != 0 {
			t.Fatalf("call %d: got id %d epoch %d, want %d epoch 0", i, id, epoch, want)
		}
		// A block is fetched only once the previous one is used up:
		// ids 1000-1002 from the first, 1003-1005 from the second.
		if wantCalls := int(i/3) + 1; alloc.callCount() != wantCalls {
			t.Fatalf("after id %d: %d allocator calls, want %d", id, alloc.callCount(), wantCalls)
		}
	}
	for _, n := range alloc.nodeIDs {
		if n != 7 {
			t.Fatalf("allocator asked for node %d, want 7", n)
		}
	}
}

func TestProducerIDsConcurrentDistinct(t *testing.T) {
	const goroutines, perGoroutine = 100, 50
	alloc := &fakeAllocator{blockSize: 37} // odd size: blocks end mid-burst
	m := NewProducerIDManager(alloc, 1)

	ids := make([][]int64, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range perGoroutine {
				id, _, err := m.InitProducerID(context.Background())
				if err != nil {
					errs <- err
					return
				}
				ids[g] = append(ids[g], id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := make(map[int64]bool, goroutines*perGoroutine)
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("producer id %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != goroutines*perGoroutine {
		t.Fatalf("got %d ids, want %d", len(seen), goroutines*perGoroutine)
	}
	if got := alloc.maxInFl.Load(); got != 1 {
		t.Fatalf("%d block fetches were in flight at once, want 1", got)
	}
	// Every block but the last is used up before the next is fetched,
	// so no ids are wasted while the manager is running.
	wantCalls := (goroutines*perGoroutine + 36) / 37
	if got := alloc.callCount(); got != wantCalls {
		t.Fatalf("%d blocks fetched for %d ids, want %d", got, goroutines*perGoroutine, wantCalls)
	}
}

// Callers that find the block empty while a fetch is in flight wait for
// that fetch rather than committing blocks of their own.
func TestProducerIDsWaitersShareOneFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alloc := &fakeAllocator{blockSize: 100, gate: make(chan struct{})}
		m := NewProducerIDManager(alloc, 1)

		const callers = 20
		got := make(chan int64, callers)
		for range callers {
			go func() {
				id, _, err := m.InitProducerID(context.Background())
				if err != nil {
					t.Error(err)
				}
				got <- id
			}()
		}
		synctest.Wait() // one caller is in the allocator, the rest wait on it
		if n := alloc.inFlight.Load(); n != 1 {
			t.Fatalf("%d fetches in flight, want 1", n)
		}
		close(alloc.gate)

		seen := map[int64]bool{}
		for range callers {
			id := <-got
			if id < 0 || id >= 100 || seen[id] {
				t.Fatalf("bad or repeated id %d", id)
			}
			seen[id] = true
		}
		if n := alloc.callCount(); n != 1 {
			t.Fatalf("allocator called %d times, want 1", n)
		}
	})
}

// The allocator's errors reach the caller unchanged (the protocol layer
// maps NOT_CONTROLLER and REQUEST_TIMED_OUT to retriable codes), callers
// waiting on the failed fetch get the same error, and the next call tries
// again.
func TestProducerIDsAllocatorError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alloc := &fakeAllocator{
			blockSize: 10,
			gate:      make(chan struct{}),
			errs:      []error{kerr.NotController},
		}
		m := NewProducerIDManager(alloc, 1)

		const callers = 5
		errs := make(chan error, callers)
		for range callers {
			go func() {
				_, _, err := m.InitProducerID(context.Background())
				errs <- err
			}()
		}
		synctest.Wait()
		alloc.gate <- struct{}{} // let exactly the one fetch answer
		for range callers {
			if err := <-errs; !errors.Is(err, kerr.NotController) {
				t.Fatalf("got %v, want NOT_CONTROLLER", err)
			}
		}
		if n := alloc.callCount(); n != 1 {
			t.Fatalf("allocator called %d times, want 1", n)
		}

		close(alloc.gate)
		id, _, err := m.InitProducerID(context.Background())
		if err != nil || id != 0 {
			t.Fatalf("retry after error: id %d err %v, want 0 <nil>", id, err)
		}
	})
}

// A fetch that fails only because its own caller gave up must not fail
// the callers waiting on it: they fetch again.
func TestProducerIDsAbandonedFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alloc := &fakeAllocator{blockSize: 10, gate: make(chan struct{})}
		m := NewProducerIDManager(alloc, 1)

		ctx, cancel := context.WithCancel(context.Background())
		firstErr := make(chan error, 1)
		go func() {
			_, _, err := m.InitProducerID(ctx)
			firstErr <- err
		}()
		synctest.Wait() // the first caller is in the allocator

		waiterID := make(chan int64, 1)
		go func() {
			id, _, err := m.InitProducerID(context.Background())
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
			waiterID <- id
		}()
		synctest.Wait() // the waiter waits on the first caller's fetch

		cancel()
		if err := <-firstErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("first caller: got %v, want context.Canceled", err)
		}
		synctest.Wait() // the waiter has started its own fetch
		close(alloc.gate)
		if id := <-waiterID; id != 0 {
			t.Fatalf("waiter got id %d, want 0", id)
		}
	})
}

// A caller whose context ends while it waits for another's fetch returns
// at once; the fetch goes on and its block serves later callers.
func TestProducerIDsWaiterContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alloc := &fakeAllocator{blockSize: 10, gate: make(chan struct{})}
		m := NewProducerIDManager(alloc, 1)

		fetcherID := make(chan int64, 1)
		go func() {
			id, _, err := m.InitProducerID(context.Background())
			if err != nil {
				t.Errorf("fetcher: %v", err)
			}
			fetcherID <- id
		}()
		synctest.Wait()

		ctx, cancel := context.WithCancel(context.Background())
		waiterErr := make(chan error, 1)
		go func() {
			_, _, err := m.InitProducerID(ctx)
			waiterErr <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-waiterErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter: got %v, want context.Canceled", err)
		}

		close(alloc.gate)
		if id := <-fetcherID; id != 0 {
			t.Fatalf("fetcher got %d, want 0", id)
		}
		if id, _, err := m.InitProducerID(context.Background()); err != nil || id != 1 {
			t.Fatalf("next call: id %d err %v, want 1 <nil>", id, err)
		}
		if n := alloc.callCount(); n != 1 {
			t.Fatalf("allocator called %d times, want 1", n)
		}
	})
}

// stubAllocator returns fixed blocks in order.
type stubAllocator struct {
	blocks [][2]int64
	i      int
}

func (a *stubAllocator) AllocateProducerIDs(context.Context, int32) (int64, int64, error) {
	b := a.blocks[a.i]
	a.i++
	return b[0], b[1], nil
}

func TestProducerIDsInvalidBlock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks [][2]int64
		good   int // ids handed out before the bad block
	}{
		{"empty", [][2]int64{{0, 0}}, 0},
		{"negative count", [][2]int64{{5, -1}}, 0},
		{"negative first", [][2]int64{{-10, 5}}, 0},
		{"overflows int64", [][2]int64{{maxInt64 - 1, 5}}, 0},
		{"overlaps previous block", [][2]int64{{100, 2}, {101, 2}}, 2},
		{"repeats previous block", [][2]int64{{100, 2}, {100, 2}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewProducerIDManager(&stubAllocator{blocks: tc.blocks}, 1)
			for i := range tc.good {
				if _, _, err := m.InitProducerID(context.Background()); err != nil {
					t.Fatalf("id %d: %v", i, err)
				}
			}
			id, _, err := m.InitProducerID(context.Background())
			if !errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("got id %d err %v, want ErrInvalidBlock", id, err)
			}
		})
	}

	// A gap between blocks is fine: ids abandoned by another node or a
	// previous run are simply never used.
	m := NewProducerIDManager(&stubAllocator{blocks: [][2]int64{{0, 1}, {50, 1}}}, 1)
	for _, want := range []int64{0, 50} {
		if id, _, err := m.InitProducerID(context.Background()); err != nil || id != want {
			t.Fatalf("got %d %v, want %d", id, err, want)
		}
	}
}
