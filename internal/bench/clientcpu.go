package bench

// ClientStats is the benchmark process's own CPU use over the measured
// window: the client's batching, compression, CRCs and decoding compete
// with the node for the same cores, so a node's figures are read beside
// it. A node started by `fjord bench run --local` is a child process,
// which getrusage(RUSAGE_SELF) leaves out, so it is not counted twice.
type ClientStats struct {
	// CPUSeconds is user plus system CPU time over the measured window
	// (CPUWindowSeconds long); CPUCores is their ratio.
	CPUSeconds       float64 `json:"cpuSeconds"`
	CPUWindowSeconds float64 `json:"cpuWindowSeconds"`
	CPUCores         float64 `json:"cpuCores"`
	// Error is why the figures are missing; empty when they were read.
	Error string `json:"error,omitempty"`
}

// clientMonitor reads this process's CPU time at the edges of the
// measured window. Only the runner's own goroutine marks the window and
// reads the result, so it needs no lock.
type clientMonitor struct {
	from    float64
	fromSet bool
	stats   ClientStats
	ended   bool
}

func (m *clientMonitor) fail(err error) {
	if m.stats.Error == "" {
		m.stats.Error = err.Error()
	}
}

func (m *clientMonitor) windowStart() {
	c, err := selfCPUSeconds()
	if err != nil {
		m.fail(err)
		return
	}
	m.from, m.fromSet = c, true
}

// windowEnd marks the end of the measured window, seconds after its
// start.
func (m *clientMonitor) windowEnd(seconds float64) {
	m.ended = true
	c, err := selfCPUSeconds()
	if err != nil {
		m.fail(err)
		return
	}
	if !m.fromSet || seconds <= 0 {
		return
	}
	m.stats.CPUSeconds = c - m.from
	m.stats.CPUWindowSeconds = seconds
	m.stats.CPUCores = m.stats.CPUSeconds / seconds
}

// result is the stats for the Result, nil when no window was measured.
func (m *clientMonitor) result() *ClientStats {
	if !m.ended {
		return nil
	}
	s := m.stats
	return &s
}
