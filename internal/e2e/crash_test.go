package e2e

import (
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
	load := startKeyedLoad(t, producer, checker, topic, "crash", keys, 0)
	target := perPhase
	for cycle := range cycles {
		eventually(t, time.Minute, load.ackedAtLeast(target))
		n.Kill()
		killedAt := checker.AckedCount()
		n.Restart()
		t.Logf("cycle %d: SIGKILL with %d acknowledged, restarted", cycle+1, killedAt)
		target = killedAt + perPhase
	}
	eventually(t, time.Minute, load.ackedAtLeast(target))
	load.Stop()
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := load.failures.err(); err != nil {
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
	sent := int(load.sent.Load())
	t.Logf("%d sent: %v", sent, sum)
	if sum.Acked != sent || sum.Read != sent {
		t.Fatalf("%v, %d sent: every record should be acknowledged (no failures) and read back once", sum, sent)
	}
}
