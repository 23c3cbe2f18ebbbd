package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/node"
)

// serveOptions are the flags of `fjord serve`. Each can also be set as
// FJORD_<NAME> in the environment and as <name> in the --config YAML
// file; a flag beats the environment, which beats the file, which beats
// the default.
type serveOptions struct {
	configFile          string
	nodeID              int32
	dataDir             string
	kafkaAddr           string
	advertisedKafkaAddr string
	controllerAddr      string
	// voters is --controller-quorum-voters; nil: a cluster of one.
	voters []node.Voter
	rack   string
	// replicaSelector is replica.selector.class: leader or rack.
	replicaSelector  string
	brokerOnly       bool
	httpAddr         string
	pprofAddr        string
	autoCreateTopics bool
	numPartitions    int32
	logLevel         string
	// groupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms.
	groupInitialRebalanceDelayMs int32
	// replicaLagTimeMaxMs is replica.lag.time.max.ms.
	replicaLagTimeMaxMs int32
	// brokerHeartbeatIntervalMs and brokerSessionTimeoutMs are
	// broker.heartbeat.interval.ms and broker.session.timeout.ms.
	brokerHeartbeatIntervalMs, brokerSessionTimeoutMs int32
	// autoLeaderRebalance, leaderImbalanceCheckIntervalSeconds and
	// leaderImbalancePerBrokerPercentage are Kafka's settings of those
	// names.
	autoLeaderRebalance bool
	// unsyncedWritesInMemory is node.Config.UnsyncedWritesInMemory.
	unsyncedWritesInMemory bool
	// txnPartitionVerification is Kafka's
	// transaction.partition.verification.enable.
	txnPartitionVerification bool
	// transactionMaxTimeoutMs is Kafka's transaction.max.timeout.ms.
	transactionMaxTimeoutMs int32
	// logRetentionCheckIntervalMs is Kafka's log.retention.check.interval.ms.
	logRetentionCheckIntervalMs                                             int32
	leaderImbalanceCheckIntervalSeconds, leaderImbalancePerBrokerPercentage int32
	// The HTTP API's settings (node.HTTPConfig).
	httpIdempotencyWindowMs   int32
	httpConsumerIdleTimeoutMs int32
	// httpConsumerSessionTimeoutMs is the HTTP consumer instances'
	// group session.
	httpConsumerSessionTimeoutMs int32
	httpMaxConcurrent            int32
	httpMaxLongPolls             int32
	httpMaxConsumers             int32
	httpMaxBodyBytes             int64
	httpProtectMetricsAndHealth  bool

	// defaultReplicationFactor is default.replication.factor.
	defaultReplicationFactor int16
	// logDirFreeSpaceWarn and logDirFreeSpaceRefuse are
	// log.dir.free.space.warn and .refuse.
	logDirFreeSpaceWarn, logDirFreeSpaceRefuse string

	// The listeners, in Kafka's shapes (listener.Flags); parsed into
	// listeners and interBroker before run.
	listenerFlags listener.Flags
	listeners     []listener.Listener
	// tls is the node's TLS material (node.TLSConfig).
	tls node.TLSConfig
	// sasl is the node's SASL (node.SASLConfig); the fields below are
	// its flags as given, parsed into it before run.
	sasl                                    node.SASLConfig
	saslMechanisms, oauthAudience           string
	interBrokerPasswordFile, bootstrapScram string
	connectionsMaxReauthMs                  int32
	// authz is the authorizer's settings (node.AuthzConfig), from
	// superUsers and allowEveryone before run.
	authz                     node.AuthzConfig
	superUsers, allowEveryone string
	// auditLog is the audit log (node.AuditConfig).
	auditLog node.AuditConfig
	// controllerSecurityProtocol is node.Config.ControllerSecurityProtocol.
	controllerSecurityProtocol string
}

func newServeCommand() *cobra.Command { return newServeCommandWith(runServe) }

// newServeCommandWith takes the function that runs the node, so tests can
// check how flags, the environment and the config file combine without
// starting one.
func newServeCommandWith(run func(context.Context, serveOptions, io.Writer) error) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Fjord node",
		Long: `Run a Fjord node: a Kafka-compatible broker and a Raft controller in one
process. Alone it is a cluster of one (one voter). With
--controller-quorum-voters (Kafka's controller.quorum.voters, e.g.
1@node1:9093,2@node2:9093,3@node3:9093) it is one voter of that quorum: give
every node the same list, each with its own --node-id; --controller-addr then
defaults to this node's entry. The list is read when the metadata log is new;
after that the quorum is what the log says.

Kafka clients connect to --kafka-addr. Topics, partitions and configs live in
the metadata log under <data-dir>/metadata; partition logs under
<data-dir>/<topic>-<partition>. GET /healthz and /readyz on --http-addr say
whether the process is up and whether it serves its partitions. --pprof-addr,
off unless given, serves Go's profiles (/debug/pprof/) on a listener of its
own.

Every flag can also be set in the environment as FJORD_<FLAG> (e.g.
FJORD_DATA_DIR=/var/lib/fjord) and in a YAML file given with --config whose
keys are the flag names (e.g. "kafka-addr: 0.0.0.0:9092"). A flag beats the
environment, which beats the file.

SIGINT or SIGTERM shuts down cleanly: in a cluster the node first hands its
partition leaderships (and, if it is the active controller, the controller)
to the other nodes while it still serves, then flushes, checkpoints and
closes; a second signal exits at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := o.configFile
			if !cmd.Flags().Changed("config") {
				path = os.Getenv(envName("config"))
			}
			var file map[string]string
			if path != "" {
				var err error
				if file, err = readConfigFile(cmd, path); err != nil {
					return err
				}
			}
			if err := applySources(cmd, file, path); err != nil {
				return err
			}
			if err := o.parseListeners(cmd); err != nil {
				return err
			}
			if err := o.parseSASL(); err != nil {
				return err
			}
			if err := o.parseAuthz(); err != nil {
				return err
			}
			if err := o.parseAudit(cmd); err != nil {
				return err
			}
			if len(o.voters) > 0 && !cmd.Flags().Changed("controller-addr") {
				o.controllerAddr = ownVoterAddr(o.voters, o.nodeID, o.controllerAddr)
			}
			return run(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", "YAML file of flag values (keys are flag names)")
	f.Var(newIntFlag(&o.nodeID, 1, 0, math.MaxInt32, ""), "node-id", "this node's id (node.id)")
	f.StringVar(&o.dataDir, "data-dir", "./fjord-data", "directory holding the partition logs and the metadata log")
	f.StringVar(&o.kafkaAddr, "kafka-addr", node.DefaultKafkaAddr, "Kafka listener address (host:port)")
	f.StringVar(&o.advertisedKafkaAddr, "advertised-kafka-addr", "", "host:port given to clients (default: the listener's address)")
	f.StringVar(&o.listenerFlags.Listeners, "listeners", "",
		"named Kafka listeners, NAME://host:port,... (Kafka's listeners), e.g. INTERNAL://10.0.0.1:9092,CLIENT://0.0.0.0:9094; replaces --kafka-addr")
	f.StringVar(&o.listenerFlags.Advertised, "advertised-listeners", "",
		"NAME://host:port,... given to clients of each listener (advertised.listeners; default: each listener's address)")
	f.StringVar(&o.listenerFlags.ProtocolMap, "listener-security-protocol-map", "",
		"NAME:PROTOCOL,... each listener's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (listener.security.protocol.map; default: a listener named after a protocol uses it)")
	f.StringVar(&o.listenerFlags.InterBroker, "inter-broker-listener-name", "",
		"the listener other nodes and this node's own HTTP gateway dial (inter.broker.listener.name; default: the first of --listeners)")
	f.StringVar(&o.tls.CertFile, "ssl-cert-file", "", "PEM certificate (chain) of SSL listeners, HTTPS, and this node as a client of other nodes")
	f.StringVar(&o.tls.KeyFile, "ssl-key-file", "", "PEM private key of --ssl-cert-file")
	f.StringVar(&o.tls.CAFile, "ssl-ca-file", "", "PEM trust store: CAs of clients' certificates and of other nodes' (default for other nodes: the system's roots)")
	f.Var(newEnumFlag(&o.tls.ClientAuth, "none", "none", "requested", "required"), "ssl-client-auth",
		"client certificates on SSL listeners (ssl.client.auth): none, requested or required; a verified one names the connection's principal")
	f.StringVar(&o.tls.PrincipalMappingRules, "ssl-principal-mapping-rules", "",
		"rules mapping a client certificate's subject to a principal name (ssl.principal.mapping.rules), e.g. RULE:^CN=(.*?),.*$/$1/,DEFAULT")
	addBoolFlag(f, &o.tls.HTTP, "http-tls", false, "serve --http-addr over TLS with --ssl-cert-file")
	f.StringVar(&o.saslMechanisms, "sasl-enabled-mechanisms", "",
		"mechanisms of SASL_PLAINTEXT and SASL_SSL listeners, comma-separated: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER (sasl.enabled.mechanisms; default SCRAM-SHA-512,SCRAM-SHA-256)")
	f.StringVar(&o.sasl.OAuth.JWKSFile, "sasl-oauthbearer-jwks-file", "", "JSON Web Key Set file OAUTHBEARER tokens are verified against, re-read when it changes")
	f.StringVar(&o.sasl.OAuth.JWKSURL, "sasl-oauthbearer-jwks-url", "", "JSON Web Key Set URL OAUTHBEARER tokens are verified against (sasl.oauthbearer.jwks.endpoint.url)")
	f.StringVar(&o.oauthAudience, "sasl-oauthbearer-expected-audience", "", "comma-separated audiences an OAUTHBEARER token must name one of (sasl.oauthbearer.expected.audience; default: any)")
	f.StringVar(&o.sasl.OAuth.ExpectedIssuer, "sasl-oauthbearer-expected-issuer", "", "the issuer an OAUTHBEARER token must name (sasl.oauthbearer.expected.issuer; default: any)")
	f.StringVar(&o.sasl.OAuth.SubClaimName, "sasl-oauthbearer-sub-claim-name", "sub", "the token claim that names the principal (sasl.oauthbearer.sub.claim.name)")
	f.Var(newIntFlag(&o.connectionsMaxReauthMs, 0, 0, math.MaxInt32, ""), "connections-max-reauth-ms",
		"how long a SASL session lasts before the client must re-authenticate on its connection (connections.max.reauth.ms; 0: never)")
	f.StringVar(&o.sasl.InterBrokerMechanism, "sasl-mechanism-inter-broker-protocol", "SCRAM-SHA-512",
		"how this node authenticates to a SASL inter-broker listener: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")
	f.StringVar(&o.sasl.InterBrokerUser, "inter-broker-sasl-username", "", "the user this node authenticates as to a SASL inter-broker listener")
	f.StringVar(&o.interBrokerPasswordFile, "inter-broker-sasl-password-file", "", "file holding that user's password (its first line)")
	f.StringVar(&o.bootstrapScram, "bootstrap-scram-users", "",
		"SCRAM users put into a new metadata log with its cluster id, Kafka's --add-scram syntax separated by spaces: SCRAM-SHA-512=[name=broker,password=secret] (ignored once the log exists)")
	f.StringVar(&o.superUsers, "super-users", "",
		"principals allowed everything whatever the ACLs say, separated by ';': User:admin;User:broker (super.users; the nodes' own principal belongs here once ACLs are enforced)")
	f.StringVar(&o.allowEveryone, "allow-everyone-if-no-acl-found", "",
		"true or false: allow a request on a resource no ACL names (allow.everyone.if.no.acl.found; default: false when a listener authenticates clients, true when none does)")
	f.StringVar(&o.auditLog.Path, "audit-log", "",
		"file of the audit log: a JSON line per authentication and per authorization denial, rate-limited (default: none; the directory must exist)")
	f.Var(newIntFlag[int64](&o.auditLog.MaxBytes, audit.DefaultMaxBytes, audit.MinMaxBytes, maxAuditLogBytes, ""), "audit-log-max-bytes",
		"size at which the audit log is renamed to <audit-log>.1 (replacing the last) and begun again, so the two hold at most twice it")
	f.StringVar(&o.controllerAddr, "controller-addr", node.DefaultControllerAddr, "Raft controller bind address (host:port; with --controller-quorum-voters the default is this node's entry)")
	f.Var(newEnumFlag(&o.controllerSecurityProtocol, node.ControllerPlaintext, node.ControllerPlaintext, node.ControllerSSL), "controller-security-protocol",
		"the controller port's protocol: PLAINTEXT, or SSL (mutual TLS with --ssl-cert-file, verified against --ssl-ca-file, admitting --super-users' certificates only: name the nodes' principals there, e.g. User:CN=node-1). Kafka names the controller listener's protocol in listener.security.protocol.map; Fjord's controller port is one")
	f.Var(&votersFlag{&o.voters}, "controller-quorum-voters",
		"the controller quorum, id@host:port,... (Kafka's controller.quorum.voters), each the address the other voters dial (default: this node alone, a cluster of one)")
	f.Var(&processRolesFlag{&o.brokerOnly}, "process-roles",
		"this node's roles (process.roles): broker,controller (a voter when --controller-quorum-voters names it), or broker (follows the quorum's metadata log without a vote; its id must not be a voter's)")
	f.StringVar(&o.rack, "rack", "", "this broker's rack (broker.rack), for spreading replicas over racks")
	f.Var(newEnumFlag(&o.replicaSelector, "leader", "leader", "rack"), "replica-selector",
		"where consumers read a partition this node leads (replica.selector.class): leader, or rack (an in-sync replica in the consumer's client.rack, KIP-392)")
	f.Var(newFreeSpaceFlag(&o.logDirFreeSpaceWarn, metadata.DefaultFreeSpaceWarn), "log-dir-free-space-warn",
		"free space in the data directory's file system below which the node warns: bytes with an optional unit (e.g. 20GiB) or a percentage (e.g. 10%) (log.dir.free.space.warn; a dynamic broker config overrides it)")
	f.Var(newFreeSpaceFlag(&o.logDirFreeSpaceRefuse, metadata.DefaultFreeSpaceRefuse), "log-dir-free-space-refuse",
		"free space below which the node refuses client produces with KAFKA_STORAGE_ERROR (retriable) until space is freed, keeping room for replication, offset commits and transaction markers: bytes with an optional unit or a percentage (log.dir.free.space.refuse; a dynamic broker config overrides it)")
	f.StringVar(&o.httpAddr, "http-addr", node.DefaultHTTPAddr, "HTTP address for the HTTP/JSON API, /metrics, /healthz and /readyz (host:port)")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "HTTP address for Go's profiles under /debug/pprof/ (host:port; default: off)")
	addBoolFlag(f, &o.autoCreateTopics, "auto-create-topics", true, "create unknown topics on produce and metadata requests (auto.create.topics.enable)")
	f.Var(newIntFlag(&o.numPartitions, node.DefaultNumPartitions, 1, math.MaxInt32, ""), "num-partitions", "partitions of a topic created without a count (num.partitions)")
	f.Var(newIntFlag(&o.defaultReplicationFactor, node.DefaultReplicationFactor, 1, math.MaxInt16, ""), "default-replication-factor",
		"replicas per partition of a topic created without a replication factor, capped at the brokers registered then (default.replication.factor)")
	f.Var(newEnumFlag(&o.logLevel, "info", "debug", "info", "warn", "error"), "log-level", "log level: debug, info, warn, error")
	f.Var(newIntFlag(&o.groupInitialRebalanceDelayMs, int32(node.DefaultGroupInitialRebalanceDelay/time.Millisecond), 0, 300_000, ""),
		"group-initial-rebalance-delay-ms", "how long a new consumer group waits for more members before its first rebalance (group.initial.rebalance.delay.ms)")
	// At least a second: a caught-up follower's fetch waits up to 500 ms
	// at its leader (replica.fetch.wait.max.ms), and a lag time near
	// that would drop healthy followers between two fetches.
	f.Var(newIntFlag(&o.replicaLagTimeMaxMs, int32(node.DefaultReplicaLagTime/time.Millisecond), 1000, 3_600_000, ""),
		"replica-lag-time-max-ms", "how long a follower may go without catching up before it leaves the ISR (replica.lag.time.max.ms)")
	f.Var(newIntFlag(&o.brokerHeartbeatIntervalMs, int32(node.DefaultBrokerHeartbeatInterval/time.Millisecond), 10, 60_000, ""),
		"broker-heartbeat-interval-ms", "how often this node renews its session with the active controller (broker.heartbeat.interval.ms)")
	f.Var(newIntFlag(&o.brokerSessionTimeoutMs, int32(node.DefaultBrokerSessionTimeout/time.Millisecond), 100, 600_000, ""),
		"broker-session-timeout-ms", "how long the active controller waits for a broker's heartbeat before it fences the broker and elects new leaders for what it led; at least three heartbeat intervals, the same on every node (broker.session.timeout.ms)")
	addBoolFlag(f, &o.unsyncedWritesInMemory, "unsynced-writes-in-memory", false,
		"for tests: keep what the partition logs have not fsynced in this process's memory, so that killing the process loses it as a power cut would (shows what flush.policy=interval gives up)")
	f.Var(newIntFlag(&o.transactionMaxTimeoutMs, int32((15*time.Minute)/time.Millisecond), 1000, int32((24*time.Hour)/time.Millisecond), ""),
		"transaction-max-timeout-ms", "the longest transaction timeout a producer may ask for; an abandoned transaction holds back its partitions' read_committed readers for up to its timeout (transaction.max.timeout.ms)")
	f.Var(newIntFlag(&o.logRetentionCheckIntervalMs, int32((5*time.Minute)/time.Millisecond), 100, int32((24*time.Hour)/time.Millisecond), ""),
		"log-retention-check-interval-ms", "how often partition logs are checked for segments past retention.ms, retention.bytes or a DeleteRecords (log.retention.check.interval.ms)")
	addBoolFlag(f, &o.txnPartitionVerification, "transaction-partition-verification-enable", true,
		"before a transactional batch opens its producer's transaction on a partition, ask the transaction's coordinator whether the partition is in it, so a late or unadded produce cannot leave a hanging transaction (transaction.partition.verification.enable; KIP-890)")
	addBoolFlag(f, &o.autoLeaderRebalance, "auto-leader-rebalance-enable", true,
		"move leaderships back to preferred replicas (each partition's first) when they are out of balance, checked on the active controller (auto.leader.rebalance.enable)")
	f.Var(newIntFlag(&o.leaderImbalanceCheckIntervalSeconds, int32(node.DefaultLeaderImbalanceCheckInterval/time.Second), 1, 86_400, ""),
		"leader-imbalance-check-interval-seconds", "how often the active controller checks the balance of leaderships (leader.imbalance.check.interval.seconds)")
	f.Var(newIntFlag(&o.leaderImbalancePerBrokerPercentage, node.DefaultLeaderImbalancePerBrokerPercentage, 1, 100, ""),
		"leader-imbalance-per-broker-percentage", "the share of the partitions a broker is the preferred leader of that it may not lead before they are elected back to it (leader.imbalance.per.broker.percentage)")
	f.Var(newIntFlag(&o.httpIdempotencyWindowMs, int32(httpapi.DefaultIdempotencyWindow/time.Millisecond), 1000, 7*24*3600*1000, ""),
		"http-idempotency-window-ms", "how long the HTTP API remembers a produce's idempotency_key (http.idempotency.window.ms)")
	f.Var(newIntFlag(&o.httpConsumerIdleTimeoutMs, int32(httpapi.DefaultConsumerIdleTimeout/time.Millisecond), 1000, 24*3600*1000, ""),
		"http-consumer-idle-timeout-ms", "how long an HTTP consumer instance lives without requests before it leaves its group (http.consumer.idle.timeout.ms)")
	// The bounds are the group coordinator's defaults
	// (group.min.session.timeout.ms, group.max.session.timeout.ms).
	f.Var(newIntFlag(&o.httpConsumerSessionTimeoutMs, int32(httpapi.DefaultConsumerSessionTimeout/time.Millisecond), 6000, 1_800_000, ""),
		"http-consumer-session-timeout-ms", "an HTTP consumer instance's group session: how long its group waits for an instance whose node died (http.consumer.session.timeout.ms)")
	f.Var(newIntFlag(&o.httpMaxConcurrent, httpapi.DefaultMaxConcurrent, 1, 65536, ""),
		"http-max-concurrent", "HTTP API requests served at once, reads apart; more are answered 429")
	f.Var(newIntFlag(&o.httpMaxLongPolls, httpapi.DefaultMaxLongPolls, 1, 65536, ""),
		"http-max-long-polls", "HTTP API reads (consume, records) served at once; more are answered 429")
	f.Var(newIntFlag(&o.httpMaxConsumers, httpapi.DefaultMaxConsumers, 1, 65536, ""),
		"http-max-consumers", "HTTP consumer instances on this node; a new one past this is answered 429")
	f.Var(newIntFlag[int64](&o.httpMaxBodyBytes, httpapi.DefaultMaxBodyBytes, httpapi.MinMaxBodyBytes, httpapi.MaxMaxBodyBytes, ""),
		"http-max-body-bytes", "largest HTTP API request body; larger is answered 413 (values are base64: a record is at most three quarters of it)")
	addBoolFlag(f, &o.httpProtectMetricsAndHealth, "http-protect-metrics-and-health", false,
		"make /metrics and /readyz need credentials (Basic or Bearer, as the HTTP API) and DESCRIBE on the cluster, and /healthz credentials alone; they are open by default")
	return cmd
}

// parseListeners checks the listener flags: --listeners replaces
// --kafka-addr and --advertised-kafka-addr, so setting both is refused
// rather than one silently ignored.
func (o *serveOptions) parseListeners(cmd *cobra.Command) error {
	f := o.listenerFlags
	if f.Listeners == "" {
		for _, name := range []string{"advertised-listeners", "listener-security-protocol-map"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s: give --listeners too (without it the node has one PLAINTEXT listener, --kafka-addr)", name)
			}
		}
		return nil
	}
	for _, name := range []string{"kafka-addr", "advertised-kafka-addr"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s and --listeners both set: --listeners replaces it (e.g. --listeners PLAINTEXT://%s)", name, o.kafkaAddr)
		}
	}
	ls, inter, err := listener.Parse(f)
	if err != nil {
		return err
	}
	o.listeners, o.listenerFlags.InterBroker = ls, inter
	o.kafkaAddr, o.advertisedKafkaAddr = "", ""
	return nil
}

// parseSASL turns the SASL flags into node.SASLConfig.
func (o *serveOptions) parseSASL() error {
	split := func(s string) []string {
		var out []string
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out
	}
	o.sasl.EnabledMechanisms = split(o.saslMechanisms)
	o.sasl.OAuth.ExpectedAudience = split(o.oauthAudience)
	o.sasl.MaxReauth = time.Duration(o.connectionsMaxReauthMs) * time.Millisecond
	if o.interBrokerPasswordFile != "" {
		pw, err := node.ReadPasswordFile(o.interBrokerPasswordFile)
		if err != nil {
			return fmt.Errorf("--inter-broker-sasl-password-file: %w", err)
		}
		o.sasl.InterBrokerPassword = pw
	}
	users, err := node.ParseBootstrapUsers(o.bootstrapScram)
	if err != nil {
		return fmt.Errorf("--bootstrap-scram-users: %w", err)
	}
	o.sasl.BootstrapUsers = users
	return nil
}

// maxAuditLogBytes bounds --audit-log-max-bytes (1 TiB): a bigger value
// is a typo, not a plan.
const maxAuditLogBytes = 1 << 40

// parseAudit refuses --audit-log-max-bytes without --audit-log, which
// would otherwise be ignored.
func (o *serveOptions) parseAudit(cmd *cobra.Command) error {
	if o.auditLog.Path == "" {
		if cmd.Flags().Changed("audit-log-max-bytes") {
			return errors.New("--audit-log-max-bytes: give --audit-log too (without it there is no audit log)")
		}
		o.auditLog.MaxBytes = 0
	}
	return nil
}

// parseAuthz turns the authorizer's flags into node.AuthzConfig.
func (o *serveOptions) parseAuthz() error {
	users, err := acl.ParseSuperUsers(o.superUsers)
	if err != nil {
		return fmt.Errorf("--super-users: %w", err)
	}
	o.authz.SuperUsers = users
	switch strings.ToLower(strings.TrimSpace(o.allowEveryone)) {
	case "":
		o.authz.AllowEveryoneIfNoACLFound = nil
	case "true":
		o.authz.AllowEveryoneIfNoACLFound = new(true)
	case "false":
		o.authz.AllowEveryoneIfNoACLFound = new(false)
	default:
		return fmt.Errorf("--allow-everyone-if-no-acl-found %q: want true or false", o.allowEveryone)
	}
	return nil
}

func parseLogLevel(s string) slog.Level {
	var l slog.Level
	// The flag only admits names UnmarshalText knows.
	_ = l.UnmarshalText([]byte(s))
	return l
}

func runServe(ctx context.Context, o serveOptions, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: parseLogLevel(o.logLevel)}))
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The first signal cancels a start in progress, or ends the wait
	// below; a second one, while the node shuts down, exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopping := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-sigs: // first signal: shut down cleanly
			logger.Info("shutting down; a second signal exits at once", "signal", s.String())
			cancel()
			close(stopping)
		case <-done: // serve returned for another reason
			return
		}
		select {
		case s := <-sigs: // second signal: the user wants out now
			logger.Warn("second signal: exiting without a clean shutdown", "signal", s.String())
			os.Exit(1)
		case <-done:
		}
	}()

	n, err := node.Start(ctx, node.Config{
		NodeID:                             o.nodeID,
		DataDir:                            o.dataDir,
		KafkaAddr:                          o.kafkaAddr,
		AdvertisedKafkaAddr:                o.advertisedKafkaAddr,
		Listeners:                          o.listeners,
		InterBrokerListener:                o.listenerFlags.InterBroker,
		TLS:                                o.tls,
		SASL:                               o.sasl,
		Authz:                              o.authz,
		AuditLog:                           o.auditLog,
		ControllerAddr:                     o.controllerAddr,
		ControllerSecurityProtocol:         o.controllerSecurityProtocol,
		Voters:                             o.voters,
		BrokerOnly:                         o.brokerOnly,
		Rack:                               o.rack,
		ReplicaSelector:                    o.replicaSelector,
		LogDirFreeSpaceWarn:                o.logDirFreeSpaceWarn,
		LogDirFreeSpaceRefuse:              o.logDirFreeSpaceRefuse,
		HTTPAddr:                           o.httpAddr,
		PprofAddr:                          o.pprofAddr,
		AutoCreateTopics:                   o.autoCreateTopics,
		NumPartitions:                      o.numPartitions,
		DefaultReplicationFactor:           o.defaultReplicationFactor,
		Logger:                             logger,
		GroupInitialRebalanceDelay:         groupInitialRebalanceDelay(o.groupInitialRebalanceDelayMs),
		ReplicaLagTime:                     time.Duration(o.replicaLagTimeMaxMs) * time.Millisecond,
		BrokerHeartbeatInterval:            time.Duration(o.brokerHeartbeatIntervalMs) * time.Millisecond,
		BrokerSessionTimeout:               time.Duration(o.brokerSessionTimeoutMs) * time.Millisecond,
		DisableAutoLeaderRebalance:         !o.autoLeaderRebalance,
		UnsyncedWritesInMemory:             o.unsyncedWritesInMemory,
		DisableTxnPartitionVerification:    !o.txnPartitionVerification,
		TransactionMaxTimeout:              time.Duration(o.transactionMaxTimeoutMs) * time.Millisecond,
		LogRetentionCheckInterval:          time.Duration(o.logRetentionCheckIntervalMs) * time.Millisecond,
		LeaderImbalanceCheckInterval:       time.Duration(o.leaderImbalanceCheckIntervalSeconds) * time.Second,
		LeaderImbalancePerBrokerPercentage: int(o.leaderImbalancePerBrokerPercentage),
		HTTP: node.HTTPConfig{
			IdempotencyWindow:       time.Duration(o.httpIdempotencyWindowMs) * time.Millisecond,
			ConsumerIdleTimeout:     time.Duration(o.httpConsumerIdleTimeoutMs) * time.Millisecond,
			ConsumerSessionTimeout:  time.Duration(o.httpConsumerSessionTimeoutMs) * time.Millisecond,
			MaxConcurrent:           int(o.httpMaxConcurrent),
			MaxLongPolls:            int(o.httpMaxLongPolls),
			MaxConsumers:            int(o.httpMaxConsumers),
			MaxBodyBytes:            o.httpMaxBodyBytes,
			ProtectMetricsAndHealth: o.httpProtectMetricsAndHealth,
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while starting: %w", err)
		}
		// node's messages name the setting as its flag without dashes
		// (kafka-addr "x": ...), which reads right for the environment
		// and the config file too.
		return startError(err)
	}

	var failure error
	select {
	case <-stopping: // SIGINT or SIGTERM
	case <-n.Failed(): // a listener died on its own
		failure = n.Err()
		logger.Error("shutting down after a failure", "err", failure)
	}
	if err := n.Close(); err != nil {
		return fmt.Errorf("shutdown was not clean: %w", err)
	}
	return failure
}

// startError shortens node's invalid-config errors to their detail,
// which already names the setting, the value and what is allowed.
func startError(err error) error {
	if errors.Is(err, node.ErrInvalidConfig) {
		return errors.New(strings.TrimPrefix(err.Error(), node.ErrInvalidConfig.Error()+": "))
	}
	return err
}

// ownVoterAddr is where a node binds its controller when
// --controller-addr was not given (flag, environment or file): its own
// entry in the voter list, the address the others dial. A node not in
// the list keeps def, and node.Start refuses it, naming the ids.
func ownVoterAddr(voters []node.Voter, nodeID int32, def string) string {
	for _, v := range voters {
		if v.NodeID == nodeID {
			return v.Addr
		}
	}
	return def
}

// groupInitialRebalanceDelay maps the flag to node's field, where zero
// is the default and a negative duration none.
func groupInitialRebalanceDelay(ms int32) time.Duration {
	if ms == 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}
