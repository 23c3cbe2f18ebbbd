package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/freeport"
	"github.com/fjordmq/fjord/internal/node"
)

// fjord dev: a local cluster in one command, for trying Fjord and for
// developing against it. It re-executes this binary as N `fjord serve`
// children, ids 1 to N, each a broker and a voter of one controller
// quorum, as internal/testcluster and `bench run --local` start theirs:
// every port is chosen first, since every node's voter list names every
// controller port, then every process is launched before any is waited
// for, because a voter is ready only once a majority runs. Neither is
// reused: testcluster fails a testing.TB and belongs in no binary, and
// bench's nodes live in a temporary directory that stopping removes,
// where a dev cluster's data is the point and outlives the run.
//
// Under --data-dir:
//
//	dev-cluster.json  the host and every node's ports (devLayout)
//	node-<id>/        node <id>'s --data-dir
//	node-<id>.log     its stdout and stderr, every start appended
//	node-<id>.pid     its process id while it runs, for scripts that
//	                  fault it (fjord verify --fault-cmd)
//
// The ports are saved, not chosen again on the next run, because a
// quorum's voter list is read only when its metadata log is new: a node
// brought back on other controller ports would dial voters that are no
// longer there. Saving them also keeps the bootstrap servers a user
// exported valid across runs.
//
// Process tree. Each child gets its own process group, so the SIGINT a
// terminal sends its foreground group on Ctrl-C reaches dev alone; dev
// then sends every child one SIGTERM. Were the children in dev's group
// they would see the terminal's SIGINT and then dev's SIGTERM, and serve
// takes a second signal as "exit at once", skipping the controlled
// shutdown. On Linux each child also has Pdeathsig SIGKILL
// (dev_procattr_linux.go), so a dev that is itself SIGKILLed, or dies
// any other way, takes its nodes with it.
//
// Threads: the command's goroutine owns the cluster (starts, waits,
// stops); one goroutine per child waits for its exit, sets
// devNode.waitErr, closes devNode.done and sends the node on
// devCluster.exited; while starting, one goroutine per node polls its
// /readyz, and start returns only once they have stopped.

const (
	// maxDevNodes bounds --nodes: quorums are 3 or 5 voters, and nine
	// is what the --base-port layout (ports devPortStride apart) holds.
	maxDevNodes = 9
	// devPortStride separates the Kafka, controller and HTTP ports of a
	// --base-port layout.
	devPortStride = 10
	// devLayoutFile, in --data-dir, holds the cluster's shape.
	devLayoutFile = "dev-cluster.json"
	// devReadyTimeout bounds the start: a quorum of three on a busy
	// laptop is ready in a few seconds.
	devReadyTimeout = 60 * time.Second
	devReadyPoll    = 50 * time.Millisecond
	// devStopTimeout bounds the wait after SIGTERM. A controlled
	// shutdown is bounded at about 4 s (node/shutdown.go), so a node
	// still running after this is hung and is SIGKILLed.
	devStopTimeout = 15 * time.Second
	// devStartTries covers a free port taken by another process between
	// being found and being bound, which only a first start can retry.
	devStartTries = 3
)

// devOptions are the flags of `fjord dev`. None is read from the
// environment: FJORD_DATA_DIR and the rest name serve's settings, and a
// dev cluster is what its own flags say.
type devOptions struct {
	nodes    int32
	dataDir  string
	host     string
	basePort int32 // 0: free ports
	// restartKilled: a node killed by a signal dev did not send is
	// started again this long after (0: it stops the others, as a node
	// that fails does).
	restartKilled time.Duration
	// tls: clients connect over SASL_SSL as tlsUser (dev_tls.go).
	tls     bool
	tlsUser string
	// nodesGiven, hostGiven and tlsUserGiven say the flag was on the
	// command line, so a directory made for another cluster is refused
	// rather than silently reused.
	nodesGiven, hostGiven, tlsUserGiven bool
}

func newDevCommand() *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of N nodes until Ctrl-C",
		Long: `Run a local cluster: --nodes "fjord serve" processes of this binary, ids 1 to
N, each a broker and a voter of one controller quorum, with their listeners on
--host. dev waits until every node's /readyz answers 200 and its metadata
lists every node as a live broker, then prints the bootstrap servers, each
node's addresses, pid and log, and commands to try.

Ctrl-C (SIGINT) or SIGTERM stops every node with a controlled shutdown and
exits 0 once all have exited cleanly; a node still running 15 s after its
SIGTERM is killed. A second signal kills every node at once. A signal before
every node is ready stops them too, and dev exits 1. A node that exits by
itself stops the others, and dev exits 1 saying which node and why; with
--restart-killed-after D, a node killed by a signal (kill -9 PID, to try a
failover, or a fault script's) is started again D later instead, as a
supervisor would, and only a node that fails stops the others. On Linux a node
cannot outlive dev, even a dev killed with SIGKILL.

Ports: without --base-port each node gets three free ports. With --base-port
P, node i's Kafka listener is P+i-1, its controller P+10+i-1 and its HTTP API
P+20+i-1: --base-port 19092 --nodes 3 gives Kafka 19092-19094, controllers
19102-19104, HTTP 19112-19114. A port that is taken is an error naming it.

Under --data-dir:
  dev-cluster.json   the host and every node's ports
  node-<id>/         node <id>'s data directory
  node-<id>.log      node <id>'s output, every start appended
  node-<id>.pid      node <id>'s process id, while it runs

Run again with the same --data-dir, dev starts the same cluster: the same
ports (a quorum's voter list is fixed when its metadata log is made) and the
same data. --nodes, --host and --base-port can then be left out; given, they
must match what the directory holds. Remove the directory to start over.

With --tls, each node's Kafka listener is SASL_SSL (SCRAM-SHA-512) and its HTTP
API HTTPS. The first start writes under --data-dir/tls a CA (ca.crt), a
certificate for --host and localhost that every node serves (node.crt), and
random passwords for two SCRAM users made with the cluster: --tls-user
(default dev; <user>.password) and broker, the nodes' own; both are super
users. Key and password files are 0600. A later start reuses them, and says so;
it replaces only a certificate that is missing or expires within 7 days (a
new CA must then be given to the clients). The banner prints the client
settings: librdkafka properties (also written, password included, to
tls/client.properties for kcat -F), the fjord client flags and a curl line.
A cluster made with --tls must be run with --tls, and one made without it
without: a running cluster cannot change its users. The controller ports stay
plaintext.

Each node runs with serve's defaults, except that topics get min(N, 3)
replicas unless told otherwise (--default-replication-factor) and a new
consumer group starts at once (--group-initial-rebalance-delay-ms 0).
FJORD_* variables that set serve's flags are not passed to the nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.restartKilled < 0 || o.restartKilled > time.Hour {
				return fmt.Errorf("--restart-killed-after %v: allowed: 0 (a killed node stops the others) to 1h", o.restartKilled)
			}
			o.nodesGiven = cmd.Flags().Changed("nodes")
			o.hostGiven = cmd.Flags().Changed("host")
			o.tlsUserGiven = cmd.Flags().Changed("tls-user")
			if o.tlsUserGiven && !o.tls {
				return fmt.Errorf("--tls-user %s: needs --tls", quoteValue(o.tlsUser))
			}
			if err := checkDevTLSUser(o.tlsUser); err != nil {
				return err
			}
			return runDev(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.Var(newIntFlag[int32](&o.nodes, 3, 1, maxDevNodes, ""), "nodes", "how many nodes, each a broker and a controller voter")
	f.StringVar(&o.dataDir, "data-dir", "./fjord-dev", "directory holding every node's data and log, and the cluster's ports")
	f.StringVar(&o.host, "host", "127.0.0.1", "address every listener binds and advertises")
	f.Var(newIntFlag[int32](&o.basePort, 0, 0, 65535, "(0: free ports)"), "base-port",
		"first port of the fixed layout: node i's Kafka port is base+i-1, its controller's base+10+i-1, its HTTP API's base+20+i-1 (default: free ports)")
	f.DurationVar(&o.restartKilled, "restart-killed-after", 0,
		"start a node killed by a signal again this long after, rather than stopping the others (0: stop them)")
	addBoolFlag(f, &o.tls, "tls", false,
		"clients connect over SASL_SSL with SCRAM-SHA-512 and the HTTP API is HTTPS; the CA, certificate and passwords are made in --data-dir/tls")
	f.StringVar(&o.tlsUser, "tls-user", defaultDevTLSUser, "with --tls, the SCRAM user (a super user) made for the developer")
	return cmd
}

// devLayout is a dev cluster's shape: what dev-cluster.json holds, and
// all a later run needs to start the same cluster.
type devLayout struct {
	Host  string         `json:"host"`
	Nodes []devNodePorts `json:"nodes"` // Nodes[i] has ID i+1
	// TLS is set for a --tls cluster; omitted for a plaintext one, so
	// its file reads as it did before --tls existed.
	TLS *devLayoutTLS `json:"tls,omitempty"`
}

// devNodePorts are one node's listeners' ports on the layout's host.
type devNodePorts struct {
	ID         int `json:"id"`
	Kafka      int `json:"kafka_port"`
	Controller int `json:"controller_port"`
	HTTP       int `json:"http_port"`
}

// listeners names the node's ports, in the order dev checks them.
func (p devNodePorts) listeners() []struct {
	name string
	port int
} {
	return []struct {
		name string
		port int
	}{{"Kafka", p.Kafka}, {"controller", p.Controller}, {"HTTP", p.HTTP}}
}

// needsPorts reports whether the layout's ports are still to be picked
// (a new directory without --base-port).
func (l devLayout) needsPorts() bool { return len(l.Nodes) > 0 && l.Nodes[0].Kafka == 0 }

// withPorts gives the nodes ports, three each in node order.
func (l devLayout) withPorts(ports []int) devLayout {
	out := devLayout{Host: l.Host, TLS: l.TLS}
	for i := range l.Nodes {
		out.Nodes = append(out.Nodes, devNodePorts{ID: i + 1, Kafka: ports[3*i], Controller: ports[3*i+1], HTTP: ports[3*i+2]})
	}
	return out
}

func (l devLayout) addr(port int) string { return net.JoinHostPort(l.Host, strconv.Itoa(port)) }

// voters is --controller-quorum-voters, or "" for a cluster of one,
// which serve runs as a voter of its own without a list, exactly as a
// lone `fjord serve` does.
func (l devLayout) voters() string {
	if len(l.Nodes) == 1 {
		return ""
	}
	var vs []node.Voter
	for _, n := range l.Nodes {
		vs = append(vs, node.Voter{NodeID: int32(n.ID), Addr: l.addr(n.Controller)})
	}
	return node.FormatVoters(vs)
}

// replicationFactor is the nodes' --default-replication-factor: serve's
// default of 3, or every node when there are fewer. serve caps it at the
// brokers registered anyway, but only at the time, and a topic made
// while a node is still registering would get fewer replicas for good.
func (l devLayout) replicationFactor() int { return min(len(l.Nodes), 3) }

// baseLayout is the --base-port layout: ports devPortStride apart per
// kind, so each kind's ports read as a run (Kafka P, P+1, P+2).
func baseLayout(host string, nodes, base int) devLayout {
	l := devLayout{Host: host}
	for i := range nodes {
		l.Nodes = append(l.Nodes, devNodePorts{ID: i + 1, Kafka: base + i, Controller: base + devPortStride + i, HTTP: base + 2*devPortStride + i})
	}
	return l
}

// planDevLayout decides which cluster to start from the flags and the
// directory's saved layout (nil: a new directory). It is the saved
// layout when there is one (flags given must agree with it), else the
// --base-port layout, else one whose ports are zero for the caller to
// pick (needsPorts).
func planDevLayout(saved *devLayout, o devOptions, dir string) (devLayout, error) {
	if err := checkDevHost(o.host); err != nil {
		return devLayout{}, err
	}
	if saved != nil {
		where := filepath.Join(dir, devLayoutFile)
		instead := fmt.Sprintf("give another --data-dir, or remove %s to start over", dir)
		switch {
		case o.nodesGiven && int(o.nodes) != len(saved.Nodes):
			return devLayout{}, fmt.Errorf("--nodes %d: --data-dir %s holds a cluster of %s (%s): leave --nodes out to run it, %s",
				o.nodes, dir, plural(int64(len(saved.Nodes)), "node"), where, instead)
		case o.hostGiven && o.host != saved.Host:
			return devLayout{}, fmt.Errorf("--host %s: --data-dir %s holds a cluster on %s (%s): leave --host out to run it, %s",
				o.host, dir, saved.Host, where, instead)
		case o.basePort != 0 && !sameLayout(*saved, baseLayout(saved.Host, len(saved.Nodes), int(o.basePort))):
			return devLayout{}, fmt.Errorf("--base-port %d: --data-dir %s holds a cluster on other ports (%s): leave --base-port out to run it, %s",
				o.basePort, dir, where, instead)
		// Refused, not followed: the users of a --tls cluster exist
		// only in metadata logs made with them, so neither direction
		// can be changed in place, and a silent switch would start a
		// cluster other than the one the user's clients are set for.
		case o.tls && saved.TLS == nil:
			return devLayout{}, fmt.Errorf("--tls: --data-dir %s holds a cluster made without --tls (%s), which cannot take it on: leave --tls out to run it, %s",
				dir, where, instead)
		case !o.tls && saved.TLS != nil:
			return devLayout{}, fmt.Errorf("--data-dir %s holds a cluster made with --tls (%s): run it with --tls, %s",
				dir, where, instead)
		case o.tlsUserGiven && saved.TLS != nil && o.tlsUser != saved.TLS.User:
			return devLayout{}, fmt.Errorf("--tls-user %s: --data-dir %s holds a cluster made for user %s (%s): leave --tls-user out to run it, %s",
				o.tlsUser, dir, saved.TLS.User, where, instead)
		}
		return *saved, nil
	}
	var secured *devLayoutTLS
	if o.tls {
		secured = &devLayoutTLS{User: o.tlsUser}
	}
	if o.basePort != 0 {
		top := int(o.basePort) + 2*devPortStride + int(o.nodes) - 1
		if top > 65535 {
			return devLayout{}, fmt.Errorf("--base-port %d: node %d's HTTP port would be %d; allowed: at most %d for %d nodes",
				o.basePort, o.nodes, top, 65535-(top-int(o.basePort)), o.nodes)
		}
		l := baseLayout(o.host, int(o.nodes), int(o.basePort))
		l.TLS = secured
		return l, nil
	}
	return devLayout{Host: o.host, Nodes: make([]devNodePorts, o.nodes), TLS: secured}, nil
}

// sameLayout compares hosts and ports: the cluster's place, not its
// security.
func sameLayout(a, b devLayout) bool {
	if a.Host != b.Host || len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		if a.Nodes[i] != b.Nodes[i] {
			return false
		}
	}
	return true
}

// checkDevHost refuses a --host clients cannot be sent to. dev binds
// and advertises the same address, and a wildcard is no address to
// dial: serve would refuse it without --advertised-kafka-addr, and the
// voters could not name each other by it.
func checkDevHost(host string) error {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("--host %s: give an address the clients and the other nodes can dial, e.g. 127.0.0.1 (dev listens and advertises on the same address)", host)
	}
	if _, err := node.ParseVoters("1@" + net.JoinHostPort(host, "1")); err != nil {
		return fmt.Errorf("--host %s: not an address the nodes can dial (%v)", quoteValue(host), err)
	}
	return nil
}

// checkLayout checks a layout read from a file: ids 1 to N in order,
// N from 1 to maxDevNodes, ports from 1 to 65535 used once each.
func checkLayout(l devLayout) error {
	if len(l.Nodes) < 1 || len(l.Nodes) > maxDevNodes {
		return fmt.Errorf("%d nodes (allowed: 1 to %d)", len(l.Nodes), maxDevNodes)
	}
	if err := checkDevHost(l.Host); err != nil {
		return err
	}
	if l.TLS != nil {
		if err := checkDevTLSUser(l.TLS.User); err != nil {
			return fmt.Errorf("its tls user %s is not one fjord dev makes", quoteValue(l.TLS.User))
		}
	}
	seen := map[int]bool{}
	for i, n := range l.Nodes {
		if n.ID != i+1 {
			return fmt.Errorf("node %d is listed as node %d (want ids 1 to %d in order)", i+1, n.ID, len(l.Nodes))
		}
		for _, ln := range n.listeners() {
			if ln.port < 1 || ln.port > 65535 || seen[ln.port] {
				return fmt.Errorf("node %d's %s port %d is out of range or used twice", n.ID, ln.name, ln.port)
			}
			seen[ln.port] = true
		}
	}
	return nil
}

// openDevDir reads --data-dir's saved layout: nil for a directory that
// does not exist or is empty, an error for one that is not a dev
// cluster's (a file, another program's files, a damaged layout file).
// dev writes node-<id>/ only after dev-cluster.json, so a directory
// holding anything but no layout file was not made by dev.
func openDevDir(dir string) (*devLayout, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("--data-dir %s: %v", dir, err)
	case !st.IsDir():
		return nil, fmt.Errorf("--data-dir %s is a file, not a directory", dir)
	}
	path := filepath.Join(dir, devLayoutFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("--data-dir %s: %v", dir, err)
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("--data-dir %s holds files but no %s, so fjord dev did not make it: give a new or empty directory", dir, devLayoutFile)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %v", dir, err)
	}
	var l devLayout
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s is not a dev cluster's layout (%v): remove %s to start over", path, err, dir)
	}
	if err := checkLayout(l); err != nil {
		return nil, fmt.Errorf("%s is not a dev cluster's layout: %v; remove %s to start over", path, err, dir)
	}
	return &l, nil
}

// writeDevLayout saves the layout, whole or not at all (a rename), so
// that a dev killed while writing leaves the old file or none.
func writeDevLayout(dir string, l devLayout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, devLayoutFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--data-dir %s: %v", dir, err)
	}
	return os.Rename(tmp, filepath.Join(dir, devLayoutFile))
}

// devPortError is a listener's port that cannot be bound.
type devPortError struct {
	node     int
	listener string
	addr     string
	err      error
}

func (e *devPortError) Error() string {
	if errors.Is(e.err, syscall.EADDRINUSE) {
		return fmt.Sprintf("%s (node %d's %s listener) is in use", e.addr, e.node, e.listener)
	}
	return fmt.Sprintf("cannot listen on %s (node %d's %s listener): %v", e.addr, e.node, e.listener, e.err)
}

// checkPortsFree binds every listener's address for a moment, in node
// order, so that a taken port is refused here, named, before any node
// starts, rather than by one node's log while the others wait for it.
// A port taken after the check is caught by the node (portTaken).
func checkPortsFree(l devLayout) error {
	for _, n := range l.Nodes {
		for _, ln := range n.listeners() {
			addr := l.addr(ln.port)
			lis, err := net.Listen("tcp", addr)
			if err != nil {
				return &devPortError{node: n.ID, listener: ln.name, addr: addr, err: err}
			}
			lis.Close()
		}
	}
	return nil
}

// freeDevPorts returns n distinct ports on host that were free a moment
// ago, outside the kernel's ephemeral range, so that a port a killed node
// lets go is not handed to another program while dev restarts the node
// (internal/freeport). A node binds its ports a moment after this
// returns; devStartTries covers the rare port taken in between.
func freeDevPorts(host string, n int) ([]int, error) { return freeport.Take(host, n) }

// devNodeEnv is this process's environment without the FJORD_ variables
// that set serve's flags: a shell's FJORD_DATA_DIR or FJORD_LOG_LEVEL,
// meant for some other node, must not reach the dev cluster's.
// Everything else passes, FJORD_BROKERS included (serve does not read
// it).
func devNodeEnv() []string {
	serveVars := map[string]bool{}
	newServeCommand().Flags().VisitAll(func(f *pflag.Flag) { serveVars[envName(f.Name)] = true })
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !serveVars[name] {
			env = append(env, kv)
		}
	}
	return env
}

// nodeEnv is devNodeEnv and, for a --tls cluster, its users.
func (c *devCluster) nodeEnv() []string {
	env := devNodeEnv()
	if c.tls != nil {
		env = append(env, c.tls.bootstrapEnv())
	}
	return env
}

// devCluster is the running nodes of one dev run.
type devCluster struct {
	layout devLayout
	dir    string  // --data-dir as given, for what dev prints
	tls    *devTLS // nil: a plaintext cluster
	nodes  []*devNode
	// exited receives each node as its process exits; room for all, so
	// a wait goroutine never blocks on it.
	exited chan *devNode
}

// devNode is one `fjord serve` child.
type devNode struct {
	ports   devNodePorts
	dataDir string // absolute: the child does not share dev's view of "."
	logPath string // absolute
	logName string // as printed: under --data-dir as given
	pidPath string // absolute
	cmd     *exec.Cmd
	// logStart is the log's size when this process started: where its
	// own output begins.
	logStart int64
	done     chan struct{} // closed once the process has exited; waitErr is then set
	waitErr  error
}

func newDevCluster(l devLayout, dir, absDir string, secured *devTLS) *devCluster {
	c := &devCluster{layout: l, dir: dir, tls: secured, exited: make(chan *devNode, len(l.Nodes))}
	for _, p := range l.Nodes {
		name := "node-" + strconv.Itoa(p.ID)
		c.nodes = append(c.nodes, &devNode{
			ports:   p,
			dataDir: filepath.Join(absDir, name),
			logPath: filepath.Join(absDir, name+".log"),
			logName: filepath.Join(dir, name+".log"),
			pidPath: filepath.Join(absDir, name+".pid"),
		})
	}
	return c
}

func (n *devNode) exited() bool {
	if n.done == nil { // never started
		return true
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// spawn starts the node's process and returns at once. A node is
// spawned again only after its last process's exit was received from
// c.exited: n's fields are then the command goroutine's alone.
func (c *devCluster) spawn(n *devNode, exe string, env []string) error {
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	l := c.layout
	args := []string{"serve",
		"--node-id", strconv.Itoa(n.ports.ID),
		"--data-dir", n.dataDir,
		"--controller-addr", l.addr(n.ports.Controller),
		"--http-addr", l.addr(n.ports.HTTP),
		"--default-replication-factor", strconv.Itoa(l.replicationFactor()),
		// A script that starts one consumer of a new group wants its
		// records now, not after Kafka's 3 s wait for more members
		// (README: "For development").
		"--group-initial-rebalance-delay-ms", "0",
	}
	if v := l.voters(); v != "" {
		args = append(args, "--controller-quorum-voters", v)
	}
	if c.tls != nil {
		args = append(args, c.tls.serveArgs(l.addr(n.ports.Kafka))...)
	} else {
		args = append(args, "--kafka-addr", l.addr(n.ports.Kafka))
	}
	fmt.Fprintf(log, "=== fjord dev %s: fjord %s\n", time.Now().Format(time.RFC3339), strings.Join(args, " "))
	st, err := log.Stat()
	if err != nil {
		return err
	}
	n.logStart = st.Size()
	cmd := exec.Command(exe, args...)
	cmd.Dir = filepath.Dir(n.dataDir)
	cmd.Env = env
	// An *os.File is handed to the child as it is: no copying goroutine
	// in dev that a dead dev would leave the child writing into.
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = nodeProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %d (%s serve): %v", n.ports.ID, exe, err)
	}
	n.cmd = cmd
	done := make(chan struct{})
	n.done = done
	if err := writePIDFile(n.pidPath, cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		close(done)
		return fmt.Errorf("node %d: %v", n.ports.ID, err)
	}
	go func() {
		err := cmd.Wait()
		// Before the exit is sent: a restart writes the file again.
		os.Remove(n.pidPath)
		n.waitErr = err
		close(done)
		c.exited <- n
	}()
	return nil
}

// writePIDFile writes pid to path whole or not at all, so that a script
// never reads half a number.
func writePIDFile(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// killed reports whether the node's process was ended by a signal.
// REQUIRES: n.done closed.
func (n *devNode) killed() bool {
	var exit *exec.ExitError
	return errors.As(n.waitErr, &exit) && exit.ExitCode() == -1
}

// errDevInterrupted is a start ended by a signal.
var errDevInterrupted = errors.New("interrupted while starting")

// start launches every node, then waits until every /readyz answers
// 200, a node exits, a signal arrives or devReadyTimeout passes. On
// failure some nodes may still run: the caller stops them.
//
// Each node is polled by a goroutine of its own, with requests the
// return cancels, so that a Ctrl-C is answered at once: a node that has
// bound its HTTP listener but is still starting can hold a request for
// a second or more, and a poll of all nodes in turn would sit in it.
func (c *devCluster) start(ctx context.Context, exe string, sigs <-chan os.Signal) error {
	var kafkaOpts []kgo.Opt
	transport := &http.Transport{DisableKeepAlives: true}
	if c.tls != nil {
		var err error
		if kafkaOpts, err = c.tls.kafkaOpts(); err != nil {
			return err
		}
		transport.TLSClientConfig = c.tls.httpTLSConfig()
	}
	env := c.nodeEnv()
	for _, n := range c.nodes {
		if err := c.spawn(n, exe, env); err != nil {
			return err
		}
	}
	pollCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which the next defer runs first
	defer cancel()
	ready := make(chan *devNode, len(c.nodes))
	var last struct {
		sync.Mutex
		errs map[int]error // by node id: why its latest poll was not a 200
	}
	last.errs = map[int]error{}
	client := &http.Client{Timeout: 2 * time.Second, Transport: transport}
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(devReadyPoll)
			defer tick.Stop()
			for {
				err := c.checkReady(pollCtx, client, kafkaOpts, n)
				if err == nil {
					ready <- n
					return
				}
				last.Lock()
				last.errs[n.ports.ID] = err
				last.Unlock()
				select {
				case <-pollCtx.Done(): // start is over
					return
				case <-tick.C: // ask again
				}
			}
		}()
	}
	// One deadline for all: a quorum's nodes become ready together.
	deadline := time.NewTimer(devReadyTimeout)
	defer deadline.Stop()
	isReady := map[int]bool{}
	for len(isReady) < len(c.nodes) {
		select {
		case n := <-ready: // one more
			isReady[n.ports.ID] = true
		case n := <-c.exited: // no point waiting for the others
			return fmt.Errorf("node %d exited before it was ready (%s)", n.ports.ID, n.why())
		case <-sigs: // Ctrl-C while starting
			return errDevInterrupted
		case <-ctx.Done(): // the caller gave up
			return ctx.Err()
		case <-deadline.C: // too slow: name the first laggard
			for _, n := range c.nodes {
				if !isReady[n.ports.ID] {
					last.Lock()
					err := last.errs[n.ports.ID]
					last.Unlock()
					return fmt.Errorf("node %d was not ready within %v (last /readyz: %v; log %s)", n.ports.ID, devReadyTimeout, err, n.logName)
				}
			}
		}
	}
	return nil
}

// checkReady asks n whether it is ready, over HTTP(S) with client and
// over Kafka with kafkaOpts (the cluster's security).
func (c *devCluster) checkReady(ctx context.Context, client *http.Client, kafkaOpts []kgo.Opt, n *devNode) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.httpScheme()+c.layout.addr(n.ports.HTTP)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	// Ready also means the node's metadata lists every node as a live
	// broker: a node answers /readyz once it serves, which can be before
	// the controller has unfenced the last one to register, and a client
	// that asks for the brokers then (fjord verify's --fault-cmd picks
	// the nodes to fault that way) would not see it. Asked of the node's
	// own Kafka listener: /v1/cluster answers from a client's cache.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.layout.addr(n.ports.Kafka))}, kafkaOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	r, err := cl.SeedBrokers()[0].Request(ctx, mreq)
	if err != nil {
		return err
	}
	if got := len(r.(*kmsg.MetadataResponse).Brokers); got < len(c.nodes) {
		return fmt.Errorf("its metadata lists %d of the %d nodes as live brokers", got, len(c.nodes))
	}
	return nil
}

// httpScheme is how the nodes' HTTP API is reached: "http://", or
// "https://" for a --tls cluster.
func (c *devCluster) httpScheme() string {
	if c.tls != nil {
		return "https://"
	}
	return "http://"
}

// why says how an exited node ended, in one line: "exit status 1:
// fjord: <serve's error>; log fjord-dev/node-2.log". serve's own error
// is its last line, "fjord: ..." (main.go); any other last line (a log
// record, a panic's stack) says less than the log, which is named.
// REQUIRES: n.done closed.
func (n *devNode) why() string {
	status := "exit status 0"
	if n.waitErr != nil {
		status = n.waitErr.Error()
	}
	if line := n.lastLine(); strings.HasPrefix(line, "fjord: ") {
		if len(line) > 2*maxQuotedValue {
			line = line[:2*maxQuotedValue] + "..."
		}
		status += ": " + line
	}
	return status + "; log " + n.logName
}

// output returns this process's own output, at most its last 64 KiB.
func (n *devNode) output() string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	from := n.logStart
	if st, err := f.Stat(); err == nil && st.Size()-from > 64<<10 {
		from = st.Size() - 64<<10
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func (n *devNode) lastLine() string {
	out := strings.TrimRight(n.output(), "\n")
	return strings.TrimSpace(out[strings.LastIndexByte(out, '\n')+1:])
}

// portTaken reports whether a node found one of its ports taken, in the
// moment between freeDevPorts and its bind.
func (c *devCluster) portTaken() bool {
	for _, n := range c.nodes {
		if n.cmd != nil && strings.Contains(n.output(), "address already in use") {
			return true
		}
	}
	return false
}

// running is the nodes whose process was started and has not exited.
func (c *devCluster) running() []*devNode {
	var out []*devNode
	for _, n := range c.nodes {
		if n.cmd != nil && !n.exited() {
			out = append(out, n)
		}
	}
	return out
}

// kill SIGKILLs every running node and waits for each to exit.
func (c *devCluster) kill() {
	nodes := c.running()
	for _, n := range nodes {
		n.cmd.Process.Kill()
	}
	for _, n := range nodes {
		<-n.done
	}
}

// stop sends every running node SIGTERM at once, so each makes its
// controlled shutdown (the last ones find no other live broker and skip
// it, which is what they should do), and waits for all of them:
// devStopTimeout at most, then SIGKILL; a signal during the wait SIGKILLs
// them at once. With clean, an exit other than 0 is an error naming the
// node; a stop after a failed start is not clean by nature (a node
// interrupted while starting exits 1), and only a kill is reported.
func (c *devCluster) stop(sigs <-chan os.Signal, clean bool) error {
	nodes := c.running()
	for _, n := range nodes {
		// Process.Signal fails only where there are no signals
		// (Windows) or the process is already gone; a kill covers both.
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			n.cmd.Process.Kill()
		}
	}
	allDone := make(chan struct{})
	go func() {
		for _, n := range nodes {
			<-n.done
		}
		close(allDone)
	}()
	timer := time.NewTimer(devStopTimeout)
	defer timer.Stop()
	select {
	case <-allDone: // every node exited
	case s := <-sigs: // the user wants out now
		c.kill()
		<-allDone
		return fmt.Errorf("%v while stopping: killed every node without waiting for a clean shutdown", s)
	case <-timer.C: // a hung shutdown: kill, and say which
		var hung []string
		for _, n := range nodes {
			if !n.exited() {
				hung = append(hung, fmt.Sprintf("node %d (log %s)", n.ports.ID, n.logName))
			}
		}
		c.kill()
		<-allDone
		return fmt.Errorf("%s still running %v after SIGTERM: killed", strings.Join(hung, ", "), devStopTimeout)
	}
	if !clean {
		return nil
	}
	var unclean []string
	for _, n := range nodes {
		if n.waitErr != nil {
			unclean = append(unclean, fmt.Sprintf("node %d (%s)", n.ports.ID, n.why()))
		}
	}
	if len(unclean) > 0 {
		return fmt.Errorf("not every node shut down cleanly: %s", strings.Join(unclean, ", "))
	}
	return nil
}

// runDev prepares the directory, starts the cluster, prints the banner
// and then waits for a signal or a node's exit.
func runDev(ctx context.Context, o devOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary to run the nodes: %v", err)
	}
	// As the user named it, for every message and the banner: the
	// nodes are given its absolute form.
	dir := filepath.Clean(o.dataDir)
	saved, err := openDevDir(dir)
	if err != nil {
		return err
	}
	plan, err := planDevLayout(saved, o, dir)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %v", dir, err)
	}

	// From here on a signal is dev's to handle: while starting it ends
	// the start, and every node is stopped either way.
	sigs := make(chan os.Signal, 2)
	// SIGHUP too: a closed terminal should stop the nodes as Ctrl-C
	// does, not leave Pdeathsig to SIGKILL them.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	var c *devCluster
	for try := 1; ; try++ {
		l := plan
		if l.needsPorts() {
			ports, err := freeDevPorts(l.Host, 3*len(l.Nodes))
			if err != nil {
				return err
			}
			l = l.withPorts(ports)
		}
		if err := checkPortsFree(l); err != nil {
			return devPortHint(err, saved != nil, dir)
		}
		if saved == nil {
			if err := os.MkdirAll(absDir, 0o755); err != nil {
				return fmt.Errorf("--data-dir %s: %v", dir, err)
			}
			// Before any node directory exists: see openDevDir.
			if err := writeDevLayout(absDir, l); err != nil {
				return err
			}
		}
		// After the layout, as every file dev makes (openDevDir), and
		// again at each try: client.properties names the ports.
		var secured *devTLS
		if l.TLS != nil {
			if secured, err = prepareDevTLS(absDir, l, time.Now()); err != nil {
				return err
			}
			if try == 1 { // a retry finds what the first try made
				for _, note := range secured.notes() {
					fmt.Fprintf(stderr, "fjord dev: --tls: %s\n", note)
				}
			}
			// At each try: a retry may have new controller ports.
			if w := devTLSHostWarning(l); w != "" {
				fmt.Fprintf(stderr, "fjord dev: --tls: %s\n", w)
			}
		}
		what := "a new cluster"
		if saved != nil {
			what = "the cluster saved in " + devLayoutFile
		}
		if l.TLS != nil {
			what += ", --tls"
		}
		fmt.Fprintf(stderr, "fjord dev: starting %s under %s (%s) ...\n", plural(int64(len(l.Nodes)), "node"), dir, what)
		c = newDevCluster(l, dir, absDir, secured)
		err := c.start(ctx, exe, sigs)
		if err == nil {
			break
		}
		stopErr := c.stop(sigs, false)
		// Fresh ports for a first start only: a saved or --base-port
		// layout is the user's, and a metadata log bootstrapped with
		// one voter list ignores the next.
		if try < devStartTries && saved == nil && plan.needsPorts() && stopErr == nil && c.portTaken() {
			if rerr := c.removeNodeDirs(); rerr == nil {
				continue
			}
		}
		if errors.Is(err, errDevInterrupted) {
			err = fmt.Errorf("%w; every node stopped", err)
		}
		return errors.Join(err, stopErr)
	}

	printDevBanner(stdout, c)
	// due receives each killed node once its restart delay has passed;
	// room for all, so a timer never blocks on it after dev returns.
	due := make(chan *devNode, len(c.nodes))
	env := c.nodeEnv()
	for {
		select {
		case s := <-sigs: // Ctrl-C: the ordinary end
			fmt.Fprintf(stderr, "fjord dev: %v: stopping every node (a second signal kills them at once)\n", s)
			if err := c.stop(sigs, true); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "fjord dev: every node stopped; the data stays in %s\n", dir)
			return nil
		case n := <-c.exited: // a node died under the user
			if o.restartKilled > 0 && n.killed() {
				fmt.Fprintf(stderr, "fjord dev: node %d was killed (%v): starting it again in %v\n", n.ports.ID, n.waitErr, o.restartKilled)
				time.AfterFunc(o.restartKilled, func() { due <- n })
				continue
			}
			failure := fmt.Errorf("node %d exited by itself (%s); stopped the other nodes", n.ports.ID, n.why())
			fmt.Fprintf(stderr, "fjord dev: node %d exited by itself: stopping the others\n", n.ports.ID)
			return errors.Join(failure, c.stop(sigs, false))
		case n := <-due: // a killed node's turn to start again
			if err := c.spawn(n, exe, env); err != nil {
				return errors.Join(err, c.stop(sigs, false))
			}
			fmt.Fprintf(stderr, "fjord dev: node %d started again, pid %d\n", n.ports.ID, n.cmd.Process.Pid)
		case <-ctx.Done(): // the caller's context ended (run in-process)
			return errors.Join(ctx.Err(), c.stop(sigs, true))
		}
	}
}

// devPortHint adds what to do about a taken port, which depends on who
// chose it.
func devPortHint(err error, saved bool, dir string) error {
	if saved {
		return fmt.Errorf("%w: the cluster in %s was made with that port (%s); stop what holds it (another fjord dev on %s?), or remove %s to start over",
			err, dir, devLayoutFile, dir, dir)
	}
	return fmt.Errorf("%w: choose another --base-port, or leave it out for free ports", err)
}

// removeNodeDirs empties the nodes' data directories for a retry; every
// process must be gone.
func (c *devCluster) removeNodeDirs() error {
	for _, n := range c.nodes {
		if err := os.RemoveAll(n.dataDir); err != nil {
			return err
		}
	}
	return nil
}

// printDevBanner prints what a user needs to reach the cluster: the
// bootstrap servers, a table of the nodes, for a --tls cluster the
// client settings, commands to try, and how to stop.
func printDevBanner(w io.Writer, c *devCluster) {
	l := c.layout
	var kafka []string
	for _, n := range l.Nodes {
		kafka = append(kafka, l.addr(n.Kafka))
	}
	brokers := strings.Join(kafka, ",")
	fmt.Fprintf(w, "fjord dev: %s ready, data and logs under %s\n\n", plural(int64(len(l.Nodes)), "node"), c.dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPID\tKAFKA\tCONTROLLER\tHTTP\tLOG")
	for _, n := range c.nodes {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s%s\t%s\n", n.ports.ID, n.cmd.Process.Pid,
			l.addr(n.ports.Kafka), l.addr(n.ports.Controller), c.httpScheme(), l.addr(n.ports.HTTP), n.logName)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nBootstrap servers: %s\n", brokers)
	httpAddr := l.addr(l.Nodes[0].HTTP)
	var clientFlags string
	curl := fmt.Sprintf("curl -sS http://%s/v1/cluster", httpAddr)
	exports := []string{"FJORD_BROKERS=" + brokers}
	settings := "these brokers"
	if t := c.tls; t != nil {
		clientFlags, curl = t.cliFlags(), t.curl(httpAddr)
		exports = append(exports, t.cliEnv()...)
		settings = "these settings"
		fmt.Fprintf(w, "Security: SASL_SSL, %s as user %s (a super user), certificates of the CA %s (SHA-256 %s)\n",
			devSASLMechanism, t.user, t.caFile, t.caFingerprint)
		fmt.Fprintf(w, "\nClient settings, as librdkafka properties (with the password: kcat -F %s -L):\n\n", shellWord(t.propertiesFile))
		for _, line := range strings.Split(strings.TrimSuffix(t.properties(false), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
		fmt.Fprintf(w, "\nas fjord client flags:\n\n  %s\n", strings.TrimSpace(clientFlags))
	}
	fmt.Fprintf(w, "\nTry, in another terminal:\n\n")
	for _, cmd := range devTryCommands(shellWord(os.Args[0]), brokers, clientFlags, curl, l.replicationFactor()) {
		fmt.Fprintf(w, "  %s\n", cmd)
	}
	fmt.Fprintf(w, "\nor give every fjord command %s at once:\n\n", settings)
	for _, e := range exports {
		fmt.Fprintf(w, "  export %s\n", e)
	}
	fmt.Fprintf(w, "\nCtrl-C stops every node.\n")
}

// devTryCommands are the banner's commands to try, run as bin against
// brokers with clientFlags (the security flags, or ""), ending with the
// curl line. README's local-cluster block is the same lines without
// --brokers (FJORD_BROKERS set instead), and TestDevCluster runs that
// block and checks that each of its lines is one of these.
func devTryCommands(bin, brokers, clientFlags, curl string, replicas int) []string {
	b := " --brokers " + brokers + clientFlags
	return []string{
		fmt.Sprintf("%s topic create greetings --partitions 3 --replication-factor %d%s", bin, replicas, b),
		fmt.Sprintf(`printf 'alice:hello\nbob:hi\nalice:bye\n' | %s produce greetings --key-separator :%s`, bin, b),
		fmt.Sprintf(`%s consume greetings --from-beginning --max-messages 3 --format '%%p/%%o %%k=%%v\n'%s`, bin, b),
		fmt.Sprintf("%s topic describe greetings%s", bin, b),
		fmt.Sprintf("%s cluster describe%s", bin, b),
		curl,
	}
}

// shellWord quotes s for sh if it needs it, so a printed command can be
// pasted as it is: the binary's path is whatever the user ran.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-+=:@%,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
