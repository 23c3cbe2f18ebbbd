package txn

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
)

// Coordinator is the transaction coordinator of the __transaction_state
// partitions this node leads.
//
// Threads: every exported method may be called from many goroutines at
// once. There is no coordinator goroutine: see the package doc's
// Concurrency section. Close waits for the marker goroutines and timer
// callbacks it started.
type Coordinator struct {
	cfg     Config
	log     Log
	markers MarkerSender
	pids    *ProducerIDManager
	clock   clock.Clock
	logger  *slog.Logger
	// maxEpoch is the highest producer epoch (Short.MAX_VALUE). Tests
	// lower it, before any request, to reach exhaustion in a few bumps,
	// as Kafka's authors test it.
	maxEpoch int16

	counts counters // for Stats

	// ctx ends at Close; every partition's ctx derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts marker goroutines and running timer callbacks; both
	// enter only while the coordinator is open (enterBackground).
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		closed     bool
		partitions map[int32]*txnPartition
		// unloaded is the last incarnation of each partition Unload
		// dropped, whose appends a later Load waits out.
		unloaded                map[int32]*txnPartition
		abortTimer, expireTimer clock.Timer
	}
}

// New returns a coordinator of no partitions; Load adds them. New
// producer ids come from pids. It starts the periodic timeout and
// expiration checks.
func New(cfg Config, log Log, markers MarkerSender, pids *ProducerIDManager) *Coordinator {
	cfg = cfg.withDefaults()
	c := &Coordinator{
		cfg:      cfg,
		log:      log,
		markers:  markers,
		pids:     pids,
		clock:    cfg.Clock,
		logger:   cfg.Logger,
		maxEpoch: math.MaxInt16,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.partitions = make(map[int32]*txnPartition)
	c.mu.unloaded = make(map[int32]*txnPartition)
	c.mu.Lock()
	c.mu.abortTimer = c.afterFunc(cfg.AbortTimedOutTransactionCleanupInterval, c.runAbortTimedOut)
	c.mu.expireTimer = c.afterFunc(cfg.RemoveExpiredTransactionalIDCleanupInterval, c.runExpire)
	c.mu.Unlock()
	return c
}

// Close stops the timers and every partition's markers and waits for
// background work to end. Later requests answer
// COORDINATOR_NOT_AVAILABLE; appends under way end with their contexts.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	c.mu.abortTimer.Stop()
	c.mu.expireTimer.Stop()
	dropped := make([]*txnPartition, 0, len(c.mu.partitions))
	for _, ps := range c.mu.partitions {
		dropped = append(dropped, ps)
	}
	c.mu.partitions = make(map[int32]*txnPartition)
	c.mu.Unlock()

	c.cancel()
	for _, ps := range dropped {
		c.dropPartition(ps)
	}
	c.wg.Wait()
}

// lookup finds id's partition and metadata (nil if the id is unknown) if
// this node coordinates it now.
func (c *Coordinator) lookup(id string) (*txnPartition, *transactionMetadata, error) {
	p := PartitionFor(id, c.cfg.TransactionPartitions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, nil, ErrCoordinatorNotAvailable
	}
	ps := c.mu.partitions[p]
	switch {
	case ps == nil:
		return nil, nil, ErrNotCoordinator
	case ps.loading:
		return nil, nil, ErrCoordinatorLoadInProgress
	}
	return ps, ps.txns[id], nil
}

// lockMetadata returns id's metadata with its mu held, or nil metadata
// (and the partition) if this coordinator does not know id.
func (c *Coordinator) lockMetadata(id string) (*txnPartition, *transactionMetadata, error) {
	for {
		ps, m, err := c.lookup(id)
		if err != nil || m == nil {
			return ps, nil, err
		}
		m.mu.Lock()
		if !m.mu.removed {
			return ps, m, nil
		}
		// Expired, unloaded or never written meanwhile: look again.
		m.mu.Unlock()
	}
}

// insertMetadata adds a new id to ps, Empty at epoch -1 with producer id
// pid, unless ps no longer owns the partition (the lookup error) or the
// id exists (that metadata, and pid unused).
func (c *Coordinator) insertMetadata(ps *txnPartition, id string, pid int64, timeoutMs int32) (m *transactionMetadata, used bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ownsLocked(ps) {
		return nil, false, ErrNotCoordinator
	}
	if m := ps.txns[id]; m != nil {
		return m, false, nil
	}
	m = newTransactionMetadata(id, ps, newTransit(pid, timeoutMs, c.clock.Now().UnixMilli()))
	ps.txns[id] = m
	return m, true, nil
}

// removeLocked takes m out of its partition (expired, or a new id whose
// first record failed). REQUIRES: m.mu held.
func (c *Coordinator) removeLocked(m *transactionMetadata) {
	m.mu.removed = true
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := m.partition; ps.txns[m.transactionalID] == m {
		delete(ps.txns, m.transactionalID)
	}
}

// owns reports whether ps is the loaded incarnation of its partition.
func (c *Coordinator) owns(ps *txnPartition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownsLocked(ps)
}

// REQUIRES: c.mu held.
func (c *Coordinator) ownsLocked(ps *txnPartition) bool {
	return !c.mu.closed && c.mu.partitions[ps.partition] == ps && !ps.loading
}

// loadedTransactions returns every transaction of every loaded
// partition, and whether some partition is loading.
func (c *Coordinator) loadedTransactions() (txns []*transactionMetadata, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.mu.partitions {
		if ps.loading {
			loading = true
			continue
		}
		for _, m := range ps.txns {
			txns = append(txns, m)
		}
	}
	return txns, loading
}

// dropPartition ends an incarnation that no longer owns its partition:
// its appends and markers stop, and requests holding its metadata look
// the id up again.
func (c *Coordinator) dropPartition(ps *txnPartition) {
	ps.cancel()
	c.mu.Lock()
	txns := make([]*transactionMetadata, 0, len(ps.txns))
	for _, m := range ps.txns {
		txns = append(txns, m)
	}
	ps.txns = nil
	c.mu.Unlock()
	for _, m := range txns {
		m.mu.Lock()
		m.mu.removed = true
		m.mu.Unlock()
	}
}

// beginAppend admits one append to ps's partition, bounded by timeout,
// if ps still owns it. done must be called once the append returns.
func (c *Coordinator) beginAppend(ps *txnPartition, timeout time.Duration) (ctx context.Context, done func(), err error) {
	c.mu.Lock()
	if !c.ownsLocked(ps) {
		c.mu.Unlock()
		return nil, nil, ErrNotCoordinator
	}
	ps.appends.Add(1)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ps.ctx, timeout)
	return ctx, func() {
		cancel()
		ps.appends.Done()
	}, nil
}

// commitTransit writes next, which the caller made m's pending
// transition, and applies it once committed: Kafka's
// appendTransactionToLog and completeTransitionTo. applied, if not nil,
// runs under m.mu right after next is applied, so what follows the
// transition (a Complete pending behind a Prepare) is in place before any
// other request sees the new state. On failure nothing changes: the
// pending transition is cleared, unless keepPending (a Complete, retried
// by its marker goroutine).
//
// Nothing is applied unless this incarnation still owns the partition
// after the append; if it does not, the answer is NOT_COORDINATOR.
//
// REQUIRES: m.mu not held; m.mu.pending == next.
func (c *Coordinator) commitTransit(m *transactionMetadata, next *transit, keepPending bool, applied func()) error {
	rec := txnRecord(m.transactionalID, *next)
	ctx, done, err := c.beginAppend(m.partition, appendTimeout(*next))
	if err == nil {
		err = c.log.Append(ctx, m.partition.partition, []Record{rec})
		done()
		if err != nil {
			err = mapAppendError(err)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.pending != next {
		panic(fmt.Sprintf("txn: transactional id %q: pending transition to %v replaced while its record was written",
			m.transactionalID, next.state))
	}
	if m.mu.removed || !c.owns(m.partition) {
		// Whatever became of the append, the next owner's load has the
		// record if it landed.
		err = ErrNotCoordinator
	}
	if err != nil {
		if !keepPending {
			m.mu.pending = nil
		}
		return err
	}
	m.mu.cur = *next
	m.mu.pending = nil
	if applied != nil {
		applied()
	}
	return nil
}

// enterBackground admits one background goroutine or timer callback,
// unless the coordinator is closed.
func (c *Coordinator) enterBackground() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// goBackground runs f on a goroutine Close waits for (not at all once
// closed).
func (c *Coordinator) goBackground(f func()) {
	if !c.enterBackground() {
		return
	}
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// afterFunc is clock.Clock.AfterFunc for callbacks Close waits for and
// that do nothing once it has begun.
func (c *Coordinator) afterFunc(d time.Duration, f func()) clock.Timer {
	return c.clock.AfterFunc(d, func() {
		if !c.enterBackground() {
			return
		}
		defer c.wg.Done()
		f()
	})
}

// sleep waits d on the coordinator's clock, or less if ctx ends first:
// it reports whether the whole of d passed.
func (c *Coordinator) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// appendTimeout bounds the append of t: the transaction's timeout, as
// Kafka bounds it (a record of a non-positive one, which no request can
// set, gets request.timeout.ms).
func appendTimeout(t transit) time.Duration {
	if t.timeoutMs <= 0 {
		return tombstoneAppendTimeout
	}
	return time.Duration(t.timeoutMs) * time.Millisecond
}
