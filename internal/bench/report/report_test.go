package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/bench"
	"github.com/fjordmq/fjord/internal/bench/limits"
)

func writeRun(t *testing.T, dir, name, system, workload, policy string, passed bool, mbps, recsps float64, e2eP50, e2eP99 float64, rss int64) {
	t.Helper()
	r := &bench.Result{
		Workload:       bench.Workload{Name: workload},
		System:         system,
		DriverSettings: map[string]string{},
		Passed:         passed,
		Produce:        bench.Throughput{Records: 1000, MBPerSecond: mbps, RecordsPerSecond: recsps},
		Consume:        bench.Throughput{Records: 1000, MBPerSecond: mbps},
		ProduceLatency: bench.Latency{Count: 1000, P50Ms: 1, P99Ms: 2},
		Nodes:          []bench.NodeStats{{PeakRSSBytes: rss}},
	}
	if e2eP50 > 0 {
		r.EndToEndLatency = &bench.Latency{Count: 1000, P50Ms: e2eP50, P99Ms: e2eP99}
	}
	if system == "fjord" {
		r.DriverSettings["topic flush.policy"] = policy
	}
	if err := r.WriteJSON(filepath.Join(dir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

func writeLimits(t *testing.T, dir string) {
	t.Helper()
	l := &limits.Result{Start: time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC), Measurements: []limits.Measurement{
		{Name: limits.NameIngestPageCache, MedianMBps: 600},
		{Name: limits.NameIngestSyncPerMiB, MedianMBps: 400},
		{Name: limits.NameLoopbackTCP, MedianMBps: 2000},
	}}
	if err := l.WriteJSON(filepath.Join(dir, "limits.json")); err != nil {
		t.Fatal(err)
	}
}

func targets(t *testing.T, dir string) map[string]Target {
	t.Helper()
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Target{}
	for _, tg := range s.Targets() {
		out[tg.What] = tg
	}
	var b bytes.Buffer
	s.Write(&b) // must not panic on partial sittings
	if !strings.Contains(b.String(), "**Targets**") {
		t.Fatalf("no targets table:\n%s", b.String())
	}
	return out
}

func holds(t *testing.T, tg Target, want *bool) {
	t.Helper()
	switch {
	case want == nil && tg.Holds != nil:
		t.Errorf("%s: judged %v (%s), want not measured", tg.What, *tg.Holds, tg.Measured)
	case want != nil && tg.Holds == nil:
		t.Errorf("%s: not measured, want %v", tg.What, *want)
	case want != nil && *tg.Holds != *want:
		t.Errorf("%s: holds=%v (%s), want %v", tg.What, *tg.Holds, tg.Measured, *want)
	}
}

func TestTargets(t *testing.T) {
	yes, no := true, false
	dir := t.TempDir()
	writeLimits(t, dir)
	const w4 = "max-rate-16p-1kb-4p4c"
	// Medians over passed runs: 300, 400, 500 -> 400 (the failed 900 is
	// left out): 67% of the 600 MB/s bare ingest, 4x NATS's 100.
	writeRun(t, dir, "i1", "fjord", w4, "interval", true, 300, 0, 0, 0, 0)
	writeRun(t, dir, "i2", "fjord", w4, "interval", true, 500, 0, 0, 0, 0)
	writeRun(t, dir, "i3", "fjord", w4, "interval", true, 400, 0, 0, 0, 0)
	writeRun(t, dir, "i4", "fjord", w4, "interval", false, 900, 0, 0, 0, 0)
	writeRun(t, dir, "n1", "nats-jetstream", w4, "", true, 100, 0, 0, 0, 0)
	// ack: 150 MB/s is 38% of 400 and 1.5x NATS: both fail.
	writeRun(t, dir, "a1", "fjord", w4, "ack", true, 150, 0, 0, 0, 0)
	writeRun(t, dir, "r1", "fjord", "max-rate-16p-100b", "ack", true, 40, 420_000, 0, 0, 0)
	writeRun(t, dir, "l1", "fjord", "latency-16p-1kb-5k", "ack", true, 5, 5000, 0.8, 12, 0)
	writeRun(t, dir, "c1", "fjord", "catchup-2gb", "ack", true, 900, 0, 0, 0, 200<<20)

	got := targets(t, dir)
	holds(t, got[w4+", interval, produce vs bare ingest (page cache)"], &yes)
	holds(t, got[w4+", interval, produce vs NATS publish"], &yes)
	holds(t, got[w4+", ack, produce vs bare ingest (fdatasync per MiB)"], &no)
	holds(t, got[w4+", ack, produce vs NATS publish"], &no)
	holds(t, got["max-rate-1p-1kb, produce vs NATS publish"], nil) // neither side ran
	holds(t, got["max-rate-16p-100b, produce"], &no)
	holds(t, got["catchup-2gb, consume vs loopback TCP"], &yes) // 45%
	holds(t, got["latency-16p-1kb-5k, end-to-end p50"], &yes)
	holds(t, got["latency-16p-1kb-5k, end-to-end p99"], &no)
	holds(t, got["node peak RSS after 2 GB ingested (catchup-2gb)"], &yes)
	if m := got[w4+", interval, produce vs bare ingest (page cache)"].Measured; !strings.Contains(m, "400.0 MB/s = 67%") {
		t.Errorf("median over passed runs: %q, want 400.0 MB/s = 67%%", m)
	}
}

func TestLoadEmpty(t *testing.T) {
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoResults) {
		t.Fatalf("empty dir: %v, want ErrNoResults", err)
	}
}

func TestSystemTableShowsClientCPU(t *testing.T) {
	dir := t.TempDir()
	const w = "max-rate-16p-1kb-4p4c"
	for i, cores := range []float64{0.8, 1.1, 0.9} {
		r := &bench.Result{
			Workload:       bench.Workload{Name: w},
			System:         "fjord",
			DriverSettings: map[string]string{"topic flush.policy": "interval"},
			Passed:         true,
			Produce:        bench.Throughput{Records: 1000, MBPerSecond: 100},
			Nodes:          []bench.NodeStats{{CPUWindowSeconds: 10, CPUCores: 0.95}},
			Client:         &bench.ClientStats{CPUWindowSeconds: 10, CPUCores: cores},
		}
		if err := r.WriteJSON(filepath.Join(dir, "r"+string(rune('0'+i))+".json")); err != nil {
			t.Fatal(err)
		}
	}
	// A run from before the client was measured has no figure.
	old := &bench.Result{Workload: bench.Workload{Name: "catchup-2gb"}, System: "fjord",
		DriverSettings: map[string]string{"topic flush.policy": "ack"}, Passed: true}
	if err := old.WriteJSON(filepath.Join(dir, "old.json")); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	s.Write(&b)
	var header, row, oldRow string
	for _, line := range strings.Split(b.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "| workload |") && header == "":
			header = line
		case strings.HasPrefix(line, "| "+w+" (flush.policy=interval) |"):
			row = line
		case strings.HasPrefix(line, "| catchup-2gb (flush.policy=ack) |"):
			oldRow = line
		}
	}
	if !strings.HasSuffix(header, "| node CPU cores | client CPU cores |") {
		t.Errorf("header %q lacks the client CPU column after the node's", header)
	}
	// The median of 0.8, 1.1 and 0.9, after the node's 0.95.
	if !strings.HasSuffix(row, "| 0.95 | 0.90 |") {
		t.Errorf("row %q: want node 0.95 then client median 0.90 cores", row)
	}
	if !strings.HasSuffix(oldRow, "| - | - |") {
		t.Errorf("row %q: want no CPU figures for a run without them", oldRow)
	}
}

// A cluster's runs are a case of their own, beside the single node's,
// and the table gives each node's figures; a result file from before
// clusters (one "node" object) still reports its node.
func TestSystemTableShowsEveryNode(t *testing.T) {
	dir := t.TempDir()
	const w = "max-rate-16p-1kb-4p4c"
	for i, cores := range [][3]float64{{0.5, 0.4, 0.3}, {0.7, 0.6, 0.5}, {0.9, 0.8, 0.7}} {
		r := &bench.Result{
			Workload:       bench.Workload{Name: w},
			System:         "fjord",
			DriverSettings: map[string]string{"topic flush.policy": "ack", "topic replication.factor": "3"},
			Passed:         true,
			Produce:        bench.Throughput{Records: 1000, MBPerSecond: 100},
		}
		for id := 1; id <= 3; id++ {
			r.Nodes = append(r.Nodes, bench.NodeStats{ID: id, PeakRSSBytes: int64(100+10*id) << 20, CPUWindowSeconds: 10, CPUCores: cores[id-1]})
		}
		if err := r.WriteJSON(filepath.Join(dir, "c"+string(rune('0'+i))+".json")); err != nil {
			t.Fatal(err)
		}
	}
	old := `{"workload": {"name": "` + w + `"}, "system": "fjord", "passed": true,
		"driverSettings": {"topic flush.policy": "ack", "topic replication.factor": "1"},
		"produce": {"records": 1000, "mbPerSecond": 300},
		"node": {"pid": 7, "peakRssBytes": 83886080, "cpuWindowSeconds": 10, "cpuCores": 0.85}}`
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Runs["fjord"][Case{Workload: w, FlushPolicy: "ack", Nodes: 3, Replicas: 3}]); n != 3 {
		t.Errorf("%d runs in the 3-node case, want 3: %v", n, s.Runs["fjord"])
	}
	var b bytes.Buffer
	s.Write(&b)
	var cluster, lone string
	for _, line := range strings.Split(b.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "| "+w+" (flush.policy=ack, 3 nodes, RF=3) |"):
			cluster = line
		case strings.HasPrefix(line, "| "+w+" (flush.policy=ack) |"):
			lone = line
		}
	}
	// Per node, the median over the three runs: RSS 110/120/130 MiB,
	// CPU 0.7/0.6/0.5 cores.
	if !strings.HasSuffix(cluster, "| 110 / 120 / 130 | 0.70 / 0.60 / 0.50 | - |") {
		t.Errorf("cluster row %q: want each node's median RSS and CPU", cluster)
	}
	if !strings.Contains(lone, "| 1 (1) | 300.0 |") || !strings.HasSuffix(lone, "| 80 | 0.85 | - |") {
		t.Errorf("single-node row %q: want the old file's one node", lone)
	}
}

func TestCaseNames(t *testing.T) {
	for _, tc := range []struct {
		c    Case
		want string
	}{
		{Case{Workload: "w", FlushPolicy: "ack", Nodes: 1, Replicas: 1}, "w (flush.policy=ack)"},
		{Case{Workload: "w", FlushPolicy: "interval", Nodes: 3, Replicas: 3}, "w (flush.policy=interval, 3 nodes, RF=3)"},
		{Case{Workload: "w", FlushPolicy: "ack", Nodes: 3, Replicas: 3, Producer: "raw"}, "w (flush.policy=ack, 3 nodes, RF=3, raw producer)"},
		{Case{Workload: "w", Nodes: 1, Replicas: 1}, "w"},
		{Case{Workload: "w", Nodes: 3, Replicas: 3}, "w (3 servers, R3)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// writeClusterRun writes a passed run on nodes nodes with that many
// replicas (Fjord's topic replication factor, or NATS's stream
// replicas).
func writeClusterRun(t *testing.T, dir, name, system, workload, policy string, nodes int, mbps, ackP99 float64) {
	t.Helper()
	r := &bench.Result{
		Workload:       bench.Workload{Name: workload},
		System:         system,
		DriverSettings: map[string]string{},
		Passed:         true,
		Produce:        bench.Throughput{Records: 1000, MBPerSecond: mbps},
		ProduceLatency: bench.Latency{Count: 1000, P50Ms: 1, P99Ms: ackP99},
	}
	for id := 1; id <= nodes; id++ {
		r.Nodes = append(r.Nodes, bench.NodeStats{ID: id, PeakRSSBytes: 50 << 20})
	}
	if system == "fjord" {
		r.DriverSettings["topic flush.policy"] = policy
		r.DriverSettings["topic replication.factor"] = strconv.Itoa(nodes)
	} else {
		r.DriverSettings["stream.replicas"] = strconv.Itoa(nodes)
	}
	if err := r.WriteJSON(filepath.Join(dir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

// Issue 13's targets compare three nodes at RF=3 with NATS R3 only: a
// single node's or a lone NATS server's figures in the same sitting
// never stand in for them.
func TestClusterTargets(t *testing.T) {
	yes, no := true, false
	dir := t.TempDir()
	const w4 = "max-rate-16p-1kb-4p4c"
	writeClusterRun(t, dir, "f3", "fjord", w4, "ack", 3, 210, 50)
	writeClusterRun(t, dir, "f1", "fjord", w4, "ack", 1, 900, 50)
	writeClusterRun(t, dir, "n3", "nats-jetstream", w4, "", 3, 100, 50)
	writeClusterRun(t, dir, "n1", "nats-jetstream", w4, "", 1, 20, 50)
	writeClusterRun(t, dir, "l3", "fjord", "latency-16p-1kb-5k", "ack", 3, 5, 12)
	writeClusterRun(t, dir, "l1", "fjord", "latency-16p-1kb-5k", "ack", 1, 5, 2)

	got := targets(t, dir)
	const r3 = "3 nodes RF=3, "
	holds(t, got[r3+w4+", ack, produce vs NATS R3 publish"], &yes)      // 2.1x
	holds(t, got[r3+w4+", ack, produce vs NATS R3 publish (aim)"], &no) // not 2.5x
	holds(t, got[r3+w4+", ack, produce (aim)"], &yes)                   // 210 MB/s
	holds(t, got[r3+"latency-16p-1kb-5k, ack, produce ack p99"], &no)   // 12 ms
	holds(t, got[w4+", ack, produce vs NATS publish"], &yes)            // the single node's 45x
	if m := got[r3+w4+", ack, produce vs NATS R3 publish"].Measured; m != "210.0 MB/s = 2.10x (100.0 MB/s)" {
		t.Errorf("measured %q, want the 3-node run against NATS R3", m)
	}
	if r := got[r3+w4+", ack, produce vs NATS R3 publish (aim)"].Required; r != "aim: >= 2.5x NATS R3 publish" {
		t.Errorf("aim line's requirement %q", r)
	}

	// Without NATS R3 in the sitting, the ratio is not measured.
	dir = t.TempDir()
	writeClusterRun(t, dir, "f3", "fjord", w4, "ack", 3, 210, 50)
	writeClusterRun(t, dir, "n1", "nats-jetstream", w4, "", 1, 20, 50)
	holds(t, targets(t, dir)[r3+w4+", ack, produce vs NATS R3 publish"], nil)
}
