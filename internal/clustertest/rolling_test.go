package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// imbalanceInterval is the rolling-restart cluster's
// --leader-imbalance-check-interval-seconds: short, so the test can ask
// that leadership be back on the preferred replicas one interval after
// the last node returns (acceptance point 2 of issue 15).
const imbalanceInterval = 3 * time.Second

// Issue 15, acceptance points 1 to 3: a rolling SIGTERM restart of all
// three nodes, one after another, under an idempotent acks=all producer,
// a consumer group of two members and a stream of CreateTopics, once for
// each of franz-go, Sarama and librdkafka with their default retries.
// Between two nodes the roll waits for every partition's ISR to be full
// again, as an operator's runbook does (kafka's under-replicated count
// at zero): stopping the next node earlier would take a partition below
// min.insync.replicas, which refuses writes by design.
//
// Every subtest checks: no produce, fetch or CreateTopics request failed
// as the application sees it; every node stopped in under 5 s after a
// completed controlled shutdown, and the active controller handed Raft
// leadership over before it exited; the group's committed offsets never
// went backwards and it consumed every acknowledged record; every
// acknowledged record is read back once; the replicas are the same
// bytes; and within one imbalance interval of the last node's return
// every partition is led by its preferred replica again, with nothing
// asked of the cluster but the automatic balance.
func TestRollingRestart(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{
		Nodes: 3,
		Node: testcluster.Options{Args: []string{
			"--leader-imbalance-check-interval-seconds", strconv.Itoa(int(imbalanceInterval / time.Second)),
			// Any partition not led by its preferred replica counts:
			// the check below wants every one back, and with fewer than
			// a hundred partitions per broker 1% is "any".
			"--leader-imbalance-per-broker-percentage", "1",
		}},
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("FranzGo", func(t *testing.T) { e.rollingRestart(t, franzRoll{}) })
	t.Run("Sarama", func(t *testing.T) {
		keepSaramaLog(t, 400)
		e.rollingRestart(t, saramaRoll{})
	})
	t.Run("Librdkafka", func(t *testing.T) { e.rollingRestart(t, rdkRoll{}) })
}

// rollClient is one client library's producer and group member, driven
// by a rollLoad. Each runs until ctx ends and reports through l; neither
// retries anything itself: what the library gives up on is a failure.
type rollClient interface {
	name() string
	// produce writes the values l.next hands out, partition by
	// partition in turn, idempotent and acks=all.
	produce(t *testing.T, ctx context.Context, l *rollLoad)
	// consume is one member of l.group subscribed to l.topic, from the
	// earliest offset, committing what it has processed the way the
	// library does by default.
	consume(t *testing.T, ctx context.Context, l *rollLoad)
}

// rollPartitions is the roll's topic's partition count: two led by each
// node.
const rollPartitions = 6

func (e *env) rollingRestart(t *testing.T, client rollClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topic, group := "roll-"+client.name(), "roll-"+client.name()
	e.createTopic(t, ctx, topic, rollPartitions, 3)
	e.clusterFullISRs(t, ctx)

	l := &rollLoad{topic: topic, group: group, brokers: e.c.Brokers(), checker: history.NewChecker(),
		consumed: map[string]bool{}, committed: map[int32]int64{}}
	produceCtx, stopProduce := context.WithCancel(ctx)
	consumeCtx, stopConsume := context.WithCancel(ctx)
	watchCtx, stopWatch := context.WithCancel(ctx)
	var producers, consumers, watchers sync.WaitGroup
	defer func() { // on every exit path, Fatal's too
		stopProduce()
		stopConsume()
		stopWatch()
		producers.Wait()
		consumers.Wait()
		watchers.Wait()
	}()
	producers.Go(func() { client.produce(t, produceCtx, l) })
	for range 2 {
		consumers.Go(func() { client.consume(t, consumeCtx, l) })
	}
	watchers.Go(func() { l.watchCommits(t, watchCtx) })
	var created []string
	watchers.Go(func() { created = l.createTopics(t, watchCtx) })

	l.waitAcks(t, 300)
	l.waitCommitted(t)
	for _, n := range e.c.Nodes() {
		e.rollOne(t, ctx, l, n.ID())
	}
	rolled := time.Now()
	e.preferredLeaders(t, ctx, imbalanceInterval+3*time.Second)
	e.allRunning(t)
	t.Logf("%s: every partition led by its preferred replica %v after the last node's ISRs were full (interval %v)",
		client.name(), time.Since(rolled).Round(time.Millisecond), imbalanceInterval)

	l.waitAcks(t, 300)
	stopProduce()
	producers.Wait()
	l.waitConsumedAll(t)
	stopConsume()
	consumers.Wait()
	stopWatch()
	watchers.Wait()

	if err := l.failures(); err != nil {
		t.Fatal(err)
	}
	if len(created) == 0 {
		t.Fatal("no topic was created during the roll")
	}
	sum := e.verify(t, ctx, l.checker, topic)
	if sum.Acked == 0 || sum.Read < sum.Acked {
		t.Fatalf("%v: every acknowledged record must be read back", sum)
	}
	t.Logf("%s: %v; %d commits watched, %d topics created during the roll", client.name(), sum, l.commitsSeen(), len(created))
	for _, n := range l.notices {
		t.Logf("%s reported and recovered: %s", client.name(), n)
	}
	e.replicasIdentical(t, topic, rollPartitions)

	// The topics the roll created go, so the next roll's cluster is the
	// same size.
	adm := kadm.NewClient(e.cl)
	resps, err := adm.DeleteTopics(ctx, created...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("deleting the topics the roll created: %v", err)
	}
}

// rollOne is one step of the roll: SIGTERM node id under l's load, its
// controlled shutdown checked, then the node started again and every
// partition's ISR waited for.
func (e *env) rollOne(t *testing.T, ctx context.Context, l *rollLoad, id int32) {
	t.Helper()
	e.allRunning(t)
	e.controlledStop(t, id, e.c.ControllerID(t) == id)
	// A failure below must not leave the node down for the next
	// client's roll: a second node stopped would take the quorum.
	defer func() {
		if !e.c.Node(id).Running() {
			e.c.Start(id)
		}
	}()
	l.waitAcks(t, 200) // on the two left
	e.c.Start(id)
	e.clusterFullISRs(t, ctx)
	e.allRunning(t)
}

// allRunning fails the test if a node's process has exited: a roll
// stops one node at a time, and one that died by itself would make the
// next step stop a second (a quorum of three cannot lose two).
func (e *env) allRunning(t *testing.T) {
	t.Helper()
	for _, n := range e.c.Nodes() {
		if !n.Running() {
			t.Fatalf("node %d is not running; its last run's log:\n%s", n.ID(), n.LatestOutput())
		}
	}
}

// clusterFullISRs waits until every partition of every topic, the
// offsets topic's too, has a leader and all its replicas in its ISR, as
// every running node answers Metadata: the next step of a roll must not
// go by a node whose image is behind.
func (e *env) clusterFullISRs(t *testing.T, ctx context.Context) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		return e.eachPartition(ctx, func(topic string, p int32, leader int32, replicas, isr []int32) error {
			if leader < 0 || len(isr) != len(replicas) {
				return fmt.Errorf("%s-%d: leader %d, replicas %v, ISR %v", topic, p, leader, replicas, isr)
			}
			return nil
		})
	})
}

// preferredLeaders waits up to d until every partition of every topic is
// led by its first replica, as every running node answers.
func (e *env) preferredLeaders(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, d, func() error {
		return e.eachPartition(ctx, func(topic string, p int32, leader int32, replicas, isr []int32) error {
			if len(replicas) == 0 || leader != replicas[0] {
				return fmt.Errorf("%s-%d: leader %d, replicas %v, ISR %v", topic, p, leader, replicas, isr)
			}
			return nil
		})
	})
}

// eachPartition calls f for every partition each running node answers
// a Metadata request for all topics with, stopping at its first error.
func (e *env) eachPartition(ctx context.Context, f func(topic string, p int32, leader int32, replicas, isr []int32) error) error {
	for _, n := range e.c.Nodes() {
		if !n.Running() {
			continue
		}
		resp, err := allTopicsMetadata(ctx, n.KafkaAddr())
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID(), err)
		}
		for _, mt := range resp.Topics {
			if mt.Topic == nil {
				continue
			}
			if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
				return fmt.Errorf("node %d: %s: %w", n.ID(), *mt.Topic, err)
			}
			for _, mp := range mt.Partitions {
				if err := f(*mt.Topic, mp.Partition, mp.Leader, mp.Replicas, mp.ISR); err != nil {
					return fmt.Errorf("as node %d answers: %w", n.ID(), err)
				}
			}
		}
	}
	return nil
}

// allTopicsMetadata is the Metadata answer of the node at addr alone.
func allTopicsMetadata(ctx context.Context, addr string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest() // nil Topics: all of them
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// rollLoad is what a roll's clients report: the values sent and
// acknowledged (in checker), those the group consumed, the offsets it
// committed as an outside admin client sees them, and every failure.
type rollLoad struct {
	topic, group, brokers string
	checker               *history.Checker

	mu             sync.Mutex
	seq            int
	acks           int
	consumed       map[string]bool // values
	committed      map[int32]int64 // the highest committed offset seen per partition
	commits        int             // how many times a committed offset was seen to move up
	notices        []string        // what a client reported and recovered from by itself
	produceErrors  []error
	fetchErrors    []error
	createErrors   []error
	backwardsMoves []string
}

// next is the next record to send: its partition (every partition in
// turn), key and value (unique), already told to the checker.
func (l *rollLoad) next() (partition int32, key, value []byte) {
	l.mu.Lock()
	i := l.seq
	l.seq++
	l.mu.Unlock()
	partition = int32(i % rollPartitions)
	key, value = fmt.Appendf(nil, "k%d", partition), fmt.Appendf(nil, "%08d", i)
	l.checker.Sent(l.topic, key, value)
	return partition, key, value
}

func (l *rollLoad) acked(r history.Record) {
	l.checker.Acked(r)
	l.mu.Lock()
	l.acks++
	l.mu.Unlock()
}

func (l *rollLoad) produceFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.produceErrors = append(l.produceErrors, fmt.Errorf("at %s: %w", time.Now().Format("15:04:05.000"), err))
}

func (l *rollLoad) fetchFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fetchErrors = append(l.fetchErrors, fmt.Errorf("at %s: %w", time.Now().Format("15:04:05.000"), err))
}

// notice records what a client reported but recovered from by itself
// (a broken connection); logged at the end, not a failure.
func (l *rollLoad) notice(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notices = append(l.notices, fmt.Sprintf("at %s: %s", time.Now().Format("15:04:05.000"), what))
}

func (l *rollLoad) consume(value []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.consumed[string(value)] = true
}

// rollPace is the producer's pace: a record a millisecond, a steady
// load rather than as fast as it goes.
const rollPace = time.Millisecond

// waitAcks waits until n more records are acknowledged; a produce
// failure ends the wait at once.
func (l *rollLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := l.acks + n
	l.mu.Unlock()
	testutil.Eventually(t, 30*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.produceErrors) > 0 {
			t.Fatalf("%d produces failed, the first: %v", len(l.produceErrors), l.produceErrors[0])
		}
		if l.acks < want {
			return fmt.Errorf("%d records acknowledged, waiting for %d", l.acks, want)
		}
		return nil
	})
}

// waitCommitted waits until the group has committed an offset for every
// partition, so the watch that follows watches something.
func (l *rollLoad) waitCommitted(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.committed) < rollPartitions {
			return fmt.Errorf("the group has committed offsets for %d of %d partitions", len(l.committed), rollPartitions)
		}
		return nil
	})
}

// waitConsumedAll waits, once the producer has stopped, until the group
// has consumed every acknowledged record.
func (l *rollLoad) waitConsumedAll(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.fetchErrors) > 0 {
			t.Fatalf("%d fetches failed, the first: %v", len(l.fetchErrors), errors.Join(l.fetchErrors[:min(len(l.fetchErrors), 5)]...))
		}
		missing, first := 0, ""
		for _, r := range l.checker.Acks() {
			if !l.consumed[string(r.Value)] {
				if missing == 0 {
					first = fmt.Sprintf("%s at %s@%d", r.Value, r.TopicPartition(), r.Offset)
				}
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("the group has not consumed %d acknowledged records, the first %s", missing, first)
		}
		return nil
	})
}

// watchCommits asks for the group's committed offsets every 50 ms, as
// an outside admin client, and notes every offset lower than one seen
// before for the same partition. An answer with an error (the
// coordinator moving, loading) is no observation and is skipped: it is
// this watcher's, not the application's.
func (l *rollLoad) watchCommits(t *testing.T, ctx context.Context) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(l.brokers, ",")...))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		resps, err := adm.FetchOffsets(ctx, l.group)
		if err != nil {
			continue
		}
		l.mu.Lock()
		resps.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.Topic != l.topic || o.At < 0 {
				return
			}
			prev, ok := l.committed[o.Partition]
			switch {
			case ok && o.At < prev:
				l.backwardsMoves = append(l.backwardsMoves, fmt.Sprintf("%s-%d: committed %d after %d", o.Topic, o.Partition, o.At, prev))
			case !ok || o.At > prev:
				l.committed[o.Partition] = o.At
				l.commits++
			}
		})
		l.mu.Unlock()
	}
}

func (l *rollLoad) commitsSeen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commits
}

// createTopics creates a topic of one partition and three replicas every
// 200 ms through an admin client with franz-go's default retries, until
// ctx ends, and returns the names it created. A controller that moves
// while one is created (each node's shutdown moves it, for the node that
// holds it) must not fail the request.
func (l *rollLoad) createTopics(t *testing.T, ctx context.Context) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(l.brokers, ",")...))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var created []string
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return created
		case <-time.After(200 * time.Millisecond):
		}
		name := fmt.Sprintf("%s-created-%03d", l.topic, i)
		start := time.Now()
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, name)
		if err == nil && resp.Err != nil {
			err = fmt.Errorf("%w (%q)", resp.Err, resp.ErrMessage)
		}
		if ctx.Err() != nil {
			return created // the request was cut short by the end of the roll
		}
		if err != nil {
			l.mu.Lock()
			l.createErrors = append(l.createErrors, fmt.Errorf("creating %s (answered after %v): %w", name, time.Since(start).Round(time.Millisecond), err))
			l.mu.Unlock()
			continue
		}
		created = append(created, name)
	}
}

// failures is every failure the roll's clients saw, or nil.
func (l *rollLoad) failures() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	report := func(what string, list []error) {
		if len(list) > 0 {
			errs = append(errs, fmt.Errorf("%d %s failed, the first: %w", len(list), what, errors.Join(list[:min(len(list), 5)]...)))
		}
	}
	report("produces", l.produceErrors)
	report("fetches", l.fetchErrors)
	report("CreateTopics requests", l.createErrors)
	if len(l.backwardsMoves) > 0 {
		errs = append(errs, fmt.Errorf("committed offsets went backwards %d times, the first: %s", len(l.backwardsMoves), l.backwardsMoves[0]))
	}
	if l.commits < rollPartitions {
		errs = append(errs, fmt.Errorf("only %d commits seen; the watch watched nothing", l.commits))
	}
	return errors.Join(errs...)
}

// franzRoll is franz-go: kgo's defaults are idempotent, acks=all, with
// retries until the record's delivery timeout; the group members
// autocommit (every 5 s and on revoke).
type franzRoll struct{}

func (franzRoll) name() string { return "franz-go" }

func (franzRoll) produce(t *testing.T, ctx context.Context, l *rollLoad) {
	pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(l.brokers, ",")...),
		kgo.DefaultProduceTopic(l.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Error(err)
		return
	}
	defer pr.Close()
	pace := time.NewTicker(rollPace)
	defer pace.Stop()
	for ctx.Err() == nil {
		p, key, value := l.next()
		// The produce's own context is not ctx: stopping the load must
		// not fail records already handed over, only stop new ones.
		pr.Produce(context.Background(), &kgo.Record{Partition: p, Key: key, Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				l.produceFailed(fmt.Errorf("%s: %w", r.Value, err))
				return
			}
			l.acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		})
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
	}
	if err := pr.Flush(context.Background()); err != nil {
		l.produceFailed(err)
	}
}

func (franzRoll) consume(t *testing.T, ctx context.Context, l *rollLoad) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(l.brokers, ",")...),
		kgo.ConsumerGroup(l.group), kgo.ConsumeTopics(l.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close() // leaves the group, committing what was polled
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			l.fetchFailed(fmt.Errorf("%s-%d: %w", topic, p, err))
		})
		fs.EachRecord(func(r *kgo.Record) { l.consume(r.Value) })
	}
}
