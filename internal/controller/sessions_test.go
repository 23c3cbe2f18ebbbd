package controller_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// advance moves clk forward by d in steps of step, each once the session
// loop has armed its next check (so every check runs, in order, and none
// looks like a stalled controller).
func advance(t *testing.T, clk *clock.Fake, d, step time.Duration, each func()) {
	t.Helper()
	for d > 0 {
		testutil.Eventually(t, 10*time.Second, func() error {
			if clk.Timers() == 0 {
				return errors.New("the session loop has no check armed")
			}
			return nil
		})
		s := min(d, step)
		clk.Advance(s)
		d -= s
		if each != nil {
			each()
		}
	}
}

// sessionController opens a controller on a fake clock with a 3 s
// session (a check every 300 ms).
func sessionController(t *testing.T) (*controller.Controller, *clock.Fake, time.Duration) {
	cfg := baseConfig(t, t.TempDir())
	cfg.BrokerSessionTimeout = 3 * time.Second
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	cfg.Clock = clk
	return open(t, cfg), clk, cfg.BrokerSessionTimeout
}

// A node id registered by a live process is refused to another
// incarnation (DUPLICATE_BROKER_REGISTRATION) and nothing is committed;
// the same incarnation may register again (a retry); once the first
// process has been silent for a session, the new one is accepted.
// Heartbeats keep a session and are refused with a stale epoch or for an
// unregistered broker.
func TestBrokerSessions(t *testing.T) {
	c, clk, session := sessionController(t)
	ctx := ctxT(t)
	// A new log's first controller set its metadata version with the
	// cluster id.
	if v := c.Image().MetadataVersion; v != metadata.KnownMetadataVersion {
		t.Fatalf("a new log's metadata version is %d, want %d", v, metadata.KnownMetadataVersion)
	}
	first := metadata.BrokerRecord{NodeID: 2, Host: "127.0.0.1", Port: 9093, IncarnationID: metadata.UUID{1}}
	registerLive(t, c, first)
	registerLive(t, c, first) // a retry
	epoch := c.Image().Brokers[2].Epoch
	beat := func() {
		img := c.Image()
		for _, id := range []int32{1, 2} {
			if err := heartbeatAt(ctx, c, id, img.Brokers[id].Epoch, img.Offset); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
				t.Fatalf("heartbeat of %d: %v", id, err)
			}
		}
	}

	second := first
	second.IncarnationID, second.Port = metadata.UUID{2}, 9094
	// Heartbeats keep the first alive past the session timeout.
	advance(t, clk, 4*session, session/10, beat)
	if c.Image().Brokers[2].Fenced {
		t.Fatal("a heartbeating broker was fenced")
	}
	offset := c.Image().Offset
	if _, err := c.RegisterBroker(ctx, second); !errors.Is(err, controlplane.ErrDuplicateBrokerRegistration) {
		t.Fatalf("another incarnation of a live broker: %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}
	if got := c.Image(); got.Offset != offset || got.Brokers[2].IncarnationID != first.IncarnationID {
		t.Fatalf("a refused registration changed the image: offset %d -> %d, broker %+v", offset, got.Offset, got.Brokers[2])
	}
	if err := heartbeatAt(ctx, c, 2, epoch-1, 0); !errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
		t.Errorf("heartbeat with an older epoch: %v, want STALE_BROKER_EPOCH", err)
	}
	if err := heartbeatAt(ctx, c, 7, 1, 0); !errors.Is(err, controlplane.ErrBrokerNotRegistered) {
		t.Errorf("heartbeat of an unregistered broker: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
	// Silent for a session (broker 1 still heartbeating): broker 2 is
	// fenced and a new process is accepted, with a new epoch.
	advance(t, clk, session+session/10, session/10, func() {
		img := c.Image()
		if err := heartbeatAt(ctx, c, 1, img.Brokers[1].Epoch, img.Offset); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
			t.Fatal(err)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !c.Image().Brokers[2].Fenced {
			return errors.New("broker 2 not fenced after a silent session")
		}
		return nil
	})
	newEpoch, err := c.RegisterBroker(ctx, second)
	if err != nil {
		t.Fatalf("another incarnation after the first's session lapsed: %v", err)
	}
	if newEpoch <= epoch || c.Image().Brokers[2].IncarnationID != second.IncarnationID {
		t.Fatalf("new registration: epoch %d (was %d), broker %+v", newEpoch, epoch, c.Image().Brokers[2])
	}
	if err := heartbeatAt(ctx, c, 2, epoch, c.Image().Offset); !errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
		t.Errorf("the replaced process's heartbeat: %v, want STALE_BROKER_EPOCH", err)
	}
	// A new registration starts fenced and is unfenced only by a
	// heartbeat from an image that has it.
	if !c.Image().Brokers[2].Fenced {
		t.Fatal("a new registration is not fenced")
	}
	if err := heartbeatAt(ctx, c, 2, newEpoch, uint64(newEpoch)-1); !errors.Is(err, controlplane.ErrBrokerFenced) {
		t.Fatalf("heartbeat of a fenced broker: %v, want ErrBrokerFenced (counted, and told it is fenced)", err)
	}
	advance(t, clk, session/5, session/10, nil)
	if !c.Image().Brokers[2].Fenced {
		t.Fatal("unfenced by a heartbeat from an image before its registration")
	}
	unfence(t, c, 2)
}

// A lapsed session fences the broker and moves its leaderships in the
// same batch; a controller that was not scheduled for longer than half a
// session fences nobody for it; the broker's return (a heartbeat from a
// current image) unfences it and elects it where it was the last ISR
// member.
func TestLapsedSessionFencesAndElects(t *testing.T) {
	c, clk, session := sessionController(t)
	ctx := ctxT(t)
	for id := int32(2); id <= 3; id++ {
		registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092 + id, IncarnationID: metadata.UUID{byte(id)}})
	}
	create(t, c,
		controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{2, 3, 1}, {1, 2, 3}}},
		controlplane.CreateTopic{Name: "alone", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{2}}})
	beat := func(ids ...int32) func() {
		return func() {
			img := c.Image()
			for _, id := range ids {
				if err := heartbeatAt(ctx, c, id, img.Brokers[id].Epoch, img.Offset); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
					t.Fatalf("heartbeat of %d: %v", id, err)
				}
			}
		}
	}

	// A stall: the clock jumps past every session at once. Nobody is
	// fenced for it.
	clk.Advance(2 * session)
	advance(t, clk, session/5, session/10, beat(1, 2, 3))
	for id, b := range c.Image().Brokers {
		if b.Fenced {
			t.Fatalf("broker %d fenced after the controller stalled", id)
		}
	}

	advance(t, clk, session+session/5, session/10, beat(1, 3)) // 2 falls silent
	testutil.Eventually(t, 10*time.Second, func() error {
		if !c.Image().Brokers[2].Fenced {
			return errors.New("broker 2 not fenced")
		}
		return nil
	})
	img := c.Image()
	p0, p1, alone := img.Topics["t"].Partitions[0], img.Topics["t"].Partitions[1], img.Topics["alone"].Partitions[0]
	if p0.Leader != 3 || p0.LeaderEpoch != 1 || !slices.Equal(p0.ISR, []int32{3, 1}) {
		t.Errorf("partition led by the fenced broker: %+v, want leader 3 (next in replica order), epoch 1, ISR [3 1]", p0)
	}
	if p1.Leader != 1 || p1.LeaderEpoch != 0 || !slices.Equal(p1.ISR, []int32{1, 3}) {
		t.Errorf("partition it followed: %+v, want leader 1, epoch 0, ISR [1 3]", p1)
	}
	if alone.Leader != -1 || alone.LeaderEpoch != 1 || !slices.Equal(alone.ISR, []int32{2}) {
		t.Errorf("partition it was the last ISR member of: %+v, want no leader, epoch 1, ISR [2]", alone)
	}
	// The failover the controller saw: one, from broker 2's last
	// heartbeat to the fence, a session and at most two checks (the fake
	// clock moves a tenth of a session a step).
	buckets, sum, count := c.FailoverHistogram()
	if count != 1 || sum < session.Seconds() || sum > (session+session/5).Seconds() {
		t.Errorf("failover histogram: %d observed, %.3f s in all; want one of a session (%v) or a little more", count, sum, session)
	}
	if top := controller.FailoverBuckets[len(controller.FailoverBuckets)-1]; buckets[top] != count {
		t.Errorf("failover histogram's last bucket holds %d of %d", buckets[top], count)
	}

	// A stalled controller renews sessions but unfences nobody: only a
	// heartbeat does.
	clk.Advance(2 * session)
	advance(t, clk, session/5, session/10, beat(1, 3))
	if !c.Image().Brokers[2].Fenced {
		t.Fatal("a stall of the controller unfenced a broker that is not heartbeating")
	}

	// It comes back with an image from before its fence (cut off, it
	// did not see it): the heartbeat counts and is answered fenced, and
	// it stays fenced, since that image still makes it the leader of what
	// the fence moved.
	fencedImg := c.Image()
	if stale := uint64(fencedImg.Brokers[2].Epoch); stale >= fencedImg.Offset {
		t.Fatalf("no offset between broker 2's registration (%d) and its fence (image at %d)", stale, fencedImg.Offset)
	}
	if err := heartbeatAt(ctx, c, 2, fencedImg.Brokers[2].Epoch, uint64(fencedImg.Brokers[2].Epoch)); !errors.Is(err, controlplane.ErrBrokerFenced) {
		t.Fatalf("heartbeat of fenced broker 2 from an image before its fence: %v, want ErrBrokerFenced", err)
	}
	advance(t, clk, session/5, session/10, func() {
		img := c.Image()
		beat(1, 3)()
		if err := heartbeatAt(ctx, c, 2, img.Brokers[2].Epoch, uint64(img.Brokers[2].Epoch)); !errors.Is(err, controlplane.ErrBrokerFenced) {
			t.Fatalf("heartbeat of fenced broker 2: %v, want ErrBrokerFenced", err)
		}
	})
	if !c.Image().Brokers[2].Fenced {
		t.Fatal("unfenced by heartbeats from an image before its fence")
	}

	// It returns (the same process, heartbeating again).
	beat(2)()
	testutil.Eventually(t, 10*time.Second, func() error {
		if c.Image().Brokers[2].Fenced {
			return errors.New("broker 2 still fenced")
		}
		return nil
	})
	if alone := c.Image().Topics["alone"].Partitions[0]; alone.Leader != 2 || alone.LeaderEpoch != 2 {
		t.Errorf("partition after its last ISR member returned: %+v, want leader 2, epoch 2", alone)
	}
}

// A heartbeat asking to shut down puts the broker in controlled shutdown
// without waiting for a check: its leaderships move, it stays unfenced
// and its session runs on; the answers say ShouldShutDown only once it
// leads nothing, and at once for a fenced broker.
func TestControlledShutdownHeartbeats(t *testing.T) {
	c, clk, session := sessionController(t)
	ctx := ctxT(t)
	for id := int32(2); id <= 3; id++ {
		registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092 + id, IncarnationID: metadata.UUID{byte(id)}})
	}
	create(t, c, controlplane.CreateTopic{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{2, 3, 1}, {1, 2, 3}}})
	ask := func(id int32, want bool) (controlplane.HeartbeatAnswer, error) {
		img := c.Image()
		return c.BrokerHeartbeat(ctx, controlplane.Heartbeat{NodeID: id, BrokerEpoch: img.Brokers[id].Epoch, MetadataOffset: img.Offset, WantShutDown: want})
	}

	ans, err := ask(2, true)
	if err != nil || ans.ShouldShutDown {
		t.Fatalf("first shutdown heartbeat of the leader of partition 0: %+v, %v; want not yet", ans, err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if !c.Image().Brokers[2].ShuttingDown {
			return errors.New("broker 2 not in controlled shutdown")
		}
		return nil
	})
	img := c.Image()
	if p := img.Topics["t"].Partitions[0]; p.Leader != 3 || p.LeaderEpoch != 1 || !slices.Equal(p.ISR, []int32{3, 1}) {
		t.Errorf("partition 0 after its leader's controlled shutdown: %+v, want leader 3, epoch 1, ISR [3 1]", p)
	}
	if p := img.Topics["t"].Partitions[1]; p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 3}) {
		t.Errorf("partition 1 after its follower's controlled shutdown: %+v, want leader 1, ISR [1 3]", p)
	}
	// The count moves once the commit returns to the sessions loop,
	// which may be just after the image is out.
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := c.FenceStats().ControlledShutdowns; got != 1 {
			return fmt.Errorf("FenceStats().ControlledShutdowns = %d, want 1", got)
		}
		return nil
	})
	// It leads nothing, but is told to stop only once the other brokers
	// have said they applied an image that shows it (their heartbeats so
	// far came from before the topic existed).
	if ans, err := ask(2, true); err != nil || ans.ShouldShutDown {
		t.Fatalf("shutdown heartbeat before the other brokers have the image: %+v, %v; want not yet", ans, err)
	}
	at := c.Image().Offset
	beatFrom := func(id int32, offset uint64) {
		t.Helper()
		if _, err := c.BrokerHeartbeat(ctx, controlplane.Heartbeat{NodeID: id, BrokerEpoch: c.Image().Brokers[id].Epoch, MetadataOffset: offset}); err != nil {
			t.Fatalf("heartbeat of %d from offset %d: %v", id, offset, err)
		}
	}
	beatFrom(3, at)
	beatFrom(1, at-1)
	if ans, err := ask(2, true); err != nil || ans.ShouldShutDown {
		t.Fatalf("shutdown heartbeat while broker 1 is one offset behind: %+v, %v; want not yet", ans, err)
	}
	beatFrom(1, at)
	if ans, err := ask(2, true); err != nil || !ans.ShouldShutDown {
		t.Fatalf("shutdown heartbeat of a broker that leads nothing, every other one caught up: %+v, %v; want ShouldShutDown", ans, err)
	}
	if ans, err := ask(2, false); err != nil || ans.ShouldShutDown {
		t.Errorf("a heartbeat that does not ask: %+v, %v; want no ShouldShutDown", ans, err)
	}

	// It keeps its session while it heartbeats; silent, it is fenced,
	// and a fenced broker may stop at once.
	beat := func(ids ...int32) func() {
		return func() {
			for _, id := range ids {
				if _, err := ask(id, id == 2); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
					t.Fatalf("heartbeat of %d: %v", id, err)
				}
			}
		}
	}
	advance(t, clk, session+session/5, session/10, beat(1, 2, 3))
	if b := c.Image().Brokers[2]; b.Fenced {
		t.Fatal("a broker in controlled shutdown that heartbeats was fenced")
	}
	advance(t, clk, session+session/5, session/10, beat(1, 3))
	testutil.Eventually(t, 10*time.Second, func() error {
		if !c.Image().Brokers[2].Fenced {
			return errors.New("silent broker 2 not fenced")
		}
		return nil
	})
	if ans, err := ask(2, true); !errors.Is(err, controlplane.ErrBrokerFenced) || !ans.ShouldShutDown {
		t.Errorf("shutdown heartbeat of a fenced broker: %+v, %v; want ShouldShutDown and ErrBrokerFenced", ans, err)
	}
	advance(t, clk, session/5, session/10, beat(1, 2, 3))
	if b := c.Image().Brokers[2]; !b.Fenced {
		t.Errorf("a broker in controlled shutdown was unfenced by its heartbeats: %+v", b)
	}
}
