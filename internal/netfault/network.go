package netfault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxNodes bounds a network's size: node ids of one digit keep every link
// name within the kernel's 15 bytes at any pid (up to 4194304) and a
// process's first 999 networks.
const MaxNodes = 9

// ErrClosed: a fault method of a network that Close has removed.
var ErrClosed = errors.New("netfault: the network was closed")

const (
	// nodeIface is a node's end of its veth pair, inside its namespace.
	nodeIface = "eth0"
	// delayIface is the tun device Delay routes through, inside the
	// sending node's namespace (one per namespace, so a fixed name).
	delayIface = "fjdelay"
	// maxIfaceName is the kernel's IFNAMSIZ less the NUL.
	maxIfaceName = 15
	// lockPath is the machine-wide lock held while a network's subnet is
	// chosen and its links made, so two processes making networks at
	// once never pick the same /24. Named when testcluster alone made
	// networks; kept so that binaries from before and after the move
	// take the same lock.
	lockPath = "/run/lock/fjord-testcluster-network.lock"
	// netnsDir is where `ip netns add` mounts the namespaces it names.
	netnsDir = "/run/netns"
)

// subnetBase is the /16 networks take their /24s from: in 10/8, and a
// second byte rarely used by anything else (Docker and Kubernetes default
// to 172.17/16, 10.0/16, 10.96/12 and 10.244/16).
var subnetBase = [2]byte{10, 231}

// Names this package gives what it makes: fjordt-<pid>-<seq>-n<id> for a
// namespace, ft<pid>c<seq>b for a bridge, ft<pid>c<seq>v<id> for the root
// end of a node's veth (link names are at most 15 bytes, so short).
var (
	namespaceNameRE = regexp.MustCompile(`^fjordt-([0-9]+)-([0-9]+)-n[0-9]+$`)
	linkNameRE      = regexp.MustCompile(`^ft([0-9]+)c([0-9]+)(?:b|v[0-9]+)$`)
)

func namespaceName(pid, seq, id int) string {
	return fmt.Sprintf("fjordt-%d-%d-n%d", pid, seq, id)
}
func bridgeName(pid, seq int) string   { return fmt.Sprintf("ft%dc%db", pid, seq) }
func vethName(pid, seq, id int) string { return fmt.Sprintf("ft%dc%dv%d", pid, seq, id) }

// parseName reports whether name (a namespace's or a link's) is one this
// package makes, and the pid and sequence number in it.
func parseName(name string) (pid, seq int, ok bool) {
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

// node is where one node lives.
type node struct {
	ns   string     // its namespace
	veth string     // the root end of its veth, a port of the bridge
	addr netip.Addr // its address, on eth0 in ns
}

// Network is the namespaces, bridge and links of nodes 1 to Nodes(), and
// the faults in place between them.
//
// Threads: every method is safe from any goroutine. The fault methods,
// Dropped and Close hold mu while they change the links, so they run one
// at a time; the delay lines have goroutines of their own that never take
// mu (netns_linux.go). Everything outside mu is fixed once New returns,
// so Addr, Namespace, Command, DialFrom and InNamespace read it without
// a lock.
//
// Ownership: the caller that made a network closes it, after it has ended
// every process it started in the namespaces (see Close).
type Network struct {
	run    runFunc
	ip, tc string // paths of the commands
	pid    int
	seq    int
	subnet netip.Prefix // 10.231.X.0/24; invalid until chosen
	root   netip.Addr   // the root namespace's address on the bridge
	bridge string
	nodes  []node // nodes[i] is node i+1

	mu struct {
		sync.Mutex
		faults map[link]fault
		// shaped holds the nodes whose veth has the HTB root Cut
		// classifies into.
		shaped map[int]bool
		// delays holds the delay line of each node that sends on a
		// delayed link.
		delays map[int]delayLine
		// closed is set once Close has run: the links are gone.
		closed bool
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

// networks is this process's count of networks (the seq in their names)
// and whether it has swept its own pid's leftovers yet: one for every
// user in the process, so two never make the same names.
var networks struct {
	sync.Mutex
	seq   int
	swept bool
}

// New makes a bridge and n namespaces, nodes 1 to n, each with a veth on
// the bridge, on a free 10.231.X.0/24, after removing what crashed runs
// left (see the package doc). A New that fails removes what it made
// before it returns. The caller owns the network and must Close it.
func New(n int) (*Network, error) { return newNetwork(n, execRun) }

func newNetwork(n int, run runFunc) (*Network, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("a network of %d nodes: allowed: 1 to %d", n, MaxNodes)
	}
	ip, tc, err := lookTools()
	if err != nil {
		return nil, err
	}
	networks.Lock()
	defer networks.Unlock()
	networks.seq++
	nw := &Network{run: run, ip: ip, tc: tc, pid: os.Getpid(), seq: networks.seq}
	nw.bridge = bridgeName(nw.pid, nw.seq)
	for id := 1; id <= n; id++ {
		nw.nodes = append(nw.nodes, node{ns: namespaceName(nw.pid, nw.seq, id), veth: vethName(nw.pid, nw.seq, id)})
	}
	if v := nw.nodes[len(nw.nodes)-1].veth; len(v) > maxIfaceName {
		return nil, fmt.Errorf("link name %s is longer than the kernel's %d bytes (this process has made %d networks)", v, maxIfaceName, nw.seq)
	}
	nw.mu.faults = map[link]fault{}
	nw.mu.shaped = map[int]bool{}
	nw.mu.delays = map[int]delayLine{}

	unlock, err := lockNetworks()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Only the first network of this process may remove names with its
	// own pid: they are a crashed run's that had the same pid. Later
	// ones would be this process's live networks.
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
		nw.nodes[i].addr = nodeAddr(nw.subnet, i+1)
	}
	if err := nw.build(); err != nil {
		return nil, errors.Join(err, nw.Close())
	}
	return nw, nil
}

// Nodes is how many nodes the network has: ids 1 to Nodes().
func (nw *Network) Nodes() int { return len(nw.nodes) }

// Subnet is the network's 10.231.X.0/24: the root namespace is .1 on the
// bridge, node id is Addr(id).
func (nw *Network) Subnet() netip.Prefix { return nw.subnet }

// Addr is node id's address, on eth0 in its namespace: .11 for node 1,
// .12 for node 2, and so on. It panics if id is not one of the nodes.
func (nw *Network) Addr(id int) netip.Addr { return nw.node(id).addr }

// Namespace is the name of node id's network namespace (for `ip netns
// exec`, or /run/netns/<name>). It panics if id is not one of the nodes.
func (nw *Network) Namespace(id int) string { return nw.node(id).ns }

// node is node id, which must be one of the network's.
func (nw *Network) node(id int) node {
	if err := checkNode(len(nw.nodes), id); err != nil {
		panic(fmt.Sprintf("netfault: %v", err))
	}
	return nw.nodes[id-1]
}

// Command is the command that runs name with args inside node id's
// namespace: `ip netns exec <namespace> name args...`. ip enters the
// namespace and then execs name in the same process (no fork, unlike its
// batch mode), so the pid the caller signals (SIGKILL, SIGSTOP, SIGTERM)
// and waits for is name's own, and a Pdeathsig in cmd.SysProcAttr, kept
// across an exec of a file that is not set-uid, still reaches it. The
// caller starts it and owns the process. It panics if id is not one of
// the nodes.
func (nw *Network) Command(id int, name string, args ...string) *exec.Cmd {
	return exec.Command(nw.ip, append([]string{"netns", "exec", nw.Namespace(id), name}, args...)...)
}

// InNamespace runs f on an OS thread moved into node id's namespace, and
// returns f's error: a socket f opens (a listener, a connection, a
// netlink socket) belongs to that namespace for its whole life, whatever
// goroutine later uses it. f must not start goroutines that open sockets:
// they run on other threads, in the caller's namespace. Names are not
// resolved there either (the resolver's goroutines are elsewhere), so f
// should dial addresses.
func (nw *Network) InNamespace(id int, f func() error) error {
	if err := checkNode(len(nw.nodes), id); err != nil {
		return err
	}
	return inNamespace(nw.nodes[id-1].ns, f)
}

// DialFrom opens a TCP connection to addr (an IP address and port, not a
// name) from inside node id's namespace, as the node itself would: the
// faults apply to it as to the node's own traffic.
func (nw *Network) DialFrom(id int, addr string, timeout time.Duration) (net.Conn, error) {
	if err := checkNode(len(nw.nodes), id); err != nil {
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

// nodeAddr is node id's address in subnet: .11 for node 1, and so on,
// which reads well in logs and leaves .1 to the root namespace.
func nodeAddr(subnet netip.Prefix, id int) netip.Addr {
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
func (nw *Network) usedPrefixes() ([]netip.Prefix, error) {
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
func (nw *Network) build() error {
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
func (nw *Network) owned() (namespaces, links []string, err error) {
	allNS, allLinks, err := nw.madeNames()
	if err != nil {
		return nil, nil, err
	}
	mine := func(names []string) []string {
		var out []string
		for _, name := range names {
			if pid, seq, _ := parseName(name); pid == nw.pid && seq == nw.seq {
				out = append(out, name)
			}
		}
		return out
	}
	return mine(allNS), mine(allLinks), nil
}

// madeNames lists the namespaces and root-namespace links whose names
// this package makes, any run's.
func (nw *Network) madeNames() (namespaces, links []string, err error) {
	if namespaces, err = nw.listMade("name", "-j", "netns", "list"); err != nil {
		return nil, nil, err
	}
	if links, err = nw.listMade("ifname", "-j", "link", "show"); err != nil {
		return nil, nil, err
	}
	return namespaces, links, nil
}

// listMade runs ip with args, which print a JSON list of objects, and
// returns the names (each object's key) that this package makes.
func (nw *Network) listMade(key string, args ...string) ([]string, error) {
	out, err := nw.run(nw.ip, args...)
	if err != nil {
		return nil, err
	}
	var list []map[string]any
	if err := unmarshalIP(out, &list); err != nil {
		return nil, fmt.Errorf("ip %s: %v", strings.Join(args, " "), err)
	}
	var names []string
	for _, o := range list {
		if name, _ := o[key].(string); name != "" {
			if _, _, ok := parseName(name); ok {
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// sweep removes what crashed runs left: names whose pid no longer lives
// (their nodes died with them, if their owner set a Pdeathsig), and, on
// this process's first network, names with its own pid, which a dead
// process with the same pid made. A live process's names are left alone;
// so are a dead run's whose pid a new process has taken, until that one
// ends.
func (nw *Network) sweep(ownPid bool) error {
	namespaces, links, err := nw.madeNames()
	if err != nil {
		return err
	}
	stale := func(name string) bool {
		pid, _, _ := parseName(name)
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

// Close removes every namespace and link of the network that exists, the
// delay lines first, then checks that none is left. The qdiscs and routes
// the faults made live on those links and go with them. It may run more
// than once (a later run finds nothing to remove), and the fault methods
// return ErrClosed once it has run.
//
// The processes started in the namespaces must have ended: a namespace a
// process still runs in outlives its name, unseen by the check.
func (nw *Network) Close() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.mu.closed = true
	for _, l := range nw.mu.delays {
		l.close()
	}
	nw.mu.delays = map[int]delayLine{}
	nw.mu.faults = map[link]fault{}
	nw.mu.shaped = map[int]bool{}
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

// CheckRemoved reports an error naming whatever of the network exists:
// a namespace or link of its names, or a route or address of the root
// namespace in its subnet. It is how an owner that closes the network
// from a cleanup proves that the cleanup ran. Close checks the names
// itself but not the subnet: once the network is gone another may take
// its subnet at any moment, so call this only while no other network is
// being made.
func (nw *Network) CheckRemoved() error {
	namespaces, links, err := nw.owned()
	if err != nil {
		return err
	}
	if len(namespaces)+len(links) > 0 {
		return fmt.Errorf("network %d of pid %d left namespaces %v and links %v", nw.seq, nw.pid, namespaces, links)
	}
	if !nw.subnet.IsValid() {
		return nil // a New that failed before it chose one
	}
	used, err := nw.usedPrefixes()
	if err != nil {
		return err
	}
	for _, p := range used {
		if p.Bits() > 0 && p.Overlaps(nw.subnet) {
			return fmt.Errorf("network %d of pid %d left %s, in its subnet %s", nw.seq, nw.pid, p, nw.subnet)
		}
	}
	return nil
}
