// Package coordload follows which partitions of a coordinator's internal
// topic (__consumer_offsets for the group coordinator,
// __transaction_state for the transaction coordinator) this node leads,
// from each metadata image, and has the coordinator load each partition
// it comes to lead, or leads in a new leader epoch, and unload each it
// stops leading. The coordinators' own packages give it their load and
// unload (group/offsetstopic, txn/txnstatetopic); it knows neither.
//
// Loads run off the image publisher's goroutine, one goroutine per
// partition, since a load replays the partition's whole log. The loads
// one image starts are a wave: the first image after a start leads all
// of a topic's partitions at once, and an operator wants one line saying
// the coordinator is ready, not fifty. Each partition's load is logged
// at debug level, a failure as an error; a failed partition is loaded
// again at the next image.
//
// Its tests are txn/txnstatetopic's Loader tests, over a fake
// coordinator and log, and the node's group and transaction tests.
package coordload

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Config is a Loader's topic and coordinator.
type Config struct {
	Topic  string
	NodeID int32
	// Name names the coordinator in log lines ("group coordinator").
	Name string
	Log  *slog.Logger
	// Load replays partition p, which this node leads in epoch, into the
	// coordinator, reading until ctx ends (the Loader's Close), and
	// returns how many records it read.
	Load func(ctx context.Context, p, epoch int32) (records int, err error)
	// Quiet reports whether a Load error is the expected end of a load
	// (the node closing, a newer leadership's load), which is neither
	// logged nor retried.
	Quiet func(err error) bool
	// Unload drops partition p from the coordinator.
	Unload func(p int32)
}

// Loader is one coordinator's follower of its topic's leadership.
type Loader struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// lastWave is how long the latest wave of loads took (nanoseconds),
	// from the image that started it to the last load's end: the time a
	// new leader's partitions answered COORDINATOR_LOAD_IN_PROGRESS.
	lastWave atomic.Int64

	mu struct {
		sync.Mutex
		// epochs[p] is the leader epoch partition p was (or is being)
		// loaded in.
		epochs map[int32]int32
	}
}

// New returns a Loader of no partitions; OnImage starts its loads.
func New(cfg Config) *Loader {
	l := &Loader{cfg: cfg}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.mu.epochs = make(map[int32]int32)
	return l
}

// LastLoad is how long the latest wave of loads took; 0 before the
// first.
func (l *Loader) LastLoad() time.Duration { return time.Duration(l.lastWave.Load()) }

// OnImage is a metadata image subscriber, registered after the replica
// manager's: by the time it runs, the image's logs are open.
func (l *Loader) OnImage(img *metadata.Image) {
	if img == nil {
		return
	}
	led := map[int32]int32{}
	if t, ok := img.Topics[l.cfg.Topic]; ok && t != nil {
		for i := range t.Partitions {
			if p := &t.Partitions[i]; p.Leader == l.cfg.NodeID {
				led[int32(i)] = p.LeaderEpoch
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.mu.epochs {
		if _, ok := led[p]; !ok {
			delete(l.mu.epochs, p)
			l.cfg.Unload(p)
		}
	}
	var starts []int32
	for p, epoch := range led {
		if cur, ok := l.mu.epochs[p]; ok && cur == epoch {
			continue
		}
		l.mu.epochs[p] = epoch
		starts = append(starts, p)
	}
	if len(starts) == 0 {
		return
	}
	w := &wave{l: l, start: time.Now(), pending: len(starts)}
	for _, p := range starts {
		epoch := led[p]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			w.done(l.load(p, epoch))
		}()
	}
}

// load loads partition p led in epoch and reports how many records it
// read and whether the partition is now served.
func (l *Loader) load(p, epoch int32) (int, bool) {
	start := time.Now()
	records, err := l.cfg.Load(l.ctx, p, epoch)
	switch {
	case err == nil:
		l.cfg.Log.Debug(l.cfg.Name+" loaded partition", "topic", l.cfg.Topic, "partition", p, "leader_epoch", epoch,
			"records", records, "took", time.Since(start).Round(time.Millisecond))
		return records, true
	case l.cfg.Quiet(err):
	default:
		// The partition answers NOT_COORDINATOR until the next image
		// tries again.
		l.cfg.Log.Error(l.cfg.Name+" could not load partition", "topic", l.cfg.Topic, "partition", p, "leader_epoch", epoch, "err", err)
		l.mu.Lock()
		if l.mu.epochs[p] == epoch {
			delete(l.mu.epochs, p)
		}
		l.mu.Unlock()
	}
	return records, false
}

// Close stops loads under way and waits for them.
func (l *Loader) Close() {
	l.cancel()
	l.wg.Wait()
}

// wave is the loads one image started.
type wave struct {
	l     *Loader
	start time.Time

	mu      sync.Mutex
	pending int // loads not yet finished
	loaded  int // loads that finished with the partition served
	records int
}

// done records the end of one load of the wave; the last one logs the
// summary.
func (w *wave) done(records int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending--
	if ok {
		w.loaded++
		w.records += records
	}
	if w.pending == 0 && w.loaded > 0 {
		took := time.Since(w.start)
		w.l.lastWave.Store(int64(took))
		w.l.cfg.Log.Info(w.l.cfg.Name+" loaded partitions", "topic", w.l.cfg.Topic, "partitions", w.loaded,
			"records", w.records, "took", took.Round(time.Millisecond))
	}
}
