// Package grouplag computes consumer groups' lag in records, bytes and
// seconds: how far each group's committed offset is behind each
// partition's high watermark, how many bytes of log that is, and how old
// the first record it has yet to consume is.
//
// The committed offsets are the group coordinator's; the rest only the
// partition's leader knows, which it answers through Fjord's
// DescribePositions request (internal/fjordmsg) from its indexes and one
// batch header per offset. Two users:
//
//   - the Refresher, on every node, asks the leaders about the groups
//     that node coordinates every second or so (not per scrape) and keeps
//     the answers as a Snapshot, which /metrics reads: a scrape costs no
//     request and no read of a log;
//   - `fjord group describe` and the HTTP group view ask about one group
//     when asked (Ask), so they are current to the moment.
//
// Lag in seconds is the age of the first unconsumed data record (its
// batch's timestamp; transaction markers skipped) at the moment of the
// answer, and 0 when the group has caught up. A committed offset below
// the partition's log start is a retention gap: the records between are
// gone (Lag.Lost).
package grouplag

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Asker sends a DescribePositions request to one node (a partition
// leader) and returns its answer.
type Asker func(ctx context.Context, node int32, req *fjordmsg.DescribePositionsRequest) (*fjordmsg.DescribePositionsResponse, error)

// LeaderOf returns the node leading a partition, or an error:
// kerr.UnknownTopicOrPartition when there is no such partition,
// ErrNoLeader when it has no leader now.
type LeaderOf func(topic string, partition int32) (leader int32, err error)

// Answer is a partition leader's answer for the offsets asked about in
// one partition. With Err set the rest is zero.
type Answer struct {
	Err              error
	LogStartOffset   int64
	HighWatermark    int64
	LastStableOffset int64
	// Positions by offset.
	Positions map[int64]fjordmsg.Position
	// At is when the answer arrived: the moment its lag in seconds is
	// measured at.
	At time.Time
}

// ErrNoLeader: the partition has no leader now.
var ErrNoLeader = fmt.Errorf("no leader: %w", kerr.LeaderNotAvailable)

// Ask asks the leader of each partition in offsets where those offsets
// stand, one request per leader, the leaders in parallel. Every
// partition asked about has an answer, with Err when its leader could
// not be asked or refused.
func Ask(ctx context.Context, leaderOf LeaderOf, ask Asker, offsets map[TopicPartition][]int64, now func() time.Time) map[TopicPartition]*Answer {
	out := make(map[TopicPartition]*Answer, len(offsets))
	byLeader := map[int32]*fjordmsg.DescribePositionsRequest{}
	topicIdx := map[int32]map[string]int{}
	for tp, offs := range offsets {
		leader, err := leaderOf(tp.Topic, tp.Partition)
		if err != nil {
			out[tp] = &Answer{Err: fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, err)}
			continue
		}
		req := byLeader[leader]
		if req == nil {
			req = &fjordmsg.DescribePositionsRequest{}
			byLeader[leader], topicIdx[leader] = req, map[string]int{}
		}
		i, ok := topicIdx[leader][tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicIdx[leader][tp.Topic] = i
			req.Topics = append(req.Topics, fjordmsg.DescribePositionsTopic{Topic: tp.Topic})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fjordmsg.DescribePositionsPartition{Partition: tp.Partition, Offsets: offs})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, req := range byLeader {
		wg.Go(func() {
			resp, err := ask(ctx, leader, req)
			at := now()
			mu.Lock()
			defer mu.Unlock()
			answered := map[TopicPartition]bool{}
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						tp := TopicPartition{rt.Topic, rp.Partition}
						if _, asked := offsets[tp]; !asked || answered[tp] {
							continue // not asked, or answered twice: a confused peer
						}
						answered[tp] = true
						if rp.ErrorCode != 0 {
							out[tp] = &Answer{Err: fmt.Errorf("%s-%d on node %d: %w", tp.Topic, tp.Partition, leader, kerr.ErrorForCode(rp.ErrorCode))}
							continue
						}
						a := &Answer{LogStartOffset: rp.LogStartOffset, HighWatermark: rp.HighWatermark,
							LastStableOffset: rp.LastStableOffset, Positions: make(map[int64]fjordmsg.Position, len(rp.Positions)), At: at}
						for _, p := range rp.Positions {
							a.Positions[p.Offset] = p
						}
						out[tp] = a
					}
				}
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					tp := TopicPartition{t.Topic, p.Partition}
					if answered[tp] {
						continue
					}
					cause := err
					if cause == nil {
						cause = fmt.Errorf("node %d did not answer for it", leader)
					}
					out[tp] = &Answer{Err: fmt.Errorf("%s-%d: asking node %d: %w", tp.Topic, tp.Partition, leader, cause)}
				}
			}
		})
	}
	wg.Wait()
	return out
}

// Lag is one group's lag on one partition.
type Lag struct {
	// Records is the high watermark less the committed offset (Kafka's
	// lag, counted in offsets), never negative.
	Records int64
	// Bytes is the log's size from the committed offset's batch to the
	// high watermark.
	Bytes int64
	// Age is how old the first record the group has yet to consume was
	// when the leader answered; 0 when caught up.
	Age time.Duration
	// Lost is the records between the committed offset and the log
	// start, which retention or DeleteRecords removed before the group
	// read them: a gap. 0 when there is none.
	Lost int64
	// DeleteAt is when time retention may delete the segment holding
	// the committed offset: the group must read on before then or lose
	// records. Zero when time retention does not apply or the group has
	// caught up.
	DeleteAt time.Time
}

// LagOf computes the lag of a group committed at committed from the
// leader's answer a (which must hold a position for committed).
func LagOf(committed int64, a *Answer) Lag {
	l := Lag{Records: max(a.HighWatermark-committed, 0), Lost: max(a.LogStartOffset-committed, 0)}
	if p, ok := a.Positions[committed]; ok {
		l.Bytes = p.Bytes
		if p.Timestamp >= 0 {
			l.Age = max(a.At.Sub(time.UnixMilli(p.Timestamp)), 0)
		}
		if p.DeleteAt >= 0 {
			l.DeleteAt = time.UnixMilli(p.DeleteAt)
		}
	}
	return l
}
