package kafkaserver

// In-memory fakes of the services, for the admin handlers' unit tests:
// they keep just enough state to answer as the real controller and
// replica manager do (topics in an image, configs validated with the real
// metadata rules, per-partition offsets and leader epochs), record what
// they were asked, and fail on demand. The real node, with the real
// services, is tested end to end elsewhere; these tests pin what the
// handlers themselves decide: validation order, per-version fields, error
// codes and messages.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

const adminTestNodeID = 1

// adminFakeController keeps an image and changes it as the controller
// would, copy-on-write, so an image a handler holds never changes under
// it.
type adminFakeController struct {
	mu           sync.Mutex
	img          *metadata.Image
	controllerID int32
	nextID       byte
	// fail, when set, is returned by every change instead of doing it.
	fail error
	// blockUntilDone makes every change wait for its context to end, as
	// a commit that never arrives; it then returns ctx.Err().
	blockUntilDone bool
	// calls records the changes asked for, by method name.
	calls []string
	// elections records the ElectLeaders requests.
	elections []controlplane.ElectLeaders
	// reassignments records the AlterPartitionReassignments requests.
	reassignments [][]controlplane.Reassignment
	// offlineReports records the ReportOfflineReplicas calls.
	offlineReports []offlineReport
}

// offlineReport is one ReportOfflineReplicas call's arguments.
type offlineReport struct {
	broker     int32
	epoch      int64
	partitions []metadata.TopicIDPartition
}

func newAdminFakeController() *adminFakeController {
	img := metadata.Empty(testConfigs)
	img.ClusterID = "fjord-test-cluster"
	img.Brokers[adminTestNodeID] = metadata.Broker{NodeID: adminTestNodeID, Host: "127.0.0.1", Port: 9092}
	return &adminFakeController{img: img, controllerID: adminTestNodeID}
}

func (c *adminFakeController) Image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}

func (c *adminFakeController) ControllerID() int32 { return c.controllerID }

// begin records a call and says whether (and with what) it fails before
// doing anything.
func (c *adminFakeController) begin(ctx context.Context, name string) error {
	c.mu.Lock()
	c.calls = append(c.calls, name)
	fail, block := c.fail, c.blockUntilDone
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (c *adminFakeController) callLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// cloneImageLocked returns a copy of the image whose maps may be changed.
// REQUIRES: c.mu held.
func (c *adminFakeController) cloneImageLocked() *metadata.Image {
	next := *c.img
	next.Offset++
	next.Brokers = maps.Clone(c.img.Brokers)
	next.Topics = maps.Clone(c.img.Topics)
	next.TopicsByID = maps.Clone(c.img.TopicsByID)
	return &next
}

// addTopic puts a topic straight into the image (test setup).
func (c *adminFakeController) addTopic(name string, parts []metadata.Partition, configs map[string]string) *metadata.Topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	t := &metadata.Topic{Name: name, ID: metadata.UUID{0xf0, c.nextID}, Partitions: parts, Configs: configs}
	next := c.cloneImageLocked()
	next.Topics[name] = t
	next.TopicsByID[t.ID] = t
	c.img = next
	return t
}

func (c *adminFakeController) CreateTopics(ctx context.Context, topics []controlplane.CreateTopic, validateOnly bool) []controlplane.CreateTopicResult {
	out := make([]controlplane.CreateTopicResult, len(topics))
	if err := c.begin(ctx, "CreateTopics"); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneImageLocked()
	for i, ct := range topics {
		t, err := c.newTopicLocked(next, ct)
		out[i] = controlplane.CreateTopicResult{Err: err, Topic: t}
		if err == nil && !validateOnly {
			next.Topics[t.Name] = t
			next.TopicsByID[t.ID] = t
		}
	}
	c.img = next
	return out
}

// REQUIRES: c.mu held.
func (c *adminFakeController) newTopicLocked(img *metadata.Image, ct controlplane.CreateTopic) (*metadata.Topic, error) {
	if err := metadata.ValidateTopicName(ct.Name); err != nil {
		return nil, err
	}
	if _, ok := img.Topics[ct.Name]; ok {
		return nil, fmt.Errorf("%w: topic %q", controlplane.ErrTopicExists, ct.Name)
	}
	for k, v := range ct.Configs {
		if err := testImage.ValidateTopicConfig(k, v); err != nil {
			return nil, err
		}
	}
	assign := ct.Assignments
	if assign == nil {
		n, rf := ct.NumPartitions, ct.ReplicationFactor
		if n == -1 {
			n = 1
		}
		if rf == -1 {
			rf = 1
		}
		if int(rf) > len(img.Brokers) {
			return nil, fmt.Errorf("%w: %d replicas, %d brokers", controlplane.ErrInvalidReplicationFactor, rf, len(img.Brokers))
		}
		for range n {
			assign = append(assign, []int32{adminTestNodeID})
		}
	}
	c.nextID++
	t := &metadata.Topic{Name: ct.Name, ID: metadata.UUID{0xc0, c.nextID}, Configs: maps.Clone(ct.Configs)}
	for _, replicas := range assign {
		t.Partitions = append(t.Partitions, metadata.Partition{Replicas: replicas, ISR: replicas, Leader: replicas[0]})
	}
	return t, nil
}

func (c *adminFakeController) DeleteTopics(ctx context.Context, names []string) []error {
	errs := make([]error, len(names))
	if err := c.begin(ctx, "DeleteTopics"); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneImageLocked()
	for i, n := range names {
		t, ok := next.Topics[n]
		if !ok {
			errs[i] = fmt.Errorf("%w: %q", controlplane.ErrUnknownTopic, n)
			continue
		}
		delete(next.Topics, n)
		delete(next.TopicsByID, t.ID)
	}
	c.img = next
	return errs
}

func (c *adminFakeController) DeleteTopicsByID(ctx context.Context, ids []metadata.UUID) ([]string, []error) {
	names, errs := make([]string, len(ids)), make([]error, len(ids))
	if err := c.begin(ctx, "DeleteTopicsByID"); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return names, errs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneImageLocked()
	for i, id := range ids {
		t, ok := next.TopicsByID[id]
		if !ok {
			errs[i] = fmt.Errorf("%w: %s", controlplane.ErrUnknownTopicID, id)
			continue
		}
		names[i] = t.Name
		delete(next.Topics, t.Name)
		delete(next.TopicsByID, id)
	}
	c.img = next
	return names, errs
}

func (c *adminFakeController) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	if err := c.begin(ctx, "CreatePartitions"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.img.Topics[topic]
	if !ok {
		return fmt.Errorf("%w: %q", controlplane.ErrUnknownTopic, topic)
	}
	if int(count) <= len(t.Partitions) {
		return fmt.Errorf("%w: %d <= %d", controlplane.ErrInvalidPartitions, count, len(t.Partitions))
	}
	grown := *t
	grown.Partitions = slices.Clone(t.Partitions)
	for p := int32(len(t.Partitions)); p < count; p++ {
		replicas := []int32{adminTestNodeID}
		if assignments != nil {
			replicas = assignments[int(p)-len(t.Partitions)]
		}
		for _, r := range replicas {
			if _, ok := c.img.Brokers[r]; !ok {
				return fmt.Errorf("%w: no broker %d", controlplane.ErrInvalidReplicaAssignment, r)
			}
		}
		grown.Partitions = append(grown.Partitions, metadata.Partition{Replicas: replicas, ISR: replicas, Leader: replicas[0]})
	}
	if validateOnly {
		return nil
	}
	next := c.cloneImageLocked()
	next.Topics[topic] = &grown
	next.TopicsByID[grown.ID] = &grown
	c.img = next
	return nil
}

// AlterClientQuotas applies what the handler checked (the real rules
// are the controller's planClientQuota, tested there).
func (c *adminFakeController) AlterClientQuotas(ctx context.Context, alts []controlplane.QuotaAlteration, validateOnly bool) ([]error, error) {
	if err := c.begin(ctx, "AlterClientQuotas"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := make([]error, len(alts))
	if validateOnly {
		return errs, nil
	}
	next := *c.img
	next.ClientQuotas = maps.Clone(next.ClientQuotas)
	if next.ClientQuotas == nil {
		next.ClientQuotas = map[metadata.QuotaEntity]map[string]float64{}
	}
	for _, alt := range alts {
		q := maps.Clone(next.ClientQuotas[alt.Entity])
		if q == nil {
			q = map[string]float64{}
		}
		for _, op := range alt.Ops {
			if op.Remove {
				delete(q, op.Key)
			} else {
				q[op.Key] = op.Value
			}
		}
		if len(q) == 0 {
			delete(next.ClientQuotas, alt.Entity)
		} else {
			next.ClientQuotas[alt.Entity] = q
		}
	}
	c.img = &next
	return errs, nil
}

// AlterBrokerConfigs applies what the handler checked (the real rules
// are the controller's planBrokerConfigs, tested there).
func (c *adminFakeController) AlterBrokerConfigs(ctx context.Context, broker int32, ops []controlplane.ConfigOp, validateOnly bool) error {
	if err := c.begin(ctx, "AlterBrokerConfigs"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if validateOnly {
		return nil
	}
	next := *c.img
	next.BrokerConfigs = maps.Clone(next.BrokerConfigs)
	if next.BrokerConfigs == nil {
		next.BrokerConfigs = map[int32]map[string]string{}
	}
	cfg := maps.Clone(next.BrokerConfigs[broker])
	if cfg == nil {
		cfg = map[string]string{}
	}
	for _, op := range ops {
		if op.Op == controlplane.ConfigSet {
			cfg[op.Name] = *op.Value
		} else {
			delete(cfg, op.Name)
		}
	}
	next.BrokerConfigs[broker] = cfg
	c.img = &next
	return nil
}

func (c *adminFakeController) AlterConfigs(ctx context.Context, topic string, ops []controlplane.ConfigOp, replaceAll, validateOnly bool) error {
	if err := c.begin(ctx, "AlterConfigs"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.img.Topics[topic]
	if !ok {
		return fmt.Errorf("%w: %q", controlplane.ErrUnknownTopic, topic)
	}
	configs := maps.Clone(t.Configs)
	if replaceAll || configs == nil {
		configs = map[string]string{}
	}
	for _, op := range ops {
		switch op.Op {
		case controlplane.ConfigSet:
			configs[op.Name] = *op.Value
		case controlplane.ConfigDelete:
			delete(configs, op.Name)
		case controlplane.ConfigAppend:
			list := metadata.SplitList(testImage.TopicConfig(t, op.Name))
			for _, v := range metadata.SplitList(*op.Value) {
				if !slices.Contains(list, v) {
					list = append(list, v)
				}
			}
			configs[op.Name] = strings.Join(list, ",")
		case controlplane.ConfigSubtract:
			list := slices.DeleteFunc(metadata.SplitList(testImage.TopicConfig(t, op.Name)), func(v string) bool {
				return slices.Contains(metadata.SplitList(*op.Value), v)
			})
			configs[op.Name] = strings.Join(list, ",")
		}
	}
	for k, v := range configs {
		if err := testImage.ValidateTopicConfig(k, v); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	changed := *t
	changed.Configs = configs
	next := c.cloneImageLocked()
	next.Topics[topic] = &changed
	next.TopicsByID[changed.ID] = &changed
	c.img = next
	return nil
}

// adminFakeLog is one partition's offsets as the replica manager sees
// them.
type adminFakeLog struct {
	logStart, hw, leo, lso int64
	// records: one per offset from logStart, with its timestamp and
	// the leader epoch it was written in.
	records []adminFakeRecord
	// epochs: (epoch, start offset), ascending, as the leader-epoch cache.
	epochs [][2]int64
}

type adminFakeRecord struct {
	offset, timestamp int64
	epoch             int32
}

type adminTP struct {
	topic     string
	partition int32
}

// adminListOffsetCall is what ListOffset was asked.
type adminListOffsetCall struct {
	tp           adminTP
	currentEpoch int32
	timestamp    int64
	isolation    replica.Isolation
}

type adminFakeReplicas struct {
	mu     sync.Mutex
	logs   map[adminTP]*adminFakeLog
	dir    string
	total  int64
	usable int64
	infos  []replica.LogDirInfo
	// listCalls records ListOffset's arguments.
	listCalls []adminListOffsetCall
	// deleteTimeouts records the timeout each DeleteRecords was given.
	deleteTimeouts []time.Duration
	// logDirsCalls counts LogDirs calls.
	logDirsCalls int
}

func newAdminFakeReplicas() *adminFakeReplicas {
	return &adminFakeReplicas{logs: map[adminTP]*adminFakeLog{}, dir: "/data/fjord", total: 1 << 40, usable: 1 << 39}
}

func (r *adminFakeReplicas) setLog(topic string, partition int32, l *adminFakeLog) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs[adminTP{topic, partition}] = l
}

func (r *adminFakeReplicas) log(topic string, partition int32) (*adminFakeLog, error) {
	l, ok := r.logs[adminTP{topic, partition}]
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d", replica.ErrUnknownTopicOrPartition, topic, partition)
	}
	return l, nil
}

func (r *adminFakeReplicas) StartAppend(string, int32, []byte, replica.Acks) (replica.Pending, error) {
	return nil, errors.New("adminFakeReplicas: the data path is not part of the admin tests")
}

func (r *adminFakeReplicas) TxnVerificationGuard(string, int32, int64, int16, bool) (uint64, bool, error) {
	return 0, false, errMemNoProducers
}

func (r *adminFakeReplicas) StartAppendVerified(string, int32, []byte, replica.Acks, uint64) (replica.Pending, error) {
	return nil, errors.New("adminFakeReplicas: the data path is not part of the admin tests")
}

func (r *adminFakeReplicas) StartTxnMarker(string, int32, storage.TxnMarker) (replica.Pending, error) {
	return nil, errMemNoProducers
}

func (r *adminFakeReplicas) ActiveProducers(string, int32) ([]replica.ActiveProducer, error) {
	return nil, errMemNoProducers
}

func (r *adminFakeReplicas) Fetch(_ context.Context, _ replica.FetchParams, parts []replica.FetchPartition) *replica.FetchResult {
	res := &replica.FetchResult{Partitions: make([]replica.FetchPartitionResult, len(parts))}
	for i := range res.Partitions {
		res.Partitions[i].Err = errors.New("adminFakeReplicas: the data path is not part of the admin tests")
	}
	return res
}

func (r *adminFakeReplicas) DescribePositions(string, int32, []int64) (replica.Positions, error) {
	return replica.Positions{}, errors.New("adminFakeReplicas: positions are tested against the real replica manager")
}

func (r *adminFakeReplicas) ListOffset(topic string, partition int32, currentLeaderEpoch int32, timestamp int64, isolation replica.Isolation) (replica.OffsetAndTimestamp, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listCalls = append(r.listCalls, adminListOffsetCall{adminTP{topic, partition}, currentLeaderEpoch, timestamp, isolation})
	l, err := r.log(topic, partition)
	if err != nil {
		return replica.OffsetAndTimestamp{}, err
	}
	epochAt := func(off int64) int32 {
		e := int32(-1)
		for _, ep := range l.epochs {
			if ep[1] <= off {
				e = int32(ep[0])
			}
		}
		return e
	}
	switch timestamp {
	case replica.TimestampEarliest:
		return replica.OffsetAndTimestamp{Offset: l.logStart, Timestamp: -1, LeaderEpoch: epochAt(l.logStart)}, nil
	case replica.TimestampLatest:
		end := l.hw
		switch isolation {
		case replica.IsolationTxnCommitted:
			end = l.lso
		case replica.IsolationLogEnd:
			end = l.leo
		}
		return replica.OffsetAndTimestamp{Offset: end, Timestamp: -1, LeaderEpoch: epochAt(end - 1)}, nil
	case replica.TimestampMaxTimestamp:
		best := replica.OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
		for _, rec := range l.records {
			if rec.offset < l.hw && rec.timestamp > best.Timestamp {
				best = replica.OffsetAndTimestamp{Offset: rec.offset, Timestamp: rec.timestamp, LeaderEpoch: rec.epoch}
			}
		}
		return best, nil
	}
	for _, rec := range l.records {
		if rec.offset >= l.logStart && rec.offset < l.hw && rec.timestamp >= timestamp {
			return replica.OffsetAndTimestamp{Offset: rec.offset, Timestamp: rec.timestamp, LeaderEpoch: rec.epoch}, nil
		}
	}
	return replica.OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, nil
}

// EndOffsetForEpoch answers as storage's leader-epoch cache does (Kafka's
// rules): latest epoch -> log end; between epochs -> the floor epoch and
// the next epoch's start; older than all -> itself and the first start;
// newer than all -> -1, -1.
func (r *adminFakeReplicas) LogEnd(topic string, partition int32) (int32, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.log(topic, partition)
	if err != nil {
		return -1, -1, err
	}
	if len(l.epochs) == 0 {
		return -1, l.leo, nil
	}
	return int32(l.epochs[len(l.epochs)-1][0]), l.leo, nil
}

func (r *adminFakeReplicas) EndOffsetForEpoch(topic string, partition int32, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.log(topic, partition)
	if err != nil {
		return -1, -1, err
	}
	n := len(l.epochs)
	if n > 0 && int32(l.epochs[n-1][0]) == epoch {
		return epoch, l.leo, nil
	}
	next := 0
	for next < n && int32(l.epochs[next][0]) <= epoch {
		next++
	}
	switch {
	case next == n:
		return -1, -1, nil
	case next == 0:
		return epoch, l.epochs[0][1], nil
	default:
		return int32(l.epochs[next-1][0]), l.epochs[next][1], nil
	}
}

func (r *adminFakeReplicas) DeleteRecords(_ context.Context, topic string, partition int32, offset int64, timeout time.Duration) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleteTimeouts = append(r.deleteTimeouts, timeout)
	l, err := r.log(topic, partition)
	if err != nil {
		return -1, err
	}
	if offset == -1 {
		offset = l.hw
	}
	if offset > l.hw {
		return -1, fmt.Errorf("%w: delete below %d, high watermark %d", replica.ErrOffsetOutOfRange, offset, l.hw)
	}
	l.logStart = max(l.logStart, offset)
	return l.logStart, nil
}

func (r *adminFakeReplicas) LogDirs() (string, int64, int64, []replica.LogDirInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logDirsCalls++
	return r.dir, r.total, r.usable, slices.Clone(r.infos)
}

// adminFakeProducerIDs counts up from next.
type adminFakeProducerIDs struct {
	mu    sync.Mutex
	next  int64
	fail  error
	calls int
}

func (p *adminFakeProducerIDs) InitProducerID(context.Context) (int64, int16, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fail != nil {
		return -1, -1, p.fail
	}
	id := p.next
	p.next++
	return id, 0, nil
}

// adminFixture is a Server over fresh fakes.
type adminFixture struct {
	s    *Server
	ctrl *adminFakeController
	reps *adminFakeReplicas
	pids *adminFakeProducerIDs
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	f := &adminFixture{
		ctrl: newAdminFakeController(),
		reps: newAdminFakeReplicas(),
		pids: &adminFakeProducerIDs{next: 1000},
	}
	f.s = New(Config{NodeID: adminTestNodeID, AutoCreateTopics: true, TopicConfigs: testConfigs}, f.ctrl, f.reps, f.pids, nil)
	t.Cleanup(func() { f.s.Close() })
	return f
}

// adminHandler returns the registered admin API for key.
func adminHandler(t *testing.T, key int16) api {
	t.Helper()
	for _, a := range adminAPIs {
		if a.key == key {
			return a
		}
	}
	t.Fatalf("no admin API registered for key %d (%s)", key, kmsg.NameForKey(key))
	return api{}
}

// adminCall runs body's handler at version and returns the response as a
// client would read it: encoded at that version and decoded again, so
// fields the version does not carry are gone, as on the wire.
func adminCall[R kmsg.Response](t *testing.T, f *adminFixture, body kmsg.Request, version int16) R {
	t.Helper()
	return adminCallCtx[R](t, context.Background(), f, body, version)
}

func adminCallCtx[R kmsg.Response](t *testing.T, ctx context.Context, f *adminFixture, body kmsg.Request, version int16) R {
	t.Helper()
	body.SetVersion(version)
	a := adminHandler(t, body.Key())
	resp, release, err := a.handle(ctx, f.s, &request{key: body.Key(), version: version, body: body})
	if err != nil {
		t.Fatalf("%s v%d: handler error %v", kmsg.NameForKey(body.Key()), version, err)
	}
	if release != nil {
		release()
	}
	if resp == nil {
		t.Fatalf("%s v%d: no response", kmsg.NameForKey(body.Key()), version)
	}
	resp.SetVersion(version)
	wire := resp.AppendTo(nil)
	decoded := body.ResponseKind()
	decoded.SetVersion(version)
	if err := decoded.ReadFrom(wire); err != nil {
		t.Fatalf("%s v%d: response does not decode: %v", kmsg.NameForKey(body.Key()), version, err)
	}
	out, ok := decoded.(R)
	if !ok {
		t.Fatalf("%s v%d: response is %T", kmsg.NameForKey(body.Key()), version, decoded)
	}
	return out
}

// adminWantCode fails unless code is want's.
func adminWantCode(t *testing.T, what string, code int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if code != wantCode {
		t.Fatalf("%s: error code %d (%v), want %d (%v)", what, code, kerr.ErrorForCode(code), wantCode, want)
	}
}

// adminLeaderPartitions is a partition this node leads at epoch.
func adminLeaderPartitions(epoch int32) []metadata.Partition {
	return []metadata.Partition{{Replicas: []int32{adminTestNodeID}, ISR: []int32{adminTestNodeID}, Leader: adminTestNodeID, LeaderEpoch: epoch}}
}

// adminMsg prints a nullable error message for a failure report.
func adminMsg(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.Quote(*p)
}

// AllocateProducerIDs is part of the control plane's Client, which the
// listener takes whole; the listener itself never calls it (InitProducerId
// goes through txn.ProducerIDManager), so the fake refuses.
func (c *adminFakeController) AllocateProducerIDs(context.Context, int32) (int64, int64, error) {
	return 0, 0, fmt.Errorf("%w: the listener's tests allocate no producer ids", controlplane.ErrInvalidRequest)
}

// BrokerHeartbeat: the fake has no sessions.
func (c *adminFakeController) BrokerHeartbeat(context.Context, controlplane.Heartbeat) (controlplane.HeartbeatAnswer, error) {
	return controlplane.HeartbeatAnswer{}, fmt.Errorf("%w: the listener's tests have no sessions", controlplane.ErrInvalidRequest)
}

// MarkTopicKeyed marks the topic in the image as the controller does:
// the zero id INVALID_REQUEST, an unknown one UNKNOWN_TOPIC_ID, a marked
// topic left as it is.
func (c *adminFakeController) MarkTopicKeyed(ctx context.Context, id metadata.UUID) error {
	if err := c.begin(ctx, "MarkTopicKeyed"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.img.TopicsByID[id]
	switch {
	case id.IsZero():
		return fmt.Errorf("%w: zero topic id", controlplane.ErrInvalidRequest)
	case !ok:
		return fmt.Errorf("%w: no topic with id %s", controlplane.ErrUnknownTopicID, id)
	case t.Keyed:
		return nil
	}
	marked := *t
	marked.Keyed = true
	next := c.cloneImageLocked()
	next.Topics[marked.Name] = &marked
	next.TopicsByID[id] = &marked
	c.img = next
	return nil
}

// ReportOfflineReplicas records the report; the controller's own
// checks and plan are controller/offline_test.go's.
func (c *adminFakeController) ReportOfflineReplicas(ctx context.Context, broker int32, epoch int64, partitions []metadata.TopicIDPartition) error {
	if err := c.begin(ctx, "ReportOfflineReplicas"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offlineReports = append(c.offlineReports, offlineReport{broker: broker, epoch: epoch, partitions: partitions})
	return nil
}

// QuorumState: node 1 alone leads, in epoch 1.
func (c *adminFakeController) QuorumState() controlplane.QuorumState {
	return controlplane.QuorumState{Leader: 1, Epoch: 1, HighWatermark: 1, Voters: []controlplane.VoterState{{NodeID: 1, LogEndOffset: 1}}}
}

// Voters: the fake is a quorum of node 1 alone.
func (c *adminFakeController) Voters() []int32 { return []int32{1} }

// AddVoter and RemoveVoter: the fake's quorum does not change.
func (c *adminFakeController) AddVoter(context.Context, int32, string) error {
	return fmt.Errorf("%w: the listener's tests change no quorum", controlplane.ErrInvalidRequest)
}

func (c *adminFakeController) RemoveVoter(context.Context, int32) error {
	return fmt.Errorf("%w: the listener's tests change no quorum", controlplane.ErrInvalidRequest)
}

func (c *adminFakeController) UnregisterBroker(_ context.Context, id int32) error {
	return fmt.Errorf("%w: broker %d: the listener's tests unregister no broker", controlplane.ErrBrokerNotRegistered, id)
}

// RegisterBroker, like AllocateProducerIDs, is the control plane's, not
// the listener's: the fake refuses.
func (c *adminFakeController) RegisterBroker(context.Context, metadata.BrokerRecord) (int64, error) {
	return -1, fmt.Errorf("%w: the listener's tests register no brokers", controlplane.ErrInvalidRequest)
}

// AlterPartition is another node's leader's, which the admin tests are
// not: the fake refuses.
func (c *adminFakeController) AlterPartition(context.Context, controlplane.AlterPartition) (controlplane.PartitionState, error) {
	return controlplane.PartitionState{}, fmt.Errorf("%w: the admin tests alter no ISR", controlplane.ErrInvalidRequest)
}

// ElectLeaders records the request (elections) and answers every named
// partition ELECTION_NOT_NEEDED, or, for every partition (nil), names
// none: the elections themselves are the controller's, tested there
// and in the cluster tests.
func (c *adminFakeController) ElectLeaders(ctx context.Context, req controlplane.ElectLeaders) ([]controlplane.ElectionResult, error) {
	if err := c.begin(ctx, "ElectLeaders"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.elections = append(c.elections, req)
	c.mu.Unlock()
	var out []controlplane.ElectionResult
	seen := map[controlplane.TopicPartition]bool{}
	for _, tp := range req.Partitions {
		if !seen[tp] {
			seen[tp] = true
			out = append(out, controlplane.ElectionResult{TopicPartition: tp, Err: fmt.Errorf("%w: fake", controlplane.ErrElectionNotNeeded)})
		}
	}
	return out, nil
}

// AlterPartitionReassignments records the request (reassignments) and
// does what the controller's first step does, in the image: a target
// that only reorders the replicas takes effect at once; any other
// widens the replicas to the target's followed by the removed ones and
// marks the adding and removing ones, and stays in progress (the fake
// has no followers to catch up); a new target for a partition being
// reassigned starts again from its original replicas; a cancel goes
// back to them, or is NO_REASSIGNMENT_IN_PROGRESS. It checks what the
// controller checks again (the topic, the partition, a partition named
// twice), not the target, which the handler has checked: the tests
// that send a bad one check it was not asked.
func (c *adminFakeController) AlterPartitionReassignments(ctx context.Context, reqs []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	if err := c.begin(ctx, "AlterPartitionReassignments"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reassignments = append(c.reassignments, slices.Clone(reqs))
	next := c.cloneImageLocked()
	out := make([]controlplane.ReassignmentResult, len(reqs))
	seen := map[controlplane.TopicPartition]bool{}
	for i, r := range reqs {
		out[i].TopicPartition = r.TopicPartition
		t, ok := next.Topics[r.Topic]
		switch {
		case seen[r.TopicPartition]:
			out[i].Err = fmt.Errorf("%w: fake: %s-%d named twice", controlplane.ErrInvalidRequest, r.Topic, r.Partition)
			continue
		case !ok || r.Partition < 0 || int(r.Partition) >= len(t.Partitions):
			out[i].Err = fmt.Errorf("%w: fake: no %s-%d", controlplane.ErrUnknownTopic, r.Topic, r.Partition)
			continue
		}
		seen[r.TopicPartition] = true
		p := t.Partitions[r.Partition]
		if r.Replicas == nil && !p.Reassigning() {
			out[i].Err = fmt.Errorf("%w: fake: %s-%d", controlplane.ErrNoReassignmentInProgress, r.Topic, r.Partition)
			continue
		}
		nt := *t
		nt.Partitions = slices.Clone(t.Partitions)
		np := &nt.Partitions[r.Partition]
		orig := p.Original()
		np.Replicas, np.Adding, np.Removing = orig, nil, nil
		if r.Replicas != nil {
			reassignInFake(np, orig, r.Replicas)
		}
		np.PartitionEpoch++
		next.Topics[nt.Name] = &nt
		next.TopicsByID[nt.ID] = &nt
	}
	next.Reassignments = 0
	for _, t := range next.Topics {
		for _, p := range t.Partitions {
			if p.Reassigning() {
				next.Reassignments++
			}
		}
	}
	c.img = next
	return out, nil
}

// reassignInFake starts moving p from orig to target, in Kafka's shape.
func reassignInFake(p *metadata.Partition, orig, target []int32) {
	replicas := slices.Clone(target)
	for _, b := range orig {
		if !slices.Contains(target, b) {
			p.Removing = append(p.Removing, b)
			replicas = append(replicas, b)
		}
	}
	for _, b := range target {
		if !slices.Contains(orig, b) {
			p.Adding = append(p.Adding, b)
		}
	}
	p.Replicas = replicas
}
