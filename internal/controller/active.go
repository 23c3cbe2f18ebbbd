package controller

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// The active controller: the decisions of the Raft leader, apart from the
// quorum member (controller.go) that every voter runs. A voter becomes
// the active controller when Raft makes it leader and its Barrier in that
// term has applied every entry committed before, so the image it
// validates requests against is complete; it stops being one as soon as
// Raft says it lost leadership. Changes (ops.go) ask beginChange for the
// active controller and answer NOT_CONTROLLER when there is none here,
// which every client retries against the controller Metadata names.
//
// Threads: the leadership goroutine (watchLeadership) alone starts and
// stops active controllers; request goroutines use the current one under
// its proposeMu.

// activeController is one term's active controller.
type activeController struct {
	term uint64
	// lost is closed when this node stops leading in term: a change that
	// began under this controller and has not proposed yet answers
	// NOT_CONTROLLER (one already proposed is settled by Raft: committed,
	// or ErrLeadershipLost).
	lost chan struct{}

	// sessions is the brokers' liveness in this term (sessions.go).
	sessions *sessions
	// unclean runs this term's unclean leader elections (unclean.go).
	unclean uncleanPass
	// alters queues AlterPartition requests for their batch
	// (alter_partition.go).
	alters alterQueue

	// proposeMu serializes changes, so that validating a request against
	// the applied image and proposing its records are one atomic step.
	proposeMu sync.Mutex
	// pending is closed when the last proposal's entry has been applied
	// (or failed); nil if none. A proposer whose ctx ended may leave its
	// entry in flight; the next one waits for it before validating, so it
	// never validates against an image about to change.
	// REQUIRES: proposeMu held.
	pending chan struct{}
}

// barrierTimeout bounds one attempt of a new leader's Barrier; on a
// timeout the leadership goroutine tries again while it still leads.
const barrierTimeout = 10 * time.Second

// watchLeadership starts and stops the active controller as Raft's
// leadership of the metadata log comes and goes, until Close. It is the
// only reader of raft.LeaderCh (which keeps just the latest signal, so
// none is lost to a slow reader).
func (c *Controller) watchLeadership() {
	defer close(c.watchDone)
	for {
		select {
		case leader := <-c.raft.LeaderCh(): // leadership gained or lost
			c.stopActive()
			if leader {
				c.startActive()
			}
		case <-c.closing: // Close
			c.stopActive()
			return
		}
	}
}

// startActive makes this node the active controller for its current
// term, once a Barrier has applied everything committed before it. It
// gives up when leadership is lost or the controller closes first.
func (c *Controller) startActive() {
	for c.raft.State() == raft.Leader {
		err := c.raft.Barrier(barrierTimeout).Error()
		if err == nil {
			break
		}
		c.log.Warn("new leader could not catch up with the metadata log; trying again", "err", err)
		select {
		case <-c.closing:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if c.raft.State() != raft.Leader {
		return // lost again: the next LeaderCh signal says so
	}
	a := &activeController{term: c.raft.CurrentTerm(), lost: make(chan struct{}), sessions: newSessions(c.clock.Now(), c.predecessor())}
	// A broker fenced before this term was fenced at an offset this
	// controller does not know; the image's offset is at or past it.
	if img := c.fsm.applied.Load(); img != nil {
		for id, b := range img.Brokers {
			if b.Fenced {
				a.sessions.fenced(id, img.Offset)
			}
		}
	}
	c.active.Store(a)
	c.activations.Add(1)
	c.log.Info("active controller started", "node_id", c.cfg.NodeID, "term", a.term, "metadata_offset", c.fsm.applied.Load().Offset)
	go c.runSessions(a)
	if img := c.fsm.applied.Load(); img.ClusterID == "" || img.MetadataVersion < metadata.KnownMetadataVersion {
		// The first leader of a new metadata log names the cluster and
		// sets its metadata version; a log at an older version is
		// raised to this code's. (There is no upgrade path yet that
		// waits for every node to know the new version: a node running
		// older code stops at the record rather than build a different
		// image; see metadata.MetadataVersionRecord.) A leader that fails to (lost
		// leadership meanwhile) leaves it to the next; brokers wait for
		// a cluster id before they serve.
		ctx, cancel := context.WithTimeout(context.Background(), barrierTimeout)
		defer cancel()
		if err := c.commitClusterID(ctx, a); err != nil {
			c.log.Warn("could not commit a cluster id", "err", err)
		}
	}
}

// stopActive ends the active controller of this node, if any.
func (c *Controller) stopActive() {
	if a := c.active.Swap(nil); a != nil {
		close(a.lost)
		c.log.Info("active controller stopped", "node_id", c.cfg.NodeID, "term", a.term)
	}
}

// commitClusterID commits a random cluster id unless the image has one,
// and the metadata version this code knows unless the image is at it.
func (c *Controller) commitClusterID(ctx context.Context, a *activeController) error {
	a.proposeMu.Lock()
	defer a.proposeMu.Unlock()
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		return err
	}
	var recs []metadata.Record
	if img.ClusterID == "" {
		id, err := newUUID(rand.Read, func(metadata.UUID) bool { return false })
		if err != nil {
			return err
		}
		recs = append(recs, metadata.ClusterIDRecord{ClusterID: id.Base64()})
	}
	if img.MetadataVersion < metadata.KnownMetadataVersion {
		recs = append(recs, metadata.MetadataVersionRecord{Version: metadata.KnownMetadataVersion})
	}
	if img.ClusterID == "" {
		// A new log: the records it starts with (the SCRAM users a
		// cluster that authenticates every listener needs before any
		// node can register), in the same batch as its cluster id.
		recs = append(recs, c.cfg.BootstrapRecords...)
	}
	if len(recs) == 0 {
		return nil
	}
	return a.proposeLocked(ctx, c, recs)
}

// beginChange returns the active controller, with its proposeMu held,
// and the image to validate a change against; or NOT_CONTROLLER when
// this node is not the active controller, or REQUEST_TIMED_OUT when ctx
// ends first. On success the caller must unlock a.proposeMu.
func (c *Controller) beginChange(ctx context.Context) (*activeController, *metadata.Image, error) {
	a := c.active.Load()
	if a == nil {
		return nil, nil, c.notController()
	}
	a.proposeMu.Lock()
	img, err := c.validationImageLocked(ctx, a)
	if err != nil {
		a.proposeMu.Unlock()
		return nil, nil, err
	}
	return a, img, nil
}

// notController is the answer of a node that is not the active
// controller, naming the one it knows.
func (c *Controller) notController() error {
	return fmt.Errorf("%w: node %d is not the active controller (Raft %s; the controller is %d)",
		controlplane.ErrNotController, c.cfg.NodeID, c.raft.State(), c.ControllerID())
}

// validationImageLocked returns the image to validate a change against:
// the applied image once any earlier proposal is settled.
// REQUIRES: a.proposeMu held.
func (c *Controller) validationImageLocked(ctx context.Context, a *activeController) (*metadata.Image, error) {
	select {
	case <-a.lost:
		return nil, c.notController()
	default:
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", controlplane.ErrTimedOut, context.Cause(ctx))
	}
	if a.pending != nil {
		select {
		case <-a.pending: // the previous proposal's entry is applied or failed
		case <-a.lost: // this term ended
			return nil, c.notController()
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for an earlier metadata change: %w", controlplane.ErrTimedOut, context.Cause(ctx))
		}
	}
	return c.fsm.applied.Load(), nil
}

// proposeLocked commits recs as one Raft entry and returns once it is
// applied and published to every subscriber (or ctx ends:
// controlplane.ErrTimedOut, though the change may still commit).
// REQUIRES: a.proposeMu held.
func (a *activeController) proposeLocked(ctx context.Context, c *Controller, recs []metadata.Record) error {
	data, err := metadata.EncodeBatch(recs)
	if err != nil {
		return err
	}
	f := c.raft.Apply(data, timeoutOf(ctx))
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- f.Error()
		close(done)
	}()
	a.pending = done
	select {
	case err = <-errc:
	case <-ctx.Done():
		return fmt.Errorf("%w: metadata change not committed yet: %w", controlplane.ErrTimedOut, context.Cause(ctx))
	}
	if err != nil {
		return raftError(err)
	}
	if err, _ := f.Response().(error); err != nil {
		return fmt.Errorf("controller: metadata log refused the change: %w", err)
	}
	return c.pub.waitPublished(ctx, f.Index())
}
