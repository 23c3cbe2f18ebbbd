package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Log is a Recorder that writes events to a file, one JSON line each
// (format.go).
//
// Threads: Record may be called from any goroutine; it takes Log's lock
// for the rate limits and a non-blocking send, never waiting for the
// disk. One writer goroutine, started by Open, owns the file: it drains
// the queue, writes, rotates, and on Close writes the rest and syncs.
//
// Bounds: the queue holds at most Config.QueueLength events (an event
// that finds it full is dropped and counted), each of a few KiB at most
// (MaxFieldBytes); the rate limits bound the lines written per second;
// rotation bounds the disk: the file is renamed to path+".1" (replacing
// the one before) before a line would take it past MaxBytes, so the two
// hold at most 2*MaxBytes.
//
// Durability: lines reach the operating system when the queue runs empty
// (a batch per write), and the disk when the file rotates and at Close.
// An audit line is not a commit: a crash may lose the last ones, and
// syncing each would let a flood of failed logins cost an fsync apiece.
type Log struct {
	path string
	cfg  Config

	// queue carries admitted events to the writer; closed by Close
	// under mu, so Record never sends on a closed channel.
	queue chan item
	// done is closed when the writer has written everything, synced and
	// closed the file; closeErr is its error then.
	done     chan struct{}
	closeErr error
	// tail is the count of events dropped after the last one queued,
	// handed to the writer by Close (before it closes queue).
	tail item

	written prometheus.Counter
	dropped [numDropReasons]prometheus.Counter
	descs   []prometheus.Collector

	mu struct {
		sync.Mutex
		closed  bool
		limiter *limiter
		// dropped counts the events dropped since the last one queued,
		// the first of them at droppedSince; the next event queued
		// carries them to the writer, which writes the dropped line
		// before it, naming the keys droppers counts.
		dropped      int64
		droppedSince time.Time
		droppers     droppers
	}

	// Owned by the writer goroutine (and Open before it starts).
	f    *os.File
	size int64 // bytes in f
	// torn: a failed write may have left part of a line in f; the next
	// write starts with a newline so the lines after it parse.
	torn bool
	// failing: the last write failed; rotateFailing: the last rename
	// did (each logged once until one succeeds).
	failing, rotateFailing bool
	// lost counts the events a failed write lost, the first at
	// lostSince, for the next dropped line.
	lost      int64
	lostSince time.Time

	// testHookWrite, when set (tests), runs on the writer before each
	// batch is written.
	testHookWrite func()
}

var (
	_ Recorder             = (*Log)(nil)
	_ prometheus.Collector = (*Log)(nil)
)

// item is a queued event with the drops before it, and the keys that
// dropped the most of them.
type item struct {
	e       Event
	dropped int64
	since   time.Time
	top     []droppedKey
}

// Why an event was not written (the reason label of
// fjord_audit_events_dropped_total).
const (
	dropRateLimitClient = iota // its key's bucket (principal and host) was empty
	dropRateLimit              // its class's log-wide budget was empty
	dropQueueFull              // the writer was behind by QueueLength events
	dropWriteError             // writing the file failed
	numDropReasons
)

var dropReasons = [numDropReasons]string{"rate_limit_client", "rate_limit", "queue_full", "write_error"}

// Config's defaults and bounds.
const (
	DefaultMaxBytes    = 100 << 20
	DefaultRate        = 1000
	DefaultBurst       = 1000
	DefaultClientRate  = 50
	DefaultClientBurst = 100
	DefaultMaxClients  = 10000
	DefaultQueueLength = 4096
	// MinMaxBytes is the smallest MaxBytes: above the longest line.
	MinMaxBytes = 64 << 10
	// maxBatch bounds the events the writer gathers into one write.
	maxBatch = 256
)

// Config configures a Log. Zero fields take the defaults.
type Config struct {
	// MaxBytes is the size at which the file is rotated to path+".1"
	// (default DefaultMaxBytes, at least MinMaxBytes).
	MaxBytes int64
	// Rate and Burst bound each of the log's two budgets: events a
	// second, and how many may come at once (defaults DefaultRate,
	// DefaultBurst). Successes have one; failures and denials share the
	// other, a quarter of it reserved for failed authentications and a
	// quarter for denials (limit.go), so the log writes at most twice
	// Rate lines a second.
	Rate  float64
	Burst int
	// ClientRate and ClientBurst bound each principal on each client
	// host (for a failed authentication, each host; an IPv6 host is its
	// /64), successes apart from the rest: defaults DefaultClientRate,
	// DefaultClientBurst.
	ClientRate  float64
	ClientBurst int
	// MaxClients bounds the principals and hosts whose rates are kept;
	// past it, new ones share one bucket of ClientRate a class (default
	// DefaultMaxClients).
	MaxClients int
	// QueueLength bounds the events waiting for the writer (default
	// DefaultQueueLength).
	QueueLength int
	// Now is the time of events recorded without one and of the rate
	// limits (default time.Now). It must be safe for concurrent use.
	Now func() time.Time
	// Logger receives write failures (default slog.Default()).
	Logger *slog.Logger
}

// ErrInvalidConfig is Open's error for a Config it refuses.
var ErrInvalidConfig = errors.New("audit: invalid config")

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.ClientRate == 0 {
		c.ClientRate = DefaultClientRate
	}
	if c.ClientBurst == 0 {
		c.ClientBurst = DefaultClientBurst
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.QueueLength == 0 {
		c.QueueLength = DefaultQueueLength
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.MaxBytes < MinMaxBytes:
		return c, fmt.Errorf("%w: max bytes %d: at least %d", ErrInvalidConfig, c.MaxBytes, MinMaxBytes)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0) || !(c.ClientRate > 0) || math.IsInf(c.ClientRate, 0):
		return c, fmt.Errorf("%w: rates %v and %v: want positive events a second", ErrInvalidConfig, c.Rate, c.ClientRate)
	case c.Burst < 1 || c.ClientBurst < 1 || c.MaxClients < 1 || c.QueueLength < 1:
		return c, fmt.Errorf("%w: burst %d, client burst %d, max clients %d, queue length %d: want positive numbers",
			ErrInvalidConfig, c.Burst, c.ClientBurst, c.MaxClients, c.QueueLength)
	}
	return c, nil
}

// Open opens (creating, or appending to) the audit log at path and starts
// its writer. The file's directory must exist; the file is made readable
// by its owner only.
func Open(path string, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, cfg: cfg, queue: make(chan item, cfg.QueueLength), done: make(chan struct{}), f: f, size: size}
	l.mu.limiter = newLimiter(cfg.Now(), cfg)
	l.written = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fjord_audit_events_written_total", Help: "Audit events (authentication results, authorization denials) written to the audit log.",
	})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fjord_audit_events_dropped_total", Help: "Audit events not written, by reason: rate_limit_client (one principal and host over its rate), rate_limit (the whole log's successes, or its failures and denials, over their rate), queue_full (the writer behind), write_error.",
	}, []string{"reason"})
	for r := range l.dropped {
		l.dropped[r] = dropped.WithLabelValues(dropReasons[r])
	}
	l.descs = []prometheus.Collector{l.written, dropped}
	go l.run()
	return l, nil
}

// openFile opens path for appending and returns its size. Its errors
// name the path (an *os.PathError, or a file that is not regular).
func openFile(path string) (*os.File, int64, error) {
	// A FIFO or a device would take lines the rotation cannot bound, and
	// opening a FIFO for writing blocks until a reader comes: refuse
	// them before opening (and check again after, against a swap).
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("audit: %s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("audit: %s is not a regular file", path)
	}
	return f, fi.Size(), nil
}

// Describe and Collect make Log a prometheus.Collector of its counters.
func (l *Log) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l.descs {
		c.Describe(ch)
	}
}

func (l *Log) Collect(ch chan<- prometheus.Metric) {
	for _, c := range l.descs {
		c.Collect(ch)
	}
}

// Record queues e for writing, unless a rate limit or a full queue drops
// it (counted, and summed up in the next dropped line). A zero e.Time is
// the time of the call. It does not wait for the disk. After Close it
// does nothing.
func (l *Log) Record(e Event) {
	now := l.cfg.Now()
	if e.Time.IsZero() {
		e.Time = now
	}
	cutFields(&e)
	k := keyFor(&e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return
	}
	if ok, clientOver := l.mu.limiter.allow(now, k); !ok {
		reason := dropRateLimit
		if clientOver {
			reason = dropRateLimitClient
		}
		l.dropLocked(now, k, reason)
		return
	}
	it := item{e: e, dropped: l.mu.dropped, since: l.mu.droppedSince}
	if it.dropped > 0 {
		it.top = l.mu.droppers.top()
	}
	select {
	case l.queue <- it:
		l.mu.dropped, l.mu.droppedSince = 0, time.Time{}
		l.mu.droppers.reset()
	default:
		l.dropLocked(now, k, dropQueueFull)
	}
}

// dropLocked counts an event of key k dropped at now.
//
// REQUIRES: l.mu held.
func (l *Log) dropLocked(now time.Time, k limitKey, reason int) {
	l.dropped[reason].Inc()
	if l.mu.dropped == 0 {
		l.mu.droppedSince = now
	}
	l.mu.dropped++
	l.mu.droppers.add(k)
}

// Close writes the queued events and the count of any dropped after
// them, syncs and closes the file. Record after Close does nothing. It
// is safe to call more than once; each call returns the first's error.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.mu.closed {
		l.mu.closed = true
		l.tail = item{dropped: l.mu.dropped, since: l.mu.droppedSince, top: l.mu.droppers.top()}
		close(l.queue) // the writer reads tail after the queue ends
	}
	l.mu.Unlock()
	<-l.done
	return l.closeErr
}

// batch is the lines the writer has in hand, written with one write.
type batch struct {
	buf bytes.Buffer
	// events is the events among the lines; carried the events that
	// its dropped lines count, the first at carriedSince. A failed write
	// loses the events and must count the carried ones again.
	events       int
	carried      int64
	carriedSince time.Time
}

func (b *batch) reset() {
	b.buf.Reset()
	b.events, b.carried, b.carriedSince = 0, 0, time.Time{}
}

// run is the writer goroutine: it writes the queue in batches until
// Close ends it.
func (l *Log) run() {
	defer close(l.done)
	var (
		b       batch
		scratch bytes.Buffer // one line being encoded
	)
	enc := json.NewEncoder(&scratch)
	enc.SetEscapeHTML(false) // escaped or not, "<" cannot break a line
	add := func(v any) {
		scratch.Reset()
		if err := enc.Encode(v); err != nil {
			// Strings, numbers and a time: unreachable.
			panic(fmt.Sprintf("audit: encoding a line: %v", err))
		}
		if l.size+int64(b.buf.Len()+scratch.Len()) > l.cfg.MaxBytes && l.size+int64(b.buf.Len()) > 0 {
			l.write(&b)
			l.rotate()
		}
		b.buf.Write(scratch.Bytes())
	}
	addDropped := func(at time.Time, it item) {
		count, since := it.dropped+l.lost, it.since
		if l.lost > 0 && (since.IsZero() || l.lostSince.Before(since)) {
			since = l.lostSince
		}
		if count == 0 {
			return
		}
		l.lost, l.lostSince = 0, time.Time{}
		add(droppedLine{Time: formatTime(at), Kind: kindDropped, Count: count, Since: formatTime(since), Top: it.top})
		if b.carried == 0 || since.Before(b.carriedSince) {
			b.carriedSince = since
		}
		b.carried += count
	}
	for it := range l.queue {
		for {
			addDropped(it.e.Time, it)
			add(eventLine{Time: formatTime(it.e.Time), Event: it.e})
			b.events++
			if b.events >= maxBatch {
				break
			}
			var ok bool
			select {
			case it, ok = <-l.queue:
			default:
			}
			if !ok {
				break // the queue is empty for now, or closed
			}
		}
		l.write(&b)
	}
	addDropped(l.cfg.Now(), l.tail)
	l.write(&b)
	l.closeErr = l.closeFile()
}

// write writes b to the file and empties it. A failure loses b's events:
// they and the drops b's dropped lines carried are counted for the next
// dropped line, and the failure is logged once until a write succeeds.
func (l *Log) write(b *batch) {
	if b.buf.Len() == 0 {
		return
	}
	defer b.reset()
	if l.testHookWrite != nil {
		l.testHookWrite()
	}
	err := l.reopen()
	if err == nil && l.torn {
		var n int
		n, err = l.f.Write([]byte{'\n'})
		l.size += int64(n)
		l.torn = n == 0
	}
	if err == nil {
		var n int
		n, err = l.f.Write(b.buf.Bytes())
		l.size += int64(n)
		l.torn = err != nil && n > 0
	}
	if err != nil {
		if !l.failing {
			l.cfg.Logger.Error("audit log: write failed; events are lost until it succeeds", "path", l.path, "err", err)
		}
		l.failing = true
		l.dropped[dropWriteError].Add(float64(b.events))
		since := l.cfg.Now()
		if b.carried > 0 && b.carriedSince.Before(since) {
			since = b.carriedSince
		}
		if l.lost == 0 || since.Before(l.lostSince) {
			l.lostSince = since
		}
		l.lost += int64(b.events) + b.carried
		return
	}
	if l.failing {
		l.cfg.Logger.Info("audit log: writing again", "path", l.path)
	}
	l.failing = false
	l.written.Add(float64(b.events))
}

// reopen opens the file again if a rotation could not.
func (l *Log) reopen() error {
	if l.f != nil {
		return nil
	}
	f, size, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.f, l.size, l.torn = f, size, false
	return nil
}

// rotate syncs and closes the file, renames it to path+".1" (replacing
// the last) and opens a new one. If the rename fails, writing goes on in
// the same file, and the next line past MaxBytes tries again.
func (l *Log) rotate() {
	if l.f == nil {
		return
	}
	if err := l.closeFile(); err != nil {
		l.cfg.Logger.Error("audit log: closing for rotation", "path", l.path, "err", err)
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		if !l.rotateFailing {
			l.cfg.Logger.Error("audit log: rotating failed; the file grows past its bound until it succeeds", "path", l.path, "err", err)
		}
		l.rotateFailing = true
	} else {
		l.rotateFailing = false
		syncDir(filepath.Dir(l.path))
	}
	if err := l.reopen(); err != nil {
		l.cfg.Logger.Error("audit log: reopening after rotation", "path", l.path, "err", err)
	}
}

// closeFile syncs and closes the file.
func (l *Log) closeFile() error {
	if l.f == nil {
		return nil
	}
	err := errors.Join(l.f.Sync(), l.f.Close())
	l.f = nil
	if err != nil {
		return fmt.Errorf("audit: %s: %w", l.path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable; best effort (an audit line is
// not a commit).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
