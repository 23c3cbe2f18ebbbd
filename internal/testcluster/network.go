package testcluster

// Network mode: a cluster's nodes in network namespaces of their own,
// and the faults between them, which internal/netfault makes. Cluster's
// methods fail the test where netfault's return an error, and take node
// ids as int32, as the rest of the harness does.

import (
	"net"
	"time"

	"github.com/fjordmq/fjord/internal/netfault"
)

// Ports every node listens on in network mode: fjord's defaults, since
// no other process shares a node's namespace.
const (
	networkKafkaPort      = 9092
	networkControllerPort = 9093
	networkHTTPPort       = 8082
)

// newNetwork makes a cluster's network; a variable so that a test can
// keep the network of a start that failed, which no Cluster holds.
var newNetwork = netfault.New

// network returns the cluster's network, or why a fault cannot be made.
func (c *Cluster) network() (*netfault.Network, error) {
	if c.net == nil {
		return nil, ErrNoNetwork
	}
	return c.net, nil
}

// reportCleanupError fails a test whose network could not be removed
// (Errorf, as a cleanup may not stop the others), or, for a shared
// cluster, which has no test to fail, logs it.
func reportCleanupError(t owner, err error) {
	if e, ok := t.(interface{ Errorf(string, ...any) }); ok {
		e.Errorf("testcluster: %v", err)
		return
	}
	t.Logf("%v", err)
}

// Cut drops every packet node from sends to node to, one way, silently
// (netfault.Network.Cut): from's connects to to time out, to's packets
// still reach from, and clients on the test process are not cut. The
// fault lasts until Heal, across restarts of either node.
func (c *Cluster) Cut(from, to int32) {
	c.t.Helper()
	if err := c.cut(from, to, false); err != nil {
		c.t.Fatalf("Cut(%d, %d): %v", from, to, err)
	}
}

// CutBoth cuts a from b and b from a: the two cannot talk, while each
// still talks to the rest.
func (c *Cluster) CutBoth(a, b int32) {
	c.t.Helper()
	if err := c.cut(a, b, true); err != nil {
		c.t.Fatalf("CutBoth(%d, %d): %v", a, b, err)
	}
}

func (c *Cluster) cut(from, to int32, both bool) error {
	nw, err := c.network()
	if err != nil {
		return err
	}
	if both {
		return nw.CutBoth(int(from), int(to))
	}
	return nw.Cut(int(from), int(to))
}

// Isolate cuts node id from every other node, both ways, while the test
// process (and the clients it runs) still reaches it: a node that
// answers clients but hears no peer, the case a stale leader's fencing
// is for.
func (c *Cluster) Isolate(id int32) {
	c.t.Helper()
	if err := c.isolate(id); err != nil {
		c.t.Fatalf("Isolate(%d): %v", id, err)
	}
}

func (c *Cluster) isolate(id int32) error {
	nw, err := c.network()
	if err != nil {
		return err
	}
	return nw.Isolate(int(id))
}

// Split partitions the nodes into groups (every node in exactly one):
// nodes of one group talk to each other, no packet crosses between
// groups. Split([]int32{1}, []int32{2, 3}) leaves 2 and 3 a majority.
func (c *Cluster) Split(groups ...[]int32) {
	c.t.Helper()
	if err := c.split(groups...); err != nil {
		c.t.Fatalf("Split(%v): %v", groups, err)
	}
}

func (c *Cluster) split(groups ...[]int32) error {
	nw, err := c.network()
	if err != nil {
		return err
	}
	ids := make([][]int, len(groups))
	for i, g := range groups {
		for _, id := range g {
			ids[i] = append(ids[i], int(id))
		}
	}
	return nw.Split(ids...)
}

// Delay holds every packet node from sends to node to for at least d,
// one way (so any round trip between the two takes d longer): a slow or
// distant link, under which timeouts and sessions are tested. A second
// Delay of the same link changes d for the packets sent after it. Until
// Heal.
func (c *Cluster) Delay(from, to int32, d time.Duration) {
	c.t.Helper()
	if err := c.delay(from, to, d); err != nil {
		c.t.Fatalf("Delay(%d, %d, %v): %v", from, to, d, err)
	}
}

func (c *Cluster) delay(from, to int32, d time.Duration) error {
	nw, err := c.network()
	if err != nil {
		return err
	}
	return nw.Delay(int(from), int(to), d)
}

// Heal undoes every Cut, CutBoth, Isolate, Split and Delay: all nodes
// talk again at once. Packets dropped stay dropped; TCP retransmits them.
func (c *Cluster) Heal() {
	c.t.Helper()
	if err := c.heal(); err != nil {
		c.t.Fatalf("Heal: %v", err)
	}
}

func (c *Cluster) heal() error {
	nw, err := c.network()
	if err != nil {
		return err
	}
	return nw.Heal()
}

// DialFrom opens a TCP connection to addr (an IP address and port) from
// inside node id's namespace, as the node itself would: the faults apply
// to it as to the node's own traffic. In a cluster without
// ClusterOptions.Network it returns ErrNoNetwork. Safe from any
// goroutine.
func (c *Cluster) DialFrom(id int32, addr string, timeout time.Duration) (net.Conn, error) {
	nw, err := c.network()
	if err != nil {
		return nil, err
	}
	return nw.DialFrom(int(id), addr, timeout)
}

// Netns is the network namespace the node runs in (for `ip netns exec`),
// or "" for a node on the loopback interface.
func (n *Node) Netns() string {
	if n.net == nil {
		return ""
	}
	return n.net.Namespace(int(n.opts.NodeID))
}
