package clustertest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 17, acceptance point 1: the consume-transform-produce loop
// (txn_ctp_apps_test.go) of franz-go, Sarama and librdkafka on three
// nodes, under SIGKILL of the transaction coordinator's node, of an
// output partition's leader, of the group coordinator's node, and of the
// application itself. Each run has topics, a group and transactional ids
// of its own. Its input is written in parts, one to warm up, one for
// each fault and a last one: a fault is injected inside a transaction of
// its part, with the transaction's records written and its commit to
// come, and lasts until the whole part is processed (ctpRun.underFault).
// Every run ends with the same check (ctpRun.check): the output topic,
// read with read_committed, holds each input record's result exactly
// once, in input order per key (an aborted transaction's records would
// be seen twice: the retry writes the same values), and the group's
// committed offsets are the input's end.

// ctpSessionTimeout is the group session timeout of the node-kill runs:
// long enough that the members outlive a group coordinator's failover.
const ctpSessionTimeout = 10 * time.Second

// The franz-go run: two application instances in one group, so
// rebalances fence a zombie's offset commit by generation (KIP-447).
func (e *env) consumeTransformProduce(t *testing.T) { e.ctpUnderNodeKills(t, franzCTP{}) }

// The Sarama run: as franz-go's.
func (e *env) ctpSarama(t *testing.T) { e.ctpUnderNodeKills(t, saramaCTP{}) }

// The librdkafka run: as franz-go's.
func (e *env) ctpLibrdkafka(t *testing.T) { e.ctpUnderNodeKills(t, rdkCTP{}) }

// ctpUnderNodeKills runs two instances of client's application while
// the transaction coordinator's node (of the first instance's id), an
// output partition's leader and the group coordinator's node are each
// SIGKILLed and brought back, in turn.
func (e *env) ctpUnderNodeKills(t *testing.T, client ctpClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := e.newCTPRun(t, ctx, "ctp-"+client.name())
	apps := []*ctpApp{
		r.startApp(t, client, r.config(0, ctpSessionTimeout)),
		r.startApp(t, client, r.config(1, ctpSessionTimeout)),
	}
	r.feed(t, ctx)
	r.waitProcessed(t, "before any fault", r.total())

	txnID := r.config(0, ctpSessionTimeout).txnID
	for _, fault := range []struct {
		what string
		node func() int32
	}{
		{"the transaction coordinator of " + txnID, func() int32 { return e.coordinatorOf(t, ctx, 1, txnID) }},
		{"the leader of " + r.out + "-0", func() int32 { return e.c.Leader(t, r.out, 0) }},
		{"the group coordinator of " + r.group, func() int32 { return e.coordinatorOf(t, ctx, 0, r.group) }},
	} {
		id := fault.node()
		r.underFault(t, ctx, fmt.Sprintf("node %d (%s) SIGKILLed", id, fault.what), func() (undo func()) {
			e.c.Kill(id)
			return func() { e.c.Start(id) }
		})
		// Before the next fault: one node down at a time.
		e.clusterFullISRs(t, ctx)
	}
	r.feed(t, ctx)
	_ = r.check(t, ctx, func() {
		for _, a := range apps {
			a.stop(t)
		}
	})
}

// ctpAppKills is how many times each application-kill run SIGKILLs its
// application.
const ctpAppKills = 2

// Issue 17, acceptance point 1, the application's own SIGKILL: for each
// client, one instance of the application, SIGKILLed ctpAppKills times
// inside a transaction and started again by its supervisor with the
// same transactional id and group. The new process's InitProducerId
// fences the dead one and aborts its transaction; the dead group
// member's session (6 s, the minimum) ends and the new member is given
// the partitions, from the committed offsets.
func (e *env) ctpAppKilled(t *testing.T) {
	for _, client := range ctpClients {
		t.Run(client.name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := e.newCTPRun(t, ctx, "ctp-killed-"+client.name())
			app := r.startApp(t, client, r.config(0, 6*time.Second))
			r.feed(t, ctx)
			r.waitProcessed(t, "before any kill", r.total())
			for kill := range ctpAppKills {
				r.underFault(t, ctx, fmt.Sprintf("application kill %d", kill+1), func() (undo func()) {
					t.Logf("SIGKILLed the application; its last word: %q", app.kill())
					return func() {}
				})
			}
			r.feed(t, ctx)
			// A kill inside a transaction leaves its records in the log,
			// aborted by the next session's InitProducerId. None means
			// the kills missed what they were aimed at.
			if aborted := r.check(t, ctx, func() { app.stop(t) }); aborted == 0 {
				t.Errorf("no aborted records in %s: no kill landed inside a transaction", r.out)
			}
		})
	}
}

// ctpPartitions is the partition count of every run's input and output.
const ctpPartitions = 3

// The input of every run: key kN's records carry kN-0, kN-1, ... in
// order, written in parts of ctpPartPerKey records per key. A part is
// at least three transactions (ctpBatchMax records at most each), which
// underFault counts on.
const (
	ctpKeys       = 24
	ctpPartPerKey = 25
)

// ctpRun is one run's topics, group and input, and what its
// applications report.
type ctpRun struct {
	e              *env
	name           string // the prefix of the topics, group and transactional ids
	in, out, group string
	perKey         int           // the records fed per key; only the test's goroutine uses it
	processed      atomic.Int64  // records of transactions reported committed
	restarts       atomic.Int64  // reported restarts, and processes that ended by themselves
	processStarts  atomic.Int64  // processes started after the first of each application
	begun          chan struct{} // a signal per transaction reported begun, while there is room
	mu             sync.Mutex
	restartsToLog  []string // logged by the test's goroutine, at its next wait
}

// newCTPRun creates name's input and output topics (RF 3).
func (e *env) newCTPRun(t *testing.T, ctx context.Context, name string) *ctpRun {
	t.Helper()
	r := &ctpRun{e: e, name: name, in: name + "-in", out: name + "-out", group: name, begun: make(chan struct{}, 64)}
	for _, topic := range []string{r.in, r.out} {
		e.createTopic(t, ctx, topic, ctpPartitions, 3)
		e.fullISRs(t, ctx, topic, ctpPartitions)
	}
	return r
}

// feed writes the input's next part.
func (r *ctpRun) feed(t *testing.T, ctx context.Context) {
	t.Helper()
	var recs []*kgo.Record
	for i := r.perKey; i < r.perKey+ctpPartPerKey; i++ {
		for k := range ctpKeys {
			recs = append(recs, &kgo.Record{Topic: r.in, Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d-%d", k, i)})
		}
	}
	if err := r.e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.perKey += ctpPartPerKey
}

// total is how many input records were fed.
func (r *ctpRun) total() int64 { return int64(ctpKeys * r.perKey) }

// config is application instance i's configuration.
func (r *ctpRun) config(i int, sessionTimeout time.Duration) ctpConfig {
	return ctpConfig{brokers: r.e.c.Brokers(), in: r.in, out: r.out, group: r.group,
		txnID: fmt.Sprintf("%s-%d", r.name, i), sessionTimeout: sessionTimeout}
}

// waitProcessed waits until the applications report atLeast records
// processed.
func (r *ctpRun) waitProcessed(t *testing.T, what string, atLeast int64) {
	t.Helper()
	defer r.logRestarts(t)
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := r.processed.Load(); n < atLeast {
			return fmt.Errorf("%s: %d of %d records processed", what, n, atLeast)
		}
		return nil
	})
}

// underFault feeds the input's next part (the last must be processed)
// and injects a fault inside one of its first three transactions (which
// one at random), at a random moment of the first half of ctpHoldOpen:
// its records are written, its commit is to come. The fault lasts until
// the applications have processed the whole part; then undo, which
// inject returns, ends it (on every exit path).
func (r *ctpRun) underFault(t *testing.T, ctx context.Context, what string, inject func() (undo func())) {
	t.Helper()
	for len(r.begun) > 0 { // the last part's
		<-r.begun
	}
	r.feed(t, ctx)
	for range 1 + mrand.IntN(3) {
		select {
		case <-r.begun:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no transaction begun in 60 s; %d of %d records processed", what, r.processed.Load(), r.total())
		}
	}
	time.Sleep(time.Duration(mrand.Int64N(int64(ctpHoldOpen / 2))))
	from, start := r.processed.Load(), time.Now()
	undo := inject()
	defer undo()
	r.waitProcessed(t, what, r.total())
	t.Logf("%s: records %d to %d processed in %v with the fault", what, from, r.total(), time.Since(start).Round(time.Millisecond))
}

// check waits until the group has committed the input's end, stops the
// applications, and checks the output: every input value exactly once,
// in input order per key. It returns how many records of aborted
// transactions the output's log holds.
func (r *ctpRun) check(t *testing.T, ctx context.Context, stop func()) (aborted int) {
	t.Helper()
	e := r.e
	adm := kadm.NewClient(e.cl)
	ends, err := adm.ListEndOffsets(ctx, r.in)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer r.logRestarts(t)
		testutil.Eventually(t, 90*time.Second, func() error {
			committed, err := adm.FetchOffsets(ctx, r.group)
			if err != nil {
				return err
			}
			var behind []string
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := committed.Lookup(o.Topic, o.Partition)
				if !ok || c.At != o.Offset {
					behind = append(behind, fmt.Sprintf("%s-%d at %d of %d", o.Topic, o.Partition, c.At, o.Offset))
				}
			})
			if len(behind) > 0 {
				return fmt.Errorf("group %s behind: %v (%d records reported processed)", r.group, behind, r.processed.Load())
			}
			return nil
		})
	}()
	stop()
	r.logRestarts(t)

	seen := map[string]int{}
	last := map[string]int{} // key -> the last sequence read
	committed := e.readToEnd(t, ctx, r.out, ctpPartitions, true)
	for _, rec := range committed {
		v := string(rec.Value)
		seen[v]++
		k, seqText, _ := strings.Cut(v, "-")
		seq, err := strconv.Atoi(seqText)
		if err != nil || k != string(rec.Key) {
			t.Fatalf("output record %q with key %q is no input's result", v, rec.Key)
		}
		if prev, ok := last[k]; ok && seq <= prev {
			t.Errorf("key %s: %s after %s-%d: out of input order", k, v, k, prev)
		}
		last[k] = seq
	}
	var missing, dups int
	for k := range ctpKeys {
		for i := range r.perKey {
			switch n := seen[fmt.Sprintf("k%d-%d", k, i)]; {
			case n == 0:
				missing++
			case n > 1:
				dups++
			}
		}
	}
	total := r.total()
	if missing > 0 || dups > 0 || len(seen) != int(total) {
		t.Fatalf("output: %d distinct values of %d, %d missing, %d duplicated", len(seen), total, missing, dups)
	}
	// What the faults cost: the records of aborted transactions, which
	// only read_uncommitted sees.
	aborted = len(e.readToEnd(t, ctx, r.out, ctpPartitions, false)) - len(committed)
	t.Logf("%s: %d input records transformed exactly once; %d restarts, %d processes started again; %d records of aborted transactions in the output's log",
		r.name, total, r.restarts.Load(), r.processStarts.Load(), aborted)
	return aborted
}

// coordinatorOf is the node FindCoordinator names for key (type 0: a
// group, 1: a transactional id), once one is named.
func (e *env) coordinatorOf(t *testing.T, ctx context.Context, keyType int8, key string) int32 {
	t.Helper()
	var node int32
	testutil.Eventually(t, 30*time.Second, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = keyType, key
		resp, err := req.RequestWith(ctx, e.cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		node = resp.NodeID
		return nil
	})
	return node
}
