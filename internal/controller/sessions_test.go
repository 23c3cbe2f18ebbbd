package controller_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// A node id registered by a live process is refused to another
// incarnation (DUPLICATE_BROKER_REGISTRATION) and nothing is committed;
// the same incarnation may register again (a retry); once the first
// process has been silent for a session, the new one is accepted.
// Heartbeats keep a session and are refused with a stale epoch or for an
// unregistered broker.
func TestBrokerSessions(t *testing.T) {
	cfg := baseConfig(t, t.TempDir())
	cfg.BrokerSessionTimeout = 3 * time.Second
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	cfg.Clock = clk
	c := open(t, cfg)
	ctx := ctxT(t)
	// A new log's first controller set its metadata version with the
	// cluster id.
	if v := c.Image().MetadataVersion; v != metadata.KnownMetadataVersion {
		t.Fatalf("a new log's metadata version is %d, want %d", v, metadata.KnownMetadataVersion)
	}
	first := metadata.BrokerRecord{NodeID: 2, Host: "127.0.0.1", Port: 9093, IncarnationID: metadata.UUID{1}}
	epoch, err := c.RegisterBroker(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(ctx, first); err != nil {
		t.Fatalf("the same incarnation registering again: %v", err)
	}
	epoch = c.Image().Brokers[2].Epoch

	second := first
	second.IncarnationID, second.Port = metadata.UUID{2}, 9094
	// Heartbeats keep the first alive past the session timeout.
	for range 8 {
		clk.Advance(cfg.BrokerSessionTimeout / 2)
		if err := c.BrokerHeartbeat(ctx, 2, epoch); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	clk.Advance(cfg.BrokerSessionTimeout - time.Millisecond)
	offset := c.Image().Offset
	if _, err := c.RegisterBroker(ctx, second); !errors.Is(err, controlplane.ErrDuplicateBrokerRegistration) {
		t.Fatalf("another incarnation of a live broker: %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}
	if got := c.Image(); got.Offset != offset || got.Brokers[2].IncarnationID != first.IncarnationID {
		t.Fatalf("a refused registration changed the image: offset %d -> %d, broker %+v", offset, got.Offset, got.Brokers[2])
	}
	if err := c.BrokerHeartbeat(ctx, 2, epoch-1); !errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
		t.Errorf("heartbeat with an older epoch: %v, want STALE_BROKER_EPOCH", err)
	}
	if err := c.BrokerHeartbeat(ctx, 7, 1); !errors.Is(err, controlplane.ErrBrokerNotRegistered) {
		t.Errorf("heartbeat of an unregistered broker: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
	// Silent for a session: the new process is accepted, with a new epoch.
	clk.Advance(time.Millisecond)
	newEpoch, err := c.RegisterBroker(ctx, second)
	if err != nil {
		t.Fatalf("another incarnation after the first's session lapsed: %v", err)
	}
	if newEpoch <= epoch || c.Image().Brokers[2].IncarnationID != second.IncarnationID {
		t.Fatalf("new registration: epoch %d (was %d), broker %+v", newEpoch, epoch, c.Image().Brokers[2])
	}
	if err := c.BrokerHeartbeat(ctx, 2, epoch); !errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
		t.Errorf("the replaced process's heartbeat: %v, want STALE_BROKER_EPOCH", err)
	}
}
