package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Marking topics that have keyed records (DESIGN.md section 24).
//
// The replica manager tells the node of each partition's first keyed
// append as its leader (replica.Options.KeyedAppend), on the produce
// path. The node then commits metadata.TopicKeyedRecord through its
// forwarding client, unless its image says the topic is keyed already,
// so `fjord topic alter --partitions` can refuse to move the topic's
// keys. The commit is a control-plane round trip, so it runs in a
// goroutine of its own, never on the produce path: at most one per topic
// id at a time, asking again with backoff (a controller election, a lost
// connection) until the mark is committed, the topic is gone from the
// image, or the node closes.
//
// What is lost: a node that closes (or dies) before its mark commits
// leaves the topic unmarked until the next keyed append to it by a
// leader, which a new process (new partition objects) reports again.

// Backoff between a mark's attempts.
const (
	keyedRetryMin = 100 * time.Millisecond
	keyedRetryMax = 5 * time.Second
)

// keyedMarker commits the marks. Threads: note is called from produce
// goroutines, concurrently; each mark runs on its own goroutine, which
// close waits for.
type keyedMarker struct {
	client interface {
		MarkTopicKeyed(ctx context.Context, id metadata.UUID) error
	}
	images interface{ Image() *metadata.Image }
	log    *slog.Logger
	// retryMin and retryMax: keyedRetryMin and keyedRetryMax, shorter
	// in tests.
	retryMin, retryMax time.Duration

	// ctx ends at close, ending every mark's wait and attempt.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		// marking holds the topic ids with a mark in flight.
		marking map[metadata.UUID]bool
		closed  bool
	}
}

func newKeyedMarker(client interface {
	MarkTopicKeyed(ctx context.Context, id metadata.UUID) error
}, images interface{ Image() *metadata.Image }, log *slog.Logger) *keyedMarker {
	m := &keyedMarker{client: client, images: images, log: log, retryMin: keyedRetryMin, retryMax: keyedRetryMax}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.marking = map[metadata.UUID]bool{}
	return m
}

// note is replica.Options.KeyedAppend: a partition of topic (id) that
// this node leads appended its first keyed record. It does not block:
// it starts the mark unless the image has it, or one is in flight, or
// the topic is an internal one (their partition counts never change,
// metadata.RefuseInternalPartitions, so a mark would buy nothing and
// cost every cluster a metadata record at its first group commit).
func (m *keyedMarker) note(topic string, id metadata.UUID) {
	if metadata.IsInternalTopic(topic) || m.marked(id) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed || m.mu.marking[id] {
		return
	}
	m.mu.marking[id] = true
	m.wg.Add(1)
	go m.mark(topic, id)
}

// marked reports whether this node's image says topic id is keyed.
func (m *keyedMarker) marked(id metadata.UUID) bool {
	img := m.images.Image()
	if img == nil {
		return false
	}
	t, ok := img.TopicsByID[id]
	return ok && t.Keyed
}

// mark commits the mark of topic id, asking until it is committed, the
// topic is gone (or keyed, by another node's mark) in this node's
// image, or the marker closes.
func (m *keyedMarker) mark(topic string, id metadata.UUID) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		delete(m.mu.marking, id)
		m.mu.Unlock()
	}()
	backoff := m.retryMin
	for attempt := 1; ; attempt++ {
		if img := m.images.Image(); img != nil {
			if t, ok := img.TopicsByID[id]; !ok || t.Keyed {
				return // deleted, or marked by another leader
			}
		}
		err := m.client.MarkTopicKeyed(m.ctx, id)
		switch {
		case err == nil:
			m.log.Info("topic "+topic+" has keyed records; adding partitions moves keys",
				"topic", topic, "topic_id", id.Base64())
			return
		case errors.Is(err, controlplane.ErrUnknownTopicID):
			// Deleted at the controller; this node's image will follow.
			return
		case m.ctx.Err() != nil:
			return
		case !errors.Is(err, controlplane.ErrNotController) && !errors.Is(err, controlplane.ErrTimedOut):
			// Not the controller moving: said, and asked again, since
			// the mark is what a later grow of the topic is refused by.
			m.log.Warn("could not mark a topic as having keyed records; will ask again",
				"topic", topic, "topic_id", id.Base64(), "attempt", attempt, "err", err)
		}
		if !clock.Sleep(m.ctx, backoff) {
			return
		}
		backoff = min(backoff*2, m.retryMax)
	}
}

// close ends the marks in flight and waits for their goroutines; a note
// after it starts nothing.
func (m *keyedMarker) close() {
	m.mu.Lock()
	m.mu.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}
