package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
)

// The txn workload: the queue workload's records, each producer a
// transactional producer that ends a transaction every 50 to 200 ms,
// committing four in five and aborting the fifth (and any whose produce
// failed). A committed transaction's records are acknowledged; an
// aborted one's are marked aborted, never to be read (history's
// aborted-read); those of a transaction whose end failed have an
// unknown outcome and are neither, so finding them and missing them are
// both allowed. The reader, and the read-back after the run, read
// read_committed; the read-back first waits for every transaction to be
// decided, so one left open past its timeout fails the run.

// txnWorkloadTimeout is the workload's transaction.timeout.ms: a
// transaction its producer never ended (the producer's node killed
// under it) is aborted by its coordinator this long after it began, and
// the read-back waits at most about this long for it.
const txnWorkloadTimeout = 10 * time.Second

// verifyTxnWriters are the txn workload's producers.
type verifyTxnWriters struct {
	checker *history.Checker
	seeds   []string
	v       verifyOptions
	writeCounts
}

func (w *verifyTxnWriters) run(ctx context.Context, progress io.Writer, stop time.Time) error {
	runProducers(ctx, progress, stop, w.v, w.counts, w.checker, w.produce)
	return nil
}

// produce is producer i's transactions until ctx ends; each one is
// ended, the last too, whatever stopped it.
func (w *verifyTxnWriters) produce(ctx context.Context, rng *rand.Rand, i int) {
	v := w.v
	id := fmt.Sprintf("%s-p%d", v.topic, i)
	name := fmt.Sprintf("p%d", i)
	var pr *kgo.Client
	defer func() {
		if pr != nil {
			pr.Close()
		}
	}()
	pace := newPacer(v.rate, v.producers)
	seq := 0
	for ctx.Err() == nil {
		if pr == nil {
			var err error
			if pr, err = kgo.NewClient(verifyClient(w.seeds, "fjord-verify-"+name, kgo.TransactionalID(id),
				kgo.TransactionTimeout(txnWorkloadTimeout), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DialTimeout(reachTimeout))...); err != nil {
				w.addFailed([]byte(name), err)
				return
			}
		}
		if err := pr.BeginTransaction(); err != nil {
			w.addFailed([]byte(name), fmt.Errorf("begin: %w", err))
			pr.Close()
			pr = nil
			continue
		}
		var (
			mu      sync.Mutex
			written []history.Record
			failed  bool
		)
		end := time.Now().Add(50*time.Millisecond + time.Duration(rng.IntN(150))*time.Millisecond)
		for time.Now().Before(end) && pace.wait(ctx) {
			topic, key, value := workloadRecord(rng, v, i, seq)
			seq++
			w.checker.SentBy(name, topic, key, value)
			w.addSent()
			pr.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Key: key, Value: value}, func(rec *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = true
					w.addFailed(rec.Value, err)
					return
				}
				written = append(written, history.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			})
		}
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*txnWorkloadTimeout)
		ferr := pr.Flush(ectx)
		mu.Lock()
		commit := ferr == nil && !failed && rng.IntN(5) != 0
		recs := written
		mu.Unlock()
		err := pr.EndTransaction(ectx, kgo.TransactionEndTry(commit))
		cancel()
		switch {
		case err != nil:
			// The outcome is unknown: the records are neither
			// acknowledged nor aborted. A new session fences this one.
			w.addFailed([]byte(name), fmt.Errorf("ending a transaction: %w", err))
			pr.Close()
			pr = nil
		case commit:
			for _, r := range recs {
				w.checker.Acked(r)
			}
		default:
			for _, r := range recs {
				w.checker.Aborted(r)
			}
		}
	}
}
