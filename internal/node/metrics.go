package node

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fjordmq/fjord/internal/storage"
)

// The node's Prometheus registry, served at /metrics on the HTTP
// listener: the Go runtime and the process, the Kafka listener's and the
// HTTP API's request metrics (registered by those packages), and every
// hosted partition's offsets and size, read from storage at each scrape.

func newRegistry(logs *storage.Manager) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		partitionCollector{logs: logs},
	)
	return reg
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	partLabels       = []string{"topic", "partition"}
	partLogStartDesc = prometheus.NewDesc("fjord_partition_log_start_offset", "A hosted partition's log start offset.", partLabels, nil)
	partLogEndDesc   = prometheus.NewDesc("fjord_partition_log_end_offset", "A hosted partition's log end offset.", partLabels, nil)
	partHWDesc       = prometheus.NewDesc("fjord_partition_high_watermark", "A hosted partition's high watermark.", partLabels, nil)
	partSizeDesc     = prometheus.NewDesc("fjord_partition_size_bytes", "A hosted partition's log size on disk.", partLabels, nil)
)

// partitionCollector reports each hosted partition's offsets and size:
// one series per partition per metric, as Kafka's own broker exports.
type partitionCollector struct{ logs *storage.Manager }

func (partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{partLogStartDesc, partLogEndDesc, partHWDesc, partSizeDesc} {
		ch <- d
	}
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for tp, l := range c.logs.Logs() {
		labels := []string{tp.Topic, strconv.Itoa(int(tp.Partition))}
		ch <- prometheus.MustNewConstMetric(partLogStartDesc, prometheus.GaugeValue, float64(l.LogStartOffset()), labels...)
		ch <- prometheus.MustNewConstMetric(partLogEndDesc, prometheus.GaugeValue, float64(l.LogEndOffset()), labels...)
		ch <- prometheus.MustNewConstMetric(partHWDesc, prometheus.GaugeValue, float64(l.HighWatermark()), labels...)
		ch <- prometheus.MustNewConstMetric(partSizeDesc, prometheus.GaugeValue, float64(l.Size()), labels...)
	}
}
