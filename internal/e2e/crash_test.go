package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashKeepsAckedRecords: a franz-go idempotent producer with acks=all
// writes keyed records while the node is SIGKILLed and restarted on the
// same data directory and ports. The producer keeps going (it retries
// what was in flight); afterwards every acknowledged record is at exactly
// its acknowledged offset, and no value appears twice: the retries of
// batches written before the crash, answered after it, were deduplicated
// by the producer state rebuilt at restart.
func TestCrashKeepsAckedRecords(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testContext(t, 2*time.Minute)
	const topic, partitions, keys = "crash", 4, 64
	createTopic(ctx, t, newAdmin(t, n), topic, partitions)
	cycles := scale(1, 5)
	const perPhase = 3000 // acknowledgements to see before each kill and after the last restart

	producer := newClient(t, n,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Retry without a record limit (franz-go's default) but give up
		// on a record after a bound far above a restart, so a node that
		// never comes back fails the test instead of hanging it.
		kgo.RecordDeliveryTimeout(time.Minute),
	)
	checker := history.NewChecker()
	var failures errorList
	stop := make(chan struct{})
	var sent int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				// Keep producing.
			}
			key := fmt.Appendf(nil, "key-%02d", i%keys)
			value := fmt.Appendf(nil, "crash %08d", i)
			checker.Sent(topic, key, value)
			sent = i + 1
			// Produce blocks while the client's buffer is full (the node
			// is down), which paces this loop.
			producer.Produce(context.Background(), &kgo.Record{Key: key, Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					failures.add(fmt.Errorf("%s: %w", r.Value, err))
					return
				}
				checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			})
		}
	}()
	stopProducer := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	t.Cleanup(stopProducer) // a failed test must not leave it producing

	ackedAtLeast := func(want int) func() error {
		return func() error {
			if got := checker.AckedCount(); got < want {
				return fmt.Errorf("%d of %d acknowledgements (producer errors: %v)", got, want, failures.err())
			}
			return nil
		}
	}
	target := perPhase
	for cycle := range cycles {
		eventually(t, time.Minute, ackedAtLeast(target))
		n.Kill()
		killedAt := checker.AckedCount()
		n.Restart()
		t.Logf("cycle %d: SIGKILL with %d acknowledged, restarted", cycle+1, killedAt)
		target = killedAt + perPhase
	}
	eventually(t, time.Minute, ackedAtLeast(target))
	stopProducer()
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := failures.err(); err != nil {
		// With unlimited retries and the node back within seconds, a
		// failed record means the node refused a retry it should have
		// deduplicated or accepted (OUT_OF_ORDER_SEQUENCE_NUMBER after
		// losing producer state, for one).
		t.Fatalf("produce across the crash: %v", err)
	}

	logs := readAll(ctx, t, n, topic)
	sum, err := checker.Verify(logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sent: %v", sent, sum)
	if sum.Acked != sent || sum.Read != sent {
		t.Fatalf("%v, %d sent: every record should be acknowledged (no failures) and read back once", sum, sent)
	}
}
