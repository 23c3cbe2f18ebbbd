package kafkaserver

// In-memory stand-ins for the services, for the protocol tests of the
// data half: a controller that creates topics in an image, a replica
// manager that keeps batches in slices and long-polls on a broadcast
// channel, and a producer id counter. They follow the contracts in
// services.go closely enough for real clients (kgo) to work against them;
// the real services are tested in their own packages and end to end.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

// memController keeps an image and creates topics in it.
type memController struct {
	nodeID        int32
	numPartitions int32
	creates       atomic.Int32 // CreateTopics calls

	// onImage, if set before use, sees every new image in order (as a
	// controller's subscribers do) before the change returns.
	onImage func(*metadata.Image)
	// alterPartition, if set before use, answers AlterPartition.
	alterPartition func(context.Context, controlplane.AlterPartition) (controlplane.PartitionState, error)

	mu  sync.Mutex
	img *metadata.Image
}

func newMemController(nodeID int32, host string, port int32) *memController {
	img := metadata.Empty(testConfigs)
	img.ClusterID = "fjord-test-cluster"
	img.Brokers[nodeID] = metadata.Broker{NodeID: nodeID, Host: host, Port: port}
	return &memController{nodeID: nodeID, numPartitions: 1, img: img}
}

func (c *memController) Image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}

func (c *memController) ControllerID() int32 { return c.nodeID }

// addTopic creates a topic directly (test setup).
func (c *memController) addTopic(name string, partitions int) *metadata.Topic {
	res := c.CreateTopics(context.Background(), []controlplane.CreateTopic{{Name: name, NumPartitions: int32(partitions), ReplicationFactor: -1}}, false)
	if res[0].Err != nil {
		panic(res[0].Err)
	}
	return res[0].Topic
}

func (c *memController) CreateTopics(_ context.Context, topics []controlplane.CreateTopic, validateOnly bool) []controlplane.CreateTopicResult {
	c.creates.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]controlplane.CreateTopicResult, len(topics))
	next := c.cloneLocked()
	for i, ct := range topics {
		if err := metadata.ValidateTopicName(ct.Name); err != nil {
			out[i].Err = err
			continue
		}
		if _, ok := next.Topics[ct.Name]; ok {
			out[i].Err = fmt.Errorf("%w: %s", controlplane.ErrTopicExists, ct.Name)
			continue
		}
		n := ct.NumPartitions
		if n < 0 {
			n = c.numPartitions
		}
		t := &metadata.Topic{Name: ct.Name, Configs: map[string]string{}}
		rand.Read(t.ID[:])
		for range n {
			t.Partitions = append(t.Partitions, metadata.Partition{
				Replicas: []int32{c.nodeID}, ISR: []int32{c.nodeID}, Leader: c.nodeID,
			})
		}
		out[i].Topic = t
		if !validateOnly {
			next.Topics[t.Name] = t
			next.TopicsByID[t.ID] = t
		}
	}
	next.Offset++
	c.img = next
	if c.onImage != nil {
		c.onImage(next)
	}
	return out
}

// REQUIRES: c.mu held.
func (c *memController) cloneLocked() *metadata.Image {
	next := metadata.Empty(testConfigs)
	*next = *c.img
	next.Brokers = make(map[int32]metadata.Broker)
	next.Topics = make(map[string]*metadata.Topic)
	next.TopicsByID = make(map[metadata.UUID]*metadata.Topic)
	for k, v := range c.img.Brokers {
		next.Brokers[k] = v
	}
	for k, v := range c.img.Topics {
		next.Topics[k] = v
		next.TopicsByID[v.ID] = v
	}
	return next
}

// setLeader changes a partition's leader (for NOT_LEADER tests).
func (c *memController) setLeader(topic string, p int32, leader, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneLocked()
	old := next.Topics[topic]
	t := *old
	t.Partitions = append([]metadata.Partition(nil), old.Partitions...)
	t.Partitions[p].Leader = leader
	t.Partitions[p].LeaderEpoch = epoch
	next.Topics[topic] = &t
	next.TopicsByID[t.ID] = &t
	c.img = next
}

var errMemUnsupported = errors.New("not supported by the in-memory controller")

func (c *memController) DeleteTopics(_ context.Context, names []string) []error {
	errs := make([]error, len(names))
	for i := range errs {
		errs[i] = errMemUnsupported
	}
	return errs
}

func (c *memController) DeleteTopicsByID(_ context.Context, ids []metadata.UUID) ([]string, []error) {
	errs := make([]error, len(ids))
	for i := range errs {
		errs[i] = errMemUnsupported
	}
	return make([]string, len(ids)), errs
}

func (c *memController) CreatePartitions(context.Context, string, int32, [][]int32, bool) error {
	return errMemUnsupported
}

func (c *memController) AlterConfigs(context.Context, string, []controlplane.ConfigOp, bool, bool) error {
	return errMemUnsupported
}

func (c *memController) AlterBrokerConfigs(context.Context, int32, []controlplane.ConfigOp, bool) error {
	return errMemUnsupported
}

func (c *memController) AlterClientQuotas(context.Context, []controlplane.QuotaAlteration, bool) ([]error, error) {
	return nil, errMemUnsupported
}

// memReplicas keeps each partition's batches in memory.
type memReplicas struct {
	ctrl *memController

	// appendHook, if set, runs in every append's Wait, after the append
	// itself (tests use it to block, fail or reorder acknowledgements).
	appendHook func(ctx context.Context, topic string, partition int32) error
	// startHook, if set, runs before every append writes anything.
	startHook func(topic string, partition int32)
	appends   atomic.Int32
	waiting   atomic.Int32 // fetches long-polling now
	// maxWait, if set, caps a fetch's wait (the fuzz target's requests
	// carry any MaxWait).
	maxWait time.Duration

	mu      sync.Mutex
	parts   map[memTP]*memPartition
	changed chan struct{} // closed and replaced on every append
}

type memTP struct {
	topic     string
	partition int32
}

type memPartition struct {
	batches [][]byte
	next    int64 // log end offset (= high watermark here)
}

func newMemReplicas(ctrl *memController) *memReplicas {
	return &memReplicas{ctrl: ctrl, parts: make(map[memTP]*memPartition), changed: make(chan struct{})}
}

// partitionLocked returns the partition if this node leads it in the
// image. REQUIRES: r.mu held.
func (r *memReplicas) partitionLocked(topic string, partition int32) (*memPartition, error) {
	t, ok := r.ctrl.Image().Topic(topic)
	if !ok {
		return nil, replica.ErrUnknownTopicOrPartition
	}
	mp, ok := t.Partition(partition)
	if !ok {
		return nil, replica.ErrUnknownTopicOrPartition
	}
	if mp.Leader != r.ctrl.nodeID {
		return nil, fmt.Errorf("%w: led by %d", replica.ErrNotLeader, mp.Leader)
	}
	p := r.parts[memTP{topic, partition}]
	if p == nil {
		p = &memPartition{}
		r.parts[memTP{topic, partition}] = p
	}
	return p, nil
}

// memPending is memReplicas' replica.Pending: the append is done; Wait
// runs appendHook, where tests block or fail an append's acknowledgement.
type memPending struct {
	r         *memReplicas
	topic     string
	partition int32
	res       replica.AppendResult
	records   int64
}

func (p *memPending) Records() int64 { return p.records }

func (p *memPending) Wait(ctx context.Context, _ time.Duration) (replica.AppendResult, error) {
	if p.r.appendHook != nil {
		if err := p.r.appendHook(ctx, p.topic, p.partition); err != nil {
			return replica.AppendResult{}, err
		}
	}
	return p.res, nil
}

func (r *memReplicas) StartAppend(topic string, partition int32, records []byte, acks replica.Acks) (replica.Pending, error) {
	res, written, err := r.append(topic, partition, records)
	if err != nil {
		return nil, err
	}
	return &memPending{r: r, topic: topic, partition: partition, res: res, records: written}, nil
}

// The in-memory replicas keep no producer state: transactions are tested
// against the real replica manager (newRealReplicasHarness).
var errMemNoProducers = errors.New("memReplicas: no producer state; use newRealReplicasHarness")

// The in-memory replicas keep no producer state, so nothing needs
// verifying and a verified append is a plain one.
func (r *memReplicas) TxnVerificationGuard(string, int32, int64, int16, bool) (uint64, bool, error) {
	return 0, false, nil
}

func (r *memReplicas) StartAppendVerified(topic string, partition int32, records []byte, acks replica.Acks, _ uint64) (replica.Pending, error) {
	return r.StartAppend(topic, partition, records, acks)
}

func (r *memReplicas) StartTxnMarker(string, int32, storage.TxnMarker) (replica.Pending, error) {
	return nil, errMemNoProducers
}

func (r *memReplicas) ActiveProducers(string, int32) ([]replica.ActiveProducer, error) {
	return nil, errMemNoProducers
}

func (r *memReplicas) append(topic string, partition int32, records []byte) (replica.AppendResult, int64, error) {
	r.appends.Add(1)
	if r.startHook != nil {
		r.startHook(topic, partition)
	}
	// Validate every batch before writing any.
	var batches [][]byte
	for rest := records; len(rest) > 0; {
		h, err := record.ParseHeader(rest)
		if err != nil {
			return replica.AppendResult{}, 0, refusedBatch(err)
		}
		if h.Size() > len(rest) {
			return replica.AppendResult{}, 0, fmt.Errorf("%w: truncated batch", replica.ErrInvalidRecord)
		}
		b := rest[:h.Size()]
		if _, err := record.Validate(b, record.ValidateOptions{Client: true}); err != nil {
			return replica.AppendResult{}, 0, refusedBatch(err)
		}
		batches = append(batches, b)
		rest = rest[h.Size():]
	}
	if len(batches) == 0 {
		return replica.AppendResult{}, 0, fmt.Errorf("%w: no batches", replica.ErrInvalidRecord)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.partitionLocked(topic, partition)
	if err != nil {
		return replica.AppendResult{}, 0, err
	}
	base := p.next
	for _, b := range batches {
		h, _ := record.ParseHeader(b)
		record.SetBaseOffset(b, p.next)
		// The request frame is reused after the response: keep a copy,
		// as a log keeps bytes on disk.
		p.batches = append(p.batches, append([]byte(nil), b...))
		p.next += int64(h.LastOffsetDelta) + 1
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return replica.AppendResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: 0}, p.next - base, nil
}

// refusedBatch is a batch record refuses, answered with the sentinel the
// replica manager turns it into: damaged bytes (and a codec no client
// writes) CORRUPT_MESSAGE, anything else INVALID_RECORD. The fake asks
// record nothing that could be too large.
func refusedBatch(err error) error {
	if record.IsCorruption(err) || errors.Is(err, record.ErrUnsupportedCodec) {
		return fmt.Errorf("%w: %w", replica.ErrCorruptMessage, err)
	}
	return fmt.Errorf("%w: %w", replica.ErrInvalidRecord, err)
}

func (r *memReplicas) Fetch(ctx context.Context, params replica.FetchParams, parts []replica.FetchPartition) *replica.FetchResult {
	if r.maxWait > 0 {
		params.MaxWait = min(params.MaxWait, r.maxWait)
	}
	var timer <-chan time.Time
	if params.MaxWait > 0 {
		t := time.NewTimer(params.MaxWait)
		defer t.Stop()
		timer = t.C
	}
	for {
		res, bytes, anyErr, changed := r.read(params, parts)
		if anyErr || bytes >= int(params.MinBytes) || params.MaxWait <= 0 {
			return res
		}
		r.waiting.Add(1)
		select {
		case <-changed: // an append: read again
			r.waiting.Add(-1)
		case <-timer: // MaxWait passed
			r.waiting.Add(-1)
			res, _, _, _ = r.read(params, parts)
			return res
		case <-ctx.Done(): // connection closed
			r.waiting.Add(-1)
			return res
		}
	}
}

func (r *memReplicas) read(params replica.FetchParams, parts []replica.FetchPartition) (*replica.FetchResult, int, bool, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &replica.FetchResult{Partitions: make([]replica.FetchPartitionResult, len(parts))}
	total, anyErr := 0, false
	for i, fp := range parts {
		out := &res.Partitions[i]
		p, err := r.partitionLocked(fp.Topic, fp.Partition)
		if err != nil {
			out.Err, anyErr = err, true
			continue
		}
		if fp.FetchOffset < 0 || fp.FetchOffset > p.next {
			out.Err, anyErr = replica.ErrOffsetOutOfRange, true
			continue
		}
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = p.next, p.next, 0
		for _, b := range p.batches {
			h, _ := record.ParseHeader(b)
			if h.LastOffset() < fp.FetchOffset {
				continue
			}
			if len(out.Records) > 0 && (len(out.Records)+len(b) > int(fp.MaxBytes) || total+len(b) > int(params.MaxBytes)) {
				break
			}
			out.Records = append(out.Records, b...)
			total += len(b)
		}
	}
	return res, total, anyErr, r.changed
}

func (r *memReplicas) ListOffset(topic string, partition int32, _ int32, ts int64, _ replica.Isolation) (replica.OffsetAndTimestamp, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.partitionLocked(topic, partition)
	if err != nil {
		return replica.OffsetAndTimestamp{}, err
	}
	off := p.next
	if ts == replica.TimestampEarliest {
		off = 0
	}
	return replica.OffsetAndTimestamp{Offset: off, Timestamp: -1, LeaderEpoch: 0}, nil
}

func (r *memReplicas) DescribePositions(string, int32, []int64) (replica.Positions, error) {
	return replica.Positions{}, errMemUnsupported
}

func (r *memReplicas) EndOffsetForEpoch(topic string, partition int32, _, _ int32) (int32, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.partitionLocked(topic, partition)
	if err != nil {
		return -1, -1, err
	}
	return 0, p.next, nil
}

func (r *memReplicas) LogEnd(topic string, partition int32) (int32, int64, error) {
	return r.EndOffsetForEpoch(topic, partition, -1, 0)
}

func (r *memReplicas) DeleteRecords(context.Context, string, int32, int64, time.Duration) (int64, error) {
	return -1, errMemUnsupported
}

func (r *memReplicas) LogDirs() (string, int64, int64, []replica.LogDirInfo) {
	return "/mem", 0, 0, nil
}

// memPIDs counts producer ids up from 1000.
type memPIDs struct{ next atomic.Int64 }

func (p *memPIDs) InitProducerID(context.Context) (int64, int16, error) {
	return 1000 + p.next.Add(1), 0, nil
}

// Compile-time checks that the fakes satisfy the contracts.
var (
	_ Controller  = (*memController)(nil)
	_ Replicas    = (*memReplicas)(nil)
	_ ProducerIDs = (*memPIDs)(nil)
)

// AllocateProducerIDs is part of the control plane's Client, which the
// listener takes whole; the listener itself never calls it (InitProducerId
// goes through txn.ProducerIDManager), so the fake refuses.
func (c *memController) AllocateProducerIDs(context.Context, int32) (int64, int64, error) {
	return 0, 0, fmt.Errorf("%w: the listener's tests allocate no producer ids", controlplane.ErrInvalidRequest)
}

// BrokerHeartbeat: the fake has no sessions.
func (c *memController) BrokerHeartbeat(context.Context, controlplane.Heartbeat) (controlplane.HeartbeatAnswer, error) {
	return controlplane.HeartbeatAnswer{}, fmt.Errorf("%w: the listener's tests have no sessions", controlplane.ErrInvalidRequest)
}

// ElectLeaders: the fake has one replica per partition, always its leader.
func (c *memController) ElectLeaders(context.Context, controlplane.ElectLeaders) ([]controlplane.ElectionResult, error) {
	return nil, fmt.Errorf("%w: the listener's tests elect no leaders", controlplane.ErrInvalidRequest)
}

// AlterPartitionReassignments: the fake's partitions have one replica
// and stay where they are.
func (c *memController) AlterPartitionReassignments(context.Context, []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	return nil, fmt.Errorf("%w: the listener's tests reassign no partitions", controlplane.ErrInvalidRequest)
}

// MarkTopicKeyed: the fake's topics are never marked (the admin fake's
// are: admin_fakes_test.go).
func (c *memController) MarkTopicKeyed(context.Context, metadata.UUID) error {
	return fmt.Errorf("%w: the listener's data tests mark no topics", controlplane.ErrInvalidRequest)
}

// ReportOfflineReplicas: the fake's replicas never fail.
func (c *memController) ReportOfflineReplicas(context.Context, int32, int64, []metadata.TopicIDPartition) error {
	return fmt.Errorf("%w: the listener's data tests report no offline replicas", controlplane.ErrInvalidRequest)
}

// QuorumState: node 1 alone leads, in epoch 1.
func (c *memController) QuorumState() controlplane.QuorumState {
	return controlplane.QuorumState{Leader: 1, Epoch: 1, HighWatermark: 1, Voters: []controlplane.VoterState{{NodeID: 1, LogEndOffset: 1}}}
}

// Voters: the fake is a quorum of node 1 alone.
func (c *memController) Voters() []int32 { return []int32{1} }

// AddVoter and RemoveVoter: the fake's quorum does not change.
func (c *memController) AddVoter(context.Context, int32, string) error {
	return fmt.Errorf("%w: the listener's tests change no quorum", controlplane.ErrInvalidRequest)
}

func (c *memController) RemoveVoter(context.Context, int32) error {
	return fmt.Errorf("%w: the listener's tests change no quorum", controlplane.ErrInvalidRequest)
}

func (c *memController) UnregisterBroker(_ context.Context, id int32) error {
	return fmt.Errorf("%w: broker %d: the listener's tests unregister no broker", controlplane.ErrBrokerNotRegistered, id)
}

// RegisterBroker, like AllocateProducerIDs, is the control plane's, not
// the listener's: the fake refuses.
func (c *memController) RegisterBroker(context.Context, metadata.BrokerRecord) (int64, error) {
	return -1, fmt.Errorf("%w: the listener's tests register no brokers", controlplane.ErrInvalidRequest)
}

// AlterPartition answers with the test's alterPartition, and refuses
// without one.
func (c *memController) AlterPartition(ctx context.Context, req controlplane.AlterPartition) (controlplane.PartitionState, error) {
	if c.alterPartition != nil {
		return c.alterPartition(ctx, req)
	}
	return controlplane.PartitionState{}, fmt.Errorf("%w: this test alters no ISR", controlplane.ErrInvalidRequest)
}
