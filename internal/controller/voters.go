package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Voter changes (KIP-853's AddRaftVoter and RemoveRaftVoter), for
// replacing a controller whose disk was lost and for growing or
// shrinking the quorum. A new voter starts as an observer (a broker-only
// node, join.go), so it has the log before it votes, and is then
// promoted; Kafka asks the same (a voter is added once it fetches from
// the leader). One change at a time, each a Raft configuration entry
// the leader commits; hashicorp/raft does not report a follower's log
// position, so how far the observer has caught up is not checked: a
// promoted voter that lags delays commits until it catches up, it
// never loses one.

// voterChangeTimeout bounds the commit of a configuration change.
const voterChangeTimeout = 5 * time.Second

// AddVoter makes node id, an observer of the metadata log at addr (its
// controller address), a voter. Only the active controller changes the
// quorum: elsewhere NOT_CONTROLLER. A voter already is DUPLICATE_VOTER;
// a node that is not an observer, or one at another address, is
// INVALID_REQUEST; nothing changes on an error.
func (c *Controller) AddVoter(ctx context.Context, id int32, addr string) error {
	if c.active.Load() == nil {
		return c.notController()
	}
	cfg, err := c.configuration()
	if err != nil {
		return err
	}
	sid := raft.ServerID(strconv.Itoa(int(id)))
	for _, s := range cfg.Servers {
		if s.ID != sid {
			continue
		}
		if s.Suffrage == raft.Voter {
			return fmt.Errorf("%w: node %d is a voter already (at %s)", controlplane.ErrDuplicateVoter, id, s.Address)
		}
		if addr != "" && raft.ServerAddress(addr) != s.Address {
			return fmt.Errorf("%w: node %d follows the metadata log from %s, not %s", controlplane.ErrInvalidRequest, id, s.Address, addr)
		}
		if err := c.changeConfiguration(ctx, c.raft.AddVoter(sid, s.Address, 0, voterChangeTimeout)); err != nil {
			return err
		}
		c.log.Info("added a voter to the controller quorum", "node_id", id, "addr", s.Address, "voters", c.Voters())
		return nil
	}
	return fmt.Errorf("%w: node %d is not an observer of the metadata log (observers %v): start it with --process-roles broker first, so it has the log before it votes",
		controlplane.ErrInvalidRequest, id, c.observers())
}

// RemoveVoter takes node id out of the quorum (it may keep running; it
// no longer votes or receives the log). Not a voter is VOTER_NOT_FOUND;
// the last voter is INVALID_REQUEST. Removing the active controller
// itself is allowed: Raft elects another among the rest.
func (c *Controller) RemoveVoter(ctx context.Context, id int32) error {
	if c.active.Load() == nil {
		return c.notController()
	}
	voters := c.Voters()
	switch {
	case !slices.Contains(voters, id):
		return fmt.Errorf("%w: node %d is not a voter (voters %v)", controlplane.ErrVoterNotFound, id, voters)
	case len(voters) == 1:
		return fmt.Errorf("%w: node %d is the quorum's last voter", controlplane.ErrInvalidRequest, id)
	}
	if err := c.changeConfiguration(ctx, c.raft.RemoveServer(raft.ServerID(strconv.Itoa(int(id))), 0, voterChangeTimeout)); err != nil {
		return err
	}
	c.log.Info("removed a voter from the controller quorum", "node_id", id, "voters", c.Voters())
	return nil
}

func (c *Controller) configuration() (raft.Configuration, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, fmt.Errorf("%w: reading the quorum's configuration: %v", controlplane.ErrNotController, err)
	}
	return f.Configuration(), nil
}

// changeConfiguration waits for a configuration change's commit, or ctx.
func (c *Controller) changeConfiguration(ctx context.Context, f raft.IndexFuture) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		switch err {
		case nil:
			return nil
		case raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrLeadershipTransferInProgress:
			return fmt.Errorf("%w: %v", controlplane.ErrNotController, err)
		}
		return fmt.Errorf("%w: changing the quorum: %v", controlplane.ErrTimedOut, err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", controlplane.ErrTimedOut, context.Cause(ctx))
	}
}

// UnregisterBroker removes broker id's registration (Kafka's
// UnregisterBroker), the end of a decommission: the broker must hold no
// replica (a drain moves them first) and must not be a voter (remove it
// from the quorum first). A broker-only node is also taken out of the
// Raft configuration, so the log is no longer sent to it. Unknown is
// BROKER_ID_NOT_REGISTERED, unless the node is still an observer (an
// earlier unregister that committed and then failed to change the
// configuration): then the configuration change is made again.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	b, registered := img.Brokers[id]
	observer := slices.Contains(c.observers(), id)
	switch {
	case slices.Contains(c.Voters(), id):
		a.proposeMu.Unlock()
		return fmt.Errorf("%w: broker %d is a controller voter: take it out of the quorum first (fjord cluster remove-voter)", controlplane.ErrInvalidRequest, id)
	case !registered && !observer:
		a.proposeMu.Unlock()
		return fmt.Errorf("%w: broker %d", controlplane.ErrBrokerNotRegistered, id)
	case img.MetadataVersion < metadata.BrokerConfigMetadataVersion:
		a.proposeMu.Unlock()
		return fmt.Errorf("%w: unregistering a broker needs metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.BrokerConfigMetadataVersion, img.MetadataVersion)
	}
	if registered {
		if n, first := img.ReplicasOn(id); n > 0 {
			a.proposeMu.Unlock()
			return fmt.Errorf("%w: broker %d still holds replicas of %d partitions (%s among them): move them first (fjord cluster drain %d)",
				controlplane.ErrInvalidRequest, id, n, first, id)
		}
		err := a.proposeLocked(ctx, c, []metadata.Record{metadata.UnregisterBrokerRecord{NodeID: id, Epoch: b.Epoch}})
		a.proposeMu.Unlock()
		if err != nil {
			return err
		}
		c.log.Info("unregistered a broker", "node_id", id, "broker_epoch", b.Epoch)
	} else {
		a.proposeMu.Unlock()
	}
	if !observer {
		return nil
	}
	if err := c.changeConfiguration(ctx, c.raft.RemoveServer(raft.ServerID(strconv.Itoa(int(id))), 0, voterChangeTimeout)); err != nil {
		return fmt.Errorf("broker %d is unregistered, but it is still an observer of the metadata log (ask again to remove it): %w", id, err)
	}
	c.log.Info("removed an observer from the metadata log's configuration", "node_id", id, "observers", c.observers())
	return nil
}
