package node

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/grouplag"
)

// Consumer lag (internal/grouplag): this node's refresher asks the
// leaders of the partitions its groups have committed offsets on, and
// /metrics reports the last snapshot.

// startLag starts the lag refresher over this node's group coordinator;
// the returned stop ends it and waits.
func (n *Node) startLag() (lag *grouplag.Refresher, stop func()) {
	lag = grouplag.NewRefresher(committedOffsets(n.groups), n.imageLeaders, n.askPositions, time.Now, n.log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lag.Run(ctx)
	}()
	return lag, func() { cancel(); <-done }
}

// committedOffsets adapts the coordinator's committed offsets.
func committedOffsets(groups *group.Coordinator) grouplag.Committed {
	return func(visit func(string, map[grouplag.TopicPartition]int64) bool) {
		groups.CommittedOffsets(func(g string, offsets map[group.TopicPartition]int64) bool {
			out := make(map[grouplag.TopicPartition]int64, len(offsets))
			for tp, o := range offsets {
				out[grouplag.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = o
			}
			return visit(g, out)
		})
	}
}

// imageLeaders answers partition leaders from the current image.
func (n *Node) imageLeaders() grouplag.LeaderOf {
	img := n.ctrl.Image()
	return func(topic string, partition int32) (int32, error) {
		if img == nil {
			return -1, grouplag.ErrNoLeader
		}
		t := img.Topics[topic]
		if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
			return -1, kerr.UnknownTopicOrPartition
		}
		if l := t.Partitions[partition].Leader; l >= 0 {
			return l, nil
		}
		return -1, grouplag.ErrNoLeader
	}
}

// askPositions sends DescribePositions to a node's listener (this node's
// own included) through the peer clients.
func (n *Node) askPositions(ctx context.Context, node int32, req *fjordmsg.DescribePositionsRequest) (*fjordmsg.DescribePositionsResponse, error) {
	b, err := n.peers.Broker(node)
	if err != nil {
		return nil, err
	}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*fjordmsg.DescribePositionsResponse)
	if !ok {
		return nil, fmt.Errorf("node %d answered DescribePositions with %T", node, resp)
	}
	return r, nil
}

// maxLagRows bounds the (group, partition) rows one scrape reports, each
// three to five series, so a node coordinating a great many groups cannot make
// its scrape unbounded; rows past it are counted in
// fjord_consumer_group_lag_series_dropped.
const maxLagRows = 50_000

// lagFamilies report the refresher's last snapshot (no request and no
// read of a log at the scrape), written by textCollector: the
// per-partition rows are most of a large node's scrape.
var lagFamilies = []textFamily{
	{name: "fjord_consumer_group_lag", rows: perLagSum,
		help:  "Records a consumer group has yet to consume on a topic: the sum, over the topic's partitions it has committed offsets for, of high watermark less committed offset. Reported by the group's coordinator, from its last lag refresh.",
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.lagSums[i].records), true }},
	{name: "fjord_consumer_group_lag_records", rows: perLagRow,
		help:  "Records a consumer group has yet to consume on a partition: high watermark less committed offset. Reported by the group's coordinator, from its last lag refresh.",
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.lagRows[i].Records), true }},
	{name: "fjord_consumer_group_lag_bytes", rows: perLagRow,
		help:  "Bytes of log a consumer group has yet to consume on a partition: from the batch holding its committed offset to the high watermark.",
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.lagRows[i].Bytes), true }},
	{name: "fjord_consumer_group_lag_seconds", rows: perLagRow,
		help:  "Age of the first record a consumer group has yet to consume on a partition (its batch's timestamp against the time of the last lag refresh); 0 when it has caught up.",
		value: func(s *textScrape, i int) (float64, bool) { return s.lagRows[i].Age.Seconds(), true }},
	{name: "fjord_consumer_group_records_lost_total", rows: perLagRow, counter: true,
		help: "Records a consumer group lost on a partition to retention or DeleteRecords: deleted while its committed offset was below them, each gap counted once, by the group's coordinator since it began coordinating the group. Absent until the first.",
		value: func(s *textScrape, i int) (float64, bool) {
			return float64(s.lagRows[i].LostTotal), s.lagRows[i].LostTotal > 0
		}},
	{name: "fjord_consumer_group_retention_margin_seconds", rows: perLagRow,
		help: "How long until time retention may delete the segment holding a consumer group's committed offset on a partition (0 when due): the group must read past it before then. Absent without time retention, or when the group has caught up.",
		value: func(s *textScrape, i int) (float64, bool) {
			at := s.lagRows[i].DeleteAt
			return max(at.Sub(s.now), 0).Seconds(), !at.IsZero()
		}},
	{name: "fjord_consumer_group_lag_series_dropped", rows: perNode,
		help:  "(group, partition) lag rows left out of this scrape because it reached its bound.",
		value: func(s *textScrape, _ int) (float64, bool) { return float64(s.lagDropped), true }},
	{name: "fjord_consumer_group_lag_unknown", rows: perNode,
		help:  "(group, partition) pairs whose lag the last refresh could not learn: the partition's leader did not answer, or it has none.",
		value: func(s *textScrape, _ int) (float64, bool) { return float64(s.lag.Unknown), true }},
	{name: "fjord_consumer_group_lag_refresh_timestamp_seconds", rows: perNode,
		help: "When the last lag refresh began (Unix time); the lag series are as of then.",
		value: func(s *textScrape, _ int) (float64, bool) {
			return float64(s.lag.At.UnixMilli()) / 1000, !s.lag.At.IsZero()
		}},
	{name: "fjord_consumer_group_lag_refresh_duration_seconds", rows: perNode,
		help:  "How long the last lag refresh took.",
		value: func(s *textScrape, _ int) (float64, bool) { return s.lag.Took.Seconds(), true }},
}
