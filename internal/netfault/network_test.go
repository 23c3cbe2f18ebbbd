package netfault

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// The faults against real processes on real namespaces are tested through
// internal/testcluster (TestNetworkFaults), with real fjord nodes; here,
// the package's own bookkeeping.

// newTestNetwork makes a network of n nodes that is closed when t ends,
// installing iproute2 first if need be: tests never skip.
func newTestNetwork(t *testing.T, n int) *Network {
	t.Helper()
	if err := Install(); err != nil {
		t.Fatal(err)
	}
	nw, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	return nw
}

// checkNoneLeft checks that nothing of network seq of this process is
// left: no namespace, no link, no route in subnet (if valid).
func checkNoneLeft(t *testing.T, seq int, subnet netip.Prefix) {
	t.Helper()
	ip, _, err := lookTools()
	if err != nil {
		t.Fatal(err)
	}
	nw := &Network{run: execRun, ip: ip, pid: os.Getpid(), seq: seq, subnet: subnet}
	if err := nw.CheckRemoved(); err != nil {
		t.Fatal(err)
	}
}

// lastNetworkSeq is the sequence number of this process's latest network.
func lastNetworkSeq() int {
	networks.Lock()
	defer networks.Unlock()
	return networks.seq
}

// Whatever a network made is gone once it is closed, with faults in
// place and after a process ran in it; and at once when its setup fails
// half-way.
func TestNetworkRemoved(t *testing.T) {
	var seq int
	var subnet netip.Prefix
	t.Run("at close", func(t *testing.T) {
		nw := newTestNetwork(t, 3)
		seq, subnet = nw.seq, nw.subnet
		namespaces, links, err := nw.owned()
		if err != nil {
			t.Fatal(err)
		}
		if len(namespaces) != 3 || len(links) != 4 {
			t.Fatalf("a network of 3 nodes has namespaces %v and links %v, want 3 and 4 (a bridge, 3 veths)", namespaces, links)
		}
		if nw.Nodes() != 3 || !nw.Subnet().Contains(nw.Addr(3)) || nw.Addr(1).As4()[3] != 11 {
			t.Fatalf("%d nodes in %s, node 1 at %s, node 3 at %s; want 3 nodes at .11 to .13 of the subnet",
				nw.Nodes(), nw.Subnet(), nw.Addr(1), nw.Addr(3))
		}
		// A process Command starts runs in its node's namespace, with
		// the pid the caller holds.
		sleeper := nw.Command(2, "sleep", "600")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sleeper.Process.Kill() // our own child, by its pid; before Close, registered earlier
			sleeper.Wait()
		})
		sleepPath, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatal(err)
		}
		// Waited for: ip enters the namespace, then execs sleep.
		testutil.Eventually(t, 10*time.Second, func() error {
			exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", sleeper.Process.Pid))
			if err != nil {
				return err
			}
			if sleep, err := os.Stat(sleepPath); err != nil || !os.SameFile(exe, sleep) {
				return fmt.Errorf("pid %d started by Command(2, \"sleep\", ...) does not run %s (%v)", sleeper.Process.Pid, sleepPath, err)
			}
			got, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", sleeper.Process.Pid))
			if err != nil {
				return err
			}
			want, err := os.Stat(netnsDir + "/" + nw.Namespace(2))
			if err != nil {
				return err
			}
			if !os.SameFile(got, want) {
				return fmt.Errorf("pid %d started by Command(2, ...) is not in namespace %s", sleeper.Process.Pid, nw.Namespace(2))
			}
			return nil
		})
		if err := nw.Cut(1, 2); err != nil {
			t.Fatal(err)
		}
		if err := nw.Delay(2, 3, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	checkNoneLeft(t, seq, subnet)

	t.Run("setup fails half-way", func(t *testing.T) {
		if err := Install(); err != nil {
			t.Fatal(err)
		}
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
		nw, err := newNetwork(3, run)
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
	if err := Install(); err != nil {
		t.Fatal(err)
	}
	ip, _, err := lookTools()
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
		nw := &Network{run: execRun, ip: ip, pid: pid, seq: 1}
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

	// A network of one node is made, and sweeps.
	nw := newTestNetwork(t, 1)
	if got := names(dead); len(got) > 0 {
		t.Fatalf("a dead pid's leftovers %v are still there", got)
	}
	if got := names(live); !slices.Equal(got, liveNames) {
		t.Fatalf("a live pid's names are %v, want %v left alone", got, liveNames)
	}
	if nw.Nodes() != 1 {
		t.Fatalf("%d nodes", nw.Nodes())
	}

	// A process's first network sweeps its own pid's names, live as
	// the pid is: here the sleeper plays the process.
	playing := &Network{run: execRun, ip: ip, pid: live}
	if err := playing.sweep(false); err != nil {
		t.Fatal(err)
	}
	if got := names(live); !slices.Equal(got, liveNames) {
		t.Fatalf("a later network removed its own pid's names: left %v, want %v", got, liveNames)
	}
	if err := playing.sweep(true); err != nil {
		t.Fatal(err)
	}
	if got := names(live); len(got) > 0 {
		t.Fatalf("the first network left its own pid's names %v", got)
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
	for _, name := range []string{bridgeName(maxPid, seq), vethName(maxPid, seq, MaxNodes)} {
		if len(name) > maxIfaceName {
			t.Errorf("link name %s is %d bytes, over %d", name, len(name), maxIfaceName)
		}
	}
	for _, name := range []string{namespaceName(maxPid, seq, 3), bridgeName(maxPid, seq), vethName(maxPid, seq, 3)} {
		if pid, s, ok := parseName(name); !ok || pid != maxPid || s != seq {
			t.Errorf("parseName(%s) = %d, %d, %v", name, pid, s, ok)
		}
	}
	for _, name := range []string{"eth0", "lo", "ft12c3x", "ft12b", "fjordt-12-n1", "docker0", "xfjordt-1-2-n3"} {
		if _, _, ok := parseName(name); ok {
			t.Errorf("parseName(%s) claims a name this package does not make", name)
		}
	}
	// One class and leaf per possible sender, none the root's 1:.
	seen := map[string]bool{"1:": true}
	for from := 1; from <= MaxNodes; from++ {
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
