package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// The monitor goroutine: once a second it adds a Sample to the
// timeline, samples the node's memory and writes the progress line.

// Sample is one second of a run's timeline.
type Sample struct {
	// Second is the time since the run started at the end of the
	// interval the rates cover.
	Second                   float64 `json:"second"`
	Phase                    string  `json:"phase"`
	ProducedRecordsPerSecond float64 `json:"producedRecordsPerSecond"`
	ConsumedRecordsPerSecond float64 `json:"consumedRecordsPerSecond"`
	ProducedMBPerSecond      float64 `json:"producedMBPerSecond"`
	ConsumedMBPerSecond      float64 `json:"consumedMBPerSecond"`
}

const (
	sampleInterval = time.Second
	// progressEvery is how many samples one progress line covers when
	// the output is not a terminal (a log file wants fewer lines).
	progressEvery = 5
)

// isTerminal reports whether w is a terminal, where the progress line
// is rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startMonitor starts the monitor goroutine; the returned function stops
// it and waits for it, and may be called more than once.
func (r *runner) startMonitor() (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.monitor(quit)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
}

// counts are the cumulative totals one sample or progress line is the
// difference of.
type counts struct {
	at                 time.Time
	produced, received int64
}

func (r *runner) counts() counts {
	return counts{at: time.Now(), produced: r.totalAcked(), received: r.totalReceived()}
}

func (r *runner) monitor(quit <-chan struct{}) {
	terminal := r.opts.Progress != nil && isTerminal(r.opts.Progress)
	every := progressEvery
	if r.opts.progressEvery > 0 {
		every = r.opts.progressEvery
	}
	if terminal {
		every = 1
	}
	tick := time.NewTicker(sampleInterval)
	defer tick.Stop()
	start := time.Unix(0, r.startNanos)
	prev := r.counts()
	lastLine := prev
	for n := 1; ; n++ {
		final := false
		select {
		case <-quit: // the run is over: one last, partial sample
			final = true
		case <-tick.C: // one more second
		}
		now := r.counts()
		secs := now.at.Sub(prev.at).Seconds()
		if final {
			if secs >= minFinalSample {
				r.addSample(start, prev, now)
			}
			if terminal {
				fmt.Fprintln(r.opts.Progress)
			}
			return
		}
		r.addSample(start, prev, now)
		prev = now
		for _, n := range r.nodes {
			n.sample()
		}
		if r.opts.Progress != nil && n%every == 0 {
			r.printProgress(terminal, start, lastLine, now)
			lastLine = now
		}
	}
}

// minFinalSample is the shortest last interval worth a sample: rates
// over less are noise.
const minFinalSample = 0.2

// addSample appends the rates between two counts to the timeline.
func (r *runner) addSample(start time.Time, prev, now counts) {
	size := float64(r.w.MessageSize)
	secs := now.at.Sub(prev.at).Seconds()
	produced := float64(now.produced-prev.produced) / secs
	received := float64(now.received-prev.received) / secs
	r.timeline = append(r.timeline, Sample{
		Second:                   now.at.Sub(start).Seconds(),
		Phase:                    phase(r.phase.Load()).String(),
		ProducedRecordsPerSecond: produced,
		ConsumedRecordsPerSecond: received,
		ProducedMBPerSecond:      produced * size / 1e6,
		ConsumedMBPerSecond:      received * size / 1e6,
	})
}

// printProgress writes one progress line with the rates since the last
// one.
func (r *runner) printProgress(terminal bool, start time.Time, from, to counts) {
	secs := to.at.Sub(from.at).Seconds()
	size := float64(r.w.MessageSize)
	produced := float64(to.produced-from.produced) / secs
	received := float64(to.received-from.received) / secs
	var failed int64
	for _, p := range r.producers {
		failed += p.failed.Load()
	}
	// Lag is what the subscriptions still owe: every acknowledged record
	// is due once per subscription.
	lag := to.produced*int64(r.w.SubscriptionsPerTopic) - to.received
	line := fmt.Sprintf("%-8s %4.0fs  produce %9s rec/s %7.1f MB/s  consume %9s rec/s %7.1f MB/s  lag %s  errors %d",
		phase(r.phase.Load()), to.at.Sub(start).Seconds(),
		count(int64(produced)), produced*size/1e6, count(int64(received)), received*size/1e6,
		count(max(lag, 0)), failed)
	if terminal {
		// Padding clears what a longer previous line left behind.
		fmt.Fprintf(r.opts.Progress, "\r%-*s", progressWidth, line)
		return
	}
	fmt.Fprintln(r.opts.Progress, strings.TrimRight(line, " "))
}

const progressWidth = 130
