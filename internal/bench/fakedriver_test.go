package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// fakeDriver is an in-memory system under test for the runner's tests:
// each topic is a set of partition logs in memory. A producer's records
// are acknowledged in order by a goroutine of its own (as a real
// client's are), which appends them to the log first, so a stalled
// "broker" delays both the acknowledgement and the consumers.
//
// Faults, set before the run: every failEvery-th send fails, consumers
// skip every dropEvery-th record or deliver every dupEvery-th twice, and
// the broker stalls for stallFor once stallAfter has passed since the
// first record.
type fakeDriver struct {
	failEvery  int64
	dropEvery  int64
	dupEvery   int64
	corrupt    bool // one consumer sees one value a byte short
	corrupted  atomic.Bool
	stallAfter time.Duration
	stallFor   time.Duration
	// spinPerSend is CPU time every Send burns, as a client's batching
	// and CRCs do.
	spinPerSend time.Duration

	mu     sync.Mutex
	topics map[string]*fakeTopic
	sends  atomic.Int64
	first  atomic.Int64 // unix nanos of the first send
	stall  sync.Once
}

type fakeTopic struct {
	mu      sync.Mutex
	parts   [][][]byte
	changed chan struct{} // closed and replaced on every append
}

func newFakeDriver() *fakeDriver { return &fakeDriver{topics: map[string]*fakeTopic{}} }

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Settings() map[string]string { return map[string]string{"fake": "yes"} }

func (d *fakeDriver) CreateTopics(_ context.Context, topics []string, partitions int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range topics {
		if _, ok := d.topics[t]; ok {
			return fmt.Errorf("topic %s exists", t)
		}
		d.topics[t] = &fakeTopic{parts: make([][][]byte, partitions), changed: make(chan struct{})}
	}
	return nil
}

func (d *fakeDriver) topic(name string) (*fakeTopic, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[name]
	if !ok {
		return nil, fmt.Errorf("no topic %s", name)
	}
	return t, nil
}

func (d *fakeDriver) NewProducer(_ context.Context, topic string) (Producer, error) {
	t, err := d.topic(topic)
	if err != nil {
		return nil, err
	}
	p := &fakeProducer{d: d, t: t, queue: make(chan fakeSend, 4096), stopped: make(chan struct{})}
	go p.acker()
	return p, nil
}

type fakeSend struct {
	value []byte
	done  func(error)
	fail  bool
	flush chan struct{} // a flush marker, not a record
}

type fakeProducer struct {
	d       *fakeDriver
	t       *fakeTopic
	queue   chan fakeSend
	next    int
	closed  sync.Once
	stopped chan struct{}
}

func (p *fakeProducer) Send(ctx context.Context, _, value []byte, done func(error)) {
	n := p.d.sends.Add(1)
	for start := time.Now(); time.Since(start) < p.d.spinPerSend; {
		// Busy on purpose: the client's CPU is what a test measures.
	}
	p.d.first.CompareAndSwap(0, time.Now().UnixNano())
	s := fakeSend{value: append([]byte(nil), value...), done: done, fail: p.d.failEvery > 0 && n%p.d.failEvery == 0}
	select {
	case p.queue <- s: // queued; a full queue blocks, as a client's full buffer does
	case <-ctx.Done():
		done(ctx.Err())
	}
}

// acker is the producer's "broker": it appends and acknowledges records
// in order.
func (p *fakeProducer) acker() {
	defer close(p.stopped)
	for s := range p.queue {
		if s.flush != nil {
			close(s.flush)
			continue
		}
		if p.d.stallFor > 0 && time.Since(time.Unix(0, p.d.first.Load())) > p.d.stallAfter {
			p.d.stall.Do(func() { time.Sleep(p.d.stallFor) }) // the modelled stall itself
		}
		if s.fail {
			s.done(errors.New("fake: send failed"))
			continue
		}
		p.t.mu.Lock()
		part := p.next % len(p.t.parts)
		p.next++
		p.t.parts[part] = append(p.t.parts[part], s.value)
		close(p.t.changed)
		p.t.changed = make(chan struct{})
		p.t.mu.Unlock()
		s.done(nil)
	}
}

func (p *fakeProducer) Flush(ctx context.Context) error {
	marker := make(chan struct{})
	select {
	case p.queue <- fakeSend{flush: marker}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-marker: // everything before it is acknowledged
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *fakeProducer) Close() error {
	p.closed.Do(func() { close(p.queue) })
	<-p.stopped
	return nil
}

func (d *fakeDriver) NewConsumer(_ context.Context, topic string, partitions []int32) (Consumer, error) {
	t, err := d.topic(topic)
	if err != nil {
		return nil, err
	}
	return &fakeConsumer{d: d, t: t, partitions: partitions, pos: make([]int, len(partitions))}, nil
}

type fakeConsumer struct {
	d          *fakeDriver
	t          *fakeTopic
	partitions []int32
	pos        []int
	delivered  int64
}

func (c *fakeConsumer) Run(ctx context.Context, fn func([]byte)) error {
	for {
		c.t.mu.Lock()
		var batch [][]byte
		for i, p := range c.partitions {
			log := c.t.parts[p]
			batch = append(batch, log[c.pos[i]:]...)
			c.pos[i] = len(log)
		}
		changed := c.t.changed
		c.t.mu.Unlock()
		for _, v := range batch {
			c.delivered++
			switch {
			case c.d.dropEvery > 0 && c.delivered%c.d.dropEvery == 0:
				continue
			case c.d.dupEvery > 0 && c.delivered%c.d.dupEvery == 0:
				fn(v)
			case c.d.corrupt && c.d.corrupted.CompareAndSwap(false, true):
				v = v[:len(v)-1]
			}
			fn(v)
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-changed: // new records
		case <-ctx.Done(): // the run is over
			return nil
		}
	}
}

func (c *fakeConsumer) Close() error { return nil }

func (d *fakeDriver) Close() error { return nil }
