package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fjordmq/fjord/internal/bench"
)

// How Kafka's nouns map onto JetStream:
//
//	topic T with N partitions  ->  stream T (file storage, R1, or R3 on
//	                               a cluster of three) with the N
//	                               subjects T.0 ... T.N-1
//	partition p                ->  subject T.p
//	record                     ->  message on T.p, payload = record value
//	produce ack                ->  the stream's PubAck for that message
//	consumer of partitions P   ->  one ordered consumer filtered to the
//	                               subjects of P, delivering from the start
//
// A stream is a single log, so JetStream orders a topic's messages
// across all its subjects and appends them through one store; a Kafka
// partition is its own log. That is the peer's design, not a handicap
// this driver adds: one stream per partition would need N streams and
// N consumers per Kafka consumer and is not how JetStream is used.
//
// With replicas, a stream is one Raft group whose leader (one server)
// takes every publish, wherever the client is connected, and sends the
// PubAck once a majority of the replicas stored the message: 2 of 3,
// where Fjord's acks=all waits for every in-sync replica. Clients
// connect to the servers in turn, so connections spread over the
// cluster as Fjord's clients spread over partition leaders.

// Defaults for the client settings; each is printed in Settings.
const (
	// defaultMaxPending is how many published messages a producer may
	// have waiting for their PubAck when not given (main sizes it per
	// workload, see maxPendingFor): 4 MiB of 1 KiB records.
	defaultMaxPending = 4096
	// defaultPullMaxMessages is how many messages an ordered consumer
	// asks the server for ahead of processing them.
	defaultPullMaxMessages = 2048
)

// The consumer kinds (driverConfig.Consumer).
const (
	consumerPull = "pull"
	consumerPush = "push"
)

// driverConfig holds the client settings.
type driverConfig struct {
	// URLs are the servers' client URLs (one for a lone server).
	URLs []string
	// Replicas is each stream's replica count (0: 1).
	Replicas int
	// Sync is the server's --sync value, reported in Settings.
	Sync string
	// MaxPending bounds unacknowledged publishes per producer.
	MaxPending int
	// PullMaxMessages is the consumers' read-ahead in messages.
	PullMaxMessages int
	// Consumer is consumerPull or consumerPush (see NewConsumer).
	Consumer string
}

// driver is a bench.Driver for NATS JetStream. Every producer and
// consumer has its own connection, as every franz-go client in Fjord's
// driver has its own, so neither side shares a socket the other does
// not.
type driver struct {
	cfg driverConfig
	// admin creates streams; producers and consumers do not use it.
	admin   *nats.Conn
	adminJS jetstream.JetStream
	// conns counts connections made, for the next one's first server.
	conns atomic.Int64

	mu struct {
		sync.Mutex
		// partitions is each created topic's partition count.
		partitions map[string]int
		// replicas is the replica count the first stream's info
		// reported (0 before CreateTopics).
		replicas int
	}
}

var _ bench.Driver = (*driver)(nil)

func newDriver(cfg driverConfig) (*driver, error) {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = defaultMaxPending
	}
	if cfg.PullMaxMessages <= 0 {
		cfg.PullMaxMessages = defaultPullMaxMessages
	}
	if cfg.Sync == "" {
		cfg.Sync = "default"
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if len(cfg.URLs) == 0 {
		return nil, fmt.Errorf("nats driver: no server URLs")
	}
	switch cfg.Consumer {
	case "":
		cfg.Consumer = consumerPull
	case consumerPull, consumerPush:
	default:
		return nil, fmt.Errorf("%w: %q", errBadConsumer, cfg.Consumer)
	}
	d := &driver{cfg: cfg}
	d.mu.partitions = make(map[string]int)
	nc, err := d.connect("fjord-bench-admin")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	d.admin, d.adminJS = nc, js
	return d, nil
}

// connect opens a connection named name to the next server in turn, so
// the run's connections spread evenly over a cluster.
func (d *driver) connect(name string) (*nats.Conn, error) {
	first := int(d.conns.Add(1)-1) % len(d.cfg.URLs)
	// The others follow, so a server that is down is skipped; none is
	// ever reconnected to (below).
	urls := append(slices.Clone(d.cfg.URLs[first:]), d.cfg.URLs[:first]...)
	nc, err := nats.Connect(strings.Join(urls, ","),
		nats.Name(name),
		nats.DontRandomize(),
		// A benchmark must see a lost connection as an error, not hide
		// it behind a reconnect.
		nats.NoReconnect(),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", urls[0], err)
	}
	return nc, nil
}

func (d *driver) Name() string { return "nats-jetstream" }

func (d *driver) Settings() map[string]string {
	d.mu.Lock()
	replicas := d.mu.replicas
	d.mu.Unlock()
	if replicas == 0 { // no stream yet: what will be asked for
		replicas = max(1, d.cfg.Replicas)
	}
	servers := "embedded, in its own process, 127.0.0.1"
	if n := len(d.cfg.URLs); n > 1 {
		servers = fmt.Sprintf("embedded, a cluster of %d, each in its own process, routes on 127.0.0.1 (uncompressed)", n)
	}
	settings := map[string]string{
		"server":               "nats-server " + server.VERSION + ", " + servers,
		"client":               "nats.go " + nats.Version + ", one connection per producer and per consumer, to the servers in turn",
		"stream.storage":       "file",
		"stream.replicas":      strconv.Itoa(replicas),
		"stream.subjects":      "<topic>.<partition>, one stream per topic",
		"stream.retention":     "limits (no limits set), discard old",
		"stream.compression":   "none",
		"server.sync_interval": syncSetting(d.cfg.Sync),
		"publish":              "async (PublishMsgAsync), PubAck per message is the ack" + quorumAck(replicas),
		"publish.max_pending":  strconv.Itoa(d.cfg.MaxPending) + " unacknowledged messages per producer",
		"publish.dedupe":       "off (no Nats-Msg-Id header)",
		"partitioner":          "murmur2(key) as Kafka's default partitioner; round-robin when the key is nil",
		"consumer.ack_policy":  "none",
	}
	switch d.cfg.Consumer {
	case consumerPush:
		settings["consumer"] = "ordered push consumer (ephemeral, flow control), deliver all, filtered to its partitions' subjects"
	default:
		settings["consumer"] = "ordered pull consumer (ephemeral), deliver all, filtered to its partitions' subjects"
		settings["consumer.max_messages"] = strconv.Itoa(d.cfg.PullMaxMessages) + " read ahead"
	}
	return settings
}

// quorumAck says, for a replicated stream, when its PubAck comes.
func quorumAck(replicas int) string {
	if replicas <= 1 {
		return ""
	}
	return fmt.Sprintf(", sent once %d of the %d replicas stored the message (a Raft majority)", replicas/2+1, replicas)
}

// streamName maps a topic to a stream name and subject prefix. Stream
// names may not contain '.', and subjects use '.' as the token
// separator, so a Kafka topic's dots become underscores.
func streamName(topic string) string {
	return strings.ReplaceAll(topic, ".", "_")
}

func subject(stream string, partition int) string {
	return stream + "." + strconv.Itoa(partition)
}

func (d *driver) CreateTopics(ctx context.Context, topics []string, partitions int) error {
	if partitions <= 0 {
		return fmt.Errorf("%w: %d", errBadPartitions, partitions)
	}
	for _, topic := range topics {
		name := streamName(topic)
		subjects := make([]string, partitions)
		for p := range subjects {
			subjects[p] = subject(name, p)
		}
		stream, err := d.adminJS.CreateStream(ctx, jetstream.StreamConfig{
			Name:        name,
			Subjects:    subjects,
			Storage:     jetstream.FileStorage,
			Replicas:    d.cfg.Replicas,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxMsgs:     -1,
			MaxBytes:    -1,
			MaxAge:      0,
			Compression: jetstream.NoCompression,
		})
		if err != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		// The replica count printed with the result is the stream's
		// own, as its info reports it, not the one asked for.
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s info: %w", name, err)
		}
		d.mu.Lock()
		d.mu.partitions[topic] = partitions
		if d.mu.replicas == 0 {
			d.mu.replicas = streamReplicas(info)
		}
		d.mu.Unlock()
	}
	return nil
}

// streamReplicas is how many servers hold the stream: its leader and
// the other members of its Raft group (a lone server's stream has no
// cluster info and is one replica).
func streamReplicas(info *jetstream.StreamInfo) int {
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return 1
	}
	return 1 + len(info.Cluster.Replicas)
}

func (d *driver) partitionsOf(topic string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.mu.partitions[topic]
	if !ok {
		return 0, fmt.Errorf("%w: %s", errUnknownTopic, topic)
	}
	return n, nil
}

func (d *driver) NewProducer(ctx context.Context, topic string) (bench.Producer, error) {
	n, err := d.partitionsOf(topic)
	if err != nil {
		return nil, err
	}
	p := &producer{
		partitioner: newPartitioner(n),
		slots:       make(chan struct{}, d.cfg.MaxPending),
	}
	stream := streamName(topic)
	p.subjects = make([]string, n)
	for i := range p.subjects {
		p.subjects[i] = subject(stream, i)
	}
	p.mu.pending = make(map[*nats.Msg]func(error))
	p.nc, err = d.connect("fjord-bench-producer-" + topic)
	if err != nil {
		return nil, err
	}
	p.js, err = jetstream.New(p.nc,
		// nats.go's own bound (default 4000) set to the driver's, which
		// holds a slot until after nats.go has released its own, so
		// nats.go never stalls a publish (ErrTooManyStalledMsgs).
		jetstream.WithPublishAsyncMaxPending(d.cfg.MaxPending),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			p.complete(m, nil)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.complete(m, err)
		}),
	)
	if err != nil {
		p.nc.Close()
		return nil, err
	}
	return p, nil
}

// producer publishes one topic's records.
//
// Threads: Send and Flush run on the runner's goroutine; complete runs
// on the connection's ack dispatch goroutine (one per connection, so
// acks complete one at a time, in arrival order).
type producer struct {
	nc          *nats.Conn
	js          jetstream.JetStream
	subjects    []string
	partitioner *partitioner
	// slots bounds unacknowledged publishes: Send puts a token in before
	// publishing, complete takes it out. It is the driver's bound, not
	// nats.go's WithPublishAsyncMaxPending, because Send must stop
	// waiting when its context ends and nats.go's stall wait does not
	// watch a context.
	slots chan struct{}

	mu struct {
		sync.Mutex
		// pending maps each published, unacknowledged message to the
		// runner's done callback. The ack handlers hand back the same
		// *nats.Msg that was published, which is the only identity they
		// carry.
		pending map[*nats.Msg]func(error)
	}
}

func (p *producer) Send(ctx context.Context, key, value []byte, done func(error)) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		done(ctx.Err())
		return
	}
	// nats.go keeps the message (to retry a publish that found no
	// responders) until its ack, and the runner reuses value once Send
	// returns, so the payload is copied.
	m := &nats.Msg{
		Subject: p.subjects[p.partitioner.partition(key)],
		Data:    bytes.Clone(value),
	}
	// Register before publishing: the ack can arrive before
	// PublishMsgAsync returns.
	p.mu.Lock()
	p.mu.pending[m] = done
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.complete(m, err)
	}
}

// complete calls m's done callback once, whichever of the ack, the
// error handler or a failed publish gets here first.
func (p *producer) complete(m *nats.Msg, err error) {
	p.mu.Lock()
	done, ok := p.mu.pending[m]
	delete(p.mu.pending, m)
	p.mu.Unlock()
	if !ok {
		return
	}
	<-p.slots
	done(err)
}

func (p *producer) Flush(ctx context.Context) error {
	// Sends are on the caller's goroutine, so nothing is being published
	// now; every publish is either acknowledged, failed, or in nats.go's
	// pending set, which this channel waits out. complete runs before
	// nats.go closes it.
	select {
	case <-p.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	left := len(p.mu.pending)
	p.mu.Unlock()
	if left != 0 {
		panic(fmt.Sprintf("nats producer: %d records without an outcome after PublishAsyncComplete", left))
	}
	return nil
}

func (p *producer) Close() error {
	p.nc.Close()
	// A record still pending now will never be acknowledged; its done
	// callback must still run exactly once.
	p.mu.Lock()
	left := p.mu.pending
	p.mu.pending = make(map[*nats.Msg]func(error))
	p.mu.Unlock()
	for _, done := range left {
		<-p.slots
		done(nats.ErrConnectionClosed)
	}
	return nil
}

func (d *driver) NewConsumer(ctx context.Context, topic string, partitions []int32) (bench.Consumer, error) {
	n, err := d.partitionsOf(topic)
	if err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return nil, fmt.Errorf("%w: no partitions", errBadPartitions)
	}
	stream := streamName(topic)
	filter := make([]string, len(partitions))
	for i, p := range partitions {
		if p < 0 || int(p) >= n {
			return nil, fmt.Errorf("%w: partition %d of %s (has %d)", errBadPartitions, p, topic, n)
		}
		filter[i] = subject(stream, int(p))
	}
	nc, err := d.connect("fjord-bench-consumer-" + topic)
	if err != nil {
		return nil, err
	}
	var c bench.Consumer
	switch d.cfg.Consumer {
	case consumerPush:
		c, err = newPushConsumer(nc, stream, filter)
	default:
		c, err = newPullConsumer(ctx, nc, stream, filter, d.cfg.PullMaxMessages)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s consumer on %s %v: %w", d.cfg.Consumer, stream, filter, err)
	}
	return c, nil
}

// Both consumer kinds are JetStream "ordered consumers": ephemeral, no
// acks, in stream order, re-created from the last delivered sequence if
// a gap is seen; the nearest thing to a Kafka consumer with assigned
// partitions. They differ in who drives delivery:
//
//   - pull (nats.go's jetstream package, the API nats.go recommends):
//     the client asks for up to PullMaxMessages and asks again when half
//     are read. Each request waits in the server's queue behind the
//     publishes, so at max rate the consumer falls behind the producers
//     and catches up after them; reading a backlog it is the faster one.
//   - push (nats.go's older JetStream API): the server sends as fast as
//     the client's flow-control replies allow, so a consumer stays at
//     the tail even at max rate; the server then does more work while
//     the producers run.

// pullConsumer reads through the jetstream package's ordered consumer.
type pullConsumer struct {
	nc          *nats.Conn
	oc          jetstream.Consumer
	maxMessages int
}

func newPullConsumer(ctx context.Context, nc *nats.Conn, stream string, filter []string, maxMessages int) (*pullConsumer, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	oc, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: filter,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		ReplayPolicy:   jetstream.ReplayInstantPolicy,
	})
	if err != nil {
		return nil, err
	}
	return &pullConsumer{nc: nc, oc: oc, maxMessages: maxMessages}, nil
}

func (c *pullConsumer) Run(ctx context.Context, fn func(value []byte)) error {
	it, err := c.oc.Messages(jetstream.PullMaxMessages(c.maxMessages))
	if err != nil {
		return fmt.Errorf("nats consumer: %w", err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("nats consumer: %w", err)
		}
		fn(msg.Data())
	}
}

func (c *pullConsumer) Close() error {
	c.nc.Close()
	return nil
}

// pushConsumer reads through the older API's ordered push consumer.
type pushConsumer struct {
	nc  *nats.Conn
	sub *nats.Subscription
}

func newPushConsumer(nc *nats.Conn, stream string, filter []string) (*pushConsumer, error) {
	js, err := nc.JetStream()
	if err != nil {
		return nil, err
	}
	sub, err := js.SubscribeSync("",
		nats.BindStream(stream),
		nats.OrderedConsumer(),
		nats.DeliverAll(),
		nats.ConsumerFilterSubjects(filter...),
	)
	if err != nil {
		return nil, err
	}
	return &pushConsumer{nc: nc, sub: sub}, nil
}

func (c *pushConsumer) Run(ctx context.Context, fn func(value []byte)) error {
	for {
		m, err := c.sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("nats consumer: %w", err)
		}
		fn(m.Data)
	}
}

func (c *pushConsumer) Close() error {
	c.nc.Close()
	return nil
}

func (d *driver) Close() error {
	d.admin.Close()
	return nil
}
