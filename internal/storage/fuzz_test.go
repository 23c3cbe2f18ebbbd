package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// FuzzRecovery opens, after an unclean shutdown, a log whose segment files
// hold valid batches followed by fuzzer bytes (tail) and/or overwritten by
// fuzzer bytes at a fuzzer position (mut at mutAt). fixCRC recomputes the
// CRC of every batch whose framing still parses, so the fuzzer also gets
// past the CRC to record structure, offsets and attributes. layout picks
// where the fuzzed segment sits: alone; after an intact segment; before an
// intact segment.
//
// Invariants:
//   - Open(Clean=false) never panics and never fails: damage is cut off,
//     not reported.
//   - Recovery only cuts: every surviving segment file is a prefix of what
//     it held, and the surviving segments are a prefix of the segments.
//   - What was intact survives: segments before the fuzzed one, and every
//     valid batch of the fuzzed segment that ends before the first byte the
//     fuzzer touched.
//   - A single fuzzed segment is cut exactly at the end of its longest
//     prefix of valid batches (CRC, records, offsets increasing within the
//     segment's 32-bit range).
//   - Everything Read returns is whole batches that validate, in offset
//     order, up to the log end offset, which is where the last batch ends
//     (or the base of an empty last segment).
//   - Reopening, uncleanly or cleanly, changes nothing; an append after
//     recovery lands at the log end offset and survives another recovery.
func FuzzRecovery(f *testing.F) {
	valid := fuzzValidSegment(f, 0, 4)
	torn := valid[:len(valid)/2]
	badCRC := bytes.Clone(fuzzValidSegment(f, 0, 1))
	badCRC[len(badCRC)-1] ^= 1
	overflow := bytes.Clone(fuzzValidSegment(f, 0, 1))
	binary.BigEndian.PutUint64(overflow, 1<<63-2)
	codec7 := bytes.Clone(fuzzValidSegment(f, 0, 1))
	codec7[22] |= 7
	for _, s := range []struct {
		layout, batches uint8
		tail            []byte
		mutAt           uint16
		mut             []byte
		fixCRC          bool
	}{
		{0, 0, nil, 0, nil, false},
		{0, 4, nil, 0, nil, false},
		{0, 4, []byte{0}, 0, nil, false},
		{0, 4, make([]byte, 70), 0, nil, false},
		{0, 4, torn, 0, nil, false},
		{1, 3, badCRC, 0, nil, false},
		{2, 3, overflow, 0, nil, true},
		{0, 2, codec7, 0, nil, true},
		{0, 5, nil, 100, []byte{0xff, 0xff, 0xff, 0xff}, false},
		{1, 5, nil, 8, []byte{0, 0, 0, 1}, true},
		{2, 6, []byte("garbage"), 130, []byte{2}, true},
	} {
		f.Add(s.layout, s.batches, s.tail, s.mutAt, s.mut, s.fixCRC)
	}
	f.Fuzz(func(t *testing.T, layout, batches uint8, tail []byte, mutAt uint16, mut []byte, fixCRC bool) {
		if len(tail) > 1<<13 || len(mut) > 1<<13 {
			return // big inputs cost time and find nothing small ones do not
		}
		fuzzRecoveryCheck(t, int(layout%3), int(batches%8), tail, int(mutAt), mut, fixCRC)
	})
}

// fuzzValidSegment returns n valid batches with offsets from base, of one
// to three records, one in four compressed, as the log stores them.
func fuzzValidSegment(t testing.TB, base int64, n int) []byte {
	t.Helper()
	var out []byte
	next := base
	for i := range n {
		opts := record.DefaultBatchOptions()
		opts.BaseOffset = next
		opts.PartitionLeaderEpoch = int32(i / 2)
		if i%4 == 3 {
			opts.Codec = record.CodecLZ4
		}
		b := record.NewBuilder(opts)
		for j := range 1 + i%3 {
			b.Add(fmt.Appendf(nil, "k%d", j), bytes.Repeat([]byte{byte('a' + i)}, 5+7*j), nil, int64(1000+10*i+j))
		}
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, batch...)
		next += int64(1 + i%3)
	}
	return out
}

// fuzzFixCRCs recomputes the CRC of each batch from the start of b while
// its framing parses and fits.
func fuzzFixCRCs(b []byte) {
	for pos := 0; pos < len(b); {
		h, err := record.ParseHeader(b[pos:])
		if err != nil || h.Size() > len(b)-pos {
			return
		}
		recoveryFixCRC(b[pos : pos+h.Size()])
		pos += h.Size()
	}
}

// fuzzValidPrefix is the oracle for one segment: the end of its longest
// prefix of batches that validate, with offsets increasing from base and
// inside the segment's 32-bit range, and the offset after them.
func fuzzValidPrefix(b []byte, base int64) (end int, next int64) {
	next = base
	for end < len(b) {
		h, err := record.ParseHeader(b[end:])
		if err != nil || h.Size() > len(b)-end {
			break
		}
		if _, err := record.Validate(b[end:end+h.Size()], record.ValidateOptions{}); err != nil {
			break
		}
		if h.BaseOffset < next || h.LastOffset() < h.BaseOffset || h.LastOffset()-base > 1<<32-1 {
			break
		}
		next = h.LastOffset() + 1
		end += h.Size()
	}
	return end, next
}

type fuzzSegment struct {
	base    int64
	content []byte
	// intact is how many leading bytes are whole valid batches the fuzzer
	// did not touch: recovery must keep at least these.
	intact int
}

func fuzzRecoveryCheck(t *testing.T, layout, batches int, tail []byte, mutAt int, mut []byte, fixCRC bool) {
	fsys := vfs.NewMem()
	dir := "/data/fuzz-0"
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 64

	// The fuzzed segment: valid batches, the tail, then the overwrite.
	var segs []fuzzSegment
	var fuzzedBase int64
	if layout == 1 {
		first := fuzzValidSegment(t, 0, 3)
		_, next := fuzzValidPrefix(first, 0)
		segs = append(segs, fuzzSegment{base: 0, content: first, intact: len(first)})
		fuzzedBase = next
	}
	valid := fuzzValidSegment(t, fuzzedBase, batches)
	content := append(bytes.Clone(valid), tail...)
	firstTouched := len(valid)
	if len(mut) > 0 {
		at := mutAt % (len(content) + 1)
		firstTouched = min(firstTouched, at)
		if need := at + len(mut); need > len(content) {
			content = append(content, make([]byte, need-len(content))...)
		}
		copy(content[at:], mut)
	}
	if fixCRC {
		fuzzFixCRCs(content)
	}
	intact := 0
	for pos := 0; pos < len(valid); {
		h, _ := record.ParseHeader(valid[pos:])
		if pos+h.Size() > firstTouched {
			break
		}
		pos += h.Size()
		intact = pos
	}
	segs = append(segs, fuzzSegment{base: fuzzedBase, content: content, intact: intact})
	if layout == 2 {
		_, next := fuzzValidPrefix(valid, fuzzedBase)
		last := fuzzValidSegment(t, next, 2)
		segs = append(segs, fuzzSegment{base: next, content: last, intact: len(last)})
	}
	if layout == 2 && segs[1].base == segs[0].base {
		segs = segs[:1] // no valid batches: both would have one name
	}

	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		fh, err := fsys.Create(segmentPath(dir, s.base, ".log"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(s.content, 0); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}

	l, err := Open(fsys, dir, cfg, OpenOptions{Logger: quietLogger})
	if err != nil {
		t.Fatalf("recovery failed on damaged data: %v", err)
	}

	// Recovery only cuts, and what was intact stays.
	files := map[int64][]byte{}
	for name := range logSegmentFiles(t, fsys, dir) {
		base, ok := parseSegmentName(name, ".log")
		if !ok {
			t.Fatalf("unexpected file %s", name)
		}
		b, err := readWhole(fsys, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[base] = b
	}
	// A segment must survive (at least its intact bytes) when every one
	// before it survived whole and it starts at or after where they end.
	gone, prevNext := false, segs[0].base
	for i, s := range segs {
		got, ok := files[s.base]
		switch {
		case ok && gone:
			t.Fatalf("segment %d survives after a deleted or cut one", i)
		case ok && i > 0 && s.base < prevNext:
			t.Fatalf("segment %d (base %d) kept, overlapping offsets up to %d before it", i, s.base, prevNext)
		case ok && !bytes.HasPrefix(s.content, got):
			t.Fatalf("segment %d is not a prefix of what it held (%d bytes, held %d)", i, len(got), len(s.content))
		case !gone && s.base >= prevNext && (!ok || len(got) < s.intact):
			t.Fatalf("segment %d (base %d) kept %d bytes (present %v), but its first %d were intact", i, s.base, len(got), ok, s.intact)
		}
		if !ok || len(got) < len(s.content) {
			gone = true
			continue
		}
		end, next := fuzzValidPrefix(got, s.base)
		if end != len(got) {
			t.Fatalf("segment %d kept whole, but only its first %d of %d bytes are valid", i, end, len(got))
		}
		if len(got) > 0 || i == 0 {
			prevNext = next
		}
	}
	if len(files) != l.NumSegments() {
		t.Fatalf("%d segment files, log has %d segments", len(files), l.NumSegments())
	}
	if len(segs) == 1 {
		end, next := fuzzValidPrefix(segs[0].content, segs[0].base)
		if got := len(files[segs[0].base]); got != end {
			t.Fatalf("cut at %d, longest valid prefix ends at %d", got, end)
		}
		if l.LogEndOffset() != next {
			t.Fatalf("LEO %d, valid prefix ends at offset %d", l.LogEndOffset(), next)
		}
	}

	// Everything readable, valid, in order, up to the log end offset.
	leo := l.LogEndOffset()
	lastEnd := fuzzReadAll(t, l)
	lastSeg := (*l.segments.Load())[l.NumSegments()-1]
	if leo != lastEnd && !(lastSeg.size.Load() == 0 && leo == lastSeg.baseOffset && leo > lastEnd) {
		t.Fatalf("LEO %d but the last batch ends at %d", leo, lastEnd)
	}
	if l.LogStartOffset() > leo || l.RecoveryPoint() != leo {
		t.Fatalf("start %d, recovery point %d, LEO %d", l.LogStartOffset(), l.RecoveryPoint(), leo)
	}

	// Recovering again, or opening cleanly, changes nothing.
	logCloseHandles(l)
	l, err = Open(fsys, dir, cfg, OpenOptions{Logger: quietLogger})
	if err != nil {
		t.Fatalf("second recovery: %v", err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("second recovery: LEO %d, first %d", l.LogEndOffset(), leo)
	}
	for base, b := range files {
		now, err := readWhole(fsys, segmentPath(dir, base, ".log"))
		if err != nil || !bytes.Equal(now, b) {
			t.Fatalf("second recovery changed segment %d (%v)", base, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(fsys, dir, cfg, OpenOptions{Clean: true, Logger: quietLogger})
	if err != nil {
		t.Fatalf("clean open after recovery: %v", err)
	}
	if l.LogEndOffset() != leo || fuzzReadAll(t, l) != lastEnd {
		t.Fatalf("clean open: LEO %d, recovered %d", l.LogEndOffset(), leo)
	}

	// The log carries on from there.
	info, err := l.Append(testBatch(t, 2, 3, 5000, func(i int) []byte { return []byte{byte(i)} }), 7)
	if err != nil || info.FirstOffset != leo {
		t.Fatalf("append after recovery: %+v %v (LEO %d)", info, err, leo)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	logCloseHandles(l)
	l, err = Open(fsys, dir, cfg, OpenOptions{Logger: quietLogger})
	if err != nil {
		t.Fatalf("recovery after the append: %v", err)
	}
	defer l.Close()
	if l.LogEndOffset() != leo+2 || fuzzReadAll(t, l) != leo+2 {
		t.Fatalf("after appending at %d: LEO %d", leo, l.LogEndOffset())
	}
}

// fuzzReadAll reads the whole log batch by batch, checking each batch
// validates and offsets increase, and returns where the last batch ends.
func fuzzReadAll(t *testing.T, l *Log) int64 {
	t.Helper()
	leo := l.LogEndOffset()
	pos, end := l.LogStartOffset(), int64(0)
	for pos < leo {
		res, err := l.Read(pos, 1<<16, leo)
		if err != nil {
			t.Fatalf("read at %d (LEO %d): %v", pos, leo, err)
		}
		if len(res.Records) == 0 {
			break
		}
		for b := res.Records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err == nil && h.Size() > len(b) {
				err = fmt.Errorf("partial batch")
			}
			if err == nil {
				_, err = record.Validate(b[:h.Size()], record.ValidateOptions{})
			}
			if err != nil {
				t.Fatalf("read at %d returned a bad batch: %v", pos, err)
			}
			if h.LastOffset() < pos || h.BaseOffset < end {
				t.Fatalf("read at %d returned batch %d..%d after one ending at %d", pos, h.BaseOffset, h.LastOffset(), end)
			}
			end = h.LastOffset() + 1
			pos = end
			b = b[h.Size():]
		}
	}
	return end
}
