package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/producerstate"
	"github.com/fjordmq/fjord/internal/vfs"
)

// The model-based test of the partition log (acceptance point 1 of the
// storage issue), and the model pieces the crash tests share.
//
// The model of a log is deliberately dumb: the list of batches the segment
// files must hold, byte for byte, in offset order, plus the four offsets
// (log start, high watermark, log end, recovery point). Everything the
// engine does is checked against it: reads batch by batch, timestamp
// lookups, truncation, retention, compaction, and what a crash and
// recovery leave behind. The model never looks at the engine's indexes;
// the segment boundaries it does take from the engine (for Read, which
// serves from one segment at a time, and for retention, which deletes whole
// segments) are checked against the files on disk first.

// modelRecord is one record of a batch the model holds.
type modelRecord struct {
	offset    int64
	timestamp int64
	key       []byte
	value     []byte // nil: a tombstone
	// batchMaxTimestamp is its batch's header max timestamp, which is
	// what compaction measures delete.retention.ms against.
	batchMaxTimestamp int64
	// producerID, transactional and control are its batch's: a
	// transaction marker is a control batch's record.
	producerID             int64
	transactional, control bool
}

// modelBatch is one batch as the segment files must hold it.
type modelBatch struct {
	base, last int64
	data       []byte
	records    []modelRecord
}

// modelParseBatch checks that data is exactly one valid batch (records
// and compressed bodies included: Records walks them) and decodes it.
func modelParseBatch(data []byte) (modelBatch, error) {
	h, err := record.Validate(data, record.ValidateOptions{})
	if err != nil {
		return modelBatch{}, err
	}
	recs, err := record.Records(data)
	if err != nil {
		return modelBatch{}, err
	}
	b := modelBatch{base: h.BaseOffset, last: h.LastOffset(), data: bytes.Clone(data)}
	for _, r := range recs {
		b.records = append(b.records, modelRecord{
			offset: r.Offset, timestamp: r.Timestamp, key: r.Key, value: r.Value,
			batchMaxTimestamp: h.MaxTimestamp,
			producerID:        h.ProducerID, transactional: h.IsTransactional(), control: h.IsControl(),
		})
	}
	return b, nil
}

func (b modelBatch) String() string {
	return fmt.Sprintf("[%d..%d] %d records %d bytes", b.base, b.last, len(b.records), len(b.data))
}

// modelParsed remembers batches already parsed, by their bytes: the same
// bytes are the same valid batch, and decompressing every batch of the
// log at every check is most of what the checks would cost.
type modelParsed map[string]modelBatch

func (c modelParsed) parse(data []byte) (modelBatch, error) {
	if b, ok := c[string(data)]; ok {
		return b, nil
	}
	b, err := modelParseBatch(data)
	if err == nil && c != nil {
		if len(c) > 1<<14 {
			clear(c)
		}
		c[string(b.data)] = b
	}
	return b, err
}

// modelSegment is one segment file as read straight from the file system.
type modelSegment struct {
	base    int64
	size    int64
	batches []modelBatch
}

// modelDumpFiles reads every segment file in dir directly from fsys (not
// through a Log) and checks the layout rules of segment.go on the way:
// every batch is whole and valid, offsets increase strictly across the
// whole log, and every batch of a segment lies at or above its base and
// below the next segment's base.
func modelDumpFiles(fsys vfs.FS, dir string) ([]modelSegment, error) {
	return modelParsed(nil).dumpFiles(fsys, dir)
}

func (c modelParsed) dumpFiles(fsys vfs.FS, dir string) ([]modelSegment, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var segs []modelSegment
	for _, n := range names {
		base, ok := parseSegmentName(n, ".log")
		if !ok {
			continue
		}
		data, err := readWhole(fsys, filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		s := modelSegment{base: base, size: int64(len(data))}
		for pos := 0; pos < len(data); {
			h, err := record.ParseHeader(data[pos:])
			if err != nil {
				return nil, fmt.Errorf("segment %d at %d: %w", base, pos, err)
			}
			if h.Size() > len(data)-pos {
				return nil, fmt.Errorf("segment %d at %d: batch of %d bytes runs past the end (%d)", base, pos, h.Size(), len(data))
			}
			b, err := c.parse(data[pos : pos+h.Size()])
			if err != nil {
				return nil, fmt.Errorf("segment %d at %d: %w", base, pos, err)
			}
			s.batches = append(s.batches, b)
			pos += h.Size()
		}
		segs = append(segs, s)
	}
	prev := int64(-1)
	for i, s := range segs {
		for _, b := range s.batches {
			if b.base < s.base || b.base <= prev {
				return nil, fmt.Errorf("segment %d: batch %v out of order (previous last offset %d)", s.base, b, prev)
			}
			if i+1 < len(segs) && b.last >= segs[i+1].base {
				return nil, fmt.Errorf("segment %d: batch %v reaches the next segment %d", s.base, b, segs[i+1].base)
			}
			prev = b.last
		}
	}
	return segs, nil
}

func modelFlatten(segs []modelSegment) []modelBatch {
	var out []modelBatch
	for _, s := range segs {
		out = append(out, s.batches...)
	}
	return out
}

// modelSurvival says what may be left of a log after a crash (or after a
// compaction pass): a run of ref's batches in order, each byte-identical
// or, where removable allows, with some records compacted away.
type modelSurvival struct {
	ref []modelBatch
	// required: every record of ref below it must survive, unless
	// removable says compaction may have taken it.
	required int64
	// dropFront: this many leading batches of ref may be gone (a retention
	// pass that was cut short deletes a prefix of the segments).
	dropFront int
	// removable, when set, says which records compaction may have removed.
	removable func(modelRecord) bool
	// refLEO is the log end offset if every batch of ref survived; lowLEO
	// the lowest log end offset that is right if none did (the base of the
	// first segment).
	refLEO, lowLEO int64
}

// check compares the batches that survived (got, in order) and the log
// end offset the reopened log reports with what s allows. The log may end
// anywhere between the end of its last surviving batch and the base of the
// first lost one: never past a lost batch, which would leave a hole that a
// replica would count as data it has.
func (s modelSurvival) check(got []modelBatch, leo int64) error {
	i := 0
	lost := -1 // index in ref of the first batch that did not survive
	lastEnd := s.lowLEO
	for j, rb := range s.ref {
		if i < len(got) && got[i].base == rb.base {
			if lost >= 0 {
				return fmt.Errorf("batch %v survived but batch %v before it did not: a hole", got[i], s.ref[lost])
			}
			if err := s.sameBatch(got[i], rb); err != nil {
				return err
			}
			lastEnd = rb.last + 1
			i++
			continue
		}
		if i == 0 && lost < 0 && j < s.dropFront {
			continue // deleted by retention
		}
		if s.allRemovable(rb) {
			continue // compacted away whole
		}
		for _, r := range rb.records {
			if r.offset < s.required && (s.removable == nil || !s.removable(r)) {
				return fmt.Errorf("durable record %d (batch %v) lost", r.offset, rb)
			}
		}
		if lost < 0 {
			lost = j
		}
	}
	if i < len(got) {
		return fmt.Errorf("batch %v survived that was never appended here (or not in this order)", got[i])
	}
	hi := s.refLEO
	if lost >= 0 {
		hi = s.ref[lost].base
	}
	if leo < lastEnd || leo > hi {
		return fmt.Errorf("log end offset %d after recovery; surviving data ends at %d and the first lost batch starts at %d", leo, lastEnd, hi)
	}
	if s.removable != nil {
		// Below required, what did not survive was removable: the
		// newest record of a key there may be a tombstone compaction
		// removed with the batches after the last surviving one.
		return s.checkNewest(got, max(lastEnd, min(s.required, s.refLEO)))
	}
	return nil
}

// sameBatch checks one surviving batch against the batch appended there.
func (s modelSurvival) sameBatch(got, ref modelBatch) error {
	if bytes.Equal(got.data, ref.data) {
		return nil
	}
	if s.removable == nil {
		return fmt.Errorf("batch at %d changed: got %v, appended %v", ref.base, got, ref)
	}
	if got.last != ref.last {
		return fmt.Errorf("compacted batch at %d changed its last offset: %d, was %d", ref.base, got.last, ref.last)
	}
	if len(got.records) == 0 {
		// Only a producer's last batch is kept empty, for its sequence
		// numbers; the records it held must still all be removable.
		if h, err := record.ParseHeader(ref.data); err != nil || !h.HasProducerID() {
			return fmt.Errorf("compaction left an empty batch at %d (no producer id to keep)", ref.base)
		}
	}
	k := 0
	for _, r := range ref.records {
		if k < len(got.records) && got.records[k].offset == r.offset {
			g := got.records[k]
			if g.timestamp != r.timestamp || !bytes.Equal(g.key, r.key) || !bytes.Equal(g.value, r.value) || (g.value == nil) != (r.value == nil) {
				return fmt.Errorf("compaction changed record %d", r.offset)
			}
			k++
			continue
		}
		if !s.removable(r) {
			return fmt.Errorf("compaction removed record %d (key %q) that it must keep", r.offset, r.key)
		}
	}
	if k < len(got.records) {
		return fmt.Errorf("compacted batch at %d holds record %d that was not appended there", ref.base, got.records[k].offset)
	}
	return nil
}

func (s modelSurvival) allRemovable(b modelBatch) bool {
	if s.removable == nil {
		return false
	}
	for _, r := range b.records {
		if !s.removable(r) {
			return false
		}
	}
	return true
}

// checkNewest is compaction's safety rule over what survived below end:
// for every key, the newest record appended there survives, unless it is a
// tombstone compaction was allowed to drop, and then no older record of
// that key survives either (a deleted key does not come back). The records
// of transactions are left to removable: markers share their keys, and an
// aborted transaction's records go whatever their keys.
func (s modelSurvival) checkNewest(got []modelBatch, end int64) error {
	newest := map[string]modelRecord{}
	for j, b := range s.ref {
		if j < s.dropFront && len(got) > 0 && b.base < got[0].base {
			continue
		}
		for _, r := range b.records {
			if r.offset < end && !r.transactional {
				newest[string(r.key)] = r
			}
		}
	}
	present := map[int64]bool{}
	byKey := map[string]int64{}
	for _, b := range got {
		for _, r := range b.records {
			present[r.offset] = true
			byKey[string(r.key)] = r.offset
		}
	}
	for k, r := range newest {
		if present[r.offset] {
			continue
		}
		if r.value != nil {
			return fmt.Errorf("the newest value of key %q (offset %d) is gone", k, r.offset)
		}
		if o, ok := byKey[k]; ok {
			return fmt.Errorf("key %q was deleted at %d and its tombstone removed, but its record at %d survives", k, r.offset, o)
		}
	}
	return nil
}

// modelRemovable returns what a compaction pass below bound may remove
// from a log holding batches (modelCleanRuleOf).
func modelRemovable(batches []modelBatch, bound, horizon int64) func(modelRecord) bool {
	return modelCleanRuleOf(batches, bound, horizon).may
}

// modelCleanRule is what a compaction pass does to each record: may says
// it may remove it, must that it must.
type modelCleanRule struct {
	may, must func(modelRecord) bool
}

// modelCleanRuleOf returns compaction's rule (cleaner.go) for a pass below
// bound, at horizon, over a log holding batches. Below bound, and nowhere
// else:
//
//   - a record goes when a newer record of its key is also below bound, and
//     a tombstone once its batch is older than the horizon (records of
//     markers and of aborted transactions aside);
//   - the records of an aborted transaction go: they must when its abort
//     marker is below bound too, and may when the marker is further on (the
//     pass notes aborted transactions over the segments below the last
//     stable offset before an open transaction trims its bound);
//   - a marker goes once its batch is older than the horizon, unless a
//     transactional batch of its producer kept a record in the pass since
//     the producer's previous marker (a committed transaction's records
//     still there keep its marker).
func modelCleanRuleOf(batches []modelBatch, bound, horizon int64) modelCleanRule {
	// The aborted transactions' records, with their markers' offsets.
	abortedBy := map[int64]int64{}
	open := map[int64][]modelRecord{}
	for _, b := range batches {
		for _, r := range b.records {
			switch {
			case !r.transactional:
			case r.control:
				if len(r.key) == 4 && binary.BigEndian.Uint16(r.key[2:]) == 0 {
					for _, a := range open[r.producerID] {
						abortedBy[a.offset] = r.offset
					}
				}
				delete(open, r.producerID)
			default:
				open[r.producerID] = append(open[r.producerID], r)
			}
		}
	}
	latest := map[string]int64{}
	for _, b := range batches {
		for _, r := range b.records {
			if _, aborted := abortedBy[r.offset]; r.offset < bound && !r.control && !aborted {
				latest[string(r.key)] = r.offset
			}
		}
	}
	byKey := func(r modelRecord) bool {
		return latest[string(r.key)] > r.offset || r.value == nil && r.batchMaxTimestamp < horizon
	}
	markerGoes := map[int64]bool{}
	retained := map[int64]bool{}
	for _, b := range batches {
		for _, r := range b.records {
			if r.offset >= bound || !r.transactional {
				continue
			}
			if r.control {
				markerGoes[r.offset] = !retained[r.producerID] && r.batchMaxTimestamp < horizon
				delete(retained, r.producerID)
			} else if _, aborted := abortedBy[r.offset]; !aborted && !byKey(r) {
				retained[r.producerID] = true
			}
		}
	}
	rule := func(r modelRecord, must bool) bool {
		if r.offset >= bound {
			return false
		}
		if r.control {
			return markerGoes[r.offset]
		}
		if marker, aborted := abortedBy[r.offset]; aborted {
			return !must || marker < bound
		}
		return byKey(r)
	}
	return modelCleanRule{
		may:  func(r modelRecord) bool { return rule(r, false) },
		must: func(r modelRecord) bool { return rule(r, true) },
	}
}

// modelExpectRead returns what Read(offset, maxBytes, maxOffset) must
// return from batches, given the log end offset and the segment bases:
// whole batches from the one holding offset, within one segment, as many
// as fit in maxBytes (but always the first), none at or past maxOffset.
// The caller handles offsets out of range.
func modelExpectRead(batches []modelBatch, segBases []int64, offset int64, maxBytes int, maxOffset, leo int64) []byte {
	mo := min(maxOffset, leo)
	if offset >= mo {
		return nil
	}
	j := sort.Search(len(batches), func(i int) bool { return batches[i].last >= offset })
	if j == len(batches) || batches[j].last >= mo {
		return nil
	}
	segEnd := int64(1<<63 - 1)
	if k := sort.Search(len(segBases), func(i int) bool { return segBases[i] > batches[j].base }); k < len(segBases) {
		segEnd = segBases[k]
	}
	out := append([]byte(nil), batches[j].data...)
	for k := j + 1; k < len(batches); k++ {
		b := batches[k]
		if b.base >= segEnd || b.last >= mo || len(out)+len(b.data) > maxBytes {
			break
		}
		out = append(out, b.data...)
	}
	return out
}

// modelExpectOffsetForTimestamp is ListOffsets by timestamp: the first
// record at or after start whose timestamp is at least ts.
func modelExpectOffsetForTimestamp(batches []modelBatch, start, ts int64) (int64, int64, bool) {
	for _, b := range batches {
		if b.last < start {
			continue
		}
		for _, r := range b.records {
			if r.offset >= start && r.timestamp >= ts {
				return r.offset, r.timestamp, true
			}
		}
	}
	return 0, 0, false
}

func modelSegmentBases(l *Log) []int64 {
	var out []int64
	for _, s := range *l.segments.Load() {
		out = append(out, s.baseOffset)
	}
	return out
}

// modelCheckAllReads reads the log at every batch (at its first offset and
// at a random one inside it), in every gap, at the edges of the offset
// range, and at every offset of a random window of 64 (of the whole log
// when every is set), and compares each answer with what batches say it
// must be: the indexes and the log agree exactly when these reads do. It
// also reads the whole log from its start in one pass of consumer-sized
// reads and checks the batches come back in order, each exactly once.
func modelCheckAllReads(l *Log, batches []modelBatch, rng *rand.Rand, every bool) error {
	lso, leo := l.LogStartOffset(), l.LogEndOffset()
	bases := modelSegmentBases(l)
	check := func(offset int64, maxBytes int) error {
		res, err := l.Read(offset, maxBytes, leo)
		if offset < lso || offset > leo {
			if !errors.Is(err, ErrOffsetOutOfRange) {
				return fmt.Errorf("read at %d outside [%d, %d]: err %v, want ErrOffsetOutOfRange", offset, lso, leo, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read at %d: %v", offset, err)
		}
		want := modelExpectRead(batches, bases, offset, maxBytes, leo, leo)
		if !bytes.Equal(res.Records, want) {
			return fmt.Errorf("read at %d (maxBytes %d, segments %v): got %s, want %s", offset, maxBytes, bases,
				modelDescribe(res.Records), modelDescribe(want))
		}
		return nil
	}
	probes := []int64{lso - 1, lso, leo - 1, leo, leo + 1}
	from, to := lso, leo
	if !every && leo-lso > 64 {
		from = lso + rng.Int64N(leo-lso-64)
		to = from + 64
	}
	for o := from; o < to; o++ {
		probes = append(probes, o)
	}
	prevEnd := int64(-1)
	for _, b := range batches {
		if b.base > prevEnd+1 && prevEnd >= 0 {
			probes = append(probes, prevEnd+1, b.base-1) // a compaction gap
		}
		probes = append(probes, b.base, b.base+rng.Int64N(b.last-b.base+1))
		prevEnd = b.last
	}
	for _, o := range probes {
		if o < 0 {
			continue
		}
		if err := check(o, 1+rng.IntN(4096)); err != nil {
			return err
		}
	}
	// One consumer pass from the log start offset.
	pos := lso
	var got []byte
	for pos < leo {
		res, err := l.Read(pos, 1+rng.IntN(64<<10), leo)
		if err != nil {
			return fmt.Errorf("sequential read at %d: %v", pos, err)
		}
		if len(res.Records) == 0 {
			break
		}
		got = append(got, res.Records...)
		next := pos
		for b := res.Records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil {
				return fmt.Errorf("sequential read at %d: %v", pos, err)
			}
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
		pos = next
	}
	var want []byte
	for _, b := range batches {
		if b.last >= lso {
			want = append(want, b.data...)
		}
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("reading the whole log from %d: got %s, want %s", lso, modelDescribe(got), modelDescribe(want))
	}
	return nil
}

// modelCheckEpochs checks the leader-epoch cache against the batches:
// no epoch starts past the log end offset (at it only when the log start
// offset moved there and took the covering epoch along), and the cache
// names, for every batch from the log start offset on, the epoch stamped
// in it (KIP-101: a follower finds where it diverged by these answers).
// Offsets before the first entry have no answer, which is allowed: the log
// start offset checkpoint may trail the cache after a crash.
func modelCheckEpochs(l *Log, batches []modelBatch) error {
	lso, leo := l.LogStartOffset(), l.LogEndOffset()
	cache := l.LeaderEpochs()
	for _, e := range cache.Entries() {
		if e.StartOffset > leo || (e.StartOffset == leo && e.StartOffset != lso) {
			return fmt.Errorf("leader epoch %d starts at %d, at or past the log end offset %d (log start %d)", e.Epoch, e.StartOffset, leo, lso)
		}
	}
	for _, b := range batches {
		if b.last < lso {
			continue
		}
		h, err := record.ParseHeader(b.data)
		if err != nil {
			return err
		}
		o := max(b.base, lso)
		if e, ok := cache.EpochForOffset(o); ok && e != h.PartitionLeaderEpoch {
			return fmt.Errorf("leader epoch cache %v says epoch %d at %d, batch %v has epoch %d", cache.Entries(), e, o, b, h.PartitionLeaderEpoch)
		}
	}
	return nil
}

// modelDescribe summarizes batches for a failure message.
func modelDescribe(data []byte) string {
	var parts []string
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			parts = append(parts, fmt.Sprintf("<%d bad bytes: %v>", len(data), err))
			break
		}
		if _, err := record.Validate(data[:h.Size()], record.ValidateOptions{}); err != nil {
			parts = append(parts, fmt.Sprintf("[%d..%d INVALID: %v]", h.BaseOffset, h.LastOffset(), err))
		} else {
			parts = append(parts, fmt.Sprintf("[%d..%d]", h.BaseOffset, h.LastOffset()))
		}
		data = data[h.Size():]
	}
	if len(parts) == 0 {
		return "nothing"
	}
	if len(parts) > 12 {
		parts = append(parts[:6], append([]string{"..."}, parts[len(parts)-6:]...)...)
	}
	return strings.Join(parts, " ")
}

// TestLogModel runs thousands of random operations against a real Log on
// the strict in-memory file system and compares it with modelLog after
// every one: appends of 1-3 batches of 1-50 records (random keys from a
// small key space, values of 0-3000 bytes, tombstones, all five codecs),
// transactions of a few producers (batches, commit and abort markers, some
// bumping the producer epoch, produces the log must refuse), reads (also
// read_committed) at random offsets with random maxBytes and maxOffset,
// timestamp lookups, flushes, high watermark moves, truncation (also below
// the log start offset), DeleteRecords, retention by bytes and by time on
// a fake clock, compaction, config changes, crashes (Crash and CrashTorn)
// with recovery from the recovery point, kills (reopen without Close and
// without losing the page cache) and clean close and reopen. Segments are
// 4-64 KiB so that rolls, index lookups and multi-segment reads happen all
// the time.
//
// After every operation the offsets must equal the model's, LogStartOffset
// <= HighWatermark <= LogEndOffset and RecoveryPoint <= LogEndOffset must
// hold, a few random reads must return exactly the model's batches, and
// the last stable offset, each transactional producer's open transaction
// and the aborted transactions must be the model's (modelTxns).
// After every structural change (and every 100 operations) the segment
// files are read directly and must hold exactly the model's batches, and
// every batch and gap is read back through the indexes.
//
// The default run is 4 fixed seeds of 3000 operations. Environment:
//
//	FJORD_MODEL_SEED=n   run seed n only (a failure prints its seed)
//	FJORD_MODEL_SEEDS=n  run n seeds, chosen at random (printed)
//	FJORD_MODEL_OPS=n    operations per seed
func TestLogModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	ops := 3000
	if s := os.Getenv("FJORD_MODEL_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FJORD_MODEL_OPS=%q: want a positive number", s)
		}
		ops = n
	}
	if s := os.Getenv("FJORD_MODEL_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FJORD_MODEL_SEEDS=%q: want a positive number", s)
		}
		seeds = seeds[:0]
		for range n {
			seeds = append(seeds, rand.Uint64()>>1)
		}
		t.Logf("seeds %v", seeds)
	}
	if s := os.Getenv("FJORD_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FJORD_MODEL_SEED=%q: %v", s, err)
		}
		seeds = []uint64{seed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			r := newModelRun(t, seed)
			var segSum, batchSum int
			var sizeSum int64
			for r.step = 0; r.step < ops; r.step++ {
				r.randomOp()
				r.checkQuick()
				segSum += r.log.NumSegments()
				batchSum += len(r.m.batches)
				sizeSum += r.log.Size()
				if r.step%100 == 99 {
					r.checkFull()
				}
			}
			r.checkFull()
			r.cleanReopen()
			r.checkFull()
			t.Logf("seed %d: %d ops, final log [%d, %d) in %d segments, %d batches; on average %d segments, %d batches, %d bytes; %d idempotent producers, %d tainted by compaction; %v",
				seed, ops, r.m.lso, r.m.leo, r.log.NumSegments(), len(r.m.batches), segSum/ops, batchSum/ops, sizeSum/int64(ops),
				r.prod.nextPID, len(r.prod.tainted), r.counts)
		})
	}
}

// modelLog is the model of one Log.
type modelLog struct {
	batches []modelBatch // exactly what the segment files hold, in order
	lso     int64
	hw      int64
	leo     int64
	rp      int64
}

type modelRun struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	fs    *vfs.MemFS
	dir   string
	clock *fakeClock
	cfg   Config
	log   *Log
	m     modelLog
	epoch int32
	keys  int // size of the key space
	step  int
	// history holds the last operations, printed on failure.
	history []string
	counts  map[string]int
	parsed  modelParsed
	prod    modelProducers
	txn     modelTxns
}

func newModelRun(t *testing.T, seed uint64) *modelRun {
	r := &modelRun{
		t:      t,
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, 0x6a6f7264)),
		fs:     vfs.NewMem(),
		dir:    "/data/model-0",
		clock:  &fakeClock{ms: 1_700_000_000_000},
		counts: map[string]int{},
		parsed: modelParsed{},
		prod:   modelProducers{tainted: map[int64]bool{}, compactedAway: map[int64]bool{}, sent: map[int64][]byte{}},
		txn:    modelTxns{byOffset: map[int64]*modelTxn{}},
	}
	r.keys = []int{4, 50, 500, 5000}[r.rng.IntN(4)]
	r.cfg = r.randomConfig()
	r.log = r.open(OpenOptions{Clean: true})
	r.note("open %s", modelConfigString(r.cfg))
	return r
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d (rerun with FJORD_MODEL_SEED=%d), step %d: %s\nlast operations:\n%s\nmodel: lso=%d hw=%d leo=%d rp=%d, %d batches",
		r.seed, r.seed, r.step, fmt.Sprintf(format, args...), strings.Join(r.history, "\n"),
		r.m.lso, r.m.hw, r.m.leo, r.m.rp, len(r.m.batches))
}

func (r *modelRun) note(format string, args ...any) {
	r.history = append(r.history, fmt.Sprintf("  %5d %s   [model lso=%d hw=%d leo=%d rp=%d, %d batches]", r.step, fmt.Sprintf(format, args...),
		r.m.lso, r.m.hw, r.m.leo, r.m.rp, len(r.m.batches)))
	if len(r.history) > 30 {
		r.history = r.history[1:]
	}
}

func modelConfigString(c Config) string {
	return fmt.Sprintf("segment.bytes=%d index.interval.bytes=%d retention.ms=%d retention.bytes=%d cleanup.policy=%s delete.retention.ms=%d logAppendTime=%v segment.ms=%d",
		c.SegmentBytes, c.IndexIntervalBytes, c.RetentionMs, c.RetentionBytes, c.CleanupPolicy, c.DeleteRetentionMs, c.LogAppendTime, c.SegmentMs)
}

func (r *modelRun) randomConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(4<<10 + r.rng.IntN(12<<10))
	if r.rng.IntN(4) == 0 {
		cfg.SegmentBytes = int64(4<<10 + r.rng.IntN(60<<10))
	}
	cfg.IndexIntervalBytes = []int{0, 100, 1000, 4096}[r.rng.IntN(4)]
	cfg.RetentionMs = []int64{-1, 600_000, 3_600_000}[r.rng.IntN(3)]
	cfg.RetentionBytes = []int64{-1, -1, 256 << 10, 1 << 20}[r.rng.IntN(4)]
	cfg.CleanupPolicy = []CleanupPolicy{CleanupDelete, CleanupCompact | CleanupDelete, CleanupCompact}[r.rng.IntN(3)]
	cfg.DeleteRetentionMs = []int64{0, 10_000, 600_000}[r.rng.IntN(3)]
	cfg.LogAppendTime = r.rng.IntN(6) == 0
	cfg.SegmentMs = []int64{1 << 40, 60_000}[r.rng.IntN(2)]
	// Producers never expire here: the model keeps every one.
	cfg.ProducerIDExpirationMs = 1 << 50
	return cfg
}

func (r *modelRun) open(opts OpenOptions) *Log {
	r.t.Helper()
	opts.Now = r.clock.now
	opts.Logger = quietLogger
	l, err := Open(r.fs, r.dir, r.cfg, opts)
	if err != nil {
		r.fatalf("open (%+v): %v", opts, err)
	}
	return l
}

// randomOp runs one operation chosen at random, weighted so that appends
// and reads dominate and the log keeps a few hundred KiB.
func (r *modelRun) randomOp() {
	r.clock.advance(time.Duration(r.rng.IntN(500)) * time.Millisecond)
	type op struct {
		name   string
		weight int
		fn     func()
	}
	ops := []op{
		{"append", 36, r.opAppend},
		{"txn", 10, r.opTxn},
		{"read", 20, r.opRead},
		{"offsetForTimestamp", 5, r.opOffsetForTimestamp},
		{"flush", 8, r.opFlush},
		{"setHighWatermark", 6, r.opSetHighWatermark},
		{"truncate", 3, r.opTruncate},
		{"deleteRecords", 3, r.opDeleteRecords},
		{"retention", 4, r.opRetention},
		{"compact", 4, r.opCompact},
		{"crash", 2, r.opCrash},
		{"cleanReopen", 2, r.cleanReopen},
		{"kill", 1, r.opKill},
		{"setConfig", 1, r.opSetConfig},
		{"clock", 2, r.opClock},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := r.rng.IntN(total)
	for _, o := range ops {
		if n < o.weight {
			r.counts[o.name]++
			o.fn()
			return
		}
		n -= o.weight
	}
}

// checkQuick compares the offsets and a few reads with the model.
func (r *modelRun) checkQuick() {
	r.t.Helper()
	l, m := r.log, &r.m
	got := [4]int64{l.LogStartOffset(), l.HighWatermark(), l.LogEndOffset(), l.RecoveryPoint()}
	want := [4]int64{m.lso, m.hw, m.leo, m.rp}
	if got != want {
		r.fatalf("offsets (lso, hw, leo, rp) = %v, model %v", got, want)
	}
	if !(m.lso <= m.hw && m.hw <= m.leo && m.rp <= m.leo) {
		r.fatalf("invariant broken: lso=%d hw=%d leo=%d rp=%d", m.lso, m.hw, m.leo, m.rp)
	}
	for range 2 {
		r.checkRead(r.randomOffset(), r.randomMaxBytes(), m.leo)
	}
	r.txn.check(r)
}

// checkFull compares the segment files, and every batch read back through
// the log, with the model.
func (r *modelRun) checkFull() {
	r.t.Helper()
	segs, err := r.parsed.dumpFiles(r.fs, r.dir)
	if err != nil {
		r.fatalf("segment files: %v", err)
	}
	got := modelFlatten(segs)
	if len(got) != len(r.m.batches) {
		r.fatalf("segment files hold %d batches, model %d", len(got), len(r.m.batches))
	}
	for i := range got {
		if !bytes.Equal(got[i].data, r.m.batches[i].data) {
			r.fatalf("batch %d in the files is %v, model %v", i, got[i], r.m.batches[i])
		}
	}
	bases := modelSegmentBases(r.log)
	if len(bases) != len(segs) {
		r.fatalf("log has segments %v, files %d", bases, len(segs))
	}
	for i, s := range segs {
		ls := (*r.log.segments.Load())[i]
		if s.base != bases[i] || s.size != ls.size.Load() {
			r.fatalf("segment %d: file base %d size %d, log base %d size %d", i, s.base, s.size, bases[i], ls.size.Load())
		}
	}
	if err := modelCheckAllReads(r.log, r.m.batches, r.rng, false); err != nil {
		r.fatalf("%v", err)
	}
	if err := modelCheckEpochs(r.log, r.m.batches); err != nil {
		r.fatalf("%v", err)
	}
	r.prod.check(r)
	for range 3 {
		r.opOffsetForTimestamp()
	}
}

func (r *modelRun) randomOffset() int64 {
	m := &r.m
	switch r.rng.IntN(10) {
	case 0:
		return max(m.lso-1-r.rng.Int64N(3), 0)
	case 1:
		return m.leo + r.rng.Int64N(3)
	case 2:
		return m.lso
	}
	return m.lso + r.rng.Int64N(m.leo-m.lso+1)
}

func (r *modelRun) randomMaxBytes() int {
	return []int{0, 1, 100, 2000, 20_000, 1 << 20}[r.rng.IntN(6)]
}

func (r *modelRun) checkRead(offset int64, maxBytes int, maxOffset int64) {
	r.t.Helper()
	m := &r.m
	res, err := r.log.Read(offset, maxBytes, maxOffset)
	if res.LogStartOffset != m.lso || res.LogEndOffset != m.leo || res.HighWatermark != m.hw {
		r.fatalf("read at %d reports lso=%d leo=%d hw=%d", offset, res.LogStartOffset, res.LogEndOffset, res.HighWatermark)
	}
	if offset < m.lso || offset > m.leo {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("read at %d outside [%d, %d]: err %v, want ErrOffsetOutOfRange", offset, m.lso, m.leo, err)
		}
		return
	}
	if err != nil {
		r.fatalf("read(%d, %d, %d): %v", offset, maxBytes, maxOffset, err)
	}
	want := modelExpectRead(m.batches, modelSegmentBases(r.log), offset, maxBytes, maxOffset, m.leo)
	if !bytes.Equal(res.Records, want) {
		r.fatalf("read(%d, %d, %d) with segments %v: got %s, want %s", offset, maxBytes, maxOffset,
			modelSegmentBases(r.log), modelDescribe(res.Records), modelDescribe(want))
	}
}

func (r *modelRun) opRead() {
	maxOffset := r.m.leo
	switch r.rng.IntN(3) {
	case 0:
		maxOffset = r.m.hw
	case 1:
		maxOffset = r.m.lso + r.rng.Int64N(r.m.leo-r.m.lso+3)
	}
	offset, maxBytes := r.randomOffset(), r.randomMaxBytes()
	if r.rng.IntN(3) == 0 {
		r.note("readCommitted(%d, %d, %d)", offset, maxBytes, maxOffset)
		r.checkReadCommitted(offset, maxBytes, maxOffset)
		return
	}
	r.note("read(%d, %d, %d)", offset, maxBytes, maxOffset)
	r.checkRead(offset, maxBytes, maxOffset)
}

// modelValueSize is skewed small: most records are small, a few large
// enough to fill a segment with a handful of batches.
func (r *modelRun) modelValueSize() int {
	switch n := r.rng.IntN(100); {
	case n < 60:
		return r.rng.IntN(64)
	case n < 95:
		return r.rng.IntN(600)
	}
	return r.rng.IntN(3001)
}

// buildBatch makes a client batch and the records it must hold once
// appended (offsets relative to the batch).
func (r *modelRun) buildBatch() ([]byte, []modelRecord) {
	opts := record.DefaultBatchOptions()
	opts.Codec = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}[r.rng.IntN(5)]
	n := 1 + r.rng.IntN(8)
	if r.rng.IntN(5) == 0 {
		n = 1 + r.rng.IntN(50)
	}
	own := false // keys of the producer's own, never superseded
	if r.rng.IntN(3) == 0 {
		own = r.prod.pick(r, &opts, n)
	}
	b := record.NewBuilder(opts)
	var recs []modelRecord
	for i := range n {
		key := []byte(fmt.Sprintf("key-%03d", r.rng.IntN(r.keys)))
		if own {
			key = []byte(fmt.Sprintf("p%d-%d-%d", opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence+int32(i)))
		}
		var value []byte
		if r.rng.IntN(8) != 0 || own {
			value = make([]byte, r.modelValueSize())
			if r.rng.IntN(2) == 0 {
				for j := range value {
					value[j] = byte(r.rng.Uint32())
				}
			} else {
				for j := range value {
					value[j] = byte('a' + (i+j)%7)
				}
			}
		}
		ts := r.clock.ms - int64(r.rng.IntN(20_000))
		b.Add(key, value, nil, ts)
		recs = append(recs, modelRecord{offset: int64(i), timestamp: ts, key: key, value: value})
	}
	data, err := b.Build()
	if err != nil {
		r.fatalf("build: %v", err)
	}
	return data, recs
}

func (r *modelRun) opAppend() {
	nb := 1
	if r.rng.IntN(6) == 0 {
		nb = 2 + r.rng.IntN(2)
	}
	if r.rng.IntN(40) == 0 {
		r.epoch++
	}
	if r.rng.IntN(12) == 0 && r.prod.retry(r) {
		return
	}
	r.prod.pending = r.prod.pending[:0]
	var data []byte
	var want [][]modelRecord
	tooLarge := false
	for range nb {
		b, recs := r.buildBatch()
		if int64(len(b)) > r.cfg.SegmentBytes {
			tooLarge = true
		}
		data = append(data, b...)
		want = append(want, recs)
	}
	r.note("append %d batches, %d bytes, epoch %d", nb, len(data), r.epoch)
	orig := bytes.Clone(data)
	info, err := r.log.Append(data, r.epoch)
	if tooLarge {
		if !errors.Is(err, ErrBatchTooLarge) {
			r.fatalf("append of a batch larger than segment.bytes %d: err %v", r.cfg.SegmentBytes, err)
		}
		return
	}
	if err != nil {
		r.fatalf("append: %v", err)
	}
	m := &r.m
	next := m.leo
	var added []modelBatch
	for pos, i := 0, 0; pos < len(data); i++ {
		h, err := record.ParseHeader(data[pos:])
		if err != nil {
			r.fatalf("appended data no longer parses: %v", err)
		}
		b, err := r.parsed.parse(data[pos : pos+h.Size()])
		if err != nil {
			r.fatalf("append left an invalid batch: %v", err)
		}
		if b.base != next || h.PartitionLeaderEpoch != r.epoch || len(b.records) != len(want[i]) {
			r.fatalf("appended batch %v, epoch %d: want base %d, epoch %d, %d records", b, h.PartitionLeaderEpoch, next, r.epoch, len(want[i]))
		}
		for k, rec := range b.records {
			w := want[i][k]
			ts := w.timestamp
			if r.cfg.LogAppendTime {
				ts = info.LogAppendTime
			}
			if rec.offset != next+int64(k) || rec.timestamp != ts || !bytes.Equal(rec.key, w.key) ||
				!bytes.Equal(rec.value, w.value) || (rec.value == nil) != (w.value == nil) {
				r.fatalf("appended record %d differs from what was produced", rec.offset)
			}
		}
		added = append(added, b)
		next = b.last + 1
		pos += h.Size()
	}
	if info.FirstOffset != m.leo || info.LastOffset != next-1 || info.NumBatches != nb {
		r.fatalf("append info %+v, want first %d last %d batches %d", info, m.leo, next-1, nb)
	}
	m.batches = append(m.batches, added...)
	m.leo = next
	r.prod.appended(data, orig)
	r.txn.appended(m.hw)
}

func (r *modelRun) opOffsetForTimestamp() {
	var ts int64
	switch r.rng.IntN(4) {
	case 0:
		ts = r.clock.ms - int64(r.rng.IntN(200_000))
	case 1:
		ts = r.clock.ms + 1
	default:
		if len(r.m.batches) > 0 {
			b := r.m.batches[r.rng.IntN(len(r.m.batches))]
			if len(b.records) > 0 {
				ts = b.records[r.rng.IntN(len(b.records))].timestamp + int64(r.rng.IntN(3)) - 1
			}
		}
	}
	o, gotTs, found, err := r.log.OffsetForTimestamp(ts)
	if err != nil {
		r.fatalf("offsetForTimestamp(%d): %v", ts, err)
	}
	wo, wts, wfound := modelExpectOffsetForTimestamp(r.m.batches, r.m.lso, ts)
	if o != wo || gotTs != wts || found != wfound {
		r.fatalf("offsetForTimestamp(%d) = (%d, %d, %v), model (%d, %d, %v)", ts, o, gotTs, found, wo, wts, wfound)
	}
}

func (r *modelRun) opFlush() {
	upTo := r.rng.Int64N(r.m.leo + 1)
	if r.rng.IntN(2) == 0 {
		upTo = r.m.leo
	}
	r.note("flush(%d)", upTo)
	if err := r.log.Flush(upTo); err != nil {
		r.fatalf("flush(%d): %v", upTo, err)
	}
	if r.m.rp < upTo {
		r.m.rp = r.m.leo
	}
}

func (r *modelRun) opSetHighWatermark() {
	m := &r.m
	hw := m.lso + r.rng.Int64N(m.leo-m.lso+1)
	switch r.rng.IntN(6) {
	case 0:
		hw = m.leo + 5 // clamped
	case 1:
		hw = m.lso - 5 // clamped
	case 2, 3:
		hw = m.leo
	}
	r.note("setHighWatermark(%d)", hw)
	r.log.SetHighWatermark(hw)
	m.hw = min(max(hw, m.lso), m.leo)
}

func (r *modelRun) opTruncate() {
	m := &r.m
	// Mostly what a follower does: drop the last few batches.
	offset := m.leo - r.rng.Int64N(min(m.leo-m.lso, 15)+1)
	switch r.rng.IntN(40) {
	case 0:
		offset = r.rng.Int64N(m.lso + 1) // at or below the log start offset: start over
	case 1, 2, 3:
		offset = m.leo + r.rng.Int64N(3) // nothing to do
	case 4:
		offset = m.lso + r.rng.Int64N(m.leo-m.lso+1)
	}
	r.note("truncateTo(%d)", offset)
	bases := modelSegmentBases(r.log)
	firstBase := bases[0]
	if err := r.log.TruncateTo(offset); err != nil {
		r.fatalf("truncateTo(%d): %v", offset, err)
	}
	switch {
	case offset >= m.leo:
	case offset <= m.lso || offset < firstBase:
		// Nothing is left below offset: the log starts over there.
		m.batches = nil
		m.lso, m.hw, m.leo, m.rp = offset, offset, offset, offset
		r.prod.clear()
		r.txn.clear()
	default:
		// Batches at or past offset go, a straddling one whole; the log
		// then ends where the data left in the last kept segment (the one
		// holding offset) ends, or at its base if none is left.
		j := sort.Search(len(m.batches), func(i int) bool { return m.batches[i].last >= offset })
		k := sort.Search(len(bases), func(i int) bool { return bases[i] >= offset }) - 1
		end := bases[max(k, 0)]
		if j > 0 && m.batches[j-1].base >= end {
			end = m.batches[j-1].last + 1
		}
		m.batches = m.batches[:j]
		m.leo = end
		r.prod.truncate(end, modelSegmentBases(r.log)[0])
		r.txn.rebuilt(end, modelSegmentBases(r.log), r.prod.markersCompacted)
		m.hw = min(m.hw, end)
		m.rp = min(m.rp, end)
		m.lso = min(m.lso, end)
	}
	r.checkFull()
}

func (r *modelRun) opDeleteRecords() {
	m := &r.m
	offset := m.lso + r.rng.Int64N(min(m.hw-m.lso, 100)+1)
	if r.rng.IntN(10) == 0 {
		offset = m.lso + r.rng.Int64N(m.hw-m.lso+1)
	}
	if r.rng.IntN(8) == 0 {
		offset = m.hw + 1 + r.rng.Int64N(3)
	}
	r.note("deleteRecordsBefore(%d)", offset)
	got, err := r.log.DeleteRecordsBefore(offset)
	if offset > m.hw {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("deleteRecordsBefore(%d) above hw %d: err %v", offset, m.hw, err)
		}
		return
	}
	if err != nil {
		r.fatalf("deleteRecordsBefore(%d): %v", offset, err)
	}
	m.lso = max(m.lso, offset)
	if got != m.lso {
		r.fatalf("deleteRecordsBefore(%d) = %d, want %d", offset, got, m.lso)
	}
}

// modelRetentionCut returns how many leading segments a retention pass
// must delete, by the rules in retention.go: below the log start offset,
// older than retention.ms (by the segment's largest batch timestamp), or
// while the rest is still at least retention.bytes; the active segment
// only when it is not empty; never a segment that reaches above the high
// watermark.
func modelRetentionCut(l *Log, batches []modelBatch, cfg Config, nowMs, lso, hw, leo int64) int {
	segs := *l.segments.Load()
	var total int64
	for _, s := range segs {
		total += s.size.Load()
	}
	n := 0
	for ; n < len(segs); n++ {
		s := segs[n]
		active := n == len(segs)-1
		next := leo
		if !active {
			next = segs[n+1].baseOffset
		}
		size := s.size.Load()
		maxTs := int64(-1)
		for _, b := range batches {
			if b.base >= s.baseOffset && b.base < next {
				maxTs = max(maxTs, modelHeaderMaxTimestamp(b))
			}
		}
		expired := !active && next <= lso
		if cfg.CleanupPolicy.Delete() && size > 0 {
			expired = expired || (cfg.RetentionMs >= 0 && maxTs >= 0 && nowMs-maxTs > cfg.RetentionMs)
			expired = expired || (cfg.RetentionBytes >= 0 && total-size >= cfg.RetentionBytes)
		}
		if !expired || (active && size == 0) || next > hw {
			break
		}
		total -= size
	}
	return n
}

func modelHeaderMaxTimestamp(b modelBatch) int64 {
	h, err := record.ParseHeader(b.data)
	if err != nil {
		panic(err)
	}
	return h.MaxTimestamp
}

func (r *modelRun) opRetention() {
	m := &r.m
	if r.rng.IntN(3) == 0 {
		r.clock.advance(time.Duration(r.rng.IntN(600)) * time.Second)
	}
	if r.rng.IntN(2) == 0 {
		// Retention deletes only below the high watermark; let it catch
		// up first half the time, as replication would.
		r.log.SetHighWatermark(m.leo)
		m.hw = m.leo
	}
	before := modelSegmentBases(r.log)
	cut := modelRetentionCut(r.log, m.batches, r.cfg, r.clock.ms, m.lso, m.hw, m.leo)
	r.note("retention at %d over segments %v: expect %d deleted", r.clock.ms, before, cut)
	res, err := r.log.ApplyRetention()
	if err != nil {
		r.fatalf("retention: %v", err)
	}
	if res.SegmentsDeleted != cut {
		r.fatalf("retention deleted %d segments of %v, model %d", res.SegmentsDeleted, before, cut)
	}
	if cut == 0 {
		return
	}
	first := modelSegmentBases(r.log)[0]
	j := sort.Search(len(m.batches), func(i int) bool { return m.batches[i].base >= first })
	if j < len(m.batches) && j > 0 && m.batches[j-1].last >= first {
		r.fatalf("retention split batch %v at segment %d", m.batches[j-1], first)
	}
	m.batches = m.batches[j:]
	m.lso = max(m.lso, first)
	m.hw = max(m.hw, m.lso)
	r.checkFull()
}

func (r *modelRun) opCompact() {
	m := &r.m
	hw := m.leo
	if r.rng.IntN(3) == 0 {
		hw = m.lso + r.rng.Int64N(m.leo-m.lso+1)
	}
	r.log.SetHighWatermark(hw)
	m.hw = min(max(hw, m.lso), m.leo)
	lso := r.txn.checkLSO(r)
	segsBefore := modelSegmentBases(r.log)
	r.note("compact with hw %d and last stable offset %d over segments %v", m.hw, lso, segsBefore)
	res, err := r.log.Compact()
	if err != nil {
		r.fatalf("compact: %v", err)
	}
	bound := res.FirstDirtyOffset
	// The cleaning bound is the first uncleaned segment, never above the
	// last stable offset (so the high watermark) or into the active
	// segment.
	active := segsBefore[len(segsBefore)-1]
	if bound > max(lso, segsBefore[0]) || bound > active {
		r.fatalf("compaction bound %d above the last stable offset %d or the active segment %d", bound, lso, active)
	}
	horizon := r.clock.ms - r.cfg.DeleteRetentionMs
	rule := modelCleanRuleOf(m.batches, bound, horizon)
	removable := rule.may
	segs, err := r.parsed.dumpFiles(r.fs, r.dir)
	if err != nil {
		r.fatalf("segment files after compaction: %v", err)
	}
	got := modelFlatten(segs)
	spec := modelSurvival{ref: m.batches, required: m.leo, removable: removable, refLEO: m.leo, lowLEO: m.leo}
	if err := spec.check(got, m.leo); err != nil {
		r.fatalf("after compaction (bound %d): %v", bound, err)
	}
	// A pass cleans everything below its bound: nothing it must remove
	// is left.
	for _, b := range got {
		for _, rec := range b.records {
			if rule.must(rec) {
				r.fatalf("compaction (bound %d) kept record %d (key %q), which it should have removed", bound, rec.offset, rec.key)
			}
		}
	}
	r.note("  compacted below %d: %d -> %d batches, %d segments cleaned", bound, len(m.batches), len(got), res.SegmentsCleaned)
	r.prod.compacted(m.batches, got)
	r.txn.compacted(m.batches, got, &r.prod)
	m.batches = got
	r.checkFull()
}

// reopened checks a log reopened after a crash or kill against spec and
// makes it the model: the data that survived, and the offsets recovery
// must give it.
func (r *modelRun) reopened(spec modelSurvival, what string) {
	r.t.Helper()
	segs, err := r.parsed.dumpFiles(r.fs, r.dir)
	if err != nil {
		r.fatalf("%s: segment files: %v", what, err)
	}
	got := modelFlatten(segs)
	leo := r.log.LogEndOffset()
	if err := spec.check(got, leo); err != nil {
		r.fatalf("%s: %v", what, err)
	}
	m := &r.m
	m.batches = got
	m.leo = leo
	r.prod.truncate(leo, segs[0].base)
	r.txn.rebuilt(leo, modelSegmentBases(r.log), r.prod.markersCompacted)
	m.rp = leo
	m.lso = min(max(m.lso, segs[0].base), leo)
	m.hw = min(max(m.hw, m.lso), leo)
	r.checkQuick()
	r.checkFull()
}

func (r *modelRun) opCrash() {
	m := &r.m
	torn := r.rng.IntN(2) == 0
	r.note("crash (torn=%v) with rp %d", torn, m.rp)
	spec := modelSurvival{ref: m.batches, required: m.rp, refLEO: m.leo, lowLEO: modelSegmentBases(r.log)[0]}
	if torn {
		r.fs.CrashTorn(r.rng)
	} else {
		r.fs.Crash()
	}
	r.log = r.open(OpenOptions{RecoveryPoint: m.rp, LogStartOffset: m.lso, HighWatermark: m.hw})
	r.reopened(spec, "recovery after crash")
	if r.rng.IntN(2) == 0 {
		// Recovery must leave everything it kept durable: a second crash
		// straight after it changes nothing.
		before := append([]modelBatch(nil), m.batches...)
		r.fs.Crash()
		rp := r.rng.Int64N(m.leo + 1)
		r.note("crash again right after recovery; reopen from %d", rp)
		r.log = r.open(OpenOptions{RecoveryPoint: rp, LogStartOffset: m.lso, HighWatermark: m.hw})
		spec := modelSurvival{ref: before, required: m.leo + 1, refLEO: m.leo, lowLEO: m.leo}
		r.reopened(spec, "second recovery")
	}
}

// opKill reopens without Close and without a crash: the process died,
// the machine did not, so every write survives.
func (r *modelRun) opKill() {
	m := &r.m
	r.note("kill and reopen from %d", m.rp)
	spec := modelSurvival{ref: m.batches, required: m.leo + 1, refLEO: m.leo, lowLEO: m.leo}
	modelDropHandles(r.log)
	r.log = r.open(OpenOptions{RecoveryPoint: m.rp, LogStartOffset: m.lso, HighWatermark: m.hw})
	r.reopened(spec, "reopen after kill")
}

// modelDropHandles drops a log's file handles without flushing or writing
// anything, as a killed process does.
func modelDropHandles(l *Log) {
	l.segLock.Lock()
	l.closeFiles()
	l.segLock.Unlock()
}

func (r *modelRun) cleanReopen() {
	m := &r.m
	r.note("close and reopen clean")
	if err := r.log.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	spec := modelSurvival{ref: m.batches, required: m.leo + 1, refLEO: m.leo, lowLEO: m.leo}
	r.log = r.open(OpenOptions{Clean: true, LogStartOffset: m.lso, HighWatermark: m.hw})
	r.reopened(spec, "clean reopen")
}

func (r *modelRun) opSetConfig() {
	cfg := r.randomConfig()
	r.note("setConfig %s", modelConfigString(cfg))
	if err := r.log.SetConfig(cfg); err != nil {
		r.fatalf("setConfig: %v", err)
	}
	r.cfg = cfg
}

func (r *modelRun) opClock() {
	d := time.Duration(r.rng.IntN(120)) * time.Second
	r.note("clock +%v", d)
	r.clock.advance(d)
}

// TestModelRegressionTruncateBelowFirstSegment pins a fix found by
// TestLogModel: when compaction emptied the head of the log (it used to
// delete the first segment whole, leaving the log start offset below the
// first segment's base), TruncateTo into that emptied range panicked
// ("truncation below segment base") or set a log end offset that a restart
// moved. The truncation must leave LogStartOffset <= LogEndOffset, and the
// same offsets after a clean and an unclean reopen.
func TestModelRegressionTruncateBelowFirstSegment(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data/regression-0"
	cfg := crashConfig()
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	key := func(i int) []byte { return []byte{byte('a' + i)} }
	for range 12 { // the same two keys over and over: every segment but the last is superseded
		if _, err := l.Append(testBatch(t, 2, 300, 1, key), 0); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	segs, err := modelDumpFiles(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	batches := modelFlatten(segs)
	if len(batches) == 0 || batches[0].base < l.LogStartOffset()+2 {
		t.Fatalf("compaction left data from %v, log start %d: the test needs the head emptied", batches, l.LogStartOffset())
	}
	to := batches[0].base - 1
	if err := l.TruncateTo(to); err != nil {
		t.Fatal(err)
	}
	lso, leo := l.LogStartOffset(), l.LogEndOffset()
	if lso > leo || leo > to || l.HighWatermark() != leo {
		t.Fatalf("after truncating to %d: start %d end %d hw %d", to, lso, leo, l.HighWatermark())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true, LogStartOffset: lso})
	if l.LogStartOffset() != lso || l.LogEndOffset() != leo {
		t.Fatalf("clean reopen: start %d end %d, want %d %d", l.LogStartOffset(), l.LogEndOffset(), lso, leo)
	}
	modelDropHandles(l)
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{LogStartOffset: lso})
	defer l.Close()
	if l.LogStartOffset() != lso || l.LogEndOffset() != leo {
		t.Fatalf("unclean reopen: start %d end %d, want %d %d", l.LogStartOffset(), l.LogEndOffset(), lso, leo)
	}
}

// TestModelRegressionTruncateIntoGap pins a fix found by TestLogModel:
// truncating into a gap (compaction's, or a follower's gapped append) set
// the log end offset to the truncation offset, but a reopened log finds its
// end from its data, so a restart moved the end back and would have handed
// out those offsets again. The log now ends where its data ends, before
// and after a restart.
func TestModelRegressionTruncateIntoGap(t *testing.T) {
	for _, roll := range []bool{false, true} {
		t.Run(fmt.Sprintf("gap at segment end=%v", roll), func(t *testing.T) {
			fsys := vfs.NewMem()
			dir := "/data/regression-0"
			cfg := DefaultConfig()
			l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
			follow := func(base int64) {
				t.Helper()
				opts := record.DefaultBatchOptions()
				opts.BaseOffset = base
				if _, err := l.AppendAsFollower(testBatchOpts(t, opts, 5, 10, 1, nil)); err != nil {
					t.Fatal(err)
				}
			}
			follow(0)
			if roll {
				l.mu.Lock()
				_, err := l.rollLocked(10)
				l.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
			}
			follow(10) // the leader's log has nothing at 5..9
			if err := l.TruncateTo(7); err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != 5 {
				t.Fatalf("truncating into the gap 5..9 at 7: log end offset %d, want 5", l.LogEndOffset())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTestLog(t, fsys, dir, cfg, OpenOptions{Clean: true})
			if l.LogEndOffset() != 5 {
				t.Fatalf("clean reopen: log end offset %d, want 5", l.LogEndOffset())
			}
			modelDropHandles(l)
			l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
			defer l.Close()
			if l.LogEndOffset() != 5 {
				t.Fatalf("unclean reopen: log end offset %d, want 5", l.LogEndOffset())
			}
		})
	}
}

// modelProducers is the idempotent-producer side of the model: every
// batch with a producer id below the log end offset, including those
// retention and compaction removed (the producer state keeps them), and
// the state they must leave.
//
// One thing the model does not follow: a log rebuilding its state reads
// the batches after a snapshot, and if compaction removed some of a
// producer's batches there (it keeps only each producer's last one in
// the range it cleans), the rebuilt state lists fewer of that producer's
// last five than it did. So a producer one of whose last five batches
// (then, or after a truncation) was removed by compaction is tainted: no
// longer checked, and no longer used.
type modelProducers struct {
	hist    []modelHistBatch
	tainted map[int64]bool
	// compactedAway: base offsets of producer batches compaction removed.
	compactedAway map[int64]bool
	// markersCompacted: compaction has removed a transaction marker, and
	// with it every producer-state snapshot at or below it (a rebuild
	// from one would have the marker's transaction open again, for good).
	// A rebuild since may start from the first segment, so it knows only
	// the producers with batches left in the log.
	markersCompacted bool
	active           []int64
	nextPID          int64
	// pending: the batches of the append being built.
	pending []record.Header
	// sent: the last batch each producer sent, as sent, for retries.
	sent map[int64][]byte
}

// modelHistBatch is a producer's batch in the history: its header and,
// for a transaction marker, the marker.
type modelHistBatch struct {
	record.Header
	marker *producerstate.Marker
}

// expect is the state hist (and pending) leave.
func (p *modelProducers) expect(withPending bool) *producerstate.State {
	s := producerstate.New()
	for _, h := range p.hist {
		if h.marker != nil {
			s.UpdateMarker(h.Header, *h.marker, 0)
		} else {
			s.Update(h.Header, 0)
		}
	}
	if withPending {
		for _, h := range p.pending {
			s.Update(h, 0)
		}
	}
	return s
}

// pick makes opts the next batch of n records of a producer. It reports
// whether the producer writes keys of its own, never tombstones: the even
// ones do, so that compaction never removes their batches and they stay
// checked for the whole run; the odd ones share the other batches' keys.
func (p *modelProducers) pick(r *modelRun, opts *record.BatchOptions, n int) bool {
	if len(p.active) < 3 || r.rng.IntN(200) == 0 {
		p.active = append(p.active, p.nextPID)
		p.nextPID++
	}
	pid := p.active[r.rng.IntN(len(p.active))]
	e, _ := p.expect(true).Get(pid)
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, e.Epoch, 0
	if len(e.Batches) > 0 {
		opts.BaseSequence = producerstate.LastSeq(e.Batches[len(e.Batches)-1].LastSeq, 1)
	}
	if r.rng.IntN(30) == 0 {
		opts.ProducerEpoch, opts.BaseSequence = e.Epoch+1, 0
	}
	p.pending = append(p.pending, record.Header{
		ProducerID: pid, ProducerEpoch: opts.ProducerEpoch, BaseSequence: opts.BaseSequence, LastOffsetDelta: int32(n - 1),
	})
	return pid%2 == 0
}

// appended records the batches of a successful append (data rewritten
// with offsets; orig as sent).
func (p *modelProducers) appended(data, orig []byte) {
	for pos := 0; pos < len(data); {
		h, _ := record.ParseHeader(data[pos:])
		if h.HasProducerID() {
			p.hist = append(p.hist, modelHistBatch{Header: h})
			p.sent[h.ProducerID] = orig[pos : pos+h.Size()]
		}
		pos += h.Size()
	}
}

// truncate notes a rebuild of the producer state to leo, the log's
// first segment starting at firstBase.
func (p *modelProducers) truncate(leo, firstBase int64) {
	for len(p.hist) > 0 && p.hist[len(p.hist)-1].BaseOffset >= leo {
		p.hist = p.hist[:len(p.hist)-1]
	}
	for o := range p.compactedAway {
		if o >= leo {
			delete(p.compactedAway, o)
		}
	}
	p.taint()
	if !p.markersCompacted {
		return
	}
	// The rebuild may replay from the first segment: a producer one of
	// whose batches or markers retention removed may be listed with fewer
	// batches, older epochs, or not at all.
	lastEntry, lastMarker := map[int64]int64{}, map[int64]int64{}
	for _, h := range p.hist {
		lastEntry[h.ProducerID] = h.BaseOffset
		if h.marker != nil {
			lastMarker[h.ProducerID] = h.BaseOffset
		}
	}
	for pid, e := range p.expect(false).All() {
		gone := lastEntry[pid] < firstBase
		if m, ok := lastMarker[pid]; ok && m < firstBase {
			gone = true // its coordinator epoch
		}
		for _, b := range e.Batches {
			gone = gone || b.FirstOffset < firstBase
		}
		if gone {
			p.retire(pid)
		}
	}
}

// retire stops checking and using pid.
func (p *modelProducers) retire(pid int64) {
	if !p.tainted[pid] {
		p.tainted[pid] = true
		p.active = slices.DeleteFunc(p.active, func(a int64) bool { return a == pid })
	}
}

func (p *modelProducers) clear() {
	p.hist = nil
	clear(p.compactedAway)
}

// compacted notes the producer batches compaction removed.
func (p *modelProducers) compacted(before, after []modelBatch) {
	kept := map[int64]bool{}
	for _, b := range after {
		kept[b.base] = true
	}
	for _, b := range before {
		if h, _ := record.ParseHeader(b.data); !kept[b.base] && h.HasProducerID() {
			p.compactedAway[b.base] = true
			p.markersCompacted = p.markersCompacted || h.IsControl()
		}
	}
	p.taint()
}

// taint taints the producers one of whose last five batches compaction
// removed.
func (p *modelProducers) taint() {
	for pid, e := range p.expect(false).All() {
		for _, b := range e.Batches {
			if p.compactedAway[b.FirstOffset] {
				p.retire(pid)
			}
		}
	}
}

// retry sends a producer's last batch again when the model says it is a
// duplicate, and checks the answer. It reports whether it did.
func (p *modelProducers) retry(r *modelRun) bool {
	if len(p.active) == 0 {
		return false
	}
	pid := p.active[r.rng.IntN(len(p.active))]
	sent, ok := p.sent[pid]
	if !ok || int64(len(sent)) > r.cfg.SegmentBytes {
		return false // validation refuses it before the producer state is asked
	}
	h, _ := record.ParseHeader(sent)
	e, _ := p.expect(false).Get(pid)
	var orig *producerstate.Batch
	for i, b := range e.Batches {
		if e.Epoch == h.ProducerEpoch && b.FirstSeq == h.BaseSequence && b.LastSeq == producerstate.LastSeq(h.BaseSequence, h.LastOffsetDelta) {
			orig = &e.Batches[i]
		}
	}
	if orig == nil {
		return false // truncated or lost since: it would be new again
	}
	r.note("retry producer %d's batch at %d..%d", pid, orig.FirstOffset, orig.LastOffset)
	info, err := r.log.Append(bytes.Clone(sent), r.epoch)
	if err != nil || !info.Duplicate || info.FirstOffset != orig.FirstOffset || info.LastOffset != orig.LastOffset {
		r.fatalf("retry of producer %d's batch at %d..%d: %+v, %v", pid, orig.FirstOffset, orig.LastOffset, info, err)
	}
	r.counts["retry"]++
	return true
}

// check compares the log's producer state with the model's.
func (p *modelProducers) check(r *modelRun) {
	r.t.Helper()
	got := r.log.ActiveProducers()
	want := p.expect(false).All()
	for pid := range p.tainted {
		delete(got, pid)
		delete(want, pid)
	}
	if !reflect.DeepEqual(got, want) {
		r.fatalf("producer state\n%+v\nmodel\n%+v", got, want)
	}
}

// Transactions in the model (DESIGN.md section 23).
//
// modelTxns follows the transactions of the model's transactional
// producers from what was written (a history truncated with the log, as
// modelProducers keeps its batches), never from the log's transaction
// index: for each, its first offset, its marker's, and whether it was
// aborted. From it the model expects the last stable offset, each
// producer's open transaction and the aborted transactions that
// AbortedTransactions and ReadCommitted answer, with the last stable
// offset each index entry records.
//
// What the history alone does not decide, the model allows for instead of
// guessing how the log rebuilt its state (it starts from the newest
// snapshot at or below the log end offset, whichever that is):
//
//   - compaction removes aborted transactions' batches and old markers
//     (modelCleanRuleOf). A transaction one of whose batches it removed is
//     tainted: its index entry may go (a rebuild that replays its marker
//     without its batches indexes nothing), and so it is not compared;
//     the entries whose last stable offset it set may record a later one;
//   - a truncation (or a crash) that cuts the marker of a tainted
//     transaction leaves it open in the log only if the snapshot the
//     rebuild starts from had it open: it is maybe open, and the model has
//     its producer abort it next, as a coordinator would;
//   - a decided transaction holds the last stable offset until an append
//     finds the high watermark past its marker (the producer state forgets
//     it then, and a snapshot keeps those it still lists); after a rebuild
//     the model does not know which snapshot it started from;
//   - compaction that removes a marker removes the producer-state
//     snapshots at or below it too (cleaner.go), so a later rebuild may
//     replay from the first segment: see modelProducers.markersCompacted
//     and modelTxns.rebuilt.

// modelTxnPIDBase: the transactional producers' ids start here, far from
// the idempotent ones'.
const modelTxnPIDBase = 1 << 20

// modelTxnHold says whether the log's producer state still lists a decided
// transaction as unreplicated (producerstate.State.OnHighWatermark).
type modelTxnHold int8

const (
	txnHeld        modelTxnHold = iota // listed: it holds the LSO while the HW is not past its marker
	txnReleased                        // forgotten by an append with the HW past its marker
	txnHoldUnknown                     // rebuilt since: listed or not
)

// modelTxn is one transaction of the history.
type modelTxn struct {
	pid     int64
	first   int64
	marker  int64 // -1 while open
	aborted bool
	// maybe: open in the history, and in the log maybe (see above).
	maybe bool
	hold  modelTxnHold // of a decided one
	// openAtMarker are the other transactions open when its marker was
	// written, and maybeAtMarker which of those were maybe open then.
	openAtMarker  []*modelTxn
	maybeAtMarker []bool
	// tainted: compaction removed one of its batches (or a rebuild may
	// have replayed it from the first segment); markerGone: compaction
	// removed its marker.
	tainted, markerGone bool
	// firstAlts: where the rebuilds from the first segment since it began
	// have it begin, its first batch left there (see rebuilt).
	firstAlts []int64
}

func (x *modelTxn) String() string {
	s := fmt.Sprintf("{producer %d from %d", x.pid, x.first)
	if x.marker >= 0 {
		s += fmt.Sprintf(" to %d aborted=%v hold=%d", x.marker, x.aborted, x.hold)
	} else if x.maybe {
		s += " maybe open"
	}
	if x.tainted {
		s += " tainted"
	}
	if x.markerGone {
		s += " marker compacted"
	}
	return s + "}"
}

// entryLSO is the range the last stable offset of an aborted
// transaction's index entry must be in: the first offset of the earliest
// other transaction open at its marker, or the marker's offset + 1; a
// rebuild may not count the ones compaction tainted, nor the maybe open
// ones.
func (x *modelTxn) entryLSO() (low, high int64) {
	low, high = x.marker+1, x.marker+1
	for i, o := range x.openAtMarker {
		low = min(low, o.first)
		if !x.maybeAtMarker[i] && !o.tainted {
			high = min(high, o.first)
		}
	}
	return low, high
}

// modelTxnProducer is a transactional producer of the model.
type modelTxnProducer struct {
	pid              int64
	epoch            int16 // the newest it used
	coordinatorEpoch int32
	// retired: tainted (modelProducers.tainted), so its sequence numbers
	// in the log are not known for sure; it writes no more batches.
	retired bool
}

type modelTxns struct {
	txns []*modelTxn // by first offset
	// byOffset: each batch of theirs, data or marker, by base offset.
	byOffset  map[int64]*modelTxn
	producers []*modelTxnProducer
}

func (t *modelTxns) producer(pid int64) *modelTxnProducer {
	for _, p := range t.producers {
		if p.pid == pid {
			return p
		}
	}
	panic(fmt.Sprintf("no transactional producer %d", pid))
}

// openTxn returns pid's open transaction, if any.
func (t *modelTxns) openTxn(pid int64) *modelTxn {
	for _, x := range t.txns {
		if x.pid == pid && x.marker < 0 {
			return x
		}
	}
	return nil
}

// data notes a transactional batch of pid written at base.
func (t *modelTxns) data(pid, base int64) {
	x := t.openTxn(pid)
	if x == nil {
		x = &modelTxn{pid: pid, first: base, marker: -1}
		t.txns = append(t.txns, x)
	}
	if x.maybe {
		panic(fmt.Sprintf("producer %d wrote data with its transaction in doubt", pid))
	}
	t.byOffset[base] = x
}

// marker notes pid's marker written at offset.
func (t *modelTxns) marker(pid, offset int64, commit bool) {
	x := t.openTxn(pid)
	if x == nil {
		return // it completes nothing
	}
	x.marker, x.aborted, x.hold = offset, !commit, txnHeld
	if x.maybe {
		x.hold = txnHoldUnknown // the log may have had nothing open, or another
	}
	for _, o := range t.txns {
		if o != x && o.marker < 0 {
			x.openAtMarker = append(x.openAtMarker, o)
			x.maybeAtMarker = append(x.maybeAtMarker, o.maybe)
		}
	}
	t.byOffset[offset] = x
}

// appended notes an append (the log's appendLocked) with the high
// watermark at hw: the decided transactions whose marker is below hw are
// forgotten.
func (t *modelTxns) appended(hw int64) {
	for _, x := range t.txns {
		if x.marker >= 0 && x.marker < hw {
			x.hold = txnReleased
		}
	}
}

// rebuilt notes that the log ends at end (a truncation, or what a crash
// left) and rebuilt its producer state, the log's segments now starting at
// bases.
//
// snapshotsCut: compaction has removed a marker, and with it the
// producer-state snapshots at or below it (modelProducers.markersCompacted).
func (t *modelTxns) rebuilt(end int64, bases []int64, snapshotsCut bool) {
	kept := t.txns[:0]
	for _, x := range t.txns {
		if x.first >= end {
			continue
		}
		switch {
		case x.marker >= end:
			x.marker, x.aborted, x.maybe = -1, false, x.tainted
			x.openAtMarker, x.maybeAtMarker = nil, nil
		case x.marker >= 0 && x.hold == txnReleased:
			x.hold = txnHoldUnknown
		}
		kept = append(kept, x)
	}
	clear(t.txns[len(kept):])
	t.txns = kept
	for o := range t.byOffset {
		if o >= end {
			delete(t.byOffset, o)
		}
	}
	if snapshotsCut {
		// The rebuild may replay from the first segment: a transaction
		// begins, for it, at its first batch left there (firstAlts), and
		// one with none left is not seen at all (open: maybe; decided: it
		// may hold nothing). Either way it holds nothing a reader can
		// reach below, and its index entry may differ (tainted).
		firstIn := map[*modelTxn]int64{}
		for o, x := range t.byOffset {
			if o != x.marker && o >= bases[0] {
				if f, ok := firstIn[x]; !ok || o < f {
					firstIn[x] = o
				}
			}
		}
		for _, x := range t.txns {
			if x.markerGone && x.hold == txnHeld {
				x.hold = txnHoldUnknown // the replay does not see it decided
			}
			if x.first >= bases[0] {
				continue
			}
			x.tainted = true
			if f, ok := firstIn[x]; ok {
				if !slices.Contains(x.firstAlts, f) {
					x.firstAlts = append(x.firstAlts, f)
				}
			} else if x.marker < 0 {
				x.maybe = true
			} else if x.hold == txnHeld {
				x.hold = txnHoldUnknown
			}
		}
	}
}

// clear: the log starts over empty.
func (t *modelTxns) clear() {
	t.txns = nil
	clear(t.byOffset)
}

// compacted notes the batches a compaction pass removed: it taints their
// transactions, and their producers (whose state a rebuild may no longer
// get right: a removed marker carried its epochs).
func (t *modelTxns) compacted(before, after []modelBatch, p *modelProducers) {
	kept := map[int64]bool{}
	for _, b := range after {
		kept[b.base] = true
	}
	for _, b := range before {
		if kept[b.base] {
			continue
		}
		if x := t.byOffset[b.base]; x != nil {
			x.tainted = true
			if b.base == x.marker {
				x.markerGone = true
			}
		}
		if h, _ := record.ParseHeader(b.data); h.ProducerID >= modelTxnPIDBase {
			p.tainted[h.ProducerID] = true
		}
	}
}

// prune forgets the decided transactions below the first segment: no
// entry of theirs is left, and no truncation can reopen them.
func (t *modelTxns) prune(firstBase int64) {
	gone := func(x *modelTxn) bool {
		return x.marker >= 0 && x.marker < firstBase && !x.markerGone
	}
	for o, x := range t.byOffset {
		if gone(x) {
			delete(t.byOffset, o)
		}
	}
	kept := t.txns[:0]
	for _, x := range t.txns {
		if !gone(x) {
			kept = append(kept, x)
		}
	}
	clear(t.txns[len(kept):])
	t.txns = kept
}

// expectLSO returns the last stable offset the log must have, and the
// others it may have (see above): the first offset of the earliest
// transaction open, or decided and listed with its marker not below the
// high watermark, clamped to [lso, hw]; hw when there is none.
func (t *modelTxns) expectLSO(lso, hw int64) (int64, []int64) {
	// first: the earliest held transaction's first offset; upper: the
	// earliest held one's latest beginning (a rebuild from the first
	// segment may have it begin later: firstAlts).
	first, upper := int64(math.MaxInt64), int64(math.MaxInt64)
	var maybes []*modelTxn
	for _, x := range t.txns {
		var holds, may bool
		switch {
		case x.marker < 0:
			holds, may = !x.maybe, x.maybe
		case x.marker >= hw:
			holds, may = x.hold == txnHeld, x.hold == txnHoldUnknown
		}
		if holds {
			first = min(first, x.first)
			upper = min(upper, slices.Max(append([]int64{x.first}, x.firstAlts...)))
			maybes = append(maybes, x)
		} else if may {
			maybes = append(maybes, x)
		}
	}
	clamp := func(o int64) int64 { return min(max(o, lso), hw) }
	want := hw
	if first < math.MaxInt64 {
		want = clamp(first)
	}
	// The others: any beginning of a transaction that holds or may hold,
	// up to upper, or upper itself.
	alts := []int64{clamp(upper)}
	for _, x := range maybes {
		for _, o := range append([]int64{x.first}, x.firstAlts...) {
			if o < upper {
				alts = append(alts, clamp(o))
			}
		}
	}
	return want, alts
}

// checkLSO checks the log's last stable offset, and returns it.
func (t *modelTxns) checkLSO(r *modelRun) int64 {
	r.t.Helper()
	got := r.log.LastStableOffset()
	want, alts := t.expectLSO(r.m.lso, r.m.hw)
	if got != want && !slices.Contains(alts, got) {
		r.fatalf("last stable offset %d, model %d (or one of %v); transactions %v", got, want, alts, t.txns)
	}
	return got
}

// checkAborted compares aborted transactions the log answered for
// [from, upper) with the model's.
func (t *modelTxns) checkAborted(r *modelRun, what string, got []AbortedTxn, from, upper int64) {
	r.t.Helper()
	firstBase := modelSegmentBases(r.log)[0]
	var want []*modelTxn
	for _, x := range t.txns {
		if x.aborted && !x.tainted && x.marker >= max(from, firstBase) && x.first < upper {
			want = append(want, x)
		}
	}
	slices.SortFunc(want, func(a, b *modelTxn) int { return int(a.marker - b.marker) })
	kept := got[:0:0]
	for _, e := range got {
		if x := t.byOffset[e.LastOffset]; x != nil && x.tainted && x.pid == e.ProducerID {
			continue
		}
		kept = append(kept, e)
	}
	ok := len(kept) == len(want)
	for i := 0; ok && i < len(want); i++ {
		e, x := kept[i], want[i]
		low, high := x.entryLSO()
		ok = e.ProducerID == x.pid && e.FirstOffset == x.first && e.LastOffset == x.marker &&
			e.LastStableOffset >= low && e.LastStableOffset <= high
	}
	if !ok {
		r.fatalf("%s: aborted transactions in [%d, %d) %+v (tainted ones left out), model %v", what, from, upper, kept, want)
	}
}

// check compares the log's transactions with the model's.
func (t *modelTxns) check(r *modelRun) {
	r.t.Helper()
	l, m := r.log, &r.m
	if len(t.txns) > 64 {
		t.prune(modelSegmentBases(l)[0])
	}
	t.checkLSO(r)
	producers := l.ActiveProducers()
	for _, p := range t.producers {
		got := int64(-1)
		if e, ok := producers[p.pid]; ok {
			got = e.TxnFirstOffset
		}
		want := int64(-1)
		x := t.openTxn(p.pid)
		if x != nil {
			want = x.first
		}
		ok := got == want || x != nil && (x.maybe && got == -1 || slices.Contains(x.firstAlts, got))
		if !ok {
			r.fatalf("producer %d: open transaction from %d, model %v", p.pid, got, x)
		}
	}
	got, err := l.AbortedTransactions(m.lso, m.leo)
	if err != nil {
		r.fatalf("AbortedTransactions(%d, %d): %v", m.lso, m.leo, err)
	}
	t.checkAborted(r, "AbortedTransactions", got, m.lso, m.leo)
	from := m.lso + r.rng.Int64N(m.leo-m.lso+1)
	upper := from + 1 + r.rng.Int64N(m.leo-from+1)
	if got, err = l.AbortedTransactions(from, upper); err != nil {
		r.fatalf("AbortedTransactions(%d, %d): %v", from, upper, err)
	}
	t.checkAborted(r, "AbortedTransactions", got, from, upper)
}

// checkReadCommitted is checkRead for a read_committed reader: the
// batches below the last stable offset, and the aborted transactions that
// overlap them.
func (r *modelRun) checkReadCommitted(offset int64, maxBytes int, maxOffset int64) {
	r.t.Helper()
	m := &r.m
	res, err := r.log.ReadCommitted(nil, offset, maxBytes, maxOffset, -1)
	if offset < m.lso || offset > m.leo {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("read_committed at %d outside [%d, %d]: err %v, want ErrOffsetOutOfRange", offset, m.lso, m.leo, err)
		}
		return
	}
	if err != nil {
		r.fatalf("readCommitted(%d, %d, %d): %v", offset, maxBytes, maxOffset, err)
	}
	want, alts := r.txn.expectLSO(m.lso, m.hw)
	if res.LastStableOffset != want && !slices.Contains(alts, res.LastStableOffset) {
		r.fatalf("read_committed at %d reports last stable offset %d, model %d (or one of %v)", offset, res.LastStableOffset, want, alts)
	}
	wantRecords := modelExpectRead(m.batches, modelSegmentBases(r.log), offset, maxBytes, min(maxOffset, res.LastStableOffset), m.leo)
	if !bytes.Equal(res.Records, wantRecords) {
		r.fatalf("readCommitted(%d, %d, %d) below the last stable offset %d: got %s, want %s", offset, maxBytes, maxOffset,
			res.LastStableOffset, modelDescribe(res.Records), modelDescribe(wantRecords))
	}
	if len(res.Records) == 0 {
		if res.AbortedTxns != nil {
			r.fatalf("readCommitted(%d, %d, %d) read nothing and answered aborted transactions %+v", offset, maxBytes, maxOffset, res.AbortedTxns)
		}
		return
	}
	r.txn.checkAborted(r, fmt.Sprintf("readCommitted(%d, %d, %d)", offset, maxBytes, maxOffset), res.AbortedTxns, offset, res.LastOffset+1)
}

// opTxn is one step of a transactional producer: a batch in its
// transaction (opening one if none is open), a marker, or a produce the
// log must refuse. A transaction maybe open (see above) is aborted first.
func (r *modelRun) opTxn() {
	t := &r.txn
	for _, x := range t.txns {
		if x.marker < 0 && x.maybe {
			r.counts["txn resolve"]++
			r.txnMarker(t.producer(x.pid), false, false)
			return
		}
	}
	var live []*modelTxnProducer
	for _, p := range t.producers {
		if !p.retired {
			live = append(live, p)
		}
	}
	if len(live) < 2 || r.rng.IntN(100) == 0 {
		p := &modelTxnProducer{pid: modelTxnPIDBase + int64(len(t.producers))}
		t.producers = append(t.producers, p)
		live = append(live, p)
	}
	p := live[r.rng.IntN(len(live))]
	x := t.openTxn(p.pid)
	tainted := r.prod.tainted[p.pid]
	switch n := r.rng.IntN(16); {
	case tainted && x == nil:
		r.note("retire transactional producer %d", p.pid)
		p.retired = true
	case x != nil && !tainted && n == 0:
		r.txnRefused(p)
	case x == nil && n < 2:
		r.counts["txn marker for none"]++
		r.txnMarker(p, n == 0, false)
	case x == nil || (!tainted && n < 9):
		r.counts["txn data"]++
		r.txnData(p)
	default:
		commit := n < 12
		if commit {
			r.counts["txn commit"]++
		} else {
			r.counts["txn abort"]++
		}
		r.txnMarker(p, commit, !tainted && n%4 == 0)
	}
}

// txnData appends a batch of p's transaction: 1-5 records under keys of
// its own (never superseded by others: compaction removes them only when
// the transaction is aborted).
func (r *modelRun) txnData(p *modelTxnProducer) {
	m := &r.m
	opts := record.DefaultBatchOptions()
	opts.Codec = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}[r.rng.IntN(5)]
	opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, p.pid, p.epoch, 0
	if e, ok := r.prod.expect(false).Get(p.pid); ok {
		opts.ProducerEpoch = e.Epoch
		if len(e.Batches) > 0 {
			opts.BaseSequence = producerstate.LastSeq(e.Batches[len(e.Batches)-1].LastSeq, 1)
		}
	}
	p.epoch = max(p.epoch, opts.ProducerEpoch)
	b := record.NewBuilder(opts)
	n := 1 + r.rng.IntN(5)
	for i := range n {
		value := make([]byte, min(r.modelValueSize(), 500))
		for j := range value {
			value[j] = byte('a' + (i+j)%5)
		}
		b.Add([]byte(fmt.Sprintf("t%d-%d-%d", p.pid, opts.ProducerEpoch, opts.BaseSequence+int32(i))), value, nil, r.clock.ms-int64(r.rng.IntN(20_000)))
	}
	data, err := b.Build()
	if err != nil {
		r.fatalf("build: %v", err)
	}
	r.note("transactional batch of producer %d (epoch %d, sequence %d, %d records) at %d", p.pid, opts.ProducerEpoch, opts.BaseSequence, n, m.leo)
	orig := bytes.Clone(data)
	info, err := r.log.Append(data, r.epoch)
	if err != nil {
		r.fatalf("transactional append: %v", err)
	}
	got, err := r.parsed.parse(data)
	if err != nil || got.base != m.leo || info.FirstOffset != m.leo || info.LastOffset != got.last || len(got.records) != n {
		r.fatalf("transactional append at %d: %+v, %v (%v)", m.leo, info, got, err)
	}
	m.batches = append(m.batches, got)
	m.leo = got.last + 1
	r.prod.appended(data, orig)
	r.txn.data(p.pid, got.base)
	r.txn.appended(m.hw)
}

// txnMarker writes a marker for p as the leader; with bump it carries a
// new producer epoch (Transactions V2, StrictEpoch). It must be written
// as record.EndTxnMarkerBatch makes it, at the log end offset.
func (r *modelRun) txnMarker(p *modelTxnProducer, commit, bump bool) {
	m := &r.m
	epoch, coordinatorEpoch := p.epoch, p.coordinatorEpoch
	if e, ok := r.prod.expect(false).Get(p.pid); ok {
		epoch, coordinatorEpoch = max(epoch, e.Epoch), max(coordinatorEpoch, e.CoordinatorEpoch)
	}
	if bump {
		epoch++
	}
	if r.rng.IntN(8) == 0 {
		coordinatorEpoch++
	}
	p.epoch, p.coordinatorEpoch = epoch, coordinatorEpoch
	want, err := record.EndTxnMarkerBatch(p.pid, epoch, coordinatorEpoch, commit, r.clock.ms)
	if err != nil {
		r.fatalf("marker: %v", err)
	}
	record.SetBaseOffset(want, m.leo)
	record.SetPartitionLeaderEpoch(want, r.epoch)
	if r.cfg.LogAppendTime {
		record.SetLogAppendTime(want, r.clock.ms)
	}
	r.note("marker (commit=%v) of producer %d (epoch %d%s, coordinator epoch %d) at %d", commit, p.pid, epoch,
		map[bool]string{true: " bumped", false: ""}[bump], coordinatorEpoch, m.leo)
	info, err := r.log.AppendTxnMarker(TxnMarker{ProducerID: p.pid, ProducerEpoch: epoch, CoordinatorEpoch: coordinatorEpoch,
		Commit: commit, StrictEpoch: bump}, r.epoch)
	if err != nil {
		r.fatalf("marker: %v", err)
	}
	if info.FirstOffset != m.leo || info.LastOffset != m.leo || info.NumBatches != 1 {
		r.fatalf("marker at %d: %+v", m.leo, info)
	}
	b, err := r.parsed.parse(want)
	if err != nil {
		r.fatalf("marker: %v", err)
	}
	h, _ := record.ParseHeader(want)
	m.batches = append(m.batches, b)
	m.leo++
	r.prod.hist = append(r.prod.hist, modelHistBatch{Header: h, marker: &producerstate.Marker{Commit: commit, CoordinatorEpoch: coordinatorEpoch}})
	r.txn.marker(p.pid, b.base, commit)
	r.txn.appended(m.hw)
}

// txnRefused sends, for p (its transaction open, its state known), what
// the log must refuse, writing nothing: a non-transactional batch inside
// the transaction, a marker from an older or (strict) the same producer
// epoch or from an older coordinator epoch, a control batch from a client.
func (r *modelRun) txnRefused(p *modelTxnProducer) {
	e, _ := r.prod.expect(false).Get(p.pid)
	marker := TxnMarker{ProducerID: p.pid, ProducerEpoch: e.Epoch, CoordinatorEpoch: e.CoordinatorEpoch}
	var err, want error
	var what string
	switch r.rng.IntN(5) {
	case 0:
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = p.pid, e.Epoch, 0
		if len(e.Batches) > 0 {
			opts.BaseSequence = producerstate.LastSeq(e.Batches[len(e.Batches)-1].LastSeq, 1)
		}
		what, want = "a non-transactional batch in a transaction", ErrInvalidTxnState
		_, err = r.log.Append(testBatchOpts(r.t, opts, 2, 10, r.clock.ms, func(i int) []byte { return []byte(fmt.Sprintf("k%d", i)) }), r.epoch)
	case 1:
		if marker.ProducerEpoch == 0 {
			return
		}
		marker.ProducerEpoch--
		what, want = "a marker from an older producer epoch", ErrInvalidProducerEpoch
		_, err = r.log.AppendTxnMarker(marker, r.epoch)
	case 2:
		marker.StrictEpoch = true
		what, want = "a strict marker from the same producer epoch", ErrInvalidProducerEpoch
		_, err = r.log.AppendTxnMarker(marker, r.epoch)
	case 3:
		if marker.CoordinatorEpoch <= 0 {
			return
		}
		marker.CoordinatorEpoch--
		what, want = "a marker from an older coordinator epoch", ErrCoordinatorFenced
		_, err = r.log.AppendTxnMarker(marker, r.epoch)
	case 4:
		b, berr := record.EndTxnMarkerBatch(p.pid, e.Epoch, e.CoordinatorEpoch, true, r.clock.ms)
		if berr != nil {
			r.fatalf("marker: %v", berr)
		}
		what, want = "a control batch from a client", ErrInvalidBatch
		_, err = r.log.Append(b, r.epoch)
	}
	r.note("refused: %s of producer %d", what, p.pid)
	r.counts["txn refused"]++
	if !errors.Is(err, want) {
		r.fatalf("%s of producer %d: err %v, want %v", what, p.pid, err, want)
	}
}
