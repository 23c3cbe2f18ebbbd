package replica

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/fjordmq/fjord/internal/bufpool"
	"github.com/fjordmq/fjord/internal/storage"
)

// The fetch path (DESIGN.md section 11), after kafkaserver resolved the
// fetch session to a partition list:
//
//  1. Each partition, in request order: found, led here, epoch fence;
//     then a read of whole batches from the log into a pooled buffer,
//     bounded by the high watermark (read_uncommitted), the last stable
//     offset (read_committed) or the log end offset (followers), and by
//     the byte limits.
//  2. If the bytes read are fewer than MinBytes (and no partition
//     failed), the fetch parks on every partition it names and is woken
//     when one of their high watermarks moves (or, for IsolationLogEnd,
//     on every append), when one is deleted or changes leader, when
//     MaxWait passes or when ctx ends. Woken, it reads every partition
//     again. Re-reading all of them, not only those that changed, keeps
//     the byte-limit accounting in one place; a woken fetch usually
//     finds data and answers, so the second pass is rare and cheap.
//
// Byte limits, as Kafka's (KIP-74): a partition gets at most its own
// MaxBytes and what is left of the response's MaxBytes, except that the
// first partition with data gets at least its first whole batch however
// large, so a consumer is never stuck behind a batch bigger than its
// limits. Later partitions get nothing rather than more than their share
// (the client rotates partition order, so each comes first in turn).
//
// Transactions (storage/txn.go): a read_committed read stops at the last
// stable offset and answers the aborted transactions that overlap what it
// read, for the consumer to skip. The last stable offset moves only when
// the high watermark does (past a marker) or the log start does, so the
// high-watermark wakeups serve read_committed fetches too.

// Read buffers come from the data path's pool (internal/bufpool). A read
// takes the class that fits its partition limit, at most maxReadBufBytes
// (storage allocates if a batch needs more). When the data read fills
// little of its buffer, it is moved to a buffer of its own size and the
// large one goes straight back: otherwise a fetch over a thousand
// partitions with a few bytes each would pin a thousand 1 MiB buffers
// until its response is written.
const maxReadBufBytes = 8 << 20

// maxFetchRanges bounds the file ranges (each an open descriptor until
// the response is written) one fetch holds; partitions past it are read.
// 64 ranges of a consumer's 1 MiB partition limit fill its 50 MiB fetch.
const maxFetchRanges = 64

// sameBuffer reports whether records aliases buf (storage reads into buf
// when it is large enough, else allocates).
func sameBuffer(records, buf []byte) bool {
	return len(records) > 0 && cap(buf) > 0 && &records[0] == &buf[:1][0]
}

// fetchSatisfied is the delayed fetch's completion rule (Kafka's
// DelayedFetch, simplified to what exists): answer at once when the
// request does not wait, when a partition must be acted on (it failed,
// or names another replica to read from), or when enough bytes are
// ready.
func fetchSatisfied(params FetchParams, bytes int, actOn bool) bool {
	return params.MaxWait <= 0 || actOn || bytes >= int(params.MinBytes)
}

// fetch is one Fetch call's state.
type fetch struct {
	m      *Manager
	params FetchParams
	parts  []FetchPartition
	res    *FetchResult
	bufs   [][]byte   // pooled buffers the results alias
	files  []*os.File // the results' file ranges' descriptors
	// resolved[i] is the partition parts[i] found on the last read.
	resolved []*Partition
	// noted[i]: a follower's fetch offset for parts[i] was recorded.
	// Once per request, at its arrival (start): a parked fetch read
	// again when woken is not a new fetch from the follower, and
	// counting it as one would keep a follower that stopped right
	// after sending it looking caught up for up to MaxWait more.
	noted []bool
	start time.Time
	// replayBytes is what the last read returned for partitions read
	// far behind their log end, charged to the replay budget once the
	// fetch answers; replayHeld: the last read held one back because the
	// budget was empty (replay.go).
	replayBytes int
	replayHeld  bool
}

// Fetch reads every partition, long-polling until MinBytes are ready;
// see kafkaserver.Replicas.
func (m *Manager) Fetch(ctx context.Context, params FetchParams, parts []FetchPartition) *FetchResult {
	f := &fetch{
		m:        m,
		params:   params,
		parts:    parts,
		res:      &FetchResult{Partitions: make([]FetchPartitionResult, len(parts))},
		resolved: make([]*Partition, len(parts)),
		noted:    make([]bool, len(parts)),
		start:    m.opts.Now(),
	}
	f.res.release = f.releaseBuffers
	defer f.chargeReplay()
	bytes, anyErr := f.readAll()
	if fetchSatisfied(params, bytes, anyErr) {
		return f.res
	}
	w := newWaiter(params.Isolation == IsolationLogEnd)
	registered := map[*Partition]bool{}
	defer func() {
		for p := range registered {
			p.removeWaiter(w)
		}
	}()
	timer := time.NewTimer(params.MaxWait)
	defer timer.Stop()
	var refill *time.Timer // while held by the replay budget (replay.go)
	parked := time.Now()
	defer func() { f.res.Waited = time.Since(parked) }()
	for {
		// Park on every partition the last read found, then read again
		// if that added any: a high-watermark move between that read and
		// the registration would otherwise be missed until MaxWait. A
		// partition re-created while we wait is a new *Partition, so it
		// is registered on the next pass.
		added := false
		for _, p := range f.resolved {
			if p != nil && !registered[p] {
				p.addWaiter(w)
				registered[p] = true
				added = true
			}
		}
		if added {
			if bytes, anyErr = f.readAll(); fetchSatisfied(params, bytes, anyErr) {
				return f.res
			}
			continue
		}
		// Held by the replay budget: an append would only wake it to be
		// held again, so it waits for the budget to refill instead.
		wake := w.ch
		var refilled <-chan time.Time
		if f.replayHeld {
			wake = nil
			d := f.replayWait(params.MaxWait)
			if refill == nil {
				refill = time.NewTimer(d)
				defer refill.Stop()
			} else {
				refill.Reset(d)
			}
			refilled = refill.C
		}
		select {
		case <-wake: // a high watermark moved (or an append, or leadership changed): read again
			if bytes, anyErr = f.readAll(); fetchSatisfied(params, bytes, anyErr) {
				return f.res
			}
		case <-refilled: // the replay budget holds bytes again
			if bytes, anyErr = f.readAll(); fetchSatisfied(params, bytes, anyErr) {
				return f.res
			}
		case <-timer.C: // MaxWait: answer with whatever is there now
			f.readAll()
			return f.res
		case <-ctx.Done(): // the connection went away: the last read is as good as any
			return f.res
		}
	}
}

func (f *fetch) releaseBuffers() {
	for _, b := range f.bufs {
		bufpool.Put(b)
	}
	f.bufs = f.bufs[:0]
	for _, file := range f.files {
		file.Close() // read-only: nothing to lose
	}
	f.files = f.files[:0]
}

// readAll reads every partition afresh, in request order, applying the
// byte limits; it returns the bytes read and whether any partition's
// answer is one the client must act on at once (an error, a preferred
// read replica).
func (f *fetch) readAll() (bytes int, actOn bool) {
	f.releaseBuffers()
	remaining := int64(f.params.MaxBytes)
	minOne := true
	f.replayBytes, f.replayHeld = 0, false
	for i := range f.parts {
		fp := &f.parts[i]
		r := &f.res.Partitions[i]
		p, err := f.m.partition(fp.Topic, fp.TopicID, fp.Partition)
		f.resolved[i] = p
		if err == nil {
			limit := int(max(min(int64(fp.MaxBytes), remaining), 0))
			*r, err = f.readPartition(p, i, limit, minOne)
		}
		if err != nil {
			*r = FetchPartitionResult{Err: err, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1,
				DivergingEpoch: noDivergence}
			if p != nil && f.params.Isolation == IsolationLogEnd && errors.Is(err, ErrOffsetOutOfRange) {
				// A follower behind this log's start (retention or
				// DeleteRecords passed it) starts again there: it needs
				// to know where that is.
				r.LogStartOffset, r.HighWatermark = p.log.LogStartOffset(), p.log.HighWatermark()
			}
			actOn = true
			continue
		}
		actOn = actOn || r.Redirect
		if n := r.Size(); n > 0 {
			minOne = false
			remaining -= int64(n)
			bytes += n
		}
	}
	return bytes, actOn
}

// readPartition checks leadership and the epoch fence and reads at most
// limit bytes (at least one whole batch when minOne) below the bound the
// isolation level sets, or names the replica a consumer should read
// from instead (selector.go).
func (f *fetch) readPartition(p *Partition, i int, limit int, minOne bool) (FetchPartitionResult, error) {
	fp := &f.parts[i]
	if f.params.Isolation == IsolationLogEnd {
		return f.readForFollower(p, i, limit, minOne)
	}
	var asFollower bool
	var err error
	if f.params.Client != nil {
		asFollower, err = p.checkConsumerRead(fp.CurrentLeaderEpoch)
	} else {
		_, err = p.checkLeader(fp.CurrentLeaderEpoch)
	}
	if err != nil {
		return FetchPartitionResult{}, err
	}
	if !asFollower {
		// The lease is a leader's: a follower's copy below its high
		// watermark is committed whoever leads now.
		if err := p.checkLease(); err != nil {
			return FetchPartitionResult{}, err
		}
		if id := p.preferredReadReplica(f.params.Client, fp.FetchOffset); id >= 0 {
			// Kafka's answer: no records, the offsets, and the replica.
			hw := p.log.HighWatermark()
			return FetchPartitionResult{
				HighWatermark: hw, LastStableOffset: lastStable(p.log, hw), LogStartOffset: p.log.LogStartOffset(),
				LastOffset: -1, DivergingEpoch: noDivergence, Redirect: true, PreferredReadReplica: id,
			}, nil
		}
	}
	limit, replay, held := f.replayLimit(p, fp.FetchOffset, limit)
	if held {
		f.replayHeld = true
		minOne = false // not even one batch: the budget is spent
	}
	r, err := f.readLog(p, fp, limit, minOne)
	r.FromFollower = asFollower
	if replay && err == nil {
		f.replayBytes += r.Size()
	}
	return r, err
}

// readForFollower is readPartition for a follower's fetch: a leader's
// checks of the follower and of its history, the fetch recorded, then
// the read to the log end.
func (f *fetch) readForFollower(p *Partition, i int, limit int, minOne bool) (FetchPartitionResult, error) {
	fp := &f.parts[i]
	term, err := p.checkLeader(fp.CurrentLeaderEpoch)
	if err != nil {
		return FetchPartitionResult{}, err
	}
	if err := p.checkFollower(f.params.ReplicaID); err != nil {
		return FetchPartitionResult{}, err
	}
	if d, diverged := p.divergence(fp.FetchOffset, fp.LastFetchedEpoch); diverged {
		hw := p.log.HighWatermark()
		return FetchPartitionResult{
			HighWatermark:    hw,
			LastStableOffset: lastStable(p.log, hw),
			LogStartOffset:   p.log.LogStartOffset(),
			LastOffset:       -1,
			DivergingEpoch:   d,
		}, nil
	}
	// Before the read, so the high watermark answered already counts
	// what this fetch says the follower holds.
	if !f.noted[i] {
		f.noted[i] = true
		p.noteFollowerFetch(followerFetch{term: term, id: f.params.ReplicaID, brokerEpoch: f.params.ReplicaEpoch,
			offset: fp.FetchOffset, logStart: fp.LogStartOffset}, f.start)
	}
	return f.readLog(p, fp, limit, minOne)
}

// readLog reads p's log for fp, the checks done: at most limit bytes (at
// least one whole batch when minOne) below the isolation level's bound.
func (f *fetch) readLog(p *Partition, fp *FetchPartition, limit int, minOne bool) (FetchPartitionResult, error) {
	// The high watermark is read before the records, so every record
	// returned is below the high watermark returned.
	hw := p.log.HighWatermark()
	lso := lastStable(p.log, hw)
	var bound int64
	switch f.params.Isolation {
	case IsolationTxnCommitted:
		bound = lso
	case IsolationLogEnd:
		bound = p.log.LogEndOffset()
	default:
		bound = hw
	}
	if limit == 0 && !minOne {
		// Nothing may be returned, but an offset out of range is still
		// an error: storage checks the range before the bound.
		bound = fp.FetchOffset
	}
	buf := bufpool.Get(min(limit, maxReadBufBytes))
	var rr storage.ReadResult
	var err error
	minRange := -1 // no file range: read into buf
	if f.params.MinRangeBytes > 0 && len(f.files) < maxFetchRanges {
		minRange = f.params.MinRangeBytes
	}
	switch {
	case f.params.Isolation == IsolationTxnCommitted:
		rr, err = p.log.ReadCommitted(buf, fp.FetchOffset, limit, bound, minRange)
	case minRange >= 0:
		rr, err = p.log.ReadRange(buf, fp.FetchOffset, limit, bound, minRange)
	default:
		rr, err = p.log.ReadInto(buf, fp.FetchOffset, limit, bound)
	}
	if err != nil {
		bufpool.Put(buf)
		return FetchPartitionResult{}, p.logError(err)
	}
	if r := rr.Range; r.File != nil {
		bufpool.Put(buf)
		last := rr.LastOffset
		aborted := rr.AbortedTxns
		if !minOne && r.Size > limit {
			r.File.Close() // see below: only the first partition with data may exceed its limit
			r, last, aborted = storage.FileRange{}, -1, nil
		} else {
			f.files = append(f.files, r.File)
		}
		return FetchPartitionResult{
			HighWatermark:    hw,
			LastStableOffset: lso,
			LogStartOffset:   rr.LogStartOffset,
			Range:            r,
			LastOffset:       last,
			AbortedTxns:      aborted,
			DivergingEpoch:   noDivergence,
		}, nil
	}
	records := rr.Records
	if !minOne && len(records) > limit {
		// Storage always returns the first whole batch; only the first
		// partition with data may exceed its limit.
		records = nil
	}
	last, aborted := rr.LastOffset, rr.AbortedTxns
	switch {
	case len(records) == 0:
		bufpool.Put(buf)
		records, last, aborted = nil, -1, nil
	case !sameBuffer(records, buf):
		bufpool.Put(buf) // storage allocated: the batch was larger than the buffer
	case bufpool.ClassBytes(len(records)) < cap(buf)/2:
		small := bufpool.Get(len(records))
		records = append(small[:0], records...)
		bufpool.Put(buf)
		f.bufs = append(f.bufs, small)
	default:
		f.bufs = append(f.bufs, buf)
	}
	return FetchPartitionResult{
		HighWatermark:    hw,
		LastStableOffset: lso,
		LogStartOffset:   rr.LogStartOffset,
		Records:          records,
		LastOffset:       last,
		AbortedTxns:      aborted,
		DivergingEpoch:   noDivergence,
	}, nil
}

// lastStable is the log's last stable offset, at most hw: the high
// watermark an answer carries was read first, and may be older.
func lastStable(l *storage.Log, hw int64) int64 { return min(l.LastStableOffset(), hw) }

var noDivergence = EpochEndOffset{Epoch: -1, EndOffset: -1}

// divergence is the leader's check of a follower's fetch (KIP-595's
// DivergingEpoch, which replaces a separate OffsetForLeaderEpoch round
// trip): the follower's last batch is in lastFetchedEpoch; if this log
// has no such epoch, or ends that epoch before the fetch offset, the
// follower's log differs from here on and must be truncated to where
// this log's epoch at or below lastFetchedEpoch ends.
func (p *Partition) divergence(fetchOffset int64, lastFetchedEpoch int32) (EpochEndOffset, bool) {
	if lastFetchedEpoch < 0 {
		return noDivergence, false
	}
	leo := p.log.LogEndOffset()
	epoch, end := p.log.LeaderEpochs().EndOffsetFor(lastFetchedEpoch, leo)
	if epoch < 0 {
		// No epoch here at or below the follower's: this log holds
		// nothing written in any epoch the follower knows, so the
		// follower keeps at most what this log holds. (-1 on the wire
		// would mean "no divergence".)
		return EpochEndOffset{Epoch: 0, EndOffset: min(leo, fetchOffset)}, fetchOffset > 0
	}
	if epoch < lastFetchedEpoch || end < fetchOffset {
		return EpochEndOffset{Epoch: epoch, EndOffset: end}, true
	}
	return noDivergence, false
}
