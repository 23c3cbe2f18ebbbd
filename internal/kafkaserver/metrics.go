package kafkaserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serverMetrics are the Kafka listener's Prometheus metrics. Labels are
// API names only (a fixed set), never topics or clients, so their
// cardinality is bounded.
type serverMetrics struct {
	requests    *prometheus.CounterVec   // by API
	failures    *prometheus.CounterVec   // requests that closed their connection, by API
	duration    *prometheus.HistogramVec // handler time, by API
	connections prometheus.Gauge
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_requests_total", Help: "Kafka protocol requests handled, by API.",
		}, []string{"api"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_request_failures_total", Help: "Kafka protocol requests that could not be answered and closed their connection, by API.",
		}, []string{"api"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fjord_kafka_request_duration_seconds", Help: "Time to handle a Kafka protocol request (long-polls and acks waits included), by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100 µs to 26 s
		}, []string{"api"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fjord_kafka_connections", Help: "Open Kafka protocol connections.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.failures, m.duration, m.connections)
	}
	return m
}

// observe records one handled request.
func (m *serverMetrics) observe(key int16, start time.Time, failed bool) {
	api := kmsg.NameForKey(key)
	m.requests.WithLabelValues(api).Inc()
	m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
	if failed {
		m.failures.WithLabelValues(api).Inc()
	}
}
