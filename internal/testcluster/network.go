package testcluster

// Network mode: each node of a cluster in a network namespace of its own,
// so the test can cut, isolate, split and delay the links between nodes
// (Jepsen's partitions) while the test process still reaches every node.
//
//	root namespace (the test process, its clients)
//	  bridge ft<pid>c<seq>b  10.231.X.1/24
//	    |-- veth ft<pid>c<seq>v1 ==== eth0 10.231.X.11  namespace fjordt-<pid>-<seq>-n1
//	    |-- veth ft<pid>c<seq>v2 ==== eth0 10.231.X.12  namespace fjordt-<pid>-<seq>-n2
//	    `-- ...
//
// Every node listens on fjord's default ports (9092 Kafka, 9093 Raft, 8082
// HTTP) on its own address: each namespace has a stack of its own, so
// there is nothing to race for, and the voter list and advertised
// addresses name the 10.231.X addresses.
//
// How a fault is made, and why so. This is a test harness for CI machines
// whose kernels we do not choose; the one it was written on (a Firecracker
// guest) has no netem, no prio, no gact and no nft binary, only HTB, the
// FIFOs and the u32 classifier. So:
//
//   - Cut(from, to) classifies, on the egress of to's veth in the root
//     namespace (the bridge port the packets leave by), every IPv4 packet
//     whose source is from's address into an HTB class whose leaf is a
//     pfifo of limit 0, which drops every packet it is given. The drop is
//     in the "switch", not in the sender's stack: from's kernel sent the
//     packet and hears nothing, so its connects time out and its
//     established connections retransmit, as across a real partition.
//     Rejected: a blackhole, prohibit or unreachable route in from's
//     namespace (the sender gets EINVAL, EACCES or EHOSTUNREACH at once,
//     which no real partition gives); netem loss 100% on from's own egress
//     (not in every kernel, and a local qdisc drop can be reported to the
//     sending socket); iptables or nftables (another package, and the
//     kernel's bridge netfilter settings would decide whether they see
//     bridged traffic). ARP is not IP and is not classified, so neighbours
//     stay resolved and the only effect is the silence. Traffic from the
//     root namespace (source 10.231.X.1) matches no filter.
//   - Delay(from, to, d) routes to's address, inside from's namespace,
//     through a tun device that the harness reads (netns_linux.go): each
//     packet is held d and then sent on by a raw socket bound to eth0,
//     which the /32 route through the tun does not apply to. This is a
//     user-space netem, for kernels without one; netem would be more
//     exact, but a test asks only "at least d", which holding the packet
//     guarantees (a packet is never sent before it was read plus d). A
//     packet delayed into a cut link is dropped, as it should be.
//   - Heal deletes the HTB roots and closes the tun devices, which takes
//     their routes with them.
//
// Names carry the test process's pid and a sequence number, so two test
// binaries at once never share a name, and a later run can tell a
// crashed run's leftovers (their pid is dead) and remove them. The /24 is
// chosen under a machine-wide lock (an flock) among those no route or
// address of the root namespace overlaps, starting from one derived from
// the pid.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Ports every node listens on in network mode: fjord's defaults, since
// no other process shares a node's namespace.
const (
	networkKafkaPort      = 9092
	networkControllerPort = 9093
	networkHTTPPort       = 8082
)

const (
	// nodeIface is a node's end of its veth pair, inside its namespace.
	nodeIface = "eth0"
	// delayIface is the tun device Delay routes through, inside the
	// sending node's namespace (one per namespace, so a fixed name).
	delayIface = "fjdelay"
	// maxIfaceName is the kernel's IFNAMSIZ less the NUL.
	maxIfaceName = 15
	// networkLockPath is the machine-wide lock held while a network's
	// subnet is chosen and its links made, so two test binaries starting
	// clusters at once never pick the same /24.
	networkLockPath = "/run/lock/fjord-testcluster-network.lock"
	// iproute2Package provides ip and tc on Debian.
	iproute2Package = "iproute2"
	// netnsDir is where `ip netns add` mounts the namespaces it names.
	netnsDir = "/run/netns"
)

// subnetBase is the /16 network mode takes its /24s from: in 10/8, and a
// second byte rarely used by anything else (Docker and Kubernetes default
// to 172.17/16, 10.0/16, 10.96/12 and 10.244/16).
var subnetBase = [2]byte{10, 231}

// Names the harness gives what it makes: fjordt-<pid>-<seq>-n<id> for a
// namespace, ft<pid>c<seq>b for a bridge, ft<pid>c<seq>v<id> for the root
// end of a node's veth (link names are at most 15 bytes, so short).
var (
	namespaceNameRE = regexp.MustCompile(`^fjordt-([0-9]+)-([0-9]+)-n[0-9]+$`)
	linkNameRE      = regexp.MustCompile(`^ft([0-9]+)c([0-9]+)(?:b|v[0-9]+)$`)
)

func namespaceName(pid, seq int, id int32) string {
	return fmt.Sprintf("fjordt-%d-%d-n%d", pid, seq, id)
}
func bridgeName(pid, seq int) string { return fmt.Sprintf("ft%dc%db", pid, seq) }
func vethName(pid, seq int, id int32) string {
	return fmt.Sprintf("ft%dc%dv%d", pid, seq, id)
}

// harnessName reports whether name (a namespace's or a link's) is one the
// harness makes, and the pid and sequence number in it.
func harnessName(name string) (pid, seq int, ok bool) {
	m := namespaceNameRE.FindStringSubmatch(name)
	if m == nil {
		m = linkNameRE.FindStringSubmatch(name)
	}
	if m == nil {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(m[1])
	seq, err2 := strconv.Atoi(m[2])
	return pid, seq, err1 == nil && err2 == nil
}

// netLink is one direction between two nodes: the packets from sends to
// to.
type netLink struct{ from, to int32 }

// netFault is what happens to a netLink's packets. A cut link drops
// them, delayed or not.
type netFault struct {
	cut   bool
	delay time.Duration
}

// netNode is where one node lives.
type netNode struct {
	ns   string     // its namespace
	veth string     // the root end of its veth, a port of the bridge
	addr netip.Addr // its address, on eth0 in ns
}

// network is a cluster's namespaces, links and faults.
//
// Threads: the fault methods are called from the test's goroutine (as
// Cluster's are) and hold mu, which a shared cluster's cleanup also
// takes, from Main's goroutine; the delay lines have goroutines of their
// own that never take mu (netns_linux.go). Everything outside mu is
// fixed once newNetwork returns, so DialFrom reads it from any
// goroutine.
type network struct {
	run    runFunc
	ip, tc string // paths of the commands
	pid    int
	seq    int
	subnet netip.Prefix // 10.231.X.0/24; invalid until chosen
	root   netip.Addr   // the root namespace's address on the bridge
	bridge string
	nodes  []netNode // nodes[i] is node i+1

	mu struct {
		sync.Mutex
		faults map[netLink]netFault
		// shaped holds the nodes whose veth has the HTB root Cut
		// classifies into.
		shaped map[int32]bool
		// delays holds the delay line of each node that sends on a
		// delayed link.
		delays map[int32]delayLine
		// removed is set once teardown has run: the links are gone.
		removed bool
	}
}

// delayLine holds the packets a node sends on its delayed links
// (netns_linux.go).
type delayLine interface {
	// setDelay makes the line hold packets to dst for d (from now on).
	setDelay(dst netip.Addr, d time.Duration)
	// close drops what the line holds, removes its tun device (and so
	// its routes), and waits for its goroutines to end.
	close()
}

// runFunc runs a command and returns its output; an error names the
// command and carries what it printed. A test replaces it to make the
// setup fail half-way.
type runFunc func(name string, args ...string) ([]byte, error)

func execRun(name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// networks is this process's count of networks (the seq in their names)
// and whether it has swept its own pid's leftovers yet.
var networks struct {
	sync.Mutex
	seq   int
	swept bool
}

// tools is the one look-up (and, if need be, install) of ip and tc per
// process.
var tools struct {
	once   sync.Once
	ip, tc string
	err    error
}

// networkTools returns the paths of ip and tc, installing Debian's
// iproute2 with apt-get when either is missing: tests install what they
// need or fail saying what is missing, never skip.
func networkTools() (ip, tc string, err error) {
	tools.once.Do(func() {
		tools.ip, tools.tc, tools.err = findNetworkTools()
	})
	return tools.ip, tools.tc, tools.err
}

func findNetworkTools() (ip, tc string, err error) {
	if runtime.GOOS != "linux" {
		return "", "", fmt.Errorf("network mode needs Linux network namespaces; this is %s", runtime.GOOS)
	}
	if uid := os.Geteuid(); uid != 0 {
		return "", "", fmt.Errorf("network mode needs root (it makes namespaces, links and qdiscs); running as uid %d", uid)
	}
	look := func() error {
		var errIP, errTC error
		ip, errIP = exec.LookPath("ip")
		tc, errTC = exec.LookPath("tc")
		return errors.Join(errIP, errTC)
	}
	if look() == nil {
		return ip, tc, nil
	}
	if err := installPackage(iproute2Package); err != nil {
		return "", "", fmt.Errorf("network mode needs the ip and tc commands (Debian package %s): %w", iproute2Package, err)
	}
	if err := look(); err != nil {
		return "", "", fmt.Errorf("network mode needs the ip and tc commands; %s is installed but: %v", iproute2Package, err)
	}
	return ip, tc, nil
}

// installPackage installs a Debian package, updating the package lists
// first only if the install fails without them (a fresh image has none).
func installPackage(pkg string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("cannot install %s: no apt-get: %v", pkg, err)
	}
	install := func(args ...string) error {
		cmd := exec.Command(apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, lastLines(out, 20))
		}
		return nil
	}
	if install("install", "-y", "--no-install-recommends", pkg) == nil {
		return nil
	}
	if err := install("update"); err != nil {
		return err
	}
	return install("install", "-y", "--no-install-recommends", pkg)
}

// newNetwork makes the namespaces, bridge and links of a cluster of n
// nodes. Their removal is registered with t first, so that it runs after
// the nodes' own cleanups (which kill the processes) and even if the
// setup stops half-way; a setup that fails also removes what it made
// before returning.
func newNetwork(t owner, n int, run runFunc) (*network, error) {
	ip, tc, err := networkTools()
	if err != nil {
		return nil, err
	}
	networks.Lock()
	defer networks.Unlock()
	networks.seq++
	nw := &network{run: run, ip: ip, tc: tc, pid: os.Getpid(), seq: networks.seq}
	nw.bridge = bridgeName(nw.pid, nw.seq)
	for id := int32(1); id <= int32(n); id++ {
		nw.nodes = append(nw.nodes, netNode{ns: namespaceName(nw.pid, nw.seq, id), veth: vethName(nw.pid, nw.seq, id)})
	}
	if v := nw.nodes[len(nw.nodes)-1].veth; len(v) > maxIfaceName {
		return nil, fmt.Errorf("link name %s is longer than the kernel's %d bytes (this process has made %d networks)", v, maxIfaceName, nw.seq)
	}
	nw.mu.faults = map[netLink]netFault{}
	nw.mu.shaped = map[int32]bool{}
	nw.mu.delays = map[int32]delayLine{}
	t.Cleanup(func() {
		if err := nw.teardown(); err != nil {
			reportCleanupError(t, err)
		}
	})

	unlock, err := lockNetworks()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Only the first network of this process may remove names with its
	// own pid: they are a crashed run's that had the same pid. Later
	// ones would be this process's live clusters.
	first := !networks.swept
	networks.swept = true
	if err := nw.sweep(first); err != nil {
		return nil, err
	}
	used, err := nw.usedPrefixes()
	if err != nil {
		return nil, err
	}
	if nw.subnet, err = pickSubnet(byte(nw.pid), used); err != nil {
		return nil, err
	}
	nw.root = nw.subnet.Addr().Next()
	for i := range nw.nodes {
		nw.nodes[i].addr = nodeAddr(nw.subnet, int32(i+1))
	}
	if err := nw.build(); err != nil {
		return nil, errors.Join(err, nw.teardown())
	}
	return nw, nil
}

// nodeAddr is node id's address in subnet: .11 for node 1, and so on,
// which reads well in logs and leaves .1 to the root namespace.
func nodeAddr(subnet netip.Prefix, id int32) netip.Addr {
	a := subnet.Addr().As4()
	a[3] = byte(10 + id)
	return netip.AddrFrom4(a)
}

// pickSubnet returns the first 10.231.X.0/24, X from start on (wrapping),
// that no prefix of used overlaps. A default route (a /0) is no claim on
// any subnet and is left out.
func pickSubnet(start byte, used []netip.Prefix) (netip.Prefix, error) {
	for i := range 256 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{subnetBase[0], subnetBase[1], start + byte(i), 0}), 24)
		free := true
		for _, u := range used {
			if u.Bits() > 0 && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 in %d.%d.0.0/16: every one overlaps a route or address of the root namespace", subnetBase[0], subnetBase[1])
}

// usedPrefixes lists every IPv4 route (all tables) and address of the
// root namespace, as prefixes.
func (nw *network) usedPrefixes() ([]netip.Prefix, error) {
	out, err := nw.run(nw.ip, "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := unmarshalIP(out, &routes); err != nil {
		return nil, fmt.Errorf("ip -j route: %v", err)
	}
	var used []netip.Prefix
	for _, r := range routes {
		if p, ok := parsePrefix(r.Dst); ok {
			used = append(used, p)
		}
	}
	out, err = nw.run(nw.ip, "-j", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := unmarshalIP(out, &links); err != nil {
		return nil, fmt.Errorf("ip -j addr: %v", err)
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if addr, err := netip.ParseAddr(a.Local); err == nil {
				if p, err := addr.Prefix(a.PrefixLen); err == nil {
					used = append(used, p)
				}
			}
		}
	}
	return used, nil
}

// parsePrefix reads a route's dst as ip -j prints it: a prefix, a bare
// address (a /32), or a word such as "default" (not a claim).
func parsePrefix(dst string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(dst); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(dst); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// unmarshalIP decodes ip's JSON output; some versions print nothing at
// all for an empty list.
func unmarshalIP(out []byte, v any) error {
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	return json.Unmarshal(out, v)
}

// build makes the bridge and, for each node, its namespace and veth.
func (nw *network) build() error {
	cidr := func(a netip.Addr) string { return netip.PrefixFrom(a, nw.subnet.Bits()).String() }
	steps := [][]string{
		{"link", "add", "name", nw.bridge, "type", "bridge"},
		{"addr", "add", cidr(nw.root), "dev", nw.bridge},
		{"link", "set", nw.bridge, "up"},
	}
	for _, n := range nw.nodes {
		steps = append(steps,
			[]string{"netns", "add", n.ns},
			// The peer is made inside the namespace, so its name
			// (eth0) never meets the root namespace's.
			[]string{"link", "add", n.veth, "type", "veth", "peer", "name", nodeIface, "netns", n.ns},
			[]string{"link", "set", n.veth, "master", nw.bridge, "up"},
			[]string{"-n", n.ns, "addr", "add", cidr(n.addr), "dev", nodeIface},
			[]string{"-n", n.ns, "link", "set", nodeIface, "up"},
			// A node dials its own address too (its own voter entry);
			// local traffic goes through lo.
			[]string{"-n", n.ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if _, err := nw.run(nw.ip, s...); err != nil {
			return fmt.Errorf("making the network %s: %w", nw.subnet, err)
		}
	}
	return nil
}

// owned lists this network's namespaces and links that exist now.
func (nw *network) owned() (namespaces, links []string, err error) {
	allNS, allLinks, err := nw.harnessNames()
	if err != nil {
		return nil, nil, err
	}
	mine := func(names []string) []string {
		var out []string
		for _, name := range names {
			if pid, seq, _ := harnessName(name); pid == nw.pid && seq == nw.seq {
				out = append(out, name)
			}
		}
		return out
	}
	return mine(allNS), mine(allLinks), nil
}

// harnessNames lists the namespaces and root-namespace links whose names
// the harness makes, any run's.
func (nw *network) harnessNames() (namespaces, links []string, err error) {
	out, err := nw.run(nw.ip, "-j", "netns", "list")
	if err != nil {
		return nil, nil, err
	}
	var nsList []struct {
		Name string `json:"name"`
	}
	if err := unmarshalIP(out, &nsList); err != nil {
		return nil, nil, fmt.Errorf("ip -j netns list: %v", err)
	}
	for _, ns := range nsList {
		if _, _, ok := harnessName(ns.Name); ok {
			namespaces = append(namespaces, ns.Name)
		}
	}
	out, err = nw.run(nw.ip, "-j", "link", "show")
	if err != nil {
		return nil, nil, err
	}
	var linkList []struct {
		Name string `json:"ifname"`
	}
	if err := unmarshalIP(out, &linkList); err != nil {
		return nil, nil, fmt.Errorf("ip -j link show: %v", err)
	}
	for _, l := range linkList {
		if _, _, ok := harnessName(l.Name); ok {
			links = append(links, l.Name)
		}
	}
	return namespaces, links, nil
}

// sweep removes what crashed runs left: names whose pid no longer lives
// (their nodes died with them: Pdeathsig), and, on this process's first
// network, names with its own pid, which a dead process with the same
// pid made. A live process's names are left alone; so are a dead run's
// whose pid a new process has taken, until that one ends.
func (nw *network) sweep(ownPid bool) error {
	namespaces, links, err := nw.harnessNames()
	if err != nil {
		return err
	}
	stale := func(name string) bool {
		pid, _, _ := harnessName(name)
		if pid == nw.pid {
			return ownPid
		}
		return !processAlive(pid)
	}
	var errs []error
	// Links first: deleting a veth's root end deletes its peer at once,
	// where a deleted namespace's devices go away asynchronously.
	for _, l := range links {
		if stale(l) {
			if _, err := nw.run(nw.ip, "link", "del", l); err != nil {
				errs = append(errs, fmt.Errorf("removing a crashed run's link: %w", err))
			}
		}
	}
	for _, ns := range namespaces {
		if stale(ns) {
			if _, err := nw.run(nw.ip, "netns", "del", ns); err != nil {
				errs = append(errs, fmt.Errorf("removing a crashed run's namespace: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// teardown removes every namespace and link of the network that exists
// (so it may run more than once, and after a setup that stopped
// half-way), the delay lines first, then checks that none is left. The
// qdiscs and routes the faults made live on those links and go with
// them. The nodes must be dead: a namespace a process still runs in
// outlives its name.
func (nw *network) teardown() error {
	nw.mu.Lock()
	nw.mu.removed = true
	lines := nw.mu.delays
	nw.mu.delays = map[int32]delayLine{}
	nw.mu.faults = map[netLink]netFault{}
	nw.mu.shaped = map[int32]bool{}
	nw.mu.Unlock()
	for _, l := range lines {
		l.close()
	}
	namespaces, links, err := nw.owned()
	if err != nil {
		return fmt.Errorf("removing the network: %w", err)
	}
	var errs []error
	// The veths before the bridge they are ports of, and both before
	// the namespaces (see sweep).
	for _, l := range links {
		if l != nw.bridge {
			if _, err := nw.run(nw.ip, "link", "del", l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, l := range links {
		if l == nw.bridge {
			if _, err := nw.run(nw.ip, "link", "del", l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range namespaces {
		if _, err := nw.run(nw.ip, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	namespaces, links, err = nw.owned()
	switch {
	case err != nil:
		errs = append(errs, err)
	case len(namespaces)+len(links) > 0:
		errs = append(errs, fmt.Errorf("left behind: namespaces %v, links %v", namespaces, links))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the network %s: %w", nw.subnet, err)
	}
	return nil
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

// errNetworkRemoved: a fault method after the cleanup removed the links.
var errNetworkRemoved = errors.New("the cluster's network was already removed")

// Class, handle and filter numbers Cut uses on a node's veth: the HTB
// root 1:, a class 1:<from> per cut source (tc reads the minor in hex)
// and its leaf <0x10+from>:.
func cutClass(from int32) string { return fmt.Sprintf("1:%x", from) }
func cutLeaf(from int32) string  { return fmt.Sprintf("%x:", 0x10+from) }

// shapeCommand is the tc command that gives dev the HTB root Cut
// classifies into. "default 0" sends unclassified packets (all but the
// cut ones) to HTB's direct queue, untouched by any class.
func shapeCommand(dev string) []string {
	return []string{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "0"}
}

// cutCommands are the tc commands that drop, on dev (the root end of the
// receiver's veth), every IPv4 packet from src (the sender's address):
// a class whose leaf is a pfifo of limit 0, which drops whatever it is
// given, and a u32 filter sending src's packets to it. The class comes
// first, so the filter never names a class not yet made; its rate is
// never reached, as the leaf keeps nothing.
func cutCommands(dev string, from int32, src netip.Addr) [][]string {
	return [][]string{
		{"class", "add", "dev", dev, "parent", "1:", "classid", cutClass(from), "htb", "rate", "1mbit"},
		{"qdisc", "add", "dev", dev, "parent", cutClass(from), "handle", cutLeaf(from), "pfifo", "limit", "0"},
		{"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
			"match", "ip", "src", netip.PrefixFrom(src, 32).String(), "flowid", cutClass(from)},
	}
}

// cut drops the packets of every link given. A link already cut stays
// so.
func (nw *network) cut(links []netLink) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.removed {
		return errNetworkRemoved
	}
	for _, l := range links {
		f := nw.mu.faults[l]
		if f.cut {
			continue
		}
		dev := nw.nodes[l.to-1].veth
		if !nw.mu.shaped[l.to] {
			if _, err := nw.run(nw.tc, shapeCommand(dev)...); err != nil {
				return err
			}
			nw.mu.shaped[l.to] = true
		}
		for _, cmd := range cutCommands(dev, l.from, nw.nodes[l.from-1].addr) {
			if _, err := nw.run(nw.tc, cmd...); err != nil {
				return err
			}
		}
		f.cut = true
		nw.mu.faults[l] = f
	}
	return nil
}

// delay holds the packets of link l for d, from now on.
func (nw *network) delay(l netLink, d time.Duration) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.removed {
		return errNetworkRemoved
	}
	from, to := nw.nodes[l.from-1], nw.nodes[l.to-1]
	line := nw.mu.delays[l.from]
	if line == nil {
		var err error
		if line, err = openDelayLine(from.ns); err != nil {
			return fmt.Errorf("node %d's delay line: %w", l.from, err)
		}
		if _, err := nw.run(nw.ip, "-n", from.ns, "link", "set", delayIface, "up"); err != nil {
			line.close()
			return err
		}
		nw.mu.delays[l.from] = line
	}
	// The line knows the destination before the route sends it anything.
	line.setDelay(to.addr, d)
	if _, err := nw.run(nw.ip, "-n", from.ns, "route", "replace", netip.PrefixFrom(to.addr, 32).String(), "dev", delayIface); err != nil {
		return err
	}
	f := nw.mu.faults[l]
	f.delay = d
	nw.mu.faults[l] = f
	return nil
}

// heal undoes every fault: the HTB roots go (the veths are back to their
// default qdisc) and the delay lines close (their tun devices, and the
// routes through them, go).
func (nw *network) heal() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.removed {
		return errNetworkRemoved
	}
	var errs []error
	for id := range nw.mu.shaped {
		if _, err := nw.run(nw.tc, "qdisc", "del", "dev", nw.nodes[id-1].veth, "root"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(nw.mu.shaped, id)
	}
	for id, line := range nw.mu.delays {
		line.close()
		delete(nw.mu.delays, id)
	}
	if len(errs) == 0 {
		nw.mu.faults = map[netLink]netFault{}
	}
	return errors.Join(errs...)
}

// checkNode checks that id is one of a cluster's n nodes.
func checkNode(n int, id int32) error {
	if id < 1 || int(id) > n {
		return fmt.Errorf("node %d is not one of nodes 1 to %d", id, n)
	}
	return nil
}

// pairLinks is the link from -> to, and to -> from if both, of a
// cluster of n nodes.
func pairLinks(n int, from, to int32, both bool) ([]netLink, error) {
	if err := errors.Join(checkNode(n, from), checkNode(n, to)); err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("node %d cannot be cut from or delayed to itself: its traffic to itself never leaves its namespace", from)
	}
	links := []netLink{{from, to}}
	if both {
		links = append(links, netLink{to, from})
	}
	return links, nil
}

// isolateLinks are the links between id and every other node, both ways.
func isolateLinks(n int, id int32) ([]netLink, error) {
	if err := checkNode(n, id); err != nil {
		return nil, err
	}
	var links []netLink
	for other := int32(1); other <= int32(n); other++ {
		if other != id {
			links = append(links, netLink{id, other}, netLink{other, id})
		}
	}
	return links, nil
}

// splitLinks are the links, both ways, between every two nodes in
// different groups. The groups must hold every node of the n, each once:
// a node in no group would be connected to both sides, which is a
// different fault (a bridge node) that a test should ask for with Cut.
func splitLinks(n int, groups [][]int32) ([]netLink, error) {
	if len(groups) < 2 {
		return nil, fmt.Errorf("split into %d groups: want at least two", len(groups))
	}
	group := map[int32]int{}
	for g, members := range groups {
		if len(members) == 0 {
			return nil, fmt.Errorf("group %d of the split is empty", g+1)
		}
		for _, id := range members {
			if err := checkNode(n, id); err != nil {
				return nil, fmt.Errorf("group %d of the split: %w", g+1, err)
			}
			if prev, ok := group[id]; ok {
				return nil, fmt.Errorf("node %d is in groups %d and %d of the split", id, prev+1, g+1)
			}
			group[id] = g
		}
	}
	var missing []int32
	for id := int32(1); id <= int32(n); id++ {
		if _, ok := group[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("nodes %v are in no group of the split: every node must be in one", missing)
	}
	var links []netLink
	for a := int32(1); a <= int32(n); a++ {
		for b := int32(1); b <= int32(n); b++ {
			if group[a] != group[b] {
				links = append(links, netLink{a, b})
			}
		}
	}
	return links, nil
}

// network returns the cluster's network, or why a fault cannot be made.
func (c *Cluster) network() (*network, error) {
	if c.net == nil {
		return nil, ErrNoNetwork
	}
	return c.net, nil
}

// Cut drops every packet node from sends to node to, one way, silently:
// from's connects to to time out, its established connections
// retransmit into the void, as across a real partition; to's packets
// still reach from (but TCP needs both ways, so to's connections to from
// stall too: an asymmetric partition). Clients on the test process are
// not cut. The fault lasts until Heal, across restarts of either node.
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
	links, err := pairLinks(len(c.nodes), from, to, both)
	if err != nil {
		return err
	}
	return nw.cut(links)
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
	links, err := isolateLinks(len(c.nodes), id)
	if err != nil {
		return err
	}
	return nw.cut(links)
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
	links, err := splitLinks(len(c.nodes), groups)
	if err != nil {
		return err
	}
	return nw.cut(links)
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
	links, err := pairLinks(len(c.nodes), from, to, false)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("delay %v: want a positive delay (Heal removes delays)", d)
	}
	return nw.delay(links[0], d)
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
	return nw.heal()
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
	if err := checkNode(len(c.nodes), id); err != nil {
		return nil, err
	}
	// A name would be resolved by a goroutine of the resolver, on a
	// thread outside the namespace; an address is dialled right here.
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("DialFrom %q: %v", addr, err)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return nil, fmt.Errorf("DialFrom %q: want an IP address, not a name", addr)
	}
	var conn net.Conn
	err = inNamespace(nw.nodes[id-1].ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return conn, err
}

// Netns is the network namespace the node runs in (for `ip netns exec`),
// or "" for a node on the loopback interface.
func (n *Node) Netns() string { return n.netns }
