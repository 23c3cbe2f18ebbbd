package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
)

// verifyGroup is the queue workload's consumer group: members that each
// poll, process (tell the checker), commit what they processed and only
// then let a rebalance happen (kgo's BlockRebalanceOnPoll), the way an
// application that must not commit a partition it lost does. The
// checker holds the group's history against its rules (history's
// groups.go): one owner at a time, commits never backwards and never
// past what was processed.
type verifyGroup struct {
	name    string
	checker *history.Checker
	members []*kgo.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	errs  int
	first string
}

func startVerifyGroup(ctx context.Context, seeds []string, v verifyOptions, checker *history.Checker) (*verifyGroup, error) {
	g := &verifyGroup{name: v.topic, checker: checker}
	gctx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	for i := range v.groupMembers {
		name := fmt.Sprintf("m%d", i)
		revoked := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			for topic, parts := range ps {
				checker.Revoked(g.name, name, topic, parts)
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("fjord-verify-"+name), kgo.DialTimeout(reachTimeout),
			kgo.ConsumerGroup(g.name), kgo.ConsumeTopics(v.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			// franz-go calls this at the end of every join, with what
			// the join added (cooperative: often nothing), once the
			// member knows its new generation.
			kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
				_, generation := cl.GroupMetadata()
				checker.Joined(g.name, name, generation)
				for topic, parts := range ps {
					checker.Assigned(g.name, name, generation, topic, parts)
				}
			}),
			kgo.OnPartitionsRevoked(revoked),
			kgo.OnPartitionsLost(revoked))
		if err != nil {
			g.stop()
			return nil, err
		}
		g.members = append(g.members, cl)
		g.wg.Go(func() { g.consume(gctx, cl, name) })
	}
	return g, nil
}

// consume is one member's loop: poll, process, commit, allow a
// rebalance.
func (g *verifyGroup) consume(ctx context.Context, cl *kgo.Client, name string) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				g.fail(fmt.Sprintf("%s: %s-%d: %v", name, topic, p, err))
			}
		})
		next := map[string]map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			g.checker.Processed(g.name, name, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			next[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) > 0 {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			cl.CommitOffsetsSync(cctx, next, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					g.fail(fmt.Sprintf("%s: commit: %v", name, err))
					return
				}
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							g.fail(fmt.Sprintf("%s: commit of %s-%d: %v", name, t.Topic, p.Partition, err))
							continue
						}
						g.checker.Committed(g.name, name, history.TopicPartition{Topic: t.Topic, Partition: p.Partition}, next[t.Topic][p.Partition].Offset)
					}
				}
			})
			cancel()
		}
		cl.AllowRebalance()
	}
}

func (g *verifyGroup) fail(msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.errs++; g.first == "" {
		g.first = msg
	}
}

// stop ends the members and returns their error count and first error.
func (g *verifyGroup) stop() (int, string) {
	g.cancel()
	for _, cl := range g.members {
		cl.AllowRebalance() // a member blocked in a rebalance ends too
	}
	g.wg.Wait()
	for _, cl := range g.members {
		cl.Close()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errs, g.first
}

// fetchCommitted asks the coordinator for the group's committed offsets
// and hands them to the checker, which holds them against the commits it
// acknowledged.
func (g *verifyGroup) fetchCommitted(ctx context.Context, adm *kadm.Client) error {
	fctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var resp kadm.OffsetResponses
	var err error
	// Right after the members leave, the coordinator may still be
	// settling the group: ask again for a little while.
	for range 10 {
		if resp, err = adm.FetchOffsets(fctx, g.name); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fetching group %s's committed offsets: %w", g.name, err)
	}
	resp.Each(func(o kadm.OffsetResponse) {
		g.checker.Fetched(g.name, history.TopicPartition{Topic: o.Topic, Partition: o.Partition}, o.At)
	})
	return nil
}
