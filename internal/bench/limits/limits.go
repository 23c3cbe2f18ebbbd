// Package limits measures the ceilings that a broker on this machine can
// approach, with Go code in the same process as the rest of `fjord bench`,
// so that Fjord's figures can be quoted as a fraction of them in one
// sitting:
//
//   - sequential write with fdatasync (1 MiB blocks), once with one
//     fdatasync at the end and once with one per MiB;
//   - page-cache read of the file just written;
//   - loopback TCP throughput (127.0.0.1, 1 MiB writes, measured at the
//     receiver);
//   - the bare ingest loop: batches of 1 KiB records arrive framed on a
//     loopback socket; the receiver reads each frame into a reused
//     buffer, checks its CRC32C and appends it to a file with one write,
//     once to the page cache only and once with an fdatasync per MiB.
//
// The bare ingest loop is the ceiling: it does, with nothing else, the
// work a broker cannot avoid for a produce request (socket to memory,
// checksum, memory to file, and for flush.policy=ack the fdatasync). A
// broker adds parsing, indexing, replication and acknowledgements on top,
// so it can only approach this figure.
//
// Every measurement runs Config.Runs times, interleaved (write, read,
// TCP, ingest, then again) so that a noisy neighbour on a shared VM
// spreads over all of them rather than spoiling one; the median is the
// figure to quote. Throughput is in MB/s of 10^6 bytes.
//
// Why runs differ by up to 5x on the reference VM: the slow runs are
// slow in the buffered writes, not in fdatasync. Writing 1 GiB into the
// page cache took 2.4 s in some runs and 0.2 s in others, with the
// fdatasync after it 0.25-0.33 s every time; the guest's free memory is
// (we believe) handed back to the host and faulted in again on first
// use. Fjord's page cache pays the same toll, so the tool does not hide
// it (say, by touching memory first); it runs interleaved and quotes
// the median.
//
// Threads: Run and the measurement functions are called by one goroutine;
// the TCP measurements start a sender goroutine each and wait for it
// before returning.
package limits

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Sentinel errors.
var (
	// ErrMemoryFS: the directory given for the disk measurements is on a
	// file system held in memory (tmpfs, ramfs), whose figures would be
	// memory bandwidth presented as disk bandwidth.
	ErrMemoryFS = errors.New("directory is on a memory file system")
	// ErrInvalidConfig: a size, count or record layout is out of range.
	ErrInvalidConfig = errors.New("invalid limits configuration")
	// ErrNoSpace: the directory's file system has too little free space
	// for the largest file a measurement writes.
	ErrNoSpace = errors.New("not enough free disk space")
	// ErrCorruptBatch: a batch received by the ingest loop failed its
	// CRC32C check or was framed with a bad length. It means a bug in
	// this package (loopback does not corrupt), never a figure to report.
	ErrCorruptBatch = errors.New("corrupt batch")
)

// Names of the measurements, as they appear in Result.Measurements and in
// the JSON; scripts and BENCHMARKS.md refer to them.
const (
	NameDiskWriteSyncEnd    = "disk-write-fdatasync-end"
	NameDiskWriteSyncPerMiB = "disk-write-fdatasync-per-mib"
	NamePageCacheRead       = "page-cache-read"
	NameLoopbackTCP         = "loopback-tcp"
	NameIngestPageCache     = "ingest-page-cache"
	NameIngestSyncPerMiB    = "ingest-fdatasync-per-mib"
)

const (
	// MiB is 2^20 bytes; sizes are in binary units, throughput in MB/s
	// (10^6 bytes per second), as disks and NICs are quoted.
	MiB = 1 << 20
	GiB = 1 << 30

	// syncEveryBytes is the fdatasync interval of the "per MiB" variants:
	// the most a flush.policy=ack broker would sync at under steady load
	// with 1 MiB produce batches.
	syncEveryBytes = MiB

	// maxBatchBytes bounds a frame of the ingest loop; the receiver's
	// buffer is this large at most.
	maxBatchBytes = 64 * MiB
)

// Config sizes the measurements. Each total is what one run moves; the
// zero value is not valid, start from DefaultConfig.
type Config struct {
	// Dir holds the files of the disk and ingest measurements. It must
	// not be on tmpfs or ramfs. Files are removed after each run.
	Dir string `json:"dir"`
	// Runs is how many times each measurement runs (the median is
	// reported).
	Runs int `json:"runs"`
	// BlockBytes is the size of each write and read of the disk, page
	// cache and TCP measurements.
	BlockBytes int64 `json:"block_bytes"`
	// WriteBytes is the file size of each sequential-write run (both
	// variants); the page-cache read reads that file.
	WriteBytes int64 `json:"write_bytes"`
	// ReadBytes is how much a page-cache read run reads, going round the
	// file again when it is smaller.
	ReadBytes int64 `json:"read_bytes"`
	// TCPBytes is how much a loopback TCP run sends.
	TCPBytes int64 `json:"tcp_bytes"`
	// IngestBytes is how many batch bytes an ingest run sends (rounded up
	// to whole batches).
	IngestBytes int64 `json:"ingest_bytes"`
	// RecordBytes and BatchBytes shape the ingest loop's batches:
	// BatchBytes/RecordBytes records of RecordBytes random bytes each.
	RecordBytes int `json:"record_bytes"`
	BatchBytes  int `json:"batch_bytes"`

	// Progress, when not nil, receives one line per finished run.
	Progress io.Writer `json:"-"`
}

// DefaultConfig returns the sizes used by `fjord bench limits` without
// flags: large enough that one run takes about a second on a machine of
// the reference class (2 vCPUs, virtio disk) and dwarfs start-up costs.
func DefaultConfig() Config {
	return Config{
		Dir:         "bench-data",
		Runs:        3,
		BlockBytes:  MiB,
		WriteBytes:  GiB,
		ReadBytes:   2 * GiB,
		TCPBytes:    2 * GiB,
		IngestBytes: GiB,
		RecordBytes: 1024,
		BatchBytes:  MiB,
	}
}

// Validate reports the first value out of range, wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Dir == "":
		return bad("no directory for the disk measurements")
	case c.Runs < 1 || c.Runs > 100:
		return bad("runs %d: allowed 1 to 100", c.Runs)
	case c.BlockBytes < 1 || c.BlockBytes > maxBatchBytes:
		return bad("block size %d: allowed 1 byte to 64 MiB", c.BlockBytes)
	case c.WriteBytes < 1:
		return bad("write size %d: must be positive", c.WriteBytes)
	case c.ReadBytes < 1:
		return bad("read size %d: must be positive", c.ReadBytes)
	case c.TCPBytes < 1:
		return bad("TCP size %d: must be positive", c.TCPBytes)
	case c.IngestBytes < 1:
		return bad("ingest size %d: must be positive", c.IngestBytes)
	}
	return IngestOptions{TotalBytes: c.IngestBytes, RecordBytes: c.RecordBytes, BatchBytes: c.BatchBytes}.validate()
}

// Sample is one run of one measurement.
type Sample struct {
	// Bytes moved in the timed interval (for the ingest loop: batch
	// bytes, the frames' length prefixes excluded).
	Bytes int64 `json:"bytes"`
	// Duration of the timed interval; encoded in nanoseconds.
	Duration time.Duration `json:"duration_ns"`
	// MBps is Bytes/Duration in 10^6 bytes per second.
	MBps float64 `json:"mb_per_s"`
	// Records is the number of records in the ingested batches (ingest
	// loop only).
	Records int64 `json:"records,omitempty"`
}

func newSample(bytes int64, d time.Duration) Sample {
	if d <= 0 {
		// A clock that did not move (coarse timers, tiny sizes) must not
		// produce an infinite figure; one nanosecond is the honest floor.
		d = time.Nanosecond
	}
	return Sample{Bytes: bytes, Duration: d, MBps: float64(bytes) / d.Seconds() / 1e6}
}

// Measurement is every run of one measurement and their median.
type Measurement struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	MedianMBps  float64  `json:"median_mb_per_s"`
	Runs        []Sample `json:"runs"`
}

// Result is the outcome of Run: what was measured, where, and how fast.
type Result struct {
	Start        time.Time     `json:"start"`
	Machine      Machine       `json:"machine"`
	Config       Config        `json:"config"`
	Measurements []Measurement `json:"measurements"`
}

// Median returns the median MB/s of the named measurement.
func (r *Result) Median(name string) (float64, bool) {
	for _, m := range r.Measurements {
		if m.Name == name {
			return m.MedianMBps, true
		}
	}
	return 0, false
}

// median is the middle value, or the mean of the two middle values.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Run measures everything cfg describes, Runs times, interleaved.
// cfg.Dir is created if missing and must not be on a memory file system.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Check before creating anything, so that a refused directory is
	// not left behind on the tmpfs.
	if err := CheckDir(existingAncestor(cfg.Dir)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench directory: %w", err)
	}
	if err := CheckDir(cfg.Dir); err != nil {
		return nil, err
	}
	// Only one file exists at a time: each run removes its file before
	// the next starts.
	need := max(cfg.WriteBytes, cfg.IngestBytes+int64(cfg.BatchBytes))
	if err := checkFreeSpace(cfg.Dir, need); err != nil {
		return nil, err
	}
	res := &Result{Start: time.Now().UTC(), Machine: DescribeMachine(cfg.Dir), Config: cfg}

	// The page-cache read reads the file of the write run just before it
	// (synced, so its pages are clean and cached), which saves writing
	// another file; every file is removed by the measurement after it at
	// the latest, and by this defer if a run fails.
	writePath := filepath.Join(cfg.Dir, "limits-write.dat")
	ingestPath := filepath.Join(cfg.Dir, "limits-ingest.dat")
	defer os.Remove(writePath)
	defer os.Remove(ingestPath)
	write := func(syncEvery int64, keep bool) func(context.Context) (Sample, error) {
		return func(ctx context.Context) (Sample, error) {
			if !keep {
				defer os.Remove(writePath)
			}
			return SequentialWrite(ctx, writePath, WriteOptions{TotalBytes: cfg.WriteBytes, BlockBytes: cfg.BlockBytes, SyncEveryBytes: syncEvery})
		}
	}
	ingest := func(syncEvery int64) func(context.Context) (Sample, error) {
		return func(ctx context.Context) (Sample, error) {
			defer os.Remove(ingestPath)
			return BareIngest(ctx, ingestPath, IngestOptions{
				TotalBytes: cfg.IngestBytes, RecordBytes: cfg.RecordBytes,
				BatchBytes: cfg.BatchBytes, SyncEveryBytes: syncEvery,
			})
		}
	}
	batch := fmt.Sprintf("%s batches of %s records", FormatSize(int64(cfg.BatchBytes)), FormatSize(int64(cfg.RecordBytes)))
	measurements := []struct {
		name, description string
		run               func(ctx context.Context) (Sample, error)
	}{
		{NameDiskWriteSyncEnd, fmt.Sprintf("disk write, %s blocks, fdatasync at end", FormatSize(cfg.BlockBytes)), write(0, true)},
		{NamePageCacheRead, fmt.Sprintf("page-cache read, %s blocks", FormatSize(cfg.BlockBytes)), func(ctx context.Context) (Sample, error) {
			defer os.Remove(writePath)
			return PageCacheRead(ctx, writePath, ReadOptions{TotalBytes: cfg.ReadBytes, BlockBytes: cfg.BlockBytes})
		}},
		{NameDiskWriteSyncPerMiB, fmt.Sprintf("disk write, %s blocks, fdatasync per MiB", FormatSize(cfg.BlockBytes)), write(syncEveryBytes, false)},
		{NameLoopbackTCP, fmt.Sprintf("loopback TCP, %s writes", FormatSize(cfg.BlockBytes)), func(ctx context.Context) (Sample, error) {
			return LoopbackTCP(ctx, TCPOptions{TotalBytes: cfg.TCPBytes, BlockBytes: cfg.BlockBytes})
		}},
		{NameIngestPageCache, "bare ingest, " + batch + ", page cache", ingest(0)},
		{NameIngestSyncPerMiB, "bare ingest, " + batch + ", fdatasync per MiB", ingest(syncEveryBytes)},
	}
	res.Measurements = make([]Measurement, len(measurements))
	for i, m := range measurements {
		res.Measurements[i] = Measurement{Name: m.name, Description: m.description}
	}
	for run := 1; run <= cfg.Runs; run++ {
		for i, m := range measurements {
			s, err := m.run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s, run %d: %w", m.name, run, err)
			}
			res.Measurements[i].Runs = append(res.Measurements[i].Runs, s)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "limits: %-28s run %d/%d: %8.0f MB/s (%s in %v)\n",
					m.name, run, cfg.Runs, s.MBps, FormatSize(s.Bytes), s.Duration.Round(time.Millisecond))
			}
		}
	}
	for i := range res.Measurements {
		v := make([]float64, len(res.Measurements[i].Runs))
		for j, s := range res.Measurements[i].Runs {
			v[j] = s.MBps
		}
		res.Measurements[i].MedianMBps = median(v)
	}
	return res, nil
}

// existingAncestor returns dir, or its nearest ancestor that exists.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
