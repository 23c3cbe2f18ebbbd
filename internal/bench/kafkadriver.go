package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka-protocol driver, with franz-go. Every setting that shapes the
// numbers is set explicitly here, even where it is franz-go's default
// (defaults change between versions; a figure must not), and listed by
// Settings so each result carries them:
//
//   - acks=all and idempotent writes: what a user who cares about their
//     data runs, and Fjord's durability contract (DESIGN.md §1).
//   - linger 0: a partition's records go out as soon as the connection
//     can take a request; while requests are in flight (up to 5 per
//     broker with idempotence) records accumulate into the next batch,
//     so batches grow with load without a timer adding latency when idle.
//     (franz-go v1.22's default linger is 10 ms.)
//   - batches up to 1 MiB, no compression (values are random anyway).
//   - the producer buffers at most about one second of its fixed rate, or
//     4 MiB of records when sending as fast as possible: enough to fill
//     the five requests in flight, not so much that a max-rate run's ack
//     latency is mostly the time to drain an oversized client buffer
//     (by Little's law it is about buffer / throughput: with 16 MiB per
//     producer, p50 ack latency was 6x higher on this machine for no
//     throughput gained). When the buffer is full Send blocks, and a
//     fixed-rate producer falls behind its schedule, which its latency
//     then shows.
//   - records without a key go to partitions by franz-go's uniform
//     sticky partitioner (a partition per 64 KiB, like Kafka's default
//     partitioner); keyed records by murmur2 of the key, as Kafka's do.
//   - consumers are plain clients reading their assigned partitions from
//     the start (no group), fetching up to 50 MiB per request and 1 MiB
//     per partition, and waiting up to 500 ms for data (Kafka's
//     fetch.max.wait.ms) when none is there.
//   - the connection's security (TLS, SASL) is the caller's
//     (KafkaConfig.ClientOpts), the same for every client, and named in
//     the settings as security.protocol.

// KafkaConfig configures the franz-go driver.
type KafkaConfig struct {
	// Brokers are the bootstrap host:port addresses.
	Brokers []string
	// Name names the system in results (default "fjord").
	Name string
	// FlushPolicy is the run's topics' flush.policy, "ack" or
	// "interval"; empty leaves the broker's default.
	FlushPolicy string
	// ReplicationFactor of the run's topics; 0 is the broker's default.
	ReplicationFactor int16
	// MaxRateBufferBytes is how much a producer sending as fast as
	// possible buffers (default 4 MiB; see above).
	MaxRateBufferBytes int
	// Producer is the load generator: ProducerFranzGo (the default) or
	// ProducerRaw, pre-encoded requests (rawproducer.go). Consumers are
	// franz-go's either way.
	Producer string
	// SecurityProtocol is the brokers' listener protocol, Kafka's
	// security.protocol (PLAINTEXT when empty), and ClientOpts the
	// franz-go options that speak it (a TLS dialer, a SASL mechanism):
	// every client the driver makes, the admin, each producer and each
	// consumer, gets them. The raw producer dials plain TCP, so it runs
	// on PLAINTEXT only.
	SecurityProtocol string
	ClientOpts       []kgo.Opt
}

// The producers KafkaConfig.Producer names.
const (
	ProducerFranzGo = "franz-go"
	ProducerRaw     = "raw"
)

// Producer and consumer settings (see above).
const (
	kafkaLinger        = 0
	kafkaBatchMaxBytes = 1 << 20
	// kafkaMaxInflight is not a setting: franz-go fixes it at 5 produce
	// requests per broker with idempotence, and refuses the option.
	kafkaMaxInflight         = 5
	kafkaMaxRateBufferBytes  = 4 << 20
	kafkaMinBufferedRecords  = 1000
	kafkaDeliveryTimeout     = 30 * time.Second
	kafkaProduceTimeout      = 10 * time.Second
	kafkaStickyBytes         = 64 << 10
	kafkaFetchMaxBytes       = 50 << 20
	kafkaFetchMaxPartBytes   = 1 << 20
	kafkaFetchMaxWait        = 500 * time.Millisecond
	kafkaDialTimeout         = 5 * time.Second
	kafkaTopicReadyTimeout   = 30 * time.Second
	kafkaTopicReadyPoll      = 50 * time.Millisecond
	kafkaAdminRequestTimeout = 30 * time.Second
)

// KafkaDriver runs workloads against a Kafka-protocol system (Fjord)
// through franz-go: one client per producer and per consumer, as OMB's
// Kafka driver does, so each has its own connection.
type KafkaDriver struct {
	cfg             KafkaConfig
	bufferedRecords int
	messageSize     int
	admin           *kgo.Client
	adm             *kadm.Client

	mu struct {
		sync.Mutex
		// settings grows with what CreateTopics learns (replication
		// factor, the topics' effective flush.policy).
		settings map[string]string
	}
}

var _ GroupDriver = (*KafkaDriver)(nil)

// NewKafkaDriver connects to the brokers (failing promptly if none
// answers) and sizes the producers' buffers for w.
func NewKafkaDriver(ctx context.Context, w *Workload, cfg KafkaConfig) (*KafkaDriver, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka driver: no brokers")
	}
	if cfg.Name == "" {
		cfg.Name = "fjord"
	}
	switch cfg.FlushPolicy {
	case "", "ack", "interval":
	default:
		return nil, fmt.Errorf("kafka driver: flush.policy %q: allowed: ack, interval", cfg.FlushPolicy)
	}
	if cfg.MaxRateBufferBytes <= 0 {
		cfg.MaxRateBufferBytes = kafkaMaxRateBufferBytes
	}
	if cfg.SecurityProtocol == "" {
		cfg.SecurityProtocol = "PLAINTEXT"
	}
	switch cfg.Producer {
	case "":
		cfg.Producer = ProducerFranzGo
	case ProducerFranzGo:
	case ProducerRaw:
		if w.KeyDistributor != NoKey {
			return nil, fmt.Errorf("kafka driver: the raw producer sends records without keys; %s has keyDistributor %s", w.Name, w.KeyDistributor)
		}
		if cfg.SecurityProtocol != "PLAINTEXT" {
			return nil, fmt.Errorf("kafka driver: the raw producer speaks PLAINTEXT only (no TLS, no SASL); over %s use franz-go's", cfg.SecurityProtocol)
		}
	default:
		return nil, fmt.Errorf("kafka driver: producer %q: allowed: %s, %s", cfg.Producer, ProducerFranzGo, ProducerRaw)
	}
	d := &KafkaDriver{cfg: cfg, messageSize: w.MessageSize}
	if w.ProducerRate > 0 {
		d.bufferedRecords = int(w.ProducerRate / float64(w.producers()))
	} else {
		d.bufferedRecords = cfg.MaxRateBufferBytes / w.MessageSize
	}
	d.bufferedRecords = max(d.bufferedRecords, kafkaMinBufferedRecords)

	admin, err := kgo.NewClient(d.clientOpts(kgo.ClientID("fjord-bench-admin"), kgo.DialTimeout(kafkaDialTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka driver: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, kafkaDialTimeout)
	defer cancel()
	if err := admin.Ping(pingCtx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("cannot reach a broker at %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	d.admin = admin
	d.adm = kadm.NewClient(admin)
	d.adm.SetTimeoutMillis(int32(kafkaAdminRequestTimeout / time.Millisecond))

	fp := cfg.FlushPolicy
	if fp == "" {
		fp = "broker default"
	}
	d.mu.settings = map[string]string{
		"acks":                      "all",
		"idempotent":                "true",
		"linger":                    (time.Duration(kafkaLinger)).String(),
		"batch.max.bytes":           strconv.Itoa(kafkaBatchMaxBytes),
		"compression":               "none",
		"max.in.flight":             strconv.Itoa(kafkaMaxInflight),
		"max.buffered.records":      strconv.Itoa(d.bufferedRecords),
		"partitioner":               fmt.Sprintf("uniform sticky %d KiB, keys murmur2", kafkaStickyBytes>>10),
		"delivery.timeout":          kafkaDeliveryTimeout.String(),
		"fetch.max.bytes":           strconv.Itoa(kafkaFetchMaxBytes),
		"fetch.max.partition.bytes": strconv.Itoa(kafkaFetchMaxPartBytes),
		"fetch.max.wait":            kafkaFetchMaxWait.String(),
		"consumer":                  "assigned partitions, from the start, no group",
		"client":                    "franz-go",
		"security.protocol":         cfg.SecurityProtocol,
		"topic flush.policy":        fp,
	}
	if cfg.Producer == ProducerRaw {
		for k, v := range rawSettings(kafkaBatchMaxBytes) {
			d.mu.settings[k] = v
		}
	}
	return d, nil
}

// clientOpts are a client's options: the seed brokers, opts, then the
// connection's security (KafkaConfig.ClientOpts), in a slice of its own.
func (d *KafkaDriver) clientOpts(opts ...kgo.Opt) []kgo.Opt {
	all := make([]kgo.Opt, 0, 1+len(opts)+len(d.cfg.ClientOpts))
	all = append(all, kgo.SeedBrokers(d.cfg.Brokers...))
	all = append(all, opts...)
	return append(all, d.cfg.ClientOpts...)
}

// Name is the system's name in results.
func (d *KafkaDriver) Name() string { return d.cfg.Name }

// Settings are the client and topic settings (a copy).
func (d *KafkaDriver) Settings() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := make(map[string]string, len(d.mu.settings))
	for k, v := range d.mu.settings {
		s[k] = v
	}
	return s
}

func (d *KafkaDriver) setSetting(k, v string) {
	d.mu.Lock()
	d.mu.settings[k] = v
	d.mu.Unlock()
}

// CreateTopics creates the topics with the configured flush.policy and
// waits until every partition has a leader, so the first produce does
// not race the topic into existence.
func (d *KafkaDriver) CreateTopics(ctx context.Context, topics []string, partitions int) error {
	configs := map[string]*string{}
	if d.cfg.FlushPolicy != "" {
		configs["flush.policy"] = &d.cfg.FlushPolicy
	}
	rf := d.cfg.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	resps, err := d.adm.CreateTopics(ctx, int32(partitions), rf, configs, topics...)
	if err != nil {
		return err
	}
	for _, t := range topics {
		r, ok := resps[t]
		if !ok {
			return fmt.Errorf("creating topic %s: no answer for it", t)
		}
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("creating topic %s: %w (%s)", t, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("creating topic %s: %w", t, r.Err)
		}
	}
	if err := d.waitForLeaders(ctx, topics, partitions); err != nil {
		return err
	}
	// The effective flush.policy, as the broker reports it: the printed
	// setting is then what ran, not what was asked for.
	if rcs, err := d.adm.DescribeTopicConfigs(ctx, topics[0]); err == nil {
		if rc, err := rcs.On(topics[0], nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key == "flush.policy" && c.Value != nil {
					d.setSetting("topic flush.policy", *c.Value)
				}
			}
		}
	}
	return nil
}

func (d *KafkaDriver) waitForLeaders(ctx context.Context, topics []string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaTopicReadyTimeout)
	defer cancel()
	tick := time.NewTicker(kafkaTopicReadyPoll)
	defer tick.Stop()
	var last error
	for {
		details, err := d.adm.ListTopics(ctx, topics...)
		if err == nil {
			last = topicsReady(details, topics, partitions)
			if last == nil {
				if p, ok := details[topics[0]].Partitions[0]; ok {
					d.setSetting("topic replication.factor", strconv.Itoa(len(p.Replicas)))
				}
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done(): // the topics did not get leaders in time
			return fmt.Errorf("topics not ready after %v: %v", kafkaTopicReadyTimeout, last)
		case <-tick.C: // ask again
		}
	}
}

func topicsReady(details kadm.TopicDetails, topics []string, partitions int) error {
	for _, t := range topics {
		td, ok := details[t]
		switch {
		case !ok:
			return fmt.Errorf("topic %s not in metadata", t)
		case td.Err != nil:
			return fmt.Errorf("topic %s: %w", t, td.Err)
		case len(td.Partitions) != partitions:
			return fmt.Errorf("topic %s has %d of %d partitions", t, len(td.Partitions), partitions)
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("topic %s partition %d has no leader (%v)", t, p.Partition, p.Err)
			}
		}
	}
	return nil
}

// NewProducer returns a producer with its own client, or its own
// connections for the raw producer.
func (d *KafkaDriver) NewProducer(ctx context.Context, topic string) (Producer, error) {
	if d.cfg.Producer == ProducerRaw {
		return d.newRawProducer(ctx, topic)
	}
	cl, err := kgo.NewClient(d.clientOpts(
		kgo.ClientID("fjord-bench-producer"),
		kgo.DialTimeout(kafkaDialTimeout),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(kafkaLinger),
		kgo.ProducerBatchMaxBytes(kafkaBatchMaxBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(d.bufferedRecords),
		kgo.RecordDeliveryTimeout(kafkaDeliveryTimeout),
		kgo.ProduceRequestTimeout(kafkaProduceTimeout),
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(kafkaStickyBytes, true, true, nil)),
	)...)
	if err != nil {
		return nil, err
	}
	return &kafkaProducer{cl: cl, topic: topic}, nil
}

// newRawProducer looks up topic's partition leaders and a producer id,
// both once: the raw producer neither retries nor follows a leader that
// moves.
func (d *KafkaDriver) newRawProducer(ctx context.Context, topic string) (Producer, error) {
	md, err := d.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("raw producer: metadata: %w", err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("raw producer: topic %s not in metadata (%v)", topic, td.Err)
	}
	addrs := map[int32]string{}
	for _, b := range md.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	var targets []rawTarget
	for _, pd := range td.Partitions.Sorted() {
		addr, ok := addrs[pd.Leader]
		if pd.Err != nil || !ok {
			return nil, fmt.Errorf("raw producer: %s/%d has no leader with an address (leader %d, %v)", topic, pd.Partition, pd.Leader, pd.Err)
		}
		targets = append(targets, rawTarget{partition: pd.Partition, addr: addr})
	}
	req := kmsg.NewPtrInitProducerIDRequest() // no transactional id: idempotence only
	resp, err := req.RequestWith(ctx, d.admin)
	if err != nil {
		return nil, fmt.Errorf("raw producer: InitProducerId: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("raw producer: InitProducerId: %w", err)
	}
	return newRawProducer(ctx, topic, targets, d.messageSize, kafkaBatchMaxBytes, resp.ProducerID, resp.ProducerEpoch, kafkaProduceTimeout, "fjord-bench-raw-producer")
}

// kafkaProducer copies each record (Send's caller reuses its buffers)
// into a buffer from a pool, returned once the record is acknowledged.
type kafkaProducer struct {
	cl    *kgo.Client
	topic string
	bufs  sync.Pool // *[]byte
}

func (p *kafkaProducer) Send(ctx context.Context, key, value []byte, done func(error)) {
	n := len(key) + len(value)
	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < n {
		b := make([]byte, n)
		bp = &b
	}
	buf := (*bp)[:n]
	rec := &kgo.Record{Topic: p.topic, Value: buf[len(key):]}
	copy(rec.Value, value)
	if key != nil {
		rec.Key = buf[:len(key)]
		copy(rec.Key, key)
	}
	p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		p.bufs.Put(bp)
		done(err)
	})
}

func (p *kafkaProducer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *kafkaProducer) Close() error {
	p.cl.Close()
	return nil
}

// NewConsumer returns a consumer of the given partitions, from their
// start, with its own client.
func (d *KafkaDriver) NewConsumer(ctx context.Context, topic string, partitions []int32) (Consumer, error) {
	offsets := make(map[int32]kgo.Offset, len(partitions))
	for _, p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(d.clientOpts(
		kgo.ClientID("fjord-bench-consumer"),
		kgo.DialTimeout(kafkaDialTimeout),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(kafkaFetchMaxBytes),
		kgo.FetchMaxPartitionBytes(kafkaFetchMaxPartBytes),
		kgo.FetchMaxWait(kafkaFetchMaxWait),
		kgo.FetchMinBytes(1),
	)...)
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{cl: cl}, nil
}

// NewGroupConsumer returns a member of consumer group group on topic,
// with its own client: cooperative-sticky, starting where the group
// committed (at the start when it has not), committing what it delivered
// every 5 s and, before a partition moves, in the revoke callback. Run
// holds rebalances while it delivers a poll (BlockRebalanceOnPoll), so a
// revoked partition's delivered records are always committed first and
// the next owner does not deliver them again.
func (d *KafkaDriver) NewGroupConsumer(ctx context.Context, topic, group string) (Consumer, error) {
	d.mu.Lock()
	d.mu.settings["consumer"] = "consumer group per subscription, cooperative-sticky, from the start, commits every 5s and on revoke"
	d.mu.Unlock()
	cl, err := kgo.NewClient(d.clientOpts(
		kgo.ClientID("fjord-bench-consumer"),
		kgo.DialTimeout(kafkaDialTimeout),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			// A failed commit here means the next owner re-delivers,
			// which the run's checks count as duplicates.
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
		kgo.FetchMaxBytes(kafkaFetchMaxBytes),
		kgo.FetchMaxPartitionBytes(kafkaFetchMaxPartBytes),
		kgo.FetchMaxWait(kafkaFetchMaxWait),
		kgo.FetchMinBytes(1),
	)...)
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{cl: cl, group: true}, nil
}

type kafkaConsumer struct {
	cl *kgo.Client
	// group: a group member, whose rebalances wait for each poll to be
	// delivered (AllowRebalance).
	group bool
}

// Run delivers records until ctx ends (then it returns nil) or a fetch
// fails with an error franz-go does not retry itself.
func (c *kafkaConsumer) Run(ctx context.Context, fn func(value []byte)) error {
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		var fatal error
		fetches.EachError(func(topic string, partition int32, err error) {
			if fatal == nil && !kerr.IsRetriable(err) && !errors.Is(err, context.Canceled) {
				fatal = fmt.Errorf("fetching %s/%d: %w", topic, partition, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) { fn(r.Value) })
		if c.group {
			c.cl.AllowRebalance()
		}
		if fatal != nil {
			return fatal
		}
	}
}

func (c *kafkaConsumer) Close() error {
	if c.group {
		// Leaving the group revokes the partitions, which waits for
		// the last poll to be allowed: Run may have returned without.
		c.cl.AllowRebalance()
	}
	c.cl.Close()
	return nil
}

// Close closes the admin client; producers and consumers are closed by
// whoever made them (Run).
func (d *KafkaDriver) Close() error {
	d.admin.Close()
	return nil
}
