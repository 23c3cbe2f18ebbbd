package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/netfault"
)

// DefaultClusterNodes is a cluster's size when ClusterOptions.Nodes is 0:
// the smallest quorum that survives losing a voter.
const DefaultClusterNodes = 3

// maxClusterNodes bounds a cluster's size: tests need quorums of 3 or
// 5, and more processes than that swamp the few cores CI shares.
const maxClusterNodes = 9

// agreePollInterval is how often ControllerID and Leader ask every node
// again. Each ask is a new Kafka connection per node, so it is slower
// than the /readyz poll.
const agreePollInterval = 50 * time.Millisecond

// ClusterOptions configure a cluster: Nodes fjord processes, ids 1 to
// Nodes, each a broker and a voter of one controller quorum.
type ClusterOptions struct {
	// Nodes is how many (DefaultClusterNodes if 0).
	Nodes int
	// Node is every node's Options. NodeID and DataDir must be left zero:
	// the cluster gives each node its id and a data directory of its own.
	Node Options
	// Order is the order the first start launches the nodes in, as node
	// ids: each once, all of them. nil: 1 to Nodes.
	Order []int32
	// StartDelay is the pause between two launches (also in Start), so a
	// test can let one node run alone before the next arrives.
	StartDelay time.Duration
	// BrokerOnly adds that many broker-only nodes (--process-roles
	// broker), ids Nodes+1 on: they follow the metadata log of the
	// Nodes voters without a vote.
	BrokerOnly int
	// Later are broker-only nodes the first start leaves stopped, for a
	// test that adds them to a running cluster (Start). Order then
	// names the others.
	Later []int32
	// NodeArgs are more serve arguments for single nodes, by id, after
	// Node.Args (a rack of its own for each, say).
	NodeArgs map[int32][]string
	// Network puts each node in a network namespace of its own, on a
	// bridge the test process also sits on (internal/netfault), so that
	// Cut, CutBoth, Isolate, Split, Delay and Heal can fault the links
	// between nodes while clients still reach every node. Each node
	// listens on 10.231.X.(10+id), on fjord's default ports. It needs
	// Linux, root, and the ip and tc commands (Debian's iproute2, which
	// the harness installs with apt-get if they are missing). false:
	// every node on 127.0.0.1 with ports of its own, and no faults but
	// signals.
	Network bool
}

// Cluster is a set of nodes sharing one --controller-quorum-voters list,
// each keeping its ports and data directory across restarts as a lone
// Node does.
//
// Threads: the methods that fail the test (StartCluster, Node, Start,
// Stop, Kill, Restart, ControllerID, Leader, and network.go's Cut,
// CutBoth, Isolate, Split, Delay and Heal) must be called from the
// test's goroutine; Nodes, Brokers, Voters and DialFrom are safe from
// any.
type Cluster struct {
	t      owner
	opts   ClusterOptions // defaults filled in
	nodes  []*Node        // nodes[i] has id i+1
	voters string
	net    *netfault.Network // nil unless opts.Network
}

// StartCluster starts the cluster and waits until every node's /readyz
// answers 200. All ports are found first, since every node's voter list
// names every controller port; then every process is launched, in
// opts.Order, before any is waited for: a node of a quorum is ready only
// once a majority of voters runs. It fails the test if a node exits or
// is not ready in time; every node is SIGKILLed at the end of the test.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c, err := startCluster(t, opts)
	if err != nil {
		t.Fatalf("starting a cluster: %v", err)
	}
	return c
}

func startCluster(t owner, opts ClusterOptions) (*Cluster, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := newCluster(t, opts)
		if err != nil {
			return nil, err
		}
		err = c.launch(opts.Order)
		if err == nil {
			return c, nil
		}
		// A taken port is retried with fresh ports for every node and
		// fresh data directories: the metadata log the others
		// bootstrapped names the old controller ports, and a voter list
		// is read only when the log is new. In network mode no other
		// process shares a node's namespace, so no port is taken.
		if attempt < startAttempts && c.net == nil && c.portTaken(err) {
			c.killAll()
			continue
		}
		if c.net != nil {
			// Now, not only at the owner's end, so a start that failed
			// half-way leaves no namespace behind even for a shared
			// cluster, whose owner ends with the test binary.
			c.killAll()
			err = errors.Join(err, c.net.Close())
		}
		return nil, err
	}
}

// fill checks opts and fills in the defaults.
func (o *ClusterOptions) fill() error {
	if o.Nodes == 0 {
		o.Nodes = DefaultClusterNodes
	}
	switch {
	case o.Nodes < 1 || o.Nodes > maxClusterNodes:
		return fmt.Errorf("ClusterOptions.Nodes %d: allowed: 1 to %d", o.Nodes, maxClusterNodes)
	case o.BrokerOnly < 0 || o.Nodes+o.BrokerOnly > maxClusterNodes:
		return fmt.Errorf("ClusterOptions.BrokerOnly %d: allowed: 0 to %d more nodes", o.BrokerOnly, maxClusterNodes-o.Nodes)
	case o.BrokerOnly > 0 && o.Nodes < 2:
		return errors.New("ClusterOptions.BrokerOnly needs a quorum of voters to follow (Nodes of 2 or more)")
	case o.Node.NodeID != 0 || o.Node.DataDir != "":
		return errors.New("ClusterOptions.Node: NodeID and DataDir are the cluster's to set")
	case o.StartDelay < 0:
		return fmt.Errorf("ClusterOptions.StartDelay %v is negative", o.StartDelay)
	}
	for id := range o.NodeArgs {
		if id < 1 || int(id) > o.total() {
			return fmt.Errorf("ClusterOptions.NodeArgs names node %d: allowed: 1 to %d", id, o.total())
		}
	}
	// Set here, not only by newNode, because the cluster's waits use it.
	if o.Node.ReadyTimeout <= 0 {
		o.Node.ReadyTimeout = DefaultReadyTimeout
	}
	for _, id := range o.Later {
		if int(id) <= o.Nodes {
			return fmt.Errorf("ClusterOptions.Later names node %d, a voter: only broker-only nodes can join later", id)
		}
	}
	if o.Order == nil {
		for id := range o.total() {
			if !slices.Contains(o.Later, int32(id+1)) {
				o.Order = append(o.Order, int32(id+1))
			}
		}
	}
	return checkOrder(append(slices.Clone(o.Order), o.Later...), o.total(), true)
}

// total is how many nodes: the voters and the broker-only ones.
func (o *ClusterOptions) total() int { return o.Nodes + o.BrokerOnly }

// checkOrder checks that order names nodes 1 to n at most once each, and
// every one of them if all.
func checkOrder(order []int32, n int, all bool) error {
	seen := make(map[int32]bool, len(order))
	for _, id := range order {
		if id < 1 || int(id) > n || seen[id] {
			return fmt.Errorf("node order %v: %d is not one of nodes 1 to %d, or is given twice", order, id, n)
		}
		seen[id] = true
	}
	if all && len(seen) != n {
		return fmt.Errorf("node order %v does not name all %d nodes", order, n)
	}
	return nil
}

// newCluster makes the nodes with their ports and voter list; it starts
// nothing.
func newCluster(t owner, opts ClusterOptions) (*Cluster, error) {
	c := &Cluster{t: t, opts: opts}
	var ports []int
	if opts.Network {
		// A test installs what it needs rather than skip.
		if err := netfault.Install(); err != nil {
			return nil, err
		}
		nw, err := newNetwork(opts.total())
		if err != nil {
			return nil, err
		}
		// Registered before the nodes are made, so that the removal
		// runs after their cleanups have killed them.
		t.Cleanup(func() {
			if err := nw.Close(); err != nil {
				reportCleanupError(t, err)
			}
		})
		c.net = nw
	} else {
		// One call, so no two nodes can get the same port.
		var err error
		if ports, err = freePorts(opts.Node.portsPerNode() * opts.total()); err != nil {
			return nil, err
		}
	}
	controllerAddrs := make([]string, opts.Nodes)
	for i := range opts.total() {
		nodeOpts := opts.Node
		nodeOpts.NodeID = int32(i + 1)
		if i >= opts.Nodes {
			nodeOpts.Args = append([]string{"--process-roles", "broker"}, nodeOpts.Args...)
		}
		// A new slice: the nodes must not share one backing array.
		nodeOpts.Args = slices.Concat(nodeOpts.Args, opts.NodeArgs[nodeOpts.NodeID])
		n, err := newNode(t, nodeOpts)
		if err != nil {
			if c.net != nil {
				err = errors.Join(err, c.net.Close())
			}
			return nil, err
		}
		if c.net != nil {
			n.net = c.net
			n.setAddrs(c.net.Addr(i+1).String(), networkKafkaPort, networkControllerPort, networkHTTPPort, networkListenerPorts(len(opts.Node.Listeners))...)
		} else {
			k := opts.Node.portsPerNode()
			n.setPorts(ports[k*i : k*(i+1)])
		}
		if i < opts.Nodes {
			controllerAddrs[i] = n.controllerAddr
		}
		c.nodes = append(c.nodes, n)
	}
	c.voters = votersAt(controllerAddrs)
	for _, n := range c.nodes {
		n.voters = c.voters
	}
	return c, nil
}

// voterList is --controller-quorum-voters for nodes 1 to len(ports),
// node i+1's controller on 127.0.0.1:ports[i].
func voterList(ports []int) string {
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = hostPort(p)
	}
	return votersAt(addrs)
}

// votersAt is --controller-quorum-voters for nodes 1 to len(addrs), node
// i+1's controller at addrs[i] (host:port).
func votersAt(addrs []string) string {
	entries := make([]string, len(addrs))
	for i, a := range addrs {
		entries[i] = strconv.Itoa(i+1) + "@" + a
	}
	return strings.Join(entries, ",")
}

// launch starts the nodes of order, StartDelay apart, then waits until
// all are ready. A node that fails is killed; the others are left
// running for the test to see or stop.
func (c *Cluster) launch(order []int32) error {
	procs := make([]*process, len(order))
	for i, id := range order {
		if i > 0 && c.opts.StartDelay > 0 {
			time.Sleep(c.opts.StartDelay)
		}
		p, err := c.node(id).spawn()
		if err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
		procs[i] = p
	}
	// One deadline for all: the nodes become ready together, once a
	// quorum has formed, so each needs no time of its own.
	deadline := time.Now().Add(c.opts.Node.ReadyTimeout)
	var errs []error
	for i, id := range order {
		if err := c.node(id).awaitReady(procs[i], deadline); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// portTaken reports whether a failed launch had a node find one of its
// ports taken.
func (c *Cluster) portTaken(err error) bool {
	for _, n := range c.nodes {
		if n.portTaken(err) {
			return true
		}
	}
	return false
}

func (c *Cluster) killAll() {
	for _, n := range c.nodes {
		if n.Running() {
			n.kill()
		}
	}
}

// Nodes is every node, by id (Nodes()[0] is node 1).
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Node is the node with id, which must be 1 to the cluster's size.
func (c *Cluster) Node(id int32) *Node {
	c.t.Helper()
	if id < 1 || int(id) > len(c.nodes) {
		c.t.Fatalf("no node %d in a cluster of %d", id, len(c.nodes))
	}
	return c.nodes[id-1]
}

// node is Node for ids already checked.
func (c *Cluster) node(id int32) *Node { return c.nodes[id-1] }

// Brokers is every node's Kafka address, comma-separated, for clients'
// bootstrap lists and ReadAll.
func (c *Cluster) Brokers() string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.KafkaAddr()
	}
	return strings.Join(addrs, ",")
}

// Voters is the --controller-quorum-voters list every node is given.
func (c *Cluster) Voters() string { return c.voters }

// ids returns the nodes named, or all in the start order (the Later
// ones last) when none is.
func (c *Cluster) ids(ids []int32) []int32 {
	c.t.Helper()
	if len(ids) == 0 {
		return append(slices.Clone(c.opts.Order), c.opts.Later...)
	}
	if err := checkOrder(ids, len(c.nodes), false); err != nil {
		c.t.Fatal(err)
	}
	return ids
}

// Start launches the nodes named (none: all, in ClusterOptions.Order),
// in that order and StartDelay apart, and waits until all are ready, as
// StartCluster does: so a cluster stopped whole comes back in any order.
// Each must be stopped or killed. On the same ports and data
// directories as before.
func (c *Cluster) Start(ids ...int32) {
	c.t.Helper()
	ids = c.ids(ids)
	for _, id := range ids {
		if c.node(id).Running() {
			c.t.Fatalf("starting node %d: it is running", id)
		}
	}
	if err := c.launch(ids); err != nil {
		c.t.Fatalf("starting nodes %v: %v", ids, err)
	}
}

// Stop stops the nodes named (none: all), one after another in that
// order, each with SIGTERM and a wait for its clean exit (Node.Stop).
func (c *Cluster) Stop(ids ...int32) {
	c.t.Helper()
	for _, id := range c.ids(ids) {
		c.node(id).Stop()
	}
}

// Kill SIGKILLs the nodes named (none: all), in that order (Node.Kill).
func (c *Cluster) Kill(ids ...int32) {
	c.t.Helper()
	for _, id := range c.ids(ids) {
		c.node(id).Kill()
	}
}

// Restart stops the nodes named (none: all) that are running, then
// starts them all again as Start does. To restart after a crash, Kill
// first.
func (c *Cluster) Restart(ids ...int32) {
	c.t.Helper()
	ids = c.ids(ids)
	for _, id := range ids {
		if c.node(id).Running() {
			c.node(id).Stop()
		}
	}
	c.Start(ids...)
}

// running is the nodes whose process is alive.
func (c *Cluster) running() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// agree asks every running node's Metadata (for topics) until each answer
// gives the same id by pick, and returns it; pick returns an error while
// an answer gives none. The wait is bounded by the ready timeout, since
// agreement follows an election, as readiness does.
func (c *Cluster) agree(t testing.TB, what string, topics []string, pick func(*kmsg.MetadataResponse) (int32, error)) int32 {
	t.Helper()
	timeout := c.opts.Node.ReadyTimeout
	deadline := time.Now().Add(timeout)
	for {
		id, err := c.agreeOnce(topics, pick)
		if err == nil {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the nodes did not agree within %v: %v", what, timeout, err)
		}
		time.Sleep(agreePollInterval)
	}
}

func (c *Cluster) agreeOnce(topics []string, pick func(*kmsg.MetadataResponse) (int32, error)) (int32, error) {
	nodes := c.running()
	if len(nodes) == 0 {
		return -1, errors.New("no node is running")
	}
	agreed := int32(-1)
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := n.Metadata(ctx, topics...)
		cancel()
		if err != nil {
			return -1, fmt.Errorf("node %d: %w", n.ID(), err)
		}
		id, err := pick(resp)
		if err != nil {
			return -1, fmt.Errorf("node %d: %w", n.ID(), err)
		}
		if agreed >= 0 && id != agreed {
			return -1, fmt.Errorf("node %d says %d, an earlier node %d", n.ID(), id, agreed)
		}
		agreed = id
	}
	return agreed, nil
}

// ControllerID waits until every running node's Kafka Metadata answer
// names the same controller, and returns its id. Fjord names the active
// controller once it is a registered broker, before that the answering
// node itself, so agreement means the nodes know one active controller.
func (c *Cluster) ControllerID(t testing.TB) int32 {
	t.Helper()
	return c.agree(t, "controller id", nil, func(resp *kmsg.MetadataResponse) (int32, error) {
		if resp.ControllerID < 0 {
			return -1, errors.New("no controller")
		}
		return resp.ControllerID, nil
	})
}

// Leader waits until every running node's Kafka Metadata answer names
// the same leader for the partition, and returns its id.
func (c *Cluster) Leader(t testing.TB, topic string, partition int32) int32 {
	t.Helper()
	return c.agree(t, fmt.Sprintf("leader of %s-%d", topic, partition), []string{topic}, func(resp *kmsg.MetadataResponse) (int32, error) {
		return partitionLeader(resp, topic, partition)
	})
}

// partitionLeader is the leader a Metadata answer gives the partition.
func partitionLeader(resp *kmsg.MetadataResponse, topic string, partition int32) (int32, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, fmt.Errorf("topic %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("%s-%d: %w", topic, partition, err)
			}
			if p.Leader < 0 {
				return -1, fmt.Errorf("%s-%d has no leader", topic, partition)
			}
			return p.Leader, nil
		}
		return -1, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	return -1, fmt.Errorf("no topic %s in the answer", topic)
}

// Metadata asks this node, and only this node, for the Kafka metadata of
// topics (none given: of no topic, only the brokers, the cluster id and
// the controller), with a client of its own, so the answer is the node's
// view, not the cluster's.
func (n *Node) Metadata(ctx context.Context, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafkaAddr), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("client has %d seed brokers, want 1", len(seeds))
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from %s: %w", n.kafkaAddr, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}
