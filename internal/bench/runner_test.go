package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The runner against the in-memory fakeDriver: phases, counts, windows
// and sanity checks, with no network in the way.

// tinyWorkload is a short run; tests adjust it.
func tinyWorkload() *Workload {
	return &Workload{
		Name:                    "tiny",
		Topics:                  1,
		PartitionsPerTopic:      4,
		MessageSize:             100,
		PayloadRandomness:       1,
		SubscriptionsPerTopic:   1,
		ConsumerPerSubscription: 2,
		ProducersPerTopic:       2,
		ProducerRate:            4000,
		TestDurationSeconds:     0.5,
		WarmupSeconds:           0.2,
		KeyDistributor:          NoKey,
	}
}

func runFake(t *testing.T, w *Workload, d *fakeDriver, opts RunOptions) (*Result, error) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Run(ctx, w, d, opts)
}

func checkByName(t *testing.T, res *Result, name string) Check {
	t.Helper()
	for _, c := range res.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, res.Checks)
	return Check{}
}

func TestRunCountsEveryRecord(t *testing.T) {
	w := tinyWorkload()
	w.Topics, w.SubscriptionsPerTopic = 2, 2
	w.KeyDistributor = KeyRoundRobin
	var progress bytes.Buffer
	res, err := runFake(t, w, newFakeDriver(), RunOptions{Progress: &progress})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if !res.Passed {
		t.Fatalf("checks failed: %+v", res.Checks)
	}
	// Every acknowledged record reached both subscriptions of its topic.
	if want := 2 * res.Produce.TotalRecords; res.Consume.TotalRecords != want {
		t.Errorf("consumed %d records in total, want %d (2 subscriptions)", res.Consume.TotalRecords, want)
	}
	// The rate is 4,000 records/s over all four producers: ~2,000 in the
	// 0.5 s window. The window counts acks by time, so allow some slack
	// for a loaded machine.
	if n := res.Produce.Records; n < 1600 || n > 2400 {
		t.Errorf("measured %d acks in the 0.5 s window, want about 2,000", n)
	}
	if res.Produce.Seconds != 0.5 || res.Produce.FromSecond != 0.2 || res.Produce.ToSecond != 0.7 {
		t.Errorf("produce window %+v, want 0.2 s to 0.7 s", res.Produce)
	}
	if res.ProduceLatency.Count == 0 || res.EndToEndLatency == nil || res.EndToEndLatency.Count == 0 {
		t.Errorf("no latencies: ack %+v, end-to-end %+v", res.ProduceLatency, res.EndToEndLatency)
	}
	// Latency counts records intended inside the window only; end-to-end
	// counts each once per subscription.
	if res.EndToEndLatency.Count != 2*res.ProduceLatency.Count {
		t.Errorf("end-to-end latency of %d records, want twice the %d acks", res.EndToEndLatency.Count, res.ProduceLatency.Count)
	}
	if len(res.Topics) != 2 || res.System != "fake" || res.DriverSettings["fake"] != "yes" {
		t.Errorf("result header: topics %v, system %q, settings %v", res.Topics, res.System, res.DriverSettings)
	}
	if res.Nodes != nil {
		t.Errorf("node stats without RunOptions.Nodes: %+v", res.Nodes)
	}
}

// Each process named in RunOptions.Nodes gets its own figures, in the
// order given: a cluster's nodes are told apart by their ids.
func TestRunMeasuresEveryNode(t *testing.T) {
	w := tinyWorkload()
	// The two "nodes" are this process (the fake driver's work happens
	// here) and one that does not exist, whose figures say why they are
	// missing.
	nodes := []NodeProcess{{ID: 3, PID: os.Getpid()}, {ID: 1, PID: 1 << 30}}
	res, err := runFake(t, w, newFakeDriver(), RunOptions{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Nodes) != 2 {
		t.Fatalf("%d node figures, want 2: %+v", len(res.Nodes), res.Nodes)
	}
	live, gone := res.Nodes[0], res.Nodes[1]
	if live.ID != 3 || live.PID != os.Getpid() || live.Error != "" || live.PeakRSSBytes <= 0 || live.CPUWindowSeconds != 0.5 {
		t.Errorf("first node %+v, want this process's figures over the 0.5 s window", live)
	}
	if gone.ID != 1 || gone.PID != 1<<30 || gone.PeakRSSBytes != 0 || gone.Error == "" {
		t.Errorf("second node %+v, want no figures and the reason", gone)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	for _, want := range []string{"  node 3    pid " + strconv.Itoa(os.Getpid()), "  node 1    pid 1073741824", "  nodes     CPU "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunRecordsClientCPU(t *testing.T) {
	w := tinyWorkload()
	d := newFakeDriver()
	// 4,000 sends/s of 100 µs each keep 0.4 of a core busy in the
	// benchmark process itself.
	d.spinPerSend = 100 * time.Microsecond
	var measured []float64
	var events []string
	res, err := runFake(t, w, d, RunOptions{
		OnMeasure:    func(s float64) { measured = append(measured, s); events = append(events, "start") },
		OnMeasureEnd: func() { events = append(events, "end") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(measured) != 1 || measured[0] != 0.5 {
		t.Errorf("OnMeasure called with %v, want once with the 0.5 s window", measured)
	}
	if strings.Join(events, ",") != "start,end" {
		t.Errorf("window hooks called %v, want start then end, once each", events)
	}
	c := res.Client
	if c == nil {
		t.Fatal("no client stats")
	}
	if c.Error != "" {
		t.Fatalf("client stats incomplete: %s", c.Error)
	}
	if c.CPUWindowSeconds != 0.5 {
		t.Errorf("client CPU over %v s, want the 0.5 s measured window", c.CPUWindowSeconds)
	}
	// At least a quarter of the spin's 0.2 CPU seconds, in case the
	// machine was too loaded to send at the full rate.
	if c.CPUSeconds < 0.05 || c.CPUCores != c.CPUSeconds/c.CPUWindowSeconds {
		t.Errorf("client CPU %v s (%v cores), want > 0.05 s busy in the window", c.CPUSeconds, c.CPUCores)
	}
	if max := float64(runtime.NumCPU()) * c.CPUWindowSeconds * 1.1; c.CPUSeconds > max {
		t.Errorf("client CPU %v s is more than the machine's %d cores could give in %v s", c.CPUSeconds, runtime.NumCPU(), c.CPUWindowSeconds)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	if !strings.Contains(b.String(), "  client    CPU ") {
		t.Errorf("table lacks the client CPU line:\n%s", b.String())
	}
}

func TestRunMessageCount(t *testing.T) {
	w := tinyWorkload()
	w.TestDurationSeconds, w.MessageCount, w.WarmupSeconds = 0, 3001, 0
	w.ProducerRate = 0 // as fast as possible
	var measured []float64
	var events []string
	res, err := runFake(t, w, newFakeDriver(), RunOptions{
		OnMeasure:    func(s float64) { measured = append(measured, s); events = append(events, "start") },
		OnMeasureEnd: func() { events = append(events, "end") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(measured) != 1 || measured[0] != 0 {
		t.Errorf("OnMeasure called with %v, want once with 0 (the window ends with the last record)", measured)
	}
	if strings.Join(events, ",") != "start,end" {
		t.Errorf("window hooks called %v, want start then end, once each", events)
	}
	// No warmup: every record sent is one of the 3,001, split 1,501 +
	// 1,500 between the two producers.
	if res.Produce.TotalRecords != 3001 || res.Produce.Records != 3001 || res.Consume.Records != 3001 {
		t.Errorf("produced %d (%d measured), consumed %d measured; want 3,001 each",
			res.Produce.TotalRecords, res.Produce.Records, res.Consume.Records)
	}
	if res.ProduceLatency.Count != 3001 {
		t.Errorf("ack latency of %d records, want 3,001", res.ProduceLatency.Count)
	}
	if res.Produce.Seconds <= 0 || res.Produce.RecordsPerSecond <= 0 {
		t.Errorf("an open window must end at the last ack: %+v", res.Produce)
	}
}

func TestRunCatchUp(t *testing.T) {
	w := tinyWorkload()
	w.TestDurationSeconds, w.WarmupSeconds, w.ProducerRate = 0, 0, 0
	w.ConsumerBacklogSizeGB = 1.0 / 1024 // 1 MiB
	d := newFakeDriver()
	res, err := runFake(t, w, d, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	records := int64((1<<20 + 99) / 100)
	if res.Produce.TotalRecords != records || res.Consume.Records != records {
		t.Errorf("backlog of %d records, consumed %d in the window; want %d", res.Produce.TotalRecords, res.Consume.Records, records)
	}
	if res.EndToEndLatency != nil {
		t.Errorf("a catch-up run has no end-to-end latency, got %+v", res.EndToEndLatency)
	}
	// The consume window starts after the backlog is written.
	if res.Consume.FromSecond < res.Produce.ToSecond {
		t.Errorf("consume window %v..%v starts before the backlog was done at %v",
			res.Consume.FromSecond, res.Consume.ToSecond, res.Produce.ToSecond)
	}
}

func TestRunFailsItsSanityChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  func(*fakeDriver)
		check  string
		detail string
	}{
		{"send errors", func(d *fakeDriver) { d.failEvery = 50 }, "sends completed", "failed, 0 never completed, first: fake: send failed"},
		{"lost records", func(d *fakeDriver) { d.dropEvery = 100 }, "consumed == produced", "missing), 0 duplicates, 0 not from this run, 0 of the wrong size; the consumers received nothing for 300ms"},
		{"duplicates", func(d *fakeDriver) { d.dupEvery = 100 }, "consumed == produced", "duplicates"},
		{"corrupt record", func(d *fakeDriver) { d.corrupt = true }, "consumed == produced", "1 of the wrong size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver()
			tc.fault(d)
			w := tinyWorkload()
			w.WarmupSeconds, w.TestDurationSeconds = 0, 0.3
			// A consumer that misses records makes the drain wait for
			// records that never come: keep that wait short.
			res, err := runFake(t, w, d, RunOptions{DrainTimeout: 300 * time.Millisecond})
			if !errors.Is(err, ErrSanityCheck) {
				t.Fatalf("err = %v, want ErrSanityCheck", err)
			}
			if res == nil || res.Passed {
				t.Fatalf("a failed run must return its result, not passed: %+v", res)
			}
			c := checkByName(t, res, tc.check)
			if c.Passed || !strings.Contains(c.Detail, tc.detail) {
				t.Errorf("check %q: passed=%v detail %q, want failed saying %q", tc.check, c.Passed, c.Detail, tc.detail)
			}
			if !strings.Contains(err.Error(), tc.check) {
				t.Errorf("error %q does not name the check %q", err, tc.check)
			}
		})
	}
}

// A broker that stalls shows up in the percentiles of a fixed-rate run:
// records due during the stall are charged from when they were due.
func TestRunStallShowsInPercentiles(t *testing.T) {
	w := tinyWorkload()
	w.ProducerRate, w.TestDurationSeconds, w.WarmupSeconds = 2000, 1.5, 0
	d := newFakeDriver()
	d.stallAfter, d.stallFor = 500*time.Millisecond, 400*time.Millisecond
	res, err := runFake(t, w, d, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// About a quarter of the records were due during the 400 ms stall;
	// the p90 record waited a good part of it.
	for name, l := range map[string]*Latency{"produce ack": &res.ProduceLatency, "end-to-end": res.EndToEndLatency} {
		if l.P90Ms < 100 || l.MaxMs < 300 {
			t.Errorf("%s: p90 %.1f ms, max %.1f ms; a 400 ms stall must show (p90 >= 100 ms, max >= 300 ms)", name, l.P90Ms, l.MaxMs)
		}
	}
	// The producers caught up after the stall: the rate was honoured.
	if n := res.Produce.TotalRecords; math.Abs(float64(n)-3000) > 300 {
		t.Errorf("sent %d records at 2,000/s for 1.5 s, want about 3,000", n)
	}
}

func TestRunRejectsInvalidWorkload(t *testing.T) {
	w := tinyWorkload()
	w.PartitionsPerTopic = 0
	_, err := Run(context.Background(), w, newFakeDriver(), RunOptions{})
	if !errors.Is(err, ErrInvalidWorkload) {
		t.Fatalf("err = %v, want ErrInvalidWorkload", err)
	}
}

func TestRunCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	w := tinyWorkload()
	w.TestDurationSeconds = 60
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, w, newFakeDriver(), RunOptions{})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %v, %v; want no result and context.Canceled", res, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancelled run took %v to return", time.Since(start))
	}
}

// Off a terminal, a progress line goes out every progressEvery samples
// (5 s; 2 s here), without carriage returns.
func TestRunProgress(t *testing.T) {
	w := tinyWorkload()
	w.TestDurationSeconds, w.WarmupSeconds = 2.5, 0
	w.ProducerRate = 1000
	var progress bytes.Buffer
	res, err := runFake(t, w, newFakeDriver(), RunOptions{Progress: &progress, progressEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "measure") || !strings.Contains(lines[0], "rec/s") || strings.Contains(lines[0], "\r") {
		t.Errorf("progress output %q: want one plain line for 2.5 s", progress.String())
	}
	if len(res.Timeline) < 2 {
		t.Errorf("timeline has %d samples for a 2.5 s run, want a sample per second", len(res.Timeline))
	}
	for _, s := range res.Timeline {
		if s.Phase != "measure" && s.Phase != "drain" {
			t.Errorf("sample %+v in phase %q", s, s.Phase)
		}
	}
}
