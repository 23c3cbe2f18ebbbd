package limits

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Every measurement starts goroutines (the TCP sender, the dialer); the
// leak check proves each one is waited for, on success and on failure.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// diskDir returns a directory for files that must be on a disk: the
// test's temporary directory, unless that is in memory (tmpfs /tmp),
// in which case a directory beside the test (ignored by git as
// .benchdata-*) that the test removes.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if CheckDir(dir) == nil {
		return dir
	}
	dir, err := os.MkdirTemp(".", ".benchdata-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := CheckDir(dir); err != nil {
		t.Fatalf("no disk directory for the test: %v", err)
	}
	return dir
}

func checkSample(t *testing.T, s Sample, wantBytes int64) {
	t.Helper()
	if s.Bytes != wantBytes {
		t.Errorf("bytes = %d, want %d", s.Bytes, wantBytes)
	}
	if s.Duration <= 0 || s.MBps <= 0 {
		t.Errorf("duration %v, %v MB/s: want both positive", s.Duration, s.MBps)
	}
	if want := float64(s.Bytes) / s.Duration.Seconds() / 1e6; s.MBps != want {
		t.Errorf("MB/s = %v, want bytes/seconds/1e6 = %v", s.MBps, want)
	}
}

func TestSequentialWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		syncEvery int64
	}{{"fdatasync at end", 0}, {"fdatasync every 64 KiB", 64 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(diskDir(t), "w.dat")
			// Not a multiple of the block: the last write is short.
			const total = 300<<10 + 7
			s, err := SequentialWrite(context.Background(), path, WriteOptions{TotalBytes: total, BlockBytes: 64 << 10, SyncEveryBytes: tc.syncEvery})
			if err != nil {
				t.Fatal(err)
			}
			checkSample(t, s, total)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != total {
				t.Fatalf("file holds %d bytes, want %d", len(b), total)
			}
			if bytes.Count(b[:4096], []byte{0}) > 256 {
				t.Errorf("file does not look random: %d zero bytes in its first 4 KiB", bytes.Count(b[:4096], []byte{0}))
			}
		})
	}
}

func TestPageCacheRead(t *testing.T) {
	path := filepath.Join(diskDir(t), "r.dat")
	if _, err := SequentialWrite(context.Background(), path, WriteOptions{TotalBytes: 100 << 10, BlockBytes: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	// More than the file: the read goes round it again.
	s, err := PageCacheRead(context.Background(), path, ReadOptions{TotalBytes: 1<<20 + 3, BlockBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	checkSample(t, s, 1<<20+3)

	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PageCacheRead(context.Background(), empty, ReadOptions{TotalBytes: 10, BlockBytes: 10}); err == nil {
		t.Error("reading an empty file: want an error, not an endless loop or a figure")
	}
}

func TestLoopbackTCP(t *testing.T) {
	const total = 8<<20 + 5
	s, err := LoopbackTCP(context.Background(), TCPOptions{TotalBytes: total, BlockBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	checkSample(t, s, total)
}

func TestLoopbackTCPCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoopbackTCP(ctx, TCPOptions{TotalBytes: 1 << 20, BlockBytes: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled before the start: err = %v, want context.Canceled", err)
	}

	// A run that cannot finish (1 TiB) must end when ctx does, with
	// both goroutines gone (TestMain checks).
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := LoopbackTCP(ctx, TCPOptions{TotalBytes: 1 << 40, BlockBytes: 1 << 20})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("canceled during the run: err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("took %v to stop after its context ended", d)
	}
}

func TestBareIngest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		syncEvery int64
	}{{"page cache", 0}, {"fdatasync every 64 KiB", 64 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(diskDir(t), "ingest.dat")
			o := IngestOptions{TotalBytes: 1 << 20, RecordBytes: 1024, BatchBytes: 64 << 10, SyncEveryBytes: tc.syncEvery}
			s, err := BareIngest(context.Background(), path, o)
			if err != nil {
				t.Fatal(err)
			}
			// 64 records of 1 KiB after each 4-byte CRC; 1 MiB of
			// records is 16 batches.
			const batchLen = 4 + 64*1024
			const batches = 16
			checkSample(t, s, batches*batchLen)
			if s.Records != batches*64 {
				t.Errorf("records = %d, want %d", s.Records, batches*64)
			}
			// The file holds exactly the batches, each with a valid CRC.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != batches*batchLen {
				t.Fatalf("file holds %d bytes, want %d", len(b), batches*batchLen)
			}
			for i := 0; i < batches; i++ {
				batch := b[i*batchLen : (i+1)*batchLen]
				if got, want := crc32.Checksum(batch[4:], castagnoli), binary.BigEndian.Uint32(batch[:4]); got != want {
					t.Fatalf("batch %d in the file: crc32c %08x, header %08x", i, got, want)
				}
			}
		})
	}
}

func TestAppendFramesRejectsBadFrames(t *testing.T) {
	o := IngestOptions{TotalBytes: 1, RecordBytes: 100, BatchBytes: 1000}
	good := buildFrames(o)[0]
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	long := bytes.Clone(good)
	binary.BigEndian.PutUint32(long, uint32(len(good))) // 4 more than the buffer
	short := bytes.Clone(good)
	binary.BigEndian.PutUint32(short, 3)
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"good", good, nil},
		{"flipped bit in a record", flipped, ErrCorruptBatch},
		{"length beyond the buffer", long, ErrCorruptBatch},
		{"length shorter than a CRC", short, ErrCorruptBatch},
		{"cut short", good[:len(good)-1], io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n, err := appendFrames(bytes.NewReader(tc.input), f, 1, len(good)-4, 0)
			if tc.want == nil {
				if err != nil || n != int64(len(good)-4) {
					t.Fatalf("appended %d, err %v; want %d, nil", n, err, len(good)-4)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if n != 0 {
				t.Errorf("appended %d bytes of a bad frame", n)
			}
		})
	}
}

func TestIngestOptionsValidate(t *testing.T) {
	for _, o := range []IngestOptions{
		{TotalBytes: 0, RecordBytes: 1, BatchBytes: 100},
		{TotalBytes: 1, RecordBytes: 0, BatchBytes: 100},
		{TotalBytes: 1, RecordBytes: 1, BatchBytes: 0},
		{TotalBytes: 1, RecordBytes: 1, BatchBytes: maxBatchBytes + 1},
		{TotalBytes: 1, RecordBytes: 101, BatchBytes: 100},
		{TotalBytes: 1, RecordBytes: 1, BatchBytes: 100, SyncEveryBytes: -1},
	} {
		if err := o.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", o, err)
		}
	}
	if err := (IngestOptions{TotalBytes: 1, RecordBytes: 100, BatchBytes: 100}).validate(); err != nil {
		t.Errorf("record filling the batch exactly: %v", err)
	}
}

func TestCheckFSMagic(t *testing.T) {
	for _, tc := range []struct {
		magic uint32
		name  string // "" when the file system is accepted
	}{
		{0x01021994, "tmpfs"},
		{0x858458f6, "ramfs"},
		{0xEF53, ""},     // ext2/3/4
		{0x58465342, ""}, // xfs
		{0x9123683E, ""}, // btrfs
		{0, ""},
	} {
		err := checkFSMagic("/some/dir", tc.magic)
		if tc.name == "" {
			if err != nil {
				t.Errorf("magic %#x: %v, want accepted", tc.magic, err)
			}
			continue
		}
		if !errors.Is(err, ErrMemoryFS) {
			t.Errorf("magic %#x: err = %v, want ErrMemoryFS", tc.magic, err)
			continue
		}
		for _, want := range []string{tc.name, "/some/dir", "--dir", "FJORD_BENCH_DIR"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("magic %#x: message %q does not mention %q", tc.magic, err, want)
			}
		}
	}
	if _, err := fsMagic(t.TempDir()); err != nil {
		t.Errorf("statfs of a real directory: %v", err)
	}
	if err := CheckDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("CheckDir of a missing directory: want an error")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, change := range map[string]func(*Config){
		"no dir":            func(c *Config) { c.Dir = "" },
		"zero runs":         func(c *Config) { c.Runs = 0 },
		"negative write":    func(c *Config) { c.WriteBytes = -1 },
		"zero read":         func(c *Config) { c.ReadBytes = 0 },
		"zero tcp":          func(c *Config) { c.TCPBytes = 0 },
		"zero ingest":       func(c *Config) { c.IngestBytes = 0 },
		"huge block":        func(c *Config) { c.BlockBytes = 1 << 40 },
		"record over batch": func(c *Config) { c.RecordBytes = 2 * MiB },
	} {
		c := DefaultConfig()
		change(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func tinyConfig(dir string) Config {
	return Config{
		Dir: dir, Runs: 2, BlockBytes: 64 << 10,
		WriteBytes: 256 << 10, ReadBytes: 512 << 10, TCPBytes: 1 << 20, IngestBytes: 256 << 10,
		RecordBytes: 1024, BatchBytes: 64 << 10,
	}
}

func TestRun(t *testing.T) {
	dir := filepath.Join(diskDir(t), "made-by-run")
	cfg := tinyConfig(dir)
	var progress bytes.Buffer
	cfg.Progress = &progress
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{NameDiskWriteSyncEnd, NamePageCacheRead, NameDiskWriteSyncPerMiB, NameLoopbackTCP, NameIngestPageCache, NameIngestSyncPerMiB}
	if len(res.Measurements) != len(wantNames) {
		t.Fatalf("%d measurements, want %d", len(res.Measurements), len(wantNames))
	}
	for i, m := range res.Measurements {
		if m.Name != wantNames[i] {
			t.Errorf("measurement %d is %q, want %q", i, m.Name, wantNames[i])
		}
		if len(m.Runs) != cfg.Runs {
			t.Errorf("%s: %d runs, want %d", m.Name, len(m.Runs), cfg.Runs)
		}
		if m.MedianMBps <= 0 || m.Description == "" {
			t.Errorf("%s: median %v MB/s, description %q", m.Name, m.MedianMBps, m.Description)
		}
		for _, s := range m.Runs {
			if s.Bytes <= 0 || s.Duration <= 0 || s.MBps <= 0 {
				t.Errorf("%s: run %+v: want positive figures", m.Name, s)
			}
		}
		if got, ok := res.Median(m.Name); !ok || got != m.MedianMBps {
			t.Errorf("Median(%q) = %v, %v", m.Name, got, ok)
		}
	}
	if got := strings.Count(progress.String(), "\n"); got != len(wantNames)*cfg.Runs {
		t.Errorf("%d progress lines, want one per run (%d):\n%s", got, len(wantNames)*cfg.Runs, progress.String())
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("files left in the bench directory: %v", left)
	}
	if res.Machine.Cores < 1 || res.Machine.GoVersion == "" || res.Machine.Disk.Dir == "" {
		t.Errorf("machine description incomplete: %+v", res.Machine)
	}

	var table bytes.Buffer
	res.WriteTable(&table)
	for _, m := range res.Measurements {
		if !strings.Contains(table.String(), m.Description) {
			t.Errorf("table lacks %q:\n%s", m.Description, table.String())
		}
	}
}

func TestRunRefusals(t *testing.T) {
	cfg := tinyConfig(diskDir(t))
	cfg.Runs = 0
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("runs 0: err = %v, want ErrInvalidConfig", err)
	}
	cfg = tinyConfig(diskDir(t))
	cfg.WriteBytes = 1 << 60 // more than any disk holds
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrNoSpace) {
		t.Errorf("1 EiB file: err = %v, want ErrNoSpace", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	want := &Result{
		Start:   time.Date(2026, 11, 30, 18, 17, 0, 123, time.UTC),
		Machine: Machine{Cores: 2, CPUModel: "x", MemoryBytes: 24 << 30, Kernel: "linux 6.18", Arch: "amd64", GoVersion: "go1.26", Disk: Disk{Dir: "/d", MountPoint: "/", Device: "/dev/vda", FSType: "ext4"}},
		Config:  tinyConfig("/d"),
		Measurements: []Measurement{{
			Name: NameLoopbackTCP, Description: "loopback", MedianMBps: 1800.5,
			Runs: []Sample{newSample(2<<30, 1200*time.Millisecond), {Bytes: 5, Duration: 7, MBps: 1, Records: 3}},
		}},
	}
	path := filepath.Join(t.TempDir(), "results", "limits.json")
	if err := want.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"median_mb_per_s": 1800.5`, `"duration_ns": 1200000000`, `"fs_type": "ext4"`, `"memory_bytes": 25769803776`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("JSON lacks %s:\n%s", field, b)
		}
	}
	if _, err := ReadJSON(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("reading a missing file: want an error")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1200, 440, 2302}, 1200},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.in) && tc.in != nil {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"1":        1,
		"1048576":  1 << 20,
		"1GiB":     1 << 30,
		"512 MiB":  512 << 20,
		"64kib":    64 << 10,
		"1.5GiB":   3 << 29,
		"2GB":      2e9,
		"10 MB":    10e6,
		" 1KB ":    1000,
		"7b":       7,
		"1TiB":     1 << 40,
		"0.5 KiB":  512,
		"1.000MiB": 1 << 20,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "-1GiB", "1.5", "GiB", "1 GiBs", "1e9", "abc", "0.1", "99999999TiB", "1 2MiB"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	if _, err := ParseSize("-5"); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("ParseSize(-5): %v, want a message saying sizes are positive", err)
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{
		1 << 30: "1 GiB", 2 << 30: "2 GiB", 1 << 20: "1 MiB", 3 << 19: "1.5 MiB",
		1024: "1 KiB", 1000: "1000 B", 0: "0 B",
	} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestMountOf(t *testing.T) {
	const mountinfo = `22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /proc rw,nosuid shared:2 - proc proc rw
24 22 0:22 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw
25 22 8:16 / /data rw,noatime shared:4 master:1 - xfs /dev/sdb rw
26 25 8:32 / /data/with\040space rw shared:5 - ext4 /dev/sdc rw
27 22 0:23 / /data2 rw - tmpfs tmpfs rw
garbage line
`
	for _, tc := range []struct{ dir, mount, device, fs string }{
		{"/work/main/bench-data", "/", "/dev/vda", "ext4"},
		{"/dev/shm/x", "/dev/shm", "tmpfs", "tmpfs"},
		{"/data", "/data", "/dev/sdb", "xfs"},
		{"/data/x/y", "/data", "/dev/sdb", "xfs"},
		{"/data/with space/z", "/data/with space", "/dev/sdc", "ext4"},
		{"/data2", "/data2", "tmpfs", "tmpfs"},
		{"/data22", "/", "/dev/vda", "ext4"}, // not under /data2
	} {
		mp, dev, fs := mountOf([]byte(mountinfo), tc.dir)
		if mp != tc.mount || dev != tc.device || fs != tc.fs {
			t.Errorf("mountOf(%q) = %q %q %q, want %q %q %q", tc.dir, mp, dev, fs, tc.mount, tc.device, tc.fs)
		}
	}
}
