package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Crash tests on the strict in-memory file system (acceptance point 2 of
// the storage issue).
//
// A scripted workload drives a Manager through everything that writes:
// appends across segment rolls, flushes, checkpoints, a truncation, a new
// leader epoch, DeleteRecords and a retention pass, a compaction pass,
// transactions of two producers (committed, aborted, one across a roll and
// one left open) and a clean close. It is run once to count its mutating
// file-system operations, and then once for every crash point:
// MemFS.CrashAfter(n) makes every operation after the n-th fail, the
// workload stops at its first error, the file system loses what was not
// durable (Crash; CrashTorn, which also keeps a random torn prefix of
// unsynced appends; or nothing, when only the process died) and the data
// directory is opened again through OpenManager, which finds the
// checkpoints and the clean-shutdown marker itself. TestCrashDuringRecovery
// then also crashes that recovery, at each of its operations, for a sample
// of the crash points.
//
// The workload keeps, as it goes, the model of what the log holds after its
// completed steps (modelBatch, shared with model_test.go) and what the step
// under way may leave behind if it is cut short (modelSurvival). After
// recovery:
//
//   - everything a completed Flush (or Close) covered is there, byte for
//     byte, at the same offsets;
//   - what is there is a run of what was appended, in order, with no holes
//     but those compaction makes, and the log end offset does not pass a
//     lost batch;
//   - a compaction cut short leaves each segment old or new: no newest
//     value lost, no deleted key back;
//   - every batch read back passes record.Validate, every offset below the
//     log end offset reads the batch holding it, and the offsets keep
//     LogStartOffset <= HighWatermark <= LogEndOffset;
//   - recovery is idempotent: crashing again straight after it, and then
//     closing cleanly, cutting the power and opening again, changes
//     nothing;
//   - the transactions are what the surviving batches say (crashCheckTxns):
//     the aborted ones whose marker survived are indexed, exactly, and no
//     index entry names a marker past the log end; the last stable offset
//     and each producer's open transaction are those of the transactions
//     whose batches survived and whose marker did not.

const crashDataDir = "/data"

var crashTP = TopicPartition{Topic: "orders", Partition: 0}

func crashLogDir() string { return filepath.Join(crashDataDir, logDirName(crashTP)) }

// crashConfig: segments of a few batches, an index entry every batch or
// two, compaction and deletion both on.
func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 150
	cfg.RetentionMs = -1
	cfg.CleanupPolicy = CleanupCompact | CleanupDelete
	cfg.DeleteRetentionMs = 60_000
	return cfg
}

func crashManagerOptions(clock *fakeClock) ManagerOptions {
	return ManagerOptions{Now: clock.now, Logger: quietLogger, NoBackground: true}
}

// crashWorkload runs the script and keeps its model.
type crashWorkload struct {
	fs    *vfs.MemFS
	clock *fakeClock
	m     *Manager
	l     *Log
	epoch int32
	seq   int  // batches built so far: makes every batch different
	avoid bool // build no records for the keys appendTombstones deletes

	// The log as the completed steps left it.
	ref     []modelBatch
	leo     int64
	durable int64 // every record below it must survive a crash
	maxLSO  int64 // the highest log start offset set

	// spec is what may survive if the step under way is cut short; step
	// names it, for failure messages.
	spec modelSurvival
	step string

	// The transactional producers.
	txnA, txnB crashTxnProducer
}

// crashTxnProducer is a transactional producer of the workload, at epoch
// 0 and coordinator epoch 0 throughout.
type crashTxnProducer struct {
	id  int64
	seq int32 // its next sequence number
}

func newCrashWorkload(fs *vfs.MemFS) *crashWorkload {
	return &crashWorkload{fs: fs, clock: &fakeClock{ms: 1_700_000_000_000},
		txnA: crashTxnProducer{id: crashTxnPIDs[0]}, txnB: crashTxnProducer{id: crashTxnPIDs[1]}}
}

// crashTxnPIDs are the workload's transactional producers.
var crashTxnPIDs = [2]int64{900, 901}

// begin starts a step that leaves the log as it is if cut short.
func (w *crashWorkload) begin(step string) {
	w.step = step
	w.spec = w.hold()
}

func (w *crashWorkload) hold() modelSurvival {
	low := int64(0)
	if w.l != nil {
		low = modelSegmentBases(w.l)[0]
	}
	return modelSurvival{ref: w.ref, required: w.durable, refLEO: w.leo, lowLEO: low}
}

// run is the script. It returns the first error, which after CrashAfter is
// the injected crash.
func (w *crashWorkload) run() error {
	w.begin("open the manager")
	m, err := OpenManager(w.fs, crashDataDir, crashConfig(), crashManagerOptions(w.clock))
	if err != nil {
		return err
	}
	w.m = m
	w.begin("create the log")
	if w.l, err = m.GetOrCreateLog(crashTP, crashConfig()); err != nil {
		return err
	}
	steps := []func() error{
		// Several segments, flushed and checkpointed.
		func() error { return w.appendN(6, 1) },
		w.flush,
		w.checkpoint,
		// More, two batches in one append, flushed, then a follower's
		// truncation that removes the active segment and cuts the one
		// before it, and a new leader epoch.
		func() error { return w.appendN(3, 2) },
		w.flush,
		// The checkpointed recovery point is then above the log end
		// offset until the next checkpoint.
		w.checkpoint,
		func() error {
			bases := modelSegmentBases(w.l)
			return w.truncate(bases[len(bases)-2] + 3)
		},
		func() error { w.epoch++; return w.appendN(4, 1) },
		w.flush,
		w.checkpoint,
		// DeleteRecords into the second segment, then retention.
		func() error { return w.deleteRecords(modelSegmentBases(w.l)[1] + 1) },
		w.retention,
		// Old tombstones for two keys, then other keys, so that the
		// compaction pass below deletes those two for good.
		w.appendTombstones,
		func() error { w.avoid = true; return w.appendN(4, 1) },
		w.flush,
		w.compact,
		// Transactions, after the compaction so that it need not be
		// modelled for them. A's first is aborted while B's is open, so
		// its index entry's last stable offset is B's first offset, below
		// the marker; it is flushed.
		func() error { return w.txnData(&w.txnA, 40) },
		func() error { return w.txnData(&w.txnB, 40) },
		func() error { return w.txnData(&w.txnA, 40) },
		func() error { return w.txnMarker(&w.txnA, false) },
		w.flush,
		// B commits; A's next transaction spans a roll and is aborted, its
		// entry in a later segment than its first batch, and A's marker is
		// sent again, as a coordinator retrying does: it completes nothing
		// and indexes nothing.
		func() error { return w.txnMarker(&w.txnB, true) },
		w.txnAcrossRoll,
		func() error { return w.txnMarker(&w.txnA, false) },
		// B's next transaction stays open through the rest, the clean
		// close included.
		func() error { return w.txnData(&w.txnB, 40) },
		// Appends never flushed until the clean close.
		func() error { return w.appendN(3, 1) },
		w.checkpoint,
		func() error { return w.appendN(2, 2) },
		w.close,
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// build makes the next client batch: n records over a small key space,
// every fifth a tombstone. Every fourth batch is old, its tombstones past
// delete.retention.ms at the compaction. Codecs rotate so that compaction
// rewrites compressed bodies.
func (w *crashWorkload) build() []byte {
	w.seq++
	opts := record.DefaultBatchOptions()
	opts.Codec = []record.Codec{record.CodecNone, record.CodecZstd, record.CodecNone, record.CodecLZ4, record.CodecGzip, record.CodecSnappy}[w.seq%6]
	b := record.NewBuilder(opts)
	n := 2 + w.seq%4
	for i := range n {
		k := (w.seq*7 + i*3) % 9
		if w.avoid {
			k = 2 + k%7
		}
		key := []byte(fmt.Sprintf("key-%d", k))
		ts := w.clock.ms - int64(i)
		if w.seq%4 == 0 {
			ts -= 600_000
		}
		var value []byte
		if (w.seq+i)%5 != 0 {
			// Random bytes, so that compression leaves them their size.
			rng := rand.New(rand.NewPCG(uint64(w.seq), uint64(i)))
			value = make([]byte, 40+(w.seq*37+i*11)%200)
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
		}
		b.Add(key, value, nil, ts)
	}
	data, err := b.Build()
	if err != nil {
		panic(err)
	}
	return data
}

// txnData appends a transactional batch of p: two records of size to
// 2*size random bytes, under keys of p's own.
func (w *crashWorkload) txnData(p *crashTxnProducer, size int) error {
	w.seq++
	opts := record.DefaultBatchOptions()
	opts.Transactional = true
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = p.id, 0, p.seq
	b := record.NewBuilder(opts)
	rng := rand.New(rand.NewPCG(uint64(w.seq), uint64(p.id)))
	for i := range 2 {
		value := make([]byte, size+rng.IntN(size))
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		b.Add([]byte(fmt.Sprintf("txn-%d-%d", p.id, p.seq+int32(i))), value, nil, w.clock.ms)
	}
	data, err := b.Build()
	if err != nil {
		return err
	}
	if err := w.append(data); err != nil {
		return err
	}
	p.seq += 2
	return nil
}

// txnAcrossRoll has A write a transaction whose batches span a roll (a
// small batch, then big ones until one rolls), and abort it.
func (w *crashWorkload) txnAcrossRoll() error {
	first, segs := w.leo, w.l.NumSegments()
	if err := w.txnData(&w.txnA, 40); err != nil {
		return err
	}
	for i := 0; w.l.NumSegments() == segs; i++ {
		if i == 3 {
			return fmt.Errorf("four batches from %d and no roll", first)
		}
		if err := w.txnData(&w.txnA, 250); err != nil {
			return err
		}
	}
	if bases := modelSegmentBases(w.l); bases[len(bases)-1] <= first {
		return fmt.Errorf("the transaction from %d rolled at its first batch (segments %v); the script needs it to span the roll", first, bases)
	}
	return w.txnMarker(&w.txnA, false)
}

// txnMarker writes a transaction marker for p as the leader, and expects
// it written as record.EndTxnMarkerBatch makes it, at the log end offset
// and in the current leader epoch.
func (w *crashWorkload) txnMarker(p *crashTxnProducer, commit bool) error {
	w.clock.advance(10)
	want, err := record.EndTxnMarkerBatch(p.id, 0, 0, commit, w.clock.ms)
	if err != nil {
		return err
	}
	record.SetBaseOffset(want, w.leo)
	record.SetPartitionLeaderEpoch(want, w.epoch)
	mb, err := modelParseBatch(want)
	if err != nil {
		return err
	}
	w.step = fmt.Sprintf("marker (commit=%v) for producer %d at %d", commit, p.id, w.leo)
	w.spec = w.hold()
	w.spec.ref = slices.Concat(w.ref, []modelBatch{mb})
	w.spec.refLEO = w.leo + 1
	info, err := w.l.AppendTxnMarker(TxnMarker{ProducerID: p.id, Commit: commit}, w.epoch)
	if err != nil {
		return err
	}
	if info.FirstOffset != w.leo || info.LastOffset != w.leo {
		return fmt.Errorf("%s: written at %d..%d", w.step, info.FirstOffset, info.LastOffset)
	}
	w.ref, w.leo = w.spec.ref, w.leo+1
	return nil
}

// appendTombstones appends one old batch deleting key-0 and key-1.
func (w *crashWorkload) appendTombstones() error {
	b := record.NewBuilder(record.DefaultBatchOptions())
	b.Add([]byte("key-0"), nil, nil, w.clock.ms-700_000)
	b.Add([]byte("key-1"), nil, nil, w.clock.ms-700_000)
	data, err := b.Build()
	if err != nil {
		return err
	}
	return w.append(data)
}

// appendN appends count times perAppend batches, one Append call each.
func (w *crashWorkload) appendN(count, perAppend int) error {
	for range count {
		var data []byte
		for range perAppend {
			data = append(data, w.build()...)
		}
		if err := w.append(data); err != nil {
			return err
		}
	}
	return nil
}

// append appends data, one or more client batches, in one Append call.
func (w *crashWorkload) append(data []byte) error {
	// What the log must write: the same bytes with offsets and the
	// leader epoch set.
	want := bytes.Clone(data)
	var added []modelBatch
	next := w.leo
	for pos := 0; pos < len(want); {
		h, err := record.ParseHeader(want[pos:])
		if err != nil {
			return err
		}
		b := want[pos : pos+h.Size()]
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, w.epoch)
		mb, err := modelParseBatch(b)
		if err != nil {
			return err
		}
		added = append(added, mb)
		next = mb.last + 1
		pos += h.Size()
	}
	w.step = fmt.Sprintf("append at %d", w.leo)
	w.spec = w.hold()
	w.spec.ref = slices.Concat(w.ref, added)
	w.spec.refLEO = next
	w.clock.advance(10)
	if _, err := w.l.Append(data, w.epoch); err != nil {
		return err
	}
	if !bytes.Equal(data, want) {
		return fmt.Errorf("append at %d wrote other bytes than expected", w.leo)
	}
	w.ref, w.leo = w.spec.ref, next
	return nil
}

func (w *crashWorkload) flush() error {
	w.begin("flush")
	if err := w.l.Flush(w.leo); err != nil {
		return err
	}
	w.durable = w.leo
	return nil
}

func (w *crashWorkload) checkpoint() error {
	w.begin("checkpoint")
	return w.m.Checkpoint()
}

// truncate: batches at or past offset go (a straddling one whole), and the
// log ends where the data left in the segment holding offset ends.
func (w *crashWorkload) truncate(offset int64) error {
	bases := modelSegmentBases(w.l)
	j := sort.Search(len(w.ref), func(i int) bool { return w.ref[i].last >= offset })
	k := sort.Search(len(bases), func(i int) bool { return bases[i] >= offset }) - 1
	end := bases[max(k, 0)]
	if j > 0 && w.ref[j-1].base >= end {
		end = w.ref[j-1].last + 1
	}
	w.begin(fmt.Sprintf("truncate to %d", offset))
	w.spec.required = min(w.durable, end)
	if err := w.l.TruncateTo(offset); err != nil {
		return err
	}
	if got := w.l.LogEndOffset(); got != end {
		return fmt.Errorf("truncate to %d: log end offset %d, want %d", offset, got, end)
	}
	w.ref, w.leo, w.durable = w.ref[:j], end, min(w.durable, end)
	return nil
}

func (w *crashWorkload) deleteRecords(offset int64) error {
	w.begin(fmt.Sprintf("delete records before %d", offset))
	w.l.SetHighWatermark(w.leo)
	if _, err := w.l.DeleteRecordsBefore(offset); err != nil {
		return err
	}
	w.maxLSO = max(w.maxLSO, offset)
	return nil
}

func (w *crashWorkload) retention() error {
	cfg := w.l.Config()
	cut := modelRetentionCut(w.l, w.ref, cfg, w.clock.ms, w.l.LogStartOffset(), w.l.HighWatermark(), w.leo)
	bases := modelSegmentBases(w.l)
	if cut == 0 || cut >= len(bases) {
		return fmt.Errorf("the script's retention pass would delete %d of %d segments", cut, len(bases))
	}
	drop := sort.Search(len(w.ref), func(i int) bool { return w.ref[i].base >= bases[cut] })
	w.begin("retention")
	w.spec.dropFront = drop
	res, err := w.l.ApplyRetention()
	if err != nil {
		return err
	}
	if res.SegmentsDeleted != cut {
		return fmt.Errorf("retention deleted %d segments, want %d", res.SegmentsDeleted, cut)
	}
	w.ref = w.ref[drop:]
	return nil
}

// crashCleaningBound is where a compaction pass stops: the base of the
// first segment that is not wholly below both the active segment and the
// high watermark.
func crashCleaningBound(l *Log) int64 {
	bases := modelSegmentBases(l)
	limit := min(bases[len(bases)-1], l.HighWatermark())
	bound := bases[0]
	for _, b := range bases {
		if b <= limit {
			bound = b
		}
	}
	return bound
}

func (w *crashWorkload) compact() error {
	w.l.SetHighWatermark(w.leo)
	bound := crashCleaningBound(w.l)
	horizon := w.clock.ms - w.l.Config().DeleteRetentionMs
	w.begin(fmt.Sprintf("compact below %d", bound))
	w.spec.removable = modelRemovable(w.ref, bound, horizon)
	res, err := w.l.Compact()
	if err != nil {
		return err
	}
	if res.FirstDirtyOffset != bound || res.SegmentsCleaned == 0 {
		return fmt.Errorf("compaction: %+v, want bound %d and segments cleaned", res, bound)
	}
	// The pass is done: the model becomes what it left, once that is
	// checked to be a whole compaction of what was there.
	segs, err := modelDumpFiles(w.fs, crashLogDir())
	if err != nil {
		return err
	}
	got := modelFlatten(segs)
	done := w.spec
	done.required = w.leo
	if err := done.check(got, w.l.LogEndOffset()); err != nil {
		return fmt.Errorf("after compaction: %w", err)
	}
	// The script must keep this pass worth crashing: several segments
	// rewritten, and a key deleted for good (its expired tombstone gone
	// with the values before it), which a wrong swap order would bring
	// back.
	present := map[string]bool{}
	for _, b := range got {
		for _, r := range b.records {
			present[string(r.key)] = true
		}
	}
	deleted := 0
	for _, b := range w.ref {
		for _, r := range b.records {
			if !present[string(r.key)] {
				deleted++
			}
		}
	}
	if res.SegmentsCleaned < 2 || deleted == 0 {
		return fmt.Errorf("the script's compaction cleaned %d segments and deleted %d records of removed keys; it needs more", res.SegmentsCleaned, deleted)
	}
	w.ref = got
	return nil
}

func (w *crashWorkload) close() error {
	w.begin("close the manager")
	if err := w.m.Close(); err != nil {
		return err
	}
	w.durable = w.leo
	w.step = "done"
	w.spec = w.hold()
	return nil
}

// crashState is what a reopened log shows; recovery is idempotent when a
// second recovery shows the same.
type crashState struct {
	lso, hw, leo int64
	files        []modelSegment
}

func (s crashState) equal(o crashState) bool {
	if s.lso != o.lso || s.hw != o.hw || s.leo != o.leo || len(s.files) != len(o.files) {
		return false
	}
	for i := range s.files {
		a, b := s.files[i], o.files[i]
		if a.base != b.base || a.size != b.size || len(a.batches) != len(b.batches) {
			return false
		}
		for j := range a.batches {
			if !bytes.Equal(a.batches[j].data, b.batches[j].data) {
				return false
			}
		}
	}
	return true
}

func (s crashState) String() string {
	var segs []string
	for _, f := range s.files {
		segs = append(segs, fmt.Sprintf("%d:%dB/%d", f.base, f.size, len(f.batches)))
	}
	return fmt.Sprintf("lso=%d hw=%d leo=%d segments [%s]", s.lso, s.hw, s.leo, strings.Join(segs, " "))
}

// crashReopen opens the data directory and checks the log against spec
// (nil spec: only the invariants and the reads). It returns the manager,
// left open, and what the log shows.
func crashReopen(w *crashWorkload, spec *modelSurvival, rng *rand.Rand) (*Manager, crashState, error) {
	m, err := OpenManager(w.fs, crashDataDir, crashConfig(), crashManagerOptions(w.clock))
	if err != nil {
		return nil, crashState{}, fmt.Errorf("open manager: %w", err)
	}
	l, ok := m.Log(crashTP)
	if !ok {
		// The log directory never became durable: nothing may have been
		// required of it.
		if spec != nil {
			if err := spec.check(nil, spec.lowLEO); err != nil {
				return m, crashState{}, fmt.Errorf("log gone: %w", err)
			}
		}
		return m, crashState{leo: -1}, nil
	}
	segs, err := modelDumpFiles(w.fs, crashLogDir())
	if err != nil {
		return m, crashState{}, fmt.Errorf("segment files: %w", err)
	}
	if len(segs) == 0 {
		return m, crashState{}, errors.New("an open log without segment files")
	}
	st := crashState{lso: l.LogStartOffset(), hw: l.HighWatermark(), leo: l.LogEndOffset(), files: segs}
	got := modelFlatten(segs)
	if spec != nil {
		if err := spec.check(got, st.leo); err != nil {
			return m, st, err
		}
	}
	if !(st.lso <= st.hw && st.hw <= st.leo) || l.RecoveryPoint() != st.leo {
		return m, st, fmt.Errorf("offsets after recovery: %v, recovery point %d", st, l.RecoveryPoint())
	}
	if st.lso < segs[0].base || st.lso > max(w.maxLSO, segs[0].base) {
		return m, st, fmt.Errorf("log start offset %d: first segment %d, highest start set %d", st.lso, segs[0].base, w.maxLSO)
	}
	if err := modelCheckAllReads(l, got, rng, true); err != nil {
		return m, st, err
	}
	if err := modelCheckEpochs(l, got); err != nil {
		return m, st, err
	}
	for _, ts := range []int64{0, w.clock.ms - 700_000, w.clock.ms - 5, w.clock.ms + 1} {
		o, gotTs, found, err := l.OffsetForTimestamp(ts)
		wo, wts, wfound := modelExpectOffsetForTimestamp(got, st.lso, ts)
		if err != nil || o != wo || gotTs != wts || found != wfound {
			return m, st, fmt.Errorf("offsetForTimestamp(%d) = (%d, %d, %v, %v), want (%d, %d, %v)", ts, o, gotTs, found, err, wo, wts, wfound)
		}
	}
	if err := crashCheckTxns(w.fs, l, got); err != nil {
		return m, st, err
	}
	return m, st, nil
}

// crashCheckTxns checks a recovered log's transactions against its
// surviving batches (DESIGN.md section 23), read by crashTxnModel and not
// through the transaction index:
//
//   - AbortedTransactions over the whole log answers exactly the aborted
//     transactions whose marker survived, each with its first offset, its
//     marker's and the last stable offset of its index entry;
//   - with the high watermark at the log end offset, LastStableOffset is
//     the first offset of the earliest transaction left open (clamped to
//     the log start offset), or the log end offset;
//   - each workload producer's open transaction in the producer state is
//     the one the batches leave open;
//   - the .txnindex files hold exactly those entries, each in the segment
//     holding its marker: none names a marker at or past the log end
//     offset, and none is left without its segment.
//
// The high watermark is put back afterwards, so that what the log shows is
// as recovery left it.
func crashCheckTxns(fsys vfs.FS, l *Log, batches []modelBatch) error {
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	open, aborted, err := crashTxnModel(batches, leo)
	if err != nil {
		return err
	}
	got, err := l.AbortedTransactions(start, leo)
	var want []AbortedTxn
	for _, a := range aborted {
		if a.LastOffset >= start {
			want = append(want, a)
		}
	}
	if err != nil || !slices.Equal(got, want) {
		return fmt.Errorf("AbortedTransactions(%d, %d) = %+v (%v), want %+v", start, leo, got, err, want)
	}
	hw := l.HighWatermark()
	l.SetHighWatermark(leo)
	lso := l.LastStableOffset()
	l.SetHighWatermark(hw)
	wantLSO := leo
	for _, first := range open {
		wantLSO = min(wantLSO, max(first, start))
	}
	if lso != wantLSO {
		return fmt.Errorf("last stable offset %d with the high watermark at the log end offset %d, want %d (open transactions %v)", lso, leo, wantLSO, open)
	}
	producers := l.ActiveProducers()
	for _, pid := range crashTxnPIDs {
		gotFirst, wantFirst := int64(-1), int64(-1)
		if e, ok := producers[pid]; ok {
			gotFirst = e.TxnFirstOffset
		}
		if f, ok := open[pid]; ok {
			wantFirst = f
		}
		if gotFirst != wantFirst {
			return fmt.Errorf("producer %d: open transaction from %d in the producer state, want %d", pid, gotFirst, wantFirst)
		}
	}
	// The files, read directly.
	bases := modelSegmentBases(l)
	var onDisk []AbortedTxn
	names, err := fsys.List(crashLogDir())
	if err != nil {
		return err
	}
	for _, n := range names {
		base, ok := parseSegmentName(n, ".txnindex")
		if !ok {
			continue
		}
		i, found := slices.BinarySearch(bases, base)
		if !found {
			return fmt.Errorf("%s: a transaction index without its segment (segments %v)", n, bases)
		}
		end := leo
		if i+1 < len(bases) {
			end = bases[i+1]
		}
		b, err := readWhole(fsys, filepath.Join(crashLogDir(), n))
		if err != nil {
			return err
		}
		// 34-byte entries (txnindex.go): version, producer id, first
		// offset, last offset, last stable offset. Whole entries only: a
		// torn one at the end is not one.
		for ; len(b) >= 34; b = b[34:] {
			e := AbortedTxn{
				ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
				FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
				LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
				LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
			}
			if e.LastOffset < base || e.LastOffset >= end {
				return fmt.Errorf("%s: entry %+v outside its segment [%d, %d) (log end offset %d)", n, e, base, end, leo)
			}
			onDisk = append(onDisk, e)
		}
	}
	if !slices.Equal(onDisk, aborted) {
		return fmt.Errorf("transaction index files hold %+v, want %+v", onDisk, aborted)
	}
	return nil
}

// crashTxnModel reads the transactions off the batches below leo, by the
// rules of DESIGN.md section 23: a producer's transactional data batch
// opens a transaction unless one is open; a marker completes the open
// one, if any; an aborted one is indexed with, as its last stable offset,
// the first offset of the earliest other transaction open below the
// marker, or the marker's offset + 1. It returns the transactions left
// open (first offset by producer) and the aborted ones, in marker order.
// The marker's type is read from its control record's key by hand.
func crashTxnModel(batches []modelBatch, leo int64) (map[int64]int64, []AbortedTxn, error) {
	open := map[int64]int64{}
	var aborted []AbortedTxn
	for _, b := range batches {
		if b.base >= leo {
			break
		}
		h, err := record.ParseHeader(b.data)
		if err != nil {
			return nil, nil, err
		}
		if !h.HasProducerID() || !h.IsTransactional() {
			continue
		}
		pid := h.ProducerID
		if !h.IsControl() {
			if _, ok := open[pid]; !ok {
				open[pid] = b.base
			}
			continue
		}
		if len(b.records) != 1 || len(b.records[0].key) != 4 {
			return nil, nil, fmt.Errorf("control batch %v: not a transaction marker", b)
		}
		first, ok := open[pid]
		if !ok {
			continue
		}
		delete(open, pid)
		if binary.BigEndian.Uint16(b.records[0].key[2:]) != 0 {
			continue // committed
		}
		lso := b.base + 1
		for _, f := range open {
			if f < b.base {
				lso = min(lso, f)
			}
		}
		aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.base, LastStableOffset: lso})
	}
	return open, aborted, nil
}

// crashCheck recovers after a crash and checks the result, then that a
// second crash straight after recovery, and a clean close followed by a
// power cut, change nothing.
func crashCheck(w *crashWorkload, rng *rand.Rand) error {
	spec := w.spec
	_, first, err := crashReopen(w, &spec, rng)
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	w.fs.Crash() // the first manager is abandoned with the crash
	m, second, err := crashReopen(w, nil, rng)
	if err != nil {
		return fmt.Errorf("second recovery: %w", err)
	}
	if !second.equal(first) {
		return fmt.Errorf("second recovery differs:\n first  %v\n second %v", first, second)
	}
	if err := m.Close(); err != nil {
		return fmt.Errorf("clean close after recovery: %w", err)
	}
	// A clean close leaves everything durable.
	w.fs.Crash()
	m, third, err := crashReopen(w, nil, rng)
	if err != nil {
		return fmt.Errorf("clean restart: %w", err)
	}
	defer m.Close()
	if !m.CleanStart {
		return errors.New("no clean start after a clean close")
	}
	if !third.equal(first) {
		return fmt.Errorf("clean restart differs:\n recovered %v\n restarted %v", first, third)
	}
	return nil
}

// crashMode is how a crash point ends the workload.
type crashMode int

const (
	crashPower crashMode = iota // MemFS.Crash: only what was synced survives
	crashTorn                   // MemFS.CrashTorn: plus torn unsynced appends
	crashKill                   // the process dies, the machine does not: every write survives
)

// crashEveryBoundary runs the workload once to count its mutating
// operations and then crashes it after each of them in turn.
func crashEveryBoundary(t *testing.T, mode crashMode) {
	count := newCrashWorkload(vfs.NewMem())
	if err := count.run(); err != nil {
		t.Fatalf("the workload without a crash: %v", err)
	}
	total := count.fs.MutatingOps()
	if _, _, err := crashReopen(count, &count.spec, rand.New(rand.NewPCG(0, 0))); err != nil {
		t.Fatalf("the workload without a crash, reopened: %v", err)
	}
	open, aborted, err := crashTxnModel(count.ref, count.leo)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d mutating operations, %d batches, log end offset %d, segments %v, open transactions %v, aborted %+v",
		total, len(count.ref), count.leo, modelSegmentBases(count.l), open, aborted)
	for n := range total + 1 {
		w := newCrashWorkload(vfs.NewMem())
		w.fs.CrashAfter(n)
		err := w.run()
		if (err == nil) != (n >= total) {
			t.Fatalf("crash after %d of %d operations: the workload ended with %v", n, total, err)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		switch mode {
		case crashPower:
			w.fs.Crash()
		case crashTorn:
			w.fs.CrashTorn(rng)
		case crashKill:
			// The dead process's handles stay open and are never used;
			// the file system works on.
			w.fs.CrashAfter(1 << 62)
		}
		if err := crashCheck(w, rng); err != nil {
			t.Fatalf("crash after %d of %d operations, during %q: %v", n, total, w.step, err)
		}
	}
}

// TestCrashAtEveryBoundary crashes the workload after every one of its
// mutating file-system operations and checks what recovery makes of it.
func TestCrashAtEveryBoundary(t *testing.T) {
	t.Parallel()
	crashEveryBoundary(t, crashPower)
}

// TestCrashAtEveryBoundaryTorn is the same with torn writes: a random part
// of every unsynced append survives, its last bytes possibly garbled.
func TestCrashAtEveryBoundaryTorn(t *testing.T) {
	t.Parallel()
	crashEveryBoundary(t, crashTorn)
}

// TestCrashAtEveryBoundaryKill is the same with the process killed at each
// point instead of the power cut: writes that were not synced survive, the
// common case after a crash of the broker alone.
func TestCrashAtEveryBoundaryKill(t *testing.T) {
	t.Parallel()
	crashEveryBoundary(t, crashKill)
}

// TestCrashBetweenCheckpointAndCleanShutdownMarker: the manager closed
// every log and wrote its checkpoints, and the power went before the
// clean-shutdown marker was written. The next start is unclean, recovers
// from the checkpointed recovery points (the log end offsets, since the
// close flushed everything) and loses nothing.
func TestCrashBetweenCheckpointAndCleanShutdownMarker(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			w := newCrashWorkload(vfs.NewMem())
			marker := filepath.Join(crashDataDir, CleanShutdownFile)
			w.fs.SetHook(func(op vfs.Op, path string) error {
				if op == vfs.OpCreate && strings.HasPrefix(path, marker) {
					return vfs.ErrCrashed
				}
				return nil
			})
			err := w.run()
			if !errors.Is(err, vfs.ErrCrashed) || w.step != "close the manager" {
				t.Fatalf("workload stopped in %q with %v; want the marker write to fail", w.step, err)
			}
			w.fs.SetHook(nil)
			rps, err := checkpoint.ReadOffsets(w.fs, filepath.Join(crashDataDir, RecoveryPointCheckpoint))
			if err != nil || rps[crashTP] != w.leo {
				t.Fatalf("recovery-point checkpoint %v (%v), want %d for %v", rps, err, w.leo, crashTP)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			if torn {
				w.fs.CrashTorn(rng)
			} else {
				w.fs.Crash()
			}
			if _, err := w.fs.Stat(marker); !vfs.IsNotExist(err) {
				t.Fatalf("clean-shutdown marker present: %v", err)
			}
			// Close flushed everything: all of it must be there.
			w.spec.required = w.leo
			m, _, err := crashReopen(w, &w.spec, rng)
			if err != nil {
				t.Fatal(err)
			}
			if m.CleanStart {
				t.Fatal("a start without the marker was taken for clean")
			}
			l, _ := m.Log(crashTP)
			if l.LogEndOffset() != w.leo {
				t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), w.leo)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if err := crashCheck(w, rng); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCrashDuringRecovery crashes the recovery itself, at every operation
// of it, for a sample of crash points of the workload (among them every
// step that renames or deletes segments), and checks that recovering again
// gives what an uninterrupted recovery must.
func TestCrashDuringRecovery(t *testing.T) {
	t.Parallel()
	count := newCrashWorkload(vfs.NewMem())
	if err := count.run(); err != nil {
		t.Fatal(err)
	}
	total := count.fs.MutatingOps()
	runs := 0
	for n := int64(3); n <= total; n += 29 {
		// The recovery of this crash, uninterrupted, to count its operations.
		setup := func() *crashWorkload {
			w := newCrashWorkload(vfs.NewMem())
			w.fs.CrashAfter(n)
			w.run()
			w.fs.CrashTorn(rand.New(rand.NewPCG(uint64(n), 2)))
			return w
		}
		w := setup()
		before := w.fs.MutatingOps()
		m, _, err := crashReopen(w, &w.spec, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatalf("crash after %d during %q: %v", n, w.step, err)
		}
		recoveryOps := w.fs.MutatingOps() - before
		m.Close()
		for k := range recoveryOps {
			w := setup()
			w.fs.CrashAfter(k)
			if m, err := OpenManager(w.fs, crashDataDir, crashConfig(), crashManagerOptions(w.clock)); err == nil {
				// Recovery may get through before the crash point (the
				// operations counted above include the clean close).
				m.Close()
			}
			w.fs.Crash()
			rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
			m, _, err := crashReopen(w, &w.spec, rng)
			if err != nil {
				t.Fatalf("crash after %d (during %q), then after %d of %d recovery operations: %v", n, w.step, k, recoveryOps, err)
			}
			if err := m.Close(); err != nil {
				t.Fatalf("crash after %d, then after %d recovery operations: close: %v", n, k, err)
			}
			runs++
		}
	}
	t.Logf("%d interrupted recoveries", runs)
}

// crashAppendTwelve appends twelve three-record batches (several segments
// under crashConfig) without flushing, and returns them as appended.
func crashAppendTwelve(t *testing.T, l *Log) []modelBatch {
	t.Helper()
	var ref []modelBatch
	for i := range 12 {
		data := testBatch(t, 3, 150, int64(i), func(j int) []byte { return []byte{byte(j)} })
		if _, err := l.Append(data, 0); err != nil {
			t.Fatal(err)
		}
		b, err := modelParseBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		ref = append(ref, b)
	}
	return ref
}

// TestCrashRegressionRollSyncsOldSegment pins a fix: a segment rolled
// while the one before it still held unsynced batches could have its name
// made durable (by the index writes of the next roll) before that data.
// A crash then lost the old segment's tail but kept the new, empty segment,
// and recovery ended the log at the new segment's base: offsets the log
// claimed and did not hold.
func TestCrashRegressionRollSyncsOldSegment(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := crashConfig()
	dir := "/data/regression-0"
	l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
	ref := crashAppendTwelve(t, l)
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments; the test needs rolls", l.NumSegments())
	}
	fsys.Crash() // nothing was flushed
	l = openTestLog(t, fsys, dir, cfg, OpenOptions{})
	defer l.Close()
	segs, err := modelDumpFiles(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := modelSurvival{ref: ref, refLEO: ref[len(ref)-1].last + 1}
	if err := spec.check(modelFlatten(segs), l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := modelCheckAllReads(l, modelFlatten(segs), rand.New(rand.NewPCG(1, 2)), true); err != nil {
		t.Fatal(err)
	}
}

// TestCrashRegressionTruncateRemovesBeforeCut pins a fix: TruncateTo cut
// (and synced) the last kept segment before the removal of the later
// segments was durable, so a crash in between brought them back behind the
// shortened segment, a hole in the log. Every crash point inside
// TruncateTo must leave a prefix of the log.
func TestCrashRegressionTruncateRemovesBeforeCut(t *testing.T) {
	cfg := crashConfig()
	dir := "/data/regression-0"
	setup := func() (*vfs.MemFS, *Log, []modelBatch) {
		fsys := vfs.NewMem()
		l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
		ref := crashAppendTwelve(t, l)
		if err := l.Flush(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		return fsys, l, ref
	}
	fsys, l, _ := setup()
	bases := modelSegmentBases(l)
	if len(bases) < 4 {
		t.Fatalf("segments %v; the test needs four", bases)
	}
	to := bases[1] + 4 // removes two or more segments, cuts the second
	before := fsys.MutatingOps()
	if err := l.TruncateTo(to); err != nil {
		t.Fatal(err)
	}
	ops := fsys.MutatingOps() - before
	for k := range ops {
		fsys, l, ref := setup()
		rp := l.RecoveryPoint()
		fsys.CrashAfter(k)
		if err := l.TruncateTo(to); err == nil {
			t.Fatalf("truncate with a crash after %d of %d operations succeeded", k, ops)
		}
		fsys.Crash()
		l = openTestLog(t, fsys, dir, cfg, OpenOptions{RecoveryPoint: rp})
		segs, err := modelDumpFiles(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		spec := modelSurvival{ref: ref, required: to - 3, refLEO: rp, lowLEO: bases[0]}
		if err := spec.check(modelFlatten(segs), l.LogEndOffset()); err != nil {
			t.Fatalf("crash after %d of %d truncation operations: %v", k, ops, err)
		}
		l.Close()
	}
}

// TestCrashRegressionFailedLogLeavesNoCleanMarker pins a fix: a log that
// failed (here a refused fsync) closed without an error, so the manager
// wrote the clean-shutdown marker and the next start trusted files whose
// state nobody knew.
func TestCrashRegressionFailedLogLeavesNoCleanMarker(t *testing.T) {
	fsys := vfs.NewMem()
	clock := &fakeClock{ms: 1_700_000_000_000}
	m, err := OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreateLog(crashTP, crashConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testBatch(t, 3, 100, 1, func(i int) []byte { return []byte{byte(i)} }), 0); err != nil {
		t.Fatal(err)
	}
	// A healthy neighbour: its recovery point is still checkpointed.
	healthyTP := TopicPartition{Topic: crashTP.Topic, Partition: crashTP.Partition + 1}
	healthy, err := m.GetOrCreateLog(healthyTP, crashConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := healthy.Append(testBatch(t, 4, 100, 1, func(i int) []byte { return []byte{byte(i)} }), 0); err != nil {
		t.Fatal(err)
	}
	failingDir := filepath.Join(crashDataDir, logDirName(crashTP))
	fsys.SetHook(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") && strings.HasPrefix(path, failingDir+"/") {
			return errTest
		}
		return nil
	})
	if err := l.Flush(l.LogEndOffset()); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush with a failing fsync: %v", err)
	}
	fsys.SetHook(nil)
	if err := m.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("closing a manager with a failed log: %v, want ErrStorage", err)
	}
	if _, err := fsys.Stat(filepath.Join(crashDataDir, CleanShutdownFile)); !vfs.IsNotExist(err) {
		t.Fatalf("clean-shutdown marker written although a log failed (stat: %v)", err)
	}
	rp, err := checkpoint.ReadOffsets(fsys, filepath.Join(crashDataDir, RecoveryPointCheckpoint))
	if err != nil || rp[healthyTP] != 4 {
		t.Fatalf("recovery points %v (%v): want the healthy log's 4 kept", rp, err)
	}
	fsys.Crash()
	m, err = OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.CleanStart {
		t.Fatal("clean start after a failed log")
	}
}

// TestCrashRegressionEpochBeforeBatches pins a fix: Append wrote the
// batches before the leader-epoch checkpoint, so when the checkpoint write
// failed (the process dying there), the batches of the new epoch were in
// the segment and, once the process restarted, in the log, while the cache
// still ended with the old epoch: OffsetForLeaderEpoch then gave followers
// wrong answers. Now the epoch is recorded first.
func TestCrashRegressionEpochBeforeBatches(t *testing.T) {
	for _, follower := range []bool{false, true} {
		t.Run(fmt.Sprintf("follower=%v", follower), func(t *testing.T) {
			fsys := vfs.NewMem()
			dir := "/data/regression-0"
			cfg := crashConfig()
			l := openTestLog(t, fsys, dir, cfg, OpenOptions{})
			key := func(i int) []byte { return []byte{byte(i)} }
			if _, err := l.Append(testBatch(t, 3, 50, 1, key), 0); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			fsys.SetHook(func(op vfs.Op, path string) error {
				if strings.Contains(path, LeaderEpochCheckpointFile) {
					return vfs.ErrCrashed // the process dies here
				}
				return nil
			})
			var err error
			if follower {
				opts := record.DefaultBatchOptions()
				opts.BaseOffset, opts.PartitionLeaderEpoch = l.LogEndOffset(), 1
				_, err = l.AppendAsFollower(testBatchOpts(t, opts, 3, 50, 2, key))
			} else {
				_, err = l.Append(testBatch(t, 3, 50, 2, key), 1)
			}
			if err == nil {
				t.Fatal("append with a failing leader-epoch checkpoint succeeded")
			}
			fsys.SetHook(nil)
			modelDropHandles(l) // killed: what was written stays
			l = openTestLog(t, fsys, dir, cfg, OpenOptions{RecoveryPoint: 3})
			defer l.Close()
			segs, err := modelDumpFiles(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := modelCheckEpochs(l, modelFlatten(segs)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCrashRegressionUncleanStartSyncsLogDir pins a fix: a crash between
// the mkdir of a new log directory and the sync of its parent left a
// directory that the next start opened as a log without making its entry
// durable, so everything flushed into it was lost at the next power cut.
func TestCrashRegressionUncleanStartSyncsLogDir(t *testing.T) {
	fsys := vfs.NewMem()
	clock := &fakeClock{ms: 1_700_000_000_000}
	m, err := OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	fsys.SetHook(func(op vfs.Op, path string) error {
		if op == vfs.OpSyncDir && path == crashDataDir {
			return vfs.ErrCrashed // the process dies here
		}
		return nil
	})
	if _, err := m.GetOrCreateLog(crashTP, crashConfig()); err == nil {
		t.Fatal("creating the log with a failing directory sync succeeded")
	}
	fsys.SetHook(nil)
	// The process restarts and finds the directory.
	m, err = OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := m.Log(crashTP)
	if !ok {
		t.Fatal("the log directory left by the crash was not opened")
	}
	data := testBatch(t, 3, 50, 1, func(i int) []byte { return []byte{byte(i)} })
	if _, err := l.Append(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	fsys.Crash()
	m, err = OpenManager(fsys, crashDataDir, crashConfig(), crashManagerOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, ok = m.Log(crashTP)
	if !ok || l.LogEndOffset() != 3 {
		t.Fatalf("flushed log after a power cut: present %v", ok)
	}
}
