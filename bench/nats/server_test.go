package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestMain lets the test binary be the child server process, as the
// peer binary is: spawnServer(os.Args[0], "server", ...) runs this.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		os.Exit(serverMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestServerProcessLifecycle(t *testing.T) {
	store := t.TempDir()
	var stderr bytes.Buffer
	p, err := spawnServer(os.Args[0], append([]string{"server"}, serverConfig{StoreDir: store, Sync: "default"}.args()...), &stderr)
	if err != nil {
		t.Fatalf("spawn: %v (stderr: %s)", err, stderr.String())
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = p.Stop(10 * time.Second)
		}
	})
	if p.PID() == os.Getpid() {
		t.Fatal("server runs in this process, not a child")
	}
	if !strings.HasPrefix(p.URL, "nats://127.0.0.1:") {
		t.Fatalf("URL = %q, want a loopback client URL", p.URL)
	}

	nc, err := nats.Connect(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream not enabled in the child: %v", err)
	}
	// The store is the directory we gave, on file storage.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "s", Subjects: []string{"s.0"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(store + "/jetstream"); err != nil || len(entries) == 0 {
		t.Fatalf("store dir %s/jetstream: %v entries, err %v", store, len(entries), err)
	}
	nc.Close()

	pid := p.PID()
	stopped = true
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v (stderr: %s)", err, stderr.String())
	}
	// Reaped and gone: signal 0 to a dead, reaped pid fails.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("child %d still exists after Stop: kill(0) = %v", pid, err)
	}
}

func TestServerProcessBadArgs(t *testing.T) {
	var stderr bytes.Buffer
	_, err := spawnServer(os.Args[0], []string{"server", "--sync", "sometimes", "--store", t.TempDir()}, &stderr)
	if !errors.Is(err, errServerNotReady) {
		t.Fatalf("err = %v, want errServerNotReady", err)
	}
	if !strings.Contains(stderr.String(), "sometimes") {
		t.Fatalf("child's stderr does not say what was wrong: %q", stderr.String())
	}
}

func TestParseSync(t *testing.T) {
	cases := []struct {
		in       string
		interval time.Duration
		always   bool
		ok       bool
	}{
		{"default", 0, false, true},
		{"", 0, false, true},
		{"always", 0, true, true},
		{"1s", time.Second, false, true},
		{"0s", 0, false, false},
		{"-1s", 0, false, false},
		{"never", 0, false, false},
	}
	for _, c := range cases {
		interval, always, err := parseSync(c.in)
		if (err == nil) != c.ok || interval != c.interval || always != c.always {
			t.Errorf("parseSync(%q) = %v, %v, %v; want %v, %v, ok=%v", c.in, interval, always, err, c.interval, c.always, c.ok)
		}
		if !c.ok && !errors.Is(err, errBadSync) {
			t.Errorf("parseSync(%q) error %v is not errBadSync", c.in, err)
		}
	}
}

// A cluster of three server processes with routes between them: a
// stream asked for with three replicas has them (its info names a
// leader and two current followers, on three distinct servers), and
// a message published through one server is read through another.
func TestServerClusterStreamReplicas(t *testing.T) {
	var stderr bytes.Buffer
	c, err := startServers(os.Args[0], 3, t.TempDir(), "default", &stderr)
	if err != nil {
		t.Fatalf("start: %v (stderr: %s)", err, stderr.String())
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop(10 * time.Second)
		}
	})
	urls := c.URLs()
	if len(urls) != 3 {
		t.Fatalf("URLs %v, want three", urls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := testDriver(t, driverConfig{URLs: urls, Replicas: 3})
	if err := d.CreateTopics(ctx, []string{"r3"}, 2); err != nil {
		t.Fatal(err)
	}
	if got := d.Settings()["stream.replicas"]; got != "3" {
		t.Errorf("driver says stream.replicas %q, want 3", got)
	}

	// Asked independently, through the third server.
	js := jetStreamClient(t, urls[2])
	// The followers catch up in the background: ask until both are
	// current, or the deadline passes and the check below says what is
	// missing.
	var info *jetstream.StreamInfo
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
poll:
	for {
		s, err := js.Stream(ctx, "r3")
		if err != nil {
			t.Fatal(err)
		}
		if info, err = s.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if replicasCurrent(info) {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			break poll
		}
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 || !replicasCurrent(info) {
		t.Fatalf("stream info: config replicas %d, cluster %+v; want a leader and two current followers", info.Config.Replicas, info.Cluster)
	}
	names := map[string]bool{info.Cluster.Leader: true}
	for _, r := range info.Cluster.Replicas {
		names[r.Name] = true
	}
	if len(names) != 3 {
		t.Errorf("the stream's replicas are on %v, want three distinct servers", names)
	}

	if _, err := js.Publish(ctx, "r3.1", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	// Another server may not know yet where the stream's leader answers
	// (no response from stream) for a moment after the publish.
	ojs := jetStreamClient(t, urls[0])
	var ostream jetstream.Stream
	for wait := time.Now().Add(10 * time.Second); ; {
		if ostream, err = ojs.Stream(ctx, "r3"); err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Now().After(wait) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	msg, err := ostream.GetLastMsgForSubject(ctx, "r3.1")
	if err != nil || string(msg.Data) != "hello" {
		t.Fatalf("read through server 1: %v, %v", msg, err)
	}

	pids := c.Nodes()
	stopped = true
	if err := c.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v (stderr: %s)", err, stderr.String())
	}
	for _, n := range pids {
		if err := syscall.Kill(n.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("server %d (pid %d) still exists after Stop: kill(0) = %v", n.ID, n.PID, err)
		}
	}
}

// jetStreamClient connects to url for the rest of the test.
func jetStreamClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// replicasCurrent reports whether every follower of the stream has
// caught up with its leader.
func replicasCurrent(info *jetstream.StreamInfo) bool {
	if info.Cluster == nil || len(info.Cluster.Replicas) == 0 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current {
			return false
		}
	}
	return true
}
