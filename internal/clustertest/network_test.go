package clustertest

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// netLagTime is the network cluster's replica.lag.time.max.ms: short, so
// a follower that cannot fetch leaves the ISR within the test's patience.
const netLagTime = 2 * time.Second

// sessionTimeout is the nodes' broker.session.timeout.ms (the default):
// the fencing bound, no successor can be elected sooner after a cut.
const sessionTimeout = 750 * time.Millisecond

// One cluster of three in network namespaces for issue 14's network
// faults: each node on a link of its own, so the test can cut what one
// node sends another while the test process (the clients) still reaches
// every node. Each subtest makes its own topics and heals what it cut.
func TestNetworkFaults(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{
		Nodes:   3,
		Network: true,
		Node: testcluster.Options{Args: []string{
			"--replica-lag-time-max-ms", strconv.Itoa(int(netLagTime / time.Millisecond))}},
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("FollowerCannotFetch", e.followerCannotFetch)
	t.Run("LeaderIsolated", func(t *testing.T) {
		t.Run("NotController", func(t *testing.T) {
			_, others := e.controllerAndOthers(t)
			e.leaderIsolated(t, "iso-a", others[0])
		})
		t.Run("Controller", func(t *testing.T) { e.leaderIsolated(t, "iso-b", e.c.ControllerID(t)) })
	})
	t.Run("RandomSchedule", e.randomSchedule)
}

// Acceptance point 3: a follower that keeps heartbeating the controller
// but whose packets to its leader are dropped (one way) leaves the ISR
// after replica.lag.time.max.ms, and acks=all writes, stalled meanwhile,
// resume without it; it is not fenced. Healed, it catches up and rejoins.
func (e *env) followerCannotFetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctrl, others := e.controllerAndOthers(t)
	leader, follower := others[0], others[1]
	const topic = "cut-follower"
	e.createTopicAssigned(t, ctx, topic, -1, -1, nil, [][]int32{{leader, follower, ctrl}})
	load := e.startLoad(t, ctx, topic, 1)
	load.replicas = e.c.Nodes()
	load.waitAcks(t, 300)
	fencings := e.sum(t, "fjord_controller_broker_fencings_total")

	e.c.Cut(follower, leader)
	cut := time.Now()
	t.Cleanup(e.c.Heal)
	testutil.Eventually(t, netLagTime+20*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); slices.Contains(isr, follower) {
			return fmt.Errorf("ISR %v still holds node %d, which cannot fetch", isr, follower)
		}
		return nil
	})
	shrunk := time.Since(cut)
	if _, _, isr := e.state(t, ctx, leader, topic); !slices.Equal(isr, sorted(leader, ctrl)) {
		t.Fatalf("ISR %v after the shrink; want the leader %d and node %d", isr, leader, ctrl)
	}
	// Writes resume: acknowledged after the shrink, by the two left.
	acks := load.acked()
	load.waitAcks(t, 300)
	// The lag runs from the follower's last catch-up, a moment before
	// the cut under this load: sooner than the lag time less that moment
	// would be some other rule shrinking the ISR.
	if shrunk < netLagTime-200*time.Millisecond {
		t.Fatalf("node %d left the ISR %v after the cut, sooner than the lag time %v", follower, shrunk, netLagTime)
	}
	if f := e.sum(t, "fjord_controller_broker_fencings_total"); f != fencings {
		t.Fatalf("fencings went from %v to %v: node %d heartbeats the controller and must not be fenced", fencings, f, follower)
	}
	stall := load.stall(cut)
	t.Logf("node %d cut from leader %d: left the ISR %v after the cut (lag time %v); acks=all stalled %v; %d acknowledged before, more after",
		follower, leader, shrunk.Round(time.Millisecond), netLagTime, stall.Round(time.Millisecond), acks)

	e.c.Heal()
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, _, isr := e.state(t, ctx, leader, topic); len(isr) != 3 {
			return fmt.Errorf("ISR %v after the heal", isr)
		}
		return nil
	})
	load.finish(t, ctx, e)
}

// stall is the longest gap between acknowledgements after since.
func (l *failoverLoad) stall(since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	prev := since
	for _, a := range l.acks {
		if a.at.Before(since) {
			continue
		}
		longest = max(longest, a.at.Sub(prev))
		prev = a.at
	}
	return longest
}

func sorted(ids ...int32) []int32 {
	slices.Sort(ids)
	return ids
}

// Acceptance point 4: a partition leader isolated from the other nodes
// (both ways) while the clients still reach it. Two partitions it leads
// take load: one acks=all from an idempotent producer, one acks=1. The
// controller fences it a session after its last heartbeat and elects the
// next ISR member; its leader lease (four fifths of a session from its
// last answered heartbeat) ends before that, so it acknowledges no acks=1
// record after the fencing bound, and afterwards it refuses to answer
// reads as leader. After the heal it cuts its divergent acks=1 tail (its
// log and its metrics say so), rejoins both ISRs, and the replicas are the
// same bytes; every acks=all record acknowledged is present at its
// offset, and the acks=1 records lost are exactly those it acknowledged
// after the cut, all before the bound. An acks=all produce sent to it
// during the cut is answered by it, NOT_LEADER_OR_FOLLOWER, before the
// heal and so long before its request timeout: its lapsed lease answers
// the produces its purgatory holds.
//
// isolated is the node to isolate: not the controller, or the controller
// (then it steps down as controller too, and its lease ends with that).
func (e *env) leaderIsolated(t *testing.T, prefix string, isolated int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var rest []int32
	for _, n := range e.c.Nodes() {
		if n.ID() != isolated {
			rest = append(rest, n.ID())
		}
	}
	all, one := prefix+"-all", prefix+"-one"
	assignment := [][]int32{{isolated, rest[0], rest[1]}}
	e.createTopicAssigned(t, ctx, all, -1, -1, nil, assignment)
	e.createTopicAssigned(t, ctx, one, -1, -1, map[string]string{"min.insync.replicas": "1"}, assignment)
	_, allEpoch, _ := e.state(t, ctx, isolated, all)
	_, oneEpoch, _ := e.state(t, ctx, isolated, one)

	load := e.startLoad(t, ctx, all, 1)
	load.replicas = e.c.Nodes()
	ones := e.startAcksOne(t, ctx, one)
	load.waitAcks(t, 300)
	ones.waitAcks(t, 300)
	// A client of the isolated node alone: a client that also asked the
	// others for metadata would drop its connections to the node once
	// they stopped listing it (fenced), failing the produce below on the
	// client's side instead of waiting for the node's answer.
	direct, err := kgo.NewClient(kgo.SeedBrokers(e.c.Node(isolated).KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	cut := time.Now()
	e.c.Isolate(isolated)
	t.Cleanup(e.c.Heal)
	// An acks=all produce in flight during the cut, sent to the isolated
	// leader with a request timeout of ten minutes. Its followers cannot
	// fetch it, so its high watermark never passes it, and until the heal
	// (after the check below) only the isolated node can answer it: parked
	// for its followers and answered when its lease lapses, or refused at
	// once if it arrived after the lapse, NOT_LEADER_OR_FOLLOWER
	// (retriable) either way. A leader that held it in purgatory until
	// the heal or its timeout fails the check at the minute's bound,
	// which is far from either answer's timing: no timing is asserted.
	var inFlightErr error
	var inFlightTook time.Duration
	inFlight := make(chan struct{})
	go func() {
		defer close(inFlight)
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		inFlightErr = testutil.ProduceOnceTimeout(pctx, direct.SeedBrokers()[0], all, 1, 10*time.Minute)
		inFlightTook = time.Since(cut)
	}()
	observer := rest[0]
	var next int32
	for _, topic := range []string{all, one} {
		testutil.Eventually(t, 20*time.Second, func() error {
			l, _, _ := e.state(t, ctx, observer, topic)
			if l == isolated || l < 0 {
				return fmt.Errorf("node %d sees leader %d for %s", observer, l, topic)
			}
			next = l
			return nil
		})
	}
	fenced := time.Since(cut)
	<-inFlight
	if !errors.Is(inFlightErr, kerr.NotLeaderForPartition) {
		t.Fatalf("acks=all produce sent to isolated node %d after the cut, with a request timeout of 10m: %v; want NOT_LEADER_OR_FOLLOWER from the node, before the heal",
			isolated, inFlightErr)
	}
	t.Logf("acks=all produce sent to isolated node %d after the cut: answered %v after the cut: %v", isolated, inFlightTook.Round(time.Millisecond), inFlightErr)
	// Both loads go on through the new leader.
	load.waitAcks(t, 300)
	ones.waitAcks(t, 300)
	// The isolated node, still the leader in its own view, refuses to
	// answer reads: its lease lapsed long ago.
	if err := listLatest(ctx, e.cl.Broker(int(isolated)), one); err == nil || !strings.Contains(err.Error(), kerr.NotLeaderForPartition.Message) {
		t.Fatalf("ListOffsets at isolated node %d after the new leader took writes: %v, want NOT_LEADER_OR_FOLLOWER", isolated, err)
	}
	truncatedBefore := e.metric(t, isolated, "fjord_replica_truncated_records_total")

	e.c.Heal()
	for _, topic := range []string{all, one} {
		testutil.Eventually(t, 30*time.Second, func() error {
			if _, _, isr := e.state(t, ctx, next, topic); len(isr) != 3 {
				return fmt.Errorf("%s: ISR %v after the heal", topic, isr)
			}
			return nil
		})
	}
	// The new epochs: next one up, from the ISR.
	for topic, epoch := range map[string]int32{all: allEpoch, one: oneEpoch} {
		if l, ep, _ := e.state(t, ctx, next, topic); l == isolated || ep <= epoch {
			t.Fatalf("%s: leader %d at epoch %d after the heal; want a new leader past epoch %d", topic, l, ep, epoch)
		}
	}
	load.finish(t, ctx, e)
	start := e.epochStart(t, ctx, next, one, oneEpoch)
	lostAll := ones.finish(t, ctx, e, cut)
	// The cut, in its log (the first of that partition's: a later one
	// would come from a later leader change) and its metrics.
	var cutFrom, cutTo int64 = -1, -1
	for _, m := range truncatedRE.FindAllStringSubmatch(e.c.Node(isolated).LogTail(200_000), -1) {
		if m[1] == one+"-0" {
			cutFrom, _ = strconv.ParseInt(m[2], 10, 64)
			cutTo, _ = strconv.ParseInt(m[3], 10, 64)
			break
		}
	}
	if cutTo != start || cutFrom <= start {
		t.Fatalf("node %d's log shows %s-0 cut from %d to %d; want a cut back to the new leader's epoch start %d", isolated, one, cutFrom, cutTo, start)
	}
	if got := e.metric(t, isolated, "fjord_replica_truncated_records_total") - truncatedBefore; got < float64(cutFrom-cutTo) {
		t.Fatalf("fjord_replica_truncated_records_total on node %d rose by %v, want at least the %d cut", isolated, got, cutFrom-cutTo)
	}
	// What the isolated node acknowledged and lost is what sat in the
	// tail it cut, [start, cutFrom), during the cut or after the heal.
	// acks=1 records lost elsewhere (a later leader's tail, when the
	// heal moves a leadership again on a loaded machine) are what acks=1
	// allows, and are only counted.
	var lost, elsewhere int
	var last time.Time
	var late []string
	bound := cut.Add(sessionTimeout)
	// Scheduling allowance for the client's callback on a loaded machine.
	const slack = 250 * time.Millisecond
	for _, a := range lostAll {
		if a.offset < start || a.offset >= cutFrom {
			elsewhere++
			continue
		}
		lost++
		if a.at.After(last) {
			last = a.at
		}
		if a.at.After(bound.Add(slack)) && len(late) < 10 {
			late = append(late, fmt.Sprintf("%s@%d (+%v after the cut)", a.value, a.offset, a.at.Sub(cut).Round(time.Millisecond)))
		}
	}
	t.Logf("node %d isolated: new leader %d seen %v after the cut; %d acks=1 records acknowledged by it after the cut lost, the last %v after the cut (fencing bound %v); its tail cut from %d to %d; %d acks=1 records lost elsewhere",
		isolated, next, fenced.Round(time.Millisecond), lost, last.Sub(cut).Round(time.Millisecond), sessionTimeout, cutFrom, cutTo, elsewhere)
	if lost == 0 {
		t.Fatalf("no acks=1 record acknowledged by isolated node %d was lost: the trial made no divergent tail", isolated)
	}
	if len(late) > 0 {
		t.Fatalf("isolated node %d acknowledged acks=1 records past the fencing bound %v (+%v) after the cut: %s",
			isolated, sessionTimeout, slack, strings.Join(late, " "))
	}
	e.replicasIdentical(t, one, 1)
}

// metric is one node's value of a metric family (summed over labels).
func (e *env) metric(t *testing.T, id int32, family string) float64 {
	t.Helper()
	v, _ := testutil.Scrape(t, http.DefaultClient, "http://"+e.c.Node(id).HTTPAddr()+"/metrics").Value(family)
	return v
}

// epochStart is where the epoch after epoch starts on leader's log.
func (e *env) epochStart(t *testing.T, ctx context.Context, leader int32, topic string, epoch int32) int64 {
	t.Helper()
	var start int64
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		start, err = epochEnd(ctx, e.cl.Broker(int(leader)), topic, epoch)
		return err
	})
	return start
}

// listLatest asks b for topic-0's latest offset, not retried.
func listLatest(ctx context.Context, b *kgo.Broker, topic string) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode)
}

// acksOneLoad is an acks=1 producer (not idempotent) writing a record a
// millisecond to topic-0, with every acknowledgement's offset, value and
// time.
type acksOneLoad struct {
	topic string
	pr    *kgo.Client
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	acks  []acksOneAck
}

type acksOneAck struct {
	at     time.Time
	offset int64
	value  string
}

func (e *env) startAcksOne(t *testing.T, ctx context.Context, topic string) *acksOneLoad {
	t.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Close)
	l := &acksOneLoad{topic: topic, pr: pr}
	produceCtx, stop := context.WithCancel(ctx)
	l.stop = stop
	l.wg.Go(func() {
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		for i := 0; produceCtx.Err() == nil; i++ {
			pr.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%08d", i)}, func(r *kgo.Record, err error) {
				if err != nil {
					return // acks=1 promises nothing; only what was acknowledged is checked
				}
				l.mu.Lock()
				defer l.mu.Unlock()
				l.acks = append(l.acks, acksOneAck{time.Now(), r.Offset, string(r.Value)})
			})
			select {
			case <-pace.C:
			case <-produceCtx.Done():
			}
		}
	})
	return l
}

func (l *acksOneLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := len(l.acks) + n
	l.mu.Unlock()
	testutil.Eventually(t, 30*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.acks) < want {
			return fmt.Errorf("%d acks=1 records acknowledged, waiting for %d", len(l.acks), want)
		}
		return nil
	})
}

// finish stops the load, reads topic-0 back and returns the
// acknowledged records that are not at their offset (lost). Before cut
// the followers were copying, so one lost from then is logged (acks=1
// allows it, a millisecond's pace makes it unlikely).
func (l *acksOneLoad) finish(t *testing.T, ctx context.Context, e *env, cut time.Time) []acksOneAck {
	t.Helper()
	l.stop()
	l.wg.Wait()
	if err := l.pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logs, err := history.ReadAll(ctx, e.c.Brokers(), l.topic)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int64]string{}
	for _, r := range logs[history.TopicPartition{Topic: l.topic, Partition: 0}] {
		at[r.Offset] = string(r.Value)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []acksOneAck
	for _, a := range l.acks {
		if at[a.offset] == a.value {
			continue
		}
		if a.at.Before(cut) {
			t.Logf("acks=1 record %s acknowledged at offset %d before the cut is not there (acks=1 allows it)", a.value, a.offset)
		}
		lost = append(lost, a)
	}
	return lost
}

// nemesisDuration is how long RandomSchedule injects faults: a short run
// in the default suite, longer with FJORD_NEMESIS_DURATION (a Go
// duration, e.g. 30m).
func nemesisDuration(t *testing.T) time.Duration {
	d := 2 * time.Minute
	if s := os.Getenv("FJORD_NEMESIS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			t.Fatalf("FJORD_NEMESIS_DURATION=%q: want a positive Go duration", s)
		}
	}
	return d
}

// nemesisSeed is the schedule's seed: FJORD_NEMESIS_SEED to replay a
// run, else a fresh one. Either way it is logged first.
func nemesisSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FJORD_NEMESIS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FJORD_NEMESIS_SEED=%q: want an unsigned integer", s)
		}
	}
	t.Logf("nemesis seed %d (FJORD_NEMESIS_SEED=%d replays this schedule)", seed, seed)
	return seed
}

// A fault of the random schedule: what it does to the cluster, and how
// it is undone.
type fault struct {
	name string
	do   func()
	undo func()
}

// Acceptance point 11: a randomized schedule of faults (SIGKILL, SIGSTOP,
// a node isolated, the cluster split in halves, a bridge (two nodes cut
// from each other, both still reaching the third), a graceful restart)
// under a queue workload: three idempotent acks=all producers writing
// keyed records (eight keys each) to six partitions, and a consumer reading every
// partition as it goes. One fault at a time, held 1-4 s, then undone,
// and the next once the producers are acknowledged again. At the end, healed, every acknowledged record is read
// back at its offset (not lost), once (not duplicated), in per-key send
// order (not reordered), and every record the consumer was given during
// the faults is still at the offset it was read at (stable: no read of a
// record that a failover later took back).
func (e *env) randomSchedule(t *testing.T) {
	duration := nemesisDuration(t)
	rng := mrand.New(mrand.NewPCG(nemesisSeed(t), 0x6e656d))
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	const topic, partitions, producers = "nemesis", 6, 3
	e.createTopic(t, ctx, topic, partitions, 3)
	checker := history.NewChecker()
	seeds := strings.Split(e.c.Brokers(), ",")

	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var clients []*kgo.Client
	var acked atomic.Int64
	for p := range producers {
		pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(100*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pr.Close)
		clients = append(clients, pr)
		wg.Go(func() {
			pace := time.NewTicker(2 * time.Millisecond)
			defer pace.Stop()
			for i := 0; loadCtx.Err() == nil; i++ {
				// Keys of its own: per-key order is a promise to one producer.
				key, value := fmt.Appendf(nil, "p%d-k%d", p, i%8), fmt.Appendf(nil, "p%d-%08d", p, i)
				checker.Sent(topic, key, value)
				pr.Produce(ctx, &kgo.Record{Key: key, Value: value}, func(r *kgo.Record, err error) {
					if err != nil {
						return // not acknowledged: may or may not be in the log, once
					}
					acked.Add(1)
					checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
				})
				select {
				case <-pace.C:
				case <-loadCtx.Done():
				}
			}
		})
	}
	// The consumer: every partition from the start, what it was given.
	var seenMu sync.Mutex
	seen := map[history.TopicPartition]map[int64]string{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: func() map[int32]kgo.Offset {
			m := map[int32]kgo.Offset{}
			for p := range int32(partitions) {
				m[p] = kgo.NewOffset().AtStart()
			}
			return m
		}()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	var consumed atomic.Int64
	wg.Go(func() {
		for loadCtx.Err() == nil {
			fs := cons.PollFetches(loadCtx)
			fs.EachRecord(func(r *kgo.Record) {
				tp := history.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				seenMu.Lock()
				if seen[tp] == nil {
					seen[tp] = map[int64]string{}
				}
				seen[tp][r.Offset] = string(r.Value)
				seenMu.Unlock()
				consumed.Add(1)
			})
		}
	})

	ids := func() []int32 {
		var out []int32
		for _, n := range e.c.Nodes() {
			out = append(out, n.ID())
		}
		return out
	}()
	pick := func() int32 { return ids[rng.IntN(len(ids))] }
	others := func(id int32) []int32 {
		return slices.DeleteFunc(slices.Clone(ids), func(o int32) bool { return o == id })
	}
	faults := []func() fault{
		func() fault {
			id := pick()
			return fault{fmt.Sprintf("SIGKILL node %d", id), func() { e.c.Kill(id) }, func() { e.c.Start(id) }}
		},
		func() fault {
			id := pick()
			sig := func(s syscall.Signal) func() {
				return func() {
					if err := e.c.Node(id).Signal(s); err != nil {
						t.Fatalf("%v to node %d: %v", s, id, err)
					}
				}
			}
			return fault{fmt.Sprintf("SIGSTOP node %d", id), sig(syscall.SIGSTOP), sig(syscall.SIGCONT)}
		},
		func() fault {
			id := pick()
			return fault{fmt.Sprintf("isolate node %d", id), func() { e.c.Isolate(id) }, e.c.Heal}
		},
		func() fault {
			id := pick()
			return fault{fmt.Sprintf("halves %d | %v", id, others(id)), func() { e.c.Split([]int32{id}, others(id)) }, e.c.Heal}
		},
		func() fault {
			bridge := pick()
			o := others(bridge)
			return fault{fmt.Sprintf("bridge: %d and %d cut apart, %d reaches both", o[0], o[1], bridge), func() { e.c.CutBoth(o[0], o[1]) }, e.c.Heal}
		},
		func() fault {
			id := pick()
			return fault{fmt.Sprintf("graceful restart of node %d", id), func() { e.c.Stop(id) }, func() { e.c.Start(id) }}
		},
	}
	t.Cleanup(func() { // a failed run leaves no fault behind for Cleanup's kill
		e.c.Heal()
		for _, n := range e.c.Nodes() {
			if n.Running() {
				_ = n.Signal(syscall.SIGCONT)
			}
		}
	})

	testutil.Eventually(t, 30*time.Second, func() error {
		if n := acked.Load(); n < 500 {
			return fmt.Errorf("%d records acknowledged before the faults, waiting for 500", n)
		}
		return nil
	})
	end := time.Now().Add(duration)
	var steps int
	for time.Now().Before(end) {
		f := faults[rng.IntN(len(faults))]()
		hold := time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		before := acked.Load()
		f.do()
		// The fault's duration is what the schedule draws, not a wait
		// for anything: the faulted cluster is left to itself that long.
		time.Sleep(hold)
		f.undo()
		undone, during := time.Now(), acked.Load()-before
		// Recovered once the producers are acknowledged again: 200 more
		// records since the undo, well within a minute, or the fault
		// left the cluster unable to take writes.
		testutil.Eventually(t, time.Minute, func() error {
			if n := acked.Load() - before - during; n < 200 {
				return fmt.Errorf("after %s was undone: %d records acknowledged, waiting for 200", f.name, n)
			}
			return nil
		})
		steps++
		t.Logf("step %d: %s for %v, %d acknowledged meanwhile; writes back %v after the undo",
			steps, f.name, hold.Round(time.Millisecond), during, time.Since(undone).Round(time.Millisecond))
	}

	// Healed and all running: the load must make progress again, and the
	// ISRs fill.
	before := acked.Load()
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := acked.Load(); n < before+1000 {
			return fmt.Errorf("%d acknowledged since the last fault, waiting for 1000", n-before)
		}
		return nil
	})
	stopLoad()
	wg.Wait()
	for _, pr := range clients {
		if err := pr.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := history.ReadAll(ctx, e.c.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checker.Verify(logs)
	if err != nil {
		t.Fatalf("after %d faults: %v", steps, err)
	}
	final := map[history.TopicPartition]map[int64]string{}
	for tp, recs := range logs {
		final[tp] = map[int64]string{}
		for _, r := range recs {
			final[tp][r.Offset] = string(r.Value)
		}
	}
	var unstable []string
	seenMu.Lock()
	for tp, byOffset := range seen {
		for o, v := range byOffset {
			if final[tp][o] != v {
				unstable = append(unstable, fmt.Sprintf("%s offset %d: read %q, the log has %q", tp, o, v, final[tp][o]))
			}
		}
	}
	seenMu.Unlock()
	if len(unstable) > 0 {
		slices.Sort(unstable)
		t.Fatalf("%d records read during the faults are not where they were read, the first: %s", len(unstable), unstable[0])
	}
	if sum.Acked == 0 || consumed.Load() == 0 {
		t.Fatalf("%v, %d consumed: the run checked nothing", sum, consumed.Load())
	}
	t.Logf("%d faults over %v: %v; %d records consumed during the run, all stable", steps, duration, sum, consumed.Load())
	e.replicasIdentical(t, topic, partitions)
}
