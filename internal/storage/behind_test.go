package storage

import (
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// BytesBehind is the log's bytes from the batch holding an offset to the
// log end, across segments; offsets outside the log answer 0.
func TestBytesBehind(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l, sizes := twelveBatchLog(t, fsys, dir)
		defer logClose(t, l)
		from := func(batch int) int64 {
			var n int64
			for _, s := range sizes[batch:] {
				n += s
			}
			return n
		}
		for _, c := range []struct {
			offset int64
			want   int64
		}{
			{0, from(0)}, {1, from(0)}, {3, from(0)}, {4, from(1)}, {17, from(4)}, {44, from(11)}, {47, from(11)},
			{48, 0}, {-1, 0}, {1000, 0},
		} {
			got, err := l.BytesBehind(c.offset)
			if err != nil || got != c.want {
				t.Errorf("BytesBehind(%d) = %d, %v; want %d", c.offset, got, err, c.want)
			}
		}
		if got := l.Size(); got != from(0) {
			t.Fatalf("log size %d, batches %d", got, from(0))
		}
	})
}

// twelveBatchLog is a log of 12 batches over several segments: batch i
// holds records 4i..4i+3 with timestamp 1000+10i; sizes are the batches'
// sizes, to work out expected byte counts.
func twelveBatchLog(t *testing.T, fsys vfs.FS, dir string) (*Log, []int64) {
	t.Helper()
	cfg := logTestConfig()
	cfg.SegmentBytes = 700 // a few batches a segment
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	var sizes []int64
	for i := range 12 {
		b := testBatch(t, 4, 30, int64(1000+10*i), nil)
		sizes = append(sizes, int64(len(b)))
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() < 3 {
		t.Fatalf("the test needs several segments, got %d", l.NumSegments())
	}
	return l, sizes
}
