package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// The application runs in processes of its own, under a supervisor that
// starts it again whenever it ends, as systemd or Kubernetes would: the
// test can SIGKILL it, and an application whose client is stuck can end
// itself (ctpEvents.stuck) and be replaced, which a goroutine stuck in a
// cgo call could not. A process is the test binary started again with
// ctpAppEnv naming the client, the rest of its ctpConfig in the
// variables below; TestMain sees ctpAppEnv first and runs ctpAppMain
// instead of the tests.
//
// The application reports on stdout, a line per ctpEvents call:
//
//	begun N       a transaction is open with its N records written
//	committed N   it committed
//	restarted W   it went back to the committed offsets because of W
//	stuck W       its client is stuck in W; it exits
//
// and writes its clients' logs to stderr. It runs until its stdin
// closes: the test closes it to stop the application, and it closes by
// itself when the test process dies, so no application outlives it.
const (
	ctpAppEnv            = "FJORD_CTP_APP"
	ctpBrokersEnv        = "FJORD_CTP_BROKERS"
	ctpInEnv             = "FJORD_CTP_IN"
	ctpOutEnv            = "FJORD_CTP_OUT"
	ctpGroupEnv          = "FJORD_CTP_GROUP"
	ctpTxnIDEnv          = "FJORD_CTP_TXN_ID"
	ctpSessionTimeoutEnv = "FJORD_CTP_SESSION_TIMEOUT"
)

func (c ctpConfig) environ(client ctpClient) []string {
	return []string{
		ctpAppEnv + "=" + client.name(),
		ctpBrokersEnv + "=" + c.brokers,
		ctpInEnv + "=" + c.in,
		ctpOutEnv + "=" + c.out,
		ctpGroupEnv + "=" + c.group,
		ctpTxnIDEnv + "=" + c.txnID,
		ctpSessionTimeoutEnv + "=" + c.sessionTimeout.String(),
	}
}

// ctpAppMain is the process's main when ctpAppEnv names a client: it
// returns the exit code.
func ctpAppMain(clientName string) int {
	var client ctpClient
	for _, c := range ctpClients {
		if c.name() == clientName {
			client = c
		}
	}
	sessionTimeout, err := time.ParseDuration(os.Getenv(ctpSessionTimeoutEnv))
	if client == nil || err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: no such client, or %s: %v\n", ctpAppEnv, clientName, ctpSessionTimeoutEnv, err)
		return 2
	}
	cfg := ctpConfig{brokers: os.Getenv(ctpBrokersEnv), in: os.Getenv(ctpInEnv), out: os.Getenv(ctpOutEnv),
		group: os.Getenv(ctpGroupEnv), txnID: os.Getenv(ctpTxnIDEnv), sessionTimeout: sessionTimeout}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
		// A client that does not let go must not keep the process.
		time.AfterFunc(30*time.Second, func() {
			fmt.Fprintln(os.Stderr, "still running 30 s after stdin closed")
			os.Exit(3)
		})
	}()
	runCTPApp(ctx, client, cfg, &ctpLineEvents{w: os.Stdout})
	return 0
}

// ctpLineEvents writes ctpEvents as the process's lines.
type ctpLineEvents struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *ctpLineEvents) line(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

func (l *ctpLineEvents) begun(n int)           { l.line("begun %d", n) }
func (l *ctpLineEvents) committed(n int)       { l.line("committed %d", n) }
func (l *ctpLineEvents) restarted(why string)  { l.line("restarted %s", oneLine(why)) }
func (l *ctpLineEvents) clientLog(line string) { fmt.Fprintln(os.Stderr, line) }

func (l *ctpLineEvents) stuck(what string) {
	l.line("stuck %s", oneLine(what))
	os.Exit(4)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// ctpApp is one instance of the application: its process, and the
// supervisor goroutine that starts the next when one ends, until stop.
type ctpApp struct {
	r       *ctpRun
	client  ctpClient
	cfg     ctpConfig
	stopped chan struct{} // closed when the supervisor has returned
	stopErr error         // the last process's exit; set before stopped closes
	mu      struct {
		sync.Mutex
		p        *ctpProcess // the current process
		killed   bool        // the test SIGKILLed the current process
		stopping bool
	}
}

// startApp starts an instance of client's application with cfg,
// reporting to r. The test's cleanup ends it if it still runs.
func (r *ctpRun) startApp(t *testing.T, client ctpClient, cfg ctpConfig) *ctpApp {
	t.Helper()
	a := &ctpApp{r: r, client: client, cfg: cfg, stopped: make(chan struct{})}
	p, err := r.spawn(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.p = p
	go a.supervise()
	t.Cleanup(func() {
		a.mu.Lock()
		a.mu.stopping = true
		p := a.mu.p
		a.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-a.stopped
		if t.Failed() {
			t.Logf("%s: its last process's last stderr lines:\n%s", cfg.txnID, p.stderr.String())
		}
	})
	return a
}

// supervise waits for each process to end and starts the next.
func (a *ctpApp) supervise() {
	defer close(a.stopped)
	for {
		a.mu.Lock()
		p := a.mu.p
		a.mu.Unlock()
		<-p.done
		a.mu.Lock()
		if a.mu.stopping {
			a.stopErr = p.err
			a.mu.Unlock()
			return
		}
		if !a.mu.killed {
			stderr := strings.Split(p.stderr.String(), "\n")
			a.r.noteRestart(fmt.Sprintf("%s: process %d exited by itself (%v), its last word %q; its last stderr lines:\n%s",
				a.cfg.txnID, p.cmd.Process.Pid, p.err, p.lastLine(), strings.Join(stderr[max(0, len(stderr)-5):], "\n")))
		}
		a.mu.killed = false
		next, err := a.r.spawn(a.client, a.cfg)
		if err != nil {
			a.stopErr = err
			a.mu.Unlock()
			return
		}
		a.mu.p = next
		a.r.processStarts.Add(1)
		a.mu.Unlock()
	}
}

// kill SIGKILLs the current process and waits until it is reaped; the
// supervisor starts the next. It returns the last line the process
// wrote.
func (a *ctpApp) kill() string {
	a.mu.Lock()
	p := a.mu.p
	a.mu.killed = true
	a.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
	return p.lastLine()
}

// stop asks the current process to end (its stdin closes) and waits for
// it; it must exit cleanly within 30 s.
func (a *ctpApp) stop(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	a.mu.stopping = true
	p := a.mu.p
	a.mu.Unlock()
	_ = p.stdin.Close()
	select {
	case <-a.stopped:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-a.stopped
		t.Fatalf("%s: process %d still running 30 s after its stdin closed", a.cfg.txnID, p.cmd.Process.Pid)
	}
	if a.stopErr != nil {
		t.Errorf("%s: process %d, stopped: %v", a.cfg.txnID, p.cmd.Process.Pid, a.stopErr)
	}
}

// ctpProcess is one application process, its stdout read into a ctpRun.
type ctpProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lineRing
	done   chan struct{} // closed once the process is reaped
	err    error         // its exit; set before done closes
	mu     sync.Mutex
	last   string // the last line it wrote to stdout
}

// spawn starts an application process of client with cfg, reporting to
// r; a goroutine reads its stdout to the end and reaps it.
func (r *ctpRun) spawn(client ctpClient, cfg ctpConfig) (*ctpProcess, error) {
	p := &ctpProcess{cmd: exec.Command(os.Args[0]), stderr: &lineRing{max: 300}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), cfg.environ(client)...)
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s application: %w", client.name(), err)
	}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.mu.Lock()
			p.last = s.Text()
			p.mu.Unlock()
			r.apply(s.Text())
		}
		p.err = p.cmd.Wait() // after stdout's end, as exec requires
	}()
	return p, nil
}

func (p *ctpProcess) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// apply is one line of an application process's stdout.
func (r *ctpRun) apply(line string) {
	word, rest, _ := strings.Cut(line, " ")
	n, err := strconv.Atoi(rest)
	switch {
	case word == "begun" && err == nil:
		select { // a signal per transaction, while there is room
		case r.begun <- struct{}{}:
		default:
		}
	case word == "committed" && err == nil:
		r.processed.Add(int64(n))
	case word == "restarted":
		r.noteRestart(rest)
	}
}

// noteRestart counts a restart and keeps why for logRestarts.
func (r *ctpRun) noteRestart(why string) {
	r.restarts.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restartsToLog = append(r.restartsToLog, fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), why))
}

// logRestarts logs the restarts noted since it last ran, on the test's
// goroutine.
func (r *ctpRun) logRestarts(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.restartsToLog {
		t.Logf("%s restarted: %s", r.name, s)
	}
	r.restartsToLog = nil
}
