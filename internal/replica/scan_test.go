package replica

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
)

// ScanLog hands over every batch in order, across reads
// of its buffer's size, and nothing of a partition it does not lead.
func TestScanLog(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	var want []string
	for i := range 40 {
		b := bigBatch(t, 2, 30<<10, int64(i)) // 60 KiB: several reads of 1 MiB
		e.append("t", 0, b, AcksAll)
		want = append(want, values(t, b)...)
	}
	e.append("t", 0, batch(t, "last", 3, 0), AcksAll)
	want = append(want, "last-0", "last-1", "last-2")

	var got []string
	var next int64
	err := e.m.ScanLog(context.Background(), "t", 0, func(b []byte) error {
		h, err := record.ParseHeader(b)
		if err != nil {
			return err
		}
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want %d: batches skipped or repeated", h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		got = append(got, values(t, b)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("scanned %d records, want %d in order", len(got), len(want))
	}

	stop := errors.New("stop")
	if err := e.m.ScanLog(context.Background(), "t", 0, func([]byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn's error: got %v", err)
	}
	if err := e.m.ScanLog(context.Background(), "t", 7, func([]byte) error { return nil }); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
}
