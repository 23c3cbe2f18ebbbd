package controller_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLog sends the controller's (and raft's) warnings to t.Log until the
// test ends.
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func baseConfig(t *testing.T, dir string) controller.Config {
	w := &testLog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return controller.Config{
		NodeID:       1,
		Dir:          dir,
		Addr:         "127.0.0.1:0",
		TopicConfigs: controller.TestConfigs,
		// Brokers of these tests heartbeat only to be unfenced: their
		// sessions outlast the test (sessions_test sets its own).
		BrokerSessionTimeout: time.Hour,
		Logger:               slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// open opens a controller and registers its broker on port 9092, as a
// node does.
func open(t *testing.T, cfg controller.Config) *controller.Controller {
	t.Helper()
	return openBroker(t, cfg, 9092)
}

// openBroker opens a controller and, once it is the active controller
// (Open does not wait for the election), registers broker cfg.NodeID on
// 127.0.0.1:port and waits for a cluster id.
func openBroker(t *testing.T, cfg controller.Config, port int32) *controller.Controller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := controller.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	// One broker process across the controller's restarts: the same
	// incarnation (a new one would be a new process, which loses what
	// the old one led and held: fence.go).
	b := metadata.BrokerRecord{NodeID: cfg.NodeID, Host: "127.0.0.1", Port: port, IncarnationID: metadata.UUID{0xfe, byte(cfg.NodeID)}}
	for {
		_, err := c.RegisterBroker(ctx, b)
		if err == nil && c.Image().ClusterID != "" {
			unfence(t, c, cfg.NodeID)
			return c
		}
		if err != nil && !errors.Is(err, controlplane.ErrNotController) {
			t.Fatalf("RegisterBroker: %v", err)
		}
		select {
		case <-time.After(20 * time.Millisecond): // the election, or the cluster id's commit
		case <-ctx.Done():
			t.Fatalf("no active controller with a cluster id within 10s: %v (image %+v)", err, c.Image())
		}
	}
}

// registerLive registers b with c and heartbeats for it until c has
// unfenced it, returning its broker epoch.
func registerLive(t *testing.T, c *controller.Controller, b metadata.BrokerRecord) int64 {
	t.Helper()
	epoch, err := c.RegisterBroker(ctxT(t), b)
	if err != nil {
		t.Fatalf("registering broker %d: %v", b.NodeID, err)
	}
	unfence(t, c, b.NodeID)
	return epoch
}

// unfence heartbeats for registered broker id, as its node would, until
// c has unfenced it.
func unfence(t *testing.T, c *controller.Controller, id int32) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		img := c.Image()
		b := img.Brokers[id]
		if !b.Fenced {
			return nil
		}
		// Fenced, the answer says so (ErrBrokerFenced) until it is not.
		if err := heartbeatAt(ctxT(t), c, id, b.Epoch, img.Offset); err != nil && !errors.Is(err, controlplane.ErrBrokerFenced) {
			return err
		}
		return fmt.Errorf("broker %d still fenced", id)
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, c *controller.Controller, reqs ...controlplane.CreateTopic) []*metadata.Topic {
	t.Helper()
	var out []*metadata.Topic
	for i, r := range c.CreateTopics(ctxT(t), reqs, false) {
		if r.Err != nil {
			t.Fatalf("create %q: %v", reqs[i].Name, r.Err)
		}
		out = append(out, r.Topic)
	}
	return out
}

func topic(name string, partitions int32) controlplane.CreateTopic {
	return controlplane.CreateTopic{Name: name, NumPartitions: partitions, ReplicationFactor: -1}
}

func TestOpenBootstrapsAClusterOfOne(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	img := c.Image()
	if len(img.ClusterID) != 22 {
		t.Fatalf("cluster id %q: want 22 characters (base64url of 16 bytes)", img.ClusterID)
	}
	if b, err := base64.RawURLEncoding.DecodeString(img.ClusterID); err != nil || len(b) != 16 {
		t.Fatalf("cluster id %q is not base64url of 16 bytes: %v", img.ClusterID, err)
	}
	if b, ok := img.Broker(1); !ok || b.Host != "127.0.0.1" || b.Port != 9092 {
		t.Fatalf("broker 1 = %+v, %v", b, ok)
	}
	if id := c.ControllerID(); id != 1 {
		t.Fatalf("ControllerID = %d", id)
	}
	if len(img.Topics) != 0 || img.Offset == 0 {
		t.Fatalf("image %+v", img)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	for _, mod := range []func(*controller.Config){
		func(c *controller.Config) { c.NodeID = -1 },
		func(c *controller.Config) { c.Dir = "" },
		func(c *controller.Config) { c.Addr = "" },
		func(c *controller.Config) { c.Voters = []controller.Voter{{NodeID: 2, Addr: "127.0.0.1:1"}} }, // not a voter
		func(c *controller.Config) { c.Voters = []controller.Voter{{NodeID: 1}, {NodeID: 1}} },         // twice
		func(c *controller.Config) {
			c.Voters = []controller.Voter{{NodeID: 1}, {NodeID: -3, Addr: "127.0.0.1:1"}}
		}, // negative
		func(c *controller.Config) { c.Voters = []controller.Voter{{NodeID: 1}, {NodeID: 2, Addr: "no-port"}} }, // no port
		func(c *controller.Config) { c.Addr = "0.0.0.0:0" },                                                     // not advertisable
	} {
		cfg := baseConfig(t, t.TempDir())
		mod(&cfg)
		if c, err := controller.Open(ctx, cfg); err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
	// A ctx that ends before the node is elected.
	cfg := baseConfig(t, t.TempDir())
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := controller.Open(done, cfg); err == nil {
		c.Close()
		t.Error("Open with a cancelled ctx succeeded")
	}
}

func TestSecondOpenOfADirFails(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	open(t, cfg)
	c2, err := controller.Open(ctxT(t), cfg)
	if err == nil {
		c2.Close()
		t.Fatal("two controllers opened one directory")
	}
	if !strings.Contains(err.Error(), "raft.db") {
		t.Fatalf("error does not name raft.db: %v", err)
	}
}

// TestOpenRefusesAnotherNodesState: a metadata directory whose only voter
// is another node would wait for an election forever; Open says why.
func TestOpenRefusesAnotherNodesState(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	c := open(t, cfg)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.NodeID = 2
	c2, err := controller.Open(ctxT(t), cfg)
	if err == nil {
		c2.Close()
		t.Fatal("node 2 opened node 1's raft state")
	}
	if !strings.Contains(err.Error(), "belongs to another node") {
		t.Fatalf("error: %v", err)
	}
}

func TestCreateTopics(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	cfg.NumPartitions = 3
	c := open(t, cfg)

	got := create(t, c,
		topic("orders", 4),
		topic("defaults", -1),
		controlplane.CreateTopic{Name: "compacted", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}},
		controlplane.CreateTopic{Name: "assigned", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1}, {1}}},
	)
	img := c.Image()
	for _, want := range got {
		have, ok := img.Topic(want.Name)
		if !ok || have != want {
			t.Fatalf("result %q is not the image's topic", want.Name)
		}
		if want.ID.IsZero() {
			t.Fatalf("%s has the zero id", want.Name)
		}
		for p, part := range want.Partitions {
			if !slices.Equal(part.Replicas, []int32{1}) || !slices.Equal(part.ISR, []int32{1}) || part.Leader != 1 || part.LeaderEpoch != 0 {
				t.Fatalf("%s-%d = %+v", want.Name, p, part)
			}
		}
	}
	if n := len(got[0].Partitions); n != 4 {
		t.Fatalf("orders has %d partitions", n)
	}
	if n := len(got[1].Partitions); n != 3 {
		t.Fatalf("defaults has %d partitions; want num.partitions=3", n)
	}
	if v := c.Image().TopicConfig(got[2], "cleanup.policy"); v != "compact" {
		t.Fatalf("compacted cleanup.policy=%q", v)
	}
	if len(got[1].Configs) != 0 {
		t.Fatalf("RF 1 topic got overrides %v", got[1].Configs)
	}
	if n := len(got[3].Partitions); n != 2 {
		t.Fatalf("assigned has %d partitions", n)
	}
	ids := map[metadata.UUID]bool{}
	for _, tp := range got {
		ids[tp.ID] = true
	}
	if len(ids) != len(got) {
		t.Fatal("two topics share an id")
	}

	// validateOnly: the answer, and nothing created.
	before := c.Image()
	res := c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic("dry", 2), topic("orders", 1)}, true)
	if res[0].Err != nil || res[0].Topic == nil || len(res[0].Topic.Partitions) != 2 {
		t.Fatalf("validate-only result %+v", res[0])
	}
	if !errors.Is(res[1].Err, controlplane.ErrTopicExists) {
		t.Fatalf("validate-only of an existing topic: %v", res[1].Err)
	}
	if c.Image() != before {
		t.Fatal("validate-only changed the image")
	}
}

func TestCreateTopicsErrors(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	create(t, c, topic("exists", 1), topic("a.b", 1))
	long := strings.Repeat("x", 250)
	tests := []struct {
		req controlplane.CreateTopic
		err error
		msg string
	}{
		{topic("", 1), controlplane.ErrInvalidTopic, "empty"},
		{topic("bad name", 1), controlplane.ErrInvalidTopic, `contains " "`},
		{topic(long, 1), controlplane.ErrInvalidTopic, "250 characters"},
		{topic("..", 1), controlplane.ErrInvalidTopic, `".."`},
		{topic("exists", 1), controlplane.ErrTopicExists, `"exists" already exists`},
		{topic("a_b", 1), controlplane.ErrInvalidTopic, `collides with existing topic "a.b"`},
		{topic("zero", 0), controlplane.ErrInvalidPartitions, "0 partitions"},
		{topic("huge", 20000), controlplane.ErrInvalidPartitions, "20000 partitions"},
		{controlplane.CreateTopic{Name: "rf3", NumPartitions: 1, ReplicationFactor: 3}, controlplane.ErrInvalidReplicationFactor, "number of registered brokers (1"},
		{controlplane.CreateTopic{Name: "rf0", NumPartitions: 1, ReplicationFactor: 0}, controlplane.ErrInvalidReplicationFactor, "replication factor 0"},
		{controlplane.CreateTopic{Name: "asg", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{2}}}, controlplane.ErrInvalidReplicaAssignment, "broker 2 is not registered"},
		{controlplane.CreateTopic{Name: "asg2", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 1}}}, controlplane.ErrInvalidReplicaAssignment, "twice"},
		{controlplane.CreateTopic{Name: "asg3", NumPartitions: 1, ReplicationFactor: -1, Assignments: [][]int32{{1}}}, controlplane.ErrInvalidRequest, "must be -1"},
		{controlplane.CreateTopic{Name: "cfg", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}}, controlplane.ErrInvalidConfig, `retention.ms="soon"`},
		{controlplane.CreateTopic{Name: "cfg2", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"compression.type": "gzip"}}, controlplane.ErrInvalidConfig, `compression.type="gzip"`},
		{controlplane.CreateTopic{Name: "cfg3", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention": "1"}}, controlplane.ErrInvalidConfig, `unknown topic config "retention"`},
	}
	reqs := make([]controlplane.CreateTopic, 0, len(tests)+3)
	for _, tc := range tests {
		reqs = append(reqs, tc.req)
	}
	// One good topic among the bad ones is created; a name twice in one
	// request fails both entries, like Kafka.
	reqs = append(reqs, topic("good", 1), topic("twice", 1), topic("twice", 2))
	before := c.Image()
	res := c.CreateTopics(ctxT(t), reqs, false)
	for i, tc := range tests {
		if err := res[i].Err; !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v; want %v containing %q", tc.req.Name, err, tc.err, tc.msg)
		}
		if res[i].Topic != nil {
			t.Errorf("%q: failed, yet has a topic", tc.req.Name)
		}
	}
	n := len(tests)
	if res[n].Err != nil {
		t.Errorf("good: %v", res[n].Err)
	}
	for _, r := range res[n+1:] {
		if !errors.Is(r.Err, controlplane.ErrInvalidRequest) {
			t.Errorf("duplicate name: %v", r.Err)
		}
	}
	img := c.Image()
	if len(img.Topics) != len(before.Topics)+1 {
		t.Fatalf("topics %v", img.TopicNames())
	}
}

// TestCreateTopicsConcurrent: creates race for one name; exactly one wins.
func TestCreateTopicsConcurrent(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic("contended", int32(i+1))}, false)[0].Err
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, controlplane.ErrTopicExists):
			t.Errorf("unexpected error %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creates won: %v", wins, errs)
	}
}

func TestDeleteTopics(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ts := create(t, c, topic("a", 1), topic("b", 2), topic("c", 1), topic("d", 1))

	errs := c.DeleteTopics(ctxT(t), []string{"a", "missing", "b", "dup", "dup"})
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("delete a, b: %v", errs)
	}
	if !errors.Is(errs[1], controlplane.ErrUnknownTopic) || !strings.Contains(errs[1].Error(), `"missing"`) {
		t.Fatalf("delete missing: %v", errs[1])
	}
	if !errors.Is(errs[3], controlplane.ErrInvalidRequest) || !errors.Is(errs[4], controlplane.ErrInvalidRequest) {
		t.Fatalf("duplicate name: %v", errs[3:])
	}
	img := c.Image()
	if _, ok := img.Topic("a"); ok {
		t.Fatal("a survived")
	}
	if _, ok := img.TopicByID(ts[1].ID); ok {
		t.Fatal("b survived by id")
	}

	unknown := metadata.UUID{9, 9}
	names, errs := c.DeleteTopicsByID(ctxT(t), []metadata.UUID{ts[2].ID, unknown, {}, ts[0].ID, ts[3].ID, ts[3].ID})
	if errs[0] != nil || names[0] != "c" {
		t.Fatalf("delete c by id: %q %v", names[0], errs[0])
	}
	if !errors.Is(errs[1], controlplane.ErrUnknownTopicID) || names[1] != "" {
		t.Fatalf("unknown id: %q %v", names[1], errs[1])
	}
	if !errors.Is(errs[2], controlplane.ErrInvalidRequest) {
		t.Fatalf("zero id: %v", errs[2])
	}
	if !errors.Is(errs[3], controlplane.ErrUnknownTopicID) {
		t.Fatalf("id of a deleted topic: %v", errs[3])
	}
	if !errors.Is(errs[4], controlplane.ErrInvalidRequest) || names[4] != "d" {
		t.Fatalf("duplicate id: %q %v", names[4], errs[4])
	}
	img = c.Image()
	if got := img.TopicNames(); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("topics left: %v", got)
	}

	// A deleted name can be created again, with a new id.
	again := create(t, c, topic("a", 1))
	if again[0].ID == ts[0].ID {
		t.Fatal("recreated topic reused the old id")
	}
}

func TestCreatePartitions(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	orig := create(t, c, topic("t", 2))[0]
	ctx := ctxT(t)

	if err := c.CreatePartitions(ctx, "t", 5, nil, true); err != nil {
		t.Fatalf("validate-only: %v", err)
	}
	if n := len(c.Image().Topics["t"].Partitions); n != 2 {
		t.Fatalf("validate-only grew the topic to %d", n)
	}
	if err := c.CreatePartitions(ctx, "t", 5, nil, false); err != nil {
		t.Fatal(err)
	}
	grown := c.Image().Topics["t"]
	if len(grown.Partitions) != 5 || grown.ID != orig.ID {
		t.Fatalf("topic after growing: %+v", grown)
	}
	if !reflect.DeepEqual(grown.Partitions[:2], orig.Partitions) {
		t.Fatal("existing partitions changed")
	}
	if err := c.CreatePartitions(ctx, "t", 6, [][]int32{{1}}, false); err != nil {
		t.Fatalf("with assignment: %v", err)
	}

	tests := []struct {
		topic string
		count int32
		asg   [][]int32
		err   error
		msg   string
	}{
		{"missing", 3, nil, controlplane.ErrUnknownTopic, `"missing" does not exist`},
		{"t", 6, nil, controlplane.ErrInvalidPartitions, "already has 6 partitions"},
		{"t", 2, nil, controlplane.ErrInvalidPartitions, "can only grow (asked for 2)"},
		{"t", 20000, nil, controlplane.ErrInvalidPartitions, "at most 10000"},
		{"t", 8, [][]int32{{1}}, controlplane.ErrInvalidReplicaAssignment, "1 assignments for 2 new partitions"},
		{"t", 7, [][]int32{{5}}, controlplane.ErrInvalidReplicaAssignment, "broker 5 is not registered"},
		{"t", 7, [][]int32{{1, 1}}, controlplane.ErrInvalidReplicaAssignment, "2 replicas, others 1"},
	}
	for _, tc := range tests {
		err := c.CreatePartitions(ctx, tc.topic, tc.count, tc.asg, false)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s to %d: %v; want %v containing %q", tc.topic, tc.count, err, tc.err, tc.msg)
		}
	}
	if n := len(c.Image().Topics["t"].Partitions); n != 6 {
		t.Fatalf("errors changed the topic: %d partitions", n)
	}
}

// TestPlacementOverRegisteredBrokers: a one-voter controller with five
// more brokers registered, in three racks, places a topic's replicas on
// three racks each with leaders spread evenly, and CreatePartitions
// continues the spread instead of starting again at one broker.
func TestPlacementOverRegisteredBrokers(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir())) // broker 1, no rack
	ctx := ctxT(t)
	// default.replication.factor (3, unset) is capped at the brokers
	// registered; an explicit factor is not.
	if rf := create(t, c, topic("alone", 1))[0].ReplicationFactor(); rf != 1 {
		t.Fatalf("default replication factor on one broker: %d, want 1", rf)
	}
	res := c.CreateTopics(ctx, []controlplane.CreateTopic{{Name: "explicit", NumPartitions: 1, ReplicationFactor: 3}}, false)
	if !errors.Is(res[0].Err, controlplane.ErrInvalidReplicationFactor) {
		t.Fatalf("rf 3 on one broker: %v, want INVALID_REPLICATION_FACTOR", res[0].Err)
	}
	racks := map[int32]string{1: "", 2: "a", 3: "b", 4: "", 5: "a", 6: "b"}
	for id := int32(2); id <= 6; id++ {
		registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092 + id, Rack: racks[id]})
	}
	if rf := create(t, c, topic("together", 1))[0].ReplicationFactor(); rf != controller.DefaultReplicationFactor {
		t.Fatalf("default replication factor on six brokers: %d, want %d", rf, controller.DefaultReplicationFactor)
	}
	check := func(tp *metadata.Topic, partitions int) {
		t.Helper()
		if len(tp.Partitions) != partitions {
			t.Fatalf("%d partitions, want %d", len(tp.Partitions), partitions)
		}
		leaders, replicas := map[int32]int{}, map[int32]int{}
		for p, part := range tp.Partitions {
			inRacks := map[string]bool{}
			for _, id := range part.Replicas {
				inRacks[racks[id]] = true
				replicas[id]++
			}
			if len(part.Replicas) != 3 || len(inRacks) != 3 {
				t.Fatalf("partition %d on %v: want 3 brokers in 3 racks", p, part.Replicas)
			}
			if part.Leader != part.Replicas[0] || !slices.Equal(part.ISR, part.Replicas) {
				t.Fatalf("partition %d = %+v: want the first replica leading and every replica in the ISR", p, part)
			}
			leaders[part.Leader]++
		}
		for id := range racks {
			if leaders[id] != partitions/6 || replicas[id] != partitions/2 {
				t.Fatalf("broker %d leads %d and holds %d replicas of %d partitions; want %d and %d (leaders %v)",
					id, leaders[id], replicas[id], partitions, partitions/6, partitions/2, leaders)
			}
		}
	}
	tp := create(t, c, controlplane.CreateTopic{Name: "orders", NumPartitions: 6, ReplicationFactor: 3})[0]
	check(tp, 6)
	if err := c.CreatePartitions(ctx, "orders", 12, nil, false); err != nil {
		t.Fatal(err)
	}
	grown := c.Image().Topics["orders"]
	check(grown, 12)
	// Grown in two steps, it is placed as creating it with 12 at once
	// places it.
	if errs := c.DeleteTopics(ctx, []string{"orders"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	at := create(t, c, controlplane.CreateTopic{Name: "orders", NumPartitions: 12, ReplicationFactor: 3})[0]
	for p := range at.Partitions {
		if !slices.Equal(at.Partitions[p].Replicas, grown.Partitions[p].Replicas) {
			t.Fatalf("partition %d: created on %v, grown on %v", p, at.Partitions[p].Replicas, grown.Partitions[p].Replicas)
		}
	}
	res = c.CreateTopics(ctx, []controlplane.CreateTopic{{Name: "too-wide", NumPartitions: 1, ReplicationFactor: 7}}, false)
	if !errors.Is(res[0].Err, controlplane.ErrInvalidReplicationFactor) || !strings.Contains(res[0].Err.Error(), "(6,") {
		t.Fatalf("rf 7 on 6 brokers: %v, want INVALID_REPLICATION_FACTOR naming 6 brokers", res[0].Err)
	}
}

// TestCreateTopicsMinInsyncReplicas: a topic of three replicas that does
// not set min.insync.replicas has 2 in force, as a default (no override
// is written, so deleting an override returns to 2, not to Kafka's 1); a
// topic of fewer has 1; a value above the replication factor is accepted,
// as in Kafka.
func TestCreateTopicsMinInsyncReplicas(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	for id := int32(2); id <= 3; id++ {
		registerLive(t, c, metadata.BrokerRecord{NodeID: id, Host: "127.0.0.1", Port: 9092 + id})
	}
	got := create(t, c,
		controlplane.CreateTopic{Name: "rf3", NumPartitions: 1, ReplicationFactor: -1},
		controlplane.CreateTopic{Name: "rf2", NumPartitions: 1, ReplicationFactor: 2},
		controlplane.CreateTopic{Name: "above", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "5"}},
		controlplane.CreateTopic{Name: "rf3-set", NumPartitions: 1, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "1"}},
	)
	img := c.Image()
	for i, want := range []struct {
		value     string
		overrides int
	}{{"2", 0}, {"1", 0}, {"5", 1}, {"1", 1}} {
		if v := img.TopicConfig(got[i], "min.insync.replicas"); v != want.value || len(got[i].Configs) != want.overrides {
			t.Errorf("%s: min.insync.replicas %q with overrides %v; want %q and %d overrides", got[i].Name, v, got[i].Configs, want.value, want.overrides)
		}
	}
	if err := c.AlterConfigs(ctx, "rf3-set", []controlplane.ConfigOp{{Name: "min.insync.replicas", Op: controlplane.ConfigDelete}}, false, false); err != nil {
		t.Fatal(err)
	}
	if v := c.Image().TopicConfig(c.Image().Topics["rf3-set"], "min.insync.replicas"); v != "2" {
		t.Fatalf("rf 3 after deleting its override: min.insync.replicas %q, want the default 2", v)
	}
}

func TestAlterConfigs(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	create(t, c, controlplane.CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
	ctx := ctxT(t)
	s := func(v string) *string { return &v }
	configs := func() map[string]string { return c.Image().Topics["t"].Configs }

	err := c.AlterConfigs(ctx, "t", []controlplane.ConfigOp{
		{Name: "segment.bytes", Op: controlplane.ConfigSet, Value: s("1048576")},
		{Name: "cleanup.policy", Op: controlplane.ConfigAppend, Value: s("compact")},
	}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "segment.bytes": "1048576", "cleanup.policy": "delete,compact"}
	if got := configs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after set+append: %v", got)
	}
	if err := c.AlterConfigs(ctx, "t", []controlplane.ConfigOp{
		{Name: "cleanup.policy", Op: controlplane.ConfigSubtract, Value: s("delete")},
		{Name: "retention.ms", Op: controlplane.ConfigDelete},
	}, false, false); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"segment.bytes": "1048576", "cleanup.policy": "compact"}
	if got := configs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after subtract+delete: %v", got)
	}
	if got := c.Image().TopicConfig(c.Image().Topics["t"], "retention.ms"); got != "604800000" {
		t.Fatalf("deleted override reads %q, want the default", got)
	}

	// validateOnly changes nothing.
	before := c.Image()
	if err := c.AlterConfigs(ctx, "t", []controlplane.ConfigOp{{Name: "flush.policy", Op: controlplane.ConfigSet, Value: s("interval")}}, false, true); err != nil {
		t.Fatal(err)
	}
	if c.Image() != before {
		t.Fatal("validate-only changed the image")
	}
	// Legacy AlterConfigs: the given set replaces every override.
	if err := c.AlterConfigs(ctx, "t", []controlplane.ConfigOp{{Name: "flush.policy", Op: controlplane.ConfigSet, Value: s("interval")}}, true, false); err != nil {
		t.Fatal(err)
	}
	if got := configs(); !reflect.DeepEqual(got, map[string]string{"flush.policy": "interval"}) {
		t.Fatalf("after replace-all: %v", got)
	}
	// No change commits nothing.
	before = c.Image()
	if err := c.AlterConfigs(ctx, "t", []controlplane.ConfigOp{{Name: "flush.policy", Op: controlplane.ConfigSet, Value: s("interval")}}, false, false); err != nil {
		t.Fatal(err)
	}
	if c.Image() != before {
		t.Fatal("a no-op change committed an entry")
	}

	tests := []struct {
		topic string
		ops   []controlplane.ConfigOp
		err   error
		msg   string
	}{
		{"missing", nil, controlplane.ErrUnknownTopic, `"missing" does not exist`},
		{"t", []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: s("-7")}}, controlplane.ErrInvalidConfig, `retention.ms="-7"`},
		{"t", []controlplane.ConfigOp{{Name: "max.message.bytes", Op: controlplane.ConfigSet, Value: s("big")}}, controlplane.ErrInvalidConfig, `max.message.bytes="big"`},
		{"t", []controlplane.ConfigOp{{Name: "retention", Op: controlplane.ConfigSet, Value: s("1")}}, controlplane.ErrInvalidConfig, `unknown topic config "retention"`},
		{"t", []controlplane.ConfigOp{{Name: "cleanup.policy", Op: controlplane.ConfigSubtract, Value: s("compact,delete")}}, controlplane.ErrInvalidConfig, `cleanup.policy=""`},
		{"t", []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigAppend, Value: s("1")}}, controlplane.ErrInvalidConfig, "not a list"},
	}
	for _, tc := range tests {
		err := c.AlterConfigs(ctx, tc.topic, tc.ops, false, false)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %+v: %v; want %v containing %q", tc.topic, tc.ops, err, tc.err, tc.msg)
		}
	}
	if got := configs(); !reflect.DeepEqual(got, map[string]string{"flush.policy": "interval"}) {
		t.Fatalf("errors changed the configs: %v", got)
	}
}

// TestCreateReturnsAfterSubscribersSawIt: CreateTopics answers only once
// every subscriber has the image with the topic (the broker must have
// opened the partition's log before a client produces to it).
func TestCreateReturnsAfterSubscribersSawIt(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	entered := make(chan struct{})
	release := make(chan struct{})
	cancel := c.Subscribe(func(img *metadata.Image) {
		if _, ok := img.Topic("t"); ok {
			select {
			case <-entered: // later images: pass
			default:
				close(entered)
				<-release
			}
		}
	})
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- c.CreateTopics(ctxT(t), []controlplane.CreateTopic{topic("t", 1)}, false)[0].Err }()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("CreateTopics returned (%v) while a subscriber had not finished with its image", err)
	default: // still waiting, as it must
	}
	if _, ok := c.Image().Topic("t"); ok {
		t.Fatal("Image shows the topic before every subscriber saw it")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Image().Topic("t"); !ok {
		t.Fatal("topic missing from Image after CreateTopics returned")
	}
}

func TestSubscribeSeesImagesInOrder(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	var mu sync.Mutex
	var seen []*metadata.Image
	cancel := c.Subscribe(func(img *metadata.Image) {
		mu.Lock()
		seen = append(seen, img)
		mu.Unlock()
	})
	first := c.Image()
	for i := range 5 {
		create(t, c, topic(fmt.Sprintf("t%d", i), 1))
	}
	cancel()
	create(t, c, topic("after-cancel", 1))

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 6 || seen[0] != first {
		t.Fatalf("saw %d images; want the current one then 5", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Offset <= seen[i-1].Offset || len(seen[i].Topics) != i {
			t.Fatalf("image %d: offset %d after %d, %d topics", i, seen[i].Offset, seen[i-1].Offset, len(seen[i].Topics))
		}
	}
}

func TestAllocateProducerIDsAcrossRestart(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	c := open(t, cfg)
	var blocks [][2]int64
	for range 3 {
		first, n, err := c.AllocateProducerIDs(ctxT(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, [2]int64{first, first + n})
	}
	if _, _, err := c.AllocateProducerIDs(ctxT(t), -1); !errors.Is(err, controlplane.ErrInvalidRequest) {
		t.Fatalf("negative node id: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, cfg)
	for range 2 {
		first, n, err := c.AllocateProducerIDs(ctxT(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, [2]int64{first, first + n})
	}
	if blocks[0] != [2]int64{0, 1000} {
		t.Fatalf("first block %v", blocks[0])
	}
	for i := 1; i < len(blocks); i++ {
		if blocks[i][0] < blocks[i-1][1] || blocks[i][1]-blocks[i][0] != controller.ProducerIDBlockSize {
			t.Fatalf("blocks overlap or shrink: %v", blocks)
		}
	}
	if got := c.Image().NextProducerID; got != blocks[len(blocks)-1][1] {
		t.Fatalf("NextProducerID %d", got)
	}
}

// populate makes a bit of every kind of state.
func populate(t *testing.T, c *controller.Controller) {
	t.Helper()
	ctx := ctxT(t)
	created := create(t, c, topic("orders", 3), controlplane.CreateTopic{Name: "events", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}}, topic("gone", 1))
	// Marked before it grows: the mark must survive growth, restarts
	// and snapshots alike.
	if err := c.MarkTopicKeyed(ctx, created[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePartitions(ctx, "events", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	v := "3600000"
	if err := c.AlterConfigs(ctx, "orders", []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: &v}}, false, false); err != nil {
		t.Fatal(err)
	}
	if errs := c.DeleteTopics(ctx, []string{"gone"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, _, err := c.AllocateProducerIDs(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

func sameState(t *testing.T, got, want *metadata.Image) {
	t.Helper()
	if got.ClusterID != want.ClusterID || got.NextProducerID != want.NextProducerID {
		t.Fatalf("cluster %q / next producer id %d; want %q / %d", got.ClusterID, got.NextProducerID, want.ClusterID, want.NextProducerID)
	}
	if !reflect.DeepEqual(got.Topics, want.Topics) || !reflect.DeepEqual(got.TopicsByID, want.TopicsByID) {
		t.Fatalf("topics differ:\n got %v\nwant %v", got.TopicNames(), want.TopicNames())
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	c := open(t, cfg)
	populate(t, c)
	before := c.Image()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The broker comes back on a new port: it re-registers.
	c = openBroker(t, cfg, 19092)
	after := c.Image()
	sameState(t, after, before)
	if b := after.Brokers[1]; b.Port != 19092 {
		t.Fatalf("broker not re-registered: %+v", b)
	}
	if after.Offset <= before.Offset {
		t.Fatalf("offset %d after restart, was %d", after.Offset, before.Offset)
	}
	// And it still takes changes.
	create(t, c, topic("new", 1))
}

func TestSnapshotTruncatesTheLog(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 1 << 30 // only SnapshotNow
	cfg.TrailingLogs = 5
	c := open(t, cfg)
	populate(t, c)
	for i := range 30 {
		v := fmt.Sprint(1000 + i)
		if err := c.AlterConfigs(ctxT(t), "orders", []controlplane.ConfigOp{{Name: "retention.ms", Op: controlplane.ConfigSet, Value: &v}}, false, false); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.RaftStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstIndex != 1 || st.SnapshotIndex != 0 {
		t.Fatalf("before the snapshot: %+v", st)
	}
	if err := c.SnapshotNow(); err != nil {
		t.Fatal(err)
	}
	if err := c.SnapshotNow(); err != nil {
		t.Fatalf("second snapshot with nothing new: %v", err)
	}
	st2, err := c.RaftStats()
	if err != nil {
		t.Fatal(err)
	}
	if st2.SnapshotIndex < st.AppliedIndex || st2.FirstIndex <= 1 || st2.LastIndex-st2.FirstIndex+1 > cfg.TrailingLogs+1 {
		t.Fatalf("after the snapshot: %+v (before %+v); want the log truncated to about %d entries", st2, st, cfg.TrailingLogs)
	}
	before := c.Image()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The log alone no longer holds the topics: the snapshot must.
	c = open(t, cfg)
	sameState(t, c.Image(), before)
	if got := c.Image().TopicConfig(c.Image().Topics["orders"], "retention.ms"); got != "1029" {
		t.Fatalf("retention.ms after restore = %q", got)
	}
}

// TestAutomaticSnapshots: SnapshotThreshold and SnapshotInterval drive
// raft's own snapshots.
func TestAutomaticSnapshots(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 10
	cfg.SnapshotInterval = 20 * time.Millisecond
	cfg.TrailingLogs = 2
	c := open(t, cfg)
	for i := range 15 {
		create(t, c, topic(fmt.Sprintf("t%d", i), 1))
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		st, err := c.RaftStats()
		if err != nil {
			return err
		}
		if st.SnapshotIndex == 0 || st.FirstIndex <= 1 {
			return fmt.Errorf("no snapshot or truncation yet: %+v", st)
		}
		return nil
	})
}

func TestClosedControllerIsNotController(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	create(t, c, topic("t", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := ctxT(t)
	if r := c.CreateTopics(ctx, []controlplane.CreateTopic{topic("u", 1)}, false); !errors.Is(r[0].Err, controlplane.ErrNotController) {
		t.Errorf("CreateTopics: %v", r[0].Err)
	}
	if errs := c.DeleteTopics(ctx, []string{"t"}); !errors.Is(errs[0], controlplane.ErrNotController) {
		t.Errorf("DeleteTopics: %v", errs[0])
	}
	if _, errs := c.DeleteTopicsByID(ctx, []metadata.UUID{{1}}); !errors.Is(errs[0], controlplane.ErrNotController) {
		t.Errorf("DeleteTopicsByID: %v", errs[0])
	}
	if err := c.CreatePartitions(ctx, "t", 2, nil, false); !errors.Is(err, controlplane.ErrNotController) {
		t.Errorf("CreatePartitions: %v", err)
	}
	if err := c.AlterConfigs(ctx, "t", nil, true, false); !errors.Is(err, controlplane.ErrNotController) {
		t.Errorf("AlterConfigs: %v", err)
	}
	if _, _, err := c.AllocateProducerIDs(ctx, 1); !errors.Is(err, controlplane.ErrNotController) {
		t.Errorf("AllocateProducerIDs: %v", err)
	}
	if _, ok := c.Image().Topic("t"); !ok {
		t.Error("Image after Close lost the last published image")
	}
}

func TestExpiredContextTimesOut(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := c.CreateTopics(ctx, []controlplane.CreateTopic{topic("t", 1)}, false); !errors.Is(r[0].Err, controlplane.ErrTimedOut) {
		t.Fatalf("CreateTopics with a done ctx: %v", r[0].Err)
	}
	if _, ok := c.Image().Topic("t"); ok {
		t.Fatal("topic created with a done ctx")
	}
}

// A broker's registration is checked before it is proposed: a bad
// endpoint is INVALID_REQUEST and changes nothing.
func TestRegisterBrokerRefusesBadEndpoints(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	before := c.Image()
	for _, b := range []metadata.BrokerRecord{
		{NodeID: -1, Host: "127.0.0.1", Port: 9092},
		{NodeID: 2, Host: "", Port: 9092},
		{NodeID: 2, Host: "127.0.0.1", Port: 0},
		{NodeID: 2, Host: "127.0.0.1", Port: 65536},
	} {
		if _, err := c.RegisterBroker(ctxT(t), b); !errors.Is(err, controlplane.ErrInvalidRequest) {
			t.Errorf("RegisterBroker(%+v): %v, want INVALID_REQUEST", b, err)
		}
	}
	if after := c.Image(); after.Offset != before.Offset {
		t.Fatalf("refused registrations moved the metadata log from %d to %d", before.Offset, after.Offset)
	}
}

// Open never waits for an election, and a voter that is not the active
// controller answers NOT_CONTROLLER at once, never a hang: here node 1's
// quorum also names node 2, which is not running, so node 1 can never be
// elected (it needs 2 votes of 2).
func TestOpenDoesNotWaitToLead(t *testing.T) {
	t.Parallel()
	absent := freeAddrs(t, 1)[0] // nothing listens there: node 2 is down
	cfg := baseConfig(t, t.TempDir())
	cfg.Voters = []controller.Voter{{NodeID: 1}, {NodeID: 2, Addr: absent}}
	c, err := controller.Open(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	if id := c.ControllerID(); id != -1 {
		t.Fatalf("ControllerID = %d with no quorum, want -1", id)
	}
	ctx := ctxT(t) // were a change to wait for a leader, it would end with REQUEST_TIMED_OUT
	if r := c.CreateTopics(ctx, []controlplane.CreateTopic{topic("t", 1)}, false); !errors.Is(r[0].Err, controlplane.ErrNotController) {
		t.Errorf("CreateTopics without a quorum: %v, want NOT_CONTROLLER", r[0].Err)
	}
	if _, err := c.RegisterBroker(ctx, metadata.BrokerRecord{NodeID: 1, Host: "127.0.0.1", Port: 9092}); !errors.Is(err, controlplane.ErrNotController) {
		t.Errorf("RegisterBroker without a quorum: %v, want NOT_CONTROLLER", err)
	}
	if _, _, err := c.AllocateProducerIDs(ctx, 1); !errors.Is(err, controlplane.ErrNotController) {
		t.Errorf("AllocateProducerIDs without a quorum: %v, want NOT_CONTROLLER", err)
	}
	if img := c.Image(); img.ClusterID != "" || len(img.Brokers) != 0 {
		t.Errorf("an image without a quorum: %+v", img)
	}
}

// heartbeatAt sends c one heartbeat of broker id at epoch, which has
// applied the metadata log to offset, not asking to shut down.
func heartbeatAt(ctx context.Context, c *controller.Controller, id int32, epoch int64, offset uint64) error {
	_, err := c.BrokerHeartbeat(ctx, controlplane.Heartbeat{NodeID: id, BrokerEpoch: epoch, MetadataOffset: offset})
	return err
}

func TestAlterBrokerConfigs(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	s := func(v string) *string { return &v }
	const throttle = metadata.FollowerThrottleRateConfig
	set := func(v string) []controlplane.ConfigOp {
		return []controlplane.ConfigOp{{Name: throttle, Op: controlplane.ConfigSet, Value: s(v)}}
	}
	before := c.Image()
	for _, tc := range []struct {
		name   string
		broker int32
		ops    []controlplane.ConfigOp
		want   error
		msg    string
	}{
		{"unregistered broker", 42, set("5"), controlplane.ErrInvalidRequest, "not registered"},
		{"static config", -1, []controlplane.ConfigOp{{Name: "num.partitions", Op: controlplane.ConfigSet, Value: s("3")}}, controlplane.ErrInvalidConfig, "not a dynamic broker config"},
		{"zero", -1, set("0"), controlplane.ErrInvalidConfig, "at least 1"},
		{"append", -1, []controlplane.ConfigOp{{Name: throttle, Op: controlplane.ConfigAppend, Value: s("5")}}, controlplane.ErrInvalidConfig, "set or deleted"},
		{"named twice", -1, append(set("5"), controlplane.ConfigOp{Name: throttle, Op: controlplane.ConfigDelete}), controlplane.ErrInvalidRequest, "more than once"},
		{"null", -1, []controlplane.ConfigOp{{Name: throttle, Op: controlplane.ConfigSet}}, controlplane.ErrInvalidConfig, "null"},
		{"max.connections zero", -1, []controlplane.ConfigOp{{Name: metadata.MaxConnectionsConfig, Op: controlplane.ConfigSet, Value: s("0")}}, controlplane.ErrInvalidConfig, "from 1 to 2147483647"},
		{"bad overrides beside a good limit", 1, []controlplane.ConfigOp{
			{Name: metadata.MaxConnectionsPerIPConfig, Op: controlplane.ConfigSet, Value: s("5")},
			{Name: metadata.MaxConnectionsPerIPOverridesConfig, Op: controlplane.ConfigSet, Value: s("a:b")},
		}, controlplane.ErrInvalidConfig, "the count is not a whole number"},
	} {
		err := c.AlterBrokerConfigs(ctx, tc.broker, tc.ops, false)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.want, tc.msg)
		}
	}
	if c.Image() != before {
		t.Fatal("a refused change committed an entry")
	}
	if err := c.AlterBrokerConfigs(ctx, -1, set("2048"), true); err != nil || c.Image() != before {
		t.Fatalf("validate only: %v, image changed %v", err, c.Image() != before)
	}
	if err := c.AlterBrokerConfigs(ctx, -1, set("2048"), false); err != nil {
		t.Fatal(err)
	}
	if got := c.Image().FollowerThrottleRate(1); got != 2048 {
		t.Fatalf("broker 1's rate after setting the default: %d", got)
	}
	same := c.Image()
	if err := c.AlterBrokerConfigs(ctx, -1, set("2048"), false); err != nil || c.Image() != same {
		t.Fatalf("a no-op change: %v, committed %v", err, c.Image() != same)
	}
	if err := c.AlterBrokerConfigs(ctx, -1, []controlplane.ConfigOp{{Name: throttle, Op: controlplane.ConfigDelete}}, false); err != nil {
		t.Fatal(err)
	}
	if got := c.Image().FollowerThrottleRate(1); got != 0 || len(c.Image().BrokerConfigs) != 0 {
		t.Fatalf("after delete: rate %d, configs %v", got, c.Image().BrokerConfigs)
	}
	// The connection limits, in one change.
	if err := c.AlterBrokerConfigs(ctx, 1, []controlplane.ConfigOp{
		{Name: metadata.MaxConnectionsConfig, Op: controlplane.ConfigSet, Value: s("100")},
		{Name: metadata.MaxConnectionsPerIPConfig, Op: controlplane.ConfigSet, Value: s("0")},
		{Name: metadata.MaxConnectionsPerIPOverridesConfig, Op: controlplane.ConfigSet, Value: s("10.0.0.7:20")},
	}, false); err != nil {
		t.Fatal(err)
	}
	if l := c.Image().ConnectionLimits(1); l.MaxConnections != 100 || l.MaxConnectionsPerIP != 0 || l.PerIPLimit(netip.MustParseAddr("10.0.0.7")) != 20 {
		t.Fatalf("connection limits: %+v", l)
	}
}
