package bench

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// sampleResult is a result as a 10 s run with a warmup would leave it.
func sampleResult(t *testing.T) *Result {
	t.Helper()
	w, err := LoadWorkload("max-rate-16p-1kb-4p4c")
	if err != nil {
		t.Fatal(err)
	}
	ack, e2e := newLatencyHistogram(), newLatencyHistogram()
	for i := int64(1); i <= 100_000; i++ {
		recordNanos(ack, 1_000_000+i*50)     // 1..6 ms
		recordNanos(e2e, 2_000_000+i*i/1000) // a long tail
	}
	ackL, e2eL := summarizeLatency(ack), summarizeLatency(e2e)
	res := &Result{
		Workload:        *w,
		System:          "fjord",
		DriverSettings:  map[string]string{"acks": "all", "topic flush.policy": "interval"},
		Topics:          []string{"bench-x-0"},
		Machine:         CollectMachine(),
		Started:         time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC),
		Finished:        time.Date(2026, 11, 30, 18, 0, 14, 0, time.UTC),
		Produce:         Throughput{Records: 5_000_000, Bytes: 5_120_000_000, Seconds: 10, FromSecond: 2, ToSecond: 12, RecordsPerSecond: 500_000, MBPerSecond: 512, TotalRecords: 6_000_000},
		Consume:         Throughput{Records: 4_900_000, Bytes: 5_017_600_000, Seconds: 10, FromSecond: 2, ToSecond: 12, RecordsPerSecond: 490_000, MBPerSecond: 501.76, TotalRecords: 6_000_000},
		ProduceLatency:  ackL,
		EndToEndLatency: &e2eL,
		Nodes:           []NodeStats{{PID: 42, PeakRSSBytes: 100 << 20, MaxSampledRSSBytes: 99 << 20, CPUSeconds: 9, CPUWindowSeconds: 10, CPUCores: 0.9, CPUSecondsTotal: 13}},
		Client:          &ClientStats{CPUSeconds: 8.5, CPUWindowSeconds: 10, CPUCores: 0.85},
		Checks:          []Check{{Name: "sends completed", Passed: true, Detail: "all"}, {Name: "consumed == produced", Passed: true, Detail: "all"}},
		Passed:          true,
	}
	for s := 1; s <= 13; s++ {
		phase := "measure"
		if s <= 2 {
			phase = "warmup"
		}
		res.Timeline = append(res.Timeline, Sample{Second: float64(s), Phase: phase,
			ProducedRecordsPerSecond: 500_000, ConsumedRecordsPerSecond: 490_000 + float64(s*1000),
			ProducedMBPerSecond: 512, ConsumedMBPerSecond: 501.76 + float64(s)})
	}
	return res
}

func TestResultJSONRoundTrip(t *testing.T) {
	res := sampleResult(t)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := res.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res) {
		t.Errorf("round trip changed the result:\n got %+v\nwant %+v", got, res)
	}
	// The field names other tools (the peer's runner, BENCHMARKS.md's
	// generator) read.
	data, _ := os.ReadFile(path)
	for _, key := range []string{`"partitionsPerTopic": 16`, `"mbPerSecond": 512`, `"p99Ms"`, `"peakRssBytes": 104857600`, `"client": {`, `"percentiles"`, `"timeline"`, `"passed": true`} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("writing left %d files, want only r.json", len(entries))
	}
}

// A result written while a run measured at most one node carries a
// "node" object; read today, it is the one entry of Nodes, so a sitting
// that mixes old and new files reports every node's figures.
func TestReadResultOfOneNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	old := `{"workload": {"name": "max-rate-1p-1kb"}, "system": "fjord", "passed": true,
		"node": {"pid": 7, "peakRssBytes": 1048576, "cpuSeconds": 2, "cpuWindowSeconds": 4, "cpuCores": 0.5}}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeStats{{PID: 7, PeakRSSBytes: 1 << 20, CPUSeconds: 2, CPUWindowSeconds: 4, CPUCores: 0.5}}
	if !reflect.DeepEqual(got.Nodes, want) || got.Workload.Name != "max-rate-1p-1kb" || !got.Passed {
		t.Errorf("read %+v with nodes %+v, want the old node as Nodes %+v", got, got.Nodes, want)
	}
	// Written again, it has the list only.
	if err := got.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(`"node":`)) || !bytes.Contains(data, []byte(`"nodes": [`)) {
		t.Errorf("rewritten JSON does not carry the nodes as a list:\n%s", data)
	}
}

func TestResultTable(t *testing.T) {
	res := sampleResult(t)
	var b bytes.Buffer
	res.WriteTable(&b)
	out := b.String()
	for _, want := range []string{
		"max-rate-16p-1kb-4p4c on fjord, 2026-11-30 18:00:00 UTC: PASSED",
		"1 topic x 16 partitions, 1,024-byte records (100% random), 4 producers/topic, 4 consumers/subscription, as fast as possible, 10s warmup + 30s",
		"  settings  acks=all, topic flush.policy=interval",
		"peak RSS 100.0 MiB",
		"CPU 9.0 s over 10.0 s measured (0.90 cores)",
		"  client    CPU 8.5 s over 10.0 s measured (0.85 cores)\n",
		"0 send errors",
		"ok    sends completed: all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Latency rows: produce ack p50 is 3.5 ms (1..6 ms, uniform).
	var ackRow, produceRow string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "produce ack") {
			ackRow = line
		}
		if strings.HasPrefix(line, "  produce  ") {
			produceRow = line
		}
	}
	if f := strings.Join(strings.Fields(produceRow), " "); f != "produce 500,000 512.0 5,000,000 10.0" {
		t.Errorf("produce row %q", produceRow)
	}
	if f := strings.Fields(ackRow); len(f) != 8 || f[2] != "3.50" || f[7] != "100,000" {
		t.Errorf("produce ack row %q: want p50 3.50 over 100,000 records", ackRow)
	}

	res.Passed = false
	res.Checks[1] = Check{Name: "consumed == produced", Detail: "3 missing"}
	res.EndToEndLatency = nil
	b.Reset()
	res.WriteTable(&b)
	for _, want := range []string{": FAILED", "FAIL  consumed == produced: 3 missing", "no end-to-end latency in a catch-up run"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestResultPNG(t *testing.T) {
	res := sampleResult(t)
	path := filepath.Join(t.TempDir(), "r.png")
	if err := res.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 1000 {
		t.Errorf("image is %dx%d, want 1200x1000", b.Dx(), b.Dy())
	}
	// Something was drawn: the image is not one flat colour.
	colours := map[[4]uint32]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 7 {
		for x := 0; x < img.Bounds().Dx(); x += 7 {
			r, g, b, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, b, a}] = true
		}
	}
	if len(colours) < 5 {
		t.Errorf("the PNG has %d colours; nothing was drawn", len(colours))
	}

	// A result with nothing measured (a failed run) still draws.
	empty := &Result{Workload: res.Workload, System: "fjord"}
	if err := empty.WritePNG(filepath.Join(t.TempDir(), "empty.png")); err != nil {
		t.Errorf("empty result: %v", err)
	}
}

func TestPercentileTicks(t *testing.T) {
	var labels []string
	for _, tk := range (percentileTicks{}).Ticks(1, 150_000) {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0% 90% 99% 99.9% 99.99% 99.999%" {
		t.Errorf("ticks %s", got)
	}
	if x := percentileX(99, 1000, 1); x < 99.99 || x > 100.01 {
		t.Errorf("percentileX(99) = %v, want 100", x)
	}
	if x := percentileX(100, 1000, 500); x != 1000 {
		t.Errorf("percentileX(100) = %v, want the count", x)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// The binary's own stamp names the commit; the checkout is asked only
// when the binary has none.
func TestBuildCommit(t *testing.T) {
	fallback := func() (string, bool) { return "checkout", true }
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"},
	}}
	dirtyStamp := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "def456"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name   string
		info   *debug.BuildInfo
		commit string
		dirty  bool
	}{
		{"stamped", stamped, "abc123", false},
		{"stamped, modified", dirtyStamp, "def456", true},
		{"no stamp", &debug.BuildInfo{}, "checkout", true},
		{"no build info", nil, "checkout", true},
	} {
		if commit, dirty := buildCommit(tc.info, fallback); commit != tc.commit || dirty != tc.dirty {
			t.Errorf("%s: %q %v, want %q %v", tc.name, commit, dirty, tc.commit, tc.dirty)
		}
	}
}
