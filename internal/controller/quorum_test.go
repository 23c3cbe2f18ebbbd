package controller_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/freeport"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// freeAddrs picks n loopback addresses for voters that must know each
// other's before any starts, from freeport: outside the kernel's
// ephemeral range, so no port-0 listener or outgoing connection of
// another test takes one between the pick and the bind.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	ports, err := freeport.Take("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	return addrs
}

// quorum is three voters on loopback, each with its own directory.
type quorum struct {
	t      *testing.T
	cfgs   []controller.Config
	voters []*controller.Controller // nil: closed
}

func newQuorum(t *testing.T) *quorum {
	addrs := freeAddrs(t, 3)
	var voters []controller.Voter
	for i, a := range addrs {
		voters = append(voters, controller.Voter{NodeID: int32(i + 1), Addr: a})
	}
	q := &quorum{t: t, voters: make([]*controller.Controller, 3)}
	for i, a := range addrs {
		cfg := baseConfig(t, t.TempDir())
		cfg.NodeID, cfg.Addr, cfg.Voters = int32(i+1), a, voters
		q.cfgs = append(q.cfgs, cfg)
	}
	t.Cleanup(func() {
		for _, c := range q.voters {
			if c != nil {
				c.Close()
			}
		}
	})
	return q
}

func (q *quorum) open(i int) {
	q.t.Helper()
	c, err := controller.Open(ctxT(q.t), q.cfgs[i])
	if err != nil {
		q.t.Fatalf("Open voter %d: %v", i+1, err)
	}
	q.voters[i] = c
}

func (q *quorum) close(i int) {
	q.t.Helper()
	if err := q.voters[i].Close(); err != nil {
		q.t.Fatalf("Close voter %d: %v", i+1, err)
	}
	q.voters[i] = nil
}

// leader waits until every open voter names the same active controller
// and that voter takes changes, and returns its index.
func (q *quorum) leader() int {
	q.t.Helper()
	var lead int
	testutil.Eventually(q.t, 20*time.Second, func() error {
		id := int32(-1)
		for i, c := range q.voters {
			if c == nil {
				continue
			}
			got := c.ControllerID()
			if got < 0 || (id >= 0 && got != id) {
				return fmt.Errorf("voter %d names controller %d, another %d", i+1, got, id)
			}
			id = got
		}
		lead = int(id) - 1
		if q.voters[lead] == nil {
			return fmt.Errorf("voters name closed voter %d", id)
		}
		// Named by Raft is not yet active: the Barrier comes first.
		b := metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092}
		_, err := q.voters[lead].RegisterBroker(ctxT(q.t), b)
		return err
	})
	unfence(q.t, q.voters[lead], int32(lead+1))
	return lead
}

// converged waits until every open voter's image has what check wants.
func (q *quorum) converged(what string, check func(*metadata.Image) bool) {
	q.t.Helper()
	testutil.Eventually(q.t, 20*time.Second, func() error {
		for i, c := range q.voters {
			if c != nil && !check(c.Image()) {
				return fmt.Errorf("voter %d's image (offset %d) lacks %s", i+1, c.Image().Offset, what)
			}
		}
		return nil
	})
}

// Three voters started in any order form one metadata log: one active
// controller, one cluster id, every change seen by all; the others
// answer NOT_CONTROLLER. When the active controller goes, another takes
// over with everything committed before, and the one that went catches
// up when it comes back.
func TestQuorumOfThree(t *testing.T) {
	t.Parallel()
	q := newQuorum(t)
	for _, i := range []int{2, 0, 1} { // any order
		q.open(i)
	}
	lead := q.leader()
	var clusterID string
	q.converged("a cluster id", func(img *metadata.Image) bool {
		if clusterID == "" {
			clusterID = img.ClusterID
		}
		return img.ClusterID != "" && img.ClusterID == clusterID
	})

	create(t, q.voters[lead], topic("orders", 3))
	q.converged("topic orders", func(img *metadata.Image) bool { _, ok := img.Topic("orders"); return ok })
	for i, c := range q.voters {
		if i == lead {
			continue
		}
		r := c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic("elsewhere", 1)}, false)
		if !errors.Is(r[0].Err, controlplane.ErrNotController) {
			t.Errorf("voter %d, not the controller, answered CreateTopics with %v, want NOT_CONTROLLER", i+1, r[0].Err)
		}
	}

	// The active controller goes; another is elected from the two left,
	// with the topic and the cluster id, and takes changes.
	q.close(lead)
	next := q.leader()
	if next == lead {
		t.Fatalf("closed voter %d still leads", lead+1)
	}
	if img := q.voters[next].Image(); img.ClusterID != clusterID {
		t.Fatalf("new controller's cluster id %q, was %q", img.ClusterID, clusterID)
	}
	if _, ok := q.voters[next].Image().Topic("orders"); !ok {
		t.Fatal("the new controller lost topic orders")
	}
	create(t, q.voters[next], topic("payments", 1))
	first, _, err := q.voters[next].AllocateProducerIDs(ctxT(t), 1)
	if err != nil {
		t.Fatalf("AllocateProducerIDs on the new controller: %v", err)
	}

	// The old one comes back as a follower and catches up.
	q.open(lead)
	q.converged("topic payments and the producer-id block", func(img *metadata.Image) bool {
		_, ok := img.Topic("payments")
		return ok && img.NextProducerID > first && img.ClusterID == clusterID
	})
}

// A handover (TransferLeadership, what a controlled shutdown of the
// active controller does) under a stream of changes: each change either
// commits and says so, or answers NOT_CONTROLLER having changed nothing,
// so that the client's retry on the next controller is safe. A change
// proposed during the handover would be neither: told NOT_CONTROLLER,
// it could still commit under the next leader, and the retry would
// answer TOPIC_ALREADY_EXISTS.
func TestTransferLeadershipUnderChanges(t *testing.T) {
	t.Parallel()
	q := newQuorum(t)
	for i := range 3 {
		q.open(i)
	}
	lead := q.leader()
	c := q.voters[lead]

	type result struct {
		name string
		err  error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("t-%d-%d", g, i)
				r := c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic(name, 1)}, false)
				mu.Lock()
				results = append(results, result{name, r[0].Err})
				mu.Unlock()
				if r[0].Err != nil {
					return // this node no longer takes changes
				}
			}
		})
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(results) < 20 {
			return fmt.Errorf("%d changes so far", len(results))
		}
		return nil
	})
	if err := c.TransferLeadership(ctxT(t)); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	close(stop)
	wg.Wait()
	next := q.leader()
	if next == lead {
		t.Fatalf("voter %d still leads after handing over", lead+1)
	}
	// Whatever the handover left in flight is applied once a change of
	// the new controller's is.
	create(t, q.voters[next], topic("after", 1))
	img := q.voters[next].Image()
	refused := 0
	for _, r := range results {
		_, exists := img.Topic(r.name)
		switch {
		case r.err == nil && !exists:
			t.Errorf("%s: created, but not in the new controller's image", r.name)
		case errors.Is(r.err, controlplane.ErrNotController) && exists:
			t.Errorf("%s: answered %v, but committed", r.name, r.err)
		case r.err != nil && !errors.Is(r.err, controlplane.ErrNotController):
			t.Errorf("%s: %v, want success or NOT_CONTROLLER", r.name, r.err)
		case r.err != nil:
			refused++
		}
	}
	t.Logf("%d changes, %d answered NOT_CONTROLLER", len(results), refused)
}
