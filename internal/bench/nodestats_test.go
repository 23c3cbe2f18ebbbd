package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadProcOfThisProcess(t *testing.T) {
	rss, hwm, err := readProcMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || hwm < rss {
		t.Errorf("VmRSS %d, VmHWM %d: want 0 < rss <= peak", rss, hwm)
	}
	before, err := readProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel's 10 ms tick shows it, for at most 10 s.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		if now, _ := readProcCPU(os.Getpid()); now >= before+0.02 {
			return
		}
	}
	t.Errorf("CPU time did not advance from %v s in 10 s of spinning (%d)", before, x)
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (fjord (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 100 0 0"
	got, err := parseProcStat([]byte(line))
	if err != nil || got != 2.87 {
		t.Errorf("parseProcStat = %v, %v; want 2.87 s (287 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 fjord S 1", "4242 (fjord) S 1 2 3", "4242 (f) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 37"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

func TestNodeMonitor(t *testing.T) {
	m := newNodeMonitor(NodeProcess{ID: 2, PID: os.Getpid()})
	m.windowStart()
	m.sample()
	m.windowEnd(0.5)
	s := m.finish()
	if s.Error != "" || s.ID != 2 || s.PID != os.Getpid() || s.PeakRSSBytes <= 0 || s.MaxSampledRSSBytes <= 0 || s.CPUWindowSeconds != 0.5 {
		t.Errorf("stats of this process: %+v", s)
	}
	// A process that is not there: figures missing, and the reason.
	gone := newNodeMonitor(NodeProcess{PID: 1 << 30})
	gone.windowStart()
	if s := gone.finish(); s.PeakRSSBytes != 0 || !strings.Contains(s.Error, "no such file") {
		t.Errorf("stats of a missing process: %+v", s)
	}
}
