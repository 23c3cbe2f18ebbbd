package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/timeline"
)

// The parts of the workloads that speak the Kafka protocol (queue and
// groups; the group is verify_group.go, the http workload
// verify_http.go), and what every workload shares: the interfaces the run
// drives them by, their pacing, their records, their counts.

// The parts of a workload, whatever it speaks (the Kafka protocol, or
// the HTTP API: verify_http.go).
type (
	// workloadWriters are its producers.
	workloadWriters interface {
		// run writes until stop (or until ctx ends), saying how it goes
		// on progress, and returns once every record sent is answered.
		run(ctx context.Context, progress io.Writer, stop time.Time) error
		counts() (sent, failed int, first string)
	}
	// workloadReader reads the topic meanwhile; stop ends it and counts
	// its errors (not violations: a fetch that failed).
	workloadReader interface {
		stop() (errors int, first string)
	}
	// workloadGroup is its consumer group; stop ends its members.
	workloadGroup interface {
		stop() (errors int, first string)
		churned() map[string]int
	}
)

// startWorkload starts v's reader and group and makes its writers;
// their failures and errors go to tl as they happen.
func startWorkload(ctx context.Context, seeds []string, nodes *httpNodes, v verifyOptions, checker *history.Checker, tl *timeline.Timeline) (workloadWriters, workloadReader, workloadGroup, error) {
	if v.workload == workloadHTTP {
		w := &verifyHTTPWriters{nodes: nodes, checker: checker, v: v, writeCounts: writeCounts{tl: tl}}
		return w, startVerifyHTTPReader(ctx, nodes, v, checker, tl), startVerifyHTTPGroup(ctx, nodes, v, checker, tl), nil
	}
	reader, err := startVerifyReader(ctx, seeds, v, checker, tl)
	if err != nil {
		return nil, nil, nil, err
	}
	group, err := startVerifyGroup(ctx, seeds, v, checker, tl)
	if err != nil {
		reader.stop()
		return nil, nil, nil, err
	}
	if v.workload == workloadTxn {
		return &verifyTxnWriters{checker: checker, seeds: seeds, v: v, writeCounts: writeCounts{tl: tl}}, reader, group, nil
	}
	return &verifyWriters{checker: checker, seeds: seeds, v: v, writeCounts: writeCounts{tl: tl}}, reader, group, nil
}

// errorCount counts a part's errors (not violations: a request that
// failed), keeps the first, and puts each on the timeline as one of
// series. Safe for concurrent use.
type errorCount struct {
	tl     *timeline.Timeline
	series string

	mu    sync.Mutex
	n     int
	first string
}

func (e *errorCount) add(msg string) {
	e.tl.Error(e.series, time.Now())
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n++; e.first == "" {
		e.first = msg
	}
}

func (e *errorCount) get() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n, e.first
}

// verifyClient is the options of every franz-go client a run makes:
// seeds, clientID, then opts. franz-go asks for metadata at most every
// 5 s by default, so a producer told NOT_LEADER_OR_FOLLOWER by a leader
// that died would go on dialling it for up to 5 s, and the run would
// measure the client's patience rather than the cluster's failover;
// Kafka's Java client asks again after 100 ms. 200 ms it is.
func verifyClient(seeds []string, clientID string, opts ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(clientID), kgo.MetadataMinAge(200 * time.Millisecond)}, opts...)
}

// seeds is a --brokers list's addresses.
func seeds(brokers string) []string {
	var out []string
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// verifyReader reads every partition of the run's topic from its start
// while the producers write (assigned, no group), telling the checker
// what it was served.
type verifyReader struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	errs   errorCount
}

func startVerifyReader(ctx context.Context, seeds []string, v verifyOptions, checker *history.Checker, tl *timeline.Timeline) (*verifyReader, error) {
	parts := map[string]map[int32]kgo.Offset{}
	for _, topic := range v.topics {
		parts[topic] = map[int32]kgo.Offset{}
		for p := range v.partitions {
			parts[topic][p] = kgo.NewOffset().AtStart()
		}
	}
	opts := []kgo.Opt{kgo.DialTimeout(reachTimeout), kgo.ConsumePartitions(parts)}
	if v.workload == workloadTxn {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(verifyClient(seeds, "fjord-verify-reader", opts...)...)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &verifyReader{cl: cl, cancel: cancel, done: make(chan struct{}), errs: errorCount{tl: tl, series: "reader"}}
	go func() {
		defer close(r.done)
		for rctx.Err() == nil {
			fs := cl.PollFetches(rctx)
			fs.EachError(func(topic string, p int32, err error) {
				if rctx.Err() == nil {
					r.errs.add(fmt.Sprintf("%s-%d: %v", topic, p, err))
				}
			})
			fs.EachRecord(func(rec *kgo.Record) {
				checker.Read(history.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			})
		}
	}()
	return r, nil
}

// stop ends the reader and returns its error count and first error.
func (r *verifyReader) stop() (int, string) {
	r.cancel()
	<-r.done
	r.cl.Close()
	return r.errs.get()
}

// verifyWriters are the queue and groups workloads' producers.
type verifyWriters struct {
	checker *history.Checker
	seeds   []string
	v       verifyOptions
	writeCounts
}

// writeCounts counts a workload's writes: sent, failed, and the first
// failure. Safe for concurrent use.
type writeCounts struct {
	tl *timeline.Timeline // where failures go as they happen

	mu     sync.Mutex
	sent   int
	failed int
	first  string
}

func (c *writeCounts) addSent() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent++
}

// addFailed counts a write of value that failed with err.
func (c *writeCounts) addFailed(value []byte, err error) {
	c.tl.Failure(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed++; c.first == "" {
		c.first = fmt.Sprintf("%s: %v", value[:min(len(value), 40)], err)
	}
}

func (c *writeCounts) counts() (sent, failed int, first string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.failed, c.first
}

// run writes until stop (or until ctx ends), each producer at its
// share of the rate, reporting progress, then waits for every answer.
func (w *verifyWriters) run(ctx context.Context, progress io.Writer, stop time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, stop)
	defer cancel()
	var wg sync.WaitGroup
	var producers []*kgo.Client
	for i := range w.v.producers {
		pr, err := kgo.NewClient(verifyClient(w.seeds, fmt.Sprintf("fjord-verify-%d", i),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DialTimeout(reachTimeout))...)
		if err != nil {
			return err
		}
		producers = append(producers, pr)
		defer pr.Close()
		rng := rand.New(rand.NewPCG(w.v.seed, uint64(i)))
		wg.Go(func() { w.produce(wctx, pr, rng, i) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reportProgress(progress, done, w.counts, w.checker)
	// Every record sent gets its answer (acknowledged or failed) before
	// the read-back, however the run was stopped.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer fcancel()
	for _, pr := range producers {
		if err := pr.Flush(fctx); err != nil {
			return fmt.Errorf("waiting for the last writes' answers: %w", err)
		}
	}
	return nil
}

// runProducers runs produce for each of v's producers until stop (or
// until ctx ends), saying how it goes on progress, and returns once
// every producer has returned. Producer i's rng is seeded with v.seed
// and i, so a seed replays a run's records. It waits for the producers
// only, not for answers: produce must see its own records answered
// before it returns (the http workload's retries, the txn workload's
// last transaction), for run's promise that every record sent is.
func runProducers(ctx context.Context, progress io.Writer, stop time.Time, v verifyOptions,
	counts func() (int, int, string), checker *history.Checker, produce func(ctx context.Context, rng *rand.Rand, i int)) {
	wctx, cancel := context.WithDeadline(ctx, stop)
	defer cancel()
	var wg sync.WaitGroup
	for i := range v.producers {
		rng := rand.New(rand.NewPCG(v.seed, uint64(i)))
		wg.Go(func() { produce(wctx, rng, i) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reportProgress(progress, done, counts, checker)
}

// reportProgress says every verifyProgressInterval how many records were
// sent, acknowledged and failed, until done is closed.
func reportProgress(progress io.Writer, done <-chan struct{}, counts func() (int, int, string), checker *history.Checker) {
	start := time.Now()
	tick := time.NewTicker(verifyProgressInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			sent, failed, _ := counts()
			fmt.Fprintf(progress, "%s: %d sent, %d acknowledged, %d failed\n",
				time.Since(start).Round(time.Second), sent, checker.AckedCount(), failed)
		}
	}
}

// pacer spaces one producer's records at its share of the rate.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(rate, producers int) *pacer {
	return &pacer{interval: time.Duration(float64(time.Second) * float64(producers) / float64(rate)), next: time.Now()}
}

// wait returns when the next record is due, or false once ctx ended.
func (p *pacer) wait(ctx context.Context) bool {
	if d := time.Until(p.next); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	p.next = p.next.Add(p.interval)
	return ctx.Err() == nil
}

// workloadRecord is producer i's record number seq: a key of the
// producer's own (the order of one key's records is the order one
// producer sent them in, which an idempotent producer keeps), the topic
// the key belongs to, and a unique value (the seed, the producer, the
// counter) padded to --value-size from rng.
func workloadRecord(rng *rand.Rand, v verifyOptions, i, seq int) (topic string, key, value []byte) {
	k := rng.IntN(int(v.partitions) * 4 * len(v.topics))
	topic = v.topics[k%len(v.topics)]
	key = fmt.Appendf(nil, "p%d-k%d", i, k)
	value = fmt.Appendf(nil, "%d-p%d-%d-", v.seed, i, seq)
	for len(value) < v.valueSize {
		value = append(value, 'a'+byte(rng.IntN(26)))
	}
	return topic, key, value
}

// produce is producer i's loop: records at rate/producers a second.
func (w *verifyWriters) produce(ctx context.Context, pr *kgo.Client, rng *rand.Rand, i int) {
	v := w.v
	pace := newPacer(v.rate, v.producers)
	for seq := 0; pace.wait(ctx); seq++ {
		topic, key, value := workloadRecord(rng, v, i, seq)
		w.checker.SentBy(fmt.Sprintf("p%d", i), topic, key, value)
		w.addSent()
		pr.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Key: key, Value: value}, func(rec *kgo.Record, err error) {
			if err != nil {
				w.addFailed(rec.Value, err)
				return
			}
			w.checker.Acked(history.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
		})
	}
}
