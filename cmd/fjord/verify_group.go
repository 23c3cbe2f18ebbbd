package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/timeline"
)

// verifyGroup is a workload's consumer group: members that each poll,
// process (tell the checker), commit what they processed and only then
// let a rebalance happen (kgo's BlockRebalanceOnPoll), the way an
// application that must not commit a partition it lost does. The
// checker holds the group's history against its rules (history's
// groups.go): one owner per generation, commits never backwards, never
// past what was processed, and nothing below them skipped.
//
// In the queue workload the group keeps its --group-members members.
// In the groups workload it churns: every --churn-interval a member
// joins, leaves (closes, leaving the group as an application that stops
// does) or dies (its connections cut and every new one refused, so it
// stops heartbeating as a crashed or partitioned process does, and the
// coordinator must wait out its session before the others get its
// partitions), drawn from the seed, between one member and
// --group-members. When the writes stop the group must catch up: every
// partition committed to its end within --live-within.
type verifyGroup struct {
	name    string
	seeds   []string
	topics  []string
	checker *history.Checker
	ctx     context.Context // the members' parent: cancelled by stop
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every member's loop, and every closing client

	errs errorCount

	mu      sync.Mutex
	members []*verifyMember // the live ones, oldest first
	next    int             // the next member's number
	churn   map[string]int  // joins, leaves and deaths so far
}

// verifyMember is one member: a client of its own, its loop, and its
// connections, which dying cuts.
type verifyMember struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop returned

	dead  atomic.Bool // no connection may be made any more
	mu    sync.Mutex
	conns []net.Conn
}

const (
	// groupSessionTimeout is the members' session: the least Kafka (and
	// Fjord) accept, so a member that died holds its partitions as
	// briefly as a group allows.
	groupSessionTimeout = 6 * time.Second
	// groupRebalanceTimeout bounds a rebalance's wait for the members.
	groupRebalanceTimeout = 10 * time.Second
)

// Churn actions, as the report counts them.
const (
	churnJoin  = "join"
	churnLeave = "leave"
	churnDie   = "die"
)

// errMemberDead is what a dead member's dials get.
var errMemberDead = errors.New("fjord verify: this group member is dead: no connections")

func startVerifyGroup(ctx context.Context, seeds []string, v verifyOptions, checker *history.Checker, tl *timeline.Timeline) (*verifyGroup, error) {
	g := &verifyGroup{name: v.topic, seeds: seeds, topics: v.topics, checker: checker, churn: map[string]int{}, errs: errorCount{tl: tl, series: "group"}}
	g.ctx, g.cancel = context.WithCancel(ctx)
	for range v.groupMembers {
		if err := g.join(); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

// join starts a new member.
func (g *verifyGroup) join() error {
	g.mu.Lock()
	m := &verifyMember{name: fmt.Sprintf("m%d", g.next), done: make(chan struct{})}
	g.next++
	g.mu.Unlock()
	revoked := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		for topic, parts := range ps {
			g.checker.Revoked(g.name, m.name, topic, parts)
		}
	}
	cl, err := kgo.NewClient(verifyClient(g.seeds, "fjord-verify-"+m.name, kgo.Dialer(m.dial),
		kgo.ConsumerGroup(g.name), kgo.ConsumeTopics(g.topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(groupSessionTimeout), kgo.RebalanceTimeout(groupRebalanceTimeout),
		// franz-go calls this at the end of every join, with what the
		// join added (cooperative: often nothing), once the member
		// knows its new generation.
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			_, generation := cl.GroupMetadata()
			g.checker.Joined(g.name, m.name, generation)
			for topic, parts := range ps {
				g.checker.Assigned(g.name, m.name, generation, topic, parts)
			}
		}),
		kgo.OnPartitionsRevoked(revoked),
		kgo.OnPartitionsLost(revoked))...)
	if err != nil {
		return err
	}
	m.cl = cl
	mctx, cancel := context.WithCancel(g.ctx)
	m.cancel = cancel
	g.mu.Lock()
	g.members = append(g.members, m)
	g.mu.Unlock()
	g.wg.Go(func() {
		defer close(m.done)
		g.consume(mctx, m)
	})
	return nil
}

// dial is the member's dialer: refused once it is dead, and every
// connection kept so dying can cut it.
func (m *verifyMember) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if m.dead.Load() {
		return nil, errMemberDead
	}
	conn, err := (&net.Dialer{Timeout: reachTimeout}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead.Load() { // died while dialling
		conn.Close()
		return nil, errMemberDead
	}
	m.conns = append(m.conns, conn)
	return conn, nil
}

// consume is one member's loop: poll, process, commit, allow a
// rebalance.
func (g *verifyGroup) consume(ctx context.Context, m *verifyMember) {
	cl := m.cl
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && !m.dead.Load() {
				g.errs.add(fmt.Sprintf("%s: %s-%d: %v", m.name, topic, p, err))
			}
		})
		next := map[string]map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			g.checker.Processed(g.name, m.name, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			next[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) > 0 && !m.dead.Load() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			cl.CommitOffsetsSync(cctx, next, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					g.errs.add(fmt.Sprintf("%s: commit: %v", m.name, err))
					return
				}
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							g.errs.add(fmt.Sprintf("%s: commit of %s-%d: %v", m.name, t.Topic, p.Partition, err))
							continue
						}
						g.checker.Committed(g.name, m.name, history.TopicPartition{Topic: t.Topic, Partition: p.Partition}, next[t.Topic][p.Partition].Offset)
					}
				}
			})
			cancel()
		}
		cl.AllowRebalance()
	}
}

// remove takes member i out of the live list and ends its loop.
func (g *verifyGroup) remove(i int) *verifyMember {
	g.mu.Lock()
	m := g.members[i]
	g.members = append(g.members[:i:i], g.members[i+1:]...)
	g.mu.Unlock()
	m.cancel()
	<-m.done
	return m
}

// leave closes member i as an application that stops does: it leaves
// the group, and its partitions are revoked.
func (g *verifyGroup) leave(i int) {
	m := g.remove(i)
	m.cl.AllowRebalance() // a member blocked in a rebalance ends too
	m.cl.Close()
}

// die kills member i as far as the cluster can tell: every connection
// cut and none made again, so it neither heartbeats nor leaves. Its
// client is closed in the background (its leave fails; nothing it does
// reaches the cluster any more).
func (g *verifyGroup) die(i int) {
	g.mu.Lock()
	m := g.members[i]
	g.mu.Unlock()
	m.dead.Store(true)
	m.mu.Lock()
	for _, c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	g.remove(i)
	g.wg.Go(func() {
		m.cl.AllowRebalance()
		m.cl.Close()
	})
}

// churnUntil makes one change to the group every interval until stop,
// drawn from rng: a join, a leave or a death, keeping one to most
// members alive.
func (g *verifyGroup) churnUntil(ctx context.Context, rng *rand.Rand, interval time.Duration, most int, stop time.Time) {
	for clock.Sleep(ctx, interval) && time.Until(stop) > 0 {
		g.mu.Lock()
		live := len(g.members)
		g.mu.Unlock()
		action := []string{churnJoin, churnLeave, churnDie}[rng.IntN(3)]
		switch {
		case live <= 1:
			action = churnJoin
		case live >= most && action == churnJoin:
			action = []string{churnLeave, churnDie}[rng.IntN(2)]
		}
		switch action {
		case churnJoin:
			if err := g.join(); err != nil {
				g.errs.add("a member joining: " + err.Error())
				continue
			}
		case churnLeave:
			g.leave(rng.IntN(live))
		case churnDie:
			g.die(rng.IntN(live))
		}
		g.mu.Lock()
		g.churn[action]++
		g.mu.Unlock()
	}
}

// churned is the joins, leaves and deaths so far.
func (g *verifyGroup) churned() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for k, n := range g.churn {
		out[k] = n
	}
	return out
}

// stop ends the members and returns their error count and first error.
func (g *verifyGroup) stop() (int, string) {
	g.cancel()
	g.mu.Lock()
	members := g.members
	g.members = nil
	g.mu.Unlock()
	for _, m := range members {
		m.cl.AllowRebalance() // a member blocked in a rebalance ends too
	}
	g.wg.Wait()
	for _, m := range members {
		m.cl.Close()
	}
	return g.errs.get()
}

// drainGroup waits, within within, until group has committed every
// partition of topics up to the partition's end: what a group that keeps
// up does once the writes stop.
func drainGroup(ctx context.Context, adm *kadm.Client, group string, topics []string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var behind []string
	for {
		behind = behind[:0]
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		var committed kadm.OffsetResponses
		if err == nil {
			committed, err = adm.FetchOffsets(ctx, group)
		}
		if err == nil {
			ends.Each(func(e kadm.ListedOffset) {
				at := int64(-1)
				if o, ok := committed.Lookup(e.Topic, e.Partition); ok {
					at = o.At
				}
				if at < e.Offset {
					behind = append(behind, fmt.Sprintf("%s-%d committed %d of %d", e.Topic, e.Partition, at, e.Offset))
				}
			})
			if len(behind) == 0 {
				return nil
			}
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			if err != nil {
				return fmt.Errorf("the group %s did not catch up within %v of the writes' end: %v", group, within, err)
			}
			return fmt.Errorf("the group %s did not catch up within %v of the writes' end: %v", group, within, behind)
		}
	}
}

// fetchCommitted asks the coordinator for group's committed offsets and
// hands them to the checker, which holds them against the commits it
// acknowledged.
func fetchCommitted(ctx context.Context, adm *kadm.Client, group string, checker *history.Checker) error {
	fctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var resp kadm.OffsetResponses
	var err error
	// Right after the members leave, the coordinator may still be
	// settling the group: ask again for a little while.
	for range 10 {
		if resp, err = adm.FetchOffsets(fctx, group); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fetching group %s's committed offsets: %w", group, err)
	}
	resp.Each(func(o kadm.OffsetResponse) {
		checker.Fetched(group, history.TopicPartition{Topic: o.Topic, Partition: o.Partition}, o.At)
	})
	return nil
}
