package node

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
)

// Defaults for the fields of Config left zero, and the values `fjord
// serve` starts with.
const (
	DefaultKafkaAddr       = "127.0.0.1:9092"
	DefaultControllerAddr  = "127.0.0.1:9093"
	DefaultHTTPAddr        = "127.0.0.1:8082"
	DefaultNumPartitions   = 1
	DefaultMaxRequestBytes = 100 << 20 // socket.request.max.bytes
	// DefaultReplicationFactor is default.replication.factor (Kafka's
	// is 1; see controller.DefaultReplicationFactor).
	DefaultReplicationFactor = controller.DefaultReplicationFactor
	// DefaultGroupInitialRebalanceDelay is Kafka's
	// group.initial.rebalance.delay.ms.
	DefaultGroupInitialRebalanceDelay = 3 * time.Second
	// DefaultReplicaLagTime is replica.lag.time.max.ms (Kafka's).
	DefaultReplicaLagTime = replica.DefaultReplicaLagTime
	// DefaultBrokerHeartbeatInterval and DefaultBrokerSessionTimeout
	// are broker.heartbeat.interval.ms and broker.session.timeout.ms
	// (controller/sessions.go says why these values).
	DefaultBrokerHeartbeatInterval = controller.DefaultBrokerHeartbeatInterval
	DefaultBrokerSessionTimeout    = controller.DefaultBrokerSessionTimeout
	// DefaultLeaderImbalanceCheckInterval and
	// DefaultLeaderImbalancePerBrokerPercentage are Kafka's (300 s, 10 %).
	DefaultLeaderImbalanceCheckInterval       = controller.DefaultLeaderImbalanceCheckInterval
	DefaultLeaderImbalancePerBrokerPercentage = controller.DefaultLeaderImbalancePerBrokerPercentage
)

// Config is one node's configuration. Its field names follow the flags of
// `fjord serve`, and validation errors name the flag (kafka-addr, ...),
// because that is what a user has to change.
type Config struct {
	// NodeID is node.id: this node's broker id and Raft server id.
	NodeID int32
	// DataDir holds the partition logs, the Raft state (metadata/) and
	// meta.properties.
	DataDir string
	// KafkaAddr is the Kafka listener's bind address (port 0 picks one).
	KafkaAddr string
	// AdvertisedKafkaAddr is the host:port given to clients in metadata
	// responses. Empty: the listener's address, which must then name a
	// host clients can dial (not 0.0.0.0 or ::).
	AdvertisedKafkaAddr string
	// Listeners are the node's named Kafka listeners (listener.Parse:
	// Kafka's listeners, advertised.listeners and
	// listener.security.protocol.map). Empty: one PLAINTEXT listener at
	// KafkaAddr, advertised at AdvertisedKafkaAddr; set, those two must
	// be left empty.
	Listeners []listener.Listener
	// InterBrokerListener is inter.broker.listener.name: the listener
	// other nodes and this node's own clients dial. Empty: the first of
	// Listeners.
	InterBrokerListener string
	// TLS is the node's certificate, key and trust store for its SSL
	// and SASL_SSL listeners, HTTPS, and its clients of other nodes.
	TLS TLSConfig
	// SASL is the SASL of its SASL_PLAINTEXT and SASL_SSL listeners and
	// of its own clients of a SASL inter-broker listener (sasl.go).
	SASL SASLConfig
	// Authz is the authorizer's static settings: super users and
	// allow.everyone.if.no.acl.found (authz.go).
	Authz AuthzConfig
	// AuditLog is the audit log of authentications and denials
	// (audit.go); its zero value: none.
	AuditLog AuditConfig
	// ControllerAddr is the Raft transport's bind address.
	ControllerAddr string
	// ControllerSecurityProtocol is the controller port's protocol:
	// PLAINTEXT (or empty, the default) or SSL, mutual TLS with TLS's
	// files, admitting super users' certificates only
	// (controller_tls.go). Every node of a cluster must agree.
	ControllerSecurityProtocol string
	// Voters is controller.quorum.voters: the quorum a new metadata log
	// is bootstrapped with, each voter with the address the others dial.
	// It must name this node. Empty: this node alone, a cluster of one.
	// Once the metadata log exists the quorum is what the log says (see
	// controller.Config.Voters).
	Voters []Voter
	// BrokerOnly is process.roles=broker: the node follows the metadata
	// log without a vote (an observer of the quorum; controller/join.go)
	// and is never the active controller. Voters must be given and must
	// not name this node. false: broker and controller, a voter when
	// Voters names it.
	BrokerOnly bool
	// Rack is broker.rack, registered with this broker
	// (metadata.ValidateRack says what is allowed). Empty: none.
	Rack string
	// ReplicaSelector is replica.selector.class: "leader" (or empty,
	// the default) or "rack", where consumers read the partitions this
	// node leads (replica.ParseReplicaSelector, KIP-392).
	ReplicaSelector string
	// HTTPAddr is the HTTP listener (the HTTP/JSON API, /metrics,
	// /healthz, /readyz). Empty: no HTTP listener.
	HTTPAddr string
	// HTTP configures the HTTP/JSON API; its zero fields take
	// httpapi's defaults.
	HTTP HTTPConfig
	// PprofAddr is a listener of its own for Go's profiling endpoints
	// (/debug/pprof/). Empty, the default: none is bound. They are kept
	// off HTTPAddr because a profile shows the process's internals and
	// costs CPU: only someone who asks for them should reach them.
	PprofAddr string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// NumPartitions is num.partitions, the partition count of topics
	// created without one. 0: DefaultNumPartitions.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor, the
	// replication factor of topics created without one, capped at the
	// brokers registered when the topic is created (a single node still
	// creates topics; an explicit factor above the brokers is refused).
	// 0: DefaultReplicationFactor.
	DefaultReplicationFactor int16
	// MaxRequestBytes is socket.request.max.bytes. 0:
	// DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms:
	// how long a new (empty) group waits for more members before its
	// first rebalance, so a group of consumers starting together
	// rebalances once. 0: DefaultGroupInitialRebalanceDelay; negative:
	// none.
	GroupInitialRebalanceDelay time.Duration
	// LogDirFreeSpaceWarn and LogDirFreeSpaceRefuse are
	// log.dir.free.space.warn and .refuse (metadata.ParseFreeSpace:
	// bytes with an optional unit, or a percentage of the file system),
	// in force while the metadata log sets neither for this broker.
	// Empty: metadata.DefaultFreeSpaceWarn, DefaultFreeSpaceRefuse.
	LogDirFreeSpaceWarn, LogDirFreeSpaceRefuse string
	// ReplicaLagTime is replica.lag.time.max.ms: how long a follower may
	// go without catching up with a leader here before it is dropped
	// from the ISR. 0: replica.DefaultReplicaLagTime.
	ReplicaLagTime time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms: how often
	// this node renews its session with the active controller. 0:
	// DefaultBrokerHeartbeatInterval.
	BrokerHeartbeatInterval time.Duration
	// BrokerSessionTimeout is broker.session.timeout.ms: how long the
	// active controller (this node, while it is) waits for a broker's
	// heartbeat before it fences the broker. Give every node the same.
	// 0: DefaultBrokerSessionTimeout.
	BrokerSessionTimeout time.Duration
	// UnsyncedWritesInMemory puts the partition logs on vfs.WriteBack:
	// what they have not fsynced is kept in this process's memory, so a
	// SIGKILL loses it as a power cut would. A test setting, for showing
	// what flush.policy=interval gives up; under flush.policy=ack every
	// acknowledged write is fsynced anyway.
	UnsyncedWritesInMemory bool
	// LogRetentionCheckInterval is log.retention.check.interval.ms: how
	// often the partition logs are checked for segments past retention
	// (retention.ms, retention.bytes, a DeleteRecords' log start). 0:
	// Kafka's 5 minutes.
	LogRetentionCheckInterval time.Duration
	// TransactionMaxTimeout is transaction.max.timeout.ms: the longest
	// transaction.timeout.ms a producer may ask for (InitProducerId
	// answers a longer one INVALID_TRANSACTION_TIMEOUT). An abandoned
	// transaction holds its partitions' last stable offsets, and so
	// their read_committed readers, for up to its timeout. 0: Kafka's
	// 15 minutes.
	TransactionMaxTimeout time.Duration
	// DisableTxnPartitionVerification is Kafka's
	// transaction.partition.verification.enable=false: a transactional
	// batch opens its producer's transaction on a partition without the
	// leader asking the coordinator first (KIP-890 part 1 off), as before
	// Kafka 3.6. A late or unadded produce can then leave a hanging
	// transaction (fjord txn find-hanging and abort end it). For
	// compatibility and tests; Transactions V2 produces (v12) still add
	// their partitions.
	DisableTxnPartitionVerification bool
	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false:
	// the active controller (this node, while it is) never moves
	// leaderships back to preferred replicas by itself, only on
	// ElectLeaders.
	DisableAutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is
	// leader.imbalance.check.interval.seconds: how often the active
	// controller checks the balance of leaderships. 0:
	// DefaultLeaderImbalanceCheckInterval.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage: the share of the
	// partitions a broker prefers and does not lead above which they
	// are elected back to it. 0: DefaultLeaderImbalancePerBrokerPercentage.
	LeaderImbalancePerBrokerPercentage int
	// Logger receives the node's logs. nil: slog.Default().
	Logger *slog.Logger
}

// HTTPConfig is the HTTP/JSON API's settings a node exposes (httpapi.Config
// has the rest, which the node fills in). Zero: httpapi's default.
type HTTPConfig struct {
	// IdempotencyWindow is http.idempotency.window.ms.
	IdempotencyWindow time.Duration
	// ConsumerIdleTimeout is http.consumer.idle.timeout.ms.
	ConsumerIdleTimeout time.Duration
	// ConsumerSessionTimeout is http.consumer.session.timeout.ms.
	ConsumerSessionTimeout time.Duration
	// MaxConcurrent bounds the requests served at once, reads apart.
	MaxConcurrent int
	// MaxLongPolls bounds the reads (consume, records) served at once.
	MaxLongPolls int
	// MaxConsumers bounds the HTTP consumer instances on the node.
	MaxConsumers int
	// MaxBodyBytes bounds a request body (http-max-body-bytes).
	MaxBodyBytes int64
	// ProtectMetricsAndHealth makes /metrics and /readyz need
	// credentials and DESCRIBE on the cluster, and /healthz credentials
	// alone, so a liveness probe does not fail while the node catches up
	// with the ACLs (http-protect-metrics-and-health); they are open by
	// default.
	ProtectMetricsAndHealth bool
}

// withDefaults fills the zero fields that have defaults.
func (c Config) withDefaults() Config {
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = DefaultReplicationFactor
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	switch {
	case c.GroupInitialRebalanceDelay == 0:
		c.GroupInitialRebalanceDelay = DefaultGroupInitialRebalanceDelay
	case c.GroupInitialRebalanceDelay < 0:
		c.GroupInitialRebalanceDelay = 0
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks every field and names the first bad one, its value and
// what is allowed. It touches neither the network nor the disk.
func (c Config) validate() error {
	bad := func(name string, v any, allowed string) error {
		return fmt.Errorf("%w: %s %q: %s", ErrInvalidConfig, name, fmt.Sprint(v), allowed)
	}
	if c.NodeID < 0 {
		return bad("node-id", c.NodeID, "allowed: 0 to 2147483647")
	}
	if strings.TrimSpace(c.DataDir) == "" {
		return fmt.Errorf("%w: data-dir is empty: give a directory path", ErrInvalidConfig)
	}
	if len(c.Listeners) == 0 {
		if err := checkBindAddr("kafka-addr", c.KafkaAddr); err != nil {
			return err
		}
	}
	if err := c.checkControllerSecurity(); err != nil {
		return err
	}
	if err := c.checkListeners(); err != nil {
		return err
	}
	if err := c.checkSASL(); err != nil {
		return err
	}
	if err := c.checkAuthz(); err != nil {
		return err
	}
	if err := c.AuditLog.check(); err != nil {
		return err
	}
	if err := checkBindAddr("controller-addr", c.ControllerAddr); err != nil {
		return err
	}
	if err := c.checkVoters(); err != nil {
		return err
	}
	if c.ReplicaLagTime < 0 || (c.ReplicaLagTime > 0 && c.ReplicaLagTime < time.Second) {
		// A follower's fetch waits up to 500 ms at its leader: a lag
		// time near that drops healthy followers between two fetches.
		return bad("replica-lag-time-max-ms", c.ReplicaLagTime.Milliseconds(), "allowed: 1000 to 3600000, or 0 for the default")
	}
	hb, session := orDefault(c.BrokerHeartbeatInterval, DefaultBrokerHeartbeatInterval), orDefault(c.BrokerSessionTimeout, DefaultBrokerSessionTimeout)
	switch {
	case hb < 10*time.Millisecond || hb > time.Minute:
		return bad("broker-heartbeat-interval-ms", hb.Milliseconds(), "allowed: 10 to 60000, or 0 for the default")
	case session < 100*time.Millisecond || session > 10*time.Minute:
		return bad("broker-session-timeout-ms", session.Milliseconds(), "allowed: 100 to 600000, or 0 for the default")
	case session < 3*hb:
		// Fewer than three heartbeats a session: one late heartbeat
		// would fence a live broker.
		return fmt.Errorf("%w: broker-session-timeout-ms %d is less than three broker-heartbeat-interval-ms (%d)",
			ErrInvalidConfig, session.Milliseconds(), hb.Milliseconds())
	}
	if err := metadata.ValidateRack(c.Rack); err != nil {
		// metadata's message names the rack and what is allowed; the
		// Kafka error code in front of it means nothing here.
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.TrimPrefix(err.Error(), metadata.ErrInvalidRack.Error()+": "))
	}
	for _, f := range []struct{ name, v string }{
		{"log-dir-free-space-warn", c.LogDirFreeSpaceWarn}, {"log-dir-free-space-refuse", c.LogDirFreeSpaceRefuse},
	} {
		if f.v == "" {
			continue
		}
		if _, err := metadata.ParseFreeSpace(f.v); err != nil {
			return fmt.Errorf("%w: %s %v", ErrInvalidConfig, f.name, err)
		}
	}
	if _, err := replica.ParseReplicaSelector(c.ReplicaSelector); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if c.HTTPAddr != "" {
		if err := checkBindAddr("http-addr", c.HTTPAddr); err != nil {
			return err
		}
	}
	if c.PprofAddr != "" {
		if err := checkBindAddr("pprof-addr", c.PprofAddr); err != nil {
			return err
		}
	}
	if len(c.Listeners) > 0 {
		// listener.Parse checked them.
	} else if c.AdvertisedKafkaAddr != "" {
		host, port, err := listener.SplitHostPort(c.AdvertisedKafkaAddr)
		switch {
		case err != nil:
			return bad("advertised-kafka-addr", c.AdvertisedKafkaAddr, "want host:port that clients can dial, e.g. broker1.example.com:9092")
		case host == "" || listener.IsUnspecified(host):
			return bad("advertised-kafka-addr", c.AdvertisedKafkaAddr, "the host must be one clients can dial, not empty, 0.0.0.0 or ::")
		case port == 0:
			return bad("advertised-kafka-addr", c.AdvertisedKafkaAddr, "the port must be 1 to 65535")
		}
	} else if host, _, _ := listener.SplitHostPort(c.KafkaAddr); host == "" || listener.IsUnspecified(host) {
		return fmt.Errorf("%w: kafka-addr %q listens on every interface, which clients cannot dial: "+
			"set advertised-kafka-addr to the host:port clients should use", ErrInvalidConfig, c.KafkaAddr)
	}
	if c.NumPartitions < 0 {
		return bad("num-partitions", c.NumPartitions, "allowed: 1 to 2147483647")
	}
	if c.DefaultReplicationFactor < 0 {
		return bad("default-replication-factor", c.DefaultReplicationFactor, "allowed: 1 to 32767")
	}
	if c.MaxRequestBytes < 0 {
		return bad("socket.request.max.bytes", c.MaxRequestBytes, "allowed: 1 to 2147483647")
	}
	if err := httpapi.CheckMaxBodyBytes(c.HTTP.MaxBodyBytes); err != nil {
		return fmt.Errorf("%w: http-max-body-bytes %d: %v", ErrInvalidConfig, c.HTTP.MaxBodyBytes, err)
	}
	return nil
}

// checkVoters checks Voters as ParseVoters would and that they name this
// node.
func (c Config) checkVoters() error {
	if len(c.Voters) == 0 {
		if c.BrokerOnly {
			return fmt.Errorf("%w: process-roles broker: a broker-only node follows a controller quorum, so it needs controller-quorum-voters", ErrInvalidConfig)
		}
		return nil
	}
	if err := checkVoters(c.Voters, nil); err != nil {
		return fmt.Errorf("%w: controller-quorum-voters: %v", ErrInvalidConfig, err)
	}
	ids := make([]string, len(c.Voters))
	own := -1
	for i, v := range c.Voters {
		ids[i] = strconv.Itoa(int(v.NodeID))
		if v.NodeID == c.NodeID {
			own = i
		}
	}
	if c.BrokerOnly {
		if own >= 0 {
			return fmt.Errorf("%w: process-roles broker: node-id %d is one of the controller-quorum-voters (%s); "+
				"a broker-only node needs an id of its own", ErrInvalidConfig, c.NodeID, strings.Join(ids, ", "))
		}
		// Port 0 binds a port no leader could replicate to.
		if _, port, _ := listener.SplitHostPort(c.ControllerAddr); port == 0 {
			return fmt.Errorf("%w: controller-addr %q: a broker-only node is sent the metadata log there, so the port must not be 0",
				ErrInvalidConfig, c.ControllerAddr)
		}
		return nil
	}
	if own < 0 {
		return fmt.Errorf("%w: node-id %d is not one of the controller-quorum-voters (%s): "+
			"add this node's entry to the list, or start it with one of those ids",
			ErrInvalidConfig, c.NodeID, strings.Join(ids, ", "))
	}
	// Port 0 binds a port no other voter knows to dial.
	if _, port, _ := listener.SplitHostPort(c.ControllerAddr); port == 0 && len(c.Voters) > 1 {
		return fmt.Errorf("%w: controller-addr %q: with other controller-quorum-voters the port must be one they can dial "+
			"(this node's entry says %s), not 0", ErrInvalidConfig, c.ControllerAddr, c.Voters[own])
	}
	return nil
}

func checkBindAddr(name, addr string) error {
	if _, _, err := listener.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: %s %q: want host:port (port 0 picks a free one), e.g. %s",
			ErrInvalidConfig, name, addr, map[string]string{
				"kafka-addr":      DefaultKafkaAddr,
				"controller-addr": DefaultControllerAddr,
				"http-addr":       DefaultHTTPAddr,
				"pprof-addr":      "127.0.0.1:6060",
			}[name])
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
