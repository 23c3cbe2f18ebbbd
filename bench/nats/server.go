package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The server runs in a child process of the peer binary (the binary
// re-executes itself with the "server" argument) so that the node's peak
// RSS and CPU seconds read from /proc/<pid> are the server's alone, as
// Fjord's are measured, and not mixed with the load generator's.
//
// Protocol between the two processes:
//
//	parent                          child ("server" mode)
//	  start child, stdin a pipe  ->   start nats-server, wait until ready
//	                             <-   stdout: "url nats://127.0.0.1:PORT\n"
//	  ... run the workload ...
//	  close stdin                ->   stdin EOF: shut down, exit 0
//
// stdin is the child's lifeline: if the parent dies the pipe closes and
// the child shuts down instead of lingering.

// serverReadyTimeout bounds how long a server may take to start
// JetStream (it recovers nothing: the store dir is always fresh) and, in
// a cluster, to hear of a meta leader.
const serverReadyTimeout = 30 * time.Second

// serverConfig is what the parent decides about the server.
type serverConfig struct {
	// StoreDir is JetStream's store directory; it must exist.
	StoreDir string
	// Sync is "default" (the server's periodic fsync, every 2 minutes),
	// "always" (fsync after every write), or a Go duration.
	Sync string
	// ClusterPort is the server's route listener on 127.0.0.1; 0 for a
	// lone server. A clustered server also needs Name, unique in its
	// cluster (JetStream names its peers by it), and Routes.
	ClusterPort int
	Name        string
	// Routes are the route URLs (nats://127.0.0.1:PORT) of the other
	// servers, which this one dials.
	Routes []string
}

// args renders c as the child's command line after "server".
func (c serverConfig) args() []string {
	args := []string{"--store", c.StoreDir, "--sync", c.Sync}
	if c.ClusterPort != 0 {
		args = append(args, "--name", c.Name, "--cluster-port", strconv.Itoa(c.ClusterPort), "--routes", strings.Join(c.Routes, ","))
	}
	return args
}

// clusterName is every bench cluster's name; a server refuses routes
// from a cluster of another name.
const clusterName = "fjord-bench"

// syncSetting describes the fsync behaviour for Settings.
func syncSetting(sync string) string {
	switch sync {
	case "", "default":
		return "default: fsync every 2m0s in the background (not per message); the OS page cache holds acknowledged records until then"
	case "always":
		return "always: fsync after every write, before the PubAck"
	default:
		return "every " + sync + " in the background (not per message)"
	}
}

// parseSync checks a --sync value and returns the server options it
// means.
func parseSync(sync string) (interval time.Duration, always bool, err error) {
	switch sync {
	case "", "default":
		return 0, false, nil
	case "always":
		return 0, true, nil
	}
	d, err := time.ParseDuration(sync)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%w: %q (want default, always or a positive duration)", errBadSync, sync)
	}
	return d, false, nil
}

// startServer starts an embedded nats-server with JetStream on file
// storage, listening on 127.0.0.1 at a port the kernel picks, and waits
// until it accepts clients.
func startServer(cfg serverConfig, logTo io.Writer) (*server.Server, error) {
	interval, always, err := parseSync(cfg.Sync)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "fjord-bench-nats",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		// Zero keeps the server's default of 2 minutes.
		SyncInterval: interval,
		SyncAlways:   always,
		NoSigs:       true,
		// No HTTP monitoring, no leafnodes: the bench talks only to the
		// client port, and a cluster's servers to each other's routes.
		HTTPPort: 0,
	}
	if cfg.ClusterPort != 0 {
		opts.ServerName = cfg.Name
		opts.Cluster = server.ClusterOpts{
			Name: clusterName,
			Host: "127.0.0.1",
			Port: cfg.ClusterPort,
			// The server's default, "accept", compresses only when a
			// peer asks, and no peer here does; saying "off" keeps it so
			// if the default changes: Fjord's followers fetch raw bytes.
			Compression: server.CompressionOpts{Mode: server.CompressionOff},
		}
		opts.Routes = server.RoutesFromStr(strings.Join(cfg.Routes, ","))
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	s.SetLogger(&warnLogger{w: logTo}, false, false)
	s.Start()
	if !s.ReadyForConnections(serverReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("%w within %v", errServerNotReady, serverReadyTimeout)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		return nil, errNoJetStream
	}
	if cfg.ClusterPort != 0 {
		if err := awaitMetaLeader(s, serverReadyTimeout); err != nil {
			s.Shutdown()
			return nil, err
		}
	}
	return s, nil
}

// metaLeaderPoll is how often a clustered server's JetStream health is
// asked while it waits for the cluster to form.
const metaLeaderPoll = 20 * time.Millisecond

// awaitMetaLeader waits until the server's JetStream meta layer has a
// leader and is current with it: until then a stream with replicas
// cannot be created, and a server that answered its URL earlier would
// make the first CreateStream race the cluster's formation. The peers
// form it only once a majority runs, so the parent starts every server
// before it waits for any.
func awaitMetaLeader(s *server.Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		h := s.Healthz(&server.HealthzOptions{JSMetaOnly: true})
		if h.StatusCode == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no JetStream meta leader within %v (%s)", errServerNotReady, timeout, h.Error)
		}
		time.Sleep(metaLeaderPoll)
	}
}

// serverMain is the child process: it runs the server until stdin
// closes. args follow "server".
func serverMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg serverConfig
	for i := 0; i < len(args); i++ {
		if i+1 >= len(args) {
			fmt.Fprintf(stderr, "nats server: flag %s needs a value\n", args[i])
			return 2
		}
		switch args[i] {
		case "--store":
			cfg.StoreDir = args[i+1]
		case "--sync":
			cfg.Sync = args[i+1]
		case "--name":
			cfg.Name = args[i+1]
		case "--cluster-port":
			port, err := strconv.Atoi(args[i+1])
			if err != nil || port <= 0 || port > 65535 {
				fmt.Fprintf(stderr, "nats server: --cluster-port %q: want a port number\n", args[i+1])
				return 2
			}
			cfg.ClusterPort = port
		case "--routes":
			cfg.Routes = strings.Split(args[i+1], ",")
		default:
			fmt.Fprintf(stderr, "nats server: unknown flag %s\n", args[i])
			return 2
		}
		i++
	}
	if cfg.StoreDir == "" {
		fmt.Fprintln(stderr, "nats server: --store is required")
		return 2
	}
	if cfg.ClusterPort != 0 && cfg.Name == "" {
		fmt.Fprintln(stderr, "nats server: --cluster-port needs --name")
		return 2
	}
	// Ctrl-C reaches the whole process group; the parent then stops the
	// run and closes our stdin, so the server shuts down cleanly after
	// the parent is done with it rather than under it.
	signal.Ignore(os.Interrupt)
	s, err := startServer(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nats server:", err)
		return 1
	}
	fmt.Fprintf(stdout, "url %s\n", s.ClientURL())
	// Block until the parent closes our stdin (or dies).
	_, _ = io.Copy(io.Discard, stdin)
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// serverProcess is a running child server, seen from the parent.
type serverProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader // the ready line comes on it
	// URL is the client URL, nats://127.0.0.1:PORT.
	URL string
	// exited is closed when the child has exited; err then holds
	// cmd.Wait's result.
	exited chan struct{}
	err    error
}

// PID is the child's process id: the node whose resources are measured.
func (p *serverProcess) PID() int { return p.cmd.Process.Pid }

// spawnServer starts exe with args (which select server mode) and
// waits for the child to report its URL.
func spawnServer(exe string, args []string, stderr io.Writer) (*serverProcess, error) {
	p, err := launchServer(exe, args, stderr)
	if err != nil {
		return nil, err
	}
	if err := p.awaitURL(); err != nil {
		return nil, err
	}
	return p, nil
}

// launchServer starts the child and returns at once: a server of a
// cluster reports its URL only once the cluster has formed, which needs
// a majority of its servers running.
func launchServer(exe string, args []string, stderr io.Writer) (*serverProcess, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nats server process: %w", err)
	}
	return &serverProcess{cmd: cmd, stdin: stdin, stdout: stdout, exited: make(chan struct{})}, nil
}

// awaitURL reads the child's ready line. On failure the child is gone.
func (p *serverProcess) awaitURL() error {
	// The child prints one line when ready; reading it can only end
	// with that line, EOF (the child died) or a read error, so no timer
	// is needed here: the child bounds its own start-up. Wait starts
	// only after the read, since it closes the pipe.
	line, readErr := bufio.NewReader(p.stdout).ReadString('\n')
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "url ")
	if readErr != nil || !ok || url == "" {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%w (read %q: %v; exit: %v)", errServerNotReady, line, readErr, p.err)
	}
	p.URL = url
	return nil
}

// Stop asks the child to shut down and waits for it, killing it if it
// has not exited within timeout.
func (p *serverProcess) Stop(timeout time.Duration) error {
	_ = p.stdin.Close()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		// A clean shutdown exits 0.
		return p.err
	case <-t.C:
		// The child ignored its lifeline; do not leave it behind.
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("nats server process did not exit within %v; killed", timeout)
	}
}

// warnLogger passes the server's warnings and errors to w and drops its
// notices, debug and trace lines, which would drown the progress line.
type warnLogger struct{ w io.Writer }

func (l *warnLogger) Noticef(string, ...any) {}
func (l *warnLogger) Debugf(string, ...any)  {}
func (l *warnLogger) Tracef(string, ...any)  {}
func (l *warnLogger) Warnf(format string, v ...any) {
	fmt.Fprintf(l.w, "nats-server: warning: "+format+"\n", v...)
}
func (l *warnLogger) Errorf(format string, v ...any) {
	fmt.Fprintf(l.w, "nats-server: error: "+format+"\n", v...)
}
func (l *warnLogger) Fatalf(format string, v ...any) {
	fmt.Fprintf(l.w, "nats-server: fatal: "+format+"\n", v...)
	os.Exit(1)
}
