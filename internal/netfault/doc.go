// Package netfault runs each node of a cluster in a Linux network
// namespace of its own, on a bridge the calling process also sits on, and
// faults the links between the nodes (Jepsen's partitions): cut one way
// or both, isolate a node, split the nodes into groups, delay one way,
// while the calling process and the clients it runs still reach every
// node.
//
//	root namespace (the calling process, its clients)
//	  bridge ft<pid>c<seq>b  10.231.X.1/24
//	    |-- veth ft<pid>c<seq>v1 ==== eth0 10.231.X.11  namespace fjordt-<pid>-<seq>-n1
//	    |-- veth ft<pid>c<seq>v2 ==== eth0 10.231.X.12  namespace fjordt-<pid>-<seq>-n2
//	    `-- ...
//
// A node's process runs in its namespace through Network.Command. Each
// namespace has a stack of its own, so every node can listen on the same
// ports (fjord's defaults) on its own address: there is nothing to race
// for, and a voter list or an advertised address names the 10.231.X
// addresses.
//
// It imports no test package: internal/testcluster's network mode (the
// cluster tests) and `fjord verify --local` (faults against the clusters
// it starts itself) are both built on it.
//
// How a fault is made, and why so. A network runs on machines whose
// kernels we do not choose (CI machines, a user's); the one this was
// written on (a Firecracker guest) has no netem, no prio, no gact and no
// nft binary, only HTB, the FIFOs and the u32 classifier. So:
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
//     through a tun device that this package reads (netns_linux.go): each
//     packet is held d and then sent on by a raw socket bound to eth0,
//     which the /32 route through the tun does not apply to. This is a
//     user-space netem, for kernels without one; netem would be more
//     exact, but a fault asks only "at least d", which holding the packet
//     guarantees (a packet is never sent before it was read plus d). A
//     packet delayed into a cut link is dropped, as it should be.
//   - Heal deletes the HTB roots and closes the tun devices, which takes
//     their routes with them.
//
// Names carry the making process's pid and a sequence number counted per
// process (one count for every user in it), so two processes at once
// never share a name, and a later process can tell a crashed run's
// leftovers (their pid is dead) and remove them, whichever user made
// them: every New sweeps first. The prefixes (fjordt, ft) and the lock's
// path are those of the days when only testcluster made networks, kept
// so that a binary built before the move and one built after sweep, and
// lock against, each other. The /24 is chosen under a machine-wide lock
// (an flock) among those no route or address of the root namespace
// overlaps, starting from one derived from the pid.
//
// Needs: Linux, root, and the ip and tc commands (Debian's iproute2).
// Available says plainly what is missing and changes nothing, as a
// product command must; Install, for tests (which install what they need
// rather than skip), installs iproute2 with apt-get.
package netfault
