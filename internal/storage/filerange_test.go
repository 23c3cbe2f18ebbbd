package storage

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// ReadRange is ReadInto without the copy: over real files, the range it
// names holds exactly the bytes ReadInto returns, for every kind of
// bound (byte limits inside and across batches, the high watermark, the
// log end, offsets inside batches, the first batch larger than the
// limit), with index entries dense enough that its walk starts from one.
func TestReadRangeMatchesReadInto(t *testing.T) {
	dir := t.TempDir()
	cfg := logTestConfig()
	cfg.SegmentBytes = 256 << 10
	cfg.IndexIntervalBytes = 512
	l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
	defer logClose(t, l)
	rng := rand.New(rand.NewPCG(7, 11))
	for range 600 {
		n := 1 + rng.IntN(12)
		if _, err := l.Append(testBatch(t, n, 1+rng.IntN(3000), 1000, nil), 0); err != nil {
			t.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	hw := leo - leo/5
	l.SetHighWatermark(hw)
	if l.NumSegments() < 4 {
		t.Fatalf("%d segments; the test wants reads in several", l.NumSegments())
	}
	ranges := 0
	for i := range 3000 {
		offset := rng.Int64N(leo + 1)
		maxBytes := 1 + rng.IntN(512<<10)
		maxOffset := []int64{hw, leo, offset + 1 + rng.Int64N(200)}[i%3]
		want, err := l.ReadInto(nil, offset, maxBytes, maxOffset)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.ReadRange(nil, offset, maxBytes, maxOffset, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.LogEndOffset != want.LogEndOffset || got.HighWatermark != want.HighWatermark || got.LogStartOffset != want.LogStartOffset {
			t.Fatalf("read(%d, %d, %d): offsets %+v, want %+v", offset, maxBytes, maxOffset, got, want)
		}
		var data []byte
		if r := got.Range; r.File != nil {
			ranges++
			if got.Records != nil {
				t.Fatalf("read(%d, %d, %d): both a range and %d bytes of records", offset, maxBytes, maxOffset, len(got.Records))
			}
			data = make([]byte, r.Size)
			if _, err := r.File.ReadAt(data, r.Pos); err != nil {
				t.Fatal(err)
			}
			r.File.Close()
		} else {
			data = got.Records
		}
		if !bytes.Equal(data, want.Records) {
			t.Fatalf("read(%d, %d, %d): range of %d bytes, ReadInto %d bytes; contents differ: %v",
				offset, maxBytes, maxOffset, len(data), len(want.Records), !bytes.Equal(data[:min(len(data), len(want.Records))], want.Records[:min(len(data), len(want.Records))]))
		}
		// No compaction here, so both reads know the last offset exactly:
		// the last batch's, from its header.
		last := int64(-1)
		for b := data; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			last, b = h.LastOffset(), b[h.Size():]
		}
		if got.LastOffset != last || want.LastOffset != last {
			t.Fatalf("read(%d, %d, %d): LastOffset %d (range) and %d (ReadInto), batches end at %d",
				offset, maxBytes, maxOffset, got.LastOffset, want.LastOffset, last)
		}
	}
	if ranges < 1000 {
		t.Errorf("only %d of 3000 reads came back as ranges", ranges)
	}
}

// Below minRangeBytes the batches are read, as ReadInto reads them.
func TestReadRangeReadsSmallResults(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), logTestConfig(), OpenOptions{})
	defer logClose(t, l)
	b := testBatch(t, 3, 100, 1000, nil)
	if _, err := l.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	res, err := l.ReadRange(nil, 0, 1<<20, l.LogEndOffset(), len(b)+1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Range.File != nil || len(res.Records) != len(b) {
		t.Fatalf("range %+v and %d bytes of records; want the %d-byte batch read", res.Range, len(res.Records), len(b))
	}
	res, err = l.ReadRange(nil, 0, 1<<20, l.LogEndOffset(), len(b))
	if err != nil {
		t.Fatal(err)
	}
	if res.Range.File == nil || res.Range.Size != len(b) || res.Records != nil {
		t.Fatalf("range %+v and %d bytes of records; want a range of the %d-byte batch", res.Range, len(res.Records), len(b))
	}
	res.Range.File.Close()
}

// MemFS files have no descriptor to send from: ReadRange reads.
func TestReadRangeOnMemFSReads(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "log", logTestConfig(), OpenOptions{})
	defer logClose(t, l)
	if _, err := l.Append(testBatch(t, 3, 100, 1000, nil), 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	res, err := l.ReadRange(nil, 0, 1<<20, l.LogEndOffset(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Range.File != nil || len(res.Records) == 0 {
		t.Fatalf("range %+v, %d bytes of records; want the records read", res.Range, len(res.Records))
	}
}

// A range keeps its bytes after retention deletes its segment: the
// fetch that holds it is still sending.
func TestReadRangeOutlivesItsSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := logTestConfig()
	b := testBatch(t, 4, 500, 1000, nil)
	cfg.SegmentBytes = int64(2 * len(b))
	l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
	defer logClose(t, l)
	for range 6 {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	want, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.ReadRange(nil, 0, 1<<20, l.LogEndOffset(), 1)
	if err != nil || res.Range.File == nil {
		t.Fatalf("range %+v, err %v", res.Range, err)
	}
	defer res.Range.File.Close()
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); !os.IsNotExist(err) {
		t.Fatalf("the first segment is still there (stat: %v); the test wants it deleted", err)
	}
	got := make([]byte, res.Range.Size)
	if _, err := res.Range.File.ReadAt(got, res.Range.Pos); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Records) {
		t.Fatalf("the range's %d bytes differ from the %d read before the deletion", len(got), len(want.Records))
	}
}
