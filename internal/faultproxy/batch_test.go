package faultproxy

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
)

// testBatch is a real batch of n records at base, by an idempotent
// producer, compressed with codec.
func testBatch(t *testing.T, base int64, n int, codec record.Codec) batch {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Codec = codec
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 1, 40
	opts.BaseOffset = base
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(nil, fmt.Appendf(nil, "value-%d-%d", base, i), nil, 1_700_000_000_000+int64(i))
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The rewrites leave a batch a broker and a client accept: CRC, records
// and everything but the rewritten fields as they were.
func TestBatchRewritesKeepTheBatchValid(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			b := testBatch(t, 100, 5, codec)
			if got := b.baseOffset(); got != 100 {
				t.Fatalf("baseOffset %d, want 100", got)
			}
			if got := b.records(); got != 5 {
				t.Fatalf("records %d, want 5", got)
			}

			moved := b.rebased(250)
			h, err := record.Validate(moved, record.ValidateOptions{VerifyCompressedRecords: true})
			if err != nil {
				t.Fatalf("rebased batch: %v", err)
			}
			if h.BaseOffset != 250 || h.ProducerID != 7 || h.BaseSequence != 40 {
				t.Fatalf("rebased header %+v", h)
			}
			if b.baseOffset() != 100 {
				t.Fatal("rebased changed the batch it copied")
			}

			anon := b.withoutProducer()
			h, err = record.Validate(anon, record.ValidateOptions{VerifyCompressedRecords: true})
			if err != nil {
				t.Fatalf("batch without its producer: %v", err)
			}
			if h.HasProducerID() || h.ProducerEpoch != -1 || h.BaseSequence != -1 {
				t.Fatalf("batch without its producer still has one: %+v", h)
			}
			if h.NumRecords != 5 || h.BaseOffset != 100 {
				t.Fatalf("header %+v", h)
			}
			var values []string
			if err := record.ForEachRecord(anon, func(r *record.Record) error {
				values = append(values, string(r.Value))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(values) != 5 || values[4] != "value-100-4" {
				t.Fatalf("records %q", values)
			}
			if _, err := record.Validate(b, record.ValidateOptions{}); err != nil {
				t.Fatalf("withoutProducer changed the batch it copied: %v", err)
			}
		})
	}
}

func TestSplitBatches(t *testing.T) {
	a, b, c := testBatch(t, 0, 3, record.CodecNone), testBatch(t, 3, 2, record.CodecNone), testBatch(t, 5, 4, record.CodecNone)
	whole := joinBatches([]batch{a, b, c}, nil)

	t.Run("whole", func(t *testing.T) {
		got, partial, err := splitBatches(whole)
		if err != nil || len(got) != 3 || len(partial) != 0 {
			t.Fatalf("%d batches, %d partial bytes, %v", len(got), len(partial), err)
		}
		for i, want := range []int64{0, 3, 5} {
			if got[i].baseOffset() != want {
				t.Fatalf("batch %d at %d, want %d", i, got[i].baseOffset(), want)
			}
		}
		if string(joinBatches(got, partial)) != string(whole) {
			t.Fatal("joinBatches(splitBatches(b)) != b")
		}
	})
	// A size-limited fetch ends in a partial batch, its header cut or
	// its records: kept as it is, for the client to drop.
	for _, cut := range []int{1, batchHeaderSize - 1, batchHeaderSize + 3, len(c) - 1} {
		t.Run(fmt.Sprintf("partial %d bytes", cut), func(t *testing.T) {
			in := whole[:len(a)+len(b)+cut]
			got, partial, err := splitBatches(in)
			if err != nil || len(got) != 2 || len(partial) != cut {
				t.Fatalf("%d batches, %d partial bytes, %v; want 2 and %d", len(got), len(partial), err, cut)
			}
			if string(joinBatches(got, partial)) != string(in) {
				t.Fatal("joinBatches(splitBatches(b)) != b")
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		got, partial, err := splitBatches(nil)
		if err != nil || len(got) != 0 || len(partial) != 0 {
			t.Fatalf("%d batches, %d partial bytes, %v", len(got), len(partial), err)
		}
	})
	t.Run("length below a header", func(t *testing.T) {
		bad := append(batch(nil), a...)
		binary.BigEndian.PutUint32(bad[offBatchLength:], 10)
		if _, _, err := splitBatches(bad); err == nil {
			t.Fatal("no error for a batch length of 10")
		}
	})
	t.Run("negative length", func(t *testing.T) {
		bad := append(batch(nil), a...)
		binary.BigEndian.PutUint32(bad[offBatchLength:], 0xFFFFFFF0)
		if _, _, err := splitBatches(bad); err == nil {
			t.Fatal("no error for a negative batch length")
		}
	})
	t.Run("magic 1", func(t *testing.T) {
		bad := append(append(batch(nil), a...), b...)
		bad[len(a)+offMagic] = 1
		if _, _, err := splitBatches(bad); err == nil {
			t.Fatal("no error for a batch of magic 1")
		}
	})
}
