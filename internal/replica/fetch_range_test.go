package replica

import (
	"bytes"
	"context"
	"testing"
)

// With MinRangeBytes, partitions with at least that much to answer come
// back as file ranges and the rest as records, under the same byte
// limits a copying fetch applies: the bytes are the same either way.
func TestFetchRangesAnswerWhatReadsAnswer(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 3, nil))
	big := int32(len(bigBatch(t, 10, 10<<10, 0))) // about 100 KiB
	for range 4 {
		e.append("t", 0, bigBatch(t, 10, 10<<10, 0), AcksLeader)
		e.append("t", 1, bigBatch(t, 10, 10<<10, 0), AcksLeader)
		e.append("t", 2, batch(t, "small", 3, 0), AcksLeader)
	}
	parts := []FetchPartition{part("t", 0, 0), part("t", 1, 0), part("t", 2, 0)}
	for _, tc := range []struct {
		name          string
		maxBytes      int32 // response-wide
		partMaxBytes  int32
		wantRanges    int
		wantEmptyPart int // -1: none
	}{
		{"all partitions", 50 << 20, 1 << 20, 2, -1},
		// The first partition takes four batches of the response, the
		// second the one batch left room for, the third nothing.
		{"response limit", 5*big + 100, 1 << 20, 2, 2},
		// The limit is below one batch: the first partition still gets
		// its first batch, the others nothing.
		{"partition limit below a batch", 50 << 20, 50 << 10, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range parts {
				parts[i].MaxBytes = tc.partMaxBytes
			}
			params := consumerFetch(0, 0)
			params.MaxBytes = tc.maxBytes
			want := e.m.Fetch(context.Background(), params, parts)
			defer want.Release()
			params.MinRangeBytes = 64 << 10
			got := e.m.Fetch(context.Background(), params, parts)
			ranges := 0
			for i := range parts {
				w, g := want.Partitions[i], got.Partitions[i]
				if w.Range.File != nil {
					t.Fatalf("partition %d: a range from a fetch without MinRangeBytes", i)
				}
				data := g.Records
				if r := g.Range; r.File != nil {
					ranges++
					if g.Records != nil || r.Size < params.MinRangeBytes {
						t.Fatalf("partition %d: range of %d bytes with %d bytes of records; min %d", i, r.Size, len(g.Records), params.MinRangeBytes)
					}
					data = make([]byte, r.Size)
					if _, err := r.File.ReadAt(data, r.Pos); err != nil {
						t.Fatal(err)
					}
				}
				if g.Size() != len(data) || !bytes.Equal(data, w.Records) {
					t.Errorf("partition %d: %d bytes (Size %d), want the %d a copying fetch answers", i, len(data), g.Size(), len(w.Records))
				}
				if tc.wantEmptyPart == i && len(data) != 0 {
					t.Errorf("partition %d: %d bytes, want none (the limits are used up)", i, len(data))
				}
			}
			if ranges != tc.wantRanges {
				t.Errorf("%d ranges, want %d", ranges, tc.wantRanges)
			}
			// Release closes the descriptors.
			var open []*FetchPartitionResult
			for i := range got.Partitions {
				if got.Partitions[i].Range.File != nil {
					open = append(open, &got.Partitions[i])
				}
			}
			got.Release()
			for _, p := range open {
				if _, err := p.Range.File.Stat(); err == nil {
					t.Errorf("a range's descriptor is still open after Release")
				}
			}
		})
	}
}
