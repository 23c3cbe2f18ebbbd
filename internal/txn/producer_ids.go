package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Expected conditions.
var (
	// ErrInvalidBlock: the allocator returned a block that is empty,
	// negative, or starts below ids already handed out. No id from it is
	// used, because a reused producer id silently merges two producers'
	// sequence state.
	ErrInvalidBlock = errors.New("txn: invalid producer id block")
)

// Allocator commits a new block of producer ids for nodeID and returns
// it as [first, first+count): the producer-id part of the control
// plane's seam, controlplane.Client (the local controller on a cluster of
// one). It may be slow (a Raft commit) and may fail with the control
// plane's retriable errors (NOT_CONTROLLER, REQUEST_TIMED_OUT), which the
// caller retries.
type Allocator interface {
	AllocateProducerIDs(ctx context.Context, nodeID int32) (first, count int64, err error)
}

// ProducerIDManager hands out producer ids from blocks fetched through an
// Allocator. Safe for concurrent use.
//
// At most one block fetch is in flight: callers that find the block empty
// while a fetch is running wait for it instead of committing blocks of
// their own (a burst of producers starting at once would otherwise burn
// one block each). The fetch runs in the goroutine of the caller that
// started it, under that caller's context; there is no background
// goroutine to stop.
type ProducerIDManager struct {
	alloc  Allocator
	nodeID int32

	mu struct {
		sync.Mutex
		// next and end bound the unused part of the current block:
		// [next, end). Invariant: next <= end, and every id below end
		// has been handed out or abandoned.
		next, end int64
		// fetch is the block fetch in flight, nil when none.
		fetch *blockFetch
	}
}

// blockFetch is one call to the Allocator that other callers can wait on.
type blockFetch struct {
	done chan struct{} // closed when err is set
	// err is the allocator's error, nil on success. Written once
	// before done is closed.
	err error
	// abandoned: the fetch failed because its own caller's context
	// ended. The waiters' contexts may still be live, so they try
	// again instead of sharing an error that is not theirs.
	abandoned bool
}

// NewProducerIDManager returns a manager that fetches blocks for nodeID
// from alloc. It fetches nothing until the first InitProducerID.
func NewProducerIDManager(alloc Allocator, nodeID int32) *ProducerIDManager {
	return &ProducerIDManager{alloc: alloc, nodeID: nodeID}
}

// InitProducerID returns a producer id never handed out before, with
// epoch 0. When the current block is used up it fetches the next one (or
// waits for the fetch another caller started). The allocator's errors are
// returned as they are, so the protocol layer can answer with their
// Kafka codes; ctx ending while waiting returns ctx.Err().
func (m *ProducerIDManager) InitProducerID(ctx context.Context) (producerID int64, epoch int16, err error) {
	for {
		m.mu.Lock()
		if m.mu.next < m.mu.end {
			id := m.mu.next
			m.mu.next++
			m.mu.Unlock()
			return id, 0, nil
		}
		if f := m.mu.fetch; f != nil {
			m.mu.Unlock()
			select {
			case <-f.done:
				// The fetch ended: take an id from the new block, or
				// share its error (unless it was only its caller's
				// context ending, then go round and maybe fetch).
				if f.err != nil && !f.abandoned {
					return -1, -1, f.err
				}
				continue
			case <-ctx.Done():
				// This caller gave up; the fetch goes on for the others.
				return -1, -1, ctx.Err()
			}
		}
		f := &blockFetch{done: make(chan struct{})}
		m.mu.fetch = f
		m.mu.Unlock()

		m.fetchBlock(ctx, f)
		if f.err != nil {
			return -1, -1, f.err
		}
	}
}

// fetchBlock calls the allocator without the lock held and installs the
// block it returns, then wakes the waiters.
func (m *ProducerIDManager) fetchBlock(ctx context.Context, f *blockFetch) {
	first, count, err := m.alloc.AllocateProducerIDs(ctx, m.nodeID)

	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err != nil:
		f.err = err
		f.abandoned = ctx.Err() != nil
	case count <= 0 || first < 0 || first > maxInt64-count:
		f.err = fmt.Errorf("%w: first=%d count=%d", ErrInvalidBlock, first, count)
	case first < m.mu.end:
		f.err = fmt.Errorf("%w: block [%d, %d) overlaps ids below %d already handed out",
			ErrInvalidBlock, first, first+count, m.mu.end)
	default:
		m.mu.next, m.mu.end = first, first+count
	}
	m.mu.fetch = nil
	close(f.done)
}

const maxInt64 = int64(^uint64(0) >> 1)
