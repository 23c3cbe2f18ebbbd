package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Network mode (network.go): the faults against real processes on real
// namespaces, and the harness's own bookkeeping.

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

// udpArrives reports whether a datagram node from sends to node to's
// address arrives within wait. The sender repeats itself, so a lost
// first datagram (an ARP still resolving) does not decide the answer.
func udpArrives(c *Cluster, from, to int32, wait time.Duration) (bool, error) {
	nw := c.net
	dst := net.JoinHostPort(nw.nodes[to-1].addr.String(), strconv.Itoa(udpProbePort(from)))
	var listener net.PacketConn
	if err := inNamespace(nw.nodes[to-1].ns, func() error {
		var err error
		listener, err = net.ListenPacket("udp4", dst)
		return err
	}); err != nil {
		return false, fmt.Errorf("listening in node %d's namespace: %w", to, err)
	}
	defer listener.Close()
	var sender net.Conn
	if err := inNamespace(nw.nodes[from-1].ns, func() error {
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
		if addr.(*net.UDPAddr).IP.Equal(nw.nodes[from-1].addr.AsSlice()) {
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
	out, err := execRun(c.net.tc, "-j", "-s", "qdisc", "show", "dev", c.net.nodes[to-1].veth)
	if err != nil {
		t.Fatal(err)
	}
	var qdiscs []struct {
		Kind   string `json:"kind"`
		Handle string `json:"handle"`
		Drops  int    `json:"drops"`
	}
	if err := json.Unmarshal(out, &qdiscs); err != nil {
		t.Fatalf("tc -j -s qdisc: %v: %s", err, out)
	}
	for _, q := range qdiscs {
		if q.Kind == "pfifo" && q.Handle == cutLeaf(from) {
			return q.Drops
		}
	}
	t.Fatalf("no drop qdisc %s for %d -> %d on %s: %s", cutLeaf(from), from, to, c.net.nodes[to-1].veth, out)
	return 0
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
		ns, err := os.Stat(netnsDir + "/" + n.Netns())
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
		if err != nil || addr != c.net.nodes[n.ID()-1].addr || !c.net.subnet.Contains(addr) || !strings.Contains(c.Voters(), n.ControllerAddr()) {
			t.Fatalf("node %d: kafka %s, controller %s, voters %s; want its namespace's address %s in %s",
				n.ID(), n.KafkaAddr(), n.ControllerAddr(), c.Voters(), c.net.nodes[n.ID()-1].addr, c.net.subnet)
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
	if out, err := execRun(c.net.ip, "-n", c.net.nodes[0].ns, "-j", "link", "show"); err != nil || strings.Contains(string(out), delayIface) {
		t.Fatalf("after Heal node 1's namespace has links %s (%v), want no %s", out, err, delayIface)
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

// checkNoneLeft checks that nothing of network seq of this process is
// left: no namespace, no link, no route in subnet.
func checkNoneLeft(t *testing.T, seq int, subnet netip.Prefix) {
	t.Helper()
	ip, _, err := networkTools()
	if err != nil {
		t.Fatal(err)
	}
	nw := &network{run: execRun, ip: ip, pid: os.Getpid(), seq: seq}
	namespaces, links, err := nw.owned()
	if err != nil {
		t.Fatal(err)
	}
	if len(namespaces)+len(links) > 0 {
		t.Fatalf("network %d left namespaces %v and links %v", seq, namespaces, links)
	}
	if !subnet.IsValid() {
		return
	}
	used, err := nw.usedPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range used {
		if p.Bits() > 0 && p.Overlaps(subnet) {
			t.Fatalf("network %d left %s, in its subnet %s", seq, p, subnet)
		}
	}
}

// lastNetworkSeq is the sequence number of this process's latest network.
func lastNetworkSeq() int {
	networks.Lock()
	defer networks.Unlock()
	return networks.seq
}

// Whatever a network-mode cluster made is gone once its test ends, with
// faults in place and the nodes running; and at once when its start
// fails, whether a node fails or the network's own setup does half-way.
// The nodes are fakes (fake_test.go): what is checked is the harness.
func TestNetworkRemoved(t *testing.T) {
	var seq int
	var subnet netip.Prefix
	t.Run("at cleanup", func(t *testing.T) {
		c := StartCluster(t, ClusterOptions{Network: true, Node: fakeOptions(t, fakeOK)})
		seq, subnet = c.net.seq, c.net.subnet
		namespaces, links, err := c.net.owned()
		if err != nil {
			t.Fatal(err)
		}
		if len(namespaces) != 3 || len(links) != 4 {
			t.Fatalf("a network of 3 nodes has namespaces %v and links %v, want 3 and 4 (a bridge, 3 veths)", namespaces, links)
		}
		for _, n := range c.Nodes() {
			if got := startField(t, n.DataDir(), "kafka"); !reflect.DeepEqual(got, []string{n.KafkaAddr()}) || !strings.HasPrefix(n.KafkaAddr(), "10.231.") {
				t.Fatalf("node %d listened on %v, want its namespace address %s", n.ID(), got, n.KafkaAddr())
			}
		}
		c.Cut(1, 2)
		c.Delay(2, 3, time.Second)
	})
	checkNoneLeft(t, seq, subnet)

	t.Run("node fails", func(t *testing.T) {
		opts := fakeOptions(t, fakeExit)
		opts.ReadyTimeout = 20 * time.Second
		_, err := startCluster(t, ClusterOptions{Network: true, Node: opts})
		if !errors.Is(err, ErrExited) {
			t.Fatalf("a cluster of failing nodes started: %v", err)
		}
		// Before this test's cleanups: the failed start removed it.
		checkNoneLeft(t, lastNetworkSeq(), netip.Prefix{})
	})

	t.Run("setup fails half-way", func(t *testing.T) {
		injected := errors.New("injected failure")
		adds := 0
		run := func(name string, args ...string) ([]byte, error) {
			if len(args) >= 2 && args[0] == "netns" && args[1] == "add" {
				if adds++; adds == 2 {
					return nil, injected
				}
			}
			return execRun(name, args...)
		}
		nw, err := newNetwork(t, 3, run)
		if !errors.Is(err, injected) || nw != nil {
			t.Fatalf("newNetwork with a failing second namespace: %v, %v", nw, err)
		}
		checkNoneLeft(t, lastNetworkSeq(), netip.Prefix{})
	})
}

// deadPid is a pid no process has, from the top of the range, where a
// new process is least likely to land soon.
func deadPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for pid := pidMax - 1; pid > pidMax-1000; pid-- {
		if !processAlive(pid) {
			return pid
		}
	}
	t.Fatal("no free pid near pid_max")
	return 0
}

// A crashed run's namespaces and links (its pid is dead) are removed by
// the next network's setup; a live process's are left alone, and so are
// the names of a process's own pid except on its first network.
func TestNetworkSweepsLeftovers(t *testing.T) {
	ip, _, err := networkTools()
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleeper.Process.Kill() // our own child, by its pid
		sleeper.Wait()
	})
	dead, live := deadPid(t), sleeper.Process.Pid
	// What a run leaves when it dies: a namespace with a veth to a
	// bridge.
	leave := func(pid int) []string {
		ns, veth, bridge := namespaceName(pid, 1, 1), vethName(pid, 1, 1), bridgeName(pid, 1)
		t.Cleanup(func() {
			execRun(ip, "link", "del", veth)
			execRun(ip, "link", "del", bridge)
			execRun(ip, "netns", "del", ns)
		})
		for _, args := range [][]string{
			{"netns", "add", ns},
			{"link", "add", "name", bridge, "type", "bridge"},
			{"link", "add", veth, "type", "veth", "peer", "name", nodeIface, "netns", ns},
			{"link", "set", veth, "master", bridge},
		} {
			if _, err := execRun(ip, args...); err != nil {
				t.Fatal(err)
			}
		}
		out := []string{bridge, ns, veth}
		slices.Sort(out)
		return out
	}
	names := func(pid int) []string {
		nw := &network{run: execRun, ip: ip, pid: pid, seq: 1}
		namespaces, links, err := nw.owned()
		if err != nil {
			t.Fatal(err)
		}
		out := append(namespaces, links...)
		slices.Sort(out)
		return out
	}
	deadNames, liveNames := leave(dead), leave(live)
	if !slices.Equal(names(dead), deadNames) || !slices.Equal(names(live), liveNames) {
		t.Fatalf("leftovers made: %v and %v, want %v and %v", names(dead), names(live), deadNames, liveNames)
	}

	// A network of one node starts, and sweeps.
	c := StartCluster(t, ClusterOptions{Nodes: 1, Network: true, Node: fakeOptions(t, fakeOK)})
	if got := names(dead); len(got) > 0 {
		t.Fatalf("a dead pid's leftovers %v are still there", got)
	}
	if got := names(live); !slices.Equal(got, liveNames) {
		t.Fatalf("a live pid's names are %v, want %v left alone", got, liveNames)
	}
	if len(c.Nodes()) != 1 {
		t.Fatalf("%d nodes", len(c.Nodes()))
	}

	// A process's first network sweeps its own pid's names, live as
	// the pid is: here the sleeper plays the process.
	nw := &network{run: execRun, ip: ip, pid: live}
	if err := nw.sweep(false); err != nil {
		t.Fatal(err)
	}
	if got := names(live); !slices.Equal(got, liveNames) {
		t.Fatalf("a later network removed its own pid's names: left %v, want %v", got, liveNames)
	}
	if err := nw.sweep(true); err != nil {
		t.Fatal(err)
	}
	if got := names(live); len(got) > 0 {
		t.Fatalf("the first network left its own pid's names %v", got)
	}
}

// The fault methods refuse, with what was wrong, what they cannot do:
// a node that does not exist, a node cut from itself, a split that
// names a node twice or leaves one out, a delay that is not one, and any
// fault in a cluster that has no network.
func TestNetworkFaultsRefused(t *testing.T) {
	// Network mode with no links: every refusal comes before a command.
	withNet := &Cluster{nodes: make([]*Node, 3), net: &network{}}
	loopback := &Cluster{nodes: make([]*Node, 3)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"cut an unknown node", withNet.cut(1, 4, false), "node 4 is not one of nodes 1 to 3"},
		{"cut from an unknown node", withNet.cut(0, 1, true), "node 0 is not one of nodes 1 to 3"},
		{"cut from itself", withNet.cut(2, 2, false), "node 2 cannot be cut from or delayed to itself"},
		{"cut both from itself", withNet.cut(3, 3, true), "node 3 cannot be cut"},
		{"isolate an unknown node", withNet.isolate(-1), "node -1 is not one of nodes 1 to 3"},
		{"split in one group", withNet.split([]int32{1, 2, 3}), "split into 1 groups: want at least two"},
		{"split in none", withNet.split(), "split into 0 groups"},
		{"split with an empty group", withNet.split([]int32{1, 2, 3}, nil), "group 2 of the split is empty"},
		{"split with a node twice", withNet.split([]int32{1, 2}, []int32{2, 3}), "node 2 is in groups 1 and 2 of the split"},
		{"split with a node twice in a group", withNet.split([]int32{1, 1}, []int32{2, 3}), "node 1 is in groups 1 and 1"},
		{"split leaving nodes out", withNet.split([]int32{1}, []int32{2}), "nodes [3] are in no group of the split"},
		{"split with an unknown node", withNet.split([]int32{1}, []int32{2, 3, 4}), "group 2 of the split: node 4 is not one of nodes 1 to 3"},
		{"delay an unknown node", withNet.delay(1, 9, time.Second), "node 9 is not one of nodes 1 to 3"},
		{"delay to itself", withNet.delay(1, 1, time.Second), "cannot be cut from or delayed to itself"},
		{"delay of zero", withNet.delay(1, 2, 0), "delay 0s: want a positive delay"},
		{"negative delay", withNet.delay(1, 2, -time.Second), "delay -1s: want a positive delay"},
		{"cut on loopback", loopback.cut(1, 2, false), ErrNoNetwork.Error()},
		{"isolate on loopback", loopback.isolate(1), ErrNoNetwork.Error()},
		{"split on loopback", loopback.split([]int32{1}, []int32{2, 3}), ErrNoNetwork.Error()},
		{"delay on loopback", loopback.delay(1, 2, time.Second), ErrNoNetwork.Error()},
		{"heal on loopback", loopback.heal(), ErrNoNetwork.Error()},
		{"dial on loopback", func() error { _, err := loopback.DialFrom(1, "127.0.0.1:1", time.Second); return err }(), ErrNoNetwork.Error()},
		{"dial from an unknown node", func() error { _, err := withNet.DialFrom(4, "127.0.0.1:1", time.Second); return err }(), "node 4 is not one of nodes 1 to 3"},
		{"dial a name", func() error { _, err := withNet.DialFrom(1, "localhost:1", time.Second); return err }(), "want an IP address, not a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", tc.err, tc.want)
			}
		})
	}
}

// The links each fault cuts.
func TestNetworkFaultLinks(t *testing.T) {
	set := func(links []netLink, err error) map[netLink]bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := map[netLink]bool{}
		for _, l := range links {
			out[l] = true
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  map[netLink]bool
		want []netLink
	}{
		{"cut", set(pairLinks(3, 1, 2, false)), []netLink{{1, 2}}},
		{"cut both", set(pairLinks(3, 1, 2, true)), []netLink{{1, 2}, {2, 1}}},
		{"isolate", set(isolateLinks(3, 2)), []netLink{{2, 1}, {1, 2}, {2, 3}, {3, 2}}},
		{"isolate the only node", set(isolateLinks(1, 1)), nil},
		{"split", set(splitLinks(3, [][]int32{{1}, {3, 2}})), []netLink{{1, 2}, {2, 1}, {1, 3}, {3, 1}}},
		{"split in three", set(splitLinks(3, [][]int32{{1}, {2}, {3}})), []netLink{{1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 3}, {3, 2}}},
		{"split of five", set(splitLinks(5, [][]int32{{1, 2}, {3, 4, 5}})), []netLink{
			{1, 3}, {1, 4}, {1, 5}, {2, 3}, {2, 4}, {2, 5}, {3, 1}, {4, 1}, {5, 1}, {3, 2}, {4, 2}, {5, 2}}},
	} {
		want := map[netLink]bool{}
		for _, l := range tc.want {
			want[l] = true
		}
		if !maps.Equal(tc.got, want) {
			t.Errorf("%s: links %v, want %v", tc.name, slices.Collect(maps.Keys(tc.got)), tc.want)
		}
	}
}

func TestPickSubnet(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name  string
		start byte
		used  []netip.Prefix
		want  string
	}{
		{"free", 7, nil, "10.231.7.0/24"},
		{"a route and an address", 7, []netip.Prefix{p("10.231.7.0/24"), p("10.231.8.5/32"), p("0.0.0.0/0"), p("192.0.2.0/24")}, "10.231.9.0/24"},
		{"a wider route", 7, []netip.Prefix{p("10.231.4.0/22")}, "10.231.8.0/24"},
		{"wraps", 255, []netip.Prefix{p("10.231.255.0/24")}, "10.231.0.0/24"},
		{"all taken", 3, []netip.Prefix{p("10.0.0.0/8")}, ""},
	} {
		got, err := pickSubnet(tc.start, tc.used)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "no free /24 in 10.231.0.0/16")):
			t.Errorf("%s: %v, %v; want an error saying no /24 is free", tc.name, got, err)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("%s: %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		dst  string
		want string
	}{
		{"10.231.5.0/24", "10.231.5.0/24"},
		{"10.231.5.1", "10.231.5.1/32"},
		{"default", ""},
	} {
		got, ok := parsePrefix(tc.dst)
		if (tc.want == "") == ok || ok && got.String() != tc.want {
			t.Errorf("parsePrefix(%q) = %v, %v; want %q", tc.dst, got, ok, tc.want)
		}
	}
}

// The names fit the kernel's limit for the largest pid, and the sweep
// can read the pid back out of every one.
func TestNetworkNames(t *testing.T) {
	const maxPid, seq = 4194304, 999
	for _, name := range []string{bridgeName(maxPid, seq), vethName(maxPid, seq, maxClusterNodes)} {
		if len(name) > maxIfaceName {
			t.Errorf("link name %s is %d bytes, over %d", name, len(name), maxIfaceName)
		}
	}
	for _, name := range []string{namespaceName(maxPid, seq, 3), bridgeName(maxPid, seq), vethName(maxPid, seq, 3)} {
		if pid, s, ok := harnessName(name); !ok || pid != maxPid || s != seq {
			t.Errorf("harnessName(%s) = %d, %d, %v", name, pid, s, ok)
		}
	}
	for _, name := range []string{"eth0", "lo", "ft12c3x", "ft12b", "fjordt-12-n1", "docker0", "xfjordt-1-2-n3"} {
		if _, _, ok := harnessName(name); ok {
			t.Errorf("harnessName(%s) claims a name the harness does not make", name)
		}
	}
	// One class and leaf per possible sender, none the root's 1:.
	seen := map[string]bool{"1:": true}
	for from := int32(1); from <= maxClusterNodes; from++ {
		cmds := cutCommands("ftv", from, netip.MustParseAddr("10.231.5.11"))
		for _, id := range []string{cutClass(from), cutLeaf(from)} {
			if seen[id] {
				t.Errorf("sender %d: %s used twice", from, id)
			}
			seen[id] = true
		}
		if last := cmds[len(cmds)-1]; !slices.Contains(last, "10.231.5.11/32") || !slices.Contains(last, cutClass(from)) {
			t.Errorf("sender %d: filter %v", from, last)
		}
	}
}
