// Package testcluster runs real Fjord nodes as separate processes for
// end-to-end tests: the real `fjord` binary, real sockets on 127.0.0.1
// (or, in network mode, in network namespaces of their own), real data
// directories, real signals (SIGKILL for crashes, SIGTERM for clean
// shutdowns) and real network faults.
//
// Typical use, in a test package:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		n := testcluster.Start(t, testcluster.Options{})
//		cl, _ := kgo.NewClient(kgo.SeedBrokers(n.Brokers()))
//		...
//		n.Kill()    // SIGKILL, as a power cut would
//		n.Restart() // same ports, same data dir
//	}
//
// A cluster of N nodes (ids 1 to N) shares one --controller-quorum-voters
// list, so every node is a broker and a voter:
//
//	c := testcluster.StartCluster(t, testcluster.ClusterOptions{
//		Nodes: 3, Order: []int32{3, 1, 2}, StartDelay: 200 * time.Millisecond,
//	})
//	id := c.ControllerID(t) // every node's Metadata answer agrees
//	c.Kill(id)              // or Stop; c.Node(id) is the Node itself
//	c.Start(id)             // back on its ports and data directory
//	c.Stop()                // every node; then, in another order:
//	c.Start(2, 3, 1)
//
// StartCluster finds every node's ports first (the voter list names each
// controller port), launches every process in Order before it waits for
// any (a voter is ready only once a majority runs), then waits for every
// /readyz under one deadline. Start does the same for nodes that were
// stopped or killed. A port taken in the gap fails only the first start,
// which is retried with fresh ports and fresh data directories for all
// nodes, since a metadata log keeps the voter list it was bootstrapped
// with.
//
// A cluster belongs to the test that started it: its nodes are killed
// when that test ends. Tests that each need a cluster but can share one
// (each with topics of its own, no node stopped) take one from
// StartSharedCluster instead, which belongs to the test binary: Main
// kills its nodes after the last test.
//
// The binary is built once per test process (go build of
// github.com/fjordmq/fjord/cmd/fjord into a temporary directory that Main
// removes), or taken from $FJORD_BIN when that is set, so a CI job or a
// developer can test a binary built once, or one built with -race.
//
// Ports. Each node gets three ports (Kafka, controller, HTTP) that were
// free a moment ago, picked outside the kernel's ephemeral range
// (internal/freeport), and binds them a moment later. Another process
// that names such a port can take it in that gap; the kernel never hands
// one out by itself (not to a listener on port 0, not as a connection's
// source port), this package never hands out the same port twice in one
// process, and Start retries with fresh ports when the node's log says
// "address already in use". Restart reuses the node's ports on purpose
// (clients keep their bootstrap address); since the ports are outside
// the ephemeral range, a port a killed node let go is still free.
// In network mode none of this applies: each node has a namespace, and
// so a network stack, of its own, and listens on fjord's default ports.
//
// Network faults. With ClusterOptions.Network each node runs in a
// network namespace of its own (internal/netfault makes them), on a
// bridge the test process also sits on, and the cluster can fault the
// links between nodes while clients still reach every node:
//
//	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Network: true})
//	c.Cut(1, 2)                         // 1's packets to 2 are dropped, silently
//	c.CutBoth(1, 3)                     // both ways
//	c.Isolate(2)                        // from every other node, both ways
//	c.Split([]int32{1}, []int32{2, 3})  // no packet crosses between the groups
//	c.Delay(1, 2, 200*time.Millisecond) // 1's packets to 2 take 200ms longer
//	c.Heal()                            // all of it undone
//	conn, err := c.DialFrom(1, c.Node(2).KafkaAddr(), time.Second) // as node 1 would
//
// Network mode needs Linux, root and Debian's iproute2 (ip and tc),
// which the harness installs with apt-get (netfault.Install) when it is
// missing; it never skips. Everything it makes (namespaces, veths, the
// bridge, the qdiscs and routes of the faults) is removed when the
// cluster's owner ends, or at once if the start fails, and a later run
// (of this harness or of fjord verify) removes what a crashed run left. Signals and restarts work as on loopback: `ip netns exec` execs
// fjord in the same process, so the pid signalled is fjord's.
//
// Output. Each node's stdout and stderr go to one file (appended to across
// restarts, with a marker line per start). When the test fails, the tail of
// every node's file is printed with the test's output.
//
// Threads. A Node's methods that fail the test (Start, Kill, Stop,
// Restart) call t.Fatal and so must be called from the test's goroutine,
// as testing requires, and so must a Cluster's (see Cluster). Brokers,
// Running, Metadata and the address getters are safe from any goroutine. One goroutine per running process waits for it to
// exit and records its status.
//
// The checker that verifies a log read back against what a producer
// was told (DESIGN.md section 7.5) is internal/history's.
package testcluster
