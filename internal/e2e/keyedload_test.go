package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
)

// keyedLoad produces records through one franz-go producer until
// stopped: keys "key-00" to the keys-th in turn, values "<prefix>
// <sequence>", each told to the checker as sent (before the client has
// it) and as acknowledged (with the offset it was given), failures
// collected. Produce blocks while the client's buffer is full (a node
// down), which paces the loop; pace, when not zero, spaces the records
// as well.
type keyedLoad struct {
	checker  *history.Checker
	failures errorList
	sent     atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startKeyedLoad(t *testing.T, producer *kgo.Client, checker *history.Checker, topic, prefix string, keys int, pace time.Duration) *keyedLoad {
	l := &keyedLoad{checker: checker, stop: make(chan struct{})}
	l.wg.Go(func() {
		var tick <-chan time.Time // nil without a pace: never blocks below
		if pace > 0 {
			t := time.NewTicker(pace)
			defer t.Stop()
			tick = t.C
		}
		for i := 0; ; i++ {
			if tick != nil {
				select {
				case <-l.stop:
					return
				case <-tick:
				}
			}
			select {
			case <-l.stop:
				return
			default:
				// Keep producing.
			}
			key := fmt.Appendf(nil, "key-%02d", i%keys)
			value := fmt.Appendf(nil, "%s %08d", prefix, i)
			checker.Sent(topic, key, value)
			l.sent.Store(int64(i + 1))
			producer.Produce(context.Background(), &kgo.Record{Key: key, Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					l.failures.add(fmt.Errorf("%s: %w", r.Value, err))
					return
				}
				checker.Acked(history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
			})
		}
	})
	t.Cleanup(l.Stop) // a failed test must not leave it producing
	return l
}

// Stop ends the loop and waits for it; what it produced may still be in
// flight (the producer's Flush waits for that).
func (l *keyedLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// ackedAtLeast is a condition for eventually: want acknowledgements.
func (l *keyedLoad) ackedAtLeast(want int) func() error {
	return func() error {
		if got := l.checker.AckedCount(); got < want {
			return fmt.Errorf("%d of %d acknowledgements (producer errors: %v)", got, want, l.failures.err())
		}
		return nil
	}
}
