package testcluster

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/netfault"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Network mode (network.go): the faults against real fjord processes on
// real namespaces, and the cluster's use of its network. What
// internal/netfault does alone (names, subnets, links, the sweep) is
// tested there.

// Bounds of the reachability checks. unreachableWait is how long a
// check waits to be sure a packet is not coming: a dropped packet never
// arrives, so a longer wait could not change the answer, only a shorter
// one could pass a link that is not cut but slow. reachableWait is
// generous: a link that is up answers in milliseconds.
const (
	unreachableWait = time.Second
	reachableWait   = 20 * time.Second
	dialTimeout     = 2 * time.Second
)

// udpProbePort is where a UDP check from node `from` listens, in the
// receiver's namespace: one port per sender, so checks run at once.
func udpProbePort(from int32) int { return 7000 + int(from) }

// netLink is one direction between two nodes: the packets from sends to
// to.
type netLink struct{ from, to int32 }

// udpArrives reports whether a datagram node from sends to node to's
// address arrives within wait. The sender repeats itself, so a lost
// first datagram (an ARP still resolving) does not decide the answer.
func udpArrives(c *Cluster, from, to int32, wait time.Duration) (bool, error) {
	nw := c.net
	dst := net.JoinHostPort(nw.Addr(int(to)).String(), strconv.Itoa(udpProbePort(from)))
	var listener net.PacketConn
	if err := nw.InNamespace(int(to), func() error {
		var err error
		listener, err = net.ListenPacket("udp4", dst)
		return err
	}); err != nil {
		return false, fmt.Errorf("listening in node %d's namespace: %w", to, err)
	}
	defer listener.Close()
	var sender net.Conn
	if err := nw.InNamespace(int(from), func() error {
		var err error
		sender, err = net.Dial("udp4", dst)
		return err
	}); err != nil {
		return false, fmt.Errorf("sending from node %d's namespace: %w", from, err)
	}
	defer sender.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			sender.Write([]byte("fjord testcluster probe")) // a refusal (ICMP) is an answer too: ignore it
			select {
			case <-stop:
				return
			case <-tick.C: // send again
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	listener.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 64)
	for {
		_, addr, err := listener.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if addr.(*net.UDPAddr).IP.Equal(nw.Addr(int(from)).AsSlice()) {
			return true, nil
		}
	}
}

// checkLinks checks every link between the nodes against cut (the links
// expected dropped), all at once:
//   - a UDP datagram from a to b arrives iff a -> b is not cut (the one
//     way check);
//   - a TCP connect from a to b's Kafka port succeeds iff neither a -> b
//     nor b -> a is cut (TCP needs both), and otherwise fails by timing
//     out: dropped, not refused;
//   - the test process (the root namespace) connects to every node.
func checkLinks(t *testing.T, c *Cluster, cut ...netLink) {
	t.Helper()
	isCut := map[netLink]bool{}
	for _, l := range cut {
		isCut[l] = true
	}
	var mu sync.Mutex
	var errs []string
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			from, to := a.ID(), b.ID()
			if from == to {
				continue
			}
			wg.Go(func() {
				wantUDP := !isCut[netLink{from, to}]
				wait := unreachableWait
				if wantUDP {
					wait = reachableWait
				}
				got, err := udpArrives(c, from, to, wait)
				switch {
				case err != nil:
					fail("UDP %d -> %d: %v", from, to, err)
				case got != wantUDP:
					fail("UDP %d -> %d: arrived %v, want %v", from, to, got, wantUDP)
				}
			})
			wg.Go(func() {
				if !isCut[netLink{from, to}] && !isCut[netLink{to, from}] {
					if err := testutil.Wait(reachableWait, func() error {
						conn, err := c.DialFrom(from, b.KafkaAddr(), dialTimeout)
						if err == nil {
							conn.Close()
						}
						return err
					}); err != nil {
						fail("TCP %d -> %d: %v, want a connection", from, to, err)
					}
					return
				}
				begin := time.Now()
				conn, err := c.DialFrom(from, b.KafkaAddr(), unreachableWait)
				var netErr net.Error
				switch {
				case err == nil:
					conn.Close()
					fail("TCP %d -> %d connected, want a timeout (cut)", from, to)
				case !errors.As(err, &netErr) || !netErr.Timeout():
					fail("TCP %d -> %d failed after %v with %v, want a timeout: a cut drops, it does not refuse", from, to, time.Since(begin), err)
				}
			})
		}
		wg.Go(func() {
			if err := testutil.Wait(reachableWait, func() error {
				conn, err := net.DialTimeout("tcp", a.KafkaAddr(), dialTimeout)
				if err == nil {
					conn.Close()
				}
				return err
			}); err != nil {
				fail("TCP from the test process to node %d: %v", a.ID(), err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		slices.Sort(errs)
		t.Fatalf("links with cut %v:\n%s", cut, strings.Join(errs, "\n"))
	}
}

// both is the links a <-> b.
func both(a, b int32) []netLink { return []netLink{{a, b}, {b, a}} }

// cutDrops is how many packets the qdisc dropping from -> to has
// dropped, read with tc.
func cutDrops(t *testing.T, c *Cluster, from, to int32) int {
	t.Helper()
	drops, err := c.net.Dropped(int(from), int(to))
	if err != nil {
		t.Fatal(err)
	}
	return drops
}

// namespaceLinks is the names of the network interfaces in node id's
// namespace, sorted.
func namespaceLinks(t *testing.T, c *Cluster, id int32) []string {
	t.Helper()
	var names []string
	if err := c.net.InNamespace(int(id), func() error {
		ifaces, err := net.Interfaces() // a netlink socket, on this thread
		for _, i := range ifaces {
			names = append(names, i.Name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// connectTime is how long a TCP connect from node from to node to's
// Kafka port takes: one round trip.
func connectTime(c *Cluster, from, to int32) (time.Duration, error) {
	begin := time.Now()
	conn, err := c.DialFrom(from, c.node(to).KafkaAddr(), 10*time.Second)
	if err != nil {
		return 0, err
	}
	d := time.Since(begin)
	conn.Close()
	return d, nil
}

// checkDelayed checks that every connect from -> to takes at least d
// (a packet held d cannot arrive sooner, however loaded the machine).
func checkDelayed(t *testing.T, c *Cluster, from, to int32, d time.Duration) {
	t.Helper()
	for range 3 {
		got, err := connectTime(c, from, to)
		if err != nil {
			t.Fatalf("connect %d -> %d: %v", from, to, err)
		}
		if got < d {
			t.Fatalf("connect %d -> %d took %v, want at least the delay %v", from, to, got, d)
		}
	}
}

// checkNotDelayed waits for one connect from -> to quicker than d: the
// link is not delayed. (One, not every: a busy machine can be slow.)
func checkNotDelayed(t *testing.T, c *Cluster, from, to int32, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, reachableWait, func() error {
		got, err := connectTime(c, from, to)
		if err != nil {
			return err
		}
		if got >= d {
			return fmt.Errorf("connect %d -> %d took %v, want under %v (not delayed)", from, to, got, d)
		}
		return nil
	})
}

// procState is the state letter of /proc/<pid>/stat (T: stopped).
func procState(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	_, rest, ok := strings.Cut(string(b)[strings.LastIndexByte(string(b), ')'):], " ")
	if !ok || rest == "" {
		return "", fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return rest[:1], nil
}

// checkInNamespaces checks that every running node's process is fjord's
// own (what SIGKILL and SIGSTOP reach; not an `ip` wrapper) and runs in
// its node's namespace, not the test's.
func checkInNamespaces(t *testing.T, c *Cluster, binary string) {
	t.Helper()
	want, err := os.Stat(binary)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.running() {
		pid := n.Pid()
		exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(exe, want) {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			t.Fatalf("node %d's pid %d runs %s, want %s", n.ID(), pid, target, binary)
		}
		got, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			t.Fatal(err)
		}
		ns, err := os.Stat("/run/netns/" + n.Netns()) // where `ip netns add` mounts it
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(got, ns) || os.SameFile(got, self) {
			t.Fatalf("node %d's pid %d is not in namespace %s", n.ID(), pid, n.Netns())
		}
	}
}

// Issue 14's network faults against three real fjord nodes: each fault
// does what it says at the IP level (one way where it says one way),
// clients on the test process reach every node throughout, Heal undoes
// it all, and the cluster is one cluster again afterwards. Signals
// (SIGKILL, SIGSTOP, SIGTERM) reach the nodes as on loopback.
func TestNetworkFaults(t *testing.T) {
	c := StartCluster(t, ClusterOptions{
		Nodes:   3,
		Network: true,
		Node:    Options{ReadyTimeout: clusterReadyTimeout},
	})
	for _, n := range c.Nodes() {
		host, _, _ := net.SplitHostPort(n.KafkaAddr())
		addr, err := netip.ParseAddr(host)
		if err != nil || addr != c.net.Addr(int(n.ID())) || !c.net.Subnet().Contains(addr) || !strings.Contains(c.Voters(), n.ControllerAddr()) {
			t.Fatalf("node %d: kafka %s, controller %s, voters %s; want its namespace's address %s in %s",
				n.ID(), n.KafkaAddr(), n.ControllerAddr(), c.Voters(), c.net.Addr(int(n.ID())), c.net.Subnet())
		}
	}
	// Every node lists the others at their namespace addresses, which
	// is what they advertise; one controller.
	clusterID, _ := checkOneCluster(t, c)
	checkInNamespaces(t, c, Binary(t))
	checkLinks(t, c)

	// One way: 1's packets to 2 vanish at 2's bridge port; 2's still
	// reach 1.
	c.Cut(1, 2)
	checkLinks(t, c, netLink{1, 2})
	if drops := cutDrops(t, c, 1, 2); drops == 0 {
		t.Fatal("1 -> 2 is unreachable but its qdisc dropped nothing: something else refused it")
	}
	c.Heal()
	checkLinks(t, c)

	c.CutBoth(1, 2)
	checkLinks(t, c, both(1, 2)...)
	c.Heal()

	// Isolated from its peers, node 3 still answers the test process,
	// on HTTP as on Kafka.
	c.Isolate(3)
	checkLinks(t, c, append(both(3, 1), both(3, 2)...)...)
	if _, _, err := c.Node(3).HTTPGet("/healthz"); err != nil {
		t.Fatalf("the test process cannot reach isolated node 3's HTTP: %v", err)
	}
	c.Heal()

	c.Split([]int32{1}, []int32{2, 3})
	checkLinks(t, c, append(both(1, 2), both(1, 3)...)...)
	// Faults add up until Heal.
	c.Cut(2, 3)
	checkLinks(t, c, append(both(1, 2), append(both(1, 3), netLink{2, 3})...)...)
	c.Heal()
	checkLinks(t, c)

	// Delay: a connect is one round trip, and crosses 1 -> 2 once
	// whichever end dials (SYN or SYN-ACK), so each takes at least d;
	// the other links are not delayed.
	const d = 400 * time.Millisecond
	undelayed := namespaceLinks(t, c, 1)
	c.Delay(1, 2, d)
	checkDelayed(t, c, 1, 2, d)
	checkDelayed(t, c, 2, 1, d)
	checkNotDelayed(t, c, 1, 3, d)
	checkNotDelayed(t, c, 3, 2, d)
	c.Delay(1, 2, 2*d) // changed, not added
	checkDelayed(t, c, 1, 2, 2*d)
	c.Delay(1, 3, d)
	checkDelayed(t, c, 1, 3, d)
	// A delayed link that is also cut drops.
	c.Cut(1, 2)
	checkLinks(t, c, netLink{1, 2})
	c.Heal()
	checkNotDelayed(t, c, 1, 2, d)
	// The delay line's tun device is gone with its routes.
	if got := namespaceLinks(t, c, 1); !slices.Equal(got, undelayed) {
		t.Fatalf("after Heal node 1's namespace has links %v, want %v, those it had before the delays", got, undelayed)
	}
	checkLinks(t, c)

	// Signals reach fjord itself.
	pid := c.Node(3).Pid()
	if err := c.Node(3).Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, reachableWait, func() error {
		if s, err := procState(pid); err != nil || s != "T" {
			return fmt.Errorf("node 3 (pid %d) in state %q (%v) after SIGSTOP, want T", pid, s, err)
		}
		return nil
	})
	if err := c.Node(3).Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, reachableWait, func() error {
		if s, err := procState(pid); err != nil || s == "T" {
			return fmt.Errorf("node 3 (pid %d) in state %q (%v) after SIGCONT", pid, s, err)
		}
		return nil
	})
	c.Kill(2)
	if c.Node(2).Running() {
		t.Fatal("node 2 running after Kill")
	}
	c.Start(2)
	c.Stop(1)
	c.Start(1)
	checkInNamespaces(t, c, Binary(t))

	// After all that, still the one cluster.
	if again, _ := checkOneCluster(t, c); again != clusterID {
		t.Fatalf("after the faults the cluster id is %s, was %s", again, clusterID)
	}
}

// Whatever a network-mode cluster made is gone once its test ends, with
// faults in place and the nodes running; and at once when its start
// fails because a node does (netfault's tests cover a network whose own
// setup fails). The nodes are fakes (fake_test.go): what is checked is
// the harness.
func TestNetworkRemoved(t *testing.T) {
	var nw *netfault.Network
	t.Run("at cleanup", func(t *testing.T) {
		c := StartCluster(t, ClusterOptions{Network: true, Node: fakeOptions(t, fakeOK)})
		nw = c.net
		if nw.Nodes() != 3 {
			t.Fatalf("a cluster of 3 nodes has a network of %d", nw.Nodes())
		}
		for _, n := range c.Nodes() {
			if got := startField(t, n.DataDir(), "kafka"); !reflect.DeepEqual(got, []string{n.KafkaAddr()}) || !strings.HasPrefix(n.KafkaAddr(), "10.231.") {
				t.Fatalf("node %d listened on %v, want its namespace address %s", n.ID(), got, n.KafkaAddr())
			}
		}
		c.Cut(1, 2)
		c.Delay(2, 3, time.Second)
	})
	if err := nw.CheckRemoved(); err != nil {
		t.Fatal(err)
	}

	t.Run("node fails", func(t *testing.T) {
		// The failed start returns no cluster: keep its network.
		var made []*netfault.Network
		defer func(orig func(int) (*netfault.Network, error)) { newNetwork = orig }(newNetwork)
		newNetwork = func(n int) (*netfault.Network, error) {
			got, err := netfault.New(n)
			if got != nil {
				made = append(made, got)
			}
			return got, err
		}
		opts := fakeOptions(t, fakeExit)
		opts.ReadyTimeout = 20 * time.Second
		_, err := startCluster(t, ClusterOptions{Network: true, Node: opts})
		if !errors.Is(err, ErrExited) {
			t.Fatalf("a cluster of failing nodes started: %v", err)
		}
		if len(made) != 1 {
			t.Fatalf("a failed start made %d networks, want 1", len(made))
		}
		// Before this test's cleanups: the failed start removed it.
		if err := made[0].CheckRemoved(); err != nil {
			t.Fatal(err)
		}
	})
}

// The fault methods of a cluster without a network refuse with
// ErrNoNetwork. (The refusals of a bad node id, split or delay are
// netfault's, tested there.)
func TestNetworkFaultsRefused(t *testing.T) {
	loopback := &Cluster{nodes: make([]*Node, 3)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"cut on loopback", loopback.cut(1, 2, false), ErrNoNetwork.Error()},
		{"isolate on loopback", loopback.isolate(1), ErrNoNetwork.Error()},
		{"split on loopback", loopback.split([]int32{1}, []int32{2, 3}), ErrNoNetwork.Error()},
		{"delay on loopback", loopback.delay(1, 2, time.Second), ErrNoNetwork.Error()},
		{"heal on loopback", loopback.heal(), ErrNoNetwork.Error()},
		{"dial on loopback", func() error { _, err := loopback.DialFrom(1, "127.0.0.1:1", time.Second); return err }(), ErrNoNetwork.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", tc.err, tc.want)
			}
		})
	}
}
