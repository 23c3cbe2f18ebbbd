package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 18, point 5: `fjord topic migrate` of a keyed topic from 4 to 16
// partitions on the cluster of three, under continuous produce and a
// consumer group, with the migrating process killed (SIGKILL, a
// failpoint, internal/failpoint) once at every step and run again:
// every acknowledged record is in the destination exactly once, each
// key's records in the order produced across the cutover, and the
// group resumes on the destination from where it was (every record
// consumed, few twice). The producers' pause at a cutover is measured
// by BenchmarkMigrateCutover.
func TestMigrateKeyedTopic(t *testing.T) {
	c := threeNodes(t)
	suffix := fmt.Sprintf("-run%d", sharedRuns.Add(1))
	g := target{brokers: c.Brokers(), nodes: c.Nodes(), topicSuffix: suffix}
	ctx := testContext(t, 4*time.Minute)
	src, dst, group := g.topic("orders"), g.topic("orders-v2"), g.topic("billing")
	g.createTopic(ctx, t, src, 4)

	w := startMigrationWorkload(ctx, t, g, src, dst, group)
	w.waitConsumed(t, 500)
	for _, run := range []struct {
		failpoint string
		cutover   bool
	}{
		{"migrate.created", false},     // the destination exists, the copy has not begun
		{"migrate.uncommitted", false}, // inside the transaction that records the first checkpoint
		{"migrate.copied", false},      // after the first chunk's transaction
		{"", false},                    // catches up and stops
		{"migrate.sealed", true},       // the source refuses produces; nothing drained
		{"migrate.drained", true},      // drained; the destination still closed
		{"migrate.opened", true},       // open; the groups not moved
		{"migrate.group", true},        // the group moved, the migration not done
		{"", true},
	} {
		args := []string{src, dst, "--partitions", "16"}
		if run.cutover {
			args = append(args, "--cutover")
		}
		runMigrate(ctx, t, g, run.failpoint, args...)
		if run.failpoint == "migrate.sealed" {
			// The source names where produces go now, once its
			// leader has applied the seal (the run died before it
			// asked).
			cl := newClient(t, g, fjordmsg.ClientOpts()...)
			leader := cl.Broker(int(c.Leader(t, src, 0)))
			eventually(t, 10*time.Second, func() error {
				req := &fjordmsg.DescribePositionsRequest{Version: 1, Topics: []fjordmsg.DescribePositionsTopic{{Topic: src, Partitions: []fjordmsg.DescribePositionsPartition{{Partition: 0}}}}}
				resp, err := leader.Request(ctx, req)
				if err != nil {
					return err
				}
				if p := resp.(*fjordmsg.DescribePositionsResponse).Topics[0].Partitions[0]; p.MigratedTo != dst {
					return fmt.Errorf("the leader of %s-0 says it is migrated to %q", src, p.MigratedTo)
				}
				return nil
			})
			err := testutil.ProduceOnce(ctx, leader, src, 1)
			if !errors.Is(err, kerr.InvalidTopicException) || !strings.Contains(err.Error(), dst) {
				t.Fatalf("a produce to the sealed source: %v, want INVALID_TOPIC_EXCEPTION naming %s", err, dst)
			}
			// The destination takes only the copy until the drain
			// ends: a produce waits for it, up to its timeout.
			err = testutil.ProduceOnceTimeout(ctx, cl.Broker(int(c.Leader(t, dst, 0))), dst, 1, 200*time.Millisecond)
			if !errors.Is(err, kerr.RequestTimedOut) || !strings.Contains(err.Error(), "not cut over") {
				t.Fatalf("a produce to the destination before the drain: %v, want REQUEST_TIMED_OUT saying why", err)
			}
		}
	}
	w.produceMore(t, 300)
	w.stop(t)
	w.check(ctx, t)
}

// runMigrate runs `fjord topic migrate` as its own process. With a
// failpoint it must die by SIGKILL there; without, it must succeed.
func runMigrate(ctx context.Context, t testing.TB, b brokers, failpoint string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append([]string{"topic", "migrate"}, args...)...)
	cmd.Env = append(os.Environ(), "FJORD_BROKERS="+b.Brokers())
	marker := ""
	if failpoint != "" {
		marker = filepath.Join(t.TempDir(), "fired")
		cmd.Env = append(cmd.Env, "FJORD_FAILPOINT="+failpoint+"@"+marker)
	}
	out, err := cmd.CombinedOutput()
	t.Logf("fjord topic migrate %s (failpoint %q):\n%s", strings.Join(args, " "), failpoint, out)
	if failpoint == "" {
		if err != nil {
			t.Fatalf("migrate: %v", err)
		}
		return
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("migrate with failpoint %s: %v, want death by SIGKILL", failpoint, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("failpoint %s did not fire: %v", failpoint, err)
	}
}

// migrationWorkload is an application that lives through a migration:
// a producer of keyed records (a sequence number per key) that moves to
// the destination when the source refuses it, and a group consumer that
// reads the source to its end once the destination is open, leaves, and
// starts again on the destination once its group has offsets there.
type migrationWorkload struct {
	g                target
	src, dst, group  string
	cancel           context.CancelFunc
	produced, ended  chan struct{}
	consumerStopping chan struct{}
	consumed         chan struct{}

	mu struct {
		sync.Mutex
		acked     map[string]int // key -> records acknowledged (seq 0..n-1)
		onSource  int
		consumed  map[string]map[int]int // key -> seq -> times
		records   int
		pause     time.Duration
		produceTo string
		extra     int // records to produce before stopping, once asked
		err       error
	}
}

const migrationKeys = 32

func startMigrationWorkload(ctx context.Context, t testing.TB, g target, src, dst, group string) *migrationWorkload {
	ctx, cancel := context.WithCancel(ctx)
	w := &migrationWorkload{g: g, src: src, dst: dst, group: group, cancel: cancel,
		produced: make(chan struct{}), ended: make(chan struct{}), consumerStopping: make(chan struct{}), consumed: make(chan struct{})}
	w.mu.acked = map[string]int{}
	w.mu.consumed = map[string]map[int]int{}
	w.mu.produceTo = src
	w.mu.extra = -1
	t.Cleanup(func() {
		cancel()
		<-w.produced
		<-w.ended
	})
	go w.produce(ctx, t)
	go w.consume(ctx, t)
	return w
}

func (w *migrationWorkload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err == nil {
		w.mu.err = err
	}
}

// produce sends a batch of 16 records every 20 ms (800 a second), each
// key's records in sequence, synchronously: a record refused by the
// sealed source goes to the destination, after the records of its key
// that the source acknowledged.
func (w *migrationWorkload) produce(ctx context.Context, t testing.TB) {
	defer close(w.produced)
	opts := []kgo.Opt{kgo.SeedBrokers(seedBrokers(w.g)...), kgo.ProducerLinger(0)}
	srcP, err := kgo.NewClient(opts...)
	if err != nil {
		w.fail(err)
		return
	}
	defer srcP.Close()
	dstP, err := kgo.NewClient(opts...)
	if err != nil {
		w.fail(err)
		return
	}
	defer dstP.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	next := 0
	seq := map[string]int{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		to, extra := w.mu.produceTo, w.mu.extra
		w.mu.Unlock()
		if extra == 0 {
			return
		}
		batch := make([]*kgo.Record, 16)
		for i := range batch {
			k := fmt.Sprintf("k%02d", next%migrationKeys)
			next++
			batch[i] = &kgo.Record{Topic: to, Key: []byte(k), Value: []byte(strconv.Itoa(seq[k]))}
			seq[k]++
		}
		cl := srcP
		if to == w.dst {
			cl = dstP
		}
		var refused []*kgo.Record
		for _, r := range cl.ProduceSync(ctx, batch...) {
			switch {
			case r.Err == nil:
				w.ack(r.Record, to)
			case to == w.src && errors.Is(r.Err, kerr.InvalidTopicException):
				refused = append(refused, r.Record)
			case ctx.Err() != nil:
				return
			default:
				w.fail(fmt.Errorf("producing to %s: %w", to, r.Err))
				return
			}
		}
		if len(refused) > 0 {
			t.Logf("%s refused %d records at %v", w.src, len(refused), time.Now())
			// The cutover: the rest goes to the destination, which
			// takes it once the drain is over (until then a produce
			// to it waits).
			refusedAt := time.Now()
			for _, r := range refused {
				r.Topic = w.dst
			}
			for _, res := range dstP.ProduceSync(ctx, refused...) {
				if res.Err != nil {
					w.fail(fmt.Errorf("producing to %s after the cutover: %w", w.dst, res.Err))
					return
				}
				w.ack(res.Record, w.dst)
			}
			w.mu.Lock()
			w.mu.produceTo = w.dst
			w.mu.pause = time.Since(refusedAt)
			w.mu.Unlock()
			t.Logf("producer moved to %s: paused %v", w.dst, time.Since(refusedAt))
		}
		if extra > 0 && to == w.dst {
			w.mu.Lock()
			w.mu.extra = max(0, w.mu.extra-len(batch))
			w.mu.Unlock()
		}
	}
}

func (w *migrationWorkload) ack(r *kgo.Record, topic string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := string(r.Key)
	if n, _ := strconv.Atoi(string(r.Value)); n != w.mu.acked[k] {
		// Synchronous batches keep a key's acknowledgements in order.
		w.mu.err = cmpErr(w.mu.err, fmt.Errorf("key %s: acknowledged seq %d after %d", k, n, w.mu.acked[k]))
	}
	w.mu.acked[k]++
	if topic == w.src {
		w.mu.onSource++
	}
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// consume runs the group on the source, then on the destination.
func (w *migrationWorkload) consume(ctx context.Context, t testing.TB) {
	defer close(w.ended)
	if err := w.consumeSource(ctx); err != nil {
		if ctx.Err() == nil {
			w.fail(err)
		}
		return
	}
	// Wait for the migration to move the group's offsets.
	adm, closeAdm, err := w.admin()
	if err != nil {
		w.fail(err)
		return
	}
	defer closeAdm()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		offs, err := adm.FetchOffsets(ctx, w.group)
		if err == nil && len(offs[w.dst]) > 0 {
			t.Logf("group %s moved to %s at %v", w.group, w.dst, offs[w.dst])
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	if err := w.consumeTopic(ctx, w.dst, func(*kgo.Client) bool {
		select {
		case <-w.consumerStopping:
			return w.caughtUp(ctx, adm, w.dst)
		default:
			return false
		}
	}); err != nil && ctx.Err() == nil {
		w.fail(err)
	}
}

// consumeSource reads the source until the destination is open (the
// drain is over, so the source's end is final) and the group has
// consumed and committed up to that end; then it leaves the group.
func (w *migrationWorkload) consumeSource(ctx context.Context) error {
	adm, closeAdm, err := w.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	return w.consumeTopic(ctx, w.src, func(cl *kgo.Client) bool {
		rcs, err := adm.DescribeTopicConfigs(ctx, w.dst)
		if err != nil {
			return false
		}
		rc, err := rcs.On(w.dst, nil)
		if err != nil || rc.Err != nil {
			return false // not created yet
		}
		for _, c := range rc.Configs {
			if c.Key == metadata.MigratingFromConfig && c.Value != nil && *c.Value != "" {
				return false // not open yet
			}
		}
		return w.caughtUp(ctx, adm, w.src)
	})
}

// caughtUp reports whether the group's committed offsets have reached
// topic's end.
func (w *migrationWorkload) caughtUp(ctx context.Context, adm *kadm.Client, topic string) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	offs, err := adm.FetchOffsets(ctx, w.group)
	if err != nil {
		return false
	}
	done := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := offs.Lookup(topic, o.Partition)
		if o.Offset > 0 && (!ok || c.At < o.Offset) {
			done = false
		}
	})
	return done
}

// consumeTopic runs the group on topic, committing after every poll,
// until done says so (asked every 100 ms); then the member leaves.
func (w *migrationWorkload) consumeTopic(ctx context.Context, topic string, done func(*kgo.Client) bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedBrokers(w.g)...),
		kgo.ConsumerGroup(w.group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close() // leaves the group
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return fmt.Errorf("consuming %s: %w", topic, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			w.mu.Lock()
			k := string(r.Key)
			if w.mu.consumed[k] == nil {
				w.mu.consumed[k] = map[int]int{}
			}
			n, _ := strconv.Atoi(string(r.Value))
			w.mu.consumed[k][n]++
			w.mu.records++
			w.mu.Unlock()
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("committing on %s: %w", topic, err)
		}
		if done(cl) {
			return nil
		}
	}
}

func (w *migrationWorkload) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedBrokers(w.g)...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// waitConsumed waits until the group has consumed n records.
func (w *migrationWorkload) waitConsumed(t testing.TB, n int) {
	testutil.Eventually(t, time.Minute, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.mu.err != nil {
			t.Fatal(w.mu.err)
		}
		if w.mu.records < n {
			return fmt.Errorf("consumed %d of %d", w.mu.records, n)
		}
		return nil
	})
}

// produceMore lets the producer write n more records to the destination
// and waits for them.
func (w *migrationWorkload) produceMore(t testing.TB, n int) {
	testutil.Eventually(t, 30*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.mu.err != nil {
			t.Fatal(w.mu.err)
		}
		if w.mu.produceTo != w.dst {
			return fmt.Errorf("the producer is on %s after the cutover", w.mu.produceTo)
		}
		return nil
	})
	w.mu.Lock()
	w.mu.extra = n
	w.mu.Unlock()
	<-w.produced
}

// stop waits for the consumer to read the destination to its end.
func (w *migrationWorkload) stop(t testing.TB) {
	close(w.consumerStopping)
	<-w.ended
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		t.Fatal(w.mu.err)
	}
}

// check reads the destination from its start: every acknowledged record
// once, each key's in order; and every one consumed by the group.
func (w *migrationWorkload) check(ctx context.Context, t testing.TB) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, n := range w.mu.acked {
		total += n
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedBrokers(w.g)...), kgo.ConsumeTopics(w.dst),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]int{}
	partitionOf := map[string]int32{}
	seen := 0
	for seen < total {
		pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pollCtx)
		timedOut := pollCtx.Err() != nil
		cancel()
		if timedOut {
			adm := kadm.NewClient(cl)
			hw, _ := adm.ListEndOffsets(ctx, w.dst)
			lso, _ := adm.ListCommittedOffsets(ctx, w.dst)
			t.Fatalf("read %d of %d acknowledged records from %s (high watermarks %v, last stable offsets %v)", seen, total, w.dst, hw, lso)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			k := string(r.Key)
			n, _ := strconv.Atoi(string(r.Value))
			if n != next[k] {
				t.Errorf("%s: key %s has seq %d at %d/%d, want %d (a duplicate, a gap or out of order)", w.dst, k, n, r.Partition, r.Offset, next[k])
			}
			next[k] = n + 1
			if p, ok := partitionOf[k]; ok && p != r.Partition {
				t.Errorf("%s: key %s in partitions %d and %d", w.dst, k, p, r.Partition)
			}
			partitionOf[k] = r.Partition
		})
	}
	for k, n := range w.mu.acked {
		if next[k] != n {
			t.Errorf("%s: key %s has %d records, %d acknowledged", w.dst, k, next[k], n)
		}
	}
	// A last poll: nothing after the acknowledged records.
	pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if fs := cl.PollFetches(pollCtx); fs.NumRecords() > 0 {
		t.Errorf("%s has %d records beyond the %d acknowledged", w.dst, fs.NumRecords(), total)
	}
	cancel()
	// The group: every acknowledged record consumed, and only a chunk's
	// worth again after the move (not the destination from its start).
	again := 0
	for k, n := range w.mu.acked {
		for seq := range n {
			switch times := w.mu.consumed[k][seq]; {
			case times == 0:
				t.Errorf("group %s never consumed %s seq %d", w.group, k, seq)
			case times > 1:
				again += times - 1
			}
		}
	}
	t.Logf("%d records acknowledged (%d on %s before the cutover), %d consumed, %d of them again; producer paused %v at the cutover",
		total, w.mu.onSource, w.src, w.mu.records, again, w.mu.pause)
	if again > w.mu.onSource/2 {
		t.Errorf("the group consumed %d records again after its move: it did not resume where it was", again)
	}
}

// BenchmarkMigrateCutover is issue 18 point 5's pause: the time from a
// producer's first record refused by the sealed source to its records
// acknowledged by the destination, on the cluster of three, under the
// same workload as TestMigrateKeyedTopic (800 keyed records a second
// over 32 keys, a group consuming), 4 to 16 partitions, the migration
// run once to catch up and once with --cutover, nothing killed. Each
// iteration migrates a topic of its own; the result is checked as in
// the test. Reported: the median and the longest pause of the
// iterations.
//
//	go test ./internal/e2e -run '^$' -bench BenchmarkMigrateCutover -benchtime 5x
func BenchmarkMigrateCutover(b *testing.B) {
	c := testcluster.StartCluster(b, testcluster.ClusterOptions{Nodes: 3})
	g := target{brokers: c.Brokers(), nodes: c.Nodes()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newBenchClient(b, g))
	var pauses []time.Duration
	for i := range b.N {
		src, dst, group := fmt.Sprintf("bench-%d", i), fmt.Sprintf("bench-%d-v2", i), fmt.Sprintf("bench-group-%d", i)
		resp, err := adm.CreateTopic(ctx, 4, -1, nil, src)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.Fatal(err)
		}
		w := startMigrationWorkload(ctx, b, g, src, dst, group)
		w.waitConsumed(b, 2000)
		runMigrate(ctx, b, g, "", src, dst, "--partitions", "16")
		runMigrate(ctx, b, g, "", src, dst, "--cutover")
		w.produceMore(b, 300)
		w.stop(b)
		w.check(ctx, b)
		w.mu.Lock()
		pauses = append(pauses, w.mu.pause)
		w.mu.Unlock()
	}
	slices.Sort(pauses)
	b.ReportMetric(float64(pauses[len(pauses)/2].Milliseconds()), "median-pause-ms")
	b.ReportMetric(float64(pauses[len(pauses)-1].Milliseconds()), "max-pause-ms")
}

func newBenchClient(b *testing.B, g target) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedBrokers(g)...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}
