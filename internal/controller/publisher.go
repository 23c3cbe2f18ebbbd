package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// publisher delivers every image the FSM produces, in order, to the
// subscribers, from its own goroutine, so that raft's FSM goroutine never
// waits on a subscriber (the replica manager opens logs when it sees a new
// topic, which takes disk time).
//
// It also keeps the "published index": the Raft index of the last image
// every subscriber has seen. A proposer waits for its entry's index there
// before answering, which is what makes a change visible to the broker
// side (and to Image) by the time CreateTopics returns.
type publisher struct {
	// deliverMu is held while one image is handed to the subscribers and
	// while Subscribe hands a new subscriber the current image, so each
	// subscriber sees every image after its first exactly once, in order.
	deliverMu sync.Mutex
	// published is the last image delivered to every subscriber.
	published atomic.Pointer[metadata.Image]

	mu struct {
		sync.Mutex
		queue  []publication
		closed bool
		subs   []*subscriber // replaced, never edited in place: deliver iterates a snapshot
		index  uint64        // published index
		// changed is closed (and replaced) whenever index moves.
		changed chan struct{}
	}
	wake chan struct{} // buffered(1): the queue is not empty, or closing
	done chan struct{} // closed when run returns
}

type publication struct {
	img   *metadata.Image
	index uint64
}

type subscriber struct {
	fn        func(*metadata.Image)
	cancelled atomic.Bool
}

func newPublisher(initial *metadata.Image) *publisher {
	p := &publisher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.published.Store(initial)
	p.mu.changed = make(chan struct{})
	go p.run()
	return p
}

// push queues an image. Called from raft's FSM goroutine; never blocks on
// subscribers.
func (p *publisher) push(img *metadata.Image, index uint64) {
	p.mu.Lock()
	p.mu.queue = append(p.mu.queue, publication{img: img, index: index})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}: // run was idle or will look again
	default: // a wake-up is already pending
	}
}

// run is the publisher goroutine. After close it delivers what is queued,
// then returns.
func (p *publisher) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		batch, closed := p.mu.queue, p.mu.closed
		p.mu.queue = nil
		p.mu.Unlock()
		for _, pub := range batch {
			p.deliver(pub)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-p.wake // push or close
	}
}

func (p *publisher) deliver(pub publication) {
	p.deliverMu.Lock()
	p.mu.Lock()
	subs := p.mu.subs
	p.mu.Unlock()
	for _, s := range subs {
		if !s.cancelled.Load() {
			s.fn(pub.img)
		}
	}
	p.published.Store(pub.img)
	p.deliverMu.Unlock()

	p.mu.Lock()
	if pub.index > p.mu.index {
		p.mu.index = pub.index
		close(p.mu.changed)
		p.mu.changed = make(chan struct{})
	}
	p.mu.Unlock()
}

// subscribe: see Controller.Subscribe.
func (p *publisher) subscribe(fn func(*metadata.Image)) (cancel func()) {
	s := &subscriber{fn: fn}
	p.deliverMu.Lock()
	fn(p.published.Load())
	p.mu.Lock()
	p.mu.subs = append(slices.Clip(p.mu.subs), s)
	p.mu.Unlock()
	p.deliverMu.Unlock()
	return func() {
		s.cancelled.Store(true)
		p.mu.Lock()
		if i := slices.Index(p.mu.subs, s); i >= 0 {
			p.mu.subs = slices.Delete(slices.Clone(p.mu.subs), i, i+1)
		}
		p.mu.Unlock()
	}
}

// waitPublished returns once every subscriber has seen the image of Raft
// index, or ctx ends (controlplane.ErrTimedOut), or the publisher stops
// short of it (controlplane.ErrNotController).
func (p *publisher) waitPublished(ctx context.Context, index uint64) error {
	for {
		p.mu.Lock()
		reached, changed := p.mu.index >= index, p.mu.changed
		p.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-changed: // the index moved; look again
		case <-ctx.Done():
			return fmt.Errorf("%w: change committed at index %d but not yet published: %w", controlplane.ErrTimedOut, index, context.Cause(ctx))
		case <-p.done:
			p.mu.Lock()
			reached = p.mu.index >= index
			p.mu.Unlock()
			if reached {
				return nil
			}
			return fmt.Errorf("%w: controller closed", controlplane.ErrNotController)
		}
	}
}

// close stops run after it has delivered what is queued, and waits for it.
func (p *publisher) close() {
	p.mu.Lock()
	p.mu.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}
