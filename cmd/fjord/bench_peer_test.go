package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// peerCall records what `fjord bench peer` would have run.
type peerCall struct {
	called bool
	dir    string
	args   []string
}

func (c *peerCall) run(_ context.Context, dir string, args []string, _, _ io.Writer) error {
	c.called = true
	c.dir = dir
	c.args = args
	return nil
}

func runBenchPeer(t *testing.T, wd string, args ...string) (*peerCall, error) {
	t.Helper()
	var call peerCall
	cmd := newBenchPeerCommandWith(func() (string, error) { return wd, nil }, call.run)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	return &call, err
}

// fakeCheckout makes root/bench/nats/go.mod and returns root.
func fakeCheckout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mod := filepath.Join(root, "bench", "nats")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestBenchPeerUnknownPeer(t *testing.T) {
	call, err := runBenchPeer(t, fakeCheckout(t), "kafka", "max-rate-1p-1kb")
	if err == nil || !strings.Contains(err.Error(), `unknown peer "kafka"`) || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("err = %v, want unknown peer naming the known ones", err)
	}
	if call.called {
		t.Fatal("ran a peer for an unknown name")
	}
}

func TestBenchPeerNoCheckout(t *testing.T) {
	wd := t.TempDir()
	call, err := runBenchPeer(t, wd, "nats", "max-rate-1p-1kb")
	if err == nil || !strings.Contains(err.Error(), "run from a Fjord source checkout") || !strings.Contains(err.Error(), wd) {
		t.Fatalf("err = %v, want a clear missing-checkout error naming %s", err, wd)
	}
	if call.called {
		t.Fatal("ran a peer without a checkout")
	}
}

// A directory named bench/nats without go.mod is not the peer module.
func TestBenchPeerDirWithoutGoMod(t *testing.T) {
	wd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(wd, "bench", "nats"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := runBenchPeer(t, wd, "nats", "max-rate-1p-1kb"); err == nil || !strings.Contains(err.Error(), "source checkout") {
		t.Fatalf("err = %v, want the missing-checkout error", err)
	}
}

func TestBenchPeerArgsFromSubdirectory(t *testing.T) {
	root := fakeCheckout(t)
	wd := filepath.Join(root, "some", "where")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	call, err := runBenchPeer(t, wd, "nats", "max-rate-1p-1kb", "--out", "results", "--duration", "30s", "--warmup", "0s", "--dir", "data")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "bench", "nats"); call.dir != want {
		t.Fatalf("dir = %s, want %s", call.dir, want)
	}
	// The peer runs in its own directory: paths are absolute and a bare
	// workload name is passed on.
	want := []string{"max-rate-1p-1kb", "--out", filepath.Join(wd, "results"), "--duration", "30s", "--warmup", "0s", "--dir", filepath.Join(wd, "data")}
	if !slices.Equal(call.args, want) {
		t.Fatalf("args = %q, want %q", call.args, want)
	}
}

func TestBenchPeerWorkloadFileMadeAbsolute(t *testing.T) {
	root := fakeCheckout(t)
	if err := os.WriteFile(filepath.Join(root, "mine.yaml"), []byte("name: mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call, err := runBenchPeer(t, root, "nats", "mine.yaml", "--", "--sync", "always", "--max-pending", "100")
	if err != nil {
		t.Fatal(err)
	}
	// Flags after -- reach the peer unchanged, after the ones fjord
	// renders.
	want := []string{filepath.Join(root, "mine.yaml"), "--out", root, "--sync", "always", "--max-pending", "100"}
	if !slices.Equal(call.args, want) {
		t.Fatalf("args = %q, want %q", call.args, want)
	}
}

// The real source tree holds the peer module where the command looks.
func TestBenchPeerFindsThisCheckout(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := findPeerModule(wd, "nats")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mod, []byte("module github.com/fjordmq/fjord/bench/nats")) {
		t.Fatalf("%s/go.mod is not the nats peer module:\n%s", dir, mod)
	}
}

// Extra arguments before -- are refused: they would be taken for peer
// flags by nobody.
func TestBenchPeerArgCount(t *testing.T) {
	root := fakeCheckout(t)
	for _, args := range [][]string{
		{"nats"},
		{"nats", "w", "extra"},
		{"nats", "w", "extra", "--", "--sync", "always"},
	} {
		call, err := runBenchPeer(t, root, args...)
		if err == nil || call.called {
			t.Errorf("args %q: err %v, ran %v; want a usage error", args, err, call.called)
		}
	}
}

// Without the go tool on PATH the error says what is missing.
func TestBenchPeerNeedsGoToolchain(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := goRun(context.Background(), t.TempDir(), nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "Go toolchain") {
		t.Fatalf("err = %v, want a missing Go toolchain error", err)
	}
}
