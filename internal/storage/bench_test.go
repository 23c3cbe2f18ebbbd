//go:build linux

package storage

// Benchmarks of the partition log on the real file system, the figures
// BENCHMARKS.md compares with the disk's own bandwidth (scripts/storage-bench.sh
// runs them next to dd, in the same sitting).
//
// Where the data goes: under $FJORD_BENCH_DIR when it is set, otherwise in a
// hidden directory beside this file (.benchdata-*, which the go tool ignores),
// removed when the benchmark ends. Not b.TempDir(): /tmp is a tmpfs on many
// machines, and a log on tmpfs measures memory, not the disk. A tmpfs or ramfs
// target is refused for the same reason.
//
// Records are 1 KiB of random bytes (incompressible, so nothing downstream
// gets an easy ride) with no key; a batch holds as many as fit in its target
// size, the way a producer fills batch.size. Batches are built before the timer
// starts and reused: Append rewrites base offset and leader epoch in place,
// which is what a broker does to a produced batch anyway.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

const (
	benchRecordBytes = 1024
	benchReadChunk   = 1 << 20
	// benchReadLogBytes is the size of the log the read benchmark scans: a
	// few hundred MiB, which a 2-core VM's page cache holds comfortably.
	benchReadLogBytes = 256 << 20
)

var benchBatchSizes = []struct {
	name  string
	bytes int
}{
	{"16KiB", 16 << 10}, // the Java producer's default batch.size
	{"1MiB", 1 << 20},   // its max.request.size, and just under max.message.bytes
}

// benchDataDir returns a fresh directory on a real disk for one benchmark.
func benchDataDir(b *testing.B) string {
	b.Helper()
	root := os.Getenv("FJORD_BENCH_DIR")
	if root == "" {
		root = "."
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		b.Fatalf("statfs %s: %v", root, err)
	}
	const tmpfsMagic, ramfsMagic = 0x01021994, 0x858458f6
	if st.Type == tmpfsMagic || st.Type == ramfsMagic {
		b.Fatalf("%s is on a memory file system; set FJORD_BENCH_DIR to a directory on a disk", root)
	}
	dir, err := os.MkdirTemp(root, ".benchdata-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// benchBatch builds one batch of 1 KiB random records, as many as keep it
// within target bytes.
func benchBatch(b *testing.B, rng *rand.ChaCha8, target int) []byte {
	b.Helper()
	value := make([]byte, benchRecordBytes)
	bld := record.NewBuilder(record.DefaultBatchOptions())
	ts := time.Now().UnixMilli()
	for n := target / benchRecordBytes; n > 0; n-- {
		bld.Reset(record.DefaultBatchOptions())
		for range n {
			rng.Read(value)
			bld.Add(nil, value, nil, ts)
		}
		out, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		if len(out) <= target {
			return out
		}
	}
	b.Fatalf("no batch of 1 KiB records fits in %d bytes", target)
	return nil
}

func benchRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

// benchCountingFS counts the fsyncs the log issues, so the ack benchmarks
// report how many appends each one carried (group commit) from the system
// calls themselves rather than from the log's own bookkeeping.
type benchCountingFS struct {
	vfs.FS
	logSyncs  atomic.Int64 // Sync of segment (.log) files: the data fsyncs
	logSyncNs atomic.Int64 // time spent in them
}

type benchCountingFile struct {
	vfs.File
	fs *benchCountingFS
}

func (f benchCountingFile) Sync() error {
	if !strings.HasSuffix(f.Name(), ".log") {
		return f.File.Sync() // indexes, checkpoints: not the data path
	}
	start := time.Now()
	err := f.File.Sync()
	f.fs.logSyncNs.Add(int64(time.Since(start)))
	f.fs.logSyncs.Add(1)
	return err
}

func (c *benchCountingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return benchCountingFile{File: f, fs: c}, nil
}

func (c *benchCountingFS) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *benchCountingFS) Open(name string) (vfs.File, error)   { return c.wrap(c.FS.Open(name)) }
func (c *benchCountingFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

// benchOpenLog opens an empty log with Kafka's defaults (1 GiB segments,
// 4 KiB index interval) and the given flush policy. It is closed before its
// directory is removed (cleanups run last-registered first).
func benchOpenLog(b *testing.B, fsys vfs.FS, policy FlushPolicy) *Log {
	b.Helper()
	dir := benchDataDir(b)
	cfg := DefaultConfig()
	cfg.FlushPolicy = policy
	// Clean, as the manager opens a log it creates: nothing to recover.
	l := openTestLog(b, fsys, dir, cfg, OpenOptions{Clean: true})
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppend measures Log.Append of 1 KiB records in 16 KiB and 1 MiB
// batches; MB/s is batch bytes appended per second.
//
// flush=interval: Append alone, no fsync on the path (the manager would
// fsync every flush.ms in the background) except at a roll, which syncs the
// segment it seals (every 1 GiB; "rolls" says how many the run made). Between
// rolls it measures the log's own cost plus the kernel's page-cache write.
// synced-MB/s adds the one Flush that makes the run's data durable, which is
// the rate the disk must sustain if appends kept coming.
//
// flush=ack: each of N appenders loops Append then Flush(lastOffset+1), the
// produce path under flush.policy=ack; concurrent Flush callers share
// fsyncs (group commit). fsyncs/s, appends/fsync and ms/fsync count and
// time the Sync calls on segment files.
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchBatchSizes {
		b.Run(fmt.Sprintf("flush=interval/batch=%s", size.name), func(b *testing.B) {
			benchAppendInterval(b, size.bytes)
		})
	}
	for _, appenders := range []int{1, 8} {
		for _, size := range benchBatchSizes {
			b.Run(fmt.Sprintf("flush=ack/appenders=%d/batch=%s", appenders, size.name), func(b *testing.B) {
				benchAppendAck(b, appenders, size.bytes)
			})
		}
	}
}

func benchAppendInterval(b *testing.B, batchBytes int) {
	fsys := &benchCountingFS{FS: vfs.OS()}
	l := benchOpenLog(b, fsys, FlushInterval)
	batch := benchBatch(b, benchRand(1), batchBytes)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	syncsBefore := fsys.logSyncs.Load()
	n := 0
	for b.Loop() {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	appendTime := b.Elapsed()
	// The one fsync allowed on the path: a roll syncs the segment it
	// seals, so that no later segment's name outlives its unsynced tail.
	rolls := int64(l.NumSegments() - 1)
	if syncs := fsys.logSyncs.Load() - syncsBefore; syncs > rolls {
		b.Fatalf("flush=interval appends fsynced segment files %d times in %d rolls", syncs, rolls)
	}
	b.ReportMetric(float64(rolls), "rolls")
	start := time.Now()
	if err := l.Flush(l.LogEndOffset()); err != nil {
		b.Fatal(err)
	}
	flushTime := time.Since(start)
	b.ReportMetric(float64(n*len(batch))/(appendTime+flushTime).Seconds()/1e6, "synced-MB/s")
}

// BenchmarkRawWrite is the ceiling for BenchmarkAppend/flush=interval,
// measured in the same run: the same batch bytes written with pwrite straight
// into 1 GiB files, each fsynced when the next is started as a roll does,
// and none of the log's work (validation, offsets, index, locks). On a VM
// whose disk and page cache swing by several times from one minute to the
// next, the log's figure is best read against this one.
func BenchmarkRawWrite(b *testing.B) {
	for _, size := range benchBatchSizes {
		b.Run("batch="+size.name, func(b *testing.B) {
			dir := benchDataDir(b)
			batch := benchBatch(b, benchRand(1), size.bytes)
			segmentBytes := DefaultConfig().SegmentBytes
			rolls := 0
			create := func() *os.File {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%020d.log", rolls)))
				if err != nil {
					b.Fatal(err)
				}
				return f
			}
			f := create()
			b.Cleanup(func() { f.Close() })
			var pos int64
			b.SetBytes(int64(len(batch)))
			n := 0
			for b.Loop() {
				if pos+int64(len(batch)) > segmentBytes {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					f.Close()
					rolls++
					f, pos = create(), 0
				}
				if _, err := f.WriteAt(batch, pos); err != nil {
					b.Fatal(err)
				}
				pos += int64(len(batch))
				n++
			}
			writeTime := b.Elapsed()
			start := time.Now()
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			flushTime := time.Since(start)
			b.ReportMetric(float64(rolls), "rolls")
			b.ReportMetric(float64(n*len(batch))/(writeTime+flushTime).Seconds()/1e6, "synced-MB/s")
		})
	}
}

func benchAppendAck(b *testing.B, appenders, batchBytes int) {
	fsys := &benchCountingFS{FS: vfs.OS()}
	l := benchOpenLog(b, fsys, FlushAck)
	batches := make([][]byte, appenders)
	for i := range batches {
		batches[i] = benchBatch(b, benchRand(uint64(i+1)), batchBytes)
	}
	b.SetBytes(int64(len(batches[0])))
	b.ReportAllocs()
	// Appenders take iterations from a shared budget of b.N, so the total
	// work is b.N appends however they interleave.
	var budget atomic.Int64
	budget.Store(int64(b.N))
	errs := make(chan error, appenders)
	var wg sync.WaitGroup
	syncsBefore, syncNsBefore := fsys.logSyncs.Load(), fsys.logSyncNs.Load()
	b.ResetTimer()
	for i := range appenders {
		wg.Go(func() {
			for budget.Add(-1) >= 0 {
				info, err := l.Append(batches[i], 0)
				if err == nil {
					err = l.Flush(info.LastOffset + 1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		b.Fatalf("recovery point %d after every append was flushed, log end offset %d", rp, leo)
	}
	syncs := fsys.logSyncs.Load() - syncsBefore
	b.ReportMetric(float64(syncs)/b.Elapsed().Seconds(), "fsyncs/s")
	if syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "appends/fsync")
		// How long one fsync takes, against how often they happen, says
		// whether the disk or the appenders' hand-off sets the pace.
		b.ReportMetric(float64(fsys.logSyncNs.Load()-syncNsBefore)/float64(syncs)/1e6, "ms/fsync")
	}
}

// BenchmarkRead measures a consumer's sequential scan: reads of 1 MiB
// from offset 0 to the log end over a 256 MiB log of 16 KiB batches, warm
// in the page cache. One op is one whole pass; MB/s counts log bytes.
//
// api=Read allocates a fresh buffer per read, as Log.Read does; api=ReadInto
// reuses one buffer, as a fetch path with pooled buffers would.
func BenchmarkRead(b *testing.B) {
	l := benchOpenLog(b, vfs.OS(), FlushInterval)
	batch := benchBatch(b, benchRand(1), 16<<10)
	for l.Size() < benchReadLogBytes {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	// Written back first, so the kernel's writeback does not compete with
	// the reads being measured.
	if err := l.Flush(l.LogEndOffset()); err != nil {
		b.Fatal(err)
	}
	size := l.Size()
	for _, reuse := range []bool{false, true} {
		name := "api=Read"
		if reuse {
			name = "api=ReadInto"
		}
		b.Run(name, func(b *testing.B) {
			var buf []byte
			if reuse {
				buf = make([]byte, benchReadChunk)
			}
			if got := benchReadPass(b, l, buf); got != size { // and warm the page cache
				b.Fatalf("a pass read %d bytes of a %d-byte log", got, size)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				benchReadPass(b, l, buf)
			}
		})
	}
}

// benchReadPass reads the whole log as a consumer does, each fetch starting
// after the last batch of the previous one, and returns the bytes read. A
// nil buf reads with Read, otherwise with ReadInto(buf).
func benchReadPass(b *testing.B, l *Log, buf []byte) int64 {
	leo := l.LogEndOffset()
	var total int64
	for offset := int64(0); offset < leo; {
		var res ReadResult
		var err error
		if buf == nil {
			res, err = l.Read(offset, benchReadChunk, leo)
		} else {
			res, err = l.ReadInto(buf, offset, benchReadChunk, leo)
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Records) == 0 {
			b.Fatalf("read at %d below log end offset %d returned nothing", offset, leo)
		}
		for rest := res.Records; len(rest) > 0; {
			h, err := record.ParseHeader(rest)
			if err != nil {
				b.Fatal(err)
			}
			offset = h.LastOffset() + 1
			rest = rest[h.Size():]
		}
		total += int64(len(res.Records))
	}
	return total
}

// TestReadIntoMatchesRead pins ReadInto, which the read benchmark uses: the
// same batches as Read for every offset and limit, read into the caller's
// buffer when it is large enough and into a new one when it is not.
func TestReadIntoMatchesRead(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/log", DefaultConfig(), OpenOptions{Clean: true})
	defer l.Close()
	for i := range 20 {
		if _, err := l.Append(testBatch(t, 1+i%4, 100*(i%3), 1000, nil), 0); err != nil {
			t.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	big := make([]byte, 64<<10)
	for offset := int64(0); offset <= leo; offset++ {
		for _, maxBytes := range []int{1, 300, 2000, 1 << 20} {
			want, err := l.Read(offset, maxBytes, leo)
			if err != nil {
				t.Fatal(err)
			}
			for _, buf := range [][]byte{big, make([]byte, 0, 8), nil} {
				got, err := l.ReadInto(buf, offset, maxBytes, leo)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Records, want.Records) {
					t.Fatalf("ReadInto(cap %d, %d, %d) = %d bytes, Read = %d bytes",
						cap(buf), offset, maxBytes, len(got.Records), len(want.Records))
				}
				if len(got.Records) == 0 || cap(buf) == 0 {
					continue
				}
				aliases := &got.Records[0] == &buf[:1][0]
				if fits := cap(buf) >= len(got.Records); fits != aliases {
					t.Fatalf("ReadInto(cap %d, %d, %d) of %d bytes: aliases buf %v, want %v",
						cap(buf), offset, maxBytes, len(got.Records), aliases, fits)
				}
			}
		}
	}
}

// TestScannerBufferFitsData pins the scanner's read-ahead sizing: never
// larger than the bytes left to scan. Recovery scans with 1 MiB chunks and a
// clean open with 64 KiB ones; at 10k small logs full-size chunks cost
// storagebench's start several MiB of peak memory and the GC work to clear
// them, for nothing.
func TestScannerBufferFitsData(t *testing.T) {
	fsys := vfs.NewMem()
	f, err := fsys.Create("/seg.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var data []byte
	for i := range 3 {
		b := testBatch(t, 2, 50, 1000, nil)
		record.SetBaseOffset(b, int64(2*i))
		data = append(data, b...)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	end := int64(len(data))
	for _, pos := range []int64{0, end / 3, end} {
		sc := newScanner(f, pos, end, 1<<20)
		if cap(sc.buf) > int(end-pos) {
			t.Fatalf("scanner from %d to %d holds a %d-byte buffer", pos, end, cap(sc.buf))
		}
	}
	// And it still walks every batch.
	sc := newScanner(f, 0, end, 1<<20)
	var next int64
	for {
		h, err := sc.header()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sc.batch(h); err != nil {
			t.Fatal(err)
		}
		next = h.LastOffset() + 1
		sc.advance(h)
	}
	if next != 6 {
		t.Fatalf("scanned up to offset %d, want 6", next)
	}
}

// BenchmarkReadTail is a caught-up consumer's read: one 16 KiB batch at a
// time from near the log end into a reused buffer, the fetch path's shape
// at low rates (latency-16p-1kb-5k). One op is one ReadInto; the figure to
// watch is allocs/op and B/op (each lookup used to allocate its 8 KiB
// read-ahead).
func BenchmarkReadTail(b *testing.B) {
	l := benchOpenLog(b, vfs.OS(), FlushInterval)
	batch := benchBatch(b, benchRand(1), 16<<10)
	for range 256 {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	perBatch := leo / 256
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		offset := leo - perBatch*(1+i%64)
		i++
		rr, err := l.ReadInto(buf, offset, len(batch), leo)
		if err != nil || len(rr.Records) != len(batch) {
			b.Fatalf("read at %d: %d bytes, %v", offset, len(rr.Records), err)
		}
	}
}
