package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fjordmq/fjord/internal/bench"
	"github.com/fjordmq/fjord/internal/freeport"
	"github.com/fjordmq/fjord/internal/netfault"
)

// The nodes of `fjord bench run --local`: `fjord serve` child processes
// of this same binary, on loopback ports chosen here, each with its own
// data directory under one temporary directory that stopping removes.
//
// One node is a cluster of one, started without a voter list, exactly
// as before clusters. Several (--nodes N) share one
// --controller-quorum-voters list, as internal/testcluster starts them
// for tests: every port is chosen first, since every node's voter list
// names every controller port, then every process is launched before
// any is waited for, because a voter of a quorum is ready only once a
// majority runs. testcluster itself is not used here: it fails a
// testing.TB where this must return errors, and a test package has no
// place in the binary.
//
//	<dir>/node-<id>/data      the node's --data-dir
//	<dir>/node-<id>/node.log  its stdout and stderr

// maxLocalNodes bounds --nodes: quorums are 3 or 5 voters, and more
// processes than that on one machine measure the machine's scheduler
// more than Fjord.
const maxLocalNodes = 5

const (
	localReadyTimeout = 60 * time.Second
	localStopTimeout  = 30 * time.Second
	localReadyPoll    = 20 * time.Millisecond
	localStartTries   = 3
	// localPortsPerNode: Kafka, controller, HTTP and pprof listeners.
	localPortsPerNode = 4
)

// localCluster is the running nodes of one --local run.
type localCluster struct {
	dir   string // holds node-<id>/ for each node; removed by stop
	nodes []*localNode
	// exe, voters and serveArgs are how a node is started, again after
	// a fault.
	exe       string
	voters    string
	serveArgs []string
	// network holds the nodes' namespaces (localClusterOptions.network),
	// or is nil on loopback. stop removes it.
	network *netfault.Network
	// keep leaves dir in place at stop, for a run that failed.
	keep bool
}

// localNode is one `fjord serve` child process.
type localNode struct {
	id             int
	dir            string // holds data/ and node.log
	kafkaAddr      string
	controllerAddr string
	httpAddr       string
	pprofAddr      string // empty: not profiled
	cmd            *exec.Cmd
	done           chan struct{} // closed when the process exited; waitErr is then set
	waitErr        error
	// logStart is where the current process's output begins in node.log.
	logStart int64
}

func (n *localNode) dataDir() string { return filepath.Join(n.dir, "data") }
func (n *localNode) logPath() string { return filepath.Join(n.dir, "node.log") }
func (n *localNode) pid() int        { return n.cmd.Process.Pid }

// localClusterOptions says what startLocalCluster starts.
type localClusterOptions struct {
	// parent holds the cluster's new temporary directory (the system's
	// temporary directory when empty).
	parent string
	nodes  int
	// pprof gives every node a --pprof-addr.
	pprof bool
	// serveArgs are more `fjord serve` flags for every node.
	serveArgs []string
	// network runs every node in a network namespace of its own
	// (internal/netfault), so the links between nodes can be faulted;
	// it needs root. Otherwise the nodes share the loopback interface.
	network bool
}

// startLocalCluster starts the nodes in a new temporary directory and
// waits until every one's /readyz answers 200. On failure no node is
// left running and the directory is gone.
func startLocalCluster(ctx context.Context, o localClusterOptions) (*localCluster, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--local: finding this binary: %w", err)
	}
	dir, err := os.MkdirTemp(o.parent, "fjord-bench-")
	if err != nil {
		return nil, fmt.Errorf("--local: %w", err)
	}
	for try := 1; ; try++ {
		c, err := launchLocalCluster(ctx, exe, dir, o)
		if err == nil {
			return c, nil
		}
		// A port found free can be taken before a node binds it. The
		// retry takes fresh ports for every node and fresh data
		// directories: a quorum's metadata log keeps the voter list it
		// was bootstrapped with. (In namespaces of their own nodes race
		// nobody for their ports.)
		if try < localStartTries && c != nil && c.network == nil && c.portTaken() {
			if rerr := c.removeNodeDirs(); rerr == nil {
				continue
			}
		}
		os.RemoveAll(dir)
		return nil, err
	}
}

// launchLocalCluster starts the processes and waits until all are
// ready. On failure every process is gone; the cluster is returned
// (when its nodes were made) so the caller can read their logs.
func launchLocalCluster(ctx context.Context, exe, dir string, o localClusterOptions) (c *localCluster, err error) {
	c = &localCluster{dir: dir, exe: exe, serveArgs: o.serveArgs}
	var addrs func(id int) []string
	if o.network {
		if c.network, err = netfault.New(o.nodes); err != nil {
			return nil, fmt.Errorf("--local: making the nodes' network: %w", err)
		}
		defer func() {
			if err != nil {
				err = errors.Join(err, c.network.Close())
			}
		}()
		// Each node has a network stack of its own: Fjord's default
		// ports on its own address.
		addrs = func(id int) []string {
			host := c.network.Addr(id).String()
			return []string{net.JoinHostPort(host, "9092"), net.JoinHostPort(host, "9093"), net.JoinHostPort(host, "8082"), net.JoinHostPort(host, "6060")}
		}
	} else {
		ports, err := freeLoopbackPorts(localPortsPerNode * o.nodes)
		if err != nil {
			return nil, err
		}
		addrs = func(id int) []string { return ports[localPortsPerNode*(id-1):] }
	}
	var voters []string
	for i := range o.nodes {
		p := addrs(i + 1)
		n := &localNode{
			id:             i + 1,
			dir:            filepath.Join(dir, "node-"+strconv.Itoa(i+1)),
			kafkaAddr:      p[0],
			controllerAddr: p[1],
			httpAddr:       p[2],
		}
		if o.pprof {
			n.pprofAddr = p[3]
		}
		c.nodes = append(c.nodes, n)
		voters = append(voters, strconv.Itoa(n.id)+"@"+n.controllerAddr)
	}
	if o.nodes > 1 {
		c.voters = strings.Join(voters, ",")
	}
	for _, n := range c.nodes {
		if err := n.spawn(c); err != nil {
			c.kill()
			return c, err
		}
	}
	// One deadline for all: a quorum's nodes become ready together.
	deadline := time.Now().Add(localReadyTimeout)
	for _, n := range c.nodes {
		if err := n.waitReady(ctx, deadline); err != nil {
			c.kill()
			return c, err
		}
	}
	return c, nil
}

// spawn starts the node's process and returns at once.
func (n *localNode) spawn(c *localCluster) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("--local: %w", err)
	}
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	if fi, err := log.Stat(); err == nil {
		n.logStart = fi.Size()
	}
	// Every serve flag is given, and --config "" too, so FJORD_*
	// variables in the user's environment cannot change the node.
	args := []string{"serve",
		"--config", "",
		"--node-id", strconv.Itoa(n.id),
		"--data-dir", n.dataDir(),
		"--kafka-addr", n.kafkaAddr,
		"--advertised-kafka-addr", n.kafkaAddr,
		"--controller-addr", n.controllerAddr,
		"--http-addr", n.httpAddr,
		"--pprof-addr", n.pprofAddr,
		"--auto-create-topics=false",
		"--num-partitions", "1",
		"--log-level", "warn",
		// A --group catch-up run's window opens before its consumers
		// join; Kafka's 3 s wait for more members would be measured.
		"--group-initial-rebalance-delay-ms", "0",
	}
	if c.voters != "" {
		args = append(args, "--controller-quorum-voters", c.voters)
	}
	args = append(args, c.serveArgs...)
	cmd := exec.Command(c.exe, args...)
	if c.network != nil {
		cmd = c.network.Command(n.id, c.exe, args...)
	}
	cmd.SysProcAttr = nodeProcAttr()
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("--local: starting %s serve: %w", c.exe, err)
	}
	// A node started again (fjord verify's faults) gets a new process
	// and a new done; the old process's waiter closes only its own.
	done := make(chan struct{})
	n.cmd, n.done = cmd, done
	go func() {
		n.waitErr = cmd.Wait()
		close(done)
	}()
	return nil
}

// exited reports whether the node's current process has exited.
func (n *localNode) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// restart starts again every node of ids whose process has exited and
// waits until all of them are ready, together: nodes killed at once
// form their quorum again only when a majority runs.
func (c *localCluster) restart(ctx context.Context, ids ...int) error {
	var started []*localNode
	for _, id := range ids {
		n := c.nodes[id-1]
		if !n.exited() {
			continue
		}
		if err := n.spawn(c); err != nil {
			return err
		}
		started = append(started, n)
	}
	deadline := time.Now().Add(localReadyTimeout)
	for _, n := range started {
		if err := n.waitReady(ctx, deadline); err != nil {
			return err
		}
	}
	return nil
}

// name is how messages call the node: "the local node" alone, "local
// node 2" in a cluster.
func (n *localNode) name(c *localCluster) string {
	if len(c.nodes) == 1 {
		return "the local node"
	}
	return "local node " + strconv.Itoa(n.id)
}

func (n *localNode) waitReady(ctx context.Context, deadline time.Time) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	tick := time.NewTicker(localReadyPoll)
	defer tick.Stop()
	var last error
	for {
		resp, err := client.Get("http://" + n.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		last = err
		select {
		case <-n.done: // no point asking a process that is gone
			return fmt.Errorf("--local: node %d exited before it was ready (%v); last lines of its log:\n%s", n.id, n.waitErr, n.logTail(20))
		case <-timeout.C: // too slow
			return fmt.Errorf("--local: node %d was not ready after %v (%v); last lines of its log:\n%s", n.id, localReadyTimeout, last, n.logTail(20))
		case <-ctx.Done(): // interrupted
			return ctx.Err()
		case <-tick.C: // ask again
		}
	}
}

// portTaken reports whether a node's failed start found one of its
// ports in use.
func (c *localCluster) portTaken() bool {
	for _, n := range c.nodes {
		if strings.Contains(n.logTail(20), "address already in use") {
			return true
		}
	}
	return false
}

// removeNodeDirs empties the cluster's directory for a retry; every
// process must be gone.
func (c *localCluster) removeNodeDirs() error {
	for _, n := range c.nodes {
		if err := os.RemoveAll(n.dir); err != nil {
			return err
		}
	}
	return nil
}

// kill SIGKILLs every running node and waits for each to exit.
func (c *localCluster) kill() {
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			n.cmd.Process.Kill()
		}
	}
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			<-n.done
		}
	}
}

// seeds is every node's Kafka address, for the clients' bootstrap.
func (c *localCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.kafkaAddr)
	}
	return s
}

// processes names the nodes for the run's resource figures; a lone
// node needs no id.
func (c *localCluster) processes() []bench.NodeProcess {
	var ps []bench.NodeProcess
	for _, n := range c.nodes {
		p := bench.NodeProcess{PID: n.pid()}
		if len(c.nodes) > 1 {
			p.ID = n.id
		}
		ps = append(ps, p)
	}
	return ps
}

// watch calls died with the first node that exits by itself before
// stop is called or ctx ends, and the error that explains it.
func (c *localCluster) watch(ctx context.Context, died func(error)) {
	for _, n := range c.nodes {
		go func() {
			select {
			case <-n.done: // exited by itself
				died(fmt.Errorf("%s exited during the run (%v); last lines of its log:\n%s", n.name(c), n.waitErr, n.logTail(20)))
			case <-ctx.Done(): // the run is over
			}
		}()
	}
}

// stop shuts every node down with SIGTERM, all at once (SIGKILL for one
// that has not exited after localStopTimeout), and removes the
// directory. An unclean exit is an error: a benchmark that crashes a
// node has found a bug.
func (c *localCluster) stop() error {
	if !c.keep {
		defer os.RemoveAll(c.dir)
	}
	err := c.stopNodes()
	if c.network != nil {
		// The namespaces go once no process runs in them.
		err = errors.Join(err, c.network.Close())
	}
	return err
}

// stopNodes is stop without removing the directory.
func (c *localCluster) stopNodes() error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.stop(n.name(c))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *localNode) stop(name string) error {
	select {
	case <-n.done: // already gone; the run reported why
		return nil
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	t := time.NewTimer(localStopTimeout)
	defer t.Stop()
	select {
	case <-n.done: // exited
	case <-t.C: // hung: kill it
		n.cmd.Process.Kill()
		<-n.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM (killed); last lines of its log:\n%s", name, localStopTimeout, n.logTail(20))
	}
	if n.waitErr != nil {
		return fmt.Errorf("%s did not shut down cleanly (%v); last lines of its log:\n%s", name, n.waitErr, n.logTail(20))
	}
	return nil
}

// logSinceStart returns what the node's current process has written.
func (n *localNode) logSinceStart() string {
	b, err := os.ReadFile(n.logPath())
	if err != nil || int64(len(b)) < n.logStart {
		return ""
	}
	return string(b[n.logStart:])
}

// logTail returns the last lines of the node's output.
func (n *localNode) logTail(lines int) string {
	b, err := os.ReadFile(n.logPath())
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	parts := bytes.Split(b, []byte{'\n'})
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte{'\n'}))
}

// freeLoopbackPorts returns n distinct 127.0.0.1 addresses whose ports
// were free a moment ago: a node cannot report a port it picked itself
// (":0") back to this process, and a quorum's voter list must name every
// controller port before any node starts, so the ports are chosen here,
// with the small race that a retry covers. They are outside the kernel's
// ephemeral range, so a killed node's ports are still free when it
// starts again (internal/freeport).
func freeLoopbackPorts(n int) ([]string, error) {
	ports, err := freeport.Take("127.0.0.1", n)
	if err != nil {
		return nil, fmt.Errorf("--local: %w", err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}
