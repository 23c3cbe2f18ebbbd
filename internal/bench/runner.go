package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// How a run goes (Run):
//
//  1. Create the topics (fresh names each run, so a consumer reading from
//     the start reads only this run's records).
//  2. Start the consumers, so they are reading before the first record
//     is sent and end-to-end latency is real. (A catch-up run starts them
//     at step 5 instead.)
//  3. Start the producers, each with its share of producerRate, staggered
//     across one send interval so the producers do not fire in unison.
//  4. Warmup (not measured), then the measured window: testDurationSeconds
//     long, or until messageCount records are sent; a catch-up run
//     instead writes its backlog, measured as produce.
//  5. Drain: flush the producers, then wait until every subscription has
//     received every acknowledged record (bounded: consumers that make no
//     progress for DrainTimeout end the wait). A catch-up run's measured
//     consume is this step.
//  6. Sanity checks that fail the run: every send completed without
//     error, and each subscription received each acknowledged record
//     exactly once, intact.
//
// Threads: Run's goroutine creates everything and walks the phases; one
// goroutine per producer (producerTask.run) and per consumer
// (Consumer.Run) does the sending and receiving; the driver completes
// sends on its own goroutines; the monitor goroutine samples throughput,
// prints progress and samples the node's memory once a second.

// DefaultDrainTimeout is RunOptions.DrainTimeout's default.
const DefaultDrainTimeout = 30 * time.Second

// RunOptions are the parts of a run that are not the workload's shape.
type RunOptions struct {
	// Nodes are the processes of the system under test on this machine
	// (each node of a cluster, each server of a peer's); the result
	// reports each one's peak memory and CPU time, in this order. nil:
	// none is measured.
	Nodes []NodeProcess
	// Progress receives a progress line every second, rewritten in place
	// when it is a terminal, else one line every 5 seconds. nil: none.
	Progress io.Writer
	// DrainTimeout bounds the producers' final flush, and how long the
	// consumers may go without receiving anything while records are
	// still owed to them (default DefaultDrainTimeout).
	DrainTimeout time.Duration
	// TopicPrefix names the run's topics <prefix>0, <prefix>1, ...
	// (default "bench-<workload>-<random hex>-").
	TopicPrefix string
	// Seed seeds payload bytes and keys; 0 picks one at random.
	Seed uint64
	// OnMeasure, when set, is called as the measured window starts,
	// with its planned length in seconds: 0 when the window ends with
	// the run's last record (a message-count or catch-up run). It is
	// called from Run's goroutine and must not block.
	OnMeasure func(seconds float64)
	// OnMeasureEnd, when set, is called once the measured window has
	// ended (for an open-ended window, at its last record), from Run's
	// goroutine; it must not block.
	OnMeasureEnd func()
	// Groups runs each subscription's consumers as one consumer group
	// (the driver must be a GroupDriver) instead of giving each its own
	// partitions.
	Groups bool

	// progressEvery overrides progressEvery (tests).
	progressEvery int
}

type phase int32

const (
	phaseSetup phase = iota
	phaseWarmup
	phaseMeasure
	phaseDrain
	phaseBacklog
	phaseCatchUp
	phaseDone
)

var phaseNames = [...]string{"setup", "warmup", "measure", "drain", "backlog", "catch-up", "done"}

func (p phase) String() string { return phaseNames[p] }

// consumerTask is one consumer of a run and what it measured.
//
// Threads: receive runs on the consumer's goroutine (inside
// Consumer.Run), which owns latency; the counters are atomic because the
// runner and the monitor read them while it runs.
type consumerTask struct {
	topic, subscription int
	partitions          []int32
	consumer            Consumer
	clock               Clock
	size                int
	// seen holds, per producer of the topic, the records this
	// consumer's subscription has received; shared with the
	// subscription's other consumers.
	seen []*seqSet
	win  window
	// endToEnd is false in a catch-up run, where records wait in the
	// backlog by design.
	endToEnd bool

	received    atomic.Int64
	distinct    atomic.Int64
	duplicates  atomic.Int64
	foreign     atomic.Int64 // a header naming no producer of this run
	wrongSize   atomic.Int64
	winReceived atomic.Int64
	lastReceive atomic.Int64
	latency     *hdrhistogram.Histogram

	done chan struct{} // closed when Run returned; err is then set
	err  error
	// running and closed are the runner goroutine's own.
	running, closed bool
}

func (c *consumerTask) receive(value []byte) {
	now := c.clock.Now().UnixNano()
	c.received.Add(1)
	sent, seq, ok := readHeader(value)
	if !ok || len(value) != c.size {
		c.wrongSize.Add(1)
		return
	}
	producer, counter := splitSequence(seq)
	if producer >= len(c.seen) {
		c.foreign.Add(1)
		return
	}
	if c.seen[producer].add(counter) {
		c.distinct.Add(1)
	} else {
		c.duplicates.Add(1)
	}
	if c.win.contains(now) {
		c.winReceived.Add(1)
		storeMax(&c.lastReceive, now)
	}
	if c.endToEnd && c.win.contains(sent) {
		recordNanos(c.latency, now-sent)
	}
}

func (c *consumerTask) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

type runner struct {
	w     *Workload
	d     Driver
	opts  RunOptions
	clock Clock

	topics    []string
	producers []*producerTask // topic-major: topic t's are [t*ProducersPerTopic, ...)
	consumers []*consumerTask
	// published is consumers for the monitor goroutine, which may run
	// while a catch-up run creates them.
	published atomic.Pointer[[]*consumerTask]
	// seen[topic][subscription][producer]
	seen [][][]*seqSet

	arena []byte
	keys  [][]byte
	rng   *mrand.Rand

	startNanos int64
	produceWin window
	consumeWin window
	phase      atomic.Int32
	nodes      []*nodeMonitor // one per RunOptions.Nodes
	client     clientMonitor

	// drainStalled is set when the drain gave up on records that never
	// came, for the check that reports them.
	drainStalled bool

	produceWG      sync.WaitGroup
	consumeCtx     context.Context
	cancelConsumer context.CancelFunc

	// timeline is appended to by the monitor goroutine and read after
	// it stopped.
	timeline []Sample
}

// Run runs workload w against the system behind d and returns what it
// measured. It closes the producers and consumers it creates, not d.
//
// A run whose sanity checks fail returns its Result together with an
// error wrapping ErrSanityCheck that names the failed checks; any other
// error (the system unreachable, ctx cancelled) returns no Result.
func Run(ctx context.Context, w *Workload, d Driver, opts RunOptions) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if _, ok := d.(GroupDriver); opts.Groups && !ok {
		return nil, fmt.Errorf("%s's driver has no consumer groups", d.Name())
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read does not return errors since Go 1.24
		opts.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	if opts.TopicPrefix == "" {
		opts.TopicPrefix = fmt.Sprintf("bench-%s-%s-", w.Name, hex.EncodeToString(binary.BigEndian.AppendUint64(nil, opts.Seed))[:8])
	}
	r := &runner{
		w:     w,
		d:     d,
		opts:  opts,
		clock: SystemClock{},
		rng:   mrand.New(mrand.NewPCG(opts.Seed, opts.Seed>>1^0x9e3779b97f4a7c15)),
	}
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	w := r.w
	res := &Result{
		Workload: *w,
		System:   r.d.Name(),
		Machine:  CollectMachine(),
		Started:  time.Now().UTC(),
	}
	for i := range w.Topics {
		r.topics = append(r.topics, fmt.Sprintf("%s%d", r.opts.TopicPrefix, i))
	}
	if err := r.d.CreateTopics(ctx, r.topics, w.PartitionsPerTopic); err != nil {
		return nil, fmt.Errorf("creating topics: %w", err)
	}
	r.arena = newArena(r.rng)
	r.keys = newKeys(r.rng)
	r.seen = make([][][]*seqSet, w.Topics)
	for t := range r.seen {
		r.seen[t] = make([][]*seqSet, w.SubscriptionsPerTopic)
		for s := range r.seen[t] {
			for range w.ProducersPerTopic {
				r.seen[t][s] = append(r.seen[t][s], &seqSet{})
			}
		}
	}

	r.consumeCtx, r.cancelConsumer = context.WithCancel(ctx)
	produceCtx, cancelProduce := context.WithCancel(ctx)
	defer func() {
		// On every way out: no goroutine of the run outlives it.
		cancelProduce()
		r.produceWG.Wait()
		r.stopConsumers()
		for _, p := range r.producers {
			p.producer.Close()
		}
	}()

	for t, topic := range r.topics {
		for i := range w.ProducersPerTopic {
			p, err := r.d.NewProducer(ctx, topic)
			if err != nil {
				return nil, fmt.Errorf("producer %d of topic %s: %w", i, topic, err)
			}
			r.producers = append(r.producers, &producerTask{
				clock:    r.clock,
				producer: p,
				index:    i,
				payload:  newPayloadWriter(r.arena, w.MessageSize, w.PayloadRandomness, (t*w.ProducersPerTopic+i)*len(r.arena)/w.producers()),
				keys:     &keyChooser{dist: w.KeyDistributor, keys: r.keys, i: r.rng.IntN(numKeys), rng: mrand.New(mrand.NewPCG(r.rng.Uint64(), r.rng.Uint64()))},
				quota:    -1,
				latency:  newLatencyRecorder(),
			})
		}
	}
	if !w.catchUp() {
		// Consumers first, so they are reading when the first record
		// is sent.
		if err := r.createConsumers(ctx, true); err != nil {
			return nil, err
		}
	}
	r.planWindows()
	r.runConsumers()
	for _, n := range r.opts.Nodes {
		r.nodes = append(r.nodes, newNodeMonitor(n))
	}
	stopMonitor := r.startMonitor()
	defer stopMonitor()

	if err := r.phases(ctx, produceCtx); err != nil {
		return nil, err
	}
	stopMonitor()
	r.setPhase(phaseDone)
	r.stopConsumers()
	return r.result(res)
}

// planWindows fixes the run's start and its measured windows.
func (r *runner) planWindows() {
	w := r.w
	r.startNanos = r.clock.Now().UnixNano()
	measureFrom := r.startNanos + int64(w.WarmupSeconds*1e9)
	var quotas []int64
	switch {
	case w.catchUp():
		r.produceWin = window{r.startNanos, math.MaxInt64}
		records := (w.backlogBytes() + int64(w.MessageSize) - 1) / int64(w.MessageSize)
		quotas = shares(records, len(r.producers))
	case w.MessageCount > 0:
		r.produceWin = window{measureFrom, math.MaxInt64}
		quotas = shares(w.MessageCount, len(r.producers))
	default:
		r.produceWin = window{measureFrom, measureFrom + int64(w.TestDurationSeconds*1e9)}
	}
	if !w.catchUp() {
		r.consumeWin = r.produceWin
		for _, c := range r.consumers {
			c.win = r.consumeWin
		}
	}
	var interval float64
	if w.ProducerRate > 0 {
		interval = 1e9 / (w.ProducerRate / float64(len(r.producers)))
	}
	for g, p := range r.producers {
		p.win = r.produceWin
		if quotas != nil {
			p.quota = quotas[g]
		}
		p.pacer = pacer{
			clock:         r.clock,
			startNanos:    r.startNanos + int64(interval*float64(g)/float64(len(r.producers))),
			intervalNanos: interval,
		}
	}
}

// shares splits n into k near-equal parts.
func shares(n int64, k int) []int64 {
	s := make([]int64, k)
	for i := range s {
		s[i] = n / int64(k)
		if int64(i) < n%int64(k) {
			s[i]++
		}
	}
	return s
}

// phases walks the run from the producers' start to the end of the
// drain.
func (r *runner) phases(ctx, produceCtx context.Context) error {
	w := r.w
	if w.catchUp() {
		r.setPhase(phaseBacklog)
		r.startProducers(produceCtx)
		r.produceWG.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
		r.flush(ctx)
		// The backlog is written; now the consumers read it from the
		// start, and that is the measured consume.
		if err := r.createConsumers(ctx, false); err != nil {
			return err
		}
		r.consumeWin = window{r.clock.Now().UnixNano(), math.MaxInt64}
		for _, c := range r.consumers {
			c.win = r.consumeWin
		}
		r.markWindowStart(r.consumeWin)
		r.runConsumers()
		r.setPhase(phaseCatchUp)
		if err := r.drain(ctx); err != nil {
			return err
		}
		r.markWindowEnd(r.consumeWin, r.lastReceive())
		return nil
	}

	if w.WarmupSeconds > 0 {
		r.setPhase(phaseWarmup)
	} else {
		r.setPhase(phaseMeasure)
	}
	r.startProducers(produceCtx)
	if err := r.sleepUntil(ctx, r.produceWin.from); err != nil {
		return err
	}
	r.markWindowStart(r.produceWin)
	r.setPhase(phaseMeasure)
	if !r.produceWin.open() {
		if err := r.sleepUntil(ctx, r.produceWin.to); err != nil {
			return err
		}
		r.markWindowEnd(r.produceWin, r.produceWin.to)
		r.setPhase(phaseDrain)
	}
	r.produceWG.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.flush(ctx)
	if err := r.drain(ctx); err != nil {
		return err
	}
	if r.produceWin.open() {
		// A count run's window ends with the last record received.
		r.markWindowEnd(r.consumeWin, r.lastReceive())
	}
	return nil
}

func (r *runner) setPhase(p phase) { r.phase.Store(int32(p)) }

func (r *runner) sleepUntil(ctx context.Context, t int64) error {
	return r.clock.Sleep(ctx, time.Duration(t-r.clock.Now().UnixNano()))
}

func (r *runner) markWindowStart(win window) {
	r.client.windowStart()
	if r.opts.OnMeasure != nil {
		var seconds float64
		if !win.open() {
			seconds = float64(win.to-win.from) / 1e9
		}
		r.opts.OnMeasure(seconds)
	}
	for _, n := range r.nodes {
		n.windowStart()
	}
}

func (r *runner) markWindowEnd(win window, end int64) {
	r.client.windowEnd(float64(end-win.from) / 1e9)
	if r.opts.OnMeasureEnd != nil {
		r.opts.OnMeasureEnd()
	}
	for _, n := range r.nodes {
		n.windowEnd(float64(end-win.from) / 1e9)
	}
}

func (r *runner) startProducers(ctx context.Context) {
	for _, p := range r.producers {
		r.produceWG.Add(1)
		go func() {
			defer r.produceWG.Done()
			p.run(ctx)
		}()
	}
}

// createConsumers creates the consumers: per topic and subscription,
// ConsumerPerSubscription consumers that split the partitions
// round-robin. Their goroutines start in runConsumers, once their
// window is set.
func (r *runner) createConsumers(ctx context.Context, endToEnd bool) error {
	w := r.w
	var created []*consumerTask
	defer func() {
		// Made ones are closed by stopConsumers even on failure.
		r.consumers = append(r.consumers, created...)
		all := r.consumers
		r.published.Store(&all)
	}()
	for t, topic := range r.topics {
		for s := range w.SubscriptionsPerTopic {
			for c := range w.ConsumerPerSubscription {
				var parts []int32
				for p := c; p < w.PartitionsPerTopic; p += w.ConsumerPerSubscription {
					parts = append(parts, int32(p))
				}
				var cons Consumer
				var err error
				if r.opts.Groups {
					// The group assigns the partitions; parts says only
					// how many the consumer would have had.
					cons, err = r.d.(GroupDriver).NewGroupConsumer(ctx, topic, fmt.Sprintf("%s-sub%d", topic, s))
					parts = nil
				} else {
					cons, err = r.d.NewConsumer(ctx, topic, parts)
				}
				if err != nil {
					return fmt.Errorf("consumer %d of topic %s: %w", c, topic, err)
				}
				created = append(created, &consumerTask{
					topic:        t,
					subscription: s,
					partitions:   parts,
					consumer:     cons,
					clock:        r.clock,
					size:         w.MessageSize,
					seen:         r.seen[t][s],
					endToEnd:     endToEnd,
					latency:      newLatencyHistogram(),
					done:         make(chan struct{}),
				})
			}
		}
	}
	return nil
}

func (r *runner) runConsumers() {
	for _, c := range r.consumers {
		go func() {
			defer close(c.done)
			c.err = c.consumer.Run(r.consumeCtx, c.receive)
		}()
		c.running = true
	}
}

// stopConsumers ends the consumers' Run and closes them; it may be
// called more than once.
func (r *runner) stopConsumers() {
	r.cancelConsumer()
	for _, c := range r.consumers {
		if c.closed {
			continue
		}
		if c.running {
			<-c.done
		}
		c.consumer.Close()
		c.closed = true
	}
}

// flush waits for every producer's outstanding records, at most
// DrainTimeout; a failure shows up in the checks as sends that never
// completed.
func (r *runner) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range r.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.producer.Flush(ctx); err != nil && p.failed.Load() == 0 {
				p.errMu.Lock()
				if p.firstErr == nil {
					p.firstErr = fmt.Errorf("flush: %w", err)
				}
				p.errMu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// drainPoll is how often drain looks at the consumers' counts.
const drainPoll = 10 * time.Millisecond

// drain waits until each subscription has received as many distinct
// records as its topic's producers had acknowledged, every consumer has
// stopped, or none received anything for DrainTimeout. Records still
// missing then fail a check; only ctx ending is an error.
func (r *runner) drain(ctx context.Context) error {
	owed := make([]int64, len(r.topics))
	for g, p := range r.producers {
		owed[g/r.w.ProducersPerTopic] += p.acked.Load()
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	last, lastChange := r.totalReceived(), time.Now()
	for {
		if r.caughtUp(owed) || r.allConsumersExited() {
			return nil
		}
		if n := r.totalReceived(); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > r.opts.DrainTimeout {
			r.drainStalled = true
			return nil
		}
		select {
		case <-ctx.Done(): // the run was cancelled
			return ctx.Err()
		case <-tick.C: // look again
		}
	}
}

func (r *runner) caughtUp(owed []int64) bool {
	got := make([][]int64, len(r.topics))
	for t := range got {
		got[t] = make([]int64, r.w.SubscriptionsPerTopic)
	}
	for _, c := range r.consumers {
		got[c.topic][c.subscription] += c.distinct.Load()
	}
	for t := range got {
		for _, n := range got[t] {
			if n < owed[t] {
				return false
			}
		}
	}
	return true
}

func (r *runner) allConsumersExited() bool {
	for _, c := range r.consumers {
		if !c.running || !c.exited() {
			return false
		}
	}
	return len(r.consumers) > 0
}

func (r *runner) totalAcked() int64 {
	var n int64
	for _, p := range r.producers {
		n += p.acked.Load()
	}
	return n
}

// totalReceived may be called from any goroutine.
func (r *runner) totalReceived() int64 {
	var consumers []*consumerTask
	if p := r.published.Load(); p != nil {
		consumers = *p
	}
	var n int64
	for _, c := range consumers {
		n += c.received.Load()
	}
	return n
}

func (r *runner) lastReceive() int64 {
	var last int64
	for _, c := range r.consumers {
		last = max(last, c.lastReceive.Load())
	}
	return last
}

// result assembles the Result once every goroutine of the run is done.
func (r *runner) result(res *Result) (*Result, error) {
	w := r.w
	res.Finished = time.Now().UTC()
	res.Topics = r.topics
	res.DriverSettings = r.d.Settings()

	ackLatency := newLatencyHistogram()
	var acked, sent, failed, winAcked, lastAck int64
	var firstErr error
	for _, p := range r.producers {
		p.latency.mergeInto(ackLatency)
		sent += p.sent
		acked += p.acked.Load()
		failed += p.failed.Load()
		winAcked += p.winAcked.Load()
		lastAck = max(lastAck, p.lastAck.Load())
		if err := p.err(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	res.Produce = r.throughput(r.produceWin, winAcked, lastAck, acked)
	res.ProduceLatency = summarizeLatency(ackLatency)

	e2e := newLatencyHistogram()
	var received, winReceived int64
	for _, c := range r.consumers {
		e2e.Merge(c.latency)
		received += c.received.Load()
		winReceived += c.winReceived.Load()
	}
	res.Consume = r.throughput(r.consumeWin, winReceived, r.lastReceive(), received)
	if !w.catchUp() {
		l := summarizeLatency(e2e)
		res.EndToEndLatency = &l
	}
	res.SendErrors = failed
	if firstErr != nil {
		res.FirstSendError = firstErr.Error()
	}
	for _, n := range r.nodes {
		res.Nodes = append(res.Nodes, n.finish())
	}
	res.Client = r.client.result()
	res.Timeline = r.timeline
	res.Checks = r.checks(sent, acked, failed, firstErr)
	res.Passed = true
	var failedChecks []string
	for _, c := range res.Checks {
		if !c.Passed {
			res.Passed = false
			failedChecks = append(failedChecks, c.Name+": "+c.Detail)
		}
	}
	if !res.Passed {
		return res, fmt.Errorf("%w: %s", ErrSanityCheck, strings.Join(failedChecks, "; "))
	}
	return res, nil
}

// throughput is the figure for events (acks or receipts) counted in win;
// an open window ends at the last of them.
func (r *runner) throughput(win window, records, last, total int64) Throughput {
	t := Throughput{Records: records, Bytes: records * int64(r.w.MessageSize), TotalRecords: total}
	end := win.to
	if win.open() {
		end = last
	}
	if win.from == 0 || end <= win.from {
		return t
	}
	t.FromSecond = float64(win.from-r.startNanos) / 1e9
	t.ToSecond = float64(end-r.startNanos) / 1e9
	t.Seconds = float64(end-win.from) / 1e9
	t.RecordsPerSecond = float64(records) / t.Seconds
	t.MBPerSecond = float64(t.Bytes) / t.Seconds / 1e6
	return t
}

// checks are the sanity checks: a run that fails one has numbers that
// do not mean what they say.
func (r *runner) checks(sent, acked, failed int64, firstErr error) []Check {
	w := r.w
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, Check{Name: name, Passed: ok, Detail: fmt.Sprintf(format, args...)})
	}

	errDetail := ""
	if firstErr != nil {
		errDetail = ", first: " + firstErr.Error()
	}
	add("sends completed", acked+failed == sent && failed == 0 && firstErr == nil,
		"%s sent, %s acknowledged, %s failed, %s never completed%s",
		count(sent), count(acked), count(failed), count(sent-acked-failed), errDetail)

	var consumerErrs []string
	for _, c := range r.consumers {
		if c.err != nil && !errors.Is(c.err, context.Canceled) {
			consumerErrs = append(consumerErrs, fmt.Sprintf("topic %s partitions %v: %v", r.topics[c.topic], c.partitions, c.err))
		}
	}
	add("consumers ran", len(consumerErrs) == 0, "%d of %d consumers failed%s",
		len(consumerErrs), len(r.consumers), firstOf(consumerErrs))

	// Per topic and subscription: every acknowledged record received
	// exactly once, intact.
	type tally struct{ distinct, duplicates, foreign, wrongSize int64 }
	tallies := make([][]tally, w.Topics)
	for t := range tallies {
		tallies[t] = make([]tally, w.SubscriptionsPerTopic)
	}
	for _, c := range r.consumers {
		tl := &tallies[c.topic][c.subscription]
		tl.distinct += c.distinct.Load()
		tl.duplicates += c.duplicates.Load()
		tl.foreign += c.foreign.Load()
		tl.wrongSize += c.wrongSize.Load()
	}
	var bad []string
	var totalOwed, totalDistinct, totalDup, totalForeign, totalWrong int64
	for t := range tallies {
		var owed int64
		for _, p := range r.producers[t*w.ProducersPerTopic : (t+1)*w.ProducersPerTopic] {
			owed += p.acked.Load()
		}
		for s, tl := range tallies[t] {
			totalOwed += owed
			totalDistinct += tl.distinct
			totalDup += tl.duplicates
			totalForeign += tl.foreign
			totalWrong += tl.wrongSize
			if tl.distinct != owed || tl.duplicates+tl.foreign+tl.wrongSize > 0 {
				bad = append(bad, fmt.Sprintf("topic %s subscription %d: %s acknowledged, %s received (%s missing), %s duplicates, %s not from this run, %s of the wrong size",
					r.topics[t], s, count(owed), count(tl.distinct), count(owed-tl.distinct), count(tl.duplicates), count(tl.foreign), count(tl.wrongSize)))
			}
		}
	}
	stalled := ""
	if r.drainStalled {
		stalled = fmt.Sprintf("; the consumers received nothing for %v before the run gave up on the rest", r.opts.DrainTimeout)
	}
	add("consumed == produced", len(bad) == 0,
		"%s acknowledged records owed over %d subscriptions, %s received once, %s duplicates, %s not from this run, %s of the wrong size%s%s",
		count(totalOwed), w.Topics*w.SubscriptionsPerTopic, count(totalDistinct), count(totalDup), count(totalForeign), count(totalWrong), firstOf(bad), stalled)

	add("records measured", acked > 0 && r.produceWin.from > 0,
		"%s records acknowledged", count(acked))
	return checks
}

func firstOf(list []string) string {
	switch len(list) {
	case 0:
		return ""
	case 1:
		return "; " + list[0]
	}
	return fmt.Sprintf("; %s (and %d more)", list[0], len(list)-1)
}
