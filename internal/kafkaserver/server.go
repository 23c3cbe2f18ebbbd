// Package kafkaserver serves the Kafka wire protocol: a TCP listener,
// request framing, in-order pipelined responses, and one file per API
// that decodes with kmsg and calls the services in services.go.
//
// Threads (who owns what):
//   - Serve's accept loop owns the listener, admits or refuses each
//     accepted socket under the connection limits (connlimit.go; a
//     refused one is closed there) and starts one conn per admitted one.
//   - Each conn has a reader goroutine (owns the read side and the frame
//     buffers it allocates, decodes requests, starts handlers), a writer
//     goroutine (owns the write side and the response buffer, writes
//     responses strictly in request order), and one goroutine per request
//     in flight running that API's handler.
//   - The fetch session cache is shared by all connections (a client may
//     continue a session on a new connection) behind its own lock.
//
// Everything else (topics, partitions, producer ids, consumer groups)
// lives behind the Controller, Replicas, ProducerIDs and Groups
// interfaces; the server keeps no state beyond its connections and fetch
// sessions.
package kafkaserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/quota"
	"github.com/fjordmq/fjord/internal/topicconfig"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// Defaults for Config's zero values.
const (
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxInFlight bounds the requests read from one connection
	// and not yet answered. Kafka reads one request per connection at a
	// time (it mutes the socket until the response is sent); Fjord
	// handles a connection's requests concurrently, so a pipelining
	// client (franz-go sends up to 5 produce requests per broker,
	// librdkafka up to max.in.flight=1000000 by default) gets its
	// partitions appended in parallel. 64 keeps the memory one connection
	// can pin bounded (frames are buffered only as their bytes arrive)
	// while leaving every real client's pipeline depth unthrottled; past
	// it the reader stops reading and TCP pushes back.
	DefaultMaxInFlight = 64
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
)

// Errors.
var (
	// ErrServerClosed is returned by Serve called after Close.
	ErrServerClosed = errors.New("kafkaserver: server closed")
)

// Config configures the Kafka protocol listener.
type Config struct {
	// Addr is the listen address (host:port; port 0 picks one).
	Addr string
	// NodeID is this node's broker id.
	NodeID int32
	// TopicConfigs is the node's topic-config table, the one the
	// controller's images are built over; it answers before the first
	// image is published. Required.
	TopicConfigs *topicconfig.Table
	// MaxRequestBytes is socket.request.max.bytes: a frame larger than
	// this closes the connection (default 100 MiB).
	MaxRequestBytes int32
	// MaxInFlight bounds the requests read from one connection and not
	// yet answered; the reader stops reading until the writer catches up
	// (default DefaultMaxInFlight).
	MaxInFlight int
	// LogDirFreeSpaceWarn and LogDirFreeSpaceRefuse are the node's
	// static log.dir.free.space.warn and .refuse, which DescribeConfigs
	// shows where no dynamic value overrides them.
	LogDirFreeSpaceWarn, LogDirFreeSpaceRefuse string
	// IdleTimeout is connections.max.idle.ms: a connection with no
	// request for this long is closed (default 10 minutes).
	IdleTimeout time.Duration
	// MaxReauth is connections.max.reauth.ms (KIP-368): how long a SASL
	// session lasts before the client must re-authenticate on its
	// connection. 0: until the connection closes (or an OAUTHBEARER
	// token expires).
	MaxReauth time.Duration
	// AutoCreateTopics is auto.create.topics.enable: Metadata (when the
	// client allows it) and Produce create unknown topics with the
	// defaults.
	AutoCreateTopics bool
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots
	// (default 1000; negative disables fetch sessions).
	FetchSessionCacheSlots int
	// SendfileMinBytes: a fetched partition's records of at least this
	// many bytes are sent from the page cache with sendfile rather than
	// copied through the node (fetch_ranges.go); default
	// DefaultSendfileMinBytes, negative: always copy.
	SendfileMinBytes int
	// OffsetsTopicPartitions is offsets.topic.num.partitions: the
	// partitions of __consumer_offsets when FindCoordinator creates it
	// (default 50). It must match the group coordinator's.
	OffsetsTopicPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor
	// (default 3, capped at the brokers there are).
	OffsetsTopicReplicationFactor int16
	// Transactions, when set, is the transaction coordinator of the
	// __transaction_state partitions this node leads. Nil: this node runs
	// none, and transactional requests are answered as before
	// transactions existed (FindCoordinator key type 1
	// COORDINATOR_NOT_AVAILABLE, InitProducerId with a transactional id
	// TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
	Transactions Transactions
	// TxnVerifier, when set, is asked before a transactional batch
	// opens its producer's transaction on a partition (produce.go).
	// Nil: no verification, as Kafka before 3.6 (a server of tests
	// that are not about it).
	TxnVerifier TxnVerifier
	// TxnVerifyOnlyDisabled turns off the verify-only question of
	// Produce v0-11 (Kafka's transaction.partition.verification.enable
	// =false); Produce v12's add is still asked, or its partition would
	// never be in the transaction.
	TxnVerifyOnlyDisabled bool
	// TransactionTopicPartitions is transaction.state.log.num.partitions:
	// the partitions of __transaction_state when FindCoordinator creates
	// it (default 50). It must match the transaction coordinator's.
	TransactionTopicPartitions int32
	// TransactionTopicReplicationFactor is
	// transaction.state.log.replication.factor (default 3, capped at the
	// brokers there are).
	TransactionTopicReplicationFactor int16
	// ACL, when set, turns authorization on (authz.go): every API
	// checks the ACLs in the metadata image. Nil: every principal may do
	// everything, and DescribeAcls, CreateAcls and DeleteAcls answer
	// SECURITY_DISABLED, as Kafka without an authorizer.
	ACL *ACLConfig
	// Audit, when set, receives the listener's authentication results
	// and authorization denials (audit.go). Nil: none are recorded.
	Audit audit.Recorder
	// InternalClientID, when set, is the client id of Fjord's own Kafka
	// clients that own an internal topic and write it over the wire (the
	// HTTP gateway's idempotency index): requests with exactly this
	// client id may create and produce to internal topics, which every
	// other client is refused (metadata.IsInternalTopic). The node draws
	// it at random at each start and hands it only to its gateway, so an
	// outside client cannot name it the way it could a fixed reserved id
	// (Kafka exempts its fixed "__admin_client"). It is not a security
	// boundary: it crosses the wire in plaintext like any client id.
	// ACLs (a later issue) are the boundary; this keeps clients, and
	// tools run by mistake, off state they would break. Empty: no client
	// is exempt.
	InternalClientID string
	// Metrics, when set, receives the listener's Prometheus metrics.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Server is the Kafka protocol listener. It owns its connections (a
// reader and a writer goroutine each) and the fetch sessions; all other
// state is behind the service interfaces.
type Server struct {
	cfg         Config
	controller  Controller
	replicas    Replicas
	producerIDs ProducerIDs
	groups      Groups
	log         *slog.Logger
	metrics     *serverMetrics
	// emptyImage stands in before the first image is published.
	emptyImage *metadata.Image

	// authzBase is the Authorizer of Config.ACL with no bindings (nil:
	// authorization is off); authz caches the latest image's, and
	// authzReady records that ACLConfig.Ready once said yes (authz.go).
	authzBase  *acl.Authorizer
	authz      atomic.Pointer[authzState]
	authzReady atomic.Bool

	// ctx is canceled by Close: it ends every handler's wait (long-poll
	// fetches, acks=all produces) so Close does not wait for them.
	ctx    context.Context
	cancel context.CancelFunc

	sessions *fetchSessionCache

	// connLimits admits or refuses each accepted connection
	// (connlimit.go).
	connLimits *connLimiter
	// quotas keeps the client quotas' rates (quota.go).
	quotas *quota.Manager
	// tlsHandshakeTimeout bounds a TLS connection's handshake
	// (security.go), saslAuthTimeout a SASL connection's time to
	// authenticate, failedAuthDelay the answer to a failed one
	// (sasl.go); fixed before Serve.
	tlsHandshakeTimeout, saslAuthTimeout, failedAuthDelay time.Duration

	// wg counts accept loops and connections (each connection's reader,
	// writer and handlers are waited for by the connection itself).
	wg sync.WaitGroup

	// Test hooks, nil outside tests; set before Serve. testHookHandled
	// runs when a handler has filled its request's slot (before the
	// writer may write it); testHookPanic when a handler panicked.
	testHookHandled func(key int16, correlationID int32)
	testHookPanic   func(api string, recovered any)

	// rangeBytesSent counts record bytes sent with sendfile (tests read
	// it; an operator's metric once the node exports metrics).
	rangeBytesSent atomic.Int64
	// testHookProduceTurn: a Produce is about to wait for its turn to
	// append (see produceTurn).
	testHookProduceTurn func(correlationID int32)

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
	}
}

// request is one decoded request on a connection.
type request struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
	body          kmsg.Request
	conn          *conn
	// turn orders a connection's produce appends (nil for other APIs).
	turn *produceTurn
	// sl is the request's place in the response order; its frame is the
	// buffer body's byte fields alias.
	sl *slot
	// frameBytes is the request's size on the wire, what a Produce
	// charges to producer_byte_rate (quota.go).
	frameBytes int
	// parked is the time the handler spent waiting (a fetch's long poll,
	// a produce's turn and acks), not working: request_percentage does
	// not count it. Only the handler's goroutine touches it.
	parked time.Duration
	// throttle is a throttle the handler owes its client (a fetch's
	// consumer_byte_rate), applied with the others once it returns.
	throttle time.Duration
}

// internalClient reports whether req comes from one of Fjord's own
// clients: this node's (Config.InternalClientID) or another registered
// node's (controlplane.InternalClient).
func (s *Server) internalClient(req *request) bool {
	_, ok := s.internalPeer(req)
	return ok
}

// internalPeer reports whether req comes from one of Fjord's own
// clients, and from which node's.
func (s *Server) internalPeer(req *request) (node int32, ok bool) {
	if req.clientID == nil {
		return -1, false
	}
	if id := s.cfg.InternalClientID; id != "" && subtle.ConstantTimeCompare([]byte(*req.clientID), []byte(id)) == 1 {
		return s.cfg.NodeID, true
	}
	return controlplane.InternalClient(s.image(), *req.clientID)
}

// releaseFrame gives the request's frame back to the pool before the
// response is written: for a handler done with every byte field of its
// body (those alias the frame; strings are copies). Produce calls it once
// its appends are in the log, so a connection's produce frames are not
// held through the fsync and high-watermark waits, which would keep the
// data in flight resident twice, in the page cache and the heap.
// REQUIRES: called from the request's handler goroutine, which then
// touches no byte field of body.
func (r *request) releaseFrame() {
	if r.sl != nil {
		putBuffer(r.sl.frame)
		r.sl.frame = nil
	}
}

// New returns a Server. It does not listen until Serve.
func New(cfg Config, ctrl Controller, replicas Replicas, pids ProducerIDs, groups Groups) *Server {
	if cfg.TopicConfigs == nil {
		panic("kafkaserver.New: Config.TopicConfigs is nil")
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.FetchSessionCacheSlots == 0 {
		cfg.FetchSessionCacheSlots = defaultFetchSessionCacheSlots
	}
	if cfg.SendfileMinBytes == 0 {
		cfg.SendfileMinBytes = DefaultSendfileMinBytes
	}
	if cfg.OffsetsTopicPartitions <= 0 {
		cfg.OffsetsTopicPartitions = offsetstopic.DefaultPartitions
	}
	if cfg.OffsetsTopicReplicationFactor <= 0 {
		cfg.OffsetsTopicReplicationFactor = offsetstopic.DefaultReplicationFactor
	}
	if cfg.TransactionTopicPartitions <= 0 {
		cfg.TransactionTopicPartitions = txnstatetopic.DefaultPartitions
	}
	if cfg.TransactionTopicReplicationFactor <= 0 {
		cfg.TransactionTopicReplicationFactor = txnstatetopic.DefaultReplicationFactor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		quotas:      quota.New(quota.Config{}),
		emptyImage:  metadata.Empty(cfg.TopicConfigs),
		cfg:         cfg,
		controller:  ctrl,
		replicas:    replicas,
		producerIDs: pids,
		groups:      groups,
		log:         cfg.Logger,
		metrics:     newServerMetrics(cfg.Metrics),
		sessions:    newFetchSessionCache(cfg.FetchSessionCacheSlots),
		connLimits:  newConnLimiter(cfg.NodeID),

		tlsHandshakeTimeout: defaultTLSHandshakeTimeout,
		saslAuthTimeout:     defaultSASLAuthTimeout,
		failedAuthDelay:     defaultFailedAuthDelay,
	}
	if cfg.ACL != nil {
		s.authzBase = acl.NewAuthorizer(nil, cfg.ACL.Config)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	return s
}

// Serve serves l as a PLAINTEXT listener named DefaultListenerName
// (ServeListener).
func (s *Server) Serve(l net.Listener) error {
	return s.ServeListener(l, ListenerConfig{Name: DefaultListenerName, Protocol: listener.Plaintext})
}

// ServeListener accepts connections on l, served as lc says, until
// Close, and then returns nil. It may be called for more than one
// listener. Called after Close, or with an lc it cannot serve, it closes
// l and returns the reason (ErrServerClosed after Close).
func (s *Server) ServeListener(l net.Listener, lc ListenerConfig) error {
	if err := lc.check(); err != nil {
		l.Close()
		return err
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAccept(err) {
				// Out of file descriptors and the like: wait and retry
				// rather than spin or give up the listener.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("kafkaserver: accept failed; retrying", slog.Any("err", err), slog.Duration("backoff", backoff))
				select {
				case <-time.After(backoff): // retry
				case <-s.ctx.Done(): // closed while waiting
					return nil
				}
				continue
			}
			s.mu.Lock()
			delete(s.mu.listeners, l)
			s.mu.Unlock()
			return err
		}
		backoff = 0
		// The connection limits, before anything is spent on the
		// connection: a refused one is closed here, on this goroutine.
		addr := remoteAddr(nc)
		ticket, r := s.connLimits.admit(s.image(), addr)
		if r == admitted && ticket.counted && !s.admitConnectionRate(addr) {
			s.connLimits.release(ticket)
			r = refusedConnectionCreationRate
		}
		if r != admitted {
			s.refuse(nc, addr, r)
			continue
		}
		c := newConn(s, lc.wrap(nc), &lc)
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			s.connLimits.release(ticket)
			return nil
		}
		s.mu.conns[c] = struct{}{}
		s.metrics.connections.Inc()
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			s.metrics.connections.Dec()
			s.mu.Unlock()
			s.connLimits.release(ticket)
		}()
	}
}

// isTemporaryAccept reports accept errors worth retrying (EMFILE,
// ENFILE, ECONNABORTED), which net reports through the deprecated
// Temporary method.
func isTemporaryAccept(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// Close stops accepting, closes every connection (in-flight handlers see
// their context canceled), waits for all goroutines, and returns. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.mu.closed = true
	for l := range s.mu.listeners {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return nil
}

func (s *Server) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}
