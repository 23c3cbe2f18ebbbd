package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Bad input never reaches the log (DESIGN.md section 1, point 7): a produce
// request holding a damaged or oversized batch is refused with an error
// that says what is wrong (a sentinel the protocol layer maps to a Kafka
// error code), and the log is byte for byte what it was, in memory and on
// disk, before and after a restart.

// badInputSentinels are the errors an append can be refused with. Each
// case must match exactly one of them, so the protocol layer can tell the
// cases apart.
var badInputSentinels = []error{
	record.ErrCorruptLength,
	record.ErrInvalidMagic,
	record.ErrCorruptCRC,
	record.ErrRecordCountMismatch,
	record.ErrCorruptRecord,
	record.ErrUnsupportedCodec,
	ErrBatchTooLarge,
	ErrInvalidBatch,
	ErrNonMonotonicOffset,
}

// badInputBatch is a valid client batch of n records of valueSize bytes.
func badInputBatch(t testing.TB, n, valueSize int) []byte {
	t.Helper()
	return testBatch(t, n, valueSize, 1234, func(i int) []byte { return fmt.Appendf(nil, "key-%d", i) })
}

// badInputFixCRC recomputes the CRC of the batch at the start of b over
// its first size bytes, so that only the damage the case means remains.
func badInputFixCRC(b []byte, size int) []byte {
	recoveryFixCRC(b[:size])
	return b
}

// badInputSnapshot is everything observable about a log.
type badInputSnapshot struct {
	leo, start, hw, size int64
	segments             int
	read                 []byte
	files                map[string][]byte
}

func badInputSnap(t testing.TB, fsys vfs.FS, dir string, l *Log) badInputSnapshot {
	t.Helper()
	s := badInputSnapshot{
		leo: l.LogEndOffset(), start: l.LogStartOffset(), hw: l.HighWatermark(),
		size: l.Size(), segments: l.NumSegments(), files: map[string][]byte{},
	}
	res, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	s.read = res.Records
	for name := range logSegmentFiles(t, fsys, dir) {
		b, err := readWhole(fsys, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s.files[name] = b
	}
	return s
}

func (s badInputSnapshot) diff(o badInputSnapshot) string {
	switch {
	case s.leo != o.leo || s.start != o.start || s.hw != o.hw:
		return fmt.Sprintf("offsets (LEO, start, HW) were (%d, %d, %d), now (%d, %d, %d)", s.leo, s.start, s.hw, o.leo, o.start, o.hw)
	case s.size != o.size || s.segments != o.segments:
		return fmt.Sprintf("size %d in %d segments, now %d in %d", s.size, s.segments, o.size, o.segments)
	case !bytes.Equal(s.read, o.read):
		return "Read returns different bytes"
	case len(s.files) != len(o.files):
		return fmt.Sprintf("%d segment files, now %d", len(s.files), len(o.files))
	}
	for name, b := range s.files {
		if !bytes.Equal(b, o.files[name]) {
			return fmt.Sprintf("segment file %s changed", name)
		}
	}
	return ""
}

type badInputCase struct {
	name string
	// data returns the bytes offered to Append.
	data func(t testing.TB) []byte
	want error
	cfg  func(*Config)
}

func badInputCases() []badInputCase {
	return []badInputCase{
		{name: "empty input", want: ErrInvalidBatch, data: func(testing.TB) []byte { return nil }},
		{name: "empty non-nil input", want: ErrInvalidBatch, data: func(testing.TB) []byte { return []byte{} }},
		{name: "fewer bytes than a header", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			return badInputBatch(t, 1, 10)[:40]
		}},
		{name: "bad CRC", want: record.ErrCorruptCRC, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			b[len(b)-3] ^= 0x01
			return b
		}},
		{name: "bad CRC field", want: record.ErrCorruptCRC, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			b[20] ^= 0x80
			return b
		}},
		{name: "wrong magic", want: record.ErrInvalidMagic, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			b[16] = 1
			return b
		}},
		{name: "length longer than the bytes", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			recoveryAddLength(b, 1)
			return b
		}},
		{name: "length much longer than the bytes", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[8:], 1<<30)
			return b
		}},
		{name: "length below a header's", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[8:], 48)
			return b
		}},
		{name: "negative length", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[8:], 0x80000000)
			return b
		}},
		// A shorter length makes the CRC cover fewer bytes than the
		// producer's did.
		{name: "length shorter than the bytes", want: record.ErrCorruptCRC, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			recoveryAddLength(b, -4)
			return b
		}},
		// And with the CRC made to match, the last record is cut.
		{name: "length shorter than the bytes, CRC matching", want: record.ErrCorruptRecord, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			recoveryAddLength(b, -4)
			return badInputFixCRC(b, len(b)-4)
		}},
		{name: "record count higher", want: record.ErrRecordCountMismatch, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[57:], 4)
			binary.BigEndian.PutUint32(b[23:], 3) // lastOffsetDelta agrees
			return badInputFixCRC(b, len(b))
		}},
		{name: "record count lower", want: record.ErrRecordCountMismatch, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[57:], 2)
			binary.BigEndian.PutUint32(b[23:], 1)
			return badInputFixCRC(b, len(b))
		}},
		{name: "record count negative", want: record.ErrRecordCountMismatch, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[57:], 0xffffffff)
			return badInputFixCRC(b, len(b))
		}},
		{name: "record count disagrees with lastOffsetDelta", want: ErrInvalidBatch, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			binary.BigEndian.PutUint32(b[57:], 5)
			return badInputFixCRC(b, len(b))
		}},
		{name: "record length lies", want: record.ErrCorruptRecord, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 1, 10)
			b[record.HeaderSize] += 2 // the one record's length varint
			return badInputFixCRC(b, len(b))
		}},
		{name: "unsupported codec", want: record.ErrUnsupportedCodec, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 3, 10)
			b[22] |= 0x07
			return badInputFixCRC(b, len(b))
		}},
		{name: "compressed body that does not decompress", want: record.ErrCorruptRecord, data: func(t testing.TB) []byte {
			opts := record.DefaultBatchOptions()
			opts.Codec = record.CodecZstd
			b := testBatchOpts(t, opts, 20, 100, 1, nil)
			for i := record.HeaderSize + 4; i < len(b); i++ {
				b[i] ^= 0x5a
			}
			return badInputFixCRC(b, len(b))
		}},
		{name: "no records", want: ErrInvalidBatch, data: func(t testing.TB) []byte {
			h, err := record.ParseHeader(badInputBatch(t, 1, 10))
			if err != nil {
				t.Fatal(err)
			}
			return record.EmptyBatch(nil, h)
		}},
		{name: "control batch from a client", want: ErrInvalidBatch, data: func(t testing.TB) []byte {
			opts := record.DefaultBatchOptions()
			opts.Control, opts.Transactional = true, true
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 0, 0
			b := record.NewBuilder(opts)
			b.Add(record.ControlRecordKey(record.ControlCommit), record.EndTxnMarkerValue(0), nil, 1)
			out, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
		{name: "transactional without a producer id", want: ErrInvalidBatch, data: func(t testing.TB) []byte {
			opts := record.DefaultBatchOptions()
			opts.Transactional = true
			return testBatchOpts(t, opts, 2, 10, 1, nil)
		}},
		{name: "over max.message.bytes", want: ErrBatchTooLarge, cfg: func(c *Config) { c.MaxMessageBytes = 500 }, data: func(t testing.TB) []byte {
			return badInputBatch(t, 5, 100)
		}},
		{name: "over segment.bytes", want: ErrBatchTooLarge, cfg: func(c *Config) { c.SegmentBytes = 400 }, data: func(t testing.TB) []byte {
			return badInputBatch(t, 5, 100)
		}},
		{name: "keyless record in a compacted log", want: ErrInvalidBatch, cfg: func(c *Config) { c.CleanupPolicy = CleanupCompact }, data: func(t testing.TB) []byte {
			b := record.NewBuilder(record.DefaultBatchOptions())
			b.Add([]byte("k"), []byte("v"), nil, 1)
			b.Add(nil, []byte("v"), nil, 1)
			out, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
		{name: "valid batches then one with a bad CRC", want: record.ErrCorruptCRC, data: func(t testing.TB) []byte {
			bad := badInputBatch(t, 2, 10)
			bad[len(bad)-1] ^= 0xff
			return slices.Concat(badInputBatch(t, 1, 10), badInputBatch(t, 4, 10), bad)
		}},
		{name: "valid batches then a torn one", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			b := badInputBatch(t, 2, 10)
			return slices.Concat(badInputBatch(t, 1, 10), badInputBatch(t, 4, 10), b[:len(b)-1])
		}},
		{name: "valid batches then trailing bytes", want: record.ErrCorruptLength, data: func(t testing.TB) []byte {
			return slices.Concat(badInputBatch(t, 1, 10), badInputBatch(t, 4, 10), []byte{0, 0, 0})
		}},
		{name: "valid batches then one too large", want: ErrBatchTooLarge, cfg: func(c *Config) { c.MaxMessageBytes = 500 }, data: func(t testing.TB) []byte {
			return slices.Concat(badInputBatch(t, 1, 10), badInputBatch(t, 5, 100))
		}},
		{name: "valid batches then a control batch", want: ErrInvalidBatch, data: func(t testing.TB) []byte {
			opts := record.DefaultBatchOptions()
			opts.Control = true
			b := record.NewBuilder(opts)
			b.Add(record.ControlRecordKey(record.ControlAbort), record.EndTxnMarkerValue(0), nil, 1)
			ctl, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return slices.Concat(badInputBatch(t, 1, 10), ctl)
		}},
	}
}

// TestBadInputAppend offers each bad input to a log holding data in
// several segments and checks it is refused with its own error and leaves
// the log exactly as it was, also after a clean and an unclean restart.
func TestBadInputAppend(t *testing.T) {
	for _, c := range badInputCases() {
		t.Run(c.name, func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				cfg := logTestConfig()
				cfg.SegmentBytes = 1000
				if c.cfg != nil {
					c.cfg(&cfg)
				}
				l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
				for range 12 {
					if _, err := l.Append(badInputBatch(t, 2, 20), 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.Flush(l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
				l.SetHighWatermark(l.LogEndOffset())
				if l.NumSegments() < 2 {
					t.Fatalf("%d segments", l.NumSegments())
				}
				before := badInputSnap(t, fsys, dir, l)

				data := c.data(t)
				offered := slices.Clone(data)
				_, err := l.Append(data, 2)
				badInputCheckErr(t, err, c.want)
				if !bytes.Equal(data, offered) {
					t.Fatalf("a refused append rewrote the caller's bytes")
				}
				if d := before.diff(badInputSnap(t, fsys, dir, l)); d != "" {
					t.Fatalf("after the refused append: %s", d)
				}
				// The log still takes good batches, at the same offset.
				good := badInputBatch(t, 1, 20)
				info, err := l.Append(good, 2)
				if err != nil || info.FirstOffset != before.leo {
					t.Fatalf("next append: %+v, %v", info, err)
				}
				if err := l.TruncateTo(before.leo); err != nil {
					t.Fatal(err)
				}
				if d := before.diff(badInputSnap(t, fsys, dir, l)); d != "" {
					t.Fatalf("after appending and truncating a good batch: %s", d)
				}

				logClose(t, l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true, HighWatermark: before.hw})
				if d := before.diff(badInputSnap(t, fsys, dir, l)); d != "" {
					t.Fatalf("after a clean restart: %s", d)
				}
				logCloseHandles(l)
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{HighWatermark: before.hw})
				defer logClose(t, l)
				if d := before.diff(badInputSnap(t, fsys, dir, l)); d != "" {
					t.Fatalf("after an unclean restart: %s", d)
				}
			})
		})
	}
}

// badInputCheckErr checks err matches want and no other sentinel.
func badInputCheckErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	for _, s := range badInputSentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("err = %v matches %v as well as %v", err, s, want)
		}
	}
}

// TestBadInputAppendAsFollower: a follower checks what its leader sends the
// same way (apart from the produce-only rules) and leaves its log alone.
func TestBadInputAppendAsFollower(t *testing.T) {
	for _, c := range []struct {
		name string
		data func(t testing.TB) []byte
		want error
	}{
		{"empty", func(testing.TB) []byte { return nil }, ErrInvalidBatch},
		{"bad CRC", func(t testing.TB) []byte {
			b := logFollowerBatch(t, 10, 2, 1, 5)
			b[len(b)-1] ^= 1
			return b
		}, record.ErrCorruptCRC},
		{"torn", func(t testing.TB) []byte { return logFollowerBatch(t, 10, 2, 1, 5)[:70] }, record.ErrCorruptLength},
		{"wrong magic", func(t testing.TB) []byte {
			b := logFollowerBatch(t, 10, 2, 1, 5)
			b[16] = 0
			return b
		}, record.ErrInvalidMagic},
		{"below the log end offset", func(t testing.TB) []byte { return logFollowerBatch(t, 9, 2, 1, 5) }, ErrNonMonotonicOffset},
		{"good then bad", func(t testing.TB) []byte {
			bad := logFollowerBatch(t, 12, 2, 1, 5)
			bad[len(bad)-1] ^= 1
			return append(logFollowerBatch(t, 10, 2, 1, 5), bad...)
		}, record.ErrCorruptCRC},
	} {
		t.Run(c.name, func(t *testing.T) {
			logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				l := openTestLog(t, fsys, dir, logTestConfig(), OpenOptions{})
				defer logClose(t, l)
				if _, err := l.AppendAsFollower(logFollowerBatch(t, 0, 10, 1, 5)); err != nil {
					t.Fatal(err)
				}
				before := badInputSnap(t, fsys, dir, l)
				_, err := l.AppendAsFollower(c.data(t))
				badInputCheckErr(t, err, c.want)
				if d := before.diff(badInputSnap(t, fsys, dir, l)); d != "" {
					t.Fatal(d)
				}
			})
		})
	}
}
