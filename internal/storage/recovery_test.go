package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Recovery after an unclean shutdown, on real files: a log is written and
// flushed, dropped without Close, and the end of a segment is damaged the
// ways a torn write, a bad disk or a buggy writer damage it. Open with
// Clean=false must cut the log exactly where the damage starts, keep every
// record before it, and carry on appending from there.

// recoveryFixture is a flushed log on real files, dropped without Close.
type recoveryFixture struct {
	dir   string
	cfg   Config
	model *logModel
	leo   int64
	// active is the path of the last segment's .log file, activeSize its
	// size before any damage.
	active     string
	activeSize int64
}

// recoveryWrite writes batches of 1-3 records, fsyncs them and drops the
// log as a crash would (its handles closed, nothing else).
func recoveryWrite(t *testing.T, cfg Config, batches int) *recoveryFixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders-3")
	l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
	m := &logModel{}
	for i := range batches {
		m.appendBatch(t, l, 1+i%3, int64(100+i), int32(i/4))
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	f := &recoveryFixture{dir: dir, cfg: cfg, model: m, leo: l.LogEndOffset()}
	f.active = l.activeSegment().logPath()
	f.activeSize = l.activeSegment().size.Load()
	logCloseHandles(l)
	if info, err := os.Stat(f.active); err != nil || info.Size() != f.activeSize {
		t.Fatalf("active segment on disk: %v %v, want %d bytes", info, err, f.activeSize)
	}
	return f
}

// batchAt builds a valid batch as the log would have stored it at base.
func (f *recoveryFixture) batchAt(t testing.TB, base int64, n int) []byte {
	t.Helper()
	return logFollowerBatch(t, base, n, 0, 999)
}

func recoveryAppendFile(t testing.TB, path string, b []byte) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

func recoveryFileSize(t testing.TB, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// recoveryCheck opens the damaged log uncleanly and checks it was cut at
// cutAt in the file at path, with LEO leo and the model's records intact,
// that appends continue at leo, and that a second recovery changes nothing.
func recoveryCheck(t *testing.T, f *recoveryFixture, path string, cutAt, leo int64, recoveryPoint int64) {
	t.Helper()
	l := openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: recoveryPoint})
	if got := recoveryFileSize(t, path); got != cutAt {
		t.Fatalf("%s is %d bytes after recovery, want %d", filepath.Base(path), got, cutAt)
	}
	if l.LogEndOffset() != leo || l.RecoveryPoint() != leo {
		t.Fatalf("LEO %d, recovery point %d; want %d", l.LogEndOffset(), l.RecoveryPoint(), leo)
	}
	m := &logModel{recs: slices.Clone(f.model.recs)}
	m.truncate(leo)
	m.check(t, l)
	m.checkTimestamps(t, l)
	for _, e := range l.LeaderEpochs().Entries() {
		if e.StartOffset >= leo {
			t.Fatalf("leader epoch %v survives past the LEO %d", e, leo)
		}
	}
	size := l.Size()
	logCloseHandles(l)

	// Recovering a recovered log changes nothing.
	l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{RecoveryPoint: 0})
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("second recovery: LEO %d size %d, first gave %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	m.appendBatch(t, l, 2, 5000, 9)
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	m.check(t, l)
	logClose(t, l)
	l = openTestLog(t, vfs.OS(), f.dir, f.cfg, OpenOptions{Clean: true})
	defer logClose(t, l)
	m.check(t, l)
	if l.LogEndOffset() != leo+2 {
		t.Fatalf("LEO %d after appending 2 at %d", l.LogEndOffset(), leo)
	}
}

// TestRecoveryTornTail damages the end of the active segment.
func TestRecoveryTornTail(t *testing.T) {
	type damage struct {
		name string
		// tail returns the bytes appended to the active segment, given
		// the fixture; keep says how many of them are a valid batch that
		// recovery must keep (at the front), and keptRecords its records.
		tail        func(t *testing.T, f *recoveryFixture) []byte
		keep        int
		keptRecords int64
	}
	valid := func(n int) func(t *testing.T, f *recoveryFixture) []byte {
		return func(t *testing.T, f *recoveryFixture) []byte { return f.batchAt(t, f.leo, n) }
	}
	var cases []damage
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 16, 17, 60, 61, 62, 300} {
		cases = append(cases, damage{name: fmt.Sprintf("%d garbage bytes", n), tail: func(*testing.T, *recoveryFixture) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			b[min(16, n-1)] = 0x77 // not magic 2, whatever the draw
			return b
		}})
		cases = append(cases, damage{name: fmt.Sprintf("%d zero bytes", n), tail: func(*testing.T, *recoveryFixture) []byte { return make([]byte, n) }})
	}
	for _, k := range []int{1, 8, 12, 16, 17, 21, 40, 60, 61, 62, 70, -1} {
		cases = append(cases, damage{name: fmt.Sprintf("first %d bytes of a batch", k), tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 3)
			if k < 0 {
				return b[:len(b)-1]
			}
			return b[:k]
		}})
	}
	cases = append(cases,
		damage{name: "bad CRC", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			b[len(b)-2] ^= 0x40
			return b
		}},
		damage{name: "bad CRC field", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			b[17] ^= 1
			return b
		}},
		damage{name: "wrong magic", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			b[16] = 1
			return b
		}},
		damage{name: "length too long, file ends", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			recoveryAddLength(b, 10)
			return b
		}},
		damage{name: "length too long, swallowing a valid batch", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			next := f.batchAt(t, f.leo+2, 1)
			recoveryAddLength(b, 10)
			return append(b, next...)
		}},
		damage{name: "length too short", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			recoveryAddLength(b, -5)
			return b
		}},
		damage{name: "length below a header", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			binary.BigEndian.PutUint32(b[8:], 10)
			return b
		}},
		damage{name: "negative length", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			binary.BigEndian.PutUint32(b[8:], 0xfffffff0)
			return b
		}},
		damage{name: "record count too high", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return recoveryRecount(f.batchAt(t, f.leo, 2), 3)
		}},
		damage{name: "offsets go backwards", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return f.batchAt(t, f.leo-2, 3)
		}},
		damage{name: "offset repeats the last batch", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return f.batchAt(t, f.leo-1, 1)
		}},
		damage{name: "negative base offset", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return f.batchAt(t, -5, 1)
		}},
		damage{name: "offsets past the segment's 32-bit range", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return f.batchAt(t, f.leo+1<<32, 1)
		}},
		damage{name: "last offset overflows int64", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return f.batchAt(t, math.MaxInt64-1, 3)
		}},
		// Pins a fix: recovery failed the whole open on this one batch.
		damage{name: "unsupported codec under a valid CRC", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo, 2)
			b[22] |= 0x07
			recoveryFixCRC(b)
			return b
		}},
		damage{name: "valid batch then garbage", tail: func(t *testing.T, f *recoveryFixture) []byte {
			return append(f.batchAt(t, f.leo, 3), 0xde, 0xad, 0xbe, 0xef)
		}, keep: -1, keptRecords: 3},
		damage{name: "valid batch with a gap then half a batch", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := f.batchAt(t, f.leo+5, 2)
			return append(b, f.batchAt(t, f.leo+7, 1)[:30]...)
		}, keep: -1, keptRecords: 7},
		damage{name: "two valid batches then a bad CRC", tail: func(t *testing.T, f *recoveryFixture) []byte {
			b := append(valid(2)(t, f), f.batchAt(t, f.leo+2, 1)...)
			bad := f.batchAt(t, f.leo+3, 1)
			bad[record.HeaderSize+4] ^= 0xff
			return append(b, bad...)
		}, keep: -2, keptRecords: 3},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, rp := range []string{"recovery point 0", "recovery point at the old LEO"} {
				t.Run(rp, func(t *testing.T) {
					f := recoveryWrite(t, logTestConfig(), 12)
					tail := c.tail(t, f)
					recoveryAppendFile(t, f.active, tail)
					keepBytes := 0
					switch c.keep {
					case -1: // one valid batch at the front of the tail
						h, _ := record.ParseHeader(tail)
						keepBytes = h.Size()
					case -2: // two
						h, _ := record.ParseHeader(tail)
						h2, _ := record.ParseHeader(tail[h.Size():])
						keepBytes = h.Size() + h2.Size()
					}
					if c.keep != 0 {
						// The kept batches become part of the model.
						for b := tail[:keepBytes]; len(b) > 0; {
							h, _ := record.ParseHeader(b)
							recs, err := record.Records(b[:h.Size()])
							if err != nil {
								t.Fatal(err)
							}
							for _, r := range recs {
								f.model.recs = append(f.model.recs, logRec{offset: r.Offset, ts: r.Timestamp, key: string(r.Key), value: string(r.Value)})
							}
							b = b[h.Size():]
						}
					}
					wantLEO := f.leo
					if c.keep != 0 {
						wantLEO = f.model.recs[len(f.model.recs)-1].offset + 1
					}
					start := int64(0)
					if rp != "recovery point 0" {
						start = f.leo
					}
					recoveryCheck(t, f, f.active, f.activeSize+int64(keepBytes), wantLEO, start)
				})
			}
		})
	}
}

// recoveryAddLength changes a batch's batchLength field by d, leaving its
// bytes (and CRC) as they are.
func recoveryAddLength(b []byte, d int32) {
	n := int32(binary.BigEndian.Uint32(b[8:]))
	binary.BigEndian.PutUint32(b[8:], uint32(n+d))
}

// recoveryRecount sets a batch's record count to n and fixes its CRC, so
// only the count lies.
func recoveryRecount(b []byte, n int32) []byte {
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	recoveryFixCRC(b)
	return b
}

// recoveryFixCRC recomputes the CRC-32C of the batch that is all of b.
func recoveryFixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], recoveryCastagnoli))
}

var recoveryCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// recoverySegments lists the .log files of dir in offset order, with
// their base offsets and sizes.
func recoverySegments(t testing.TB, dir string) (bases []int64, sizes []int64) {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if base, ok := parseSegmentName(e.Name(), ".log"); ok {
			bases = append(bases, base)
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, info.Size())
		}
	}
	return bases, sizes
}

// recoveryBatchPositions returns the position and header of every batch in
// a segment file.
func recoveryBatchPositions(t testing.TB, path string) ([]int64, []record.Header) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int64
	var hs []record.Header
	for p := 0; p < len(data); {
		h, err := record.ParseHeader(data[p:])
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, int64(p))
		hs = append(hs, h)
		p += h.Size()
	}
	return pos, hs
}

func recoveryPatch(t testing.TB, path string, at int64, b []byte) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryDamagedOlderSegment: damage in a segment past the recovery
// point that is not the last. The segment is cut at the damaged batch and
// every later segment deleted, since what follows damage cannot be trusted
// to continue the log.
func TestRecoveryDamagedOlderSegment(t *testing.T) {
	for _, c := range []struct {
		name    string
		segment int // which segment to damage
		batch   int // which of its batches; -1 for the last
		how     string
	}{
		{"middle batch CRC", 2, 1, "crc"},
		{"first batch CRC", 2, 0, "crc"},
		{"last batch CRC", 2, -1, "crc"},
		{"first segment", 0, 1, "crc"},
		{"middle batch magic", 3, 1, "magic"},
		{"middle batch length", 1, 1, "length"},
		{"batch offsets go backwards", 2, 2, "backwards"},
		{"segment cut short", 2, -1, "cut"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := logTestConfig()
			cfg.SegmentBytes = 500
			f := recoveryWrite(t, cfg, 40)
			bases, _ := recoverySegments(t, f.dir)
			if len(bases) < 6 {
				t.Fatalf("only %d segments", len(bases))
			}
			path := filepath.Join(f.dir, fmt.Sprintf("%020d.log", bases[c.segment]))
			pos, hs := recoveryBatchPositions(t, path)
			i := c.batch
			if i < 0 {
				i = len(pos) - 1
			}
			at := pos[i]
			switch c.how {
			case "crc":
				recoveryPatch(t, path, at+int64(hs[i].Size())-1, []byte{0xff ^ recoveryByteAt(t, path, at+int64(hs[i].Size())-1)})
			case "magic":
				recoveryPatch(t, path, at+16, []byte{0})
			case "length":
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], uint32(hs[i].BatchLength+3))
				recoveryPatch(t, path, at+8, b[:])
			case "backwards":
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], uint64(hs[0].BaseOffset))
				recoveryPatch(t, path, at, b[:])
			case "cut":
				if err := os.Truncate(path, at+int64(hs[i].Size())-3); err != nil {
					t.Fatal(err)
				}
			}
			wantLEO := hs[i].BaseOffset
			// Recovering from the segment before the damaged one (or the
			// first) scans the damaged one.
			rp := bases[max(c.segment-1, 0)]
			l := openTestLog(t, vfs.OS(), f.dir, cfg, OpenOptions{RecoveryPoint: rp})
			defer logClose(t, l)
			gotBases, gotSizes := recoverySegments(t, f.dir)
			if !slices.Equal(gotBases, bases[:c.segment+1]) {
				t.Fatalf("segments %v after recovery, want %v", gotBases, bases[:c.segment+1])
			}
			if gotSizes[c.segment] != at {
				t.Fatalf("damaged segment is %d bytes, want %d", gotSizes[c.segment], at)
			}
			if l.LogEndOffset() != wantLEO || l.NumSegments() != c.segment+1 {
				t.Fatalf("LEO %d with %d segments, want %d with %d", l.LogEndOffset(), l.NumSegments(), wantLEO, c.segment+1)
			}
			m := &logModel{recs: slices.Clone(f.model.recs)}
			m.truncate(wantLEO)
			m.check(t, l)
			m.checkTimestamps(t, l)
			m.appendBatch(t, l, 2, 7000, 9)
			m.check(t, l)
			if names, _ := os.ReadDir(f.dir); true {
				for _, e := range names {
					if base, ok := parseSegmentName(e.Name(), ".index"); ok && base > bases[c.segment] {
						t.Fatalf("index file %s of a deleted segment left behind", e.Name())
					}
				}
			}
		})
	}
}

func recoveryByteAt(t testing.TB, path string, at int64) byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data[at]
}

// TestRecoveryDamagedIndexes: after a clean shutdown the indexes on disk are
// trusted only if they pass their checks; a missing or damaged one is
// rebuilt from its segment, and reads and timestamp lookups stay right.
func TestRecoveryDamagedIndexes(t *testing.T) {
	type target int
	const (
		inactive target = iota
		active
	)
	for _, c := range []struct {
		name   string
		which  target
		ext    string
		damage func(b []byte) []byte // nil: remove the file
	}{
		{"index missing", inactive, ".index", nil},
		{"time index missing", inactive, ".timeindex", nil},
		{"index size not a multiple of 8", inactive, ".index", func(b []byte) []byte { return append(b, 1, 2, 3) }},
		{"time index size not a multiple of 12", inactive, ".timeindex", func(b []byte) []byte { return b[:len(b)-5] }},
		{"index entries out of order", inactive, ".index", func(b []byte) []byte {
			return append(slices.Clone(b[8:16]), b[:8]...)
		}},
		{"index position past the segment", inactive, ".index", func(b []byte) []byte {
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(slices.Clone(b), 1<<20), 1<<30)
		}},
		{"time index out of order", inactive, ".timeindex", func(b []byte) []byte {
			return append(slices.Clone(b[12:24]), b[:12]...)
		}},
		{"time index empty", inactive, ".timeindex", func([]byte) []byte { return []byte{} }},
		{"active index missing", active, ".index", nil},
		{"active time index missing", active, ".timeindex", nil},
		{"active index garbage", active, ".index", func(b []byte) []byte { return slices.Repeat([]byte{0xff}, len(b)+8) }},
		// Structurally sound (sorted, inside the segment) but pointing
		// into the middle of a batch: caught at first use and rebuilt.
		{"index entry points inside a batch", inactive, ".index", func(b []byte) []byte {
			out := slices.Clone(b)
			pos := binary.BigEndian.Uint32(out[4:])
			binary.BigEndian.PutUint32(out[4:], pos+1)
			return out
		}},
		{"index entry names the wrong offset", inactive, ".index", func(b []byte) []byte {
			out := slices.Clone(b)
			rel := binary.BigEndian.Uint32(out[8:])
			binary.BigEndian.PutUint32(out[8:], rel-1)
			return out
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "orders-3")
			cfg := logTestConfig()
			cfg.SegmentBytes = 2000
			cfg.IndexIntervalBytes = 100
			l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
			m := &logModel{}
			for i := range 60 {
				m.appendBatchTs(t, l, []int64{int64(1000 + 10*i), int64(995 + 10*i)}, 0)
			}
			logClose(t, l)
			bases, _ := recoverySegments(t, dir)
			base := bases[1]
			if c.which == active {
				base = bases[len(bases)-1]
			}
			path := filepath.Join(dir, fmt.Sprintf("%020d%s", base, c.ext))
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(orig) < 24 {
				t.Fatalf("%s has %d bytes: too few entries to damage", path, len(orig))
			}
			if c.damage == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, c.damage(orig), 0o644); err != nil {
				t.Fatal(err)
			}

			l = openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{Clean: true})
			if l.LogEndOffset() != 120 {
				t.Fatalf("LEO %d", l.LogEndOffset())
			}
			m.check(t, l)
			m.checkTimestamps(t, l)
			for o := int64(0); o < l.LogEndOffset(); o++ {
				res, err := l.Read(o, 1, l.LogEndOffset())
				if err != nil {
					t.Fatal(err)
				}
				if hs := logBatches(t, res.Records); len(hs) != 1 || hs[0].BaseOffset > o || hs[0].LastOffset() < o {
					t.Fatalf("read at %d: %v", o, logBases(hs))
				}
			}
			m.appendBatch(t, l, 1, 9000, 0)
			logClose(t, l)
			// The rebuilt index was written back and passes its checks.
			rebuilt, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("index not rebuilt: %v", err)
			}
			size := recoveryFileSize(t, filepath.Join(dir, fmt.Sprintf("%020d.log", base)))
			if c.ext == ".index" {
				if _, err := decodeOffsetIndex(rebuilt, size, 1<<32); err != nil {
					t.Fatalf("rebuilt index: %v", err)
				}
			} else if x, err := decodeTimeIndex(rebuilt, 1<<32); err != nil || len(x.entries) == 0 {
				t.Fatalf("rebuilt time index: %d entries, %v", len(x.entries), err)
			}
			l = openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{Clean: true})
			defer logClose(t, l)
			m.check(t, l)
			m.checkTimestamps(t, l)
		})
	}
}

// TestRecoveryLeftoverFiles: what an interrupted cleaner or atomic write
// leaves behind is finished or discarded at open, as open.go says:
// .cleaned and .tmp files are removed, a .log.swap replaces its segment
// (its indexes rebuilt), other .swap files and indexes without a segment
// are removed.
func TestRecoveryLeftoverFiles(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "orders-3")
			cfg := logTestConfig()
			cfg.SegmentBytes = 600
			l := openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{})
			m := &logModel{}
			for i := range 30 {
				m.appendBatch(t, l, 2, int64(i), 0)
			}
			logClose(t, l)
			bases, _ := recoverySegments(t, dir)
			seg := func(i int, ext string) string { return filepath.Join(dir, fmt.Sprintf("%020d%s", bases[i], ext)) }

			// Segment 1's swap: a "cleaned" copy holding only its last batch.
			pos, hs := recoveryBatchPositions(t, seg(1, ".log"))
			data, err := os.ReadFile(seg(1, ".log"))
			if err != nil {
				t.Fatal(err)
			}
			last := len(pos) - 1
			swapped := data[pos[last]:]
			var dropped []int64
			for _, h := range hs[:last] {
				for o := h.BaseOffset; o <= h.LastOffset(); o++ {
					dropped = append(dropped, o)
				}
			}
			write := func(p string, b []byte) {
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(seg(1, ".log.swap"), swapped)
			write(seg(1, ".index.swap"), []byte{1, 2, 3})
			write(seg(2, ".log.cleaned"), []byte("half-written cleaned segment"))
			write(seg(0, ".index.tmp"), []byte{9})
			write(filepath.Join(dir, "leader-epoch-checkpoint.tmp"), []byte("x"))
			write(filepath.Join(dir, fmt.Sprintf("%020d.index", 99999)), make([]byte, 8))
			write(filepath.Join(dir, fmt.Sprintf("%020d.timeindex", 99999)), make([]byte, 12))

			l = openTestLog(t, vfs.OS(), dir, cfg, OpenOptions{Clean: clean})
			defer logClose(t, l)
			names, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range names {
				n := e.Name()
				if filepath.Ext(n) == ".swap" || filepath.Ext(n) == ".cleaned" || filepath.Ext(n) == ".tmp" || strings.HasPrefix(n, "00000000000000099999") {
					t.Fatalf("%s left behind", n)
				}
			}
			if got, err := os.ReadFile(seg(1, ".log")); err != nil || !slices.Equal(got, swapped) {
				t.Fatalf("segment 1 not replaced by its swap file (%d bytes, %v)", len(got), err)
			}
			for _, o := range dropped {
				i := logSearch(m.recs, o)
				m.recs = slices.Delete(m.recs, i, i+1)
			}
			m.check(t, l)
			m.checkTimestamps(t, l)
			if l.LogEndOffset() != 60 {
				t.Fatalf("LEO %d", l.LogEndOffset())
			}
		})
	}
}

// TestRecoveryRebuildsLeaderEpochs: recovery adds back, from the batches it
// scans, leader epochs that the leader-epoch checkpoint lost (a lost or
// stale file), as Kafka's recovery does.
func TestRecoveryRebuildsLeaderEpochs(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := logTestConfig()
		cfg.SegmentBytes = 600
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		m := &logModel{}
		for i := range 12 {
			m.appendBatch(t, l, 2, int64(1000+i), int32(i/4)) // epochs 0, 1, 2 from offsets 0, 8, 16
		}
		want := l.LeaderEpochs().Entries()
		if len(want) != 3 || want[1].StartOffset != 8 || want[2].StartOffset != 16 {
			t.Fatalf("epochs before: %v", want)
		}
		if err := l.Flush(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		logCloseHandles(l)
		if err := fsys.Remove(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil {
			t.Fatal(err)
		}
		l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
		defer logClose(t, l)
		if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("epochs after recovery %v, want %v", got, want)
		}
		m.check(t, l)
	})
}

// TestRecoveryClosesInactiveSegments: recovery scans every segment from
// the recovery point but leaves only the active one open; the others
// reopen on their next read. With thousands of partitions, a descriptor per
// recovered segment would run a broker into its open-file limit.
func TestRecoveryClosesInactiveSegments(t *testing.T) {
	logForEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := logTestConfig()
		cfg.SegmentBytes = 250
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		m := &logModel{}
		for i := range 12 {
			m.appendBatch(t, l, 2, int64(1000+i), 0)
		}
		if err := l.Flush(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		logCloseHandles(l)
		l = openTestLog(t, fsys, dir, cfg, OpenOptions{}) // recovers every segment
		defer logClose(t, l)
		segs := *l.segments.Load()
		if len(segs) < 3 {
			t.Fatalf("%d segments; the test needs several", len(segs))
		}
		for _, s := range segs[:len(segs)-1] {
			s.fileMu.Lock()
			open := s.file != nil
			s.fileMu.Unlock()
			if open {
				t.Errorf("inactive segment %d left open after recovery", s.baseOffset)
			}
		}
		m.check(t, l) // and they reopen to be read
	})
}
