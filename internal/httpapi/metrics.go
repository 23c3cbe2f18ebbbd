package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// apiMetrics are the HTTP API's Prometheus metrics, labelled by route
// pattern (a fixed set) and status code.
type apiMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// Poison records (poison.go): partitions this node's instances
	// paused (the value is the paused offset), records they wrote to
	// dead-letter topics.
	paused       *prometheus.GaugeVec
	deadLettered *prometheus.CounterVec
}

func newAPIMetrics(reg prometheus.Registerer) *apiMetrics {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_http_requests_total", Help: "HTTP API requests, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fjord_http_request_duration_seconds", Help: "HTTP API request time (long-polls included), by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fjord_http_poison_paused",
			Help: "Partitions a consumer group paused at a poison record, on this node's HTTP consumer instances; the value is the paused offset.",
		}, []string{"group", "topic", "partition"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_http_poison_dead_lettered_total",
			Help: "Records this node's HTTP consumer instances wrote to a dead-letter topic after their group's attempts ran out, by group and source topic.",
		}, []string{"group", "topic"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.paused, m.deadLettered)
	}
	return m
}

// instrument wraps a route's handler.
func (m *apiMetrics) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(sw, r)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
