package txn

import "sync/atomic"

// Stats are the coordinator's figures for the node's metrics.
type Stats struct {
	// Ongoing is the transactions of the loaded partitions that are
	// Ongoing or being completed (PrepareCommit, PrepareAbort): the ones
	// that hold their partitions' last stable offsets.
	Ongoing int
	// Committed and Aborted count the transactions this node completed
	// (their Complete record committed) since it started; TimedOut the
	// aborts it started at a transaction's timeout.
	Committed, Aborted, TimedOut uint64
}

// counters are Stats' counts, kept as they happen.
type counters struct {
	committed, aborted, timedOut atomic.Uint64
}

// Stats returns the coordinator's figures now. It walks the loaded
// transactions, as ListTransactions does.
func (c *Coordinator) Stats() Stats {
	s := Stats{
		Committed: c.counts.committed.Load(),
		Aborted:   c.counts.aborted.Load(),
		TimedOut:  c.counts.timedOut.Load(),
	}
	all, _ := c.loadedTransactions()
	for _, m := range all {
		m.mu.Lock()
		st, removed := m.mu.cur.state, m.mu.removed
		m.mu.Unlock()
		if !removed && (st == StateOngoing || st == StatePrepareCommit || st == StatePrepareAbort) {
			s.Ongoing++
		}
	}
	return s
}
