package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The node's resource use comes from Linux's /proc/<pid>:
//
//   - status: VmRSS (resident set now) and VmHWM (the peak resident set
//     over the process's life, which the kernel keeps exactly; sampling
//     VmRSS once a second could miss a short peak).
//   - stat: utime and stime (fields 14 and 15), CPU time in user and
//     kernel mode in clock ticks. A tick is 1/sysconf(_SC_CLK_TCK) s;
//     Go cannot call sysconf without cgo, but the value is USER_HZ,
//     which Linux fixes at 100 for user space on every architecture.
//
// Elsewhere the files do not exist and NodeStats.Error says so.

// clockTicksPerSecond is USER_HZ (see above).
const clockTicksPerSecond = 100

// NodeProcess names one process of the system under test.
type NodeProcess struct {
	// ID names the node in results: a Fjord node's --node-id, a peer
	// server's number in its cluster; 0 when the run has one node that
	// needs no name.
	ID  int
	PID int
}

// NodeStats is one node process's resource use during a run.
type NodeStats struct {
	// ID is NodeProcess.ID (omitted when 0).
	ID  int `json:"id,omitempty"`
	PID int `json:"pid"`
	// PeakRSSBytes is VmHWM at the end of the run: the most memory the
	// process ever had resident.
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// MaxSampledRSSBytes is the largest VmRSS of the once-a-second
	// samples during the run.
	MaxSampledRSSBytes int64 `json:"maxSampledRssBytes"`
	// CPUSeconds is user plus system CPU time over the measured window
	// (CPUWindowSeconds long); CPUCores is their ratio, the cores the
	// node kept busy on average.
	CPUSeconds       float64 `json:"cpuSeconds"`
	CPUWindowSeconds float64 `json:"cpuWindowSeconds"`
	CPUCores         float64 `json:"cpuCores"`
	// CPUSecondsTotal is CPU time over the whole run, warmup and drain
	// included.
	CPUSecondsTotal float64 `json:"cpuSecondsTotal"`
	// Error is why some figures are missing (the process went away, or
	// this is not Linux); empty when all were read.
	Error string `json:"error,omitempty"`
}

// readProcMemory returns VmRSS and VmHWM of pid, in bytes.
func readProcMemory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rss, hwm = -1, -1
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		// "VmRSS:	   12345 kB"
		f := strings.Fields(string(value))
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/%d/status: unexpected %s line %q", pid, name, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*dst = kb << 10
	}
	if rss < 0 || hwm < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS or VmHWM (a kernel thread or a zombie?)", pid)
	}
	return rss, hwm, nil
}

// readProcCPU returns the CPU seconds (user + system) pid has used.
func readProcCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(data)
}

// parseProcStat reads utime+stime from a /proc/<pid>/stat line. The
// second field, the command name in parentheses, may itself hold spaces
// and parentheses, so fields are counted from the last ')'.
func parseProcStat(data []byte) (float64, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat line without a command name: %q", data)
	}
	// After ")": field 3 (state) onwards; utime is field 14, stime 15.
	f := strings.Fields(string(data[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("/proc stat line too short: %q", data)
	}
	u, err1 := strconv.ParseInt(f[utime], 10, 64)
	s, err2 := strconv.ParseInt(f[stime], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat line with bad utime/stime: %q", data)
	}
	return float64(u+s) / clockTicksPerSecond, nil
}

// nodeMonitor samples a node's memory and CPU: the runner's monitor
// goroutine calls sample once a second while the runner's own goroutine
// marks the measured window, hence the lock.
type nodeMonitor struct {
	pid int
	mu  struct {
		sync.Mutex
		stats    NodeStats
		cpuStart float64 // at the start of the run
		cpuFrom  float64 // at the start of the measured window
		fromSet  bool
	}
}

func newNodeMonitor(p NodeProcess) *nodeMonitor {
	m := &nodeMonitor{pid: p.PID}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.stats.ID, m.mu.stats.PID = p.ID, p.PID
	m.mu.cpuStart, _ = m.cpuLocked()
	m.sampleLocked()
	return m
}

// REQUIRES: m.mu held.
func (m *nodeMonitor) failLocked(err error) {
	if m.mu.stats.Error == "" {
		m.mu.stats.Error = err.Error()
	}
}

// REQUIRES: m.mu held.
func (m *nodeMonitor) cpuLocked() (float64, error) {
	c, err := readProcCPU(m.pid)
	if err != nil {
		m.failLocked(err)
	}
	return c, err
}

// sample reads VmRSS once.
func (m *nodeMonitor) sample() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sampleLocked()
}

// REQUIRES: m.mu held.
func (m *nodeMonitor) sampleLocked() {
	rss, _, err := readProcMemory(m.pid)
	if err != nil {
		m.failLocked(err)
		return
	}
	m.mu.stats.MaxSampledRSSBytes = max(m.mu.stats.MaxSampledRSSBytes, rss)
}

// windowStart marks the start of the measured window.
func (m *nodeMonitor) windowStart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.cpuLocked()
	m.mu.cpuFrom, m.mu.fromSet = c, err == nil
}

// windowEnd marks the end of the measured window, seconds after its
// start.
func (m *nodeMonitor) windowEnd(seconds float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.cpuLocked()
	if err != nil || !m.mu.fromSet || seconds <= 0 {
		return
	}
	s := &m.mu.stats
	s.CPUSeconds = c - m.mu.cpuFrom
	s.CPUWindowSeconds = seconds
	s.CPUCores = s.CPUSeconds / seconds
}

// finish reads the peak memory and the whole run's CPU time.
func (m *nodeMonitor) finish() NodeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sampleLocked()
	if _, hwm, err := readProcMemory(m.pid); err == nil {
		m.mu.stats.PeakRSSBytes = hwm
	}
	if c, err := m.cpuLocked(); err == nil {
		m.mu.stats.CPUSecondsTotal = c - m.mu.cpuStart
	}
	return m.mu.stats
}
