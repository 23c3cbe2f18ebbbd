package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/bench"
)

const tinyWorkload = `name: tiny
topics: 1
partitionsPerTopic: 4
messageSize: 256
producersPerTopic: 2
consumerPerSubscription: 2
producerRate: 0
keyDistributor: KEY_ROUND_ROBIN
warmupSeconds: 0
messageCount: 3000
`

// runTiny runs tinyWorkload as `go run .` does, with extra flags after
// the ones every run takes, and returns the run's directory, its --out
// and what it printed; a failed run fails the test.
func runTiny(t *testing.T, extra ...string) (dir, out string, stdout *bytes.Buffer) {
	t.Helper()
	dir = t.TempDir()
	wl := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(wl, []byte(tinyWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stdout = &bytes.Buffer{}
	var stderr bytes.Buffer
	if err := run(ctx, os.Args[0], append([]string{wl, "--out", out, "--dir", dir}, extra...), stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return dir, out, stdout
}

// TestRunTinyWorkload runs the whole peer bench as `go run .` does: the
// server in a child process (this test binary, see TestMain), the
// runner over the driver, the result files and the table.
func TestRunTinyWorkload(t *testing.T) {
	dir, out, stdout := runTiny(t)

	data, err := os.ReadFile(filepath.Join(out, "tiny-nats.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Passed || res.SendErrors != 0 {
		t.Fatalf("checks failed: %+v, send errors %d", res.Checks, res.SendErrors)
	}
	if res.System != "nats-jetstream" || res.DriverSettings["stream.storage"] != "file" {
		t.Fatalf("system %q settings %v", res.System, res.DriverSettings)
	}
	if res.Produce.TotalRecords != 3000 || res.Consume.TotalRecords != 3000 {
		t.Fatalf("produced %d, consumed %d records; want 3000 each", res.Produce.TotalRecords, res.Consume.TotalRecords)
	}
	// The node measured is the child server, which is gone now but
	// reported its memory while it ran.
	if len(res.Nodes) != 1 || res.Nodes[0].PID == os.Getpid() || res.Nodes[0].PeakRSSBytes <= 0 {
		t.Fatalf("node stats %+v: want the child server's, with its peak RSS", res.Nodes)
	}
	if st, err := os.Stat(filepath.Join(out, "tiny-nats.png")); err != nil || st.Size() == 0 {
		t.Fatalf("png: %v", err)
	}
	if !strings.Contains(stdout.String(), "nats-jetstream") {
		t.Fatalf("table does not name the system:\n%s", stdout.String())
	}
	// The server's store directory under --dir is removed after the run.
	entries, err := filepath.Glob(filepath.Join(dir, "fjord-bench-nats-*"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("store directories left behind: %v", entries)
	}
}

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"max-rate-1p-1kb", "--out", "o", "--duration", "5s", "--warmup", "0s", "--sync", "always", "--max-pending", "10", "--replicas", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.workload != "max-rate-1p-1kb" || o.out != "o" || o.duration != 5*time.Second || !o.warmupSet || o.warmup != 0 || o.sync != "always" || o.maxPending != 10 || o.replicas != 3 {
		t.Fatalf("parsed %+v", o)
	}
	if o, _ := parseArgs([]string{"w"}); o.warmupSet || o.replicas != 0 {
		t.Fatalf("defaults %+v: want the workload's warmup and replicas", o)
	}
	for _, bad := range [][]string{
		{},
		{"a", "b"},
		{"a", "--sync", "sometimes"},
		{"a", "--max-pending", "-1"},
		{"a", "--duration", "-1s"},
		{"a", "--warmup", "-1s"},
		{"a", "--nope"},
		{"a", "--consumer", "sideways"},
		{"a", "--read-ahead", "0"},
	} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) = nil error", bad)
		}
	}
}

func TestSetDuration(t *testing.T) {
	w, err := bench.LoadWorkload("max-rate-1p-1kb")
	if err != nil {
		t.Fatal(err)
	}
	if err := setDuration(w, 5*time.Second); err != nil || w.TestDurationSeconds != 5 {
		t.Fatalf("setDuration: %v, duration %v", err, w.TestDurationSeconds)
	}
	c, err := bench.LoadWorkload("catchup-2gb")
	if err != nil {
		t.Fatal(err)
	}
	if err := setDuration(c, 5*time.Second); !errors.Is(err, errUsage) {
		t.Fatalf("setDuration on a catch-up run = %v, want errUsage", err)
	}
}

func TestSetWarmup(t *testing.T) {
	w, err := bench.LoadWorkload("max-rate-1p-1kb")
	if err != nil {
		t.Fatal(err)
	}
	if err := setWarmup(w, 1500*time.Millisecond); err != nil || w.WarmupSeconds != 1.5 {
		t.Fatalf("setWarmup: %v, warmup %v", err, w.WarmupSeconds)
	}
	c, err := bench.LoadWorkload("catchup-2gb")
	if err != nil {
		t.Fatal(err)
	}
	if err := setWarmup(c, time.Second); !errors.Is(err, errUsage) {
		t.Fatalf("setWarmup on a catch-up run = %v, want errUsage", err)
	}
	if err := setWarmup(c, 0); err != nil {
		t.Fatalf("no warmup on a catch-up run: %v", err)
	}
}

func TestMaxPendingFor(t *testing.T) {
	for _, c := range []struct {
		w    bench.Workload
		want int
	}{
		// 4 MiB of records at max rate.
		{bench.Workload{Topics: 1, ProducersPerTopic: 4, MessageSize: 1024}, 4096},
		{bench.Workload{Topics: 1, ProducersPerTopic: 1, MessageSize: 100}, 41943},
		// One second of each producer's share at a fixed rate.
		{bench.Workload{Topics: 2, ProducersPerTopic: 2, MessageSize: 1024, ProducerRate: 50_000}, 12_500},
		// Never below the floor.
		{bench.Workload{Topics: 1, ProducersPerTopic: 4, MessageSize: 1024, ProducerRate: 100}, minWindowRecords},
		{bench.Workload{Topics: 1, ProducersPerTopic: 1, MessageSize: 1_000_000}, minWindowRecords},
	} {
		if got := maxPendingFor(&c.w); got != c.want {
			t.Errorf("%+v: max pending %d, want %d", c.w, got, c.want)
		}
	}
}

// --replicas 3: three servers in child processes with routes between
// them, every stream R3, and the run's own checks pass; each server's
// figures are reported, and nothing is left behind.
func TestRunReplicated(t *testing.T) {
	dir, out, _ := runTiny(t, "--replicas", "3")
	res, err := bench.ReadResult(filepath.Join(out, "tiny-nats.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed || res.Produce.TotalRecords != 3000 || res.Consume.TotalRecords != 3000 {
		t.Fatalf("passed %v, produced %d, consumed %d; checks %+v", res.Passed, res.Produce.TotalRecords, res.Consume.TotalRecords, res.Checks)
	}
	// The driver reads the replica count from the stream's info.
	if got := res.DriverSettings["stream.replicas"]; got != "3" {
		t.Errorf("stream.replicas %q, want 3", got)
	}
	if got := res.DriverSettings["server"]; !strings.Contains(got, "a cluster of 3") {
		t.Errorf("server setting %q does not say the cluster", got)
	}
	if len(res.Nodes) != 3 {
		t.Fatalf("%d servers' figures, want 3: %+v", len(res.Nodes), res.Nodes)
	}
	for i, n := range res.Nodes {
		if n.ID != i+1 || n.PID == os.Getpid() || n.PeakRSSBytes <= 0 {
			t.Errorf("server %d's figures %+v", i+1, n)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "fjord-bench-nats-*")); len(entries) != 0 {
		t.Errorf("store directories left behind: %v", entries)
	}
}

func TestRunRejectsReplicas(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "r7.yaml")
	if err := os.WriteFile(wl, []byte(tinyWorkload+"replicationFactor: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx, os.Args[0], []string{wl, "--dir", dir}, io.Discard, io.Discard)
	if !errors.Is(err, errBadReplicas) || !strings.Contains(err.Error(), "replicationFactor 7; a JetStream stream has at most 5 replicas") {
		t.Errorf("err = %v, want errBadReplicas naming the workload's factor", err)
	}
	for _, bad := range []string{"-1", "6"} {
		if _, err := parseArgs([]string{"w", "--replicas", bad}); !errors.Is(err, errBadReplicas) {
			t.Errorf("--replicas %s: %v, want errBadReplicas", bad, err)
		}
	}
}
