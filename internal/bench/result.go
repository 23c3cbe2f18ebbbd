package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fjordmq/fjord/internal/buildinfo"
)

// Result is what one run measured, with everything needed to quote it:
// the workload, the system and its client settings, the machine and the
// commit. Throughputs count record values only (messageSize bytes per
// record, as OMB does); MB is 10^6 bytes.
type Result struct {
	Workload       Workload          `json:"workload"`
	System         string            `json:"system"`
	DriverSettings map[string]string `json:"driverSettings"`
	Topics         []string          `json:"topics"`
	Machine        Machine           `json:"machine"`
	Started        time.Time         `json:"started"`
	Finished       time.Time         `json:"finished"`

	// Produce counts acknowledgements, Consume receipts (over all
	// subscriptions), in their measured windows.
	Produce Throughput `json:"produce"`
	Consume Throughput `json:"consume"`
	// ProduceLatency is from each record's intended send time to its
	// acknowledgement.
	ProduceLatency Latency `json:"produceLatency"`
	// EndToEndLatency is from each record's intended send time to its
	// receipt by a consumer; nil for a catch-up run, whose records wait
	// in the backlog by design.
	EndToEndLatency *Latency `json:"endToEndLatency,omitempty"`

	SendErrors     int64  `json:"sendErrors"`
	FirstSendError string `json:"firstSendError,omitempty"`
	// Nodes are the system's processes' resource use, one per process
	// RunOptions.Nodes named, in that order; empty when none was. (A
	// result written before clusters has one "node" object instead,
	// which reading turns into Nodes: see UnmarshalJSON.)
	Nodes []NodeStats `json:"nodes,omitempty"`
	// Client is the benchmark process's own CPU use over the measured
	// window; nil when no window was measured.
	Client *ClientStats `json:"client,omitempty"`

	// Checks are the sanity checks; Passed is true when all passed.
	Checks []Check `json:"checks"`
	Passed bool    `json:"passed"`

	Timeline []Sample `json:"timeline"`
}

// Throughput is one direction's measured rate.
type Throughput struct {
	// Records and Bytes are counted inside the window, which runs from
	// FromSecond to ToSecond after the run's start (Seconds long).
	Records          int64   `json:"records"`
	Bytes            int64   `json:"bytes"`
	Seconds          float64 `json:"seconds"`
	FromSecond       float64 `json:"fromSecond"`
	ToSecond         float64 `json:"toSecond"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	MBPerSecond      float64 `json:"mbPerSecond"`
	// TotalRecords counts the whole run, warmup and drain included.
	TotalRecords int64 `json:"totalRecords"`
}

// Check is one sanity check of a run.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Machine describes where a run ran.
type Machine struct {
	Hostname    string `json:"hostname"`
	Cores       int    `json:"cores"`
	MemoryBytes int64  `json:"memoryBytes"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel"`
	GoVersion   string `json:"goVersion"`
	// Commit is the git commit of the working directory's repository
	// (empty outside one); Dirty says its tracked files had changes.
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures when the
	// run started: on a shared machine, the noise it ran in.
	LoadAverage string `json:"loadAverage,omitempty"`
}

// CollectMachine describes this machine. Fields it cannot read are left
// empty.
func CollectMachine() Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryBytes = kb << 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	info, _ := debug.ReadBuildInfo()
	m.Commit, m.Dirty = buildCommit(info, gitCommit)
	return m
}

// buildCommit is the commit the running binary was built from, as the Go
// toolchain stamped it (go build in a repository does; go run and test
// binaries do not), else fallback's answer. The binary's own stamp comes
// first: an older build run from a newer checkout must not be filed
// under the checkout's commit.
func buildCommit(info *debug.BuildInfo, fallback func() (string, bool)) (commit string, dirty bool) {
	if b := buildinfo.FromBuildInfo(info); b.Commit != "" {
		return b.Commit, b.Modified
	}
	return fallback()
}

// gitCommit returns HEAD of the repository around the working directory
// and whether tracked files differ from it. Only reading commands run;
// GIT_OPTIONAL_LOCKS=0 keeps `git status` from refreshing the index.
func gitCommit() (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", false
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	return head, err == nil && status != ""
}

// WriteJSON writes the result, indented, to path.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// ReadResult reads a result WriteJSON wrote.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// UnmarshalJSON reads a result, including one written while a run had
// at most one node: its "node" object becomes the one entry of Nodes, so
// a sitting's older files still report their node's figures.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result // no methods, so no recursion into this one
	var v struct {
		plain
		Node *NodeStats `json:"node"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = Result(v.plain)
	if len(r.Nodes) == 0 && v.Node != nil {
		r.Nodes = []NodeStats{*v.Node}
	}
	return nil
}

// writeFileAtomic writes via a temporary file and a rename, so a reader
// (or a regenerating script) never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// WriteTable prints the result for a person: what ran where, the
// throughputs, the latency percentiles, the node's resources and the
// checks.
func (r *Result) WriteTable(out io.Writer) {
	w := &r.Workload
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "%s on %s, %s: %s\n", w.Name, r.System, r.Started.Format("2006-01-02 15:04:05 UTC"), verdict)
	fmt.Fprintf(out, "  workload  %s\n", describeWorkload(w))
	fmt.Fprintf(out, "  machine   %s\n", describeMachine(&r.Machine))
	fmt.Fprintf(out, "  settings  %s\n", describeSettings(r.DriverSettings))
	fmt.Fprintln(out)

	// Numbers align right; the first column's labels are padded to one
	// width so they read left-aligned.
	const label = "%-13s" // AlignRight pads it by 2, as the lines above are indented
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, label+"\trecords/s\tMB/s\trecords\tseconds\t\n", "throughput")
	for _, row := range []struct {
		name string
		t    Throughput
	}{{"produce", r.Produce}, {"consume", r.Consume}} {
		fmt.Fprintf(tw, label+"\t%s\t%.1f\t%s\t%.1f\t\n", row.name, count(int64(row.t.RecordsPerSecond+0.5)), row.t.MBPerSecond, count(row.t.Records), row.t.Seconds)
	}
	tw.Flush()
	fmt.Fprintln(out)

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, label+"\tp50\tp90\tp99\tp99.9\tmax\trecords\t\n", "latency (ms)")
	latencyRow := func(name string, l *Latency) {
		if l == nil {
			fmt.Fprintf(tw, label+"\t-\t-\t-\t-\t-\t-\t\n", name)
			return
		}
		fmt.Fprintf(tw, label+"\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, ms(l.P50Ms), ms(l.P90Ms), ms(l.P99Ms), ms(l.P999Ms), ms(l.MaxMs), count(l.Count))
	}
	latencyRow("produce ack", &r.ProduceLatency)
	latencyRow("end-to-end", r.EndToEndLatency)
	tw.Flush()
	if r.EndToEndLatency == nil {
		fmt.Fprintln(out, "  (no end-to-end latency in a catch-up run: its records wait in the backlog by design)")
	}
	fmt.Fprintln(out)

	var nodesCPU, nodesWindow float64
	for _, n := range r.Nodes {
		name := "node"
		if n.ID != 0 {
			name = fmt.Sprintf("node %d", n.ID)
		}
		fmt.Fprintf(out, "  %-10spid %d: peak RSS %s (sampled max %s), CPU %.1f s over %.1f s measured (%.2f cores), %.1f s over the whole run\n",
			name, n.PID, mib(n.PeakRSSBytes), mib(n.MaxSampledRSSBytes), n.CPUSeconds, n.CPUWindowSeconds, n.CPUCores, n.CPUSecondsTotal)
		if n.Error != "" {
			fmt.Fprintf(out, "            (incomplete: %s)\n", n.Error)
		}
		nodesCPU += n.CPUSeconds
		nodesWindow = max(nodesWindow, n.CPUWindowSeconds)
	}
	if len(r.Nodes) > 1 && nodesWindow > 0 {
		// What the cluster costs the machine, beside the client's line.
		fmt.Fprintf(out, "  nodes     CPU %.1f s over %.1f s measured (%.2f cores), all %d together\n",
			nodesCPU, nodesWindow, nodesCPU/nodesWindow, len(r.Nodes))
	}
	if c := r.Client; c != nil {
		fmt.Fprintf(out, "  client    CPU %.1f s over %.1f s measured (%.2f cores)\n", c.CPUSeconds, c.CPUWindowSeconds, c.CPUCores)
		if c.Error != "" {
			fmt.Fprintf(out, "            (incomplete: %s)\n", c.Error)
		}
	}
	errLine := fmt.Sprintf("%d send errors", r.SendErrors)
	if r.FirstSendError != "" {
		errLine += "; first: " + r.FirstSendError
	}
	fmt.Fprintf(out, "  errors    %s\n", errLine)
	for i, c := range r.Checks {
		label := "          "
		if i == 0 {
			label = "  checks  "
		}
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "%s%s  %s: %s\n", label, mark, c.Name, c.Detail)
	}
}

func describeWorkload(w *Workload) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s x %s, %s-byte records (%.0f%% random), %s/topic, %s/subscription",
		plural(w.Topics, "topic"), plural(w.PartitionsPerTopic, "partition"), count(int64(w.MessageSize)),
		w.PayloadRandomness*100, plural(w.ProducersPerTopic, "producer"), plural(w.ConsumerPerSubscription, "consumer"))
	if w.SubscriptionsPerTopic > 1 {
		fmt.Fprintf(&b, ", %d subscriptions/topic", w.SubscriptionsPerTopic)
	}
	if w.ProducerRate > 0 {
		fmt.Fprintf(&b, ", %s records/s", count(int64(w.ProducerRate)))
	} else {
		b.WriteString(", as fast as possible")
	}
	if w.KeyDistributor != NoKey {
		fmt.Fprintf(&b, ", keys %s", w.KeyDistributor)
	}
	switch {
	case w.catchUp():
		fmt.Fprintf(&b, ", %g GiB backlog then catch-up", w.ConsumerBacklogSizeGB)
	case w.MessageCount > 0:
		fmt.Fprintf(&b, ", %gs warmup + %s records", w.WarmupSeconds, count(w.MessageCount))
	default:
		fmt.Fprintf(&b, ", %gs warmup + %gs", w.WarmupSeconds, w.TestDurationSeconds)
	}
	return b.String()
}

func describeMachine(m *Machine) string {
	s := fmt.Sprintf("%d cores, %s, %s %s, %s", m.Cores, gib(m.MemoryBytes), m.OS, m.Kernel, m.GoVersion)
	if m.Commit != "" {
		c := m.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += ", commit " + c
		if m.Dirty {
			s += " (with local changes)"
		}
	}
	if m.LoadAverage != "" {
		s += ", load " + m.LoadAverage
	}
	return s
}

func describeSettings(settings map[string]string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, settings[k])
	}
	return b.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// count formats n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b bytes.Buffer
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ms formats a latency with three significant digits, the histogram's
// precision.
func ms(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
