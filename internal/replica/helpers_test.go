package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testNode int32 = 1

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testEnv is a replica manager over a real storage.Manager on real files.
type testEnv struct {
	t       testing.TB
	dir     string
	storage *storage.Manager
	m       *Manager
	topics  map[string]*metadata.Topic
	img     *metadata.Image
}

// newEnv opens a storage manager in a fresh temporary directory (or dir,
// to reopen one) and a replica manager over it; both close at cleanup.
func newEnv(t testing.TB, dir string) *testEnv {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	sm, err := storage.OpenManager(vfs.OS(), dir, storage.DefaultConfig(), storage.ManagerOptions{
		NoBackground: true,
		Logger:       quietLogger,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, storage: sm, topics: map[string]*metadata.Topic{}}
	e.m = NewManager(Options{
		NodeID:   testNode,
		Storage:  sm,
		Defaults: storage.DefaultConfig(),
		Logger:   quietLogger,
		DataDir:  dir,
	})
	t.Cleanup(func() { e.close() })
	return e
}

func (e *testEnv) close() {
	if err := e.m.Close(); err != nil {
		e.t.Error(err)
	}
	if err := e.storage.Close(); err != nil {
		e.t.Error(err)
	}
}

// topicID returns a fixed id for a test: n in the first byte.
func topicID(n byte) metadata.UUID { return metadata.UUID{n, 0xf1, 0x0d} }

// newTopic makes a topic of n partitions led by this node, with ISR and
// replicas [testNode] and epoch 0.
func newTopic(name string, id byte, n int, configs map[string]string) *metadata.Topic {
	t := &metadata.Topic{Name: name, ID: topicID(id), Configs: configs}
	for range n {
		t.Partitions = append(t.Partitions, metadata.Partition{
			Replicas: []int32{testNode}, ISR: []int32{testNode}, Leader: testNode, LeaderEpoch: 0,
		})
	}
	return t
}

// put replaces or adds topics in the image and applies it, copy-on-write
// as metadata.Image is: untouched topics keep their pointers.
func (e *testEnv) put(topics ...*metadata.Topic) {
	e.t.Helper()
	for _, t := range topics {
		e.topics[t.Name] = t
	}
	e.apply()
}

func (e *testEnv) remove(names ...string) {
	for _, n := range names {
		delete(e.topics, n)
	}
	e.apply()
}

func (e *testEnv) apply() {
	img := &metadata.Image{
		ClusterID:  "test-cluster",
		Topics:     map[string]*metadata.Topic{},
		TopicsByID: map[metadata.UUID]*metadata.Topic{},
	}
	if e.img != nil {
		img.Offset = e.img.Offset + 1
	}
	for n, t := range e.topics {
		img.Topics[n] = t
		img.TopicsByID[t.ID] = t
	}
	e.img = img
	e.m.ApplyImage(img)
}

// withPartition returns a copy of topic with partition i changed by fn.
func withPartition(t *metadata.Topic, i int, fn func(p *metadata.Partition)) *metadata.Topic {
	c := *t
	c.Partitions = append([]metadata.Partition(nil), t.Partitions...)
	fn(&c.Partitions[i])
	return &c
}

func withConfigs(t *metadata.Topic, configs map[string]string) *metadata.Topic {
	c := *t
	c.Configs = configs
	return &c
}

func (e *testEnv) log(topic string, partition int32) *storage.Log {
	e.t.Helper()
	l, ok := e.storage.Log(storage.TopicPartition{Topic: topic, Partition: partition})
	if !ok {
		e.t.Fatalf("no log for %s-%d", topic, partition)
	}
	return l
}

func (e *testEnv) logDir(topic string, partition int32) string {
	return filepath.Join(e.dir, fmt.Sprintf("%s-%d", topic, partition))
}

// batch builds a client batch of n records with values "<prefix>-<i>",
// each valueSize bytes at least, timestamped ts.
func batch(t testing.TB, prefix string, n int, ts int64) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		b.Add(nil, fmt.Appendf(nil, "%s-%d", prefix, i), nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bigBatch builds one batch of n records with size-byte values.
func bigBatch(t testing.TB, n, size int, ts int64) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBatchOptions())
	v := make([]byte, size)
	for i := range n {
		v[0] = byte(i)
		b.Add(nil, v, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *testEnv) append(topic string, partition int32, data []byte, acks Acks) AppendResult {
	e.t.Helper()
	res, err := e.m.Append(context.Background(), topic, partition, data, acks, 5*time.Second)
	if err != nil {
		e.t.Fatalf("append to %s-%d: %v", topic, partition, err)
	}
	return res
}

// idempotentBatch is a batch of n records from idempotent producer pid
// (epoch 0) starting at sequence seq, each value "s<sequence>".
func idempotentBatch(t testing.TB, pid int64, seq int32, n int) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(nil, fmt.Appendf(nil, "s%d", int(seq)+i), nil, 0)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// values decodes the records of a fetch result's batches.
func values(t testing.TB, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := record.Records(b[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
		b = b[h.Size():]
	}
	return out
}

// offsets returns the offset of every record in b's batches.
func offsets(t testing.TB, b []byte) []int64 {
	t.Helper()
	var out []int64
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		for o := h.BaseOffset; o <= h.LastOffset(); o++ {
			out = append(out, o)
		}
		b = b[h.Size():]
	}
	return out
}

func consumerFetch(maxWait time.Duration, minBytes int32) FetchParams {
	return FetchParams{ReplicaID: -1, MaxWait: maxWait, MinBytes: minBytes, MaxBytes: 50 << 20}
}

func part(topic string, partition int32, offset int64) FetchPartition {
	return FetchPartition{Topic: topic, Partition: partition, FetchOffset: offset, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}
}

// waiters returns how many requests are parked on the partition.
func (e *testEnv) waiters(topic string, partition int32) int {
	p, ok := e.m.Partition(topic, partition)
	if !ok {
		return 0
	}
	p.wait.Lock()
	defer p.wait.Unlock()
	return len(p.wait.waiters)
}

// forEachFlushPolicy runs fn under flush.policy ack and interval.
func forEachFlushPolicy(t *testing.T, fn func(t *testing.T, policy string)) {
	for _, policy := range []string{"ack", "interval"} {
		t.Run("flush.policy="+policy, func(t *testing.T) { fn(t, policy) })
	}
}
