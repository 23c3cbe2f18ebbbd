package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/bench"
)

// The servers of one run: one, as before, or, for streams with
// replicas (--replicas 3, Fjord's RF=3), a cluster of that many, each a
// child process with its own store directory, routes between them on
// loopback. As Fjord's `bench run --local --nodes` does, the route ports
// are chosen here before any server starts (every server's route list
// names every other's port), every server is launched before any is
// waited for (JetStream's meta layer needs a majority to elect its
// leader), and a route port taken in between restarts them all with
// fresh ports and store directories.
//
//	<store>/s<i>/jetstream/...  server i's JetStream store (a cluster)
//	<store>/jetstream/...       the lone server's

// maxReplicas is JetStream's limit on a stream's replicas.
const maxReplicas = 5

// clusterStartTries bounds the restarts after a taken route port.
const clusterStartTries = 3

// serverCluster is the running servers of one run.
type serverCluster struct {
	servers []*serverProcess
}

// startServers starts count servers from exe (count 1: a lone server, no
// routes) with their stores under store, and waits until every one
// reports its URL: in a cluster, once it knows the JetStream meta
// leader. On failure no server is left running.
func startServers(exe string, count int, store, sync string, stderr io.Writer) (*serverCluster, error) {
	if count < 1 || count > maxReplicas {
		return nil, fmt.Errorf("%w: %d servers (allowed: 1 to %d)", errBadReplicas, count, maxReplicas)
	}
	if count == 1 {
		p, err := spawnServer(exe, append([]string{"server"}, serverConfig{StoreDir: store, Sync: sync}.args()...), stderr)
		if err != nil {
			return nil, err
		}
		return &serverCluster{servers: []*serverProcess{p}}, nil
	}
	for try := 1; ; try++ {
		watch := &portWatch{w: stderr}
		c, err := launchCluster(exe, count, store, sync, watch)
		if err == nil {
			return c, nil
		}
		if try < clusterStartTries && watch.taken.Load() {
			if rerr := removeStores(store, count); rerr == nil {
				continue
			}
		}
		return nil, err
	}
}

func launchCluster(exe string, count int, store, sync string, stderr io.Writer) (*serverCluster, error) {
	ports, err := freeLoopbackPorts(count)
	if err != nil {
		return nil, err
	}
	configs := make([]serverConfig, count)
	for i := range configs {
		cfg := serverConfig{
			StoreDir:    filepath.Join(store, "s"+strconv.Itoa(i+1)),
			Sync:        sync,
			ClusterPort: ports[i],
			Name:        "fjord-bench-nats-" + strconv.Itoa(i+1),
		}
		for j, p := range ports {
			if j != i {
				cfg.Routes = append(cfg.Routes, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			}
		}
		if err := os.MkdirAll(cfg.StoreDir, 0o755); err != nil {
			return nil, err
		}
		configs[i] = cfg
	}
	c := &serverCluster{}
	for _, cfg := range configs {
		p, err := launchServer(exe, append([]string{"server"}, cfg.args()...), stderr)
		if err != nil {
			c.abandon(0)
			return nil, err
		}
		c.servers = append(c.servers, p)
	}
	for i, p := range c.servers {
		if err := p.awaitURL(); err != nil {
			// p is gone; those before it run, those after it are not
			// yet awaited.
			c.servers = append(c.servers[:i:i], c.servers[i+1:]...)
			c.abandon(i)
			return nil, fmt.Errorf("server %d of %d: %w", i+1, count, err)
		}
	}
	return c, nil
}

// abandon kills every server: the first awaited ones were awaited (their
// URL read), the rest were only launched.
func (c *serverCluster) abandon(awaited int) {
	for i, p := range c.servers {
		if i < awaited {
			_ = p.Stop(serverStopTimeout)
			continue
		}
		_ = p.cmd.Process.Kill()
		_ = p.awaitURL() // reaps it
	}
}

// URLs are the servers' client URLs, in server order.
func (c *serverCluster) URLs() []string {
	var urls []string
	for _, p := range c.servers {
		urls = append(urls, p.URL)
	}
	return urls
}

// Nodes names the servers for the run's resource figures; a lone
// server needs no number.
func (c *serverCluster) Nodes() []bench.NodeProcess {
	var nodes []bench.NodeProcess
	for i, p := range c.servers {
		n := bench.NodeProcess{PID: p.PID()}
		if len(c.servers) > 1 {
			n.ID = i + 1
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// Stop stops every server at once, each as serverProcess.Stop does.
func (c *serverCluster) Stop(timeout time.Duration) error {
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, p := range c.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(timeout); err != nil {
				errs[i] = fmt.Errorf("server %d: %w", i+1, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// removeStores empties the cluster's store directories for a restart.
func removeStores(store string, count int) error {
	for i := range count {
		if err := os.RemoveAll(filepath.Join(store, "s"+strconv.Itoa(i+1))); err != nil {
			return err
		}
	}
	return nil
}

// portWatch passes the servers' output on and notes a route listener
// that found its port taken (the server logs it as fatal and exits).
// The servers' output is copied by one goroutine per server (os/exec),
// so writes are serialized here: the writer behind (a test's buffer, a
// file) need not be safe for concurrent use.
type portWatch struct {
	mu    sync.Mutex
	w     io.Writer
	taken atomic.Bool
}

func (p *portWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "address already in use") {
		p.taken.Store(true)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// freeLoopbackPorts returns n distinct ports on 127.0.0.1 that were free
// a moment ago, all held open together so the kernel cannot hand one out
// twice; a server can pick its own client port, but its route port must
// be in the others' route lists before it starts.
func freeLoopbackPorts(n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
