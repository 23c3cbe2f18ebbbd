package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Shared helpers for this package's tests. Keep them small and general;
// a test file's own helpers carry a prefix naming the file.

// quietLogger discards log lines (recovery warnings are expected in tests).
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBatch builds an uncompressed client batch of n records whose values
// are valueSize bytes, keyed by key(i) (nil key when key is nil), all
// with timestamp ts.
func testBatch(t testing.TB, n, valueSize int, ts int64, key func(i int) []byte) []byte {
	t.Helper()
	return testBatchOpts(t, record.DefaultBatchOptions(), n, valueSize, ts, key)
}

func testBatchOpts(t testing.TB, opts record.BatchOptions, n, valueSize int, ts int64, key func(i int) []byte) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for i := range n {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(i + j)
		}
		var k []byte
		if key != nil {
			k = key(i)
		}
		b.Add(k, v, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openTestLog opens a log in dir on fsys with a fixed clock.
func openTestLog(t testing.TB, fsys vfs.FS, dir string, cfg Config, opts OpenOptions) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	l, err := Open(fsys, dir, cfg, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// readAllRecords reads every record in [from, upTo) through Read, the
// way a consumer does: batch by batch, skipping records below its position.
func readAllRecords(t testing.TB, l *Log, from, upTo int64) []record.Record {
	t.Helper()
	var out []record.Record
	pos := from
	for pos < upTo {
		res, err := l.Read(pos, 1<<20, upTo)
		if err != nil {
			t.Fatalf("read at %d: %v", pos, err)
		}
		if len(res.Records) == 0 {
			break
		}
		next := pos
		for b := res.Records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil {
				t.Fatalf("read at %d returned a bad batch: %v", pos, err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				t.Fatalf("read at %d: records: %v", pos, err)
			}
			for _, r := range recs {
				if r.Offset >= pos && r.Offset < upTo {
					out = append(out, r)
				}
			}
			next = max(next, h.LastOffset()+1)
			b = b[h.Size():]
		}
		pos = next
	}
	return out
}

// fakeClock is a settable clock for retention, roll and tombstone tests.
type fakeClock struct{ ms int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms) }
func (c *fakeClock) advance(d time.Duration) { c.ms += d.Milliseconds() }

var errTest = errors.New("injected")

func describe(r record.Record) string { return fmt.Sprintf("%d:%q=%q", r.Offset, r.Key, r.Value) }
