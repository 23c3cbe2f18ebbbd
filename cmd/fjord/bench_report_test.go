package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/bench"
)

func TestBenchReport(t *testing.T) {
	dir := t.TempDir()
	r := &bench.Result{
		Workload:       bench.Workload{Name: "max-rate-1p-1kb"},
		System:         "fjord",
		DriverSettings: map[string]string{"topic flush.policy": "ack"},
		Passed:         true,
		Produce:        bench.Throughput{Records: 10, MBPerSecond: 123.4, RecordsPerSecond: 120_000},
	}
	if err := r.WriteJSON(filepath.Join(dir, "run.json")); err != nil {
		t.Fatal(err)
	}
	res := fjord(t, "", "bench", "report", dir)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"max-rate-1p-1kb (flush.policy=ack) | 1 (1) | 123.4 |", "**Targets**",
		"| max-rate-1p-1kb, produce vs NATS publish | not measured |"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("report does not say %q:\n%s", want, res.stdout)
		}
	}
	if res := fjord(t, "", "bench", "report", t.TempDir()); res.code == 0 || !strings.Contains(res.stderr, "no benchmark results") {
		t.Errorf("empty directory: exit %d, stderr %q", res.code, res.stderr)
	}
}
