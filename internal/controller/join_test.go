package controller

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

func openForJoin(t *testing.T, cfg Config) *Controller {
	t.Helper()
	cfg.Dir, cfg.TopicConfigs = t.TempDir(), testConfigs
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t) // Raft's own words when a test fails
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func leading(t *testing.T, c *Controller) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if c.raft.State() != raft.Leader {
			return errString("not the leader yet")
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

// rawJoin sends b after the join byte and returns the answer line.
func rawJoin(t *testing.T, addr string, b []byte) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(append([]byte{joinRequestByte}, b...)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := conn.Read(buf)
	return string(buf[:n])
}

// The controller port's join requests: bad ones are refused with a
// message and change nothing; a good one makes the node an observer
// (a nonvoter), once, and the quorum keeps committing.
func TestJoinRequests(t *testing.T) {
	c := openForJoin(t, Config{NodeID: 1})
	leading(t, c)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not json", "hello\n", "malformed join request"},
		{"no newline, oversized", strings.Repeat("x", 5000), "malformed join request"},
		{"a voter's id", `{"node_id":1,"addr":"127.0.0.1:1"}` + "\n", "is a voter"},
		{"negative id", `{"node_id":-3,"addr":"127.0.0.1:1"}` + "\n", "node id -3"},
		{"no port", `{"node_id":7,"addr":"127.0.0.1"}` + "\n", "not host:port"},
	} {
		got := rawJoin(t, c.Addr(), []byte(tc.body))
		for strings.Contains(got, "not the leader") {
			// Only a leader judges a request it could carry out. A voter
			// of one steps down only when told of a higher term, which
			// another test process's controller can send from a port
			// this one has since reused (the log above shows who); the
			// request is asked again once it leads.
			t.Logf("%s: %q; asking again once the node leads", tc.name, got)
			leading(t, c)
			got = rawJoin(t, c.Addr(), []byte(tc.body))
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: answer %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
	if obs := c.observers(); len(obs) != 0 {
		t.Fatalf("observers %v after refused requests, want none", obs)
	}
	for range 2 { // the second is a no-op
		resp, err := askToJoin(c.Addr(), joinRequest{NodeID: 7, Addr: "127.0.0.1:1"}, nil)
		for err == nil && resp.Error == "not the leader" {
			t.Logf("join of node 7: %+v; asking again once the node leads", resp)
			leading(t, c)
			resp, err = askToJoin(c.Addr(), joinRequest{NodeID: 7, Addr: "127.0.0.1:1"}, nil)
		}
		if err != nil || resp.Error != "" {
			t.Fatalf("join of node 7: %+v, %v", resp, err)
		}
	}
	if obs := c.observers(); !slices.Equal(obs, []int32{7}) {
		t.Fatalf("observers %v, want [7]", obs)
	}
	if q := c.QuorumState(); len(q.Observers) != 1 || q.Observers[0].NodeID != 7 || len(q.Voters) != 1 {
		t.Fatalf("QuorumState %+v, want voter 1 and observer 7", q)
	}
	// An observer that never answers does not count towards commits.
	if err := c.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("commit with an unreachable observer: %v", err)
	}
}

// An observer controller (a broker-only node) asks the voter to add it,
// then receives the metadata log, without ever leading.
func TestObserverFollowsTheLog(t *testing.T) {
	voter := openForJoin(t, Config{NodeID: 1})
	leading(t, voter)
	testutil.Eventually(t, 10*time.Second, func() error {
		if voter.Image().ClusterID == "" {
			return errString("no cluster id yet")
		}
		return nil
	})
	obs := openForJoin(t, Config{NodeID: 4, Observer: true, Voters: []Voter{{NodeID: 1, Addr: voter.Addr()}}})
	testutil.Eventually(t, 10*time.Second, func() error {
		if obs.Image().ClusterID != voter.Image().ClusterID {
			return errString("the observer has not the voter's cluster id yet")
		}
		if !slices.Equal(voter.observers(), []int32{4}) {
			return errString("the voter does not list node 4 as an observer yet")
		}
		return nil
	})
	if obs.raft.State() == raft.Leader || slices.Contains(obs.Voters(), 4) {
		t.Fatalf("the observer is a leader or a voter: state %v, voters %v", obs.raft.State(), obs.Voters())
	}
	if !slices.Equal(obs.Voters(), []int32{1}) {
		t.Fatalf("the observer's voters %v, want [1]", obs.Voters())
	}
}

// An observer's configuration is checked before anything opens.
func TestObserverConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no voters", Config{NodeID: 4, Observer: true}, "needs the controller quorum's voters"},
		{"its own id a voter", Config{NodeID: 1, Observer: true, Voters: []Voter{{NodeID: 1, Addr: "127.0.0.1:1"}}}, "is a voter"},
	} {
		cfg := tc.cfg
		cfg.Dir, cfg.Addr, cfg.TopicConfigs = t.TempDir(), "127.0.0.1:0", testConfigs
		if c, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: Open: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// voterAndObserver is a quorum of voter 1, leading, and node 4 following
// its log as an observer.
func voterAndObserver(t *testing.T) (voter, obs *Controller) {
	t.Helper()
	voter = openForJoin(t, Config{NodeID: 1})
	leading(t, voter)
	obs = openForJoin(t, Config{NodeID: 4, Observer: true, Voters: []Voter{{NodeID: 1, Addr: voter.Addr()}}})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !slices.Equal(voter.observers(), []int32{4}) || !obs.inConfiguration() {
			return errString("node 4 is not an observer yet")
		}
		return nil
	})
	return voter, obs
}

// AddVoter promotes an observer and RemoveVoter takes a voter out; the
// bad cases change nothing.
func TestAddAndRemoveVoter(t *testing.T) {
	voter, obs := voterAndObserver(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"not the active controller", obs.AddVoter(ctx, 4, ""), controlplane.ErrNotController},
		{"an unknown node", voter.AddVoter(ctx, 9, "127.0.0.1:1"), controlplane.ErrInvalidRequest},
		{"a voter already", voter.AddVoter(ctx, 1, ""), controlplane.ErrDuplicateVoter},
		{"another address", voter.AddVoter(ctx, 4, "127.0.0.1:1"), controlplane.ErrInvalidRequest},
		{"remove a non-voter", voter.RemoveVoter(ctx, 4), controlplane.ErrVoterNotFound},
		{"remove the last voter", voter.RemoveVoter(ctx, 1), controlplane.ErrInvalidRequest},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if v := voter.Voters(); !slices.Equal(v, []int32{1}) {
		t.Fatalf("voters %v after refused changes, want [1]", v)
	}
	if err := voter.AddVoter(ctx, 4, obs.Addr()); err != nil {
		t.Fatalf("AddVoter(4): %v", err)
	}
	if v, o := voter.Voters(), voter.observers(); !slices.Equal(v, []int32{1, 4}) || len(o) != 0 {
		t.Fatalf("voters %v, observers %v; want [1 4] and none", v, o)
	}
	if err := voter.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("commit with two voters: %v", err)
	}
	if err := voter.AddVoter(ctx, 4, ""); !errors.Is(err, controlplane.ErrDuplicateVoter) {
		t.Fatalf("AddVoter(4) twice: %v, want DUPLICATE_VOTER", err)
	}
	if err := voter.RemoveVoter(ctx, 4); err != nil {
		t.Fatalf("RemoveVoter(4): %v", err)
	}
	if v := voter.Voters(); !slices.Equal(v, []int32{1}) {
		t.Fatalf("voters %v after removing 4, want [1]", v)
	}
}

// UnregisterBroker: refused, changing nothing, for a broker that holds
// a replica, a voter, an unknown id, and on a node that is not the
// active controller; then the broker-only node 4, holding nothing, is
// unregistered and leaves the metadata log's configuration.
func TestUnregisterBroker(t *testing.T) {
	voter, obs := voterAndObserver(t)
	ctx := context.Background()
	for _, id := range []int32{1, 4} {
		epoch, err := voter.RegisterBroker(ctx, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092, IncarnationID: metadata.UUID{byte(id)}})
		if err != nil {
			t.Fatalf("registering broker %d: %v", id, err)
		}
		testutil.Eventually(t, 10*time.Second, func() error {
			voter.BrokerHeartbeat(ctx, controlplane.Heartbeat{NodeID: id, BrokerEpoch: epoch, MetadataOffset: voter.Image().Offset})
			if voter.Image().Brokers[id].Fenced {
				return errString("still fenced")
			}
			return nil
		})
	}
	res := voter.CreateTopics(ctx, []controlplane.CreateTopic{{Name: "on-4", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{4}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	before := voter.Image()
	for _, tc := range []struct {
		name string
		err  error
		want error
		msg  string
	}{
		{"holds a replica", voter.UnregisterBroker(ctx, 4), controlplane.ErrInvalidRequest, "still holds replicas of 1 partitions (on-4-0 among them)"},
		{"a voter", voter.UnregisterBroker(ctx, 1), controlplane.ErrInvalidRequest, "is a controller voter"},
		{"unknown", voter.UnregisterBroker(ctx, 9), controlplane.ErrBrokerNotRegistered, "broker 9"},
		{"not the active controller", obs.UnregisterBroker(ctx, 4), controlplane.ErrNotController, "not the active controller"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, tc.err, tc.want, tc.msg)
		}
	}
	if voter.Image() != before || !slices.Equal(voter.observers(), []int32{4}) {
		t.Fatal("a refused unregister changed something")
	}
	if errs := voter.DeleteTopics(ctx, []string{"on-4"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := voter.UnregisterBroker(ctx, 4); err != nil {
		t.Fatalf("unregistering broker 4, holding nothing: %v", err)
	}
	if _, ok := voter.Image().Brokers[4]; ok || len(voter.observers()) != 0 {
		t.Fatalf("after unregistering: brokers %v, observers %v", voter.Image().BrokerIDs(), voter.observers())
	}
	if err := voter.UnregisterBroker(ctx, 4); !errors.Is(err, controlplane.ErrBrokerNotRegistered) {
		t.Fatalf("unregistering broker 4 again: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
}

// The active controller's QuorumState knows how far each other node has
// the log from its heartbeats; another node does not.
func TestQuorumStateLagFromHeartbeats(t *testing.T) {
	voter, obs := voterAndObserver(t)
	ctx := context.Background()
	epoch, err := voter.RegisterBroker(ctx, metadata.BrokerRecord{NodeID: 4, Host: "127.0.0.1", Port: 9092, IncarnationID: metadata.UUID{4}})
	if err != nil {
		t.Fatal(err)
	}
	observerState := func(c *Controller) controlplane.VoterState {
		for _, o := range c.QuorumState().Observers {
			if o.NodeID == 4 {
				return o
			}
		}
		t.Fatalf("node 4 is not an observer: %+v", c.QuorumState())
		return controlplane.VoterState{}
	}
	if o := observerState(voter); o.LogEndOffset != -1 || !o.LastHeard.IsZero() {
		t.Fatalf("before a heartbeat: %+v, want unknown", o)
	}
	if _, err := voter.BrokerHeartbeat(ctx, controlplane.Heartbeat{NodeID: 4, BrokerEpoch: epoch, MetadataOffset: 3}); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
		t.Fatal(err)
	}
	if o := observerState(voter); o.LogEndOffset != 3 || o.LastHeard.IsZero() {
		t.Fatalf("after a heartbeat at offset 3: %+v", o)
	}
	if o := observerState(obs); o.LogEndOffset < 1 {
		t.Fatalf("the observer's own log end: %+v", o)
	}
	for _, v := range obs.QuorumState().Voters {
		if v.LogEndOffset != -1 {
			t.Fatalf("a node that is not the active controller knows voter %d's log end: %+v", v.NodeID, v)
		}
	}
}
