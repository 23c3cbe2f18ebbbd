package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/failpoint"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestLogFailureMovesLeadership: issue 19's acceptance for Kafka's
// log-dir failure handling (DESIGN.md section 25): "an injected EIO on
// fsync takes the partition offline for writes on that node and moves
// leadership; no acknowledged record is lost."
//
// Three nodes, each started with FJORD_FSYNC_EIO naming the partition's
// log directory and a marker in its own data directory; a topic of three
// replicas and min.insync.replicas 2; a franz-go idempotent producer
// with acks=all producing steadily. The test creates the marker in the
// leader's data directory, and from the next fsync on the leader's log
// fails with EIO. A probe sends single-record acks=all produces straight
// to that node meanwhile. Checked: the probe's refusals are
// KAFKA_STORAGE_ERROR until the node's image moves the leadership, then
// NOT_LEADER_OR_FOLLOWER, and nothing else; another node leads, and the
// failed node is out of the ISR and listed offline; the producer
// carries on there; every acknowledged record is read back exactly as
// acknowledged, once. Then the failed node restarts (without the
// marker): its log is recovered, its new registration clears the mark,
// and it rejoins the ISR. Logged: how long the leadership took to move
// and the window of storage errors.
func TestLogFailureMovesLeadership(t *testing.T) {
	t.Parallel()
	const topic, marker = "eio", "eio-marker"
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Nodes: 3, Node: testcluster.Options{
		Env: []string{failpoint.SyncEIOEnv + "=" + topic + "-0@" + marker},
	}})
	ctx := testContext(t, 2*time.Minute)
	createTopic(ctx, t, newAdmin(t, c), topic, 1, "min.insync.replicas=2")
	old := c.Leader(t, topic, 0)
	survivor := newNodeView(ctx, t, c.Node(old%3+1))
	eventually(t, 30*time.Second, func() error {
		md, err := survivor.partition(ctx, topic)
		if err == nil && len(md.ISR) != 3 {
			err = fmt.Errorf("before the fault: ISR %v, want all three", md.ISR)
		}
		return err
	})

	checker := history.NewChecker()
	var marked atomic.Int64       // UnixNano when the marker was created, 0 before
	var newLeaderAck atomic.Int64 // UnixNano of the first batch another node wrote after it
	producer := newClient(t, c,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(time.Minute),
		kgo.WithHooks(batchWritten(func(broker int32) {
			if at := marked.Load(); at != 0 && broker != old {
				newLeaderAck.CompareAndSwap(0, time.Now().UnixNano())
			}
		})),
	)
	// Steady, not flat out: the cores are shared.
	load := startKeyedLoad(t, producer, checker, topic, "eio", 16, 500*time.Microsecond)
	eventually(t, time.Minute, load.ackedAtLeast(1000))

	// The probe: acks=all produces of one record each, straight to the
	// leader, one after another (a millisecond apart), never retried.
	// One parked at the failure is woken and answered; one sent after it
	// is refused at once; so it cannot miss the storage errors however
	// short they last.
	probe := newProbe(ctx, t, c.Node(old), old, topic, checker)
	probeStop := make(chan struct{})
	var probeWG sync.WaitGroup
	probeWG.Go(func() {
		for {
			select {
			case <-probeStop:
				return
			case <-time.After(time.Millisecond):
			}
			probe.send(ctx)
		}
	})
	eventually(t, 30*time.Second, func() error {
		if !probe.saw(nil) {
			return errors.New("no probe acknowledged yet")
		}
		return nil
	})

	controller := c.ControllerID(t)
	markedAt := time.Now()
	marked.Store(markedAt.UnixNano())
	if err := os.WriteFile(filepath.Join(c.Node(old).DataDir(), marker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ackedAtMark := checker.AckedCount()

	// Leadership moves: a surviving node's metadata names another leader.
	var movedAt time.Time
	var moved kmsg.MetadataResponseTopicPartition
	eventually(t, 30*time.Second, func() error {
		md, err := survivor.partition(ctx, topic)
		switch {
		case err != nil:
			return err
		case md.Leader < 0 || md.Leader == old:
			return fmt.Errorf("node %d's metadata: leader %d", survivor.id, md.Leader)
		}
		movedAt, moved = time.Now(), md
		return nil
	})
	// The old node's own image follows: it answers NOT_LEADER_OR_FOLLOWER.
	eventually(t, 30*time.Second, func() error {
		if !probe.saw(kerr.NotLeaderForPartition) {
			return errors.New("the failed node has not answered NOT_LEADER_OR_FOLLOWER yet")
		}
		return nil
	})
	close(probeStop)
	probeWG.Wait()

	if moved.Leader == old || slices.Contains(moved.ISR, old) || !slices.Contains(moved.ISR, moved.Leader) || len(moved.ISR) != 2 {
		t.Fatalf("after the fault: leader %d, ISR %v; want another ISR member leading and node %d out", moved.Leader, moved.ISR, old)
	}
	if !slices.Contains(moved.OfflineReplicas, old) {
		t.Errorf("after the fault: offline replicas %v, want node %d's", moved.OfflineReplicas, old)
	}
	storageFirst, storageLast, notLeader, err := probe.check()
	if err != nil {
		t.Fatal(err)
	}
	// The producer carries on at the new leader.
	eventually(t, time.Minute, load.ackedAtLeast(ackedAtMark+1000))
	if newLeaderAck.Load() == 0 {
		t.Fatal("no batch acknowledged by another node after the fault")
	}
	t.Logf("leadership moved from node %d to node %d (the active controller: node %d): "+
		"the failed node answered KAFKA_STORAGE_ERROR from %v to %v after the marker and NOT_LEADER_OR_FOLLOWER from %v; "+
		"node %d's metadata named the new leader by %v; the producer's first acknowledgement by the new leader came %v after the marker",
		old, moved.Leader, controller,
		storageFirst.Sub(markedAt).Round(100*time.Microsecond), storageLast.Sub(markedAt).Round(100*time.Microsecond),
		notLeader.Sub(markedAt).Round(100*time.Microsecond), survivor.id, movedAt.Sub(markedAt).Round(100*time.Microsecond),
		time.Duration(newLeaderAck.Load()-markedAt.UnixNano()).Round(time.Millisecond))

	// The failed node restarts on its data directory, without the
	// marker: the log is recovered, the new registration clears the
	// mark, and it rejoins the ISR.
	if err := os.Remove(filepath.Join(c.Node(old).DataDir(), marker)); err != nil {
		t.Fatal(err)
	}
	c.Kill(old)
	c.Start(old)
	eventually(t, time.Minute, func() error {
		md, err := survivor.partition(ctx, topic)
		if err == nil && (len(md.ISR) != 3 || len(md.OfflineReplicas) != 0) {
			err = fmt.Errorf("after node %d's restart: ISR %v, offline %v", old, md.ISR, md.OfflineReplicas)
		}
		return err
	})

	load.Stop()
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := load.failures.err(); err != nil {
		t.Fatalf("produce across the log failure: %v", err)
	}
	sum, err := checker.Verify(readAll(ctx, t, c, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v (%d probe records among them, %d acknowledged)", sum, probe.sent, probe.acked)
	if sum.Acked != checker.AckedCount() || sum.Acked < ackedAtMark+1000 {
		t.Fatalf("%v: want every acknowledgement read back", sum)
	}
}

// nodeView asks one node, and only it, for its Metadata, over one
// client kept for the test (a client per question would cost a dial and
// ApiVersions, tens of milliseconds here, in each measurement).
type nodeView struct {
	id     int32
	broker *kgo.Broker
}

func newNodeView(ctx context.Context, t *testing.T, n *testcluster.Node) nodeView {
	t.Helper()
	cl := newClient(t, n)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("node %d's metadata: %v", n.ID(), err)
	}
	return nodeView{id: n.ID(), broker: cl.Broker(int(n.ID()))}
}

// partition is partition 0 of topic as the node's own Metadata answer has
// it.
func (v nodeView) partition(ctx context.Context, topic string) (kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	resp, err := v.broker.Request(ctx, req)
	if err != nil {
		return kmsg.MetadataResponseTopicPartition{}, fmt.Errorf("node %d's metadata: %w", v.id, err)
	}
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		if mt.Topic != nil && *mt.Topic == topic && len(mt.Partitions) == 1 {
			return mt.Partitions[0], nil
		}
	}
	return kmsg.MetadataResponseTopicPartition{}, fmt.Errorf("node %d's metadata has no %s-0", v.id, topic)
}

// batchWritten is a franz-go hook telling written of every batch the
// client's produce acknowledged, by the broker that wrote it.
type batchWritten func(broker int32)

func (f batchWritten) OnProduceBatchWritten(meta kgo.BrokerMetadata, _ string, _ int32, _ kgo.ProduceBatchMetrics) {
	f(meta.NodeID)
}

// logProbe sends single-record acks=all produces to one node and
// remembers its answers; its records are the checker's, as producer
// "probe" (sent once each, never retried, so never written twice).
type logProbe struct {
	t       *testing.T
	broker  *kgo.Broker
	topic   string
	checker *history.Checker

	mu      sync.Mutex
	answers []probeAnswer
	sent    int
	acked   int
}

type probeAnswer struct {
	at  time.Time
	err error
}

func newProbe(ctx context.Context, t *testing.T, n *testcluster.Node, id int32, topic string, checker *history.Checker) *logProbe {
	t.Helper()
	cl := newClient(t, n, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("the probe's client: %v", err)
	}
	return &logProbe{t: t, broker: cl.Broker(int(id)), topic: topic, checker: checker}
}

// send produces one record and records the answer.
func (p *logProbe) send(ctx context.Context) {
	p.mu.Lock()
	p.sent++
	value := fmt.Appendf(nil, "probe %06d", p.sent)
	p.mu.Unlock()
	key := []byte("probe")
	p.checker.SentBy("probe", p.topic, key, value)
	bb := record.NewBuilder(record.DefaultBatchOptions())
	bb.Add(key, value, nil, time.Now().UnixMilli())
	batch, err := bb.Build()
	if err != nil {
		p.t.Error(err)
		return
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = p.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := p.broker.Request(rctx, req)
	if err == nil {
		r := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if err = kerr.ErrorForCode(r.ErrorCode); err == nil {
			p.checker.Acked(history.Record{Topic: p.topic, Partition: 0, Offset: r.BaseOffset, Key: key, Value: value})
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.acked++
	}
	p.answers = append(p.answers, probeAnswer{at: time.Now(), err: err})
}

// saw reports whether the node answered want (nil: acknowledged).
func (p *logProbe) saw(want error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.answers, func(a probeAnswer) bool { return errors.Is(a.err, want) })
}

// check holds the probe's answers to the rule: acknowledgements, then
// KAFKA_STORAGE_ERROR at least once (the log failed), then
// NOT_LEADER_OR_FOLLOWER (the leadership moved) and nothing after it but
// that; no other answer. It returns when the storage errors began and
// ended, and when the first NOT_LEADER_OR_FOLLOWER came.
func (p *logProbe) check() (first, last, moved time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	phase := 0 // 0: acknowledging, 1: storage errors, 2: not the leader
	for i, a := range p.answers {
		switch {
		case a.err == nil && phase == 0:
		case errors.Is(a.err, kerr.KafkaStorageError) && phase <= 1:
			if phase == 0 {
				first = a.at
			}
			phase, last = 1, a.at
		case errors.Is(a.err, kerr.NotLeaderForPartition) && phase >= 1:
			if phase == 1 {
				moved = a.at
			}
			phase = 2
		default:
			return first, last, moved, fmt.Errorf("probe answer %d of %d: %v in phase %d (0 acknowledging, 1 storage errors, 2 not the leader)",
				i+1, len(p.answers), a.err, phase)
		}
	}
	if phase != 2 {
		return first, last, moved, fmt.Errorf("the probe's answers ended in phase %d, want 2 (not the leader)", phase)
	}
	return first, last, moved, nil
}
