package node

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

var (
	lagPartitionLabels = []string{"group", "topic", "partition"}

	lagDesc = prometheus.NewDesc("fjord_consumer_group_lag",
		"Records a consumer group has yet to consume on a topic: the sum, over the topic's partitions it has committed offsets for, of high watermark less committed offset. Reported by the group's coordinator, from its last lag refresh.",
		[]string{"group", "topic"}, nil)
	lagRecordsDesc = prometheus.NewDesc("fjord_consumer_group_lag_records",
		"Records a consumer group has yet to consume on a partition: high watermark less committed offset. Reported by the group's coordinator, from its last lag refresh.",
		lagPartitionLabels, nil)
	lagBytesDesc = prometheus.NewDesc("fjord_consumer_group_lag_bytes",
		"Bytes of log a consumer group has yet to consume on a partition: from the batch holding its committed offset to the high watermark.",
		lagPartitionLabels, nil)
	lagSecondsDesc = prometheus.NewDesc("fjord_consumer_group_lag_seconds",
		"Age of the first record a consumer group has yet to consume on a partition (its batch's timestamp against the time of the last lag refresh); 0 when it has caught up.",
		lagPartitionLabels, nil)
	lostDesc = prometheus.NewDesc("fjord_consumer_group_records_lost_total",
		"Records a consumer group lost on a partition to retention or DeleteRecords: deleted while its committed offset was below them, each gap counted once, by the group's coordinator since it began coordinating the group. Absent until the first.",
		lagPartitionLabels, nil)
	marginDesc = prometheus.NewDesc("fjord_consumer_group_retention_margin_seconds",
		"How long until time retention may delete the segment holding a consumer group's committed offset on a partition (0 when due): the group must read past it before then. Absent without time retention, or when the group has caught up.",
		lagPartitionLabels, nil)
	lagDroppedDesc = prometheus.NewDesc("fjord_consumer_group_lag_series_dropped",
		"(group, partition) lag rows left out of this scrape because it reached its bound.", nil, nil)
	lagUnknownDesc = prometheus.NewDesc("fjord_consumer_group_lag_unknown",
		"(group, partition) pairs whose lag the last refresh could not learn: the partition's leader did not answer, or it has none.", nil, nil)
	lagRefreshDesc = prometheus.NewDesc("fjord_consumer_group_lag_refresh_timestamp_seconds",
		"When the last lag refresh began (Unix time); the lag series are as of then.", nil, nil)
	lagRefreshTookDesc = prometheus.NewDesc("fjord_consumer_group_lag_refresh_duration_seconds",
		"How long the last lag refresh took.", nil, nil)
)

// lagCollector reports the refresher's last snapshot: no request and no
// read of a log at the scrape.
type lagCollector struct {
	lag     *grouplag.Refresher
	maxRows int
}

func (lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, lagRecordsDesc, lagBytesDesc, lagSecondsDesc, lostDesc, marginDesc, lagDroppedDesc, lagUnknownDesc, lagRefreshDesc, lagRefreshTookDesc} {
		ch <- d
	}
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.lag.Snapshot()
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	rows := s.Rows
	dropped := max(len(rows)-c.maxRows, 0)
	rows = rows[:len(rows)-dropped]
	// Rows are sorted by group and topic, so each (group, topic) sum is
	// a run.
	for i := 0; i < len(rows); {
		g, t := rows[i].Group, rows[i].Topic
		var sum int64
		for ; i < len(rows) && rows[i].Group == g && rows[i].Topic == t; i++ {
			r := &rows[i]
			sum += r.Records
			p := strconv.Itoa(int(r.Partition))
			gauge(lagRecordsDesc, float64(r.Records), g, t, p)
			gauge(lagBytesDesc, float64(r.Bytes), g, t, p)
			gauge(lagSecondsDesc, r.Age.Seconds(), g, t, p)
			if r.LostTotal > 0 {
				ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, float64(r.LostTotal), g, t, p)
			}
			if !r.DeleteAt.IsZero() {
				gauge(marginDesc, max(r.DeleteAt.Sub(now), 0).Seconds(), g, t, p)
			}
		}
		gauge(lagDesc, float64(sum), g, t)
	}
	gauge(lagDroppedDesc, float64(dropped))
	gauge(lagUnknownDesc, float64(s.Unknown))
	if !s.At.IsZero() {
		gauge(lagRefreshDesc, float64(s.At.UnixMilli())/1000)
	}
	gauge(lagRefreshTookDesc, s.Took.Seconds())
}
