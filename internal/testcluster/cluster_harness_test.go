package testcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/node"
)

// The Cluster's own tests, against fake nodes (fake_test.go); the real
// binary's cluster is cluster_test.go's.

// startField returns key's value in the fake's start lines in dir, one
// per start.
func startField(t *testing.T, dir, key string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=(\S*)`)
	var out []string
	for _, line := range starts(t, dir) {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s= in the fake's start line %q", key, line)
		}
		out = append(out, m[1])
	}
	return out
}

// checkLaunchOrder checks that the nodes' latest processes were launched
// after since, in the order given, at least gap apart.
func checkLaunchOrder(t *testing.T, c *Cluster, since time.Time, order []int32, gap time.Duration) {
	t.Helper()
	prev := since
	for i, id := range order {
		n := c.Node(id)
		n.mu.Lock()
		at := n.mu.proc.launched
		n.mu.Unlock()
		switch {
		case !at.After(since):
			t.Fatalf("order %v: node %d's latest process was launched before the start began", order, id)
		case i > 0 && at.Sub(prev) < gap:
			t.Fatalf("order %v: node %d was launched %v after the node before it, want at least %v", order, id, at.Sub(prev), gap)
		case at.Before(prev):
			t.Fatalf("order %v: node %d was launched before node %d", order, id, order[i-1])
		}
		prev = at
	}
}

func TestVoterList(t *testing.T) {
	for _, tc := range []struct {
		ports []int
		want  string
	}{
		{[]int{9093}, "1@127.0.0.1:9093"},
		{[]int{40001, 40004, 40007}, "1@127.0.0.1:40001,2@127.0.0.1:40004,3@127.0.0.1:40007"},
	} {
		got := voterList(tc.ports)
		if got != tc.want {
			t.Errorf("voterList(%v) = %q, want %q", tc.ports, got, tc.want)
		}
		// What fjord serve will read it as.
		voters, err := node.ParseVoters(got)
		if err != nil {
			t.Fatalf("fjord serve refuses %q: %v", got, err)
		}
		for i, v := range voters {
			if v.NodeID != int32(i+1) || v.Addr != hostPort(tc.ports[i]) {
				t.Errorf("voter %d of %q is %v", i, got, v)
			}
		}
	}
}

func TestClusterOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ClusterOptions
		want string
	}{
		{"negative size", ClusterOptions{Nodes: -1}, "Nodes -1: allowed: 1 to 9"},
		{"too many", ClusterOptions{Nodes: 10}, "Nodes 10: allowed: 1 to 9"},
		{"node id set", ClusterOptions{Node: Options{NodeID: 2}}, "NodeID and DataDir are the cluster's to set"},
		{"data dir set", ClusterOptions{Node: Options{DataDir: "/tmp/x"}}, "NodeID and DataDir are the cluster's to set"},
		{"negative delay", ClusterOptions{StartDelay: -time.Second}, "StartDelay -1s is negative"},
		{"order misses a node", ClusterOptions{Order: []int32{1, 2}}, "does not name all 3 nodes"},
		{"order names one twice", ClusterOptions{Order: []int32{1, 2, 2}}, "2 is not one of nodes 1 to 3, or is given twice"},
		{"order names node 0", ClusterOptions{Order: []int32{0, 1, 2}}, "0 is not one of nodes 1 to 3"},
		{"order names an unknown node", ClusterOptions{Nodes: 2, Order: []int32{1, 3}}, "3 is not one of nodes 1 to 2"},
		{"a voter later", ClusterOptions{Nodes: 3, BrokerOnly: 1, Later: []int32{2}}, "Later names node 2, a voter"},
		{"later and in the order", ClusterOptions{Nodes: 3, BrokerOnly: 1, Later: []int32{4}, Order: []int32{1, 2, 3, 4}}, "4 is not one of nodes 1 to 4, or is given twice"},
		{"later, unknown", ClusterOptions{Nodes: 3, BrokerOnly: 1, Later: []int32{5}}, "5 is not one of nodes 1 to 4"},
		{"node args for an unknown node", ClusterOptions{NodeArgs: map[int32][]string{4: {"--rack", "d"}}}, "NodeArgs names node 4: allowed: 1 to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := startCluster(t, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("startCluster: %v, %v; want an error saying %q", c, err, tc.want)
			}
		})
	}
}

// NodeArgs go to their node only, after the arguments every node gets.
func TestClusterNodeArgs(t *testing.T) {
	opts := ClusterOptions{Node: Options{Args: []string{"--replica-selector", "rack"}},
		NodeArgs: map[int32][]string{2: {"--rack", "b"}, 3: {"--rack", "c"}}}
	if err := opts.fill(); err != nil {
		t.Fatal(err)
	}
	c, err := newCluster(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int32]string{1: "--replica-selector rack", 2: "--replica-selector rack --rack b", 3: "--replica-selector rack --rack c"} {
		if got := strings.Join(c.node(id).args(), " "); !strings.HasSuffix(got, "--controller-quorum-voters "+c.voters+" "+want) {
			t.Errorf("node %d runs with %q, want it to end %q", id, got, want)
		}
	}
}

// Every port of every node is distinct, the voter list names each node's
// controller port, and every node is given that list.
func TestClusterPortsAndVoters(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Node: fakeOptions(t, fakeOK)})
	if len(c.Nodes()) != 3 {
		t.Fatalf("%d nodes, want 3", len(c.Nodes()))
	}
	seen := map[string]string{}
	var kafka, voters []string
	for i, n := range c.Nodes() {
		if n.ID() != int32(i+1) || c.Node(n.ID()) != n {
			t.Fatalf("Nodes()[%d] has id %d", i, n.ID())
		}
		for what, a := range map[string]string{"kafka": n.KafkaAddr(), "controller": n.ControllerAddr(), "http": n.HTTPAddr()} {
			if other, ok := seen[a]; ok {
				t.Fatalf("node %d's %s address %s is also %s", n.ID(), what, a, other)
			}
			seen[a] = "node " + strconv.Itoa(int(n.ID())) + "'s " + what
		}
		kafka = append(kafka, n.KafkaAddr())
		voters = append(voters, strconv.Itoa(int(n.ID()))+"@"+n.ControllerAddr())
		if got := startField(t, n.DataDir(), "voters"); !reflect.DeepEqual(got, []string{c.Voters()}) {
			t.Errorf("node %d was given voters %q, want %q", n.ID(), got, c.Voters())
		}
	}
	if want := strings.Join(voters, ","); c.Voters() != want {
		t.Fatalf("Voters() = %q, want %q", c.Voters(), want)
	}
	if want := strings.Join(kafka, ","); c.Brokers() != want {
		t.Fatalf("Brokers() = %q, want %q", c.Brokers(), want)
	}
	// A lone node is still a cluster of one: no voter list.
	n := Start(t, fakeOptions(t, fakeOK))
	if got := startField(t, n.DataDir(), "voters"); !reflect.DeepEqual(got, []string{""}) {
		t.Fatalf("a lone node was given voters %q", got)
	}
}

// The fake quorum is ready only once a majority of voters runs, so a
// cluster that waited for each node before launching the next would
// never start. The order and the delay are kept, on the first start and
// on a start of the whole cluster after a stop.
func TestClusterLaunchesAllBeforeWaiting(t *testing.T) {
	const delay = 150 * time.Millisecond
	opts := fakeOptions(t, fakeQuorum)
	opts.ReadyTimeout = 20 * time.Second
	begin := time.Now()
	c := StartCluster(t, ClusterOptions{Node: opts, Order: []int32{3, 1, 2}, StartDelay: delay})
	checkLaunchOrder(t, c, begin, []int32{3, 1, 2}, delay)
	for _, n := range c.Nodes() {
		if err := n.CheckReady(); err != nil {
			t.Fatalf("node %d: %v", n.ID(), err)
		}
	}

	c.Stop(2, 3, 1)
	for _, n := range c.Nodes() {
		if n.Running() {
			t.Fatalf("node %d running after Stop", n.ID())
		}
	}
	begin = time.Now()
	c.Start(2, 3, 1)
	checkLaunchOrder(t, c, begin, []int32{2, 3, 1}, delay)

	// One node down leaves a quorum; Restart brings it back on its ports.
	kafka := c.Node(3).KafkaAddr()
	c.Kill(3)
	if c.Node(3).Running() {
		t.Fatal("node 3 running after Kill")
	}
	c.Restart(3)
	if !c.Node(3).Running() || c.Node(3).KafkaAddr() != kafka {
		t.Fatalf("node 3 after Restart: running %v, kafka %s (was %s)", c.Node(3).Running(), c.Node(3).KafkaAddr(), kafka)
	}
	// Restart of all, none named: stopped and started in the first order.
	begin = time.Now()
	c.Restart()
	checkLaunchOrder(t, c, begin, []int32{3, 1, 2}, delay)
	for id, want := range map[int32]int{1: 3, 2: 3, 3: 4} {
		if got := len(starts(t, c.Node(id).DataDir())); got != want {
			t.Errorf("node %d started %d times, want %d", id, got, want)
		}
	}
}

// A quorum that never forms fails the start with every node's reason,
// within the ready timeout, not one timeout per node.
func TestClusterNotReadyNamesEveryNode(t *testing.T) {
	opts := fakeOptions(t, fakeNeverReady)
	opts.ReadyTimeout = time.Second
	begin := time.Now()
	_, err := startCluster(t, ClusterOptions{Node: opts})
	if err == nil {
		t.Fatal("a cluster that is never ready started")
	}
	for _, id := range []string{"node 1: ", "node 2: ", "node 3: "} {
		if !strings.Contains(err.Error(), id+ErrNotReady.Error()) {
			t.Errorf("error does not say %q: %v", id+ErrNotReady.Error(), err)
		}
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("start failed after %v: the nodes were waited for one timeout each", d)
	}
}

// A node whose port was taken is retried with fresh ports for every node,
// and a new voter list naming them.
func TestClusterRetriesWhenPortTaken(t *testing.T) {
	once := t.TempDir()
	opts := fakeOptions(t, fakePortTaken)
	opts.Env = append(opts.Env, fakeOnceDirEnv+"="+once)
	c := StartCluster(t, ClusterOptions{Node: opts})
	for _, n := range c.Nodes() {
		first, err := os.ReadFile(filepath.Join(once, "port-taken-once-"+strconv.Itoa(int(n.ID()))))
		if err != nil {
			t.Fatalf("node %d's failed first start left no record: %v", n.ID(), err)
		}
		if string(first) == n.KafkaAddr() {
			t.Errorf("node %d was retried on the port that was taken, %s", n.ID(), first)
		}
		if got := startField(t, n.DataDir(), "voters"); len(got) != 1 || got[0] != c.Voters() {
			t.Errorf("node %d: started %q in its data directory, want one start with voters %q", n.ID(), got, c.Voters())
		}
	}
}

// partitionLeader reads one partition's leader from a Metadata answer
// and says what is wrong with any other.
func TestPartitionLeader(t *testing.T) {
	answer := func(edit func(*kmsg.MetadataResponse)) *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		for _, name := range []string{"other", "orders"} {
			topic := kmsg.NewMetadataResponseTopic()
			topic.Topic = kmsg.StringPtr(name)
			for p := range int32(2) {
				part := kmsg.NewMetadataResponseTopicPartition()
				part.Partition, part.Leader = p, 10+p
				topic.Partitions = append(topic.Partitions, part)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		if edit != nil {
			edit(resp)
		}
		return resp
	}
	if id, err := partitionLeader(answer(nil), "orders", 1); err != nil || id != 11 {
		t.Fatalf("leader of orders-1: %d, %v; want 11", id, err)
	}
	for _, tc := range []struct {
		name      string
		edit      func(*kmsg.MetadataResponse)
		partition int32
		want      string
	}{
		{"no such topic", func(r *kmsg.MetadataResponse) { r.Topics = r.Topics[:1] }, 0, "no topic orders in the answer"},
		{"topic named by id only", func(r *kmsg.MetadataResponse) { r.Topics[1].Topic = nil }, 0, "no topic orders"},
		{"topic error", func(r *kmsg.MetadataResponse) { r.Topics[1].ErrorCode = kerr.UnknownTopicOrPartition.Code }, 0, "topic orders: UNKNOWN_TOPIC_OR_PARTITION"},
		{"no such partition", nil, 2, "topic orders has no partition 2"},
		{"negative partition", nil, -1, "has no partition -1"},
		{"partition error", func(r *kmsg.MetadataResponse) { r.Topics[1].Partitions[0].ErrorCode = kerr.LeaderNotAvailable.Code }, 0, "orders-0: LEADER_NOT_AVAILABLE"},
		{"no leader", func(r *kmsg.MetadataResponse) { r.Topics[1].Partitions[0].Leader = -1 }, 0, "orders-0 has no leader"},
		{"unknown error code", func(r *kmsg.MetadataResponse) { r.Topics[1].ErrorCode = 32767 }, 0, "topic orders:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := partitionLeader(answer(tc.edit), "orders", tc.partition)
			if err == nil || !strings.Contains(err.Error(), tc.want) || id != -1 {
				t.Fatalf("partitionLeader: %d, %v; want -1 and an error saying %q", id, err, tc.want)
			}
		})
	}
}
