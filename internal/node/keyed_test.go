package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// fakeMarkImages is an image whose topics a test changes.
type fakeMarkImages struct {
	mu  sync.Mutex
	img *metadata.Image
}

func (f *fakeMarkImages) Image() *metadata.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img
}

// set puts topics (name -> keyed) in a new image.
func (f *fakeMarkImages) set(topics map[metadata.UUID]bool) {
	img := &metadata.Image{Topics: map[string]*metadata.Topic{}, TopicsByID: map[metadata.UUID]*metadata.Topic{}}
	for id, keyed := range topics {
		t := &metadata.Topic{Name: fmt.Sprintf("t%x", id[0]), ID: id, Keyed: keyed}
		img.Topics[t.Name], img.TopicsByID[id] = t, t
	}
	f.mu.Lock()
	f.img = img
	f.mu.Unlock()
}

// fakeMarkClient answers each MarkTopicKeyed with answer, counting calls
// and the most in flight at once.
type fakeMarkClient struct {
	answer             func(ctx context.Context, id metadata.UUID, call int) error
	calls              atomic.Int32
	inFlight, mostSeen atomic.Int32
}

func (c *fakeMarkClient) MarkTopicKeyed(ctx context.Context, id metadata.UUID) error {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		seen := c.mostSeen.Load()
		if n <= seen || c.mostSeen.CompareAndSwap(seen, n) {
			break
		}
	}
	return c.answer(ctx, id, int(c.calls.Add(1)))
}

func newTestMarker(client *fakeMarkClient, images *fakeMarkImages, log *testutil.Buffer) *keyedMarker {
	m := newKeyedMarker(client, images, slog.New(slog.NewTextHandler(log, nil)))
	m.retryMin, m.retryMax = time.Millisecond, 4*time.Millisecond
	return m
}

// A mark is asked again after the controller moves and after a refusal,
// until committed, one at a time however many partitions report; it is
// logged once, at info, when it is; a topic the image has keyed, and an
// internal topic, are never asked.
func TestKeyedMarkerRetriesUntilCommitted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	id := metadata.UUID{1}
	images := &fakeMarkImages{}
	images.set(map[metadata.UUID]bool{id: false, {2}: true})
	var committed atomic.Bool
	client := &fakeMarkClient{answer: func(_ context.Context, got metadata.UUID, call int) error {
		switch {
		case got != id:
			return fmt.Errorf("asked to mark %v", got)
		case call == 1:
			return fmt.Errorf("%w: moving", controlplane.ErrNotController)
		case call == 2:
			return fmt.Errorf("%w: slow", controlplane.ErrTimedOut)
		case call == 3:
			return errors.New("a refusal the marker does not know")
		}
		committed.Store(true)
		return nil
	}}
	log := &testutil.Buffer{}
	m := newTestMarker(client, images, log)
	defer m.close()
	for range 20 { // every partition of the topic, at once
		go m.note("t01", id)
	}
	m.note("t02", metadata.UUID{2})                // keyed already
	m.note("__consumer_offsets", metadata.UUID{3}) // internal
	testutil.Eventually(t, 5*time.Second, func() error {
		if !committed.Load() {
			return fmt.Errorf("%d calls, not committed", client.calls.Load())
		}
		if !strings.Contains(log.String(), "has keyed records") {
			return errors.New("no log line yet")
		}
		return nil
	})
	images.set(map[metadata.UUID]bool{id: true, {2}: true})
	m.note("t01", id) // the image has it now
	m.close()
	if got := client.calls.Load(); got != 4 {
		t.Errorf("%d calls, want 4 (three failures, then the commit)", got)
	}
	if got := client.mostSeen.Load(); got != 1 {
		t.Errorf("%d marks of one topic in flight at once, want 1", got)
	}
	logged := log.String()
	if n := strings.Count(logged, "topic t01 has keyed records; adding partitions moves keys"); n != 1 || !strings.Contains(logged, "level=INFO") {
		t.Errorf("the mark logged %d times:\n%s", n, logged)
	}
	if strings.Count(logged, "level=WARN") != 1 {
		t.Errorf("want one warning, for the unknown refusal only:\n%s", logged)
	}
}

// A mark stops when the topic leaves the image, when the controller says
// the id is unknown, and when the marker closes in the middle of an
// attempt; a note after close starts nothing. No goroutine outlives
// close.
func TestKeyedMarkerStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	gone, unknown, blocked := metadata.UUID{1}, metadata.UUID{2}, metadata.UUID{3}
	images := &fakeMarkImages{}
	images.set(map[metadata.UUID]bool{gone: false, unknown: false, blocked: false})
	var goneCalls, blockedCalls atomic.Int32
	client := &fakeMarkClient{answer: func(ctx context.Context, id metadata.UUID, _ int) error {
		switch id {
		case gone:
			if goneCalls.Add(1) == 2 {
				images.set(map[metadata.UUID]bool{unknown: false, blocked: false})
			}
			return fmt.Errorf("%w: moving", controlplane.ErrNotController)
		case unknown:
			return fmt.Errorf("%w: deleted", controlplane.ErrUnknownTopicID)
		}
		blockedCalls.Add(1)
		<-ctx.Done() // a commit that never comes
		return fmt.Errorf("%w: %v", controlplane.ErrTimedOut, ctx.Err())
	}}
	m := newTestMarker(client, images, &testutil.Buffer{})
	m.note("t01", gone)
	m.note("t02", unknown)
	m.note("t03", blocked)
	testutil.Eventually(t, 5*time.Second, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.mu.marking[gone] || m.mu.marking[unknown] {
			return fmt.Errorf("still marking: %v", m.mu.marking)
		}
		if blockedCalls.Load() == 0 {
			return errors.New("the blocked mark has not been asked yet")
		}
		return nil
	})
	if goneCalls.Load() != 2 || client.calls.Load() != 4 {
		t.Errorf("calls: %d for the deleted topic (want 2), %d in all (want 4)", goneCalls.Load(), client.calls.Load())
	}
	m.close()
	m.note("t04", metadata.UUID{4})
	if client.calls.Load() != 4 {
		t.Errorf("a note after close asked the controller")
	}
}

// On a node: a topic with keyed records becomes keyed in the image
// after a produce (franz-go, null and empty keys beside real ones), a
// topic of null keys only never does, and the mark survives the node's
// restart (it is in the metadata log).
func TestNodeMarksKeyedTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	cl := newClient(t, n, kgo.AllowAutoTopicCreation())
	recs := []*kgo.Record{
		{Topic: "nulls", Value: []byte("a")},
		{Topic: "nulls", Value: []byte("b")},
		{Topic: "empty-key", Key: []byte{}, Value: []byte("c")},
		{Topic: "keyed", Value: []byte("d")},
		{Topic: "keyed", Key: []byte("k"), Value: []byte("e")},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	keyed := func(n *Node, topic string) bool {
		t, ok := n.ctrl.Image().Topics[topic]
		return ok && t.Keyed
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, topic := range []string{"keyed", "empty-key"} {
			if !keyed(n, topic) {
				return fmt.Errorf("topic %s is not marked keyed", topic)
			}
		}
		return nil
	})
	if keyed(n, "nulls") {
		t.Fatal("a topic of null keys only is marked keyed")
	}
	// No internal topic is marked: they never grow.
	for name, tp := range n.ctrl.Image().Topics {
		if metadata.IsInternalTopic(name) && tp.Keyed {
			t.Errorf("internal topic %s is marked keyed", name)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	if !keyed(n, "keyed") || keyed(n, "nulls") {
		t.Fatalf("after a restart: keyed %v, nulls %v", keyed(n, "keyed"), keyed(n, "nulls"))
	}
}

// FjordMarkTopicKeyed over the wire, on three nodes: refused to an
// outside client (CLUSTER_AUTHORIZATION_FAILED), by a node that is not
// the active controller (NOT_CONTROLLER, never forwarded again), for an
// unknown or zero id, each changing nothing; then a keyed produce to a
// partition led by a node that is not the controller is marked through
// its forwarding client, in every node's image, once.
func TestMarkTopicKeyedAcrossNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startISRCluster(t, ctx)
	fjordOpts := fjordmsg.ClientOpts()
	_, outside := brokerClient(t, c.ctrl, fjordOpts...)
	_, asLeader := brokerClient(t, c.ctrl, append(fjordOpts, kgo.ClientID(c.leader.InternalClientID()))...)
	_, leaderAtFollower := brokerClient(t, c.follower, append(fjordOpts, kgo.ClientID(c.leader.InternalClientID()))...)
	mark := func(b *kgo.Broker, id metadata.UUID) (*fjordmsg.MarkTopicKeyedResponse, error) {
		resp, err := b.Request(ctx, &fjordmsg.MarkTopicKeyedRequest{TopicID: id})
		if err != nil {
			return nil, err
		}
		r := resp.(*fjordmsg.MarkTopicKeyedResponse)
		return r, kerr.ErrorForCode(r.ErrorCode)
	}
	before := c.ctrl.ctrl.Image().Offset
	for _, tc := range []struct {
		name string
		b    *kgo.Broker
		id   metadata.UUID
		want *kerr.Error
	}{
		{"from an outside client", outside, c.topicID, kerr.ClusterAuthorizationFailed},
		{"to a node that is not the controller", leaderAtFollower, c.topicID, kerr.NotController},
		{"for an unknown topic id", asLeader, metadata.UUID{0xde, 0xad}, kerr.UnknownTopicID},
		{"for the zero id", asLeader, metadata.UUID{}, kerr.InvalidRequest},
	} {
		if r, err := mark(tc.b, tc.id); !errors.Is(err, tc.want) || r.MetadataOffset != 0 {
			t.Errorf("MarkTopicKeyed %s: %v (offset %d), want %v", tc.name, err, r.MetadataOffset, tc.want)
		}
	}
	if after := c.ctrl.ctrl.Image(); after.Offset != before || after.TopicsByID[c.topicID].Keyed {
		t.Fatalf("refused marks changed the metadata: offset %d -> %d", before, after.Offset)
	}

	producer := newClient(t, c.leader)
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "isr", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, n := range c.nodes {
			if !n.ctrl.Image().TopicsByID[c.topicID].Keyed {
				return fmt.Errorf("node %d's image does not have the mark", n.cfg.NodeID)
			}
		}
		return nil
	})
	// Asked again (a node that missed the answer does): nil, nothing
	// committed.
	marked := c.ctrl.ctrl.Image().Offset
	if r, err := mark(asLeader, c.topicID); err != nil || r.MetadataOffset < int64(marked) {
		t.Fatalf("marking again: %v, offset %d (image at %d)", err, r.MetadataOffset, marked)
	}
	if got := c.ctrl.ctrl.Image().Offset; got != marked {
		t.Fatalf("marking again committed: offset %d -> %d", marked, got)
	}
}
