package txn

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Reference: C§4.4, the summary table: a new id gets a new producer id
// at epoch 0, written as an Empty record before the answer; each later
// session the same id at the next epoch.
func TestInitProducerIDNewAndBump(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("first session: (%d, %d), want (1000, 0)", pid, epoch)
	}
	hist := h.log.history(t, "t1")
	if len(hist) != 1 || hist[0].state != StateEmpty || hist[0].producerID != 1000 || hist[0].producerEpoch != 0 ||
		hist[0].timeoutMs != testTimeoutMs || hist[0].startMs != -1 {
		t.Fatalf("records %+v", hist)
	}
	for want := int16(1); want <= 3; want++ {
		if p, e := h.init("t1"); p != pid || e != want {
			t.Fatalf("session %d: (%d, %d)", want, p, e)
		}
	}
	if pid2, _ := h.init("t2"); pid2 == pid {
		t.Fatalf("two ids share producer id %d", pid)
	}
	if d := h.describe("t1"); d.State != StateEmpty || d.ProducerEpoch != 3 || d.StartTimeMs != -1 || d.TimeoutMs != testTimeoutMs {
		t.Fatalf("describe %+v", d)
	}
}

// Reference: C§4.1, checks before the id is looked up.
func TestInitProducerIDRequestChecks(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.MaxTransactionTimeout = time.Minute })
	for _, tc := range []struct {
		name      string
		id        string
		timeoutMs int32
		pid       int64
		epoch     int16
		want      error
	}{
		{"empty id", "", 1000, -1, -1, ErrInvalidRequest},
		{"only a producer id", "t", 1000, 5, -1, ErrInvalidRequest},
		{"only an epoch", "t", 1000, -1, 5, ErrInvalidRequest},
		{"zero timeout", "t", 0, -1, -1, ErrInvalidTransactionTimeout},
		{"negative timeout", "t", -5, -1, -1, ErrInvalidTransactionTimeout},
		{"above transaction.max.timeout.ms", "t", 60_001, -1, -1, ErrInvalidTransactionTimeout},
		{"an id over MaxTransactionalIDBytes", strings.Repeat("t", MaxTransactionalIDBytes+1), 1000, -1, -1, ErrInvalidRequest},
	} {
		_, _, err := h.c.InitProducerID(ctx, tc.id, tc.timeoutMs, tc.pid, tc.epoch)
		wantErr(t, tc.name, err, tc.want)
	}
	if _, _, err := h.c.InitProducerID(ctx, "t", 60_000, -1, -1); err != nil {
		t.Fatalf("the maximum timeout: %v", err)
	}
	longest := strings.Repeat("t", MaxTransactionalIDBytes)
	if _, _, err := h.c.InitProducerID(ctx, longest, 1000, -1, -1); err != nil {
		t.Fatalf("an id of MaxTransactionalIDBytes: %v", err)
	}
	if n := len(h.log.history(t, strings.Repeat("t", MaxTransactionalIDBytes+1))); n != 0 {
		t.Fatalf("%d records of the refused long id", n)
	}
	if n := len(h.log.history(t, "t")); n != 1 {
		t.Fatalf("%d records; refused requests write none", n)
	}
}

func TestDefaultMaxTransactionTimeout(t *testing.T) {
	h := newHarness(t)
	_, _, err := h.c.InitProducerID(ctx, "t", int32((15 * time.Minute).Milliseconds()), -1, -1)
	wantErr(t, "15 minutes", err, nil)
	_, _, err = h.c.InitProducerID(ctx, "t", int32((15*time.Minute).Milliseconds())+1, -1, -1)
	wantErr(t, "over 15 minutes", err, ErrInvalidTransactionTimeout)
}

// Reference: KIP-360 and C§4.2: the expected (producer id, epoch) of a
// recovering producer.
func TestInitProducerIDKIP360(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.init("t")
	h.init("t") // epoch 1

	// The current epoch: bumped, and the old one remembered.
	p, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 1)
	if err != nil || p != pid || e != 2 {
		t.Fatalf("expected current epoch: (%d, %d), %v; want (%d, 2)", p, e, err, pid)
	}
	// The answer was lost; the producer retries with the same epoch,
	// now the last one: the same answer, no second bump.
	p, e, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 1)
	if err != nil || p != pid || e != 2 {
		t.Fatalf("retry: (%d, %d), %v; want (%d, 2)", p, e, err, pid)
	}
	// An older epoch is a zombie's.
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 0)
	wantErr(t, "an older epoch", err, ErrProducerFenced)
	// Another producer id altogether.
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, pid+500, 2)
	wantErr(t, "another producer id", err, ErrProducerFenced)
	if got := ErrorForVersion(err, kmsg.InitProducerID, 3); got != ErrInvalidProducerEpoch {
		t.Fatalf("v3 answers %v, want INVALID_PRODUCER_EPOCH", got)
	}
	if _, pending := h.current("t"); pending {
		t.Fatal("a refused request left a transition pending")
	}
	if cur, _ := h.current("t"); cur.producerEpoch != 2 {
		t.Fatalf("epoch %d after refusals, want 2", cur.producerEpoch)
	}

	// An unknown id with an expectation (its id expired): a new producer
	// id at epoch 0.
	p, e, err = h.c.InitProducerID(ctx, "fresh", testTimeoutMs, 12345, 7)
	if err != nil || e != 0 || p == 12345 {
		t.Fatalf("unknown id with an expectation: (%d, %d), %v", p, e, err)
	}
}

// Reference: C§4.2 step 4, C§12.5: at an exhausted epoch a session gets
// a new producer id at epoch 0; a retry of that rotation (the old id and
// its exhausted epoch) gets the same answer.
func TestInitProducerIDRotatesAtExhaustedEpoch(t *testing.T) {
	h := newHarness(t).withMaxEpoch(4) // exhausted at 3
	pid, _ := h.init("t")
	for range 3 {
		h.init("t")
	}
	if cur, _ := h.current("t"); cur.producerEpoch != 3 {
		t.Fatalf("epoch %d, want 3", cur.producerEpoch)
	}
	p, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 3)
	if err != nil || p == pid || e != 0 {
		t.Fatalf("rotation: (%d, %d), %v; want a new producer id at 0", p, e, err)
	}
	hist := h.log.history(t, "t")
	if last := hist[len(hist)-1]; last.prevProducerID != pid || last.lastProducerEpoch != 3 {
		t.Fatalf("rotation record %+v", last)
	}
	p2, e2, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 3)
	if err != nil || p2 != p || e2 != 0 {
		t.Fatalf("retried rotation: (%d, %d), %v; want (%d, 0)", p2, e2, err, p)
	}
	// A fresh session at the exhausted epoch rotates too.
	h2 := newHarness(t).withMaxEpoch(3)
	a, _ := h2.init("u")
	h2.init("u")
	h2.init("u") // epoch 2: exhausted
	if b, e := h2.init("u"); b == a || e != 0 {
		t.Fatalf("fresh session at an exhausted epoch: (%d, %d)", b, e)
	}
}

// A retry of a bump to the exhausted epoch (the last epoch expected)
// rotates too: a client never holds an epoch it cannot bump again.
func TestInitProducerIDRetryIntoExhaustedEpoch(t *testing.T) {
	h := newHarness(t).withMaxEpoch(4)
	pid, _ := h.init("t")
	h.init("t")
	h.init("t") // epoch 2
	if _, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 2); err != nil || e != 3 {
		t.Fatalf("bump to 3: %d, %v", e, err)
	}
	p, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, pid, 2) // the retry
	if err != nil || p == pid || e != 0 {
		t.Fatalf("retry into the exhausted epoch: (%d, %d), %v", p, e, err)
	}
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, p, 7)
	wantErr(t, "a stale epoch", err, ErrProducerFenced)
}

// Reference: C§4.2 steps 1 and 3.
func TestInitProducerIDConcurrent(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0))
	release := h.markers.hold()
	if _, _, err := h.c.EndTxn(ctx, "t", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	// PrepareCommit, markers held: a new session waits.
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "PrepareCommit", err, ErrConcurrentTransactions)
	release()
	h.waitCompleted("t")
	if _, e := h.init("t"); e != epoch+1 {
		t.Fatalf("after the commit: epoch %d", e)
	}

	// A record being written: the second request is told to retry.
	releaseLog := h.log.hold()
	done := make(chan error, 1)
	go func() {
		_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
		done <- err
	}()
	testutil.Eventually(t, waitBound, func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("append not started")
		}
		return nil
	})
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "transition pending", err, ErrConcurrentTransactions)
	releaseLog()
	wantErr(t, "first request", <-done, nil)
}

// Reference: C§4.2 step 5 and C§4.4: a new session while the old one's
// transaction is Ongoing fences it (epoch+1) and aborts it; the new
// session is told CONCURRENT_TRANSACTIONS until the abort completes, and
// its retry gets the epoch after that.
func TestInitProducerIDFencesOngoing(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.add("t", pid, epoch, tp("a", 0), tp("b", 1))

	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "InitProducerID over an Ongoing transaction", err, ErrConcurrentTransactions)
	h.waitCompleted("t")

	hist := h.log.history(t, "t")
	wantStates := []State{StateEmpty, StateOngoing, StatePrepareAbort, StateCompleteAbort}
	if got := h.log.states(t, "t"); !slices.Equal(got, wantStates) {
		t.Fatalf("records %v, want %v", got, wantStates)
	}
	if abort := hist[2]; abort.producerEpoch != epoch+1 || abort.clientTransactionVersion != 0 {
		t.Fatalf("PrepareAbort %+v: the fenced epoch, V0 (the cluster's default)", abort)
	}
	for _, p := range []TopicPartition{tp("a", 0), tp("b", 1)} {
		w := h.markers.written(p)
		if len(w) != 1 || w[0].Commit || w[0].ProducerEpoch != epoch+1 || w[0].ProducerID != pid || w[0].CoordinatorEpoch != testCoordinatorEpoch {
			t.Fatalf("markers to %v: %+v", p, w)
		}
	}
	if p, e := h.init("t"); p != pid || e != epoch+2 {
		t.Fatalf("retry after the abort: (%d, %d), want (%d, %d): a takeover costs two epochs", p, e, pid, epoch+2)
	}
}

// Reference: C§12 (zombie fencing). The first producer, fenced by a
// second session, gets PRODUCER_FENCED from AddPartitionsToTxn and
// EndTxn, which old request versions see as INVALID_PRODUCER_EPOCH.
func TestZombieFenced(t *testing.T) {
	h := newHarness(t)
	pid, old := h.init("t")
	h.add("t", pid, old, tp("a", 0))
	// The second session takes over: abort, retry.
	if _, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatal(err)
	}
	h.waitCompleted("t")
	_, current := h.init("t")

	err := h.c.AddPartitionsToTxn(ctx, "t", pid, old, []TopicPartition{tp("a", 1)}, false)
	wantErr(t, "zombie AddPartitionsToTxn", err, ErrProducerFenced)
	for _, tc := range []struct {
		key     kmsg.Key
		version int16
		want    error
	}{
		{kmsg.AddPartitionsToTxn, 1, ErrInvalidProducerEpoch},
		{kmsg.AddPartitionsToTxn, 2, ErrProducerFenced},
		{kmsg.AddOffsetsToTxn, 0, ErrInvalidProducerEpoch},
		{kmsg.AddOffsetsToTxn, 3, ErrProducerFenced},
		{kmsg.EndTxn, 1, ErrInvalidProducerEpoch},
		{kmsg.EndTxn, 5, ErrProducerFenced},
		{kmsg.InitProducerID, 3, ErrInvalidProducerEpoch},
		{kmsg.InitProducerID, 4, ErrProducerFenced},
	} {
		if got := ErrorForVersion(err, tc.key, tc.version); got != tc.want {
			t.Errorf("%v v%d: %v, want %v", tc.key, tc.version, got, tc.want)
		}
	}
	if got := ErrorForVersion(ErrConcurrentTransactions, kmsg.EndTxn, 0); got != ErrConcurrentTransactions {
		t.Errorf("other errors change: %v", got)
	}
	_, _, err = h.c.EndTxn(ctx, "t", pid, old, true, false)
	wantErr(t, "zombie EndTxn v1", err, ErrProducerFenced)
	_, _, err = h.c.EndTxn(ctx, "t", pid, old, true, true)
	wantErr(t, "zombie EndTxn v5", err, ErrProducerFenced)
	errs := h.c.VerifyPartitionsInTxn("t", pid, old, []TopicPartition{tp("a", 0)})
	wantErr(t, "zombie verification", errs[0], ErrProducerFenced)
	// The new session is unharmed.
	h.add("t", pid, current, tp("a", 1))
}

// Reference: C§1.4 step 4, KAFKA-9666: a failed append changes nothing,
// so the next attempt bumps from the same epoch.
func TestInitProducerIDAppendFailureChangesNothing(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.init("t")
	h.init("t") // epoch 1
	before := len(h.log.history(t, "t"))

	for _, tc := range []struct {
		appendErr, want error
	}{
		{kerr.NotEnoughReplicas, ErrCoordinatorNotAvailable},
		{kerr.NotLeaderForPartition, ErrNotCoordinator},
		{kerr.RequestTimedOut, ErrCoordinatorNotAvailable},
		{kerr.MessageTooLarge, ErrUnknownServerError},
		{errors.New("disk on fire"), ErrCoordinatorNotAvailable},
	} {
		h.log.failNext(1, tc.appendErr)
		_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
		wantErr(t, fmt.Sprint(tc.appendErr), err, tc.want)
		cur, pending := h.current("t")
		if pending || cur.producerEpoch != 1 || cur.producerID != pid {
			t.Fatalf("after a failed append: %+v, pending %v", cur, pending)
		}
	}
	if n := len(h.log.history(t, "t")); n != before {
		t.Fatalf("%d records, want %d", n, before)
	}
	if _, e := h.init("t"); e != 2 {
		t.Fatalf("next bump: %d, want 2", e)
	}

	// A fence whose PrepareAbort fails leaves the transaction Ongoing at
	// its epoch: the next fence bumps only once.
	h.add("t", pid, 2, tp("a", 0))
	h.log.failNext(1, kerr.NotEnoughReplicas)
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "failed fence", err, ErrCoordinatorNotAvailable)
	if cur, _ := h.current("t"); cur.state != StateOngoing || cur.producerEpoch != 2 {
		t.Fatalf("after a failed fence: %+v", cur)
	}
	_, _, err = h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "fence", err, ErrConcurrentTransactions)
	h.waitCompleted("t")
	if cur, _ := h.current("t"); cur.producerEpoch != 3 {
		t.Fatalf("after the fence: epoch %d, want 3", cur.producerEpoch)
	}
}

// KAFKA-14880, Fjord's way: a new id whose first record fails is not
// kept, so nothing the log lacks is served.
func TestInitProducerIDNewIDAppendFails(t *testing.T) {
	h := newHarness(t)
	h.log.failNext(1, kerr.NotEnoughReplicas)
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "first record fails", err, ErrCoordinatorNotAvailable)
	if d := h.c.DescribeTransactions([]string{"t"})[0]; d.Err != ErrTransactionalIDNotFound {
		t.Fatalf("describe after a failed first record: %+v", d)
	}
	if p, e := h.init("t"); e != 0 || p != 1001 {
		t.Fatalf("retry: (%d, %d); want a new id at 0 (1000 was abandoned)", p, e)
	}
}

// A producer id that cannot be fetched is COORDINATOR_LOAD_IN_PROGRESS,
// which every client retries.
func TestInitProducerIDAllocationFails(t *testing.T) {
	h := newHarness(t)
	h.alloc.mu.Lock()
	h.alloc.errs = []error{kerr.NotController}
	h.alloc.mu.Unlock()
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "allocation", err, ErrCoordinatorLoadInProgress)
	if _, e := h.init("t"); e != 0 {
		t.Fatalf("retry: epoch %d", e)
	}
}

func TestRequestsForPartitionsNotLoaded(t *testing.T) {
	h := newHarness(t)
	p := PartitionFor("t", testPartitions)
	h.c.Unload(p)
	_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
	wantErr(t, "unloaded", err, ErrNotCoordinator)
	err = h.c.AddPartitionsToTxn(ctx, "t", 1, 0, []TopicPartition{tp("a", 0)}, false)
	wantErr(t, "add, unloaded", err, ErrNotCoordinator)
	_, _, err = h.c.EndTxn(ctx, "t", 1, 0, true, false)
	wantErr(t, "end, unloaded", err, ErrNotCoordinator)

	release := make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- h.c.Load(p, testCoordinatorEpoch+1, func(fn func(Record) error) error {
			<-release
			return nil
		})
	}()
	testutil.Eventually(t, waitBound, func() error {
		_, _, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
		if err != ErrCoordinatorLoadInProgress {
			return fmt.Errorf("while loading: %v", err)
		}
		return nil
	})
	if d := h.c.DescribeTransactions([]string{"t"})[0]; d.Err != ErrCoordinatorLoadInProgress {
		t.Fatalf("describe while loading: %v", d.Err)
	}
	if _, _, err := h.c.ListTransactions(ListTransactionsFilter{DurationFilterMs: -1}); err != ErrCoordinatorLoadInProgress {
		t.Fatalf("list while loading: %v", err)
	}
	errs := h.c.VerifyPartitionsInTxn("t", 1, 0, []TopicPartition{tp("a", 0)})
	wantErr(t, "verify while loading", errs[0], ErrCoordinatorLoadInProgress)
	close(release)
	wantErr(t, "load", <-loaded, nil)
	h.init("t")
}

// Many first sessions of one id at once: one record at a time, every
// answer a distinct epoch or CONCURRENT_TRANSACTIONS.
func TestInitProducerIDRacing(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	epochs := map[int16]int{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, e, err := h.c.InitProducerID(ctx, "t", testTimeoutMs, -1, -1)
				if err == ErrConcurrentTransactions {
					runtime.Gosched()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				epochs[e]++
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	if len(epochs) != 16 {
		t.Fatalf("epochs %v: want 16 distinct", epochs)
	}
	if n := h.log.overlapCount(); n != 0 {
		t.Fatalf("%d overlapping appends for one id", n)
	}
}
