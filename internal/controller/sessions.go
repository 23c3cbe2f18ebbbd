package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Broker sessions, on the active controller: each broker heartbeats
// (BrokerHeartbeat) every DefaultBrokerHeartbeatInterval, and a broker
// heard from within the session timeout is live. Heartbeats stay in
// memory; nothing is written to the metadata log for them. A new active
// controller counts every broker as heard at the moment it took over (a
// fresh session each), since it cannot know what the last one heard.
//
// Today liveness decides one thing: a registration of a node id that is
// live under another incarnation is refused,
// DUPLICATE_BROKER_REGISTRATION, since two processes would then claim
// one broker (a second node started with a copy of the first's
// configuration, say). Fencing a broker whose session lapses, and
// electing new leaders for what it led, is issue 14's; so is choosing
// the interval and the timeout by measurement. The values here are
// placeholders on the safe side of that work: a restarted process waits
// out at most one session before its registration is accepted.
const (
	DefaultBrokerHeartbeatInterval = 500 * time.Millisecond
	DefaultBrokerSessionTimeout    = 3 * time.Second
)

// sessions is one active controller's view of broker liveness.
type sessions struct {
	mu    sync.Mutex
	since time.Time           // when this term's controller started
	heard map[int32]time.Time // last heartbeat (or registration) per broker
}

func newSessions(now time.Time) *sessions {
	return &sessions{since: now, heard: map[int32]time.Time{}}
}

func (s *sessions) touch(id int32, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heard[id] = now
}

// live reports whether broker id was heard from within timeout.
func (s *sessions) live(id int32, now time.Time, timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.heard[id]
	if !ok {
		last = s.since
	}
	return now.Sub(last) < timeout
}

// BrokerHeartbeat renews broker nodeID's session. Its broker epoch must
// be its current registration's (STALE_BROKER_EPOCH: a process since
// replaced); an unregistered broker is BROKER_ID_NOT_REGISTERED.
func (c *Controller) BrokerHeartbeat(ctx context.Context, nodeID int32, brokerEpoch int64) error {
	a := c.active.Load()
	if a == nil {
		return c.notController()
	}
	b, ok := c.fsm.applied.Load().Brokers[nodeID]
	switch {
	case !ok:
		return fmt.Errorf("%w: broker %d", controlplane.ErrBrokerNotRegistered, nodeID)
	case b.Epoch != brokerEpoch:
		return fmt.Errorf("%w: broker %d heartbeats with epoch %d, its registration's is %d",
			controlplane.ErrStaleBrokerEpoch, nodeID, brokerEpoch, b.Epoch)
	}
	a.sessions.touch(nodeID, c.clock.Now())
	return nil
}

// checkDuplicateLocked refuses b when its node id is registered by
// another incarnation that is still live.
// REQUIRES: a.proposeMu held.
func (c *Controller) checkDuplicateLocked(a *activeController, img *metadata.Image, b metadata.BrokerRecord) error {
	old, ok := img.Brokers[b.NodeID]
	if !ok || old.IncarnationID.IsZero() || old.IncarnationID == b.IncarnationID {
		return nil
	}
	if a.sessions.live(b.NodeID, c.clock.Now(), c.sessionTimeout()) {
		return fmt.Errorf("%w: broker %d is registered by a live process (incarnation %s); "+
			"a second process with the same node id is refused until that one has been silent for %v",
			controlplane.ErrDuplicateBrokerRegistration, b.NodeID, old.IncarnationID, c.sessionTimeout())
	}
	return nil
}

func (c *Controller) sessionTimeout() time.Duration {
	return orDefault(c.cfg.BrokerSessionTimeout, DefaultBrokerSessionTimeout)
}
