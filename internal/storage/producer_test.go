package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Tests of the idempotent-producer state of a log (producer.go): the
// produce rules as Log.Append applies them, and the state surviving clean
// and unclean restarts, truncation, retention and damaged snapshots.

// producerBatch builds a client batch of n records from producer pid at
// epoch, starting at sequence seq.
func producerBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	return testBatchOpts(t, opts, n, 30, ts, nil)
}

// producerConfig: segments of a few batches, nothing expires by time.
func producerConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 700
	cfg.IndexIntervalBytes = 100
	cfg.RetentionMs = -1
	return cfg
}

// producerLog keeps what a test appended: the headers of every batch
// written, in order (offsets assigned), for the expected state.
type producerLog struct {
	t    testing.TB
	l    *Log
	hist []histBatch
	// sent holds each batch as the client sent it, by base offset, for
	// retries.
	sent map[int64][]byte
}

func newProducerLog(t testing.TB, l *Log) *producerLog {
	return &producerLog{t: t, l: l, sent: map[int64][]byte{}}
}

// append appends data (one or more batches) and records them; it fails
// the test unless they are written.
func (p *producerLog) append(data []byte) AppendInfo {
	p.t.Helper()
	info, err := p.tryAppend(data)
	if err != nil || info.Duplicate {
		p.t.Fatalf("append: %+v, %v", info, err)
	}
	return info
}

// tryAppend appends data and records the batches if they were written.
func (p *producerLog) tryAppend(data []byte) (AppendInfo, error) {
	orig := bytes.Clone(data)
	info, err := p.l.Append(data, 0)
	if err != nil || info.Duplicate {
		return info, err
	}
	for pos := 0; pos < len(data); {
		h, err := record.ParseHeader(data[pos:])
		if err != nil {
			return info, err
		}
		p.hist = append(p.hist, histBatch{Header: h})
		p.sent[h.BaseOffset] = orig[pos : pos+h.Size()]
		pos += h.Size()
	}
	return info, nil
}

// next returns the epoch and sequence producer pid goes on with.
func (p *producerLog) next(pid int64) (int16, int32) {
	e, ok := producerExpect(p.hist)[pid]
	if !ok || len(e.Batches) == 0 {
		return e.Epoch, 0
	}
	return e.Epoch, producerstate.LastSeq(e.Batches[len(e.Batches)-1].LastSeq, 1)
}

// truncated drops the recorded batches at or past the log end offset.
func (p *producerLog) truncated() {
	leo := p.l.LogEndOffset()
	for len(p.hist) > 0 && p.hist[len(p.hist)-1].BaseOffset >= leo {
		p.hist = p.hist[:len(p.hist)-1]
	}
}

// histBatch is a batch the producer tests wrote: its header and, for a
// transaction marker, the marker.
type histBatch struct {
	record.Header
	marker *producerstate.Marker
}

// histOf reads a batch written as a follower.
func histOf(t testing.TB, b []byte) histBatch {
	t.Helper()
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	hb := histBatch{Header: h}
	if h.IsControl() {
		err := record.ForEachRecord(b, func(r *record.Record) error {
			if m, ok := producerstate.ParseMarker(r); ok {
				hb.marker = &m
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return hb
}

// producerExpect is the state the batches hs leave.
func producerExpect(hs []histBatch) map[int64]producerstate.Entry {
	s := producerstate.New()
	for _, h := range hs {
		if h.marker != nil {
			s.UpdateMarker(h.Header, *h.marker, 0)
		} else {
			s.Update(h.Header, 0)
		}
	}
	return s.All()
}

func producerCheckState(t testing.TB, what string, l *Log, hs []histBatch) {
	t.Helper()
	if got, want := l.ActiveProducers(), producerExpect(hs); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: producer state\n%+v\nwant\n%+v", what, got, want)
	}
}

// producerSnapshotFiles lists the snapshot offsets on disk.
func producerSnapshotFiles(t testing.TB, fsys vfs.FS, dir string) []int64 {
	t.Helper()
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestProducerDuplicate(t *testing.T) {
	for _, lat := range []bool{false, true} {
		t.Run(fmt.Sprintf("LogAppendTime=%v", lat), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := producerConfig()
			cfg.LogAppendTime = lat
			clock := &fakeClock{ms: 1_700_000_000_000}
			l := openTestLog(t, fsys, "/data/p-0", cfg, OpenOptions{Now: clock.now})
			defer l.Close()
			p := newProducerLog(t, l)
			p.append(testBatch(t, 2, 10, 1, nil)) // a plain producer's batch at 0-1
			first := p.append(producerBatch(t, 7, 0, 0, 3, 5))
			clock.advance(time.Second)
			second := p.append(producerBatch(t, 7, 0, 3, 2, 6))
			leo, size := l.LogEndOffset(), l.Size()
			for _, want := range []AppendInfo{first, second} {
				clock.advance(time.Second)
				retry := p.sent[want.FirstOffset]
				got, err := l.Append(bytes.Clone(retry), 0)
				if err != nil || !got.Duplicate {
					t.Fatalf("retry of %d..%d: %+v, %v", want.FirstOffset, want.LastOffset, got, err)
				}
				if got.FirstOffset != want.FirstOffset || got.LastOffset != want.LastOffset ||
					got.LogAppendTime != want.LogAppendTime || got.MaxTimestamp != want.MaxTimestamp || got.NumBatches != 0 {
					t.Fatalf("retry answered %+v, first append %+v", got, want)
				}
			}
			if l.LogEndOffset() != leo || l.Size() != size {
				t.Fatalf("a duplicate wrote: end %d -> %d, size %d -> %d", leo, l.LogEndOffset(), size, l.Size())
			}
			producerCheckState(t, "after retries", l, p.hist)
			if recs := readAllRecords(t, l, 0, l.LogEndOffset()); len(recs) != 7 {
				t.Fatalf("%d records in the log, want 7", len(recs))
			}
		})
	}
}

// producerExpectErr appends data and wants err, and the log unchanged.
func producerExpectErr(t *testing.T, p *producerLog, data []byte, want error) {
	t.Helper()
	leo, size := p.l.LogEndOffset(), p.l.Size()
	info, err := p.l.Append(data, 0)
	if !errors.Is(err, want) {
		t.Fatalf("append: %+v, %v; want %v", info, err, want)
	}
	if p.l.LogEndOffset() != leo || p.l.Size() != size {
		t.Fatalf("a refused append wrote: end %d -> %d", leo, p.l.LogEndOffset())
	}
	producerCheckState(t, "after a refused append", p.l, p.hist)
}

func TestProducerOutOfOrderAndEpochs(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/p-0", producerConfig(), OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	p.append(producerBatch(t, 7, 2, 0, 3, 1))
	p.append(producerBatch(t, 7, 2, 3, 1, 1))

	producerExpectErr(t, p, producerBatch(t, 7, 2, 5, 1, 1), ErrOutOfOrderSequence) // gap
	producerExpectErr(t, p, producerBatch(t, 7, 2, 3, 2, 1), ErrOutOfOrderSequence) // overlaps, not a retry
	producerExpectErr(t, p, producerBatch(t, 7, 1, 4, 1, 1), ErrInvalidProducerEpoch)
	producerExpectErr(t, p, producerBatch(t, 7, 3, 4, 1, 1), ErrOutOfOrderSequence) // new epoch not at 0
	// A producer id without a sequence is not a valid produce.
	producerExpectErr(t, p, producerBatch(t, 7, 2, -1, 1, 1), ErrInvalidBatch)
	// Reference: KIP-360. A producer the partition does not know resumes
	// at any sequence, and is then held to it.
	p.append(producerBatch(t, 9, 0, 1, 1, 1))
	producerExpectErr(t, p, producerBatch(t, 9, 0, 3, 1, 1), ErrOutOfOrderSequence)

	p.append(producerBatch(t, 7, 3, 0, 2, 1)) // new epoch at 0
	producerExpectErr(t, p, producerBatch(t, 7, 2, 4, 1, 1), ErrInvalidProducerEpoch)
	// The old epoch's batches are no duplicates any more: fenced.
	producerExpectErr(t, p, producerBatch(t, 7, 2, 3, 1, 1), ErrInvalidProducerEpoch)
	p.append(producerBatch(t, 7, 3, 2, 1, 1))
	p.append(producerBatch(t, 8, 0, 0, 1, 1))
	producerCheckState(t, "end", l, p.hist)
}

func TestProducerSequenceWraparound(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/p-0", producerConfig(), OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	// A follower builds the same state without refusing anything: here it
	// takes a producer near the end of the sequence space.
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 0, math.MaxInt32-4
	follow := testBatchOpts(t, opts, 3, 10, 1, nil)
	if _, err := l.AppendAsFollower(follow); err != nil {
		t.Fatal(err)
	}
	p.hist = append(p.hist, histOf(t, follow))

	wrap := p.append(producerBatch(t, 7, 0, math.MaxInt32-1, 3, 1)) // MaxInt32-1, MaxInt32, 0
	if e := l.ActiveProducers()[7]; e.Batches[len(e.Batches)-1].LastSeq != 0 {
		t.Fatalf("state after the wrap: %+v", e)
	}
	if got, err := l.Append(bytes.Clone(p.sent[wrap.FirstOffset]), 0); err != nil || !got.Duplicate || got.FirstOffset != wrap.FirstOffset {
		t.Fatalf("retry of the wrapping batch: %+v %v", got, err)
	}
	producerExpectErr(t, p, producerBatch(t, 7, 0, 0, 1, 1), ErrOutOfOrderSequence)
	p.append(producerBatch(t, 7, 0, 1, 1, 1))
	producerCheckState(t, "end", l, p.hist)
}

func TestProducerMultiBatchAppend(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/p-0", producerConfig(), OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

	// Checked in order, each against the state the ones before it leave.
	pair := p.append(cat(producerBatch(t, 1, 0, 0, 2, 1), producerBatch(t, 1, 0, 2, 2, 1), producerBatch(t, 2, 0, 0, 1, 1)))
	// One bad batch refuses them all, even the good one before it.
	producerExpectErr(t, p, cat(producerBatch(t, 1, 0, 4, 1, 1), producerBatch(t, 1, 0, 6, 1, 1)), ErrOutOfOrderSequence)
	producerExpectErr(t, p, cat(producerBatch(t, 3, 0, 0, 1, 1), producerBatch(t, 2, 1, 3, 1, 1)), ErrOutOfOrderSequence)
	// The whole produce again is a retry.
	retry := cat(producerBatch(t, 1, 0, 0, 2, 1), producerBatch(t, 1, 0, 2, 2, 1), producerBatch(t, 2, 0, 0, 1, 1))
	if got, err := l.Append(retry, 0); err != nil || !got.Duplicate || got.FirstOffset != pair.FirstOffset || got.LastOffset != pair.LastOffset {
		t.Fatalf("retry of a whole produce: %+v %v, first written %+v", got, err, pair)
	}
	// A retried batch beside a new one has no true answer: refused.
	producerExpectErr(t, p, cat(producerBatch(t, 2, 0, 0, 1, 1), producerBatch(t, 2, 0, 1, 1, 1)), ErrOutOfOrderSequence)
	// Plain batches mix with idempotent ones.
	p.append(cat(testBatch(t, 1, 5, 1, nil), producerBatch(t, 2, 0, 1, 1, 1), testBatch(t, 1, 5, 1, nil)))
	producerCheckState(t, "end", l, p.hist)
}

func TestProducerFollowerAndMarkers(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/p-0", producerConfig(), OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	follow := func(b []byte) {
		t.Helper()
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
		p.hist = append(p.hist, histOf(t, b))
	}
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 5, 1, 10
	follow(testBatchOpts(t, opts, 2, 10, 1, nil)) // not at 0: a follower takes it
	opts.BaseOffset, opts.BaseSequence = 2, 40
	follow(testBatchOpts(t, opts, 2, 10, 1, nil)) // a gap: taken too
	producerCheckState(t, "after follower appends", l, p.hist)
	p.append(producerBatch(t, 5, 1, 42, 1, 1))
	// A transaction marker of a newer epoch moves the producer there.
	follow(compactionMarker(t, 5, l.LogEndOffset(), 1, record.ControlAbort))
	if e := l.ActiveProducers()[5]; len(e.Batches) != 0 {
		t.Fatalf("after a marker: %+v", e)
	}
	producerExpectErr(t, p, producerBatch(t, 5, 1, 43, 1, 1), ErrOutOfOrderSequence)
	p.append(producerBatch(t, 5, 1, 0, 1, 1))
	producerCheckState(t, "end", l, p.hist)
}

// producerTs is the timestamp of producerFill's batches: near the tests'
// clocks, so that no producer expires unless a test moves its clock a day.
const producerTs = 1_700_000_000_000

// producerFill appends batches from two producers, alternating, until the
// log has at least segs segments.
func producerFill(t testing.TB, p *producerLog, segs int) {
	t.Helper()
	next := map[int64]int32{}
	for _, h := range p.hist {
		if h.HasProducerID() {
			next[h.ProducerID] = producerstate.LastSeq(h.BaseSequence, h.LastOffsetDelta) + 1
		}
	}
	for i := 0; p.l.NumSegments() < segs; i++ {
		pid := int64(1 + i%2)
		n := 1 + i%3
		p.append(producerBatch(t, pid, 0, next[pid], n, producerTs+int64(i)))
		next[pid] += int32(n)
	}
}

func TestProducerRollWritesSnapshot(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/p-0"
	l := openTestLog(t, fsys, dir, producerConfig(), OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	producerFill(t, p, 4)
	bases := modelSegmentBases(l)
	snaps := producerSnapshotFiles(t, fsys, dir)
	if !reflect.DeepEqual(snaps, bases[1:]) {
		t.Fatalf("snapshots %v, want one per rolled-to segment %v", snaps, bases[1:])
	}
	for _, off := range snaps {
		b, err := readWhole(fsys, filepath.Join(dir, producerstate.SnapshotFileName(off)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := producerstate.DecodeSnapshot(b, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		var below []histBatch
		for _, h := range p.hist {
			if h.BaseOffset < off {
				below = append(below, h)
			}
		}
		if got, want := st.All(), producerExpect(below); !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot at %d holds\n%+v\nwant the state of the batches below it\n%+v", off, got, want)
		}
	}
}

// producerOpenCounter counts the files opened through it.
type producerOpenCounter struct {
	vfs.FS
	mu     sync.Mutex
	opened map[string]int
}

func (c *producerOpenCounter) count(name string) {
	c.mu.Lock()
	c.opened[filepath.Base(name)]++
	c.mu.Unlock()
}

func (c *producerOpenCounter) Open(name string) (vfs.File, error) {
	c.count(name)
	return c.FS.Open(name)
}

func (c *producerOpenCounter) OpenReadWrite(name string) (vfs.File, error) {
	c.count(name)
	return c.FS.OpenReadWrite(name)
}

func TestProducerStateSurvivesCleanRestart(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/data/p-0"
	cfg := producerConfig()
	l := openTestLog(t, mem, dir, cfg, OpenOptions{})
	p := newProducerLog(t, l)
	producerFill(t, p, 4)
	last := p.hist[len(p.hist)-1]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	if snaps := producerSnapshotFiles(t, mem, dir); snaps[len(snaps)-1] != leo {
		t.Fatalf("snapshots %v: none at the log end offset %d after a clean close", snaps, leo)
	}

	// The clean start loads the snapshot at the log end offset and replays
	// nothing: no inactive segment is opened.
	counter := &producerOpenCounter{FS: mem, opened: map[string]int{}}
	l = openTestLog(t, counter, dir, cfg, OpenOptions{Clean: true})
	bases := modelSegmentBases(l)
	for _, b := range bases[:len(bases)-1] {
		if n := counter.opened[filepath.Base(segmentPath(dir, b, ".log"))]; n != 0 {
			t.Fatalf("clean start opened inactive segment %d (%d times): it replayed", b, n)
		}
	}
	producerCheckState(t, "clean restart", l, p.hist)
	p.l = l
	got, err := l.Append(bytes.Clone(p.sent[last.BaseOffset]), 0)
	if err != nil || !got.Duplicate || got.FirstOffset != last.BaseOffset || got.LastOffset != last.LastOffset() {
		t.Fatalf("retry after a clean restart: %+v %v, first written at %d..%d", got, err, last.BaseOffset, last.LastOffset())
	}
	// Closing an idle log writes no snapshot again.
	before := mem.MutatingOps()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := mem.MutatingOps() - before; n != 0 {
		t.Fatalf("closing an idle log made %d mutating file operations", n)
	}

	// A log that never saw a batch writes no snapshot either.
	e := openTestLog(t, mem, "/data/empty-0", cfg, OpenOptions{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps := producerSnapshotFiles(t, mem, "/data/empty-0"); len(snaps) != 0 {
		t.Fatalf("an empty log wrote snapshots %v", snaps)
	}
}

func TestProducerStateSurvivesCrash(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			fsys := vfs.NewMem()
			dir := "/data/p-0"
			cfg := producerConfig()
			l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
			p := newProducerLog(t, l)
			producerFill(t, p, 3)
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			acked := len(p.hist)
			rp := l.RecoveryPoint()
			// More, never flushed: the crash may take them.
			producerFill(t, p, 4)
			if torn {
				fsys.CrashTorn(rand.New(rand.NewPCG(7, 7)))
			} else {
				fsys.Crash()
			}
			l = openTestLog(t, fsys, dir, cfg, OpenOptions{RecoveryPoint: rp})
			defer l.Close()
			p.l = l
			p.truncated()
			if len(p.hist) < acked {
				t.Fatalf("%d batches survived, %d were acknowledged", len(p.hist), acked)
			}
			producerCheckState(t, "after the crash", l, p.hist)
			// Every acknowledged batch still among its producer's last
			// five is recognised when retried, with its first offsets.
			retried := 0
			for _, h := range p.hist[:acked] {
				e := l.ActiveProducers()[h.ProducerID]
				if e.Batches[0].FirstOffset > h.BaseOffset {
					continue
				}
				got, err := l.Append(bytes.Clone(p.sent[h.BaseOffset]), 0)
				if err != nil || !got.Duplicate || got.FirstOffset != h.BaseOffset || got.LastOffset != h.LastOffset() {
					t.Fatalf("retry of acknowledged batch %d..%d: %+v %v", h.BaseOffset, h.LastOffset(), got, err)
				}
				retried++
			}
			if retried == 0 {
				t.Fatal("no acknowledged batch was retried")
			}
		})
	}
}

func TestProducerDamagedSnapshotIgnored(t *testing.T) {
	damage := map[string]func(b []byte) []byte{
		"bit flip":  func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b },
		"cut short": func(b []byte) []byte { return b[:len(b)-3] },
		"empty":     func(b []byte) []byte { return nil },
		// A version this code does not know, with a correct CRC: a file
		// from a newer Fjord after a downgrade.
		"unknown version": func(b []byte) []byte {
			b[5] = 9
			body := b[:len(b)-4]
			return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		},
	}
	for name, fn := range damage {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", name, all), func(t *testing.T) {
				fsys := vfs.NewMem()
				dir := "/data/p-0"
				cfg := producerConfig()
				l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
				p := newProducerLog(t, l)
				producerFill(t, p, 4)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				snaps := producerSnapshotFiles(t, fsys, dir)
				victims := snaps[len(snaps)-1:]
				if all {
					victims = snaps
				}
				for _, off := range victims {
					path := filepath.Join(dir, producerstate.SnapshotFileName(off))
					b, err := readWhole(fsys, path)
					if err != nil {
						t.Fatal(err)
					}
					if err := writeFileForTest(fsys, path, fn(b)); err != nil {
						t.Fatal(err)
					}
				}
				logs := &testutil.Buffer{}
				l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
				defer l.Close()
				producerCheckState(t, "rebuilt", l, p.hist)
				if n := strings.Count(logs.String(), "damaged producer state snapshot"); n != len(victims) {
					t.Fatalf("%d log lines about damaged snapshots, want %d:\n%s", n, len(victims), logs)
				}
				left := producerSnapshotFiles(t, fsys, dir)
				if want := snaps[:len(snaps)-len(victims)]; !reflect.DeepEqual(left, want) && !(len(left) == 0 && len(want) == 0) {
					t.Fatalf("snapshots left %v, want %v (the damaged ones deleted)", left, want)
				}
			})
		}
	}
}

// writeFileForTest replaces path's contents, durably.
func writeFileForTest(fsys vfs.FS, path string, b []byte) error {
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func TestProducerTruncation(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/p-0"
	cfg := producerConfig()
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	defer l.Close()
	p := newProducerLog(t, l)
	producerFill(t, p, 5)
	bases := modelSegmentBases(l)

	// Into the middle of the second segment: the snapshots above go, and
	// the state is what the batches below the cut left.
	cut := p.hist[0].BaseOffset
	for _, h := range p.hist {
		if h.BaseOffset > bases[1] {
			cut = h.BaseOffset
			break
		}
	}
	removed := map[int64][]byte{}
	for _, h := range p.hist {
		if h.BaseOffset >= cut {
			removed[h.BaseOffset] = p.sent[h.BaseOffset]
		}
	}
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	p.truncated()
	producerCheckState(t, "after TruncateTo", l, p.hist)
	for _, off := range producerSnapshotFiles(t, fsys, dir) {
		if off > l.LogEndOffset() {
			t.Fatalf("snapshot at %d above the log end offset %d after truncation", off, l.LogEndOffset())
		}
	}
	// The first removed batch is no duplicate now: it is the producer's
	// next, and is written again.
	first := removed[cut]
	info, err := l.Append(bytes.Clone(first), 0)
	if err != nil || info.Duplicate || info.FirstOffset != cut {
		t.Fatalf("the first removed batch again: %+v %v", info, err)
	}
	h, _ := record.ParseHeader(first)
	h.BaseOffset = cut
	p.hist = append(p.hist, histBatch{Header: h})
	p.sent[cut] = first
	producerFill(t, p, 6)
	producerCheckState(t, "appending after TruncateTo", l, p.hist)

	// The state after truncation survives a clean restart and a crash.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
	producerCheckState(t, "clean restart after truncation", l, p.hist)
	fsys.Crash()
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
	p.l = l
	producerCheckState(t, "crash after truncation", l, p.hist)

	// Starting over empty forgets every producer.
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if n := len(l.ActiveProducers()); n != 0 {
		t.Fatalf("%d producers after TruncateFullyAndStartAt", n)
	}
	if snaps := producerSnapshotFiles(t, fsys, dir); len(snaps) != 0 {
		t.Fatalf("snapshots %v after TruncateFullyAndStartAt", snaps)
	}
	p.hist = nil
	p.append(producerBatch(t, 1, 0, 0, 1, 1))
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	fsys.Crash()
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{RecoveryPoint: 1000})
	producerCheckState(t, "crash after starting over", l, p.hist)
}

func TestProducerRetention(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/p-0"
	cfg := producerConfig()
	clock := &fakeClock{ms: 1_700_000_000_000}
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now})
	p := newProducerLog(t, l)
	p.append(producerBatch(t, 9, 0, 0, 2, clock.ms)) // a producer only in the first segment
	producerFill(t, p, 6)
	l.SetHighWatermark(l.LogEndOffset())
	bases := modelSegmentBases(l)

	// DeleteRecords into the third segment: the snapshots below it go but
	// the one where that segment begins.
	if _, err := l.DeleteRecordsBefore(bases[2] + 1); err != nil {
		t.Fatal(err)
	}
	if snaps := producerSnapshotFiles(t, fsys, dir); snaps[0] != bases[2] {
		t.Fatalf("snapshots %v after DeleteRecordsBefore(%d), want the first at %d", snaps, bases[2]+1, bases[2])
	}
	res, err := l.ApplyRetention()
	if err != nil || res.SegmentsDeleted != 2 {
		t.Fatalf("retention: %+v %v", res, err)
	}
	if snaps := producerSnapshotFiles(t, fsys, dir); snaps[0] != bases[2] {
		t.Fatalf("snapshots %v after retention, want the first at %d", snaps, bases[2])
	}
	// Producers whose batches went stay: a retry of producer 9's batch
	// is still recognised, after a crash too.
	producerCheckState(t, "after retention", l, p.hist)
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	fsys.Crash()
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Now: clock.now, LogStartOffset: bases[2] + 1})
	p.l = l
	producerCheckState(t, "crash after retention", l, p.hist)
	if got, err := l.Append(bytes.Clone(p.sent[0]), 0); err != nil || !got.Duplicate || got.FirstOffset != 0 {
		t.Fatalf("retry of a batch retention deleted: %+v %v", got, err)
	}

	defer l.Close()

	// A day after its newest batch's timestamp, a producer expires at the
	// next retention pass; one that wrote since stays.
	clock.advance(24*time.Hour + time.Minute)
	e := l.ActiveProducers()[1]
	last := e.Batches[len(e.Batches)-1]
	p.append(producerBatch(t, 1, 0, last.LastSeq+1, 1, clock.ms))
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if got := l.ActiveProducers(); len(got) != 1 || got[1].LastTimestamp != clock.ms {
		t.Fatalf("after expiration: %+v", got)
	}
}

// TestProducerCrashAtEveryBoundary drives a log through idempotent appends
// across rolls, flushes, a truncation, an epoch bump, DeleteRecords,
// retention and a clean close, crashes it after each of its mutating
// file-system operations in turn (MemFS.CrashAfter, then a power cut, a
// torn power cut, or the process killed: see crashMode), and
// checks after recovery that the producer state is exactly what the
// batches below the recovered log end offset leave (those retention
// deleted included), that every acknowledged batch still among its
// producer's last five is recognised when retried, and that the state is
// the same after a second crash straight after recovery and after a clean
// restart.
func TestProducerCrashAtEveryBoundary(t *testing.T) {
	count := &producerCrash{t: t, fs: vfs.NewMem()}
	if err := count.run(); err != nil {
		t.Fatalf("the workload without a crash: %v", err)
	}
	total := count.fs.MutatingOps()
	if err := count.check(); err != nil {
		t.Fatalf("the workload without a crash, reopened: %v", err)
	}
	t.Logf("%d mutating operations, %d batches, segments %v", total, len(count.p.hist), modelSegmentBases(count.p.l))
	for _, mode := range []crashMode{crashPower, crashTorn, crashKill} {
		for n := range total + 1 {
			w := &producerCrash{t: t, fs: vfs.NewMem()}
			w.fs.CrashAfter(n)
			runErr := w.run()
			switch mode {
			case crashPower:
				w.fs.Crash()
			case crashTorn:
				w.fs.CrashTorn(rand.New(rand.NewPCG(uint64(n), 2)))
			case crashKill:
				w.fs.CrashAfter(1 << 62) // the process died; the file system works on
			}
			if err := w.check(); err != nil {
				t.Fatalf("crash mode %d after operation %d of %d (workload stopped with %v): %v", mode, n, total, runErr, err)
			}
		}
	}
}

var producerCrashTP = TopicPartition{Topic: "idem", Partition: 0}

type producerCrash struct {
	t  *testing.T
	fs *vfs.MemFS
	p  *producerLog // nil until the log is created
	// durable: every batch wholly below it was acknowledged (a Flush or
	// Close covered it) and must survive.
	durable int64
	i       int
}

func (w *producerCrash) open() (*Manager, error) {
	return OpenManager(w.fs, "/data", producerConfig(), ManagerOptions{Logger: quietLogger, NoBackground: true})
}

func (w *producerCrash) appendN(n int) error {
	for range n {
		w.i++
		pid := int64(1 + w.i%2)
		epoch, seq := w.p.next(pid)
		if _, err := w.p.tryAppend(producerBatch(w.t, pid, epoch, seq, 1+w.i%3, producerTs+int64(w.i))); err != nil {
			return err
		}
	}
	return nil
}

func (w *producerCrash) flush() error {
	leo := w.p.l.LogEndOffset()
	if err := w.p.l.Flush(leo); err != nil {
		return err
	}
	w.durable = leo
	return nil
}

func (w *producerCrash) run() error {
	m, err := w.open()
	if err != nil {
		return err
	}
	l, err := m.GetOrCreateLog(producerCrashTP, producerConfig())
	if err != nil {
		return err
	}
	w.p = newProducerLog(w.t, l)
	steps := []func() error{
		func() error { return w.appendN(8) },
		w.flush,
		m.Checkpoint,
		func() error {
			e1, s1 := w.p.next(1)
			e2, s2 := w.p.next(2)
			_, err := w.p.tryAppend(bytes.Join([][]byte{
				producerBatch(w.t, 1, e1, s1, 2, producerTs), producerBatch(w.t, 2, e2, s2, 1, producerTs),
			}, nil))
			return err
		},
		func() error { return w.appendN(4) },
		w.flush,
		m.Checkpoint,
		func() error {
			bases := modelSegmentBases(l)
			cut := bases[len(bases)-2] + 2
			// Batches from the one holding cut go: a crash midway may
			// take them, acknowledged or not.
			for _, h := range w.p.hist {
				if h.LastOffset() >= cut {
					w.durable = min(w.durable, h.BaseOffset)
					break
				}
			}
			if err := l.TruncateTo(cut); err != nil {
				return err
			}
			w.p.truncated()
			w.durable = min(w.durable, l.LogEndOffset())
			return nil
		},
		func() error {
			epoch, _ := w.p.next(2)
			_, err := w.p.tryAppend(producerBatch(w.t, 2, epoch+1, 0, 1, producerTs))
			return err
		},
		func() error { return w.appendN(4) },
		w.flush,
		m.Checkpoint,
		func() error {
			l.SetHighWatermark(l.LogEndOffset())
			_, err := l.DeleteRecordsBefore(modelSegmentBases(l)[1] + 1)
			return err
		},
		func() error { _, err := l.ApplyRetention(); return err },
		func() error { return w.appendN(3) },
		w.flush,
		func() error { return w.appendN(2) },
		func() error {
			if err := m.Close(); err != nil {
				return err
			}
			w.durable = l.LogEndOffset()
			return nil
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// check reopens after the crash and checks the producer state.
func (w *producerCrash) check() error {
	state := func(m *Manager) (map[int64]producerstate.Entry, int64, error) {
		l, ok := m.Log(producerCrashTP)
		if !ok {
			if w.durable > 0 {
				return nil, 0, errors.New("the log is gone")
			}
			return nil, -1, nil
		}
		return l.ActiveProducers(), l.LogEndOffset(), nil
	}
	m, err := w.open()
	if err != nil {
		return err
	}
	got, leo, err := state(m)
	if err != nil || leo < 0 {
		m.Close()
		return err
	}
	if leo < w.durable {
		return fmt.Errorf("log end offset %d below the acknowledged %d", leo, w.durable)
	}
	var hist []histBatch
	if w.p == nil {
		w.p = newProducerLog(w.t, nil)
	}
	for _, h := range w.p.hist {
		if h.BaseOffset < leo {
			hist = append(hist, h)
		}
	}
	want := producerExpect(hist)
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("producer state after recovery (log end offset %d)\n%+v\nwant\n%+v", leo, got, want)
	}
	// A second crash straight after recovery, then a clean restart.
	w.fs.Crash()
	if m, err = w.open(); err != nil {
		return err
	}
	if again, _, err := state(m); err != nil || !reflect.DeepEqual(again, want) {
		return fmt.Errorf("second recovery: %v\n%+v", err, again)
	}
	if err := m.Close(); err != nil {
		return err
	}
	if m, err = w.open(); err != nil {
		return err
	}
	defer m.Close()
	if again, _, err := state(m); err != nil || !reflect.DeepEqual(again, want) {
		return fmt.Errorf("clean restart after recovery: %v\n%+v", err, again)
	}
	l, _ := m.Log(producerCrashTP)
	for _, h := range hist {
		if h.LastOffset() >= w.durable || want[h.ProducerID].Batches[0].FirstOffset > h.BaseOffset {
			continue
		}
		info, err := l.Append(bytes.Clone(w.p.sent[h.BaseOffset]), 0)
		if err != nil || !info.Duplicate || info.FirstOffset != h.BaseOffset || info.LastOffset != h.LastOffset() {
			return fmt.Errorf("retry of acknowledged batch %d..%d: %+v %v", h.BaseOffset, h.LastOffset(), info, err)
		}
	}
	return nil
}

func TestManagerReservedDirs(t *testing.T) {
	fsys := vfs.NewMem()
	for _, d := range []string{"/data/metadata/snapshots", "/data/raft-delete", "/data/stray"} {
		if err := fsys.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFileForTest(fsys, "/data/metadata/raft.db", []byte("raft")); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	m, err := OpenManager(fsys, "/data", DefaultConfig(), ManagerOptions{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), NoBackground: true,
		ReservedDirs: []string{"metadata", "raft-delete"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n := len(m.Logs()); n != 0 {
		t.Fatalf("%d logs opened", n)
	}
	out := logs.String()
	if strings.Contains(out, "metadata") || strings.Contains(out, "raft-delete") {
		t.Fatalf("a reserved directory was warned about:\n%s", out)
	}
	if !strings.Contains(out, "stray") {
		t.Fatalf("the unreserved non-log directory was not warned about:\n%s", out)
	}
	// Reserved directories are never touched, even one whose name looks
	// like an interrupted log deletion.
	for _, p := range []string{"/data/metadata/raft.db", "/data/metadata/snapshots", "/data/raft-delete"} {
		if _, err := fsys.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
