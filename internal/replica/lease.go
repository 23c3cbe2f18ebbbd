package replica

import "fmt"

// The leader lease on the data path. The rule, and its renewal by the
// node's heartbeats, are node/lease.go's (DESIGN.md section 20); this
// package is told two things: whether the lease is held now
// (Options.Lease), and that it lapsed (Manager.LeaseLapsed).
//
// While the lease is not held, a partition this node leads refuses
// clients' requests as they arrive (checkLease): produce with any acks,
// consumers' fetches, ListOffsets, OffsetForLeaderEpoch and
// DeleteRecords, NOT_LEADER_OR_FOLLOWER. That does not reach the requests
// already parked when the lease lapses, and on a leader cut off from its
// followers those are the delayed produces: their high watermark cannot
// move, so without more they would wait for the heal or their own
// timeout (franz-go's is 10 s) while a successor takes writes after
// about a session. So a lapse completes them too, as Kafka completes its
// delayed produces when a partition stops being led here:
//
//   - A delayed produce (acks=all, waiting for its followers) that the
//     high watermark has not passed is answered NOT_LEADER_OR_FOLLOWER
//     once a lapse is noted after it was written (delayedProduceOutcome).
//     It was never acknowledged, so nothing changes for durability: the
//     client refreshes its metadata and retries at the new leader. Its
//     records stay in this log: cut at the heal if a successor was
//     elected, or committed later if this node still leads, when an
//     idempotent producer's retry is answered with their offsets (a
//     plain producer's retry may write them twice, as after any
//     timeout). One the high watermark has passed is answered as
//     committed, lapse or not: every ISR member holds it, and the
//     controller elects only from the ISR.
//   - A consumer's long poll is woken and reads again; the read checks
//     the lease and answers NOT_LEADER_OR_FOLLOWER, so the consumer
//     moves to the new leader now rather than after its max wait
//     (franz-go's is 5 s), and its other partitions are answered with
//     what they hold.
//   - A follower's fetch stays parked: followers are served without a
//     lease (a follower only copies, and checks the epoch itself).
//
// Why a count of lapses, which a write compares with the count it was
// made under, rather than a flag or a look at the lease itself: the
// lapse is a passage of time, not an event anyone is woken by, so
// someone must notice it and wake the waiters anyway (the heartbeat
// goroutine, which watches the lease); a count then needs nothing at
// the heal, where a flag would have to be cleared and a produce woken
// just after the heal would wait on although its lease had lapsed; and
// reading an atomic costs the produce path nothing, where Held reads the
// clock. It is the leader epoch rule's twin: a write is answered
// NOT_LEADER_OR_FOLLOWER once the leader epoch it was made in ends and,
// unless it is committed by then, once the lease it was made under
// lapses.
//
// The heal needs no step: a write made after it reads the new count,
// and the refusals above look at the lease as it is. A lapse that heals
// before the heartbeat goroutine looks is not noted; the produces it
// held then wait on under a lease that came back, which an active
// controller granted while this node was not fenced (a fenced broker's
// heartbeats renew nothing), so their followers can fetch or the ISR
// can shrink: they are answered as they would have been without it.

// checkLease refuses a client's request on a partition this node leads
// while its leader lease has lapsed (Options.Lease): it may have been
// fenced and replaced by a controller it cannot hear.
func (p *Partition) checkLease() error {
	if l := p.m.opts.Lease; l != nil && !l.Held() {
		return fmt.Errorf("%w: %s: this node's leader lease lapsed (no heartbeat answered by the active controller lately), so it may have been replaced",
			ErrNotLeader, p)
	}
	return nil
}

// LeaseLapsed tells the manager that this node's leader lease has lapsed
// (Options.Lease no longer reports it held): the delayed produces of
// every partition it leads that the high watermark has not passed are
// answered NOT_LEADER_OR_FOLLOWER, and consumers' long polls there read
// again and answer the same (see the top of this file). It returns how
// many parked requests it woke, for the log.
//
// Call it after the lease stopped being held, once per lapse (a second
// call for one lapse answers nothing more than the first did). The
// node's heartbeat goroutine does, within about two heartbeat intervals
// of the lapse. It may run concurrently with anything here, itself
// included. It takes each partition's mu (shared) and then its wait, one
// partition at a time and nothing across them (not applyMu): the
// documented order.
func (m *Manager) LeaseLapsed() int {
	// Counted before the waiters are woken, and a produce registers
	// itself before it reads the count (waitForHighWatermark): either it
	// is woken here, or its first look sees the new count.
	m.leaseLapses.Add(1)
	woken := 0
	// A partition missing from this table was retired (its waiters were
	// woken then) or added after the lapse, when no write could pass
	// checkLease to park on it.
	for _, p := range m.table.Load().partitions {
		woken += p.wakeClientWaiters()
	}
	return woken
}

// wakeClientWaiters wakes the requests parked on p that the leader lease
// governs, if this node leads p: delayed produces and consumers' long
// polls. Followers' fetches are the log-end waiters, served without a
// lease, and are left alone. It returns how many it woke.
func (p *Partition) wakeClientWaiters() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.gone != nil || p.mu.leader != p.m.opts.NodeID {
		// A follower's parked consumers (KIP-392) read committed
		// records, whoever leads: no lease to lose.
		return 0
	}
	p.wait.Lock()
	defer p.wait.Unlock()
	woken := 0
	for w := range p.wait.waiters {
		if !w.logEnd {
			w.notify()
			woken++
		}
	}
	return woken
}
