package main

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// writeSegment writes batches at offsets from base, count records each,
// as one segment file of the partition log in dir; it returns the
// batches' bytes.
func writeSegment(t *testing.T, dir string, base int64, batches, count int) [][]byte {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	var file []byte
	off := base
	for i := range batches {
		b := record.NewBuilder(record.DefaultBatchOptions())
		for j := range count {
			b.Add([]byte("k"), fmt.Appendf(nil, "value-%d-%d", i, j), nil, 1)
		}
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		record.SetBaseOffset(batch, off)
		off += int64(count)
		out = append(out, batch)
		file = append(file, batch...)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.log", base)), file, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// A torn write is a proper prefix of the batch another replica has next
// (or of the node's own last batch), appended after the last whole batch,
// with at most its last 8 bytes garbled; it tears every partition log
// that has a batch, and the log's whole batches are left as they were.
func TestTearWrites(t *testing.T) {
	node, other := t.TempDir(), t.TempDir()
	own := writeSegment(t, filepath.Join(node, "t-0"), 0, 3, 2)            // offsets 0-5
	theirs := writeSegment(t, filepath.Join(other, "t-0"), 0, 5, 2)        // offsets 0-9
	ownOnly := writeSegment(t, filepath.Join(node, "t-1"), 0, 2, 3)        // no other replica has more
	writeSegment(t, filepath.Join(other, "t-1"), 0, 2, 3)                  // the same
	if err := os.MkdirAll(filepath.Join(node, "t-2"), 0o755); err != nil { // nothing written yet
		t.Fatal(err)
	}
	for seed := range uint64(50) {
		for _, p := range []string{"t-0", "t-1"} { // start every round from the whole logs
			src := own
			if p == "t-1" {
				src = ownOnly
			}
			if err := os.WriteFile(filepath.Join(node, p, fmt.Sprintf("%020d.log", 0)), bytes.Join(src, nil), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		detail, torn, err := tearWrites(node, []string{other}, []string{"t"}, 3, rand.New(rand.NewPCG(seed, 1)))
		if err != nil || torn != 2 {
			t.Fatalf("seed %d: %q, %d torn, %v; want 2 logs torn", seed, detail, torn, err)
		}
		for _, tc := range []struct {
			p    string
			kept []byte // the whole batches, unchanged
			next []byte // what the torn write is a prefix of
		}{
			{"t-0", bytes.Join(own, nil), theirs[3]},
			{"t-1", bytes.Join(ownOnly, nil), ownOnly[1]},
		} {
			got, err := os.ReadFile(filepath.Join(node, tc.p, fmt.Sprintf("%020d.log", 0)))
			if err != nil {
				t.Fatal(err)
			}
			tail := got[len(tc.kept):]
			if !bytes.Equal(got[:len(tc.kept)], tc.kept) || len(tail) == 0 || len(tail) >= len(tc.next) {
				t.Fatalf("seed %d %s: %d bytes after the whole batches, want 1 to %d, and the batches kept", seed, tc.p, len(tail), len(tc.next)-1)
			}
			same := len(tail) - maxGarbled
			if same < 0 {
				same = 0
			}
			if !bytes.Equal(tail[:same], tc.next[:same]) {
				t.Fatalf("seed %d %s: the torn write differs from the next batch before its last %d bytes", seed, tc.p, maxGarbled)
			}
		}
	}
}

// A flipped bit is one bit, in the records of one batch at or past its
// log's recovery point; with nothing past the recovery points nothing is
// flipped, and that is said.
func TestFlipBit(t *testing.T) {
	node := t.TempDir()
	batches := writeSegment(t, filepath.Join(node, "t-0"), 0, 6, 2) // offsets 0-11
	whole := bytes.Join(batches, nil)
	rp := filepath.Join(node, storage.RecoveryPointCheckpoint)
	if err := checkpoint.WriteOffsets(vfs.OS(), rp, map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 8}); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(node, "t-0", fmt.Sprintf("%020d.log", 0))
	firstScanned := len(bytes.Join(batches[:4], nil)) // the batch at offset 8
	for seed := range uint64(50) {
		if err := os.WriteFile(seg, whole, 0o644); err != nil {
			t.Fatal(err)
		}
		detail, damaged, err := flipBit(node, []string{"t"}, 2, rand.New(rand.NewPCG(seed, 2)))
		if err != nil || damaged != 1 {
			t.Fatalf("seed %d: %q, %d, %v", seed, detail, damaged, err)
		}
		got, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		flipped := 0
		for i := range got {
			if d := bits.OnesCount8(got[i] ^ whole[i]); d > 0 {
				flipped += d
				inBatch := (i - firstScanned) % len(batches[4])
				if i < firstScanned || inBatch < record.HeaderSize {
					t.Fatalf("seed %d: byte %d changed: want one in the records of a batch at or past offset 8 (%s)", seed, i, detail)
				}
			}
		}
		if flipped != 1 {
			t.Fatalf("seed %d: %d bits changed, want 1 (%s)", seed, flipped, detail)
		}
	}
	if err := checkpoint.WriteOffsets(vfs.OS(), rp, map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 12}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	detail, damaged, err := flipBit(node, []string{"t"}, 1, rand.New(rand.NewPCG(1, 2)))
	got, _ := os.ReadFile(seg)
	if err != nil || damaged != 0 || !bytes.Equal(got, whole) {
		t.Fatalf("nothing past the recovery point: %q, %d, %v, changed %v", detail, damaged, err, !bytes.Equal(got, whole))
	}
}
