package node

import (
	"context"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// A controlled shutdown (Kafka's, KIP-631's WantShutDown) moves this
// broker's leaderships and ISR places to other brokers while its
// listeners still serve, so a planned stop costs clients a metadata
// refresh and a retry instead of a session timeout of failed requests:
//
//  1. The heartbeats ask for it (WantShutDown) every
//     shutdownHeartbeatInterval. The active controller commits a
//     ControlledShutdownRecord with the ISR shrinks and elections that
//     take this broker off every partition it leads or follows.
//  2. The controller answers ShouldShutDown once the broker leads
//     nothing; the node waits, too, until its own replica manager has
//     applied that image, so its partitions answer NOT_LEADER (clients
//     move on) rather than being cut off with the listener.
//  3. If this node is the active controller it hands Raft leadership to
//     another voter, so the quorum does not wait an election timeout.
//     This comes after the leaderships moved, not before: the moves are
//     this controller's own commits then, and no broker's lease has to
//     be renewed under a new controller in the middle of them.
//
// Each step is bounded (the whole under controlledShutdownTimeout plus
// raftHandoverTimeout, well inside the 5 s an operator's restart
// allows); when a step cannot finish the node logs why and closes as it
// would have without it. A cluster of one, or a node whose peers are all
// down, has no one to move to and skips it.
const (
	// shutdownHeartbeatInterval is the heartbeat period during a
	// controlled shutdown (or the configured one, if shorter).
	shutdownHeartbeatInterval = 25 * time.Millisecond
	// controlledShutdownTimeout bounds steps 1 and 2.
	controlledShutdownTimeout = 3 * time.Second
	// controlledShutdownUnanswered is how long without an answered
	// heartbeat means the controller cannot be reached.
	controlledShutdownUnanswered = time.Second
	// raftHandoverTimeout bounds step 3.
	raftHandoverTimeout = time.Second
	// shutdownPoll is how often step 2 looks at the image.
	shutdownPoll = 5 * time.Millisecond
)

// controlledShutdown runs the steps above; Close calls it first.
func (n *Node) controlledShutdown() {
	if !n.started {
		return // a failed start: nothing is served, nothing to move
	}
	start := time.Now()
	if !hasOtherActiveBroker(n.ctrl.Image(), n.cfg.NodeID) {
		n.log.Info("closing without a controlled shutdown: no other live broker to take this node's partitions")
	} else {
		n.shutdownWanted.Store(true)
		select {
		case n.shutdownKick <- struct{}{}:
		default:
		}
		n.awaitShutDown(start)
	}
	n.handOverController()
}

// awaitShutDown waits for steps 1 and 2, or for a reason to give up.
func (n *Node) awaitShutDown(start time.Time) {
	t := time.NewTicker(shutdownPoll)
	defer t.Stop()
	for {
		now := time.Now()
		img := n.ctrl.Image()
		heard := time.Unix(0, n.answeredAt.Load())
		if heard.Before(start) {
			heard = start
		}
		switch {
		case n.shouldShutDown.Load() && n.leftEverything(img):
			n.log.Info("controlled shutdown: this node leads no partition and is in no ISR", "took", now.Sub(start))
			return
		case now.Sub(heard) > controlledShutdownUnanswered:
			n.log.Warn("controlled shutdown abandoned: the active controller answered no heartbeat; closing with the leaderships this node holds",
				"waited", now.Sub(start), "leads", countLed(img, n.cfg.NodeID))
			return
		case now.Sub(start) > controlledShutdownTimeout:
			n.log.Warn("controlled shutdown timed out; closing with the leaderships this node holds",
				"waited", now.Sub(start), "leads", countLed(img, n.cfg.NodeID), "controller_agreed", n.shouldShutDown.Load())
			return
		}
		select {
		case <-t.C:
		case <-n.ctrl.Failed(): // this node cannot follow the metadata log
			n.log.Warn("controlled shutdown abandoned: the metadata log failed", "err", n.ctrl.Err())
			return
		}
	}
}

// leftEverything reports whether img (applied by this node's replica
// manager: Image returns an image only after every subscriber has seen
// it) shows this start's registration out of service and leading
// nothing.
func (n *Node) leftEverything(img *metadata.Image) bool {
	b, ok := img.Brokers[n.cfg.NodeID]
	return ok && b.IncarnationID == n.incarnation && !b.Active() && countLed(img, n.cfg.NodeID) == 0
}

// handOverController is step 3.
func (n *Node) handOverController() {
	if n.ctrl.ActiveTerm() == 0 || len(n.ctrl.Voters()) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), raftHandoverTimeout)
	defer cancel()
	start := time.Now()
	if err := n.ctrl.TransferLeadership(ctx); err != nil {
		n.log.Warn("closing as the active controller: handing Raft leadership to another voter failed; "+
			"the others elect one after an election timeout", "err", err)
		return
	}
	n.log.Info("handed the active controller to another voter", "took", time.Since(start))
}

// hasOtherActiveBroker reports whether img has a broker other than self
// that may lead and join ISRs.
func hasOtherActiveBroker(img *metadata.Image, self int32) bool {
	if img == nil {
		return false
	}
	for id, b := range img.Brokers {
		if id != self && b.Active() {
			return true
		}
	}
	return false
}

// countLed is how many partitions broker id leads in img.
func countLed(img *metadata.Image, id int32) int {
	led := 0
	for _, t := range img.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Leader == id {
				led++
			}
		}
	}
	return led
}
