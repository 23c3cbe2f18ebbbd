//go:build linux

// Command storagebench measures how long a log manager with many partitions
// takes to start, and how much memory and how many file descriptors it holds
// once started: the figures behind the "10k partitions start in under 5 s and
// 500 MiB" target in BENCHMARKS.md.
//
//	go run ./internal/storage/storagebench -partitions 10000 -dir /data
//
// It creates a data directory of N partitions, each with a few small batches
// of random 1 KiB records (every tenth rolled into two segments), and closes
// the manager cleanly. Then each scenario opens the directory again in a
// fresh process (this program re-executed with -phase=open), so the figures
// hold nothing the creating process cached in its own memory:
//
//	clean          after the clean shutdown: no segment is scanned
//	unclean        the clean-shutdown marker deleted: every log is recovered
//	               from its recovery point (the active segment is scanned)
//	unclean-nockpt the marker and the recovery-point checkpoint deleted:
//	               every segment of every log is scanned
//
// Nothing is damaged, so every scenario must find every record; each child
// reports the sum of its logs' end offsets and the run fails if it is short.
// The page cache stays warm between scenarios unless -cold is given, which
// drops it before each open (root only; it affects the whole machine).
//
// Memory is VmHWM (peak resident) and VmRSS (resident after runtime.GC) from
// /proc/self/status of the child. File descriptors are the entries of
// /proc/self/fd after the open: each log keeps its active segment open.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/vfs"
)

const (
	topic        = "bench"
	recordBytes  = 1024
	recordsPerB  = 4 // records per batch: a 4 KiB batch, a low-traffic partition's
	twoSegsEvery = 10
)

// openReport is what a child prints, one JSON line on stdout.
type openReport struct {
	Logs       int     `json:"logs"`
	CleanStart bool    `json:"clean_start"`
	OpenSec    float64 `json:"open_sec"`
	CloseSec   float64 `json:"close_sec"`
	VmHWMKiB   int64   `json:"vm_hwm_kib"`
	VmRSSKiB   int64   `json:"vm_rss_kib"`
	HeapKiB    int64   `json:"heap_kib"`
	FDs        int     `json:"fds"`
	FDLimit    uint64  `json:"fd_limit"`
	SumLEO     int64   `json:"sum_leo"`
	Segments   int     `json:"segments"`
}

func main() {
	partitions := flag.Int("partitions", 10000, "number of partition logs")
	dir := flag.String("dir", ".", "directory (on the disk to measure) under which the data directory is made")
	batches := flag.Int("batches", 3, "batches of 4 x 1 KiB records per partition")
	cold := flag.Bool("cold", false, "drop the page cache before each open (root only; machine-wide)")
	keep := flag.Bool("keep", false, "keep the data directory")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of each open to this path plus .<scenario>")
	phase := flag.String("phase", "", "internal: 'open' runs one measured open of -dir in this process")
	flag.Parse()

	var err error
	if *phase == "open" {
		err = childOpen(*dir, *cpuProfile)
	} else {
		err = run(*dir, *partitions, *batches, *cold, *keep, *cpuProfile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "storagebench:", err)
		os.Exit(1)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func run(parent string, partitions, batches int, cold, keep bool, cpuProfile string) error {
	if partitions < 1 || batches < 1 {
		return errors.New("-partitions and -batches must be positive")
	}
	dataDir, err := os.MkdirTemp(parent, ".storagebench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dataDir)
	}
	fmt.Printf("data directory %s, %d partitions x %d batches of %d x %d B records\n",
		dataDir, partitions, batches, recordsPerB, recordBytes)

	createSec, closeSec, err := create(dataDir, partitions, batches)
	if err != nil {
		return err
	}
	bytesOnDisk, files, err := diskUsage(dataDir)
	if err != nil {
		return err
	}
	fmt.Printf("created in %.2fs (clean close %.2fs): %d files, %.1f MiB\n\n",
		createSec, closeSec, files, float64(bytesOnDisk)/(1<<20))

	wantLEO := int64(partitions) * int64(batches) * recordsPerB
	scenarios := []struct {
		name   string
		remove []string
		clean  bool
	}{
		{"clean", nil, true},
		{"unclean", []string{storage.CleanShutdownFile}, false},
		{"unclean-nockpt", []string{storage.CleanShutdownFile, storage.RecoveryPointCheckpoint}, false},
	}
	fmt.Printf("%-15s %-5s %6s %6s %8s %9s %9s %9s %7s %9s\n",
		"scenario", "cache", "logs", "segs", "open", "VmHWM", "VmRSS", "Go heap", "fds", "close")
	var fdLimit uint64
	for _, sc := range scenarios {
		for _, name := range sc.remove {
			if err := os.Remove(filepath.Join(dataDir, name)); err != nil {
				return err
			}
		}
		cache := "warm"
		if cold {
			cache = "cold"
			if err := dropCaches(); err != nil {
				return err
			}
		}
		prof := ""
		if cpuProfile != "" {
			prof = cpuProfile + "." + sc.name
		}
		rep, err := spawnOpen(dataDir, prof)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		if rep.CleanStart != sc.clean {
			return fmt.Errorf("%s: manager reported clean start %v", sc.name, rep.CleanStart)
		}
		if rep.Logs != partitions || rep.SumLEO != wantLEO {
			return fmt.Errorf("%s: opened %d logs holding %d records, want %d and %d",
				sc.name, rep.Logs, rep.SumLEO, partitions, wantLEO)
		}
		fmt.Printf("%-15s %-5s %6d %6d %7.2fs %5.0f MiB %5.0f MiB %5.0f MiB %7d %8.2fs\n",
			sc.name, cache, rep.Logs, rep.Segments, rep.OpenSec, kib(rep.VmHWMKiB), kib(rep.VmRSSKiB),
			kib(rep.HeapKiB), rep.FDs, rep.CloseSec)
		fdLimit = rep.FDLimit
	}
	fmt.Printf("\nopen-file limit in the child: %d\n", fdLimit)
	return nil
}

func kib(n int64) float64 { return float64(n) / 1024 }

// create makes the data directory and closes it cleanly.
func create(dataDir string, partitions, batches int) (createSec, closeSec float64, err error) {
	start := time.Now()
	m, err := storage.OpenManager(vfs.OS(), dataDir, storage.DefaultConfig(),
		storage.ManagerOptions{NoBackground: true, Logger: quiet})
	if err != nil {
		return 0, 0, err
	}
	rng := rand.NewChaCha8([32]byte{1})
	value := make([]byte, recordBytes)
	bld := record.NewBuilder(record.DefaultBatchOptions())
	nextBatch := func() ([]byte, error) {
		bld.Reset(record.DefaultBatchOptions())
		ts := time.Now().UnixMilli()
		for range recordsPerB {
			rng.Read(value)
			bld.Add(nil, value, nil, ts)
		}
		return bld.Build()
	}
	sample, err := nextBatch() // every batch has this size
	if err != nil {
		return 0, 0, err
	}
	cfg := storage.DefaultConfig()
	// Two segments: a segment.bytes that holds the first half of the
	// batches and not one more.
	twoSegs := cfg
	twoSegs.SegmentBytes = int64(len(sample)*((batches+1)/2)) + 1
	for p := range partitions {
		c := cfg
		twoSegments := p%twoSegsEvery == 0 && batches >= 2
		if twoSegments {
			c = twoSegs
		}
		l, err := m.GetOrCreateLog(storage.TopicPartition{Topic: topic, Partition: int32(p)}, c)
		if err != nil {
			m.Close()
			return 0, 0, err
		}
		for range batches {
			b, err := nextBatch()
			if err == nil {
				_, err = l.Append(b, 0)
			}
			if err != nil {
				m.Close()
				return 0, 0, fmt.Errorf("partition %d: %w", p, err)
			}
		}
		if twoSegments && l.NumSegments() != 2 {
			m.Close()
			return 0, 0, fmt.Errorf("partition %d has %d segments, want 2", p, l.NumSegments())
		}
	}
	createSec = time.Since(start).Seconds()
	start = time.Now()
	if err := m.Close(); err != nil {
		return 0, 0, err
	}
	return createSec, time.Since(start).Seconds(), nil
}

// spawnOpen runs one measured open in a fresh process.
func spawnOpen(dataDir, cpuProfile string) (openReport, error) {
	self, err := os.Executable()
	if err != nil {
		return openReport{}, err
	}
	cmd := exec.Command(self, "-phase=open", "-dir="+dataDir, "-cpuprofile="+cpuProfile)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return openReport{}, err
	}
	var rep openReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return openReport{}, fmt.Errorf("child printed %q: %w", stdout.String(), err)
	}
	return rep, nil
}

// childOpen opens the manager, measures, and closes it cleanly (which
// writes the clean-shutdown marker the next scenario removes).
func childOpen(dataDir, cpuProfile string) error {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	start := time.Now()
	m, err := storage.OpenManager(vfs.OS(), dataDir, storage.DefaultConfig(),
		storage.ManagerOptions{NoBackground: true, Logger: quiet})
	if err != nil {
		return err
	}
	rep := openReport{OpenSec: time.Since(start).Seconds(), CleanStart: m.CleanStart}
	pprof.StopCPUProfile()
	for _, l := range m.Logs() {
		rep.Logs++
		rep.SumLEO += l.LogEndOffset()
		rep.Segments += l.NumSegments()
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapKiB = int64(ms.HeapAlloc >> 10)
	if rep.VmHWMKiB, rep.VmRSSKiB, err = procStatus(); err != nil {
		return err
	}
	if rep.FDs, err = countFDs(); err != nil {
		return err
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		rep.FDLimit = lim.Cur
	}
	start = time.Now()
	if err := m.Close(); err != nil {
		return err
	}
	rep.CloseSec = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// procStatus returns VmHWM and VmRSS in KiB.
func procStatus() (hwm, rss int64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			hwm, err = strconv.ParseInt(f[1], 10, 64)
		case "VmRSS:":
			rss, err = strconv.ParseInt(f[1], 10, 64)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, errors.New("no VmHWM/VmRSS in /proc/self/status")
	}
	return hwm, rss, nil
}

// countFDs counts open descriptors, less the one reading the directory.
func countFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil
}

func diskUsage(dir string) (bytes int64, files int, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Size()
		files++
		return nil
	})
	return bytes, files, err
}

// dropCaches writes dirty pages back and empties the page cache, dentries
// and inodes, so the next open reads from the disk.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("-cold: %w", err)
	}
	return nil
}
