package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is every test's start time on the fake clock.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// waitBound bounds waits for conditions that hold within milliseconds (a
// goroutine reaching a lock or a timer). Tests never wait on time: the
// fake clock moves only when a test advances it.
const waitBound = 5 * time.Second

const (
	testPartitions       = 4
	testCoordinatorEpoch = 7
	testTimeoutMs        = 60_000
	// periodicTimers is how many timers an idle coordinator has armed:
	// the timeout check and the expiration check.
	periodicTimers = 2
)

var ctx = context.Background()

// memLog is the in-memory Log the tests run against: per partition, every
// record appended, in order. Tests can make appends fail or hold them.
type memLog struct {
	mu struct {
		sync.Mutex
		parts map[int32][]Record
		fail  error         // while set, every Append fails with it
		failN int           // fail only the next failN appends (0: while fail is set)
		gate  chan struct{} // while set, Append waits for it to close
		// gateIgnoresCtx: an append at the gate waits for it even when
		// its context ends, as a write already on its way to the
		// replicas would.
		gateIgnoresCtx bool
		waiting        int        // appends waiting at the gate
		appends        int        // successful appends
		batches        [][]Record // every successful append's records
		// inFlight and overlaps check Log's contract that one id's
		// appends never overlap.
		inFlight map[string]bool
		overlaps int
	}
}

func newMemLog() *memLog {
	l := &memLog{}
	l.mu.parts = make(map[int32][]Record)
	l.mu.inFlight = make(map[string]bool)
	return l
}

func (l *memLog) Append(ctx context.Context, p int32, recs []Record) error {
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		id, err := decodeTxnKey(r.Key)
		if err != nil {
			panic(fmt.Sprintf("appended a bad key: %v", err))
		}
		ids = append(ids, id)
	}
	l.mu.Lock()
	for _, id := range ids {
		if l.mu.inFlight[id] {
			l.mu.overlaps++
		}
		l.mu.inFlight[id] = true
	}
	gate, ignoreCtx := l.mu.gate, l.mu.gateIgnoresCtx
	if gate != nil {
		l.mu.waiting++
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		for _, id := range ids {
			delete(l.mu.inFlight, id)
		}
		l.mu.Unlock()
	}()
	if gate != nil {
		if ignoreCtx {
			<-gate
		} else {
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		l.mu.Lock()
		l.mu.waiting--
		l.mu.Unlock()
		if err := ctx.Err(); err != nil && !ignoreCtx {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.fail != nil {
		err := l.mu.fail
		if l.mu.failN > 0 {
			if l.mu.failN--; l.mu.failN == 0 {
				l.mu.fail = nil
			}
		}
		return err
	}
	batch := make([]Record, 0, len(recs))
	for _, r := range recs {
		batch = append(batch, Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)})
	}
	l.mu.parts[p] = append(l.mu.parts[p], batch...)
	l.mu.batches = append(l.mu.batches, batch)
	l.mu.appends++
	return nil
}

// setFail makes every append fail with err (nil: none).
func (l *memLog) setFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.fail, l.mu.failN = err, 0
}

// failNext makes the next n appends fail with err.
func (l *memLog) failNext(n int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.fail, l.mu.failN = err, n
}

// hold makes appends wait until the returned release is called.
func (l *memLog) hold() (release func()) { return l.holdGate(false) }

// holdIgnoringCtx is hold for appends that land even if their context
// ends while they wait.
func (l *memLog) holdIgnoringCtx() (release func()) { return l.holdGate(true) }

func (l *memLog) holdGate(ignoreCtx bool) (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gate := make(chan struct{})
	l.mu.gate, l.mu.gateIgnoresCtx = gate, ignoreCtx
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.mu.gate = nil
			l.mu.Unlock()
			close(gate)
		})
	}
}

func (l *memLog) waitingAppends() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.waiting
}

func (l *memLog) appendCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.appends
}

func (l *memLog) overlapCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.overlaps
}

func (l *memLog) appendedBatches() [][]Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.batches)
}

func (l *memLog) records(p int32) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.parts[p])
}

// add appends records to partition p directly, as a previous leader
// would have.
func (l *memLog) add(p int32, recs ...Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.parts[p] = append(l.mu.parts[p], recs...)
}

// reader is Load's read function over partition p as it is when read.
func (l *memLog) reader(p int32) func(fn func(Record) error) error {
	return func(fn func(Record) error) error {
		for _, r := range l.records(p) {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// history returns id's records, decoded, oldest first (a tombstone is a
// transit with state Dead).
func (l *memLog) history(t testing.TB, id string) []transit {
	t.Helper()
	var out []transit
	for _, r := range l.records(PartitionFor(id, testPartitions)) {
		rid, err := decodeTxnKey(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		if rid != id {
			continue
		}
		if r.Value == nil {
			out = append(out, transit{state: StateDead})
			continue
		}
		v, err := decodeTxnValue(r.Value)
		if err != nil {
			t.Fatalf("record of %q: %v", id, err)
		}
		out = append(out, v)
	}
	return out
}

// states is history's states.
func (l *memLog) states(t testing.TB, id string) []State {
	t.Helper()
	var out []State
	for _, v := range l.history(t, id) {
		out = append(out, v.state)
	}
	return out
}

// fakeMarkers is the MarkerSender the tests run against. Each partition
// answers, in turn, the errors queued for it, then nil. Every call is
// recorded.
type fakeMarkers struct {
	mu struct {
		sync.Mutex
		calls   []Marker
		queued  map[TopicPartition][]error
		written map[TopicPartition][]Marker // markers answered nil, per partition
		gate    chan struct{}               // while set, calls wait for it to close
	}
}

func newFakeMarkers() *fakeMarkers {
	f := &fakeMarkers{}
	f.mu.queued = make(map[TopicPartition][]error)
	f.mu.written = make(map[TopicPartition][]Marker)
	return f
}

func (f *fakeMarkers) WriteTxnMarkers(ctx context.Context, m Marker) []error {
	m.Partitions = slices.Clone(m.Partitions)
	f.mu.Lock()
	gate := f.mu.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			errs := make([]error, len(m.Partitions))
			for i := range errs {
				errs[i] = ctx.Err()
			}
			return errs
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.calls = append(f.mu.calls, m)
	errs := make([]error, len(m.Partitions))
	for i, tp := range m.Partitions {
		if q := f.mu.queued[tp]; len(q) > 0 {
			errs[i], f.mu.queued[tp] = q[0], q[1:]
			continue
		}
		one := m
		one.Partitions = []TopicPartition{tp}
		f.mu.written[tp] = append(f.mu.written[tp], one)
	}
	return errs
}

// queue makes tp answer errs, one per call, before it answers nil.
func (f *fakeMarkers) queue(tp TopicPartition, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.queued[tp] = append(f.mu.queued[tp], errs...)
}

func (f *fakeMarkers) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate := make(chan struct{})
	f.mu.gate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.mu.gate = nil
			f.mu.Unlock()
			close(gate)
		})
	}
}

func (f *fakeMarkers) calls() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mu.calls)
}

func (f *fakeMarkers) written(tp TopicPartition) []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mu.written[tp])
}

// harness is a coordinator over every test partition, loaded at
// testCoordinatorEpoch, on a fake clock, with an in-memory log, fake
// markers and producer ids from 1000 up.
type harness struct {
	t       *testing.T
	clock   *clock.Fake
	log     *memLog
	markers *fakeMarkers
	alloc   *fakeAllocator
	c       *Coordinator
}

func newHarness(t *testing.T, configure ...func(*Config)) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		clock:   clock.NewFake(t0),
		log:     newMemLog(),
		markers: newFakeMarkers(),
		alloc:   &fakeAllocator{blockSize: 10, next: 1000},
	}
	cfg := Config{TransactionPartitions: testPartitions, Clock: h.clock}
	for _, f := range configure {
		f(&cfg)
	}
	h.c = New(cfg, h.log, h.markers, NewProducerIDManager(h.alloc, 1))
	t.Cleanup(h.c.Close)
	for p := int32(0); p < testPartitions; p++ {
		if err := h.c.Load(p, testCoordinatorEpoch, h.log.reader(p)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// withMaxEpoch lowers the producer epoch limit, to reach exhaustion in a
// few bumps. Call before any request.
func (h *harness) withMaxEpoch(maxEpoch int16) *harness {
	h.c.maxEpoch = maxEpoch
	return h
}

func (h *harness) init(id string) (int64, int16) {
	h.t.Helper()
	pid, epoch, err := h.c.InitProducerID(ctx, id, testTimeoutMs, -1, -1)
	if err != nil {
		h.t.Fatalf("InitProducerID(%q): %v", id, err)
	}
	return pid, epoch
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...TopicPartition) {
	h.t.Helper()
	if err := h.c.AddPartitionsToTxn(ctx, id, pid, epoch, tps, false); err != nil {
		h.t.Fatalf("AddPartitionsToTxn(%q): %v", id, err)
	}
}

// endV1 ends id's transaction through the V1 path and waits for it to
// complete.
func (h *harness) endV1(id string, pid int64, epoch int16, commit bool) {
	h.t.Helper()
	if _, _, err := h.c.EndTxn(ctx, id, pid, epoch, commit, false); err != nil {
		h.t.Fatalf("EndTxn(%q): %v", id, err)
	}
	h.waitCompleted(id)
}

// describe returns id's description, failing on an error.
func (h *harness) describe(id string) TransactionDescription {
	h.t.Helper()
	d := h.c.DescribeTransactions([]string{id})[0]
	if d.Err != nil {
		h.t.Fatalf("DescribeTransactions(%q): %v", id, d.Err)
	}
	return d
}

// current returns id's committed values and whether a transition is
// pending.
func (h *harness) current(id string) (transit, bool) {
	h.t.Helper()
	_, m, err := h.c.lockMetadata(id)
	if err != nil || m == nil {
		h.t.Fatalf("metadata of %q: %v (nil: %v)", id, err, m == nil)
	}
	defer m.mu.Unlock()
	return m.mu.cur, m.mu.pending != nil
}

// waitCompleted waits until id is in a state with nothing pending and no
// markers outstanding.
func (h *harness) waitCompleted(id string) {
	h.t.Helper()
	testutil.Eventually(h.t, waitBound, func() error {
		cur, pending := h.current(id)
		if pending || cur.state.isPrepare() {
			return fmt.Errorf("%q is %v, pending %v", id, cur.state, pending)
		}
		return nil
	})
}

// waitTimers waits until the fake clock has n timers armed (a marker
// goroutine has gone to sleep on its backoff).
func (h *harness) waitTimers(n int) {
	h.t.Helper()
	testutil.Eventually(h.t, waitBound, func() error {
		if got := h.clock.Timers(); got != n {
			return fmt.Errorf("%d timers armed, want %d", got, n)
		}
		return nil
	})
}

// tp is a TopicPartition literal's shorthand.
func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

// errName is a kerr error's name, any other error's text.
func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// wantErr fails unless err is want (both may be nil).
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || (err == nil) != (want == nil) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// mustPanic fails unless f panics.
func mustPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

// waitAppends waits until n appends are held at the log's gate.
func waitAppends(t testing.TB, l *memLog, n int) {
	t.Helper()
	testutil.Eventually(t, waitBound, func() error {
		if got := l.waitingAppends(); got != n {
			return fmt.Errorf("%d appends waiting, want %d", got, n)
		}
		return nil
	})
}
