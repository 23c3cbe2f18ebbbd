package netfault

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// link is one direction between two nodes: the packets from sends to to.
type link struct{ from, to int }

// fault is what happens to a link's packets. A cut link drops them,
// delayed or not.
type fault struct {
	cut   bool
	delay time.Duration
}

// Cut drops every packet node from sends to node to, one way, silently:
// from's connects to to time out and its established connections
// retransmit into the void, as across a real partition; to's packets
// still reach from (but TCP needs both ways, so to's connections to from
// stall too: an asymmetric partition). The root namespace's traffic is
// not cut. The fault lasts until Heal, across restarts of either node's
// process; a link already cut stays so.
func (nw *Network) Cut(from, to int) error {
	links, err := pairLinks(len(nw.nodes), from, to, false)
	if err != nil {
		return err
	}
	return nw.cut(links)
}

// CutBoth cuts a from b and b from a: the two cannot talk, while each
// still talks to the rest.
func (nw *Network) CutBoth(a, b int) error {
	links, err := pairLinks(len(nw.nodes), a, b, true)
	if err != nil {
		return err
	}
	return nw.cut(links)
}

// Isolate cuts node id from every other node, both ways, while the root
// namespace (and the clients there) still reaches it: a node that
// answers clients but hears no peer.
func (nw *Network) Isolate(id int) error {
	links, err := isolateLinks(len(nw.nodes), id)
	if err != nil {
		return err
	}
	return nw.cut(links)
}

// Split partitions the nodes into groups, every node in exactly one:
// nodes of one group talk to each other, no packet crosses between
// groups. Split([]int{1}, []int{2, 3}) leaves 2 and 3 a majority.
func (nw *Network) Split(groups ...[]int) error {
	links, err := splitLinks(len(nw.nodes), groups)
	if err != nil {
		return err
	}
	return nw.cut(links)
}

// Delay holds every packet node from sends to node to for at least d,
// one way (so any round trip between the two takes d longer): a slow or
// distant link. A second Delay of the same link changes d for the
// packets sent after it. Until Heal.
func (nw *Network) Delay(from, to int, d time.Duration) error {
	links, err := pairLinks(len(nw.nodes), from, to, false)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("delay %v: want a positive delay (Heal removes delays)", d)
	}
	return nw.delay(links[0], d)
}

// Heal undoes every Cut, CutBoth, Isolate, Split and Delay: the HTB roots
// go (the veths are back to their default qdisc) and the delay lines
// close (their tun devices, and the routes through them, go), so all
// nodes talk again at once. Packets dropped stay dropped; TCP
// retransmits them.
func (nw *Network) Heal() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.closed {
		return ErrClosed
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
		nw.mu.faults = map[link]fault{}
	}
	return errors.Join(errs...)
}

// Dropped is how many packets from node from to node to the cut of that
// link has dropped since it was made (read from its qdisc with tc): a
// way to see that a cut took hold, since a link nobody used drops
// nothing. An error if the link is not cut.
func (nw *Network) Dropped(from, to int) (int, error) {
	if _, err := pairLinks(len(nw.nodes), from, to, false); err != nil {
		return 0, err
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.closed {
		return 0, ErrClosed
	}
	if !nw.mu.faults[link{from, to}].cut {
		return 0, fmt.Errorf("the link %d -> %d is not cut", from, to)
	}
	dev := nw.nodes[to-1].veth
	out, err := nw.run(nw.tc, "-j", "-s", "qdisc", "show", "dev", dev)
	if err != nil {
		return 0, err
	}
	var qdiscs []struct {
		Kind   string `json:"kind"`
		Handle string `json:"handle"`
		Drops  int    `json:"drops"`
	}
	if err := json.Unmarshal(out, &qdiscs); err != nil {
		return 0, fmt.Errorf("tc -j -s qdisc: %v: %s", err, out)
	}
	for _, q := range qdiscs {
		if q.Kind == "pfifo" && q.Handle == cutLeaf(from) {
			return q.Drops, nil
		}
	}
	return 0, fmt.Errorf("no drop qdisc %s for %d -> %d on %s: %s", cutLeaf(from), from, to, dev, out)
}

// Class, handle and filter numbers Cut uses on a node's veth: the HTB
// root 1:, a class 1:<from> per cut source (tc reads the minor in hex)
// and its leaf <0x10+from>:.
func cutClass(from int) string { return fmt.Sprintf("1:%x", from) }
func cutLeaf(from int) string  { return fmt.Sprintf("%x:", 0x10+from) }

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
func cutCommands(dev string, from int, src netip.Addr) [][]string {
	return [][]string{
		{"class", "add", "dev", dev, "parent", "1:", "classid", cutClass(from), "htb", "rate", "1mbit"},
		{"qdisc", "add", "dev", dev, "parent", cutClass(from), "handle", cutLeaf(from), "pfifo", "limit", "0"},
		{"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
			"match", "ip", "src", netip.PrefixFrom(src, 32).String(), "flowid", cutClass(from)},
	}
}

// cut drops the packets of every link given. A link already cut stays
// so.
func (nw *Network) cut(links []link) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.closed {
		return ErrClosed
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
func (nw *Network) delay(l link, d time.Duration) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.mu.closed {
		return ErrClosed
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

// checkNode checks that id is one of a network's n nodes.
func checkNode(n int, id int) error {
	if id < 1 || id > n {
		return fmt.Errorf("node %d is not one of nodes 1 to %d", id, n)
	}
	return nil
}

// pairLinks is the link from -> to, and to -> from if both, of a
// network of n nodes.
func pairLinks(n int, from, to int, both bool) ([]link, error) {
	if err := errors.Join(checkNode(n, from), checkNode(n, to)); err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("node %d cannot be cut from or delayed to itself: its traffic to itself never leaves its namespace", from)
	}
	links := []link{{from, to}}
	if both {
		links = append(links, link{to, from})
	}
	return links, nil
}

// isolateLinks are the links between id and every other node, both ways.
func isolateLinks(n int, id int) ([]link, error) {
	if err := checkNode(n, id); err != nil {
		return nil, err
	}
	var links []link
	for other := 1; other <= n; other++ {
		if other != id {
			links = append(links, link{id, other}, link{other, id})
		}
	}
	return links, nil
}

// splitLinks are the links, both ways, between every two nodes in
// different groups. The groups must hold every node of the n, each once:
// a node in no group would be connected to both sides, which is a
// different fault (a bridge node) that a caller should ask for with Cut.
func splitLinks(n int, groups [][]int) ([]link, error) {
	if len(groups) < 2 {
		return nil, fmt.Errorf("split into %d groups: want at least two", len(groups))
	}
	group := map[int]int{}
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
	var missing []int
	for id := 1; id <= n; id++ {
		if _, ok := group[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("nodes %v are in no group of the split: every node must be in one", missing)
	}
	var links []link
	for a := 1; a <= n; a++ {
		for b := 1; b <= n; b++ {
			if group[a] != group[b] {
				links = append(links, link{a, b})
			}
		}
	}
	return links, nil
}
