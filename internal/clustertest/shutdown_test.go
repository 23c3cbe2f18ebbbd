package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 15, controlled shutdown: SIGTERM of a node that leads partitions
// under an acks=all idempotent load moves its leaderships before it
// closes its listeners, so the producer sees no error at all (franz-go
// follows NOT_LEADER_FOR_PARTITION to the new leader), the node is gone
// in under 5 s, and every acknowledged record is read back once it has
// returned and caught up.
func (e *env) controlledShutdown(t *testing.T) {
	_, others := e.controllerAndOthers(t)
	e.shutDownUnderLoad(t, "controlled-shutdown", others[0], false)
}

// The same for the active controller, which also hands Raft leadership
// to another voter before it exits: the quorum has a new controller
// without waiting an election timeout.
func (e *env) controllerShutdown(t *testing.T) {
	ctrl, _ := e.controllerAndOthers(t)
	e.shutDownUnderLoad(t, "controller-shutdown", ctrl, true)
}

// controlledShutdownBound is the bound on a clean shutdown of a
// loaded node; the node's own steps are bounded well inside it
// (node/shutdown.go).
const controlledShutdownBound = 5 * time.Second

func (e *env) shutDownUnderLoad(t *testing.T, topic string, id int32, controller bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const partitions = 6
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)
	if led := e.ledBy(t, ctx, topic, id); led == 0 {
		t.Fatalf("node %d leads no partition of %s; the test needs it to lead some", id, topic)
	}
	load := e.startLoad(t, ctx, topic, partitions)
	load.waitAcks(t, 300)
	ctrl := e.c.ControllerID(t)
	before := e.metric(t, ctrl, "fjord_controller_controlled_shutdowns_total")

	start := e.controlledStop(t, id, controller)
	// The survivors lead every partition; the controller that committed
	// the shutdown counted it (when it was the stopped node itself, its
	// count left with it). A survivor may answer from an image one
	// record old for a moment: a controller that stops with its last
	// record committed but the commit not yet heard by every voter lets
	// the broker go after a second (controller/shutdown), and the voter
	// learns the commit from the next Raft leader.
	if err := testutil.Wait(10*time.Second, func() error {
		if led := e.ledBy(t, ctx, topic, id); led != 0 {
			return fmt.Errorf("node %d, stopped, still leads %d partitions", id, led)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if !controller {
		if after := e.metric(t, ctrl, "fjord_controller_controlled_shutdowns_total"); after <= before {
			t.Errorf("fjord_controller_controlled_shutdowns_total %v after a controlled shutdown, was %v", after, before)
		}
	}

	load.waitAcks(t, 300) // on the survivors
	t.Logf("acks=all stalled at most %v from the SIGTERM on", load.stall(start).Round(time.Millisecond))
	e.c.Start(id)
	e.fullISRs(t, ctx, topic, partitions)
	// It came back leading nothing; a preferred election on request
	// (ElectLeaders) gives it its share back, under the same load.
	if e.ledBy(t, ctx, topic, id) != 0 {
		t.Logf("node %d leads partitions before the election (the automatic balance ran)", id)
	}
	e.electPreferred(t, ctx, topic, partitions)
	load.finish(t, ctx, e) // no produce failed; everything acknowledged read back; replicas identical
}

// controlledStop SIGTERMs node id, which must exit within
// controlledShutdownBound after a completed controlled shutdown, and,
// when it was the active controller, after handing Raft leadership to
// another voter: before its listeners closed, so the quorum had a new
// active controller before the old process was gone. It returns when
// the signal was sent.
func (e *env) controlledStop(t *testing.T, id int32, controller bool) time.Time {
	t.Helper()
	start := time.Now()
	e.c.Stop(id)
	took := time.Since(start)
	t.Logf("node %d (the active controller: %v) stopped %v after SIGTERM at %s", id, controller, took.Round(time.Millisecond), start.Format("15:04:05.000"))
	if took >= controlledShutdownBound {
		t.Errorf("node %d took %v to stop after SIGTERM, want under %v", id, took, controlledShutdownBound)
	}
	log := e.c.Node(id).LatestOutput()
	if !strings.Contains(log, "controlled shutdown: this node leads no partition and is in no ISR") {
		t.Fatalf("node %d stopped without completing a controlled shutdown; its last run's log:\n%s", id, log)
	}
	if controller {
		if !strings.Contains(log, "handed the active controller to another voter") {
			t.Fatalf("the active controller stopped without handing Raft leadership over; its last run's log:\n%s", log)
		}
		if now := e.c.ControllerID(t); now == id {
			t.Fatalf("node %d, stopped, is still named the controller", id)
		}
	}
	return start
}

// electPreferred asks for preferred elections of topic's partitions and
// waits until each is led by its first replica.
func (e *env) electPreferred(t *testing.T, ctx context.Context, topic string, partitions int) {
	t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = 0, 10_000 // preferred
	// This topic's partitions only: the other tests' leaders stay put.
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{rt}
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ElectLeaders: error code %d", resp.ErrorCode)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 && p.ErrorCode != kerr.ElectionNotNeeded.Code {
				msg := ""
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				t.Errorf("ElectLeaders %s-%d: code %d (%s): every partition needing an election had its preferred replica in the ISR",
					rt.Topic, p.Partition, p.ErrorCode, msg)
			}
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		ps, err := e.partitions(ctx, topic, partitions)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				return fmt.Errorf("%s-%d: leader %d, replicas %v", topic, p.Partition, p.Leader, p.Replicas)
			}
		}
		return nil
	})
}

// fullISRs waits until every partition of topic has a leader and all
// three replicas in its ISR.
func (e *env) fullISRs(t *testing.T, ctx context.Context, topic string, partitions int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		ps, err := e.partitions(ctx, topic, partitions)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return fmt.Errorf("%s-%d: leader %d, ISR %v", topic, p.Partition, p.Leader, p.ISR)
			}
		}
		return nil
	})
}

// ledBy is how many partitions of topic node id leads, as the cluster
// answers Metadata.
func (e *env) ledBy(t *testing.T, ctx context.Context, topic string, id int32) int {
	t.Helper()
	var led int
	testutil.Eventually(t, 10*time.Second, func() error {
		ps, err := e.partitions(ctx, topic, -1)
		if err != nil {
			return err
		}
		led = 0
		for _, p := range ps {
			if p.Leader == id {
				led++
			}
		}
		return nil
	})
	return led
}

// partitions is topic's partitions in a Metadata answer, which must
// hold want of them (-1: any number).
func (e *env) partitions(ctx context.Context, topic string, want int) ([]kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		return nil, err
	}
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == topic && mt.ErrorCode == 0 && (want < 0 || len(mt.Partitions) == want) {
			return mt.Partitions, nil
		}
	}
	return nil, fmt.Errorf("metadata has no %s with %d partitions", topic, want)
}
