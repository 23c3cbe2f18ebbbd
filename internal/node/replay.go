package node

import "github.com/prometheus/client_golang/prometheus"

// The replay budget (replica/replay.go), for /metrics.
var (
	replayRateDesc  = prometheus.NewDesc("fjord_replay_budget_bytes_per_second", "replay.max.bytes.per.second: what consumer fetches far behind the log end may read a second on this node (0: no budget).", nil, nil)
	replayTailDesc  = prometheus.NewDesc("fjord_replay_tail_bytes", "replay.tail.bytes: how far behind its log end a consumer fetch must read to draw on the replay budget.", nil, nil)
	replayBytesDesc = prometheus.NewDesc("fjord_replay_bytes_total", "Bytes consumer fetches read far behind the log end (drawing on the replay budget) since the node started.", nil, nil)
	replayHeldDesc  = prometheus.NewDesc("fjord_replay_reads_held_total", "Partition reads of consumer fetches far behind the log end held back for an empty replay budget since the node started.", nil, nil)
)

type replayCollector struct{ n *Node }

func (replayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replayRateDesc, replayTailDesc, replayBytesDesc, replayHeldDesc} {
		ch <- d
	}
}

func (c replayCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.replicas.ReplayStats()
	ch <- prometheus.MustNewConstMetric(replayRateDesc, prometheus.GaugeValue, float64(s.Rate))
	ch <- prometheus.MustNewConstMetric(replayTailDesc, prometheus.GaugeValue, float64(s.TailBytes))
	ch <- prometheus.MustNewConstMetric(replayBytesDesc, prometheus.CounterValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(replayHeldDesc, prometheus.CounterValue, float64(s.Held))
}
