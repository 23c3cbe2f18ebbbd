package node

import (
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fjordmq/fjord/internal/grouplag"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// The node's Prometheus registry, served at /metrics on the HTTP
// listener: the Go runtime and the process; the Kafka listener's request
// and per-topic data metrics and the HTTP API's request metrics
// (registered by those packages); fsync latency; replication and
// transactions; and, read at each scrape, every hosted partition's
// offsets and size, each follower's lag, and the lag of the consumer
// groups this node coordinates, from the lag refresher's last snapshot
// (lag.go). Those last three grow with the partitions, and the handler
// writes them itself (metrics_text.go).

// newFsyncHistogram is storage's fsync latency, observed through
// storage.ManagerOptions.ObserveSync: the storage manager opens before
// the registry exists.
func newFsyncHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "fjord_log_flush_duration_seconds",
		Help: "Time a partition log's flush spent in fsync (its segments and, after a roll, its directory); one observation per flush that synced, however many acknowledged writes shared it.",
		// 50 µs (a write cache) to 3.3 s (a disk in trouble).
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 17),
	})
}

func observeSeconds(h prometheus.Histogram) func(time.Duration) {
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// newRegistry returns the node's registry and the collector of the
// families metricsHandler writes itself (registered in it, for their
// names).
func newRegistry(logs *storage.Manager, fsyncs prometheus.Histogram, lag *grouplag.Refresher, txns txnCollector, repl replicationCollector) (*prometheus.Registry, textCollector) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		fsyncs,
		txns,
		repl,
	)
	text := textCollector{logs: logs.Logs, lag: lag.Snapshot, maxLagRows: maxLagRows}
	if repl.n != nil {
		text.followers = func(visit func(replica.FollowerLag)) { repl.n.replicas.ReplicationStats(visit) }
	}
	reg.MustRegister(text)
	return reg, text
}

var (
	ledDesc             = prometheus.NewDesc("fjord_partitions_led", "Partitions this node leads.", nil, nil)
	followingDesc       = prometheus.NewDesc("fjord_partitions_following", "Partitions this node copies from another leader.", nil, nil)
	underReplicatedDesc = prometheus.NewDesc("fjord_partitions_under_replicated", "Partitions this node leads whose ISR is smaller than their replicas.", nil, nil)
	underMinISRDesc     = prometheus.NewDesc("fjord_partitions_under_min_isr", "Partitions this node leads whose ISR is smaller than min.insync.replicas: acks=all writes are refused.", nil, nil)
	offlineDesc         = prometheus.NewDesc("fjord_partitions_offline", "Partitions with no leader, as the metadata image has them; reported by the active controller only (0 elsewhere), as Kafka's OfflinePartitionsCount.", nil, nil)
	isrShrinksDesc      = prometheus.NewDesc("fjord_isr_shrinks_total", "ISR shrinks this node's requests committed as a leader.", nil, nil)
	isrExpandsDesc      = prometheus.NewDesc("fjord_isr_expands_total", "ISR expansions this node's requests committed as a leader.", nil, nil)
	fetchedBytesDesc    = prometheus.NewDesc("fjord_replica_fetched_bytes_total", "Record bytes this node's fetchers appended from leaders.", nil, nil)
	throttledBytesDesc  = prometheus.NewDesc("fjord_replica_throttled_fetched_bytes_total", "Record bytes this node's fetchers appended for replicas a partition reassignment is adding here (the ones follower.replication.throttled.rate holds back).", nil, nil)
	throttleRateDesc    = prometheus.NewDesc("fjord_replica_throttle_rate_bytes", "This node's follower.replication.throttled.rate in bytes per second; 0 when none is set.", nil, nil)
	fetchedBatchesDesc  = prometheus.NewDesc("fjord_replica_fetched_batches_total", "Record batches this node's fetchers appended from leaders.", nil, nil)
	truncationsDesc     = prometheus.NewDesc("fjord_replica_divergence_truncations_total", "Times this node cut a follower's log back to where it stops agreeing with its leader's (a divergent tail after a failover).", nil, nil)
	truncatedDesc       = prometheus.NewDesc("fjord_replica_truncated_records_total", "Offsets those cuts removed from this node's follower logs.", nil, nil)
	replicasOfflineDesc = prometheus.NewDesc("fjord_replicas_offline", "Replicas on this node whose log failed (a write or fsync error): offline, neither led nor followed, until the node restarts (Kafka's log-dir failure, per partition).", nil, nil)

	controllerActivationsDesc = prometheus.NewDesc("fjord_controller_activations_total", "Times this node has become the active controller since it started.", nil, nil)
	activeControllerDesc      = prometheus.NewDesc("fjord_controller_active", "1 while this node is the active controller.", nil, nil)
	failoverDesc              = prometheus.NewDesc("fjord_controller_failover_seconds", "From the last heartbeat this node heard from a broker as the active controller (or the start of its term) to the commit of the fence that moved the broker's leaderships: the part of a failover the controller sees. Reported by the node that was the active controller.", nil, nil)
	leaseHeldDesc             = prometheus.NewDesc("fjord_leader_lease_held", "1 while this node's leader lease is held (a heartbeat answered by the active controller within four fifths of a session); while it is 0 the partitions it leads refuse produce and consumer reads, NOT_LEADER_OR_FOLLOWER.", nil, nil)
	leaseLapsesDesc           = prometheus.NewDesc("fjord_leader_lease_lapses_total", "Times this node's leader lease lapsed since it started.", nil, nil)
	fencedBrokersDesc         = prometheus.NewDesc("fjord_controller_fenced_brokers", "Registered brokers that are fenced (not heard from, or not yet caught up); reported by the active controller only (0 elsewhere).", nil, nil)
	fencingsDesc              = prometheus.NewDesc("fjord_controller_broker_fencings_total", "Brokers this node fenced as the active controller (a lapsed session, or a new process in a live one's place).", nil, nil)
	unfencingsDesc            = prometheus.NewDesc("fjord_controller_broker_unfencings_total", "Brokers this node unfenced as the active controller.", nil, nil)
	electionsDesc             = prometheus.NewDesc("fjord_controller_leader_elections_total", "Partitions this node gave a new leader, from the ISR, as the active controller when fencing or unfencing brokers.", nil, nil)
	leaderlessDesc            = prometheus.NewDesc("fjord_controller_partitions_left_leaderless_total", "Partitions this node left without a leader as the active controller: their last ISR member was fenced.", nil, nil)
	controlledShutdownsDesc   = prometheus.NewDesc("fjord_controller_controlled_shutdowns_total", "Brokers this node put in controlled shutdown as the active controller (their leaderships and ISR places moved before they stopped).", nil, nil)
	preferredElectionsDesc    = prometheus.NewDesc("fjord_controller_preferred_leader_elections_total", "Partitions whose preferred replica this node made leader again as the active controller (the automatic leadership balance, or ElectLeaders).", nil, nil)
	offlineReplicasDesc       = prometheus.NewDesc("fjord_controller_offline_replicas_total", "Replicas this node marked offline as the active controller, their logs having failed on their brokers: each left its ISR, and its leadership moved where it led.", nil, nil)
	uncleanElectionsDesc      = prometheus.NewDesc("fjord_controller_unclean_leader_elections_total", "Partitions this node gave a leader from outside their ISR as the active controller (unclean.leader.election.enable): records only the fenced ISR held may have been lost.", nil, nil)
)

// replicationCollector reports the replication of the partitions this
// node hosts and its part in the controller quorum, read at each scrape.
type replicationCollector struct {
	n *Node
}

func (replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ledDesc, followingDesc, underReplicatedDesc, underMinISRDesc, offlineDesc,
		isrShrinksDesc, isrExpandsDesc, fetchedBytesDesc, throttledBytesDesc, throttleRateDesc, fetchedBatchesDesc, truncationsDesc, truncatedDesc, replicasOfflineDesc,
		controllerActivationsDesc, activeControllerDesc, fencedBrokersDesc, fencingsDesc, unfencingsDesc, electionsDesc, leaderlessDesc, uncleanElectionsDesc, controlledShutdownsDesc, preferredElectionsDesc, offlineReplicasDesc, failoverDesc, leaseHeldDesc, leaseLapsesDesc} {
		ch <- d
	}
}

func (c replicationCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	// Each follower's lag is per partition: textCollector writes it.
	s := c.n.replicas.ReplicationStats(nil)
	gauge(ledDesc, float64(s.Led))
	gauge(followingDesc, float64(s.Following))
	gauge(underReplicatedDesc, float64(s.UnderReplicated))
	gauge(underMinISRDesc, float64(s.UnderMinISR))
	counter(isrShrinksDesc, s.ISRShrinks)
	counter(isrExpandsDesc, s.ISRExpands)
	counter(fetchedBytesDesc, s.FetchedBytes)
	counter(throttledBytesDesc, s.ThrottledBytes)
	gauge(throttleRateDesc, float64(s.ThrottleRate))
	counter(fetchedBatchesDesc, s.FetchedBatches)
	counter(truncationsDesc, s.Truncations)
	counter(truncatedDesc, s.TruncatedRecords)
	gauge(replicasOfflineDesc, float64(s.Offline))
	active, offline, fenced := 0.0, 0, 0
	if c.n.ctrl.ControllerID() == c.n.cfg.NodeID {
		active = 1
		img := c.n.ctrl.Image()
		for _, t := range img.Topics {
			for _, p := range t.Partitions {
				if p.Leader < 0 {
					offline++
				}
			}
		}
		for _, b := range img.Brokers {
			if b.Fenced {
				fenced++
			}
		}
	}
	gauge(offlineDesc, float64(offline))
	gauge(fencedBrokersDesc, float64(fenced))
	fs := c.n.ctrl.FenceStats()
	counter(fencingsDesc, fs.Fencings)
	counter(unfencingsDesc, fs.Unfencings)
	counter(electionsDesc, fs.Elections)
	counter(leaderlessDesc, fs.Leaderless)
	counter(uncleanElectionsDesc, fs.UncleanElections)
	counter(controlledShutdownsDesc, fs.ControlledShutdowns)
	counter(preferredElectionsDesc, fs.PreferredElections)
	counter(offlineReplicasDesc, fs.OfflineReplicas)
	buckets, sum, count := c.n.ctrl.FailoverHistogram()
	ch <- prometheus.MustNewConstHistogram(failoverDesc, count, sum, buckets)
	gauge(activeControllerDesc, active)
	held := 0.0
	if c.n.lease.Held() {
		held = 1
	}
	gauge(leaseHeldDesc, held)
	counter(leaseLapsesDesc, c.n.leaseLapses.Load())
	counter(controllerActivationsDesc, c.n.ctrl.Activations())
}

// partitionFamilies are the per-partition families textCollector
// writes: one series per hosted partition per family, as Kafka's own
// broker exports, and one per follower of each partition this node
// leads.
var partitionFamilies = []textFamily{
	{name: "fjord_partition_log_start_offset", help: "A hosted partition's log start offset.", rows: perPartition,
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.partitions[i].logStart), true }},
	{name: "fjord_partition_log_end_offset", help: "A hosted partition's log end offset.", rows: perPartition,
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.partitions[i].logEnd), true }},
	{name: "fjord_partition_high_watermark", help: "A hosted partition's high watermark.", rows: perPartition,
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.partitions[i].highWatermark), true }},
	{name: "fjord_partition_size_bytes", help: "A hosted partition's log size on disk.", rows: perPartition,
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.partitions[i].size), true }},
	{name: "fjord_partition_last_stable_lag_records", rows: perPartition,
		help:  "High watermark less last stable offset: the records read_committed consumers cannot read yet, behind a transaction still open (or decided, its marker not yet replicated).",
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.partitions[i].lsoLag), true }},
	{name: "fjord_partition_retention_margin_seconds", rows: perPartition,
		help: "How long until time retention (retention.ms) may delete a hosted partition's oldest segment: its largest timestamp plus retention.ms, less now, and 0 when due. Absent without time retention or records.",
		value: func(s *textScrape, i int) (float64, bool) {
			return s.partitions[i].retentionMargin, s.partitions[i].hasMargin
		}},
	{name: "fjord_follower_lag_records", rows: perFollower,
		help:  "For a partition this node leads: its log end offset less the follower's last fetch offset (-1: not fetched since this node became leader).",
		value: func(s *textScrape, i int) (float64, bool) { return float64(s.followers[i].Records), true }},
}

var (
	txnOngoingDesc   = prometheus.NewDesc("fjord_transactions_ongoing", "Transactions this node coordinates that are open or being completed (they hold their partitions' last stable offsets).", nil, nil)
	txnCommittedDesc = prometheus.NewDesc("fjord_transactions_committed_total", "Transactions this node's coordinator completed with a commit since it started.", nil, nil)
	txnAbortedDesc   = prometheus.NewDesc("fjord_transactions_aborted_total", "Transactions this node's coordinator completed with an abort since it started (timed out, fenced, or the producer's).", nil, nil)
	txnTimedOutDesc  = prometheus.NewDesc("fjord_transactions_timed_out_total", "Aborts this node's coordinator started at a transaction's timeout since it started.", nil, nil)
	txnLoadDesc      = prometheus.NewDesc("fjord_transaction_coordinator_load_seconds", "How long the latest load of __transaction_state partitions this node came to lead took (0 before the first).", nil, nil)
)

// txnCollector reports the transaction coordinator's figures.
type txnCollector struct {
	coord  *txn.Coordinator
	loader *txnstatetopic.Loader
}

func (txnCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{txnOngoingDesc, txnCommittedDesc, txnAbortedDesc, txnTimedOutDesc, txnLoadDesc} {
		ch <- d
	}
}

func (c txnCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.coord.Stats()
	ch <- prometheus.MustNewConstMetric(txnOngoingDesc, prometheus.GaugeValue, float64(s.Ongoing))
	ch <- prometheus.MustNewConstMetric(txnCommittedDesc, prometheus.CounterValue, float64(s.Committed))
	ch <- prometheus.MustNewConstMetric(txnAbortedDesc, prometheus.CounterValue, float64(s.Aborted))
	ch <- prometheus.MustNewConstMetric(txnTimedOutDesc, prometheus.CounterValue, float64(s.TimedOut))
	ch <- prometheus.MustNewConstMetric(txnLoadDesc, prometheus.GaugeValue, c.loader.LastLoad().Seconds())
}

// httpConnGauge registers fjord_http_connections and returns the HTTP
// server's ConnState hook that keeps it.
func httpConnGauge(reg prometheus.Registerer) func(net.Conn, http.ConnState) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fjord_http_connections", Help: "Open connections to the HTTP listener.",
	})
	reg.MustRegister(g)
	return func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			g.Inc()
		case http.StateClosed, http.StateHijacked: // each connection ends in exactly one of these
			g.Dec()
		}
	}
}
