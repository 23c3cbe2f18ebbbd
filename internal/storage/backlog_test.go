package storage

import (
	"errors"
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// Backlogs (backlog.go): the bytes and the first timestamp between a
// consumer's offset and a bound, across segments, past transaction
// markers and below the log start.

func TestBacklogsAcrossSegments(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l, sizes := twelveBatchLog(t, fsys, dir)
		defer logClose(t, l)
		bytesFrom := func(batch, boundBatch int) int64 {
			var n int64
			for _, s := range sizes[batch:boundBatch] {
				n += s
			}
			return n
		}
		hw := int64(40) // batches 0..9
		l.SetHighWatermark(hw)
		got, err := l.Backlogs([]int64{0, 5, 17, 39, 40, 48, -3}, hw)
		if err != nil {
			t.Fatal(err)
		}
		want := []Backlog{
			{bytesFrom(0, 10), 1000, -1},
			{bytesFrom(1, 10), 1010, -1}, // mid-batch: that batch's first timestamp
			{bytesFrom(4, 10), 1040, -1},
			{bytesFrom(9, 10), 1090, -1},
			{0, -1, -1}, // at the bound: caught up
			{0, -1, -1}, // past it
			{bytesFrom(0, 10), 1000, -1},
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("offset #%d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		// A bound past the log end is the log end.
		got, err = l.Backlogs([]int64{44}, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Backlog{bytesFrom(11, 12), 1110, -1}); got[0] != want {
			t.Errorf("bound past the end: got %+v, want %+v", got[0], want)
		}
		// Below the log start, the answer starts at the log start.
		if _, err := l.DeleteRecordsBefore(12); err != nil {
			t.Fatal(err)
		}
		got, err = l.Backlogs([]int64{2}, hw)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Backlog{bytesFrom(3, 10), 1030, -1}); got[0] != want {
			t.Errorf("below the log start: got %+v, want %+v", got[0], want)
		}
	})
}

func TestBacklogsSkipMarkers(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/log", logTestConfig(), OpenOptions{})
	defer logClose(t, l)
	x := newTxnLog(t, l)
	first := x.send(7, 2)    // 0-1, timestamp 1
	marker := x.end(7, true) // 2
	plain := x.plain(3)      // 3-5, timestamp 1
	marker2 := x.send(8, 1)  // 6
	last := x.end(8, false)  // 7
	l.SetHighWatermark(last + 1)
	if first != 0 || marker != 2 || plain != 3 || marker2 != 6 {
		t.Fatalf("layout: %d %d %d %d", first, marker, plain, marker2)
	}
	got, err := l.Backlogs([]int64{marker, last}, last+1)
	if err != nil {
		t.Fatal(err)
	}
	// At the first marker, the next data batch's timestamp; at the last
	// marker, nothing is left to consume, though its bytes are.
	if got[0].Timestamp != 1 || got[0].Bytes <= 0 {
		t.Errorf("at a marker before data: %+v", got[0])
	}
	if got[1].Timestamp != -1 || got[1].Bytes <= 0 {
		t.Errorf("at the last marker: %+v, want timestamp -1 and its bytes", got[1])
	}
}

func TestBacklogsLogAppendTime(t *testing.T) {
	clock := &fakeClock{ms: 1_700_000_000_000}
	cfg := logTestConfig()
	cfg.LogAppendTime = true
	l := openTestLog(t, vfs.NewMem(), "/log", cfg, OpenOptions{Now: clock.now})
	defer logClose(t, l)
	if _, err := l.Append(testBatch(t, 3, 10, 5, nil), 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(3)
	got, err := l.Backlogs([]int64{1}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Timestamp != clock.ms {
		t.Errorf("LogAppendTime: timestamp %d, want the append time %d", got[0].Timestamp, clock.ms)
	}
}

func TestBacklogsClosedLog(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/log", logTestConfig(), OpenOptions{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Backlogs([]int64{0}, 0); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("closed log: %v, want ErrLogClosed", err)
	}
}

// DeleteAt: when time retention may delete the segment holding an
// offset. Segments go oldest first, so a segment with older timestamps
// than one before it waits for that one; retention.ms -1 and compacted
// topics have no such time.
func TestBacklogsDeleteAt(t *testing.T) {
	cfg := logTestConfig()
	cfg.RetentionMs = 100
	l := openTestLog(t, vfs.NewMem(), "/log", cfg, OpenOptions{})
	defer logClose(t, l)
	// One batch per segment (each larger than half a segment).
	first := testBatch(t, 2, 200, 5000, nil)
	cfg.SegmentBytes = int64(len(first)) + 10
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{5000, 3000, 7000} {
		if _, err := l.Append(testBatch(t, 2, 200, ts, nil), 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() != 3 {
		t.Fatalf("%d segments, want one per batch", l.NumSegments())
	}
	l.SetHighWatermark(6)
	got, err := l.Backlogs([]int64{1, 2, 5, 6}, 6)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{5100, 5100, 7100, -1} {
		if got[i].DeleteAt != want {
			t.Errorf("offset #%d: DeleteAt %d, want %d", i, got[i].DeleteAt, want)
		}
	}
	for name, change := range map[string]func(*Config){
		"retention.ms -1": func(c *Config) { c.RetentionMs = -1 },
		"compact":         func(c *Config) { c.CleanupPolicy = CleanupCompact },
	} {
		c := cfg
		change(&c)
		if err := l.SetConfig(c); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Backlogs([]int64{1}, 6); err != nil || got[0].DeleteAt != -1 {
			t.Errorf("%s: DeleteAt %+v (%v), want -1", name, got, err)
		}
	}
}

// RetentionDeadline: the oldest segment's largest timestamp plus
// retention.ms; none without time retention or records.
func TestRetentionDeadline(t *testing.T) {
	cfg := logTestConfig()
	cfg.RetentionMs = 100
	l := openTestLog(t, vfs.NewMem(), "/log", cfg, OpenOptions{})
	defer logClose(t, l)
	if _, ok, err := l.RetentionDeadline(); ok || err != nil {
		t.Fatalf("an empty log has a deadline (%v)", err)
	}
	for _, ts := range []int64{5000, 6000} {
		if _, err := l.Append(testBatch(t, 2, 10, ts, nil), 0); err != nil {
			t.Fatal(err)
		}
	}
	if d, ok, err := l.RetentionDeadline(); !ok || err != nil || d != 6100 {
		t.Fatalf("deadline %d %v %v, want 6100", d, ok, err)
	}
	cfg.RetentionMs = -1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.RetentionDeadline(); ok {
		t.Fatal("retention.ms -1 has a deadline")
	}
}
