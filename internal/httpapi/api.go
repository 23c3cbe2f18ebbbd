// Package httpapi is Fjord's HTTP/JSON API, mounted on the node's
// --http-addr beside /healthz and /readyz.
//
// It is a gateway: it speaks the Kafka protocol to the cluster through
// franz-go, as any client does, so an HTTP producer gets the guarantees
// of a Kafka producer (a 200 with acks=all means what acks=all means),
// keys route with Kafka's partitioner (an HTTP producer and a Kafka
// producer put the same key in the same partition), and the API works on
// any node, whichever leads the partition.
//
// Routes (issue 6 is open: some metrics are still to come):
//
//	POST /v1/topics/{topic}/produce                 one record, or {"records": [...]}
//	GET  /v1/topics/{topic}/partitions/{p}/records  a stateless read from an offset
//	GET  /v1/topics/{topic}/consume, POST .../commit, POST .../seek
//	                                                as a consumer group member (consume.go);
//	DELETE /v1/topics/{topic}/consume               closes the member
//
// A produce's idempotency_key makes its retries answer the first
// attempt's result (idempotency.go).
//
//	/v1/topics, /v1/topics/{topic}, /v1/cluster,
//	/v1/groups, /v1/groups/{group}                  administration (admin.go,
//	/v1/groups/{group}/reset-offsets                 admin_groups.go)
//
// Callers log in as the Kafka listeners' clients do, with the same
// principals, and each route checks the ACLs of its Kafka equivalent
// (auth.go, authz.go, AUTHZ.md).
//
// Bytes travel as base64 (values, header values, key_b64), keys as
// strings when they are text, and times as Unix milliseconds. Every error is JSON, {"error": "<stable
// code>", "message": "<text>"}, with the status that fits (errors.go).
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// seed is the options that reach the node: its listener and security.
// Each call returns a new slice, safe to append to.
func (cfg Config) seed() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.KafkaOpts...)
}

// Config configures the API.
type Config struct {
	// Brokers are the Kafka listeners the gateway's clients dial (the
	// node's own).
	Brokers []string
	// KafkaOpts are added to every client the gateway makes: the
	// listener's security (TLS, SASL).
	KafkaOpts []kgo.Opt
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes;
	// MinMaxBodyBytes to MaxMaxBodyBytes); larger is 413. It is what
	// bounds a record's size on the gateway's side: base64 makes a value
	// a third larger than its bytes, so the default carries a record of
	// about 12 MiB, and the topic's max.message.bytes decides below that.
	MaxBodyBytes int64
	// MaxReadBytes bounds a read's answer (default DefaultMaxReadBytes).
	MaxReadBytes int32
	// MaxConcurrent bounds the API requests served at once, long-polls
	// apart (default DefaultMaxConcurrent); more are answered 429 at
	// once, so slow or hostile clients (big bodies, slow reads) cannot
	// take every goroutine and buffer the node has.
	MaxConcurrent int
	// MaxLongPolls bounds the reads (consume and records) served at
	// once (default DefaultMaxLongPolls); more are answered 429 at once.
	// It is a pool of its own so that reads waiting out their
	// timeout_ms, however many a client opens, never turn a produce
	// away.
	MaxLongPolls int
	// ConsumerIdleTimeout is http.consumer.idle.timeout.ms: a consumer
	// instance unused this long leaves its group (default
	// DefaultConsumerIdleTimeout).
	ConsumerIdleTimeout time.Duration
	// ConsumerSessionTimeout is http.consumer.session.timeout.ms: the
	// group session of each consumer instance (default
	// DefaultConsumerSessionTimeout), how long its group waits for an
	// instance whose node died before it gives the partitions to the
	// others.
	ConsumerSessionTimeout time.Duration
	// MaxConsumers bounds the consumer instances on this node (default
	// DefaultMaxConsumers); past it a new one is 429.
	MaxConsumers int
	// IdempotencyWindow is http.idempotency.window.ms: how long a
	// produce's idempotency_key is remembered (default
	// DefaultIdempotencyWindow).
	IdempotencyWindow time.Duration
	// InternalClientID is the client id the Kafka listener lets write
	// internal topics (kafkaserver.Config.InternalClientID; the node
	// gives both the same). Only the idempotency index's clients use
	// it: records produced through the API are a client's and go out as
	// "fjord-http", so an HTTP produce to an internal topic is refused
	// like any client's. Empty: the index cannot be written.
	InternalClientID string
	// Now is the clock idempotency keys age by (default time.Now;
	// tests move it past the window).
	Now func() time.Time
	// Security authenticates and authorizes requests (auth.go, authz.go);
	// nil: every request is served, unauthenticated.
	Security *Security
	// Audit, when set, receives the authentications (successes and
	// failures) and authorization denials of the API's requests.
	Audit audit.Recorder
	// Metrics, when set, receives the API's Prometheus metrics.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Defaults for zero Config fields.
const (
	DefaultMaxBodyBytes = 16 << 20
	// MinMaxBodyBytes and MaxMaxBodyBytes bound MaxBodyBytes: below a
	// KiB hardly a record fits; a body is held in memory whole, and the
	// largest record it carries (three quarters of it, after base64)
	// must fit the gateway client's 100 MiB produce request.
	MinMaxBodyBytes      = 1 << 10
	MaxMaxBodyBytes      = 128 << 20
	DefaultMaxReadBytes  = 8 << 20
	DefaultMaxConcurrent = 256
	DefaultMaxLongPolls  = 256
	// maxReadWait bounds a read's long-poll (timeout_ms).
	maxReadWait = 30 * time.Second
	// metadataMinAge: see New.
	metadataMinAge = 10 * time.Millisecond
	// producedTopicMaxAge is how long a produce trusts what it last
	// learned of a topic (producedTopics).
	producedTopicMaxAge = time.Second
	// producedTopicsMax bounds producedTopics; past it the cache starts
	// over.
	producedTopicsMax = 10_000
	// defaultBatchMaxBytes caps the batches of a topic whose
	// max.message.bytes is not known: franz-go's default, below the
	// broker's default max.message.bytes.
	defaultBatchMaxBytes = 1_000_012
	// awaitPartitionsTimeout bounds how long a produce waits for its
	// client to learn of partitions added a moment ago.
	awaitPartitionsTimeout = 5 * time.Second
)

// API serves the routes. Its clients are shared by every request.
type API struct {
	cfg Config
	log *slog.Logger
	// guard authenticates (auth.go); nil without Config.Security.
	guard *guard
	// producers[acks] is the client for acks=all ("all"), 1 and 0: acks
	// is a client-wide setting in franz-go, and only acks=all may be
	// idempotent.
	producers map[string]*kgo.Client
	// reader serves reads and metadata.
	reader *kgo.Client
	adm    *kadm.Client
	// inFlight holds one token per request being served, polls one per
	// read (longPollRoutes).
	inFlight, polls chan struct{}
	// consumers are the HTTP consumer instances (consume.go).
	consumers *consumers
	metrics   *apiMetrics
	// policyStore is the consumer policies topic's view (poison.go),
	// opened on first use.
	policyStore policyStoreOnce
	// dedup remembers idempotency keys (idempotency.go); stop ends its
	// load.
	dedup *dedup
	stop  context.CancelFunc

	// producedTopics caches, for produces only, the topics that exist:
	// asking a broker on every produce was a third of a one-record
	// produce's system calls (BenchmarkProduceOne). Only topics found
	// are kept, so one created a moment ago is still seen at once. A
	// produce to a topic deleted since is refused by the broker (404 all
	// the same), one to a partition past the cached count looks again,
	// and the API's own create and delete routes forget the topic.
	//
	// It also keeps each topic's max.message.bytes, which sizes the
	// producers' batches for the topic (batchMaxBytes); given is what
	// they were told, per topic.
	producedTopics struct {
		sync.Mutex
		m     map[string]cachedTopic
		given map[string]int32
	}
}

type cachedTopic struct {
	detail kadm.TopicDetail
	// maxMessageBytes is the topic's max.message.bytes; 0: no limit,
	// -1: not known (its configs could not be read).
	maxMessageBytes int32
	fetched         time.Time
}

// New makes the API's clients. They dial lazily: the node's own listener
// need not be serving yet.
func New(cfg Config) (*API, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("httpapi: no brokers")
	}
	if err := CheckMaxBodyBytes(cfg.MaxBodyBytes); err != nil {
		return nil, fmt.Errorf("httpapi: MaxBodyBytes %d: %w", cfg.MaxBodyBytes, err)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = DefaultMaxReadBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.MaxLongPolls <= 0 {
		cfg.MaxLongPolls = DefaultMaxLongPolls
	}
	if cfg.ConsumerIdleTimeout <= 0 {
		cfg.ConsumerIdleTimeout = DefaultConsumerIdleTimeout
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = DefaultConsumerSessionTimeout
	}
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = DefaultMaxConsumers
	}
	if cfg.IdempotencyWindow <= 0 {
		cfg.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &API{cfg: cfg, log: cfg.Logger, producers: map[string]*kgo.Client{}, inFlight: make(chan struct{}, cfg.MaxConcurrent),
		polls:   make(chan struct{}, cfg.MaxLongPolls),
		metrics: newAPIMetrics(cfg.Metrics)}
	if cfg.Security != nil {
		g, err := newGuard(*cfg.Security, cfg.Audit, cfg.Logger)
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		a.guard = g
	}
	common := append(cfg.seed(),
		kgo.ClientID("fjord-http"),
		// franz-go answers metadata from a cache younger than this; a
		// gateway must see a topic created or deleted a moment ago by
		// the request before.
		kgo.MetadataMinAge(metadataMinAge),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(newPartitioner()),
		// An unknown topic is the client's mistake (404), not a reason
		// to wait for the topic to appear.
		kgo.UnknownTopicRetries(0),
		kgo.RecordDeliveryTimeout(30*time.Second),
		// A batch is as large as the topic takes, no more: the topic's
		// max.message.bytes decides what is written, and records
		// produced together never make a batch the broker refuses.
		kgo.ProducerBatchMaxBytesFn(a.batchMaxBytes),
	)
	for acks, opts := range map[string][]kgo.Opt{
		"all": {kgo.RequiredAcks(kgo.AllISRAcks())},
		"1":   {kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()},
		"0":   {kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()},
	} {
		cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), common...), opts...)...)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		a.producers[acks] = cl
	}
	// The reader is Fjord's client (fjordmsg.ClientOpts): the group
	// view asks leaders Fjord's DescribePositions through it.
	reader, err := kgo.NewClient(append(append(fjordmsg.ClientOpts(), cfg.seed()...), kgo.ClientID("fjord-http"), kgo.MetadataMinAge(metadataMinAge))...)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	a.reader, a.adm = reader, kadm.NewClient(reader)
	a.consumers = newConsumers(cfg.seed(), cfg.ConsumerIdleTimeout, cfg.ConsumerSessionTimeout, cfg.MaxConsumers, a.metrics)
	if a.dedup, err = newDedup(cfg.seed(), cfg.InternalClientID, cfg.IdempotencyWindow, cfg.Now, reader); err != nil {
		a.Close()
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	// The index loads in the background: the node's listener may not
	// serve yet, and only idempotent produces wait for it.
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go a.dedup.load(ctx)
	return a, nil
}

// CheckMaxBodyBytes says what is wrong with n as Config.MaxBodyBytes (0:
// the default).
func CheckMaxBodyBytes(n int64) error {
	if n != 0 && (n < MinMaxBodyBytes || n > MaxMaxBodyBytes) {
		return fmt.Errorf("allowed: %d to %d bytes", MinMaxBodyBytes, MaxMaxBodyBytes)
	}
	return nil
}

// route is one of the API's routes, with what /v1/openapi.json says of
// it (openapi.go).
type route struct {
	method, path string // path in ServeMux's pattern syntax
	handler      func(*API, http.ResponseWriter, *http.Request)
	doc          routeDoc
}

// longPollRoutes are the routes that may wait for records (timeout_ms):
// they are bounded by MaxLongPolls instead of MaxConcurrent.
var longPollRoutes = map[string]bool{
	"GET /v1/topics/{topic}/consume":                        true,
	"GET /v1/topics/{topic}/partitions/{partition}/records": true,
}

// Register mounts the API's routes on mux, each behind authentication
// (auth.go; every route then authorizes what it does itself, authz.go)
// and its concurrency limit, and counted in the metrics (401s and 429s
// included). Authentication comes before the limit: a client that
// cannot log in never holds a request's place, and the password checks
// have a bound of their own.
func (a *API) Register(mux *http.ServeMux) {
	routes := http.NewServeMux()
	// The catch-all tells a known path asked with the wrong method (405,
	// with Allow) from a path that is not the API's (404).
	allowed := map[string][]string{}
	paths := http.NewServeMux()
	for _, rt := range apiRoutes {
		if allowed[rt.path] == nil {
			paths.HandleFunc(rt.path, func(http.ResponseWriter, *http.Request) {})
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	notAllowed := func(w http.ResponseWriter, r *http.Request, pattern string) {
		w.Header().Set("Allow", strings.Join(allowed[pattern], ", "))
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
			msg: fmt.Sprintf("%s %s: allowed: %s", r.Method, r.URL.Path, strings.Join(allowed[pattern], ", "))})
	}
	for _, rt := range apiRoutes {
		pattern := rt.method + " " + rt.path
		pool, what := a.inFlight, "requests"
		if longPollRoutes[pattern] {
			pool, what = a.polls, "reads"
		}
		h := func(w http.ResponseWriter, r *http.Request) { rt.handler(a, w, r) }
		routes.HandleFunc(pattern, a.metrics.instrument(pattern, a.authenticated(pattern, false, limit(pool, what, h))))
		if longPollRoutes[pattern] {
			// A GET pattern also serves HEAD, which would run the read
			// and throw its body away: for a consume, records handed
			// out to no one (and in ack_mode=records held as
			// unacknowledged). These reads have no HEAD.
			head := "HEAD " + rt.path
			routes.HandleFunc(head, a.authenticated(head, false, func(w http.ResponseWriter, r *http.Request) { notAllowed(w, r, rt.path) }))
		}
	}
	// The document is open: a client learns from it how to log in.
	routes.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, openAPIDocument())
	})
	// Even a path that is not the API's needs credentials where the
	// node requires them: the routes it has are no one else's business.
	routes.HandleFunc("/v1/", a.authenticated("/v1/", false, limit(a.inFlight, "requests", func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := paths.Handler(r); pattern != "" {
			notAllowed(w, r, pattern)
			return
		}
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_found",
			msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	})))
	mux.Handle("/v1/", routes)
}

// limit answers 429 at once while pool is full: a client turned away
// costs the node nothing, and one that waited would hold a goroutine and
// a connection anyway. A request turned away with a body unread gets
// Connection: close, or net/http would read up to 256 KiB of the body
// before it sent the answer, and a body that never ends (a slow or
// hostile client) would hold the goroutine and the connection after all.
func limit(pool chan struct{}, what string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case pool <- struct{}{}:
		default:
			if r.ContentLength != 0 {
				w.Header().Set("Connection", "close")
			}
			writeError(w, &apiError{status: http.StatusTooManyRequests, code: "too_many_requests",
				msg: fmt.Sprintf("%d %s are being served; try again", cap(pool), what)})
			return
		}
		defer func() { <-pool }()
		next(w, r)
	}
}

// Close closes the clients, the consumer instances leaving their groups;
// requests under way fail.
func (a *API) Close() {
	if a.stop != nil {
		a.stop()
		<-a.dedup.loaded
	}
	if a.dedup != nil {
		a.dedup.writer.Close()
	}
	if a.consumers != nil {
		a.consumers.close()
	}
	if a.policyStore.s != nil {
		a.policyStore.s.Close()
	}
	for _, cl := range a.producers {
		cl.Close()
	}
	if a.reader != nil {
		a.reader.Close()
	}
}

// metadata describes topics (nil: every topic) as the cluster sees them
// now. It asks a broker directly: franz-go's metadata cache, which kadm
// reads, can still hold a topic deleted by the request before.
func (a *API) metadata(ctx context.Context, topics []string) (kadm.TopicDetails, error) {
	return a.metadataCreating(ctx, topics, false)
}

// metadataCreating is metadata that, with autoCreate, asks the broker to
// create topics that do not exist, as a Kafka producer's metadata
// request does: the node creates them when it auto-creates topics
// (auto.create.topics.enable), else answers them unknown.
func (a *API) metadataCreating(ctx context.Context, topics []string, autoCreate bool) (kadm.TopicDetails, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = autoCreate
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	seeds := a.reader.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no broker to ask")
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	out := kadm.TopicDetails{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, IsInternal: t.IsInternal,
			Err: kerr.ErrorForCode(t.ErrorCode), Partitions: kadm.PartitionDetails{}}
		for _, p := range t.Partitions {
			td.Partitions[p.Partition] = kadm.PartitionDetail{Topic: *t.Topic, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		out[td.Topic] = td
	}
	return out, nil
}

// topicPartitions describes one topic, or is a 404.
func (a *API) topicPartitions(ctx context.Context, topic string) (kadm.TopicDetail, error) {
	return a.describeTopic(ctx, topic, false)
}

// describeTopic is topicPartitions that, with autoCreate, has the node
// create the topic when it auto-creates topics (metadataCreating).
func (a *API) describeTopic(ctx context.Context, topic string, autoCreate bool) (kadm.TopicDetail, error) {
	topics, err := a.metadataCreating(ctx, []string{topic}, autoCreate)
	if err != nil {
		return kadm.TopicDetail{}, unavailable(err)
	}
	td, ok := topics[topic]
	if ok && errors.Is(td.Err, kerr.InvalidTopicException) {
		return kadm.TopicDetail{}, badRequest("bad_topic", "topic name %q is not valid: at most 249 of a-z A-Z 0-9 . _ -, and not . or ..", topic)
	}
	if !ok || td.Err != nil {
		return kadm.TopicDetail{}, &apiError{status: http.StatusNotFound, code: "unknown_topic", msg: fmt.Sprintf("topic %q does not exist", topic)}
	}
	return td, nil
}

// producedTopic is describeTopic for a produce (with autoCreate,
// creating the topic where the node auto-creates topics), with the
// topic's max.message.bytes, from producedTopics when it knows the topic
// and has at least minPartitions of it (asking a broker when it does
// not).
func (a *API) producedTopic(ctx context.Context, topic string, minPartitions int, autoCreate bool) (cachedTopic, error) {
	now := time.Now()
	a.producedTopics.Lock()
	c, ok := a.producedTopics.m[topic]
	a.producedTopics.Unlock()
	if ok && now.Sub(c.fetched) < producedTopicMaxAge && len(c.detail.Partitions) >= minPartitions {
		return c, nil
	}
	// A produce to a missing topic creates it where the node
	// auto-creates topics, as a Kafka producer's does.
	td, err := a.describeTopic(ctx, topic, autoCreate)
	if err != nil {
		a.forgetTopic(topic)
		return cachedTopic{}, err
	}
	maxMessageBytes := a.maxMessageBytes(ctx, topic)
	if maxMessageBytes < 0 && ok {
		// Configs not read this time: what was read before still holds
		// better than nothing.
		maxMessageBytes = c.maxMessageBytes
	}
	c = cachedTopic{detail: td, maxMessageBytes: maxMessageBytes, fetched: now}
	a.producedTopics.Lock()
	if a.producedTopics.m == nil || len(a.producedTopics.m) >= producedTopicsMax {
		a.producedTopics.m = map[string]cachedTopic{}
	}
	a.producedTopics.m[topic] = c
	given, told := a.producedTopics.given[topic]
	// Only a value read is a reason to start the producers over.
	stale := told && c.maxMessageBytes >= 0 && given != batchMaxBytesFor(c.maxMessageBytes)
	if stale {
		delete(a.producedTopics.given, topic)
	}
	a.producedTopics.Unlock()
	if stale {
		// franz-go sizes a partition's batches once, when it learns of
		// the partition: after max.message.bytes changed, the producers
		// forget the topic and learn it again. Records of the topic
		// buffered at this moment fail (503: try again).
		for _, cl := range a.producers {
			cl.PurgeTopicsFromProducing(topic)
		}
	}
	return c, nil
}

// maxMessageBytes reads topic's max.message.bytes (-1: not known).
// REQUIRES: producedTopics' lock not held.
func (a *API) maxMessageBytes(ctx context.Context, topic string) int32 {
	if v, err := strconv.ParseInt(a.topicConfig(ctx, topic, "max.message.bytes"), 10, 32); err == nil && v >= 0 {
		return int32(v)
	}
	return -1
}

// topicConfig reads one of topic's configs as a broker has it now ("":
// not read).
func (a *API) topicConfig(ctx context.Context, topic, name string) string {
	rcs, err := a.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return ""
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return ""
	}
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// batchMaxBytes is the producers' batch cap for topic
// (kgo.ProducerBatchMaxBytesFn): its max.message.bytes as producedTopic
// last read it. franz-go calls it when it learns of a partition, which
// the first produce to the topic, after producedTopic, makes it do.
// REQUIRES: producedTopics' lock not held (franz-go's metadata
// goroutine calls it; PurgeTopicsFromProducing waits for that
// goroutine, so it is never called under the lock).
func (a *API) batchMaxBytes(topic string) int32 {
	a.producedTopics.Lock()
	defer a.producedTopics.Unlock()
	known := int32(-1)
	if c, ok := a.producedTopics.m[topic]; ok {
		known = c.maxMessageBytes
	}
	n := batchMaxBytesFor(known)
	if topic != "" {
		if a.producedTopics.given == nil {
			a.producedTopics.given = map[string]int32{}
		}
		a.producedTopics.given[topic] = n
	}
	return n
}

// batchMaxBytesFor is the batch cap for a topic's max.message.bytes (0:
// no limit, -1: not known). franz-go takes 512 to 1 GiB.
func batchMaxBytesFor(maxMessageBytes int32) int32 {
	switch {
	case maxMessageBytes < 0:
		return defaultBatchMaxBytes
	case maxMessageBytes == 0:
		return 1 << 30
	}
	return max(maxMessageBytes, 512)
}

// forgetTopic drops topic from producedTopics.
func (a *API) forgetTopic(topic string) {
	a.producedTopics.Lock()
	delete(a.producedTopics.m, topic)
	a.producedTopics.Unlock()
}
