package kafkaserver

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/quota"
)

// serverMetrics are the Kafka listener's Prometheus metrics. Request
// metrics are labelled by API name (a fixed set), never by client. Data
// metrics are labelled by topic, as Kafka's BytesInPerSec is: one series
// per topic per metric, dropped when the topic is deleted here.
type serverMetrics struct {
	requests    *prometheus.CounterVec   // by API
	failures    *prometheus.CounterVec   // requests that closed their connection, by API
	errors      *prometheus.CounterVec   // error codes in responses, by API and error
	duration    *prometheus.HistogramVec // handler time, by API
	connections prometheus.Gauge
	// tlsHandshakeFailures counts TLS handshakes that failed or timed
	// out, by listener (a fixed set).
	tlsHandshakeFailures *prometheus.CounterVec
	// saslSuccesses and saslFailures count SASL authentications (and
	// re-authentications), by listener.
	saslSuccesses, saslFailures *prometheus.CounterVec
	// authzDenied counts authorization denials (authz.go).
	authzDenied prometheus.Counter
	// connectionsRefused counts connections closed at accept past a
	// connection limit, by refusal (index admitted is unused).
	connectionsRefused [numRefusals]prometheus.Counter

	bytesIn, recordsIn, bytesOut, recordsOut *prometheus.CounterVec // by topic
	// consumerBytes and consumerRecords are bytesOut and recordsOut for
	// the whole node, by the role it served them in (servedAs): the
	// leader's copy or, for consumers sent to their rack's replica
	// (KIP-392), a follower's. Two series each, never more.
	consumerBytes, consumerRecords [2]prometheus.Counter
	// topics caches each topic's four counters: the produce and fetch
	// paths would otherwise hash the label four times per partition.
	topics sync.Map // topic name -> *topicCounters
	// addedToKeyed counts partitions added to topics with keyed records
	// (create_partitions.go), by topic: each such grow moved keys.
	addedToKeyed *prometheus.CounterVec
	// throttles counts responses that carried a quota throttle, by the
	// quota (quota.Kind; quota.go).
	throttles [4]prometheus.Counter // the kinds before quota.ConnectionCreations
}

type topicCounters struct {
	bytesIn, recordsIn, bytesOut, recordsOut prometheus.Counter
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_requests_total", Help: "Kafka protocol requests handled, by API.",
		}, []string{"api"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_request_failures_total", Help: "Kafka protocol requests that could not be answered and closed their connection, by API.",
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_errors_total", Help: "Error codes in Kafka protocol responses (one per topic, partition or group that carries one), by API and error name.",
		}, []string{"api", "error"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fjord_kafka_request_duration_seconds", Help: "Time to handle a Kafka protocol request (long-polls and acks waits included), by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100 µs to 26 s
		}, []string{"api"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fjord_kafka_connections", Help: "Open Kafka protocol connections.",
		}),
		tlsHandshakeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_tls_handshake_failures_total", Help: "TLS handshakes of new Kafka protocol connections that failed or timed out, by listener.",
		}, []string{"listener"}),
		saslSuccesses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_sasl_authentications_total", Help: "SASL authentications and re-authentications that succeeded, by listener.",
		}, []string{"listener"}),
		saslFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_kafka_sasl_authentication_failures_total", Help: "SASL authentications that failed (wrong credentials, expired tokens, broken exchanges), by listener.",
		}, []string{"listener"}),
		authzDenied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fjord_kafka_authorization_denials_total", Help: "Authorization checks that denied a request's principal an operation on a resource it asked for (not the resources an answer leaves out unasked, such as the topics of a Metadata of every topic).",
		}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_topic_bytes_in_total", Help: "Record batch bytes appended by producers (the HTTP API's included; not idempotent retries, which append nothing), by topic.",
		}, []string{"topic"}),
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_topic_records_in_total", Help: "Records appended by producers (the HTTP API's included; not idempotent retries, which append nothing), by topic.",
		}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_topic_bytes_out_total", Help: "Record batch bytes sent to consumers in fetch responses (not to follower replicas), by topic.",
		}, []string{"topic"}),
		addedToKeyed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_partitions_added_to_keyed_topics_total", Help: "Partitions added (CreatePartitions through this node) to topics that have keyed records, by topic: keys written before and after such a grow may be in different partitions, so per-key order broke there.",
		}, []string{"topic"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_topic_records_out_total", Help: "Offsets handed to consumers in fetch responses, from each fetch offset to the last offset sent, by topic; in a compacted topic the offsets compaction removed count too.",
		}, []string{"topic"}),
	}
	consumerBytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fjord_consumer_fetch_bytes_total", Help: "Record batch bytes this node sent to consumers, by the replica it served them as: leader, or follower (a consumer reading from its rack's replica, KIP-392).",
	}, []string{"served_as"})
	consumerRecords := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fjord_consumer_fetch_records_total", Help: "Offsets this node handed to consumers (as fjord_topic_records_out_total counts them), by the replica it served them as: leader or follower.",
	}, []string{"served_as"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fjord_connections_refused_total", Help: "Kafka protocol connections closed as soon as they were accepted, past a connection limit, by reason: max_connections, max_connections_per_ip or connection_creation_rate (a client quota on the address).",
	}, []string{"reason"})
	for r := admitted + 1; r < numRefusals; r++ {
		m.connectionsRefused[r] = refused.WithLabelValues(refusalReasons[r])
	}
	throttles := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fjord_quota_throttles_total", Help: "Responses that told a client to wait (throttle_time_ms, and its connection muted meanwhile) because it was over a client quota, by quota: producer_byte_rate, consumer_byte_rate, request_percentage or controller_mutation_rate.",
	}, []string{"quota"})
	for k := range m.throttles {
		m.throttles[k] = throttles.WithLabelValues(quota.Kind(k).String())
	}
	for role, name := range servedAs {
		m.consumerBytes[role] = consumerBytes.WithLabelValues(name)
		m.consumerRecords[role] = consumerRecords.WithLabelValues(name)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.failures, m.errors, m.duration, m.connections, m.tlsHandshakeFailures, m.saslSuccesses, m.saslFailures, m.authzDenied, m.bytesIn, m.recordsIn, m.bytesOut, m.recordsOut,
			consumerBytes, consumerRecords, m.addedToKeyed, refused, throttles)
	}
	return m
}

// throttled counts a response that carried a throttle for kind.
func (m *serverMetrics) throttled(kind quota.Kind) {
	if int(kind) < len(m.throttles) {
		m.throttles[kind].Inc()
	}
}

// servedAs names the served_as label's values: index 1 is a read from a
// follower's copy.
var servedAs = [2]string{"leader", "follower"}

func servedAsIndex(fromFollower bool) int {
	if fromFollower {
		return 1
	}
	return 0
}

func (m *serverMetrics) topic(name string) *topicCounters {
	if c, ok := m.topics.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := m.topics.LoadOrStore(name, &topicCounters{
		bytesIn: m.bytesIn.WithLabelValues(name), recordsIn: m.recordsIn.WithLabelValues(name),
		bytesOut: m.bytesOut.WithLabelValues(name), recordsOut: m.recordsOut.WithLabelValues(name),
	})
	return c.(*topicCounters)
}

// produced counts an append to topic of size bytes holding records
// records; an idempotent producer's retry, which writes nothing, counts
// nothing.
func (m *serverMetrics) produced(topic string, size int, records int64) {
	if records == 0 {
		return
	}
	c := m.topic(topic)
	c.bytesIn.Add(float64(size))
	c.recordsIn.Add(float64(records))
}

// fetched counts what a consumer's fetch of topic from fetchOffset sent:
// size bytes of batches ending at lastOffset, read from this node's copy
// as a follower or as the leader.
func (m *serverMetrics) fetched(topic string, size int, fetchOffset, lastOffset int64, fromFollower bool) {
	c := m.topic(topic)
	role := servedAsIndex(fromFollower)
	c.bytesOut.Add(float64(size))
	m.consumerBytes[role].Add(float64(size))
	if lastOffset >= fetchOffset {
		c.recordsOut.Add(float64(lastOffset - fetchOffset + 1))
		m.consumerRecords[role].Add(float64(lastOffset - fetchOffset + 1))
	}
}

// partitionsAddedToKeyed counts n partitions added to topic, which has
// keyed records.
func (m *serverMetrics) partitionsAddedToKeyed(topic string, n int32) {
	m.addedToKeyed.WithLabelValues(topic).Add(float64(n))
}

// forgetTopic drops a deleted topic's series, so that topics created and
// deleted over months do not grow the scrape forever.
func (m *serverMetrics) forgetTopic(topic string) {
	m.topics.Delete(topic)
	for _, v := range []*prometheus.CounterVec{m.bytesIn, m.recordsIn, m.bytesOut, m.recordsOut, m.addedToKeyed} {
		v.DeleteLabelValues(topic)
	}
}

// observe records one handled request and the error codes of its
// response (nil when there is none).
func (m *serverMetrics) observe(key int16, start time.Time, resp kmsg.Response, failed bool) {
	api := fjordmsg.NameForKey(key)
	m.requests.WithLabelValues(api).Inc()
	m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
	if failed {
		m.failures.WithLabelValues(api).Inc()
	}
	if resp != nil {
		eachErrorCode(resp, func(code int16) {
			m.errors.WithLabelValues(api, errorName(code)).Inc()
		})
	}
}

// errorName is the Kafka name of code, or its number for a code kerr
// does not know (the label set stays bounded by the int16 range either
// way, and in practice by the codes handlers answer).
func errorName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok && ke.Code == code { // kerr answers UNKNOWN_SERVER_ERROR for codes it does not know
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}
