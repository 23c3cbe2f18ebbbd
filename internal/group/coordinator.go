package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/clock"
)

// Coordinator is the classic group coordinator of the __consumer_offsets
// partitions this node leads.
//
// Threads: every exported method may be called from many goroutines at
// once. There is no coordinator goroutine: a request runs on its caller's
// goroutine under its group's lock; timers (Clock callbacks) and
// background metadata writes run on their own goroutines under the same
// lock. Close waits for the timers and background writes it started.
type Coordinator struct {
	cfg    Config
	log    Log
	clock  clock.Clock
	logger *slog.Logger

	// ctx ends at Close, which ends background appends.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts background goroutines and running timer callbacks; both
	// enter only while the coordinator is open (enterBackground).
	wg     sync.WaitGroup
	tokens atomic.Uint64 // mints timer tokens, so a stale callback knows it is stale

	mu struct {
		sync.Mutex
		closed     bool
		partitions map[int32]*partitionState
		retention  clock.Timer
	}
}

// partitionState is one __consumer_offsets partition this node
// coordinates, or is loading.
type partitionState struct {
	token   uint64 // the Load that owns this state
	loading bool
	groups  map[string]*group
	// producerGroups are, per producer id, the groups that may hold its
	// pending transactional offsets or have its append in flight
	// (Kafka's openGroupsForProducer), so a marker visits those groups
	// only. A group is added before its transactional append starts and
	// the producer's entry removed by CompleteTxn; entries for groups
	// since removed, or whose append failed, are harmless (a completion
	// finds nothing there).
	producerGroups map[int64]map[*group]struct{}
	// completions are the markers CompleteTxn reported while the
	// partition was loading; Load applies them before it publishes the
	// groups. Only while loading.
	completions []txnCompletion
}

// New returns a coordinator of no partitions; Load adds them. It starts
// the periodic offset retention check.
func New(cfg Config, log Log) *Coordinator {
	cfg = cfg.withDefaults()
	c := &Coordinator{cfg: cfg, log: log, clock: cfg.Clock, logger: cfg.Logger}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.partitions = make(map[int32]*partitionState)
	c.mu.Lock()
	c.mu.retention = c.afterFunc(cfg.RetentionCheckInterval, c.runRetention)
	c.mu.Unlock()
	return c
}

// Close stops every timer, answers every parked JoinGroup and SyncGroup
// COORDINATOR_NOT_AVAILABLE, and waits for background work to end. Later
// requests answer COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	if c.mu.retention != nil {
		c.mu.retention.Stop()
	}
	var groups []*group
	for _, ps := range c.mu.partitions {
		for _, g := range ps.groups {
			groups = append(groups, g)
		}
	}
	c.mu.partitions = make(map[int32]*partitionState)
	c.mu.Unlock()

	c.cancel()
	for _, g := range groups {
		g.mu.Lock()
		c.killGroupLocked(g, ErrCoordinatorNotAvailable)
		g.mu.Unlock()
	}
	c.wg.Wait()
}

// status says whether this node coordinates group now.
func (c *Coordinator) status(group string) error {
	_, err := c.lookup(group, false)
	return err
}

// lookup finds group (creating it, Empty, when create is set) if its
// partition is loaded here. A nil group with a nil error: not found.
func (c *Coordinator) lookup(id string, create bool) (*group, error) {
	p := PartitionFor(id, c.cfg.OffsetsPartitions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrCoordinatorNotAvailable
	}
	ps := c.mu.partitions[p]
	switch {
	case ps == nil:
		return nil, ErrNotCoordinator
	case ps.loading:
		return nil, ErrCoordinatorLoadInProgress
	}
	g := ps.groups[id]
	if g == nil && create {
		g = newGroup(id, p, c.clock.Now())
		ps.groups[id] = g
	}
	return g, nil
}

// loadedGroups returns every group of every loaded partition.
func (c *Coordinator) loadedGroups() (groups []*group, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.mu.partitions {
		if ps.loading {
			loading = true
			continue
		}
		for _, g := range ps.groups {
			groups = append(groups, g)
		}
	}
	return groups, loading
}

// removeGroupLocked takes a group that has just died out of its
// partition. REQUIRES: g.mu held (the lock order allows c.mu inside it).
func (c *Coordinator) removeGroupLocked(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := c.mu.partitions[g.partition]; ps != nil && ps.groups[g.id] == g {
		delete(ps.groups, g.id)
	}
}

// maybeDropUnusedLocked removes g if a failed request left it holding
// nothing (see unusedLocked). haveTurn: the caller holds g's write turn;
// otherwise g is dropped only if nobody holds it, since a write in flight
// may be about to add offsets.
// REQUIRES: g.mu held.
func (c *Coordinator) maybeDropUnusedLocked(g *group, haveTurn bool) {
	if !g.unusedLocked() {
		return
	}
	if !haveTurn {
		if !g.tryAcquireWrite() {
			return
		}
		defer g.releaseWrite()
	}
	c.killGroupLocked(g, ErrCoordinatorNotAvailable)
	c.removeGroupLocked(g)
}

// killGroupLocked makes g Dead: every parked request is answered err and
// every timer stopped. The caller takes g out of its partition (or has).
// REQUIRES: g.mu held.
func (c *Coordinator) killGroupLocked(g *group, err error) {
	if g.mu.state == stateDead {
		return
	}
	for _, m := range g.membersLocked() {
		g.answerJoinLocked(m, joinError(m.id, err))
		g.answerSyncLocked(m, SyncResult{Err: err})
		stopTimer(&m.sessionTimer)
	}
	for id, t := range g.mu.pending {
		t.Stop()
		delete(g.mu.pending, id)
	}
	c.stopJoinTimerLocked(g)
	c.stopSyncTimerLocked(g)
	g.transitionLocked(stateDead, c.clock.Now())
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

// afterFunc is clock.Clock.AfterFunc for callbacks Close waits for and that do
// nothing once it has begun.
func (c *Coordinator) afterFunc(d time.Duration, f func()) clock.Timer {
	return c.clock.AfterFunc(d, func() {
		if !c.enterBackground() {
			return
		}
		defer c.wg.Done()
		f()
	})
}

func (c *Coordinator) nextToken() uint64 { return c.tokens.Add(1) }

func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// appendContext bounds an append by CommitTimeout and by Close, but not
// by the request's own end: a client that goes away must not cancel a
// write that may still land, or the log would hold a commit (or a
// tombstone) that memory never learned of, as Kafka never cancels its
// coordinator's writes either.
func (c *Coordinator) appendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// appendKind selects how an append error is answered: Kafka maps a failed
// write differently for offset commits and for group metadata.
type appendKind int8

const (
	appendOffsets appendKind = iota
	appendGroup
	appendDelete
)

// mapAppendError turns a Log.Append error into the error the request
// answers, as Kafka's GroupMetadataManager does (see Log).
func mapAppendError(err error, kind appendKind) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			ke = kerr.RequestTimedOut
		default:
			// Canceled (a request that went away, or Close), an I/O
			// failure, anything unclassified: retriable, and the client
			// looks the coordinator up again.
			return ErrCoordinatorNotAvailable
		}
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return ErrCoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return ErrNotCoordinator
	case kerr.RequestTimedOut:
		if kind == appendGroup {
			return ErrRebalanceInProgress
		}
		return ErrRequestTimedOut
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		if kind == appendOffsets {
			return ErrInvalidCommitOffsetSize
		}
		return ErrUnknownServerError
	}
	return ke
}

// waitError is what a parked request whose context ended answers: nobody
// is likely to read it (the connection is gone), and a client that does
// retries.
func waitError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrRequestTimedOut
	}
	return ErrCoordinatorNotAvailable
}
