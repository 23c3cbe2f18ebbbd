// Package node builds one Fjord process from its configuration: the
// storage manager, the Raft controller, the replica manager, the producer
// id manager, the Kafka protocol listener and the HTTP health endpoints;
// it starts them in dependency order and stops them in the reverse.
//
// Start order, and why:
//
//  1. Validate the config (nothing touched yet), create the data
//     directory and take its lock (.lock), so a second process on the
//     same directory fails before it opens anything.
//  2. Read meta.properties: a node.id mismatch refuses to start.
//  3. Bind the Kafka and HTTP listeners. The Kafka listener comes before
//     the controller because the broker registration the controller
//     commits carries the advertised port, which with port 0 is known
//     only once bound.
//  4. Open the storage manager (recovers logs after a crash), then the
//     controller (Raft state in <data-dir>/metadata), then the replica
//     manager subscribed to the controller's images.
//  5. Wait for the first image with a cluster id; check it against
//     meta.properties and write the file if new.
//  6. Serve Kafka and HTTP.
//
// Threads: Start and Close are called by one goroutine; the servers run
// in their own goroutines (see kafkaserver and net/http), the controller
// publishes images to the replica manager from its publisher goroutine.
package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/controlplane/forward"
	"github.com/fjordmq/fjord/internal/failpoint"
	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/grouplag"
	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/leaderfetch"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/sasl"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/tlsconf"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Errors Start returns for conditions a user has to fix, wrapped with
// detail (match with errors.Is).
var (
	// ErrInvalidConfig: a Config field is out of range; the message names
	// the field (as its `fjord serve` flag), the value and what is
	// allowed.
	ErrInvalidConfig = errors.New("invalid node config")
	// ErrNodeIDMismatch: meta.properties says the data directory belongs
	// to another node id.
	ErrNodeIDMismatch = errors.New("data directory belongs to another node")
	// ErrClusterIDMismatch: meta.properties and the metadata log name
	// different clusters.
	ErrClusterIDMismatch = errors.New("data directory belongs to another cluster")
	// ErrDataDirInUse: another process holds the data directory's lock.
	ErrDataDirInUse = errors.New("data directory in use")
)

// metadataDir is the Raft state's directory inside the data directory;
// the storage manager skips it.
const metadataDir = "metadata"

// startTimeout bounds the wait for the controller's first image when the
// caller's context has no deadline: a one-voter Raft elects itself in
// well under a second, so a minute means something is wrong.
const startTimeout = time.Minute

// Node is one running Fjord process.
type Node struct {
	cfg Config
	log *slog.Logger

	lock *dirLock
	// listeners are the Kafka listeners, bound (listeners.go).
	listeners []boundListener
	// tls is the node's TLS material, nil without it; principals maps
	// client certificates' subjects to principals.
	tls        *tlsconf.Store
	principals *tlsconf.PrincipalMapper
	// sasl authenticates the SASL listeners' connections (nil without
	// one).
	sasl    *sasl.Server
	httpLn  net.Listener
	pprofLn net.Listener
	storage *storage.Manager
	ctrl    *controller.Controller
	// control is the broker side's control-plane client: changes go
	// through ctrl while this node is the active controller and are
	// forwarded to the one that is otherwise.
	control     *forward.Client
	incarnation metadata.UUID
	// peers is this node's clients to other nodes' listeners, shared by
	// control and leaders.
	peers *peers.Pool
	// leaders carries this node's follower fetches to their leaders.
	leaders *leaderfetch.Client
	// heartbeatsDone is closed when the heartbeat goroutine returns
	// (nil until it starts); it stops when stopping is closed.
	heartbeatsDone chan struct{}
	stopping       chan struct{}
	// lease is this broker's leader lease, renewed by its heartbeats
	// (lease.go); leaseLapses counts the times it lapsed.
	lease       *lease
	leaseLapses atomic.Int64
	// shutdownWanted makes the heartbeats ask for a controlled shutdown
	// (shutdown.go); shutdownKick sends one at once. answeredAt is when
	// the active controller last answered a heartbeat (unix nanoseconds)
	// and shouldShutDown whether that answer let this broker stop.
	shutdownWanted atomic.Bool
	shutdownKick   chan struct{}
	answeredAt     atomic.Int64
	shouldShutDown atomic.Bool
	replicas       *replica.Manager
	// keyed marks the topics whose partitions this node leads as having
	// keyed records (keyed.go).
	keyed *keyedMarker
	// offline reports this node's replicas whose logs failed to the
	// controller (offline_replicas.go).
	offline *offlineReporter
	// replicaLogs answers the controller's questions before an unclean
	// leader election, once bound to peers and replicas.
	replicaLogs *replicaLogs
	unsubImage  func()
	groups      *group.Coordinator
	// lag keeps the lag of the groups this node coordinates (lag.go);
	// stopLag ends it.
	lag     *grouplag.Refresher
	stopLag func()
	// internalClientID is the client id of this node's own Kafka clients
	// (the HTTP gateway, forwarded changes), built from the incarnation
	// id drawn at each start (controlplane.InternalClientID).
	internalClientID string
	loader           *offsetstopic.Loader
	unsubGroup       func()
	txns             *txn.Coordinator // fed by txnLoader, as groups is by loader
	txnLoader        *txnstatetopic.Loader
	unsubTxn         func()
	kafka            *kafkaserver.Server
	api              *httpapi.API
	metrics          *prometheus.Registry
	// metricsText is the per-partition and lag families, written to
	// /metrics as text by metricsHandler (metrics_text.go).
	metricsText textCollector
	http        *http.Server
	pprof       *http.Server
	clusterID   string
	started     bool

	// servers counts the Kafka and HTTP serve goroutines, so Close
	// returns only after both have returned.
	servers sync.WaitGroup

	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error

	failOnce sync.Once
	failed   chan struct{}
	failErr  error

	// audit is the audit log (audit.go), nil without one: opened first,
	// closed last.
	audit *audit.Log
}

// Start builds and starts a node. On error everything it opened is
// closed again. ctx bounds the start (opening the controller and waiting
// for its first image); it is not kept.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, failed: make(chan struct{}), stopping: make(chan struct{}),
		shutdownKick: make(chan struct{}, 1), replicaLogs: &replicaLogs{self: cfg.NodeID}}
	if err := n.start(ctx); err != nil {
		// The start error is the one worth reporting; a close failure
		// after it is logged only.
		if cerr := n.Close(); cerr != nil {
			n.log.Warn("closing after a failed start", "err", cerr)
		}
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	cfg := n.cfg
	if err := n.openAudit(); err != nil {
		return err
	}
	var fs vfs.FS = vfs.OS()
	if cfg.UnsyncedWritesInMemory {
		fs = vfs.NewWriteBack(fs)
		n.log.Warn("unsynced partition-log writes are kept in memory: a crash of this process loses them as a power cut would (a test setting)")
	}
	if fail := failpoint.SyncEIO(cfg.DataDir); fail != nil {
		fs = vfs.SyncFaults(fs, fail)
		n.log.Warn(failpoint.SyncEIOEnv + " is set: fsyncs of the log directory it names fail with EIO once its marker file exists (a test setting)")
	}
	if err := vfs.MkdirAllDurable(fs, cfg.DataDir); err != nil {
		return fmt.Errorf("opening data directory %s: %w", cfg.DataDir, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err // names the directory and, if known, the process holding it
	}
	n.lock = lock
	if total, _, err := replica.DiskSpace(cfg.DataDir); err == nil {
		if err := checkFreeSpaceFlags(cfg, total); err != nil {
			return err
		}
	}

	props, propsExist, err := readMetaProperties(fs, cfg.DataDir)
	if err != nil {
		return fmt.Errorf("opening data directory %s: %w", cfg.DataDir, err)
	}
	if propsExist && props.NodeID != cfg.NodeID {
		return fmt.Errorf("%w: %s belongs to node %d (meta.properties node.id=%d), not node-id %d: "+
			"start with --node-id %d or use another data directory",
			ErrNodeIDMismatch, cfg.DataDir, props.NodeID, props.NodeID, cfg.NodeID, props.NodeID)
	}

	if err := n.openTLS(); err != nil {
		return err
	}
	if n.listeners, err = cfg.bindListeners(); err != nil {
		return err
	}
	if cfg.HTTPAddr != "" {
		n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http-addr %s: %w", cfg.HTTPAddr, err)
		}
	}
	if cfg.PprofAddr != "" {
		n.pprofLn, err = net.Listen("tcp", cfg.PprofAddr)
		if err != nil {
			return fmt.Errorf("pprof-addr %s: %w", cfg.PprofAddr, err)
		}
	}

	fsyncs := newFsyncHistogram()
	n.storage, err = storage.OpenManager(fs, cfg.DataDir, storage.DefaultConfig(), storage.ManagerOptions{
		Logger:       n.log,
		ReservedDirs: []string{metadataDir},
		ObserveSync:  observeSeconds(fsyncs),
		// 0 is storage's default, Kafka's 5 minutes.
		RetentionCheckInterval: cfg.LogRetentionCheckInterval,
	})
	if err != nil {
		return fmt.Errorf("opening data directory %s: %w", cfg.DataDir, err)
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	bootstrap, err := cfg.bootstrapRecords()
	if err != nil {
		return err
	}
	n.ctrl, err = controller.Open(ctx, controller.Config{
		NodeID:                             cfg.NodeID,
		BootstrapRecords:                   bootstrap,
		Dir:                                filepath.Join(cfg.DataDir, metadataDir),
		Addr:                               cfg.ControllerAddr,
		TLS:                                n.controllerTLS(),
		Voters:                             controllerVoters(cfg.Voters),
		Observer:                           cfg.BrokerOnly,
		NumPartitions:                      cfg.NumPartitions,
		ReplicationFactor:                  cfg.DefaultReplicationFactor,
		TopicConfigs:                       topicConfigs,
		BrokerSessionTimeout:               cfg.BrokerSessionTimeout,
		LeaderImbalanceCheckInterval:       leaderImbalanceCheckInterval(cfg),
		LeaderImbalancePerBrokerPercentage: cmp.Or(cfg.LeaderImbalancePerBrokerPercentage, DefaultLeaderImbalancePerBrokerPercentage),
		ReplicaLogs:                        n.replicaLogs,
		Logger:                             n.log,
	})
	if err != nil {
		return fmt.Errorf("opening controller (controller-addr %s, %s): %w",
			cfg.ControllerAddr, filepath.Join(cfg.DataDir, metadataDir), err)
	}

	// A metadata log this node cannot apply as its peers do (a newer
	// metadata version, say) stops the node: serving a different image
	// would be worse than not serving.
	go func() {
		select {
		case <-n.ctrl.Failed():
			n.fail(fmt.Errorf("metadata log: %w", n.ctrl.Err()))
		case <-n.stopping:
		}
	}()
	if _, err := rand.Read(n.incarnation[:]); err != nil {
		return fmt.Errorf("drawing an incarnation id: %w", err)
	}
	if err := n.openSASL(); err != nil {
		return err
	}
	n.internalClientID = controlplane.InternalClientID(cfg.NodeID, n.incarnation)
	n.peers = peers.New(n.ctrl, n.internalClientID, n.interBrokerOpts()...)
	n.control = forward.New(forward.Config{
		NodeID: cfg.NodeID,
		Local:  n.ctrl,
		Images: n.ctrl,
		Peers:  n.peers,
		Logger: n.log,
	})

	session := orDefault(cfg.BrokerSessionTimeout, DefaultBrokerSessionTimeout)
	// A voter list of one (or none: the cluster of one) leaves no one to
	// take this node's leaderships, so its lease is not enforced.
	n.lease = newLease(clock.Real(), session*4/5, n.ctrl.ActiveTerm, len(cfg.Voters) > 1)
	n.leaders = leaderfetch.New(n.peers)
	n.keyed = newKeyedMarker(n.control, n.ctrl, n.log)
	n.offline = newOfflineReporter(n.control, n.ctrl, n.log, cfg.NodeID, n.incarnation)
	freeWarn, freeRefuse := freeSpaceFlags(cfg)
	n.replicas = replica.NewManager(replica.Options{
		NodeID:         cfg.NodeID,
		Storage:        n.storage,
		Defaults:       storage.DefaultConfig(),
		Logger:         n.log,
		FS:             fs,
		DataDir:        cfg.DataDir,
		Leaders:        n.leaders,
		ISR:            n.control,
		ReplicaLagTime: cfg.ReplicaLagTime,
		Lease:          n.lease,
		// validate refused a value this could not parse.
		ReplicaSelector: replicaSelector(cfg.ReplicaSelector),
		KeyedAppend:     n.keyed.note,
		LogFailed:       n.offline.note,
		FreeSpaceWarn:   freeWarn,
		FreeSpaceRefuse: freeRefuse,
	})
	n.replicaLogs.bind(n.peers, n.replicas)
	n.offline.start(n.replicas)
	// The cluster id first: the registration carries it (from this
	// node's image, when it forwards to another node's controller), and a
	// restarted node's image may not have replayed it yet; a
	// registration that names no cluster is refused.
	clusterID, err := n.awaitClusterID(ctx)
	if err != nil {
		return err
	}
	n.clusterID = clusterID
	switch {
	case propsExist && props.ClusterID != "" && props.ClusterID != clusterID:
		return fmt.Errorf("%w: %s belongs to cluster %s (meta.properties) but its metadata log (%s/) is of cluster %s: "+
			"was the metadata directory replaced or removed?",
			ErrClusterIDMismatch, cfg.DataDir, props.ClusterID, metadataDir, clusterID)
	case !propsExist || props.ClusterID == "":
		if err := writeMetaProperties(fs, cfg.DataDir, metaProperties{NodeID: cfg.NodeID, ClusterID: clusterID}); err != nil {
			return err
		}
	}
	if err := n.registerBroker(ctx, n.registration()); err != nil {
		return err
	}
	n.heartbeatsDone = make(chan struct{})
	go n.heartbeat()
	// Only now may the replica manager see images: the first one deletes
	// every log it does not name, and a metadata log that is not this
	// data directory's (the check above) names none of them. The image
	// has this start's registration by now (registerBroker waits for
	// it), so a restarting node's replica manager never sees the old
	// images its Raft log replays: it would delete the logs of topics
	// created since, and create the logs of topics deleted since.
	n.unsubImage = n.ctrl.Subscribe(n.replicas.ApplyImage)
	if err := n.awaitUnfenced(ctx); err != nil {
		return err
	}

	// The group coordinator follows this node's leadership of
	// __consumer_offsets, after the replica manager has opened the logs
	// of each image (subscribers run in the order they subscribed).
	n.groups = group.New(group.Config{
		OffsetsPartitions:     offsetstopic.DefaultPartitions,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		Logger:                n.log,
	}, offsetstopic.NewLog(n.replicas, time.Now))
	n.loader = offsetstopic.NewLoader(n.groups, n.replicas, cfg.NodeID, n.log)
	n.unsubGroup = n.ctrl.Subscribe(n.loader.OnImage)

	// The transaction coordinator follows this node's leadership of
	// __transaction_state the same way, and sends its markers to the
	// leaders of a transaction's partitions through the peer clients
	// (this node's own listener for the partitions it leads). Its
	// producer ids come from the same manager as idempotent producers'.
	pids := txn.NewProducerIDManager(n.control, cfg.NodeID)
	n.txns = txn.New(txn.Config{
		TransactionPartitions: txnstatetopic.DefaultPartitions,
		OffsetsPartitions:     offsetstopic.DefaultPartitions,
		MaxTransactionTimeout: cfg.TransactionMaxTimeout,
		// Every second, not Kafka's 10 s: an abandoned transaction
		// holds its partitions' last stable offsets, and so every
		// read_committed reader of them, until this check aborts it,
		// so they wait at most its timeout and a second. A check reads
		// memory only.
		AbortTimedOutTransactionCleanupInterval: time.Second,
		Logger:                                  n.log,
	}, txnstatetopic.NewLog(n.replicas, time.Now), txnstatetopic.NewMarkerSender(n.ctrl, n.peers), pids)
	n.txnLoader = txnstatetopic.NewLoader(n.txns, n.replicas, cfg.NodeID, n.log)
	n.unsubTxn = n.ctrl.Subscribe(n.txnLoader.OnImage)

	n.lag, n.stopLag = n.startLag()
	n.metrics, n.metricsText = newRegistry(n.storage, fsyncs, n.lag, txnCollector{n.txns, n.txnLoader}, replicationCollector{n})
	n.metrics.MustRegister(diskCollector{n}, replayCollector{n})
	if n.audit != nil {
		n.metrics.MustRegister(n.audit)
	}
	n.kafka = kafkaserver.New(kafkaserver.Config{
		Addr:                              n.KafkaAddr().String(),
		LogDirFreeSpaceWarn:               cmp.Or(cfg.LogDirFreeSpaceWarn, metadata.DefaultFreeSpaceWarn),
		LogDirFreeSpaceRefuse:             cmp.Or(cfg.LogDirFreeSpaceRefuse, metadata.DefaultFreeSpaceRefuse),
		NodeID:                            cfg.NodeID,
		TopicConfigs:                      topicConfigs,
		MaxRequestBytes:                   cfg.MaxRequestBytes,
		MaxReauth:                         cfg.SASL.MaxReauth,
		AutoCreateTopics:                  cfg.AutoCreateTopics,
		OffsetsTopicPartitions:            offsetstopic.DefaultPartitions,
		Transactions:                      n.txns,
		TxnVerifier:                       txnstatetopic.NewVerifier(n.ctrl, n.peers, n.txns, cfg.NodeID, txnstatetopic.DefaultPartitions),
		TxnVerifyOnlyDisabled:             cfg.DisableTxnPartitionVerification,
		TransactionTopicPartitions:        txnstatetopic.DefaultPartitions,
		TransactionTopicReplicationFactor: txnstatetopic.DefaultReplicationFactor,
		InternalClientID:                  n.internalClientID,
		ACL:                               n.aclConfig(),
		Audit:                             n.auditRecorder(),
		Metrics:                           n.metrics,
		Logger:                            n.log,
	}, brokerControlPlane{n.ctrl, n.ctrl, n.control, n.control}, n.replicas, pids, n.groups)
	for _, b := range n.listeners {
		n.servers.Add(1)
		go func() {
			defer n.servers.Done()
			if err := n.kafka.ServeListener(b.ln, n.listenerConfig(b)); err != nil && !n.closing.Load() {
				n.fail(fmt.Errorf("kafka listener %s: %w", b.Name, err))
			}
		}()
	}

	if n.httpLn != nil {
		// The HTTP API is a gateway over the Kafka protocol, dialing
		// this node's inter-broker listener at the address it gives
		// other nodes.
		api, err := httpapi.New(httpapi.Config{
			Brokers:                []string{n.interBrokerAddr()},
			KafkaOpts:              n.interBrokerOpts(),
			InternalClientID:       n.internalClientID,
			IdempotencyWindow:      cfg.HTTP.IdempotencyWindow,
			ConsumerIdleTimeout:    cfg.HTTP.ConsumerIdleTimeout,
			ConsumerSessionTimeout: cfg.HTTP.ConsumerSessionTimeout,
			MaxConcurrent:          cfg.HTTP.MaxConcurrent,
			MaxLongPolls:           cfg.HTTP.MaxLongPolls,
			MaxConsumers:           cfg.HTTP.MaxConsumers,
			MaxBodyBytes:           cfg.HTTP.MaxBodyBytes,
			Security:               n.httpSecurity(),
			Audit:                  n.auditRecorder(),
			Metrics:                n.metrics,
			Logger:                 n.log,
		})
		if err != nil {
			return err
		}
		n.api = api
		// Bounds a slow or hostile client cannot hold the node past:
		// the write bound is above the API's longest long-poll (30 s).
		n.http = &http.Server{
			Handler:           n.httpHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			WriteTimeout:      2 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ConnState:         httpConnGauge(n.metrics),
		}
		if cfg.TLS.HTTP {
			n.http.TLSConfig = n.tls.ServerConfig(tlsconf.ClientAuthNone)
			n.httpLn = tls.NewListener(n.httpLn, n.http.TLSConfig)
		}
		n.servers.Add(1)
		go func() {
			defer n.servers.Done()
			if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) && !n.closing.Load() {
				n.fail(fmt.Errorf("http listener: %w", err))
			}
		}()
	}

	if n.pprofLn != nil {
		// No WriteTimeout: a CPU profile's response comes only after
		// the seconds it was asked to cover.
		n.pprof = &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second}
		n.servers.Add(1)
		go func() {
			defer n.servers.Done()
			if err := n.pprof.Serve(n.pprofLn); err != nil && !errors.Is(err, http.ErrServerClosed) && !n.closing.Load() {
				n.fail(fmt.Errorf("pprof listener: %w", err))
			}
		}()
	}

	attrs := []any{
		"node_id", cfg.NodeID, "cluster_id", clusterID, "data_dir", cfg.DataDir,
		"kafka_addr", n.KafkaAddr().String(), "advertised", n.interBrokerAddr(), "listeners", n.listenerNames(),
		"controller_addr", cfg.ControllerAddr, "start", n.storage.StartKind(),
	}
	if cfg.BrokerOnly {
		attrs = append(attrs, "process_roles", "broker")
	}
	if n.httpLn != nil {
		attrs = append(attrs, "http_addr", n.httpLn.Addr().String())
	}
	if n.pprofLn != nil {
		attrs = append(attrs, "pprof_addr", n.pprofLn.Addr().String())
	}
	n.started = true
	n.log.Info("fjord node started", attrs...)
	return nil
}

// controllerVoters is the quorum in the controller's type (nil for none:
// a cluster of one).
func controllerVoters(voters []Voter) []controller.Voter {
	var out []controller.Voter
	for _, v := range voters {
		out = append(out, controller.Voter{NodeID: v.NodeID, Addr: v.Addr})
	}
	return out
}

// awaitClusterID waits for the first image that carries the cluster id
// (the controller bootstraps it on the first start; later starts have it
// from the Raft log at once).
func (n *Node) awaitClusterID(ctx context.Context) (string, error) {
	got := make(chan string, 1)
	cancel := n.ctrl.Subscribe(func(img *metadata.Image) {
		if img != nil && img.ClusterID != "" {
			select {
			case got <- img.ClusterID:
			default: // already delivered; later images change nothing
			}
		}
	})
	defer cancel()
	select {
	case id := <-got: // the controller's first image with a cluster id
		return id, nil
	case <-n.ctrl.Failed(): // this node cannot follow the metadata log
		return "", fmt.Errorf("metadata log: %w", n.ctrl.Err())
	case <-ctx.Done(): // the caller gave up, or startTimeout passed
		return "", fmt.Errorf("waiting for the controller's first metadata image: %w", context.Cause(ctx))
	}
}

// awaitUnfenced waits until the image shows this start's registration
// unfenced: the controller heard this node's heartbeat from an image at
// or past the registration, so it may lead partitions and join ISRs.
func (n *Node) awaitUnfenced(ctx context.Context) error {
	got := make(chan struct{}, 1)
	cancel := n.ctrl.Subscribe(func(img *metadata.Image) {
		if b, ok := img.Brokers[n.cfg.NodeID]; ok && b.IncarnationID == n.incarnation && !b.Fenced {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()
	select {
	case <-got:
		return nil
	case <-n.ctrl.Failed(): // this node cannot follow the metadata log
		return fmt.Errorf("metadata log: %w", n.ctrl.Err())
	case <-ctx.Done():
		return fmt.Errorf("waiting for the controller to unfence this broker (it heartbeats every %v): %w",
			orDefault(n.cfg.BrokerHeartbeatInterval, DefaultBrokerHeartbeatInterval), context.Cause(ctx))
	}
}

// registerRetry is how long a registration waits for an active
// controller before it asks again (a node's first election takes about a
// second).
const registerRetry = 50 * time.Millisecond

// brokerControlPlane is what kafkaserver sees of the control plane: this
// node's image and the forwarding client, for changes and for ISRs alike
// (kafkaserver serves another node's AlterPartition with LocalOnly, so
// the forwarding client hands it to this node's controller, or refuses
// if this node is not the active one).
type brokerControlPlane struct {
	controlplane.Images
	controlplane.Quorum
	controlplane.Client
	controlplane.ISR
}

// registerBroker registers this node with the active controller, this
// node's own or another's (forwarded), waiting out the moments when
// there is none: Open returns before the election, a quorum needs a
// majority of its voters up, and a cluster's controller may be moving.
func (n *Node) registerBroker(ctx context.Context, b metadata.BrokerRecord) error {
	for {
		epoch, err := n.control.RegisterBroker(ctx, b)
		if err == nil {
			n.log.Info("broker registered", "node_id", b.NodeID, "broker_epoch", epoch, "controller", n.control.ControllerID())
			return nil
		}
		switch {
		case errors.Is(err, controlplane.ErrDuplicateBrokerRegistration):
			// This node's previous process (killed, say) is still live
			// to the controller until its session lapses.
			n.log.Info("waiting for this node id's previous process's session to lapse", "err", err)
		case !errors.Is(err, controlplane.ErrNotController) && !errors.Is(err, controlplane.ErrTimedOut):
			return err
		}
		select {
		case <-time.After(registerRetry): // ask again
		case <-n.ctrl.Failed(): // this node cannot follow the metadata log
			return fmt.Errorf("metadata log: %w", n.ctrl.Err())
		case <-ctx.Done(): // startTimeout, or the caller gave up
			return fmt.Errorf("no active controller to register with: %w (last answer: %v)", context.Cause(ctx), err)
		}
	}
}

// heartbeat renews this node's broker session with the active
// controller every broker-heartbeat-interval-ms until the
// node stops, the first at once. Each says which metadata offset this
// node has applied: the controller unfences a new registration once it
// has reached its own. A failed heartbeat is logged when it is not the
// controller moving (the next one tries again). In a controlled shutdown
// the heartbeats ask for it, and come more often (shutdown.go).
func (n *Node) heartbeat() {
	defer close(n.heartbeatsDone)
	interval := orDefault(n.cfg.BrokerHeartbeatInterval, DefaultBrokerHeartbeatInterval)
	t := time.NewTicker(interval)
	defer t.Stop()
	held, registered, unregistered := false, false, false
	for first := true; ; first = false {
		if !first {
			select {
			case <-t.C:
			case <-n.shutdownKick:
				t.Reset(min(interval, shutdownHeartbeatInterval))
			case <-n.stopping:
				return
			}
		}
		img := n.ctrl.Image()
		b, ok := img.Brokers[n.cfg.NodeID]
		if !ok && registered && !unregistered {
			unregistered = true
			n.log.Warn(unregisteredMessage)
		}
		if unregistered || !ok || b.IncarnationID != n.incarnation {
			continue // this start's registration is not in the image yet (or no longer)
		}
		registered = true
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		termBefore, sent := n.ctrl.ActiveTerm(), n.lease.now()
		ans, err := n.control.BrokerHeartbeat(ctx, controlplane.Heartbeat{
			NodeID: n.cfg.NodeID, BrokerEpoch: b.Epoch, MetadataOffset: img.Offset, WantShutDown: n.shutdownWanted.Load(),
		})
		cancel()
		if err == nil || errors.Is(err, controlplane.ErrBrokerFenced) {
			n.answeredAt.Store(time.Now().UnixNano())
			n.shouldShutDown.Store(ans.ShouldShutDown)
		}
		if err == nil {
			n.lease.renew(sent, termBefore, n.ctrl.ActiveTerm())
		} else if errors.Is(err, controlplane.ErrBrokerNotRegistered) {
			// Unregistered, and this node's image has not caught up
			// with it (a broker-only node is taken out of the metadata
			// log's configuration as well, so it may never).
			unregistered = true
			n.log.Warn(unregisteredMessage)
		} else if !errors.Is(err, controlplane.ErrNotController) && !errors.Is(err, controlplane.ErrTimedOut) && !errors.Is(err, controlplane.ErrBrokerFenced) {
			n.log.Warn("broker heartbeat refused", "err", err)
		}
		held = n.noteLease(held, err)
	}
}

// unregisteredMessage is logged once when an operator has unregistered
// this broker (fjord cluster drain): it holds no replica, and it does not
// register again, since the decommission is what was asked.
const unregisteredMessage = "this broker was unregistered from the cluster (fjord cluster drain, or UnregisterBroker): " +
	"it holds no partition and sends no heartbeats; stop this process (started again with a wiped data directory, it joins as a new broker)"

// noteLease logs and counts a change of the leader lease, and tells the
// replica manager of a lapse: held is what the previous heartbeat saw,
// lastErr the latest heartbeat's failure. It returns whether the lease
// is held now. Called by the heartbeat goroutine only, after each
// heartbeat (answered, refused or timed out within an interval), so a
// lapse is seen within about two heartbeat intervals of its moment; a
// lapse is a passage of time that wakes no one, and this goroutine is
// the one that watches the lease.
func (n *Node) noteLease(held bool, lastErr error) bool {
	now := n.lease.Held()
	switch {
	case held && !now:
		n.leaseLapses.Add(1)
		// The produces parked for followers that cannot fetch (and the
		// consumers' long polls) would otherwise wait for the heal or
		// their timeouts while a successor takes the partitions' writes.
		woken := n.replicas.LeaseLapsed()
		n.log.Warn("leader lease lapsed: no heartbeat answered by the active controller lately; "+
			"refusing produce and consumer reads on the partitions this node leads until one is, "+
			"and answering the produces waiting there for their followers NOT_LEADER_OR_FOLLOWER",
			"lease", n.lease.duration, "parked_requests_woken", woken, "last_err", lastErr)
	case !held && now:
		n.log.Info("leader lease held", "lease", n.lease.duration)
	}
	return now
}

// fail records the first error of a server that stopped on its own.
func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.log.Error("node failed", "err", err)
		n.failErr = err
		close(n.failed)
	})
}

// Failed is closed when a listener stops on its own (not through Close);
// Err then says why. The owner of the process should then Close the node
// and exit.
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Err is the reason Failed was closed, nil before that.
func (n *Node) Err() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

// InternalClientID is the client id this node lets write internal
// topics (kafkaserver.Config.InternalClientID), for a second HTTP
// gateway in this process (tests).
func (n *Node) InternalClientID() string { return n.internalClientID }

// KafkaAddr is the address the inter-broker Kafka listener bound (the
// only one, without Config.Listeners).
func (n *Node) KafkaAddr() net.Addr { return n.interBroker().ln.Addr() }

// ListenerAddr is the address the Kafka listener named name bound, nil
// for a name the node has not.
func (n *Node) ListenerAddr(name string) net.Addr {
	for _, b := range n.listeners {
		if strings.EqualFold(b.Name, name) {
			return b.ln.Addr()
		}
	}
	return nil
}

// listenerNames lists the listeners for the start log line.
func (n *Node) listenerNames() []string {
	var out []string
	for _, b := range n.listeners {
		out = append(out, b.Name+"://"+b.ln.Addr().String())
	}
	return out
}

// ControllerAddr is the address the controller's Raft transport bound.
func (n *Node) ControllerAddr() string { return n.ctrl.Addr() }

// HTTPAddr is the address the HTTP listener bound, nil without one.
func (n *Node) HTTPAddr() net.Addr {
	if n.httpLn == nil {
		return nil
	}
	return n.httpLn.Addr()
}

// PprofAddr is the address the profiling listener bound, nil without
// one.
func (n *Node) PprofAddr() net.Addr {
	if n.pprofLn == nil {
		return nil
	}
	return n.pprofLn.Addr()
}

// ClusterID is the cluster id from the metadata log.
func (n *Node) ClusterID() string { return n.clusterID }

// Ready returns nil once the node serves its partitions: its image has
// this process's registration (so it has caught up with the metadata
// log at least to it) and the replica manager has applied an image and
// opened its partitions. Otherwise it says what is missing.
func (n *Node) Ready() error {
	if n.closing.Load() || n.shutdownWanted.Load() {
		return errors.New("shutting down")
	}
	img := n.ctrl.Image()
	if img == nil || img.ClusterID == "" {
		return errors.New("no metadata image yet")
	}
	if b, ok := img.Brokers[n.cfg.NodeID]; !ok || b.IncarnationID != n.incarnation {
		return fmt.Errorf("broker %d's registration by this process is not in the metadata image yet", n.cfg.NodeID)
	}
	if !n.replicas.Ready() {
		return errors.New("partitions are still opening")
	}
	return nil
}

// Close stops the node: first a controlled shutdown (shutdown.go), then
// the Kafka listener and its connections, the HTTP listener, the
// transaction and group coordinators, the replica manager, the
// controller and, last, the storage manager, which flushes every log,
// writes the checkpoints and the clean-shutdown marker. It is safe to
// call more than once; every call returns the first error of the first.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		// While the listeners still serve: clients follow the moved
		// leaderships to their new leaders, and this node's fetchers
		// copy what they still lead until they do.
		n.controlledShutdown()
		n.closing.Store(true)
		var errs []error
		add := func(what string, err error) {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		}
		// HTTP first: the API's consumer instances leave their groups
		// through the Kafka listener, which must still be serving.
		if n.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := n.http.Shutdown(ctx); err != nil {
				add("closing http listener", n.http.Close())
			}
			cancel()
		} else if n.httpLn != nil {
			add("closing http listener", n.httpLn.Close())
		}
		if n.api != nil {
			n.api.Close()
			n.api = nil
		}
		if n.kafka != nil {
			add("closing kafka listener", n.kafka.Close())
		} else {
			for _, b := range n.listeners {
				add("closing kafka listener "+b.Name, b.ln.Close())
			}
		}
		// A profile in progress is cut off rather than waited for: it
		// would hold the shutdown for as many seconds as it covers.
		if n.pprof != nil {
			add("closing pprof listener", n.pprof.Close())
		} else if n.pprofLn != nil {
			add("closing pprof listener", n.pprofLn.Close())
		}
		n.servers.Wait()
		// The lag refresher reads the group coordinator and asks
		// through the peer clients: it stops before either closes.
		if n.stopLag != nil {
			n.stopLag()
		}
		// The coordinators, once no request can reach them, and before
		// the replica manager their logs are in: each stops following
		// the images, lets its loads end, then closes (the transaction
		// coordinator's marker goroutines end there, before the peer
		// clients they send through close below). The transaction
		// coordinator first, the reverse of their start; neither calls
		// the other.
		if n.unsubTxn != nil {
			n.unsubTxn()
		}
		if n.txnLoader != nil {
			n.txnLoader.Close()
		}
		if n.txns != nil {
			n.txns.Close()
		}
		if n.unsubGroup != nil {
			n.unsubGroup()
		}
		if n.loader != nil {
			n.loader.Close()
		}
		if n.groups != nil {
			n.groups.Close()
		}
		if n.unsubImage != nil {
			n.unsubImage()
		}
		if n.replicas != nil {
			add("closing replica manager", n.replicas.Close())
		}
		// After the replica manager, which tells it of keyed appends;
		// before the forwarding client and the peer clients its marks
		// go through.
		if n.keyed != nil {
			n.keyed.close()
		}
		if n.offline != nil {
			n.offline.close()
		}

		close(n.stopping)
		if n.heartbeatsDone != nil {
			<-n.heartbeatsDone
		}
		if n.control != nil {
			n.control.Close()
		}
		if n.peers != nil {
			// After the replica manager (its fetchers) and the
			// heartbeats, the last users of the connections.
			n.peers.Close()
		}
		if n.ctrl != nil {
			add("closing controller", n.ctrl.Close())
		}
		if n.storage != nil {
			add("closing logs", n.storage.Close())
		}
		add("unlocking data directory", n.lock.unlock())
		// Last: every listener that records to it has stopped.
		add("closing audit log", n.closeAudit())
		if len(errs) > 0 {
			n.closeErr = errs[0]
			for _, err := range errs[1:] {
				n.log.Warn("node close", "err", err)
			}
		}
		if n.started {
			n.log.Info("fjord node stopped", "node_id", n.cfg.NodeID, "clean", n.closeErr == nil)
		}
	})
	return n.closeErr
}

// leaderImbalanceCheckInterval is the controller's setting: 0 (never)
// when the automatic balance is off.
func leaderImbalanceCheckInterval(cfg Config) time.Duration {
	if cfg.DisableAutoLeaderRebalance {
		return 0
	}
	return orDefault(cfg.LeaderImbalanceCheckInterval, DefaultLeaderImbalanceCheckInterval)
}

// replicaSelector is cfg.ReplicaSelector parsed; validate has refused
// anything else, so a bad value cannot reach here.
func replicaSelector(s string) replica.ReplicaSelector {
	sel, _ := replica.ParseReplicaSelector(s)
	return sel
}
