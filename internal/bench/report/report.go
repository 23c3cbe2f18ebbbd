// Package report turns one sitting of benchmark results (the JSON files
// `fjord bench limits`, `fjord bench run` and `fjord bench peer` write)
// into the Markdown tables of BENCHMARKS.md: the machine's limits, Fjord's
// and the peer's figures as medians over their runs, and every target of
// the benchmark issue as a ratio against the limits and the peer measured
// in the same sitting, with whether it holds.
//
// It reads only what the runs recorded; a figure with no runs behind it
// is reported as missing, never guessed.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/bench"
	"github.com/fjordmq/fjord/internal/bench/limits"
)

// ErrNoResults: the directory holds no result files.
var ErrNoResults = errors.New("report: no benchmark results")

// Sitting is every result found under one directory.
type Sitting struct {
	Limits *limits.Result
	// Runs by system, then by case (workload and flush.policy).
	Runs map[string]map[Case][]*bench.Result
}

// Case is what a run's figures are grouped by.
type Case struct {
	Workload    string
	FlushPolicy string // Fjord's topic flush.policy; "" for a peer
	// Nodes is how many processes served the run (Fjord's nodes, the
	// peer's servers): 1 for a result that measured none. Replicas is
	// each partition's (each NATS stream's) replica count, 1 when the
	// result does not say.
	Nodes, Replicas int
	// Producer is "" for the system's usual client and "raw" for
	// fjord bench's pre-encoded produce requests.
	Producer string
}

// single is the case of a workload on one node, one replica, the usual
// client: every run before clusters.
func single(workload, policy string) Case {
	return Case{Workload: workload, FlushPolicy: policy, Nodes: 1, Replicas: 1}
}

// replicated is the case of a workload on n nodes (servers) with n
// replicas of every partition (stream).
func replicated(workload, policy string, n int) Case {
	return Case{Workload: workload, FlushPolicy: policy, Nodes: n, Replicas: n}
}

func (c Case) String() string {
	var parts []string
	if c.FlushPolicy != "" {
		parts = append(parts, "flush.policy="+c.FlushPolicy)
	}
	if c.Nodes > 1 || c.Replicas > 1 {
		if c.FlushPolicy != "" { // Fjord's nouns
			parts = append(parts, fmt.Sprintf("%d nodes, RF=%d", c.Nodes, c.Replicas))
		} else {
			parts = append(parts, fmt.Sprintf("%d servers, R%d", c.Nodes, c.Replicas))
		}
	}
	if c.Producer != "" {
		parts = append(parts, c.Producer+" producer")
	}
	if len(parts) == 0 {
		return c.Workload
	}
	return c.Workload + " (" + strings.Join(parts, ", ") + ")"
}

// caseOf is the case r's figures belong to, from what r recorded.
func caseOf(r *bench.Result) Case {
	c := Case{Workload: r.Workload.Name, Nodes: max(1, len(r.Nodes)), Replicas: 1}
	if r.System == "fjord" {
		c.FlushPolicy = r.DriverSettings["topic flush.policy"]
	}
	for _, key := range []string{"topic replication.factor", "stream.replicas"} {
		if n, err := strconv.Atoi(r.DriverSettings[key]); err == nil && n > 0 {
			c.Replicas = n
		}
	}
	if strings.HasPrefix(r.DriverSettings["producer"], "raw") {
		c.Producer = "raw"
	}
	return c
}

// Load reads every *.json under dir: limits.json files are the machine's
// limits (the newest wins), the rest are workload results.
func Load(dir string) (*Sitting, error) {
	s := &Sitting{Runs: map[string]map[Case][]*bench.Result{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var probe struct {
			Measurements json.RawMessage `json:"measurements"`
			System       string          `json:"system"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case probe.Measurements != nil:
			l, err := limits.ReadJSON(path)
			if err != nil {
				return err
			}
			if s.Limits == nil || l.Start.After(s.Limits.Start) {
				s.Limits = l
			}
		case probe.System != "":
			r, err := bench.ReadResult(path)
			if err != nil {
				return err
			}
			c := caseOf(r)
			if s.Runs[r.System] == nil {
				s.Runs[r.System] = map[Case][]*bench.Result{}
			}
			s.Runs[r.System][c] = append(s.Runs[r.System][c], r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.Limits == nil && len(s.Runs) == 0 {
		return nil, fmt.Errorf("%w under %s", ErrNoResults, dir)
	}
	return s, nil
}

// median of the values f picks from runs that passed their checks; ok is
// false when there are none.
func median(runs []*bench.Result, f func(*bench.Result) (float64, bool)) (float64, int, bool) {
	var v []float64
	for _, r := range runs {
		if !r.Passed {
			continue
		}
		if x, ok := f(r); ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, 0, false
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2], n, true
	}
	return (v[n/2-1] + v[n/2]) / 2, n, true
}

func produceMBps(r *bench.Result) (float64, bool) {
	return r.Produce.MBPerSecond, r.Produce.Records > 0
}
func produceRecsps(r *bench.Result) (float64, bool) {
	return r.Produce.RecordsPerSecond, r.Produce.Records > 0
}
func consumeMBps(r *bench.Result) (float64, bool) {
	return r.Consume.MBPerSecond, r.Consume.Records > 0
}
func e2e(pick func(*bench.Latency) float64) func(*bench.Result) (float64, bool) {
	return func(r *bench.Result) (float64, bool) {
		if r.EndToEndLatency == nil || r.EndToEndLatency.Count == 0 {
			return 0, false
		}
		return pick(r.EndToEndLatency), true
	}
}
func ack(pick func(*bench.Latency) float64) func(*bench.Result) (float64, bool) {
	return func(r *bench.Result) (float64, bool) {
		return pick(&r.ProduceLatency), r.ProduceLatency.Count > 0
	}
}

// peakRSSMiB is the largest peak RSS of the run's nodes: for one node,
// its own.
func peakRSSMiB(r *bench.Result) (float64, bool) {
	var peak float64
	for i := range r.Nodes {
		if v, ok := nodePeakRSSMiB(&r.Nodes[i]); ok {
			peak = max(peak, v)
		}
	}
	return peak, peak > 0
}
func nodePeakRSSMiB(n *bench.NodeStats) (float64, bool) {
	return float64(n.PeakRSSBytes) / (1 << 20), n.PeakRSSBytes > 0
}
func nodeCPUCores(n *bench.NodeStats) (float64, bool) {
	return n.CPUCores, n.CPUWindowSeconds > 0
}
func clientCPUCores(r *bench.Result) (float64, bool) {
	if r.Client == nil || r.Client.CPUWindowSeconds == 0 {
		return 0, false
	}
	return r.Client.CPUCores, true
}

// Write writes the Markdown for the sitting.
func (s *Sitting) Write(w io.Writer) {
	s.writeMachine(w)
	s.writeLimits(w)
	for _, system := range s.systems() {
		s.writeSystem(w, system)
	}
	s.writeTargets(w)
}

func (s *Sitting) systems() []string {
	var names []string
	for n := range s.Runs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { // fjord first, then peers by name
		if (names[i] == "fjord") != (names[j] == "fjord") {
			return names[i] == "fjord"
		}
		return names[i] < names[j]
	})
	return names
}

func (s *Sitting) writeMachine(w io.Writer) {
	var m bench.Machine
	for _, cases := range s.Runs {
		for _, runs := range cases {
			m = runs[0].Machine
		}
	}
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	if s.Limits != nil {
		lm := s.Limits.Machine
		fmt.Fprintf(w, "| measured | %s |\n", s.Limits.Start.UTC().Format("2006-01-02 15:04 UTC"))
		fmt.Fprintf(w, "| machine | %d cores, %.1f GiB, kernel %s, %s |\n", lm.Cores, float64(lm.MemoryBytes)/(1<<30), lm.Kernel, lm.GoVersion)
		fmt.Fprintf(w, "| disk | %s (%s) at %s |\n", lm.Disk.Device, lm.Disk.FSType, lm.Disk.MountPoint)
	} else if m.Cores > 0 {
		fmt.Fprintf(w, "| machine | %d cores, %.1f GiB, kernel %s, %s |\n", m.Cores, float64(m.MemoryBytes)/(1<<30), m.Kernel, m.GoVersion)
	}
	if m.Commit != "" {
		dirty := ""
		if m.Dirty {
			dirty = " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "| commit | %.12s%s |\n", m.Commit, dirty)
	}
	fmt.Fprintln(w)
}

func (s *Sitting) writeLimits(w io.Writer) {
	if s.Limits == nil {
		fmt.Fprintf(w, "No limits were measured in this sitting.\n\n")
		return
	}
	fmt.Fprintf(w, "**Limits** (`fjord bench limits`; MB/s, median of the runs):\n\n")
	fmt.Fprintf(w, "| measurement | runs | median MB/s |\n|---|---|---|\n")
	for _, m := range s.Limits.Measurements {
		var runs []string
		for _, r := range m.Runs {
			runs = append(runs, fmt.Sprintf("%.0f", r.MBps))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f |\n", m.Name, strings.Join(runs, ", "), m.MedianMBps)
	}
	fmt.Fprintln(w)
}

func (s *Sitting) writeSystem(w io.Writer, system string) {
	cases := s.Runs[system]
	var keys []Case
	for c := range cases {
		keys = append(keys, c)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	fmt.Fprintf(w, "**%s** (medians over the runs that passed their checks):\n\n", system)
	fmt.Fprintf(w, "| workload | runs (passed) | produce MB/s | produce rec/s | consume MB/s | ack p50 / p99 ms | end-to-end p50 / p99 / p99.9 ms | node peak RSS MiB | node CPU cores | client CPU cores |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range keys {
		runs := cases[c]
		passed := 0
		for _, r := range runs {
			if r.Passed {
				passed++
			}
		}
		f := func(pick func(*bench.Result) (float64, bool), format string) string {
			v, _, ok := median(runs, pick)
			if !ok {
				return "-"
			}
			return fmt.Sprintf(format, v)
		}
		p50 := func(l *bench.Latency) float64 { return l.P50Ms }
		p99 := func(l *bench.Latency) float64 { return l.P99Ms }
		p999 := func(l *bench.Latency) float64 { return l.P999Ms }
		fmt.Fprintf(w, "| %s | %d (%d) | %s | %s | %s | %s / %s | %s / %s / %s | %s | %s | %s |\n",
			c, len(runs), passed, f(produceMBps, "%.1f"), f(produceRecsps, "%.0f"), f(consumeMBps, "%.1f"),
			f(ack(p50), "%.2f"), f(ack(p99), "%.1f"),
			f(e2e(p50), "%.2f"), f(e2e(p99), "%.1f"), f(e2e(p999), "%.1f"),
			perNode(runs, nodePeakRSSMiB, "%.0f"), perNode(runs, nodeCPUCores, "%.2f"), f(clientCPUCores, "%.2f"))
	}
	fmt.Fprintln(w)
}

// perNode formats one figure of each node, the median of node i's
// values over the runs that passed, as "a / b / c" for a cluster (nodes
// in the order the runs listed them, by id for Fjord's), "-" when no run
// has it.
func perNode(runs []*bench.Result, pick func(*bench.NodeStats) (float64, bool), format string) string {
	nodes := 0
	for _, r := range runs {
		nodes = max(nodes, len(r.Nodes))
	}
	var parts []string
	measured := false
	for i := range nodes {
		v, _, ok := median(runs, func(r *bench.Result) (float64, bool) {
			if i >= len(r.Nodes) {
				return 0, false
			}
			return pick(&r.Nodes[i])
		})
		if !ok {
			parts = append(parts, "-")
			continue
		}
		measured = true
		parts = append(parts, fmt.Sprintf(format, v))
	}
	if !measured {
		return "-"
	}
	return strings.Join(parts, " / ")
}

// Target is one line of the benchmark issue's targets table.
type Target struct {
	What     string
	Measured string
	Required string
	// Holds is nil when a figure it needs was not measured.
	Holds *bool
}

// Targets evaluates the targets against this sitting's figures.
func (s *Sitting) Targets() []Target {
	fjord := func(workload, policy string, pick func(*bench.Result) (float64, bool)) (float64, bool) {
		v, _, ok := median(s.Runs["fjord"][single(workload, policy)], pick)
		return v, ok
	}
	nats := func(workload string, pick func(*bench.Result) (float64, bool)) (float64, bool) {
		v, _, ok := median(s.Runs["nats-jetstream"][single(workload, "")], pick)
		return v, ok
	}
	limit := func(name string) (float64, bool) {
		if s.Limits == nil {
			return 0, false
		}
		return s.Limits.Median(name)
	}
	ratio := func(what string, v float64, vok bool, ref float64, rok bool, refName string, want float64) Target {
		t := Target{What: what, Required: fmt.Sprintf(">= %.0f%% of %s", want*100, refName)}
		if want >= 1 {
			t.Required = fmt.Sprintf(">= %.1fx %s", want, refName)
		}
		if !vok || !rok || ref == 0 {
			t.Measured = "not measured"
			return t
		}
		holds := v/ref >= want
		t.Holds = &holds
		if want >= 1 {
			t.Measured = fmt.Sprintf("%.1f MB/s = %.2fx (%.1f MB/s)", v, v/ref, ref)
		} else {
			t.Measured = fmt.Sprintf("%.1f MB/s = %.0f%% (%.1f MB/s)", v, 100*v/ref, ref)
		}
		return t
	}
	atMost := func(what string, v float64, ok bool, bound float64, unit string) Target {
		t := Target{What: what, Required: fmt.Sprintf("<= %g %s", bound, unit)}
		if !ok {
			t.Measured = "not measured"
			return t
		}
		holds := v <= bound
		t.Holds = &holds
		t.Measured = fmt.Sprintf("%.2f %s", v, unit)
		return t
	}
	var out []Target
	const w4 = "max-rate-16p-1kb-4p4c"
	v, vok := fjord(w4, "interval", produceMBps)
	l, lok := limit(limits.NameIngestPageCache)
	n, nok := nats(w4, produceMBps)
	out = append(out,
		ratio(w4+", interval, produce vs bare ingest (page cache)", v, vok, l, lok, "bare ingest", 0.6),
		ratio(w4+", interval, produce vs NATS publish", v, vok, n, nok, "NATS publish", 3))
	v, vok = fjord(w4, "ack", produceMBps)
	l, lok = limit(limits.NameIngestSyncPerMiB)
	out = append(out,
		ratio(w4+", ack, produce vs bare ingest (fdatasync per MiB)", v, vok, l, lok, "bare ingest with fdatasync", 0.6),
		ratio(w4+", ack, produce vs NATS publish", v, vok, n, nok, "NATS publish", 2))
	v, vok = fjord("max-rate-1p-1kb", "ack", produceMBps)
	n, nok = nats("max-rate-1p-1kb", produceMBps)
	out = append(out, ratio("max-rate-1p-1kb, produce vs NATS publish", v, vok, n, nok, "NATS publish", 2))
	rps, rok := fjord("max-rate-16p-100b", "ack", produceRecsps)
	t := Target{What: "max-rate-16p-100b, produce", Required: ">= 500,000 records/s", Measured: "not measured"}
	if rok {
		holds := rps >= 500_000
		t.Holds, t.Measured = &holds, fmt.Sprintf("%.0f records/s", rps)
	}
	out = append(out, t)
	v, vok = fjord("catchup-2gb", "ack", consumeMBps)
	l, lok = limit(limits.NameLoopbackTCP)
	out = append(out, ratio("catchup-2gb, consume vs loopback TCP", v, vok, l, lok, "loopback TCP", 0.4))
	p50, ok50 := fjord("latency-16p-1kb-5k", "ack", e2e(func(l *bench.Latency) float64 { return l.P50Ms }))
	p99, ok99 := fjord("latency-16p-1kb-5k", "ack", e2e(func(l *bench.Latency) float64 { return l.P99Ms }))
	out = append(out,
		atMost("latency-16p-1kb-5k, end-to-end p50", p50, ok50, 1, "ms"),
		atMost("latency-16p-1kb-5k, end-to-end p99", p99, ok99, 10, "ms"))
	rss, rssok := fjord("catchup-2gb", "ack", peakRSSMiB)
	out = append(out, atMost("node peak RSS after 2 GB ingested (catchup-2gb)", rss, rssok, 256, "MiB"))

	// Issue 13: three nodes at RF=3, acks=all, beside NATS R3.
	inCase := func(system string, c Case, pick func(*bench.Result) (float64, bool)) (float64, bool) {
		v, _, ok := median(s.Runs[system][c], pick)
		return v, ok
	}
	const r3 = "3 nodes RF=3, "
	v, vok = inCase("fjord", replicated(w4, "ack", 3), produceMBps)
	n, nok = inCase("nats-jetstream", replicated(w4, "", 3), produceMBps)
	aim := ratio(r3+w4+", ack, produce vs NATS R3 publish (aim)", v, vok, n, nok, "NATS R3 publish", 2.5)
	aim.Required = "aim: " + aim.Required
	out = append(out, ratio(r3+w4+", ack, produce vs NATS R3 publish", v, vok, n, nok, "NATS R3 publish", 2), aim)
	t = Target{What: r3 + w4 + ", ack, produce (aim)", Required: "aim: >= 150 MB/s", Measured: "not measured"}
	if vok {
		holds := v >= 150
		t.Holds, t.Measured = &holds, fmt.Sprintf("%.1f MB/s", v)
	}
	out = append(out, t)
	p99, ok99 = inCase("fjord", replicated("latency-16p-1kb-5k", "ack", 3), ack(func(l *bench.Latency) float64 { return l.P99Ms }))
	out = append(out, atMost(r3+"latency-16p-1kb-5k, ack, produce ack p99", p99, ok99, 10, "ms"))
	return out
}

func (s *Sitting) writeTargets(w io.Writer) {
	fmt.Fprintf(w, "**Targets** (ratios within this sitting; Fjord's runs use flush.policy=ack unless the line says interval):\n\n")
	fmt.Fprintf(w, "| target | measured | required | holds |\n|---|---|---|---|\n")
	for _, t := range s.Targets() {
		holds := "not measured"
		if t.Holds != nil {
			holds = map[bool]string{true: "yes", false: "**no**"}[*t.Holds]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.What, t.Measured, t.Required, holds)
	}
	fmt.Fprintln(w)
}
