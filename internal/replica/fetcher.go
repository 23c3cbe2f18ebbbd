package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
)

// Followers copy their leaders' logs (Kafka's replica fetcher threads):
// one fetcher per leader this node follows, carrying every partition it
// follows there, long-polling the leader with Fetch requests that name a
// replica id, so data moves as soon as the leader has it.
//
// Per partition, on each answer:
//   - records are appended with Log.AppendAsFollower: offsets, leader
//     epochs and producer state exactly as the leader wrote them;
//   - a DivergingEpoch truncates the log to where the leader's history
//     and this one agree (the smaller of the two ends of that epoch), and
//     the next fetch goes on from there;
//   - the follower's high watermark becomes min(leader's, own log end),
//     and its log start follows the leader's (up to that high
//     watermark), so records deleted there are deleted here;
//   - OFFSET_OUT_OF_RANGE below the leader's log start (the follower
//     fell behind retention) starts the log again at the leader's start;
//   - an error (a leader that moved, an epoch fence) leaves the partition
//     to the next image, which names the new leader.
//
// Under flush.policy=ack the fetcher fsyncs what it appended before it
// sends the next fetch, so the offset a fetch names is what this node
// holds on disk: the leader counts it toward the high watermark as it
// is. (The alternative, a separate flushed offset in each fetch, needs a
// field Kafka's Fetch does not have; an fsync per round is one
// group-committed fsync for every partition appended in that round.)
//
// Threads: one goroutine per fetcher, started and stopped by ApplyImage
// (fetchers.apply) and Close; it is the only writer of the logs it
// copies.

// LeaderTransport sends a follower's fetch to the leader named by node
// id (node wires the Kafka-protocol client). Results answer partitions
// in request order; their errors are this package's sentinels (kerr
// values). A request that gets no answer returns an error.
type LeaderTransport interface {
	Fetch(ctx context.Context, leader int32, req LeaderFetch) ([]LeaderFetchResult, error)
}

// LeaderFetch is one follower fetch.
type LeaderFetch struct {
	ReplicaID   int32
	BrokerEpoch int64
	MaxWait     time.Duration
	MinBytes    int32
	MaxBytes    int32
	Partitions  []LeaderFetchPartition
}

// LeaderFetchPartition is one partition of a follower fetch.
type LeaderFetchPartition struct {
	Topic              string
	TopicID            metadata.UUID
	Partition          int32
	FetchOffset        int64
	LastFetchedEpoch   int32
	CurrentLeaderEpoch int32
	MaxBytes           int32
	// LogStartOffset is this follower's log start offset: the leader
	// names the follower to consumers only for offsets its copy holds
	// (selector.go).
	LogStartOffset int64
}

// LeaderFetchResult is the leader's answer for one partition.
type LeaderFetchResult struct {
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	DivergingEpoch EpochEndOffset
	Records        []byte
}

// Fetch sizes: a round carries at most followerPartitionBytes of each
// partition and followerFetchBytes in all, and waits up to
// followerMaxWait for a first byte.
const (
	followerMaxWait        = 500 * time.Millisecond
	followerPartitionBytes = 1 << 20
	followerFetchBytes     = 16 << 20
	fetcherBackoffMin      = 20 * time.Millisecond
	fetcherBackoffMax      = time.Second
)

type fetchers struct {
	m        *Manager
	mu       sync.Mutex
	byLeader map[int32]*fetcher
}

type fetcher struct {
	fs     *fetchers
	leader int32
	parts  atomic.Pointer[[]*Partition]
	stop   chan struct{}
	// round cancels the fetch in flight (nil between fetches), so a
	// partition added to the fetcher is fetched at once rather than
	// after the leader's long poll of the others (up to followerMaxWait).
	// That matters after a failover: a new leader's high watermark waits
	// for each follower's first fetch of the new term.
	roundMu sync.Mutex
	round   context.CancelFunc
}

// interrupt cancels the fetch in flight, if any; the fetcher then sends
// the next one at once. (franz-go drops the connection of a cancelled
// fetch, so the next one does not queue behind the cancelled one's
// answer.)
func (f *fetcher) interrupt() {
	f.roundMu.Lock()
	defer f.roundMu.Unlock()
	if f.round != nil {
		f.round()
	}
}

func newFetchers(m *Manager) *fetchers {
	return &fetchers{m: m, byLeader: map[int32]*fetcher{}}
}

// apply gives each leader's fetcher the partitions this node follows
// there, starting and stopping fetchers as leaders come and go.
// REQUIRES: m.applyMu held (one caller at a time, in image order).
func (fs *fetchers) apply(img *metadata.Image, table *partitionTable) {
	if fs.m.opts.Leaders == nil {
		return
	}
	self := fs.m.opts.NodeID
	want := map[int32][]*Partition{}
	for _, p := range table.partitions {
		p.mu.RLock()
		leader, gone := p.mu.leader, p.mu.gone
		p.mu.RUnlock()
		// A failed log takes no more appends (offline.go).
		if gone == nil && leader >= 0 && leader != self && !p.log.Failed() {
			want[leader] = append(want[leader], p)
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for leader, f := range fs.byLeader {
		if _, ok := want[leader]; !ok {
			close(f.stop)
			delete(fs.byLeader, leader)
		}
	}
	for leader, parts := range want {
		slices.SortFunc(parts, func(a, b *Partition) int {
			if c := compareStrings(a.topic, b.topic); c != 0 {
				return c
			}
			return int(a.partition - b.partition)
		})
		f := fs.byLeader[leader]
		if f == nil {
			f = &fetcher{fs: fs, leader: leader, stop: make(chan struct{})}
			f.parts.Store(&parts)
			if !fs.m.goBackground(f.run) {
				continue // closing
			}
			fs.byLeader[leader] = f
			fs.m.log.Info("following a leader", "leader", leader, "partitions", len(parts))
			continue
		}
		old := *f.parts.Load()
		f.parts.Store(&parts)
		for _, p := range parts {
			if !slices.Contains(old, p) {
				f.interrupt()
				break
			}
		}
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stopAll stops every fetcher (Close).
func (fs *fetchers) stopAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for leader, f := range fs.byLeader {
		close(f.stop)
		delete(fs.byLeader, leader)
	}
}

func (f *fetcher) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
		case <-f.fs.m.closing:
		}
		cancel()
	}()
	backoff := fetcherBackoffMin
	for ctx.Err() == nil {
		parts := *f.parts.Load()
		req, sent, held := f.request(parts)
		if held > 0 {
			// A throttled partition waits for the bucket; the others'
			// long poll must not keep it waiting longer.
			req.MaxWait = min(req.MaxWait, max(held, time.Millisecond))
		}
		if len(sent) == 0 {
			if held > 0 {
				f.pause(ctx, req.MaxWait)
			} else {
				f.sleep(ctx, &backoff)
			}
			continue
		}
		rctx, cancelRound := context.WithCancel(ctx)
		f.roundMu.Lock()
		f.round = cancelRound
		f.roundMu.Unlock()
		results, err := f.fs.m.opts.Leaders.Fetch(rctx, f.leader, req)
		f.roundMu.Lock()
		f.round = nil
		f.roundMu.Unlock()
		interrupted := rctx.Err() != nil && ctx.Err() == nil
		cancelRound()
		if err == nil && len(results) != len(sent) {
			err = fmt.Errorf("leader %d answered %d partitions for %d", f.leader, len(results), len(sent))
		}
		if interrupted {
			continue // partitions were added: fetch them now, with the others
		}
		if err != nil {
			if ctx.Err() == nil {
				f.fs.m.log.Debug("fetch from leader failed", "leader", f.leader, "err", err)
				f.sleep(ctx, &backoff)
			}
			continue
		}
		progress := false
		var flush []*Partition
		for i, r := range results {
			appended, ok := f.handle(sent[i], req.Partitions[i], r)
			progress = progress || ok
			if appended && sent[i].log.Config().FlushPolicy == storage.FlushAck {
				flush = append(flush, sent[i])
			}
		}
		// Fsynced before the next fetch says what this node holds.
		for _, p := range flush {
			if err := p.log.Flush(p.log.LogEndOffset()); err != nil {
				f.fs.m.log.Error("flushing a follower's log", "partition", p.String(), "err", err)
			}
		}
		if progress {
			backoff = fetcherBackoffMin
		} else {
			f.sleep(ctx, &backoff)
		}
	}
}

func (f *fetcher) sleep(ctx context.Context, backoff *time.Duration) {
	f.pause(ctx, *backoff)
	*backoff = min(*backoff*2, fetcherBackoffMax)
}

func (f *fetcher) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// request builds a fetch of every partition that still follows this
// fetcher's leader, returning the partitions in request order. A
// throttled partition (one a reassignment is adding) asks for no more
// than the reassignment throttle has left, and is left out while it has
// nothing left: held is then how long until it has (0: none held).
func (f *fetcher) request(parts []*Partition) (req LeaderFetch, sent []*Partition, held time.Duration) {
	m := f.fs.m
	req = LeaderFetch{
		ReplicaID: m.opts.NodeID, BrokerEpoch: m.brokerEpoch.Load(),
		MaxWait: followerMaxWait, MinBytes: 1, MaxBytes: followerFetchBytes,
	}
	sent = make([]*Partition, 0, len(parts))
	// The throttled partitions share what the throttle has left evenly:
	// given whole to the first, it would take it every round, caught up
	// or not, and the others wait for it to finish.
	share := int64(0)
	if n := countThrottled(parts, f.leader); n > 0 {
		if budget := m.throttle.available(m.opts.Now()); budget > 0 {
			share = max(budget/int64(n), 1)
		} else {
			held = max(m.throttle.wait(m.opts.Now()), time.Millisecond)
		}
	}
	for _, p := range parts {
		p.mu.RLock()
		leader, epoch, gone, throttled := p.mu.leader, p.mu.leaderEpoch, p.mu.gone, p.mu.throttled
		p.mu.RUnlock()
		if gone != nil || leader != f.leader || p.log.Failed() {
			continue // failed: offline until a restart (offline.go)
		}
		maxBytes := int32(followerPartitionBytes)
		if throttled {
			if held > 0 {
				continue
			}
			maxBytes = int32(min(share, followerPartitionBytes))
		}
		last, ok := p.log.LeaderEpochs().LatestEpoch()
		if !ok {
			last = -1
		}
		req.Partitions = append(req.Partitions, LeaderFetchPartition{
			Topic: p.topic, TopicID: p.topicID, Partition: p.partition,
			FetchOffset: p.log.LogEndOffset(), LastFetchedEpoch: last,
			CurrentLeaderEpoch: epoch, MaxBytes: maxBytes,
			LogStartOffset: p.log.LogStartOffset(),
		})
		sent = append(sent, p)
	}
	return req, sent, held
}

// countThrottled counts parts' throttled partitions that follow leader.
func countThrottled(parts []*Partition, leader int32) int {
	n := 0
	for _, p := range parts {
		p.mu.RLock()
		if p.mu.throttled && p.mu.gone == nil && p.mu.leader == leader {
			n++
		}
		p.mu.RUnlock()
	}
	return n
}

// handle applies one partition's answer. appended: records were added;
// progress: the answer moved something (records, a truncation, the high
// watermark), so the next fetch need not back off.
//
// It holds p.mu shared and applies nothing unless p still follows this
// fetcher's leader in the leader epoch the fetch named: an answer that
// arrives after this node became leader (or began to follow another)
// must neither append the old leader's records after the new epoch's
// start nor, above all, truncate what this node now leads.
func (f *fetcher) handle(p *Partition, fp LeaderFetchPartition, r LeaderFetchResult) (appended, progress bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.gone != nil || p.mu.leader != f.leader || p.mu.leaderEpoch != fp.CurrentLeaderEpoch {
		return false, false // stale: the next image's fetcher takes over
	}
	if p.log.Failed() {
		return false, false // offline (offline.go): the next fetch leaves it out
	}
	log := f.fs.m.log
	switch {
	case r.Err != nil && errors.Is(r.Err, ErrOffsetOutOfRange) && r.LogStartOffset > fp.FetchOffset:
		// The leader no longer has what this follower needs next
		// (retention or DeleteRecords went past it while the follower
		// was behind): start again at the leader's log start, as
		// Kafka's follower does.
		log.Info("follower behind its leader's log start; starting again there", "partition", p.String(),
			"leader", f.leader, "offset", fp.FetchOffset, "leader_log_start", r.LogStartOffset)
		if err := p.log.TruncateFullyAndStartAt(r.LogStartOffset); err != nil {
			log.Error("truncating a follower's log", "partition", p.String(), "err", err)
			return false, false
		}
		return false, true
	case r.Err != nil:
		// The leader's own log failing (KAFKA_STORAGE_ERROR) is said by
		// that node; the image moves the leadership soon after.
		if !errors.Is(r.Err, ErrNotLeader) && !errors.Is(r.Err, ErrFencedLeaderEpoch) && !errors.Is(r.Err, ErrUnknownLeaderEpoch) &&
			!errors.Is(r.Err, ErrStorage) {
			log.Warn("follower fetch refused", "partition", p.String(), "leader", f.leader, "offset", fp.FetchOffset, "err", r.Err)
		}
		return false, false // the next image names the leader to follow
	case r.DivergingEpoch.Epoch >= 0:
		return false, f.truncate(p, r.DivergingEpoch)
	}
	if len(r.Records) > 0 {
		data, err := fromOffset(r.Records, p.log.LogEndOffset())
		if err == nil && len(data) > 0 {
			var info storage.AppendInfo
			info, err = p.log.AppendAsFollower(data)
			if appended = err == nil; appended {
				f.fs.m.stats.fetchedBytes.Add(int64(len(data)))
				f.fs.m.stats.fetchedBatches.Add(int64(info.NumBatches))
				if p.mu.throttled {
					f.fs.m.throttle.charge(len(data), f.fs.m.opts.Now())
					f.fs.m.stats.throttledBytes.Add(int64(len(data)))
				}
			}
		}
		if err != nil {
			log.Error("appending the leader's records", "partition", p.String(), "leader", f.leader, "offset", fp.FetchOffset, "err", err)
			return false, false
		}
	}
	hw := min(r.HighWatermark, p.log.LogEndOffset())
	if hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
		progress = true
		p.notifyAll() // consumers parked on this replica's high watermark
	}
	// The log start follows the leader's (KIP-107), up to what is
	// committed here: records deleted on the leader are deleted here
	// too, so a later leader does not serve them again.
	if to := min(r.LogStartOffset, p.log.HighWatermark()); to > p.log.LogStartOffset() {
		if _, err := p.log.DeleteRecordsBefore(to); err != nil {
			log.Error("moving a follower's log start to its leader's", "partition", p.String(), "to", to, "err", err)
		}
	}
	return appended, progress || appended
}

// truncate cuts p's log where it stops agreeing with the leader's: the
// smaller of the leader's end of the diverging epoch and this log's end
// of the same epoch (or of the largest below it). It reports progress:
// records cut, or an epoch entry dropped.
//
// The cut may be at the log end, with no record to remove: what differs
// then is an epoch this node began as leader at its log end and wrote
// nothing in (a preferred election took the leadership away at once).
// TruncateTo drops that entry too, so the next fetch names the epoch the
// leader has; kept, the fetches would diverge the same way forever and
// this replica never catch up.
func (f *fetcher) truncate(p *Partition, d EpochEndOffset) bool {
	leo := p.log.LogEndOffset()
	epoch, end := p.log.LeaderEpochs().EndOffsetFor(d.Epoch, leo)
	to := d.EndOffset
	if epoch >= 0 {
		to = min(to, end)
	}
	to = min(to, leo)
	before, _ := p.log.LeaderEpochs().LatestEpoch()
	if err := p.log.TruncateTo(to); err != nil {
		f.fs.m.log.Error("truncating a follower's log", "partition", p.String(), "to", to, "err", err)
		return false
	}
	after, _ := p.log.LeaderEpochs().LatestEpoch()
	attrs := []any{"partition", p.String(), "leader", f.leader, "from", leo, "to", to,
		"diverging_epoch", d.Epoch, "leader_end_offset", d.EndOffset}
	switch {
	case to < leo:
		f.fs.m.log.Info("truncating a follower's log to the leader's history", attrs...)
		f.fs.m.stats.truncations.Add(1)
		f.fs.m.stats.truncatedRecords.Add(leo - to)
		return true
	case after != before:
		f.fs.m.log.Info("dropped a leader epoch the leader does not have", append(attrs, "epoch", before, "now", after)...)
		return true
	}
	return false
}

// fromOffset drops the batches that end before offset (a leader's answer
// starts at the batch holding the fetch offset, which may start before
// it).
func fromOffset(b []byte, offset int64) ([]byte, error) {
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			return nil, err
		}
		if h.LastOffset() >= offset {
			if h.BaseOffset < offset {
				return nil, fmt.Errorf("batch %d-%d straddles this log's end %d", h.BaseOffset, h.LastOffset(), offset)
			}
			return b, nil
		}
		if h.Size() > len(b) {
			return nil, nil // a partial batch at the end: nothing whole to append
		}
		b = b[h.Size():]
	}
	return b, nil
}
